//! The pending block's env and fork as the engine gets them (index 0's `base`, the spec in force), and the parsing of
//! the JSON fields the engine takes.
use crate::error::EngineError;
use crate::state::quantity;
use alloy_primitives::{hex, Address, Bytes, B256, U256};
use op_revm::revm::{
    context::{BlockEnv, CfgEnv},
    context_interface::block::BlobExcessGasAndPrice,
};
use op_revm::OpSpecId;
use serde_json::Value;

/// The pending block's env, from index 0's `base`.
#[derive(Clone, Debug)]
pub struct BlockSpec {
    pub number: u64,
    pub timestamp: u64,
    pub base_fee: u64,
    pub coinbase: Address,
    pub gas_limit: u64,
    pub prev_randao: B256,
    pub parent_hash: B256,
    pub parent_beacon_root: Option<B256>,
    pub spec: OpSpecId,
    pub chain_id: u64,
}

impl BlockSpec {
    pub fn block_env(&self) -> BlockEnv {
        BlockEnv {
            number: U256::from(self.number),
            beneficiary: self.coinbase,
            timestamp: U256::from(self.timestamp),
            gas_limit: self.gas_limit,
            basefee: self.base_fee,
            difficulty: U256::ZERO,
            prevrandao: Some(self.prev_randao),
            // OP-stack L2 blocks carry no blobs: excess blob gas 0 (blob base fee 1) from Ecotone on.
            blob_excess_gas_and_price: Some(BlobExcessGasAndPrice::new_with_spec(0, self.spec.into_eth_spec())),
            ..Default::default()
        }
    }

    pub fn cfg(&self) -> CfgEnv<OpSpecId> {
        let mut cfg = CfgEnv::new_with_spec(self.spec);
        cfg.chain_id = self.chain_id;
        cfg
    }
}

pub(crate) fn hex_u64(v: &Value, what: &str) -> Result<u64, EngineError> {
    match v {
        Value::Number(n) => n.as_u64().ok_or_else(|| EngineError::new("E_INPUT", format!("{what}: not a u64"))),
        Value::String(s) => {
            let s = s.strip_prefix("0x").unwrap_or(s);
            u64::from_str_radix(if s.is_empty() { "0" } else { s }, 16).map_err(|_| EngineError::new("E_INPUT", format!("{what}: bad quantity")))
        }
        _ => Err(EngineError::new("E_INPUT", format!("{what}: missing"))),
    }
}

pub(crate) fn hex_u256(v: &Value, what: &str) -> Result<U256, EngineError> {
    quantity(v).map_err(|_| EngineError::new("E_INPUT", format!("{what}: bad quantity")))
}

/// A quantity that must fit `T` (a fee in u128, a block number in u64): a larger one is invalid input, never a panic.
pub(crate) fn hex_fit<T: TryFrom<U256>>(v: &Value, what: &str) -> Result<T, EngineError> {
    hex_u256(v, what)?.try_into().map_err(|_| EngineError::new("E_INPUT", format!("{what}: too large")))
}

pub(crate) fn parse<T: std::str::FromStr>(v: &Value, what: &str) -> Result<T, EngineError> {
    v.as_str().and_then(|s| s.parse().ok()).ok_or_else(|| EngineError::new("E_INPUT", format!("{what}: bad value")))
}

pub(crate) fn bytes_of(v: &Value, what: &str) -> Result<Bytes, EngineError> {
    let s = v.as_str().ok_or_else(|| EngineError::new("E_INPUT", format!("{what}: not hex")))?;
    hex::decode(s).map(Bytes::from).map_err(|_| EngineError::new("E_INPUT", format!("{what}: bad hex")))
}

/// The OP spec by name (`isthmus`, `jovian`, …).
pub fn spec_by_name(name: &str) -> Result<OpSpecId, EngineError> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "bedrock" => OpSpecId::BEDROCK,
        "regolith" => OpSpecId::REGOLITH,
        "canyon" => OpSpecId::CANYON,
        // Delta changed only the derivation (span batches): the EVM is Canyon's.
        "delta" => OpSpecId::CANYON,
        "ecotone" => OpSpecId::ECOTONE,
        "fjord" => OpSpecId::FJORD,
        "granite" => OpSpecId::GRANITE,
        "holocene" => OpSpecId::HOLOCENE,
        "isthmus" => OpSpecId::ISTHMUS,
        "jovian" => OpSpecId::JOVIAN,
        "karst" => OpSpecId::KARST,
        _ => return Err(EngineError::new("E_INPUT", format!("unknown OP hardfork {name:?}"))),
    })
}

/// Parses the env part of a work item.
pub fn block_spec(w: &Value) -> Result<BlockSpec, EngineError> {
    Ok(BlockSpec {
        number: hex_u64(&w["number"], "number")?,
        timestamp: hex_u64(&w["timestamp"], "timestamp")?,
        base_fee: hex_u64(&w["baseFee"], "baseFee")?,
        coinbase: parse(&w["coinbase"], "coinbase")?,
        gas_limit: hex_u64(&w["gasLimit"], "gasLimit")?,
        prev_randao: parse(&w["prevRandao"], "prevRandao")?,
        parent_hash: parse(&w["parentHash"], "parentHash")?,
        parent_beacon_root: match &w["parentBeaconRoot"] {
            Value::String(s) => Some(s.parse().map_err(|_| EngineError::new("E_INPUT", "parentBeaconRoot: bad hash"))?),
            _ => None,
        },
        spec: spec_by_name(w["spec"].as_str().unwrap_or(""))?,
        chain_id: hex_u64(&w["chainId"], "chainId")?,
    })
}

#[cfg(test)]
impl BlockSpec {
    /// The unit tests' pending block: block 2 of chain 901 under Isthmus, base fee 1, coinbase 0x…c0.
    pub(crate) fn for_tests() -> Self {
        BlockSpec {
            number: 2,
            timestamp: 1_000,
            base_fee: 1,
            coinbase: Address::with_last_byte(0xc0),
            gas_limit: 30_000_000,
            prev_randao: B256::ZERO,
            parent_hash: B256::ZERO,
            parent_beacon_root: None,
            spec: OpSpecId::ISTHMUS,
            chain_id: 901,
        }
    }
}
