//! Executing flashblocks on the open pending block (op-revm), and answering reads on a snapshot. Pure engine logic:
//! no threads, no N-API. Inputs and outputs are JSON values so the boundary stays a handful of strings.
use crate::evm::{engine_evm, EngineEvm};
use crate::receipt::{BlockReceipts, Executed};
use crate::state::{no_wait, quantity, Db, DbError, Layer, LayerAccount, Shared, Snapshot};
use alloy_consensus::Transaction as _;
use alloy_eips::eip2718::Decodable2718;
use alloy_eips::eip2930::{AccessList, AccessListItem};
use alloy_eips::{eip2935::HISTORY_STORAGE_ADDRESS, eip4788::BEACON_ROOTS_ADDRESS};
use alloy_primitives::{hex, keccak256, Address, Bytes, TxKind, B256, U256};
use op_alloy_consensus::OpTxEnvelope;
use op_revm::revm::{
    bytecode::Bytecode,
    context::{BlockEnv, CfgEnv, TxEnv},
    context_interface::{block::BlobExcessGasAndPrice, either::Either, result::ExecutionResult},
    handler::system_call::{SystemCallEvm, SYSTEM_ADDRESS},
    primitives::hardfork::SpecId,
    state::{AccountInfo, EvmState},
    inspector::{InspectEvm, Inspector},
    interpreter::{interpreter::EthInterpreter, CallInputs, CallOutcome, Interpreter},
    ExecuteCommitEvm, ExecuteEvm,
};
use op_revm::revm::handler::EvmTr;
use op_revm::revm::context_interface::{Cfg as _, ContextTr};
use op_revm::{L1BlockInfo, OpHaltReason, OpSpecId, OpTransaction};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// geth's default gas cap for eth_call / eth_estimateGas.
const RPC_GAS_CAP: u64 = 50_000_000;

/// An engine failure with a stable code for the TypeScript side.
#[derive(Debug)]
pub struct EngineError {
    pub code: &'static str,
    pub message: String,
}

impl EngineError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
}

impl From<DbError> for EngineError {
    fn from(e: DbError) -> Self {
        EngineError::new("E_NODE", e.0)
    }
}

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

/// One open pending block: its env, its flashblocks' layers (oldest first) and its receipts so far.
pub struct OpenBlock {
    pub spec: BlockSpec,
    /// The parent's layers when the parent is itself pending (newest first), else empty (parent = the cache).
    pub parent_layers: Vec<Arc<Layer>>,
    /// This block's layers, oldest first (index 0's system calls and transactions, then one per flashblock).
    pub layers: Vec<Arc<Layer>>,
    pub next_index: u64,
    pub receipts: BlockReceipts,
    /// A flashblock failed to execute: no later one is taken, and the block is never kept at its settle.
    pub failed: bool,
}

impl OpenBlock {
    pub fn new(spec: BlockSpec, parent_layers: Vec<Arc<Layer>>) -> Self {
        Self { spec, parent_layers, layers: Vec::new(), next_index: 0, receipts: BlockReceipts::default(), failed: false }
    }

    /// The block's gas used so far.
    pub fn cumulative_gas(&self) -> u64 {
        self.receipts.list.last().map_or(0, |r| r.cumulative_gas)
    }

    /// Transactions executed so far.
    pub fn tx_count(&self) -> u64 {
        self.receipts.list.len() as u64
    }

    /// Layers newest first: this block's, then its parent's.
    pub fn snapshot(&self) -> Snapshot {
        let mut layers: Vec<Arc<Layer>> = self.layers.iter().rev().cloned().collect();
        layers.extend(self.parent_layers.iter().cloned());
        Snapshot { layers, l1: std::sync::OnceLock::new() }
    }
}

fn hex_u64(v: &Value, what: &str) -> Result<u64, EngineError> {
    match v {
        Value::Number(n) => n.as_u64().ok_or_else(|| EngineError::new("E_INPUT", format!("{what}: not a u64"))),
        Value::String(s) => {
            let s = s.strip_prefix("0x").unwrap_or(s);
            u64::from_str_radix(if s.is_empty() { "0" } else { s }, 16).map_err(|_| EngineError::new("E_INPUT", format!("{what}: bad quantity")))
        }
        _ => Err(EngineError::new("E_INPUT", format!("{what}: missing"))),
    }
}

fn hex_u256(v: &Value, what: &str) -> Result<U256, EngineError> {
    quantity(v).map_err(|_| EngineError::new("E_INPUT", format!("{what}: bad quantity")))
}

fn parse<T: std::str::FromStr>(v: &Value, what: &str) -> Result<T, EngineError> {
    v.as_str().and_then(|s| s.parse().ok()).ok_or_else(|| EngineError::new("E_INPUT", format!("{what}: bad value")))
}

fn bytes_of(v: &Value, what: &str) -> Result<Bytes, EngineError> {
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

/// The EVM of a system call or a simulated call: no L1 block info given (op-revm reads it from the state when needed).
pub(crate) fn build_evm<'a>(db: Db<'a>, cfg: CfgEnv<OpSpecId>, block: BlockEnv) -> EngineEvm<Db<'a>> {
    engine_evm(db, cfg, block, L1BlockInfo::default(), ())
}

/// A decoded transaction ready for the EVM.
pub struct Prepared {
    pub hash: B256,
    pub ty: u8,
    pub from: Address,
    pub to: Option<Address>,
    pub nonce: u64,
    pub tx: Option<OpTransaction<TxEnv>>,
    pub is_deposit: bool,
    pub effective_gas_price: u128,
}

/// The signer of `hash` (libsecp256k1, as revm's ecrecover precompile uses it).
pub(crate) fn recover(sig: &alloy_primitives::Signature, hash: B256) -> Result<Address, alloy_primitives::SignatureError> {
    let mut rs = [0u8; 64];
    rs[..32].copy_from_slice(&sig.r().to_be_bytes::<32>());
    rs[32..].copy_from_slice(&sig.s().to_be_bytes::<32>());
    // EIP-2: a high s is not a valid signature of a transaction.
    if sig.normalize_s().is_some() {
        return Err(alloy_primitives::SignatureError::FromBytes("high s"));
    }
    let word = op_revm::revm::precompile::secp256k1::bitcoin_secp256k1::ecrecover(&alloy_primitives::B512::from(rs), sig.v() as u8, &hash)
        .map_err(|_| alloy_primitives::SignatureError::FromBytes("unrecoverable signature"))?;
    Ok(Address::from_word(word))
}

/// What `recover` rejects without the curve arithmetic: r and s in [1, n), s ≤ n/2 (EIP-2). A signature passing this
/// may still not recover; a sender given to `prepare` comes from a recovery of the same bytes that succeeded.
fn check_signature(sig: &alloy_primitives::Signature) -> Result<(), alloy_primitives::SignatureError> {
    const N: U256 = U256::from_be_bytes(alloy_primitives::hex!("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141"));
    if sig.r().is_zero() || sig.r() >= N || sig.s().is_zero() {
        return Err(alloy_primitives::SignatureError::FromBytes("r or s out of range"));
    }
    if sig.normalize_s().is_some() {
        return Err(alloy_primitives::SignatureError::FromBytes("high s"));
    }
    Ok(())
}

/// Decodes one EIP-2718 transaction and recovers its sender, or takes `sender` when given (recovered at ingest from
/// these same bytes by `frame::recover_all`, or the JS worker): then no ecrecover runs, but the transaction is still
/// decoded and a malformed one or an out-of-range signature is still rejected. A deposit's sender is always its own
/// `from` (a given one is ignored). Type 0x7D (post-exec) is not executed (`tx: None`), as op-reth's executor
/// short-circuits it before the EVM.
pub fn prepare(raw: &[u8], base_fee: u64, sender: Option<Address>) -> Result<Prepared, EngineError> {
    let hash = keccak256(raw);
    let mut rest = raw;
    let env = OpTxEnvelope::decode_2718(&mut rest).map_err(|e| EngineError::new("E_TX", format!("undecodable transaction {hash:#x}: {e}")))?;
    if !rest.is_empty() {
        return Err(EngineError::new("E_TX", format!("undecodable transaction {hash:#x}: {} bytes after its encoding", rest.len())));
    }
    let bad_sig = |e: alloy_primitives::SignatureError| EngineError::new("E_TX", format!("transaction {hash:#x}: bad signature ({e})"));
    // The signing hash (a keccak of the re-encoded transaction) only when the sender is not given.
    let signer = |sig: &alloy_primitives::Signature, signing_hash: &dyn Fn() -> B256| match sender {
        Some(a) => check_signature(sig).map(|()| a),
        None => recover(sig, signing_hash()),
    };
    let enveloped = Some(Bytes::copy_from_slice(raw));
    let mut b = TxEnv::default();
    let mut deposit = op_revm::transaction::deposit::DepositTransactionParts::default();
    let mut is_deposit = false;
    let ty: u8;
    let from: Address;
    match &env {
        OpTxEnvelope::Legacy(s) => {
            from = signer(s.signature(), &|| s.signature_hash()).map_err(bad_sig)?;
            let t = s.tx();
            ty = 0;
            b.gas_price = t.gas_price;
            b.chain_id = t.chain_id;
        }
        OpTxEnvelope::Eip2930(s) => {
            from = signer(s.signature(), &|| s.signature_hash()).map_err(bad_sig)?;
            let t = s.tx();
            ty = 1;
            b.gas_price = t.gas_price;
            b.chain_id = Some(t.chain_id);
            b.access_list = t.access_list.clone();
        }
        OpTxEnvelope::Eip1559(s) => {
            from = signer(s.signature(), &|| s.signature_hash()).map_err(bad_sig)?;
            let t = s.tx();
            ty = 2;
            b.gas_price = t.max_fee_per_gas;
            b.gas_priority_fee = Some(t.max_priority_fee_per_gas);
            b.chain_id = Some(t.chain_id);
            b.access_list = t.access_list.clone();
        }
        OpTxEnvelope::Eip7702(s) => {
            from = signer(s.signature(), &|| s.signature_hash()).map_err(bad_sig)?;
            let t = s.tx();
            ty = 4;
            b.gas_price = t.max_fee_per_gas;
            b.gas_priority_fee = Some(t.max_priority_fee_per_gas);
            b.chain_id = Some(t.chain_id);
            b.access_list = t.access_list.clone();
            b.authorization_list = t.authorization_list.iter().cloned().map(Either::Left).collect();
        }
        OpTxEnvelope::Deposit(d) => {
            let t = d.inner();
            from = t.from;
            ty = 0x7e;
            is_deposit = true;
            deposit.source_hash = t.source_hash;
            deposit.mint = if t.mint == 0 { None } else { Some(t.mint) };
            deposit.is_system_transaction = t.is_system_transaction;
        }
        OpTxEnvelope::PostExec(_) => {
            return Ok(Prepared { hash, ty: 0x7d, from: Address::ZERO, to: None, nonce: 0, tx: None, is_deposit: false, effective_gas_price: 0 });
        }
    }
    b.tx_type = ty;
    b.caller = from;
    b.gas_limit = env.gas_limit();
    b.kind = env.kind();
    b.value = env.value();
    b.data = env.input().clone();
    b.nonce = env.nonce();
    let to = match b.kind {
        TxKind::Call(a) => Some(a),
        TxKind::Create => None,
    };
    let effective_gas_price = if is_deposit {
        0
    } else {
        match b.gas_priority_fee {
            Some(tip) => b.gas_price.min(base_fee as u128 + tip),
            None => b.gas_price,
        }
    };
    let nonce = b.nonce;
    let tx = OpTransaction { base: b, enveloped_tx: if is_deposit { None } else { enveloped }, deposit };
    Ok(Prepared { hash, ty, from, to, nonce, tx: Some(tx), is_deposit, effective_gas_price })
}

/// Accounts a flashblock obviously touches, read from the node in one batch before it executes.
fn prefetch_list(spec: &BlockSpec, txs: &[Prepared]) -> Vec<Address> {
    let mut out = vec![
        spec.coinbase,
        // L1Block, fee vaults (sequencer, base, L1, operator).
        "0x4200000000000000000000000000000000000015".parse().unwrap(),
        "0x4200000000000000000000000000000000000011".parse().unwrap(),
        "0x4200000000000000000000000000000000000019".parse().unwrap(),
        "0x420000000000000000000000000000000000001a".parse().unwrap(),
        "0x420000000000000000000000000000000000001b".parse().unwrap(),
    ];
    for p in txs {
        out.push(p.from);
        if let Some(to) = p.to {
            out.push(to);
        }
    }
    out
}

/// The L1Block contract's slots op-revm reads for the L1 and operator fee.
fn l1_slots() -> Vec<(Address, U256)> {
    let l1: Address = "0x4200000000000000000000000000000000000015".parse().unwrap();
    (0u64..=9).map(|k| (l1, U256::from(k))).collect()
}

/// An EVM failure as an engine error: a database error is the node's (E_NODE: it could not be read), anything else
/// `code` (the transaction or the call itself).
fn evm_error<T: std::fmt::Display>(code: &'static str, what: String, e: op_revm::revm::context_interface::result::EVMError<DbError, T>) -> EngineError {
    match e {
        op_revm::revm::context_interface::result::EVMError::Database(d) => EngineError::new("E_NODE", format!("{what}: {}", d.0)),
        other => EngineError::new(code, format!("{what}: {other}")),
    }
}

/// Runs the pre-execution system calls the spec requires (EIP-4788 beacon root from Ecotone, EIP-2935 parent hash
/// from Isthmus), as op-reth does them, into `layer`.
pub(crate) fn system_calls(shared: &Shared, below: &[Arc<Layer>], spec: &BlockSpec, layer: &mut Layer) -> Result<(), EngineError> {
    if spec.number == 0 {
        return Ok(());
    }
    let mut calls: Vec<(Address, Bytes)> = Vec::new();
    if spec.spec >= OpSpecId::ECOTONE {
        if let Some(root) = spec.parent_beacon_root {
            calls.push((BEACON_ROOTS_ADDRESS, Bytes::copy_from_slice(root.as_slice())));
        }
    }
    if spec.spec >= OpSpecId::ISTHMUS {
        calls.push((HISTORY_STORAGE_ADDRESS, Bytes::copy_from_slice(spec.parent_hash.as_slice())));
    }
    for (addr, data) in calls {
        let db = Db { top: Some(&*layer), below, shared };
        let mut evm = build_evm(db, spec.cfg(), spec.block_env());
        let result = evm.system_call_one_with_caller(SYSTEM_ADDRESS, addr, data).map_err(|e| evm_error("E_EXEC", format!("system call to {addr:#x}"), e))?;
        let mut state: EvmState = evm.finalize();
        drop(evm);
        if !result.is_success() {
            // A contract that is not deployed yet answers success with no code; a failure is the chain's problem.
            return Err(EngineError::new("E_EXEC", format!("system call to {addr:#x} failed")));
        }
        state.remove(&SYSTEM_ADDRESS);
        state.remove(&spec.coinbase);
        layer.commit(state, &shared.codes);
    }
    Ok(())
}

/// Executes one flashblock's new transactions on `block` (`senders`: per transaction, its sender when recovered
/// already, see `prepare`; may be empty). Returns the new layer and the receipts; `block` is not modified (the caller
/// publishes both only when everything succeeded).
pub fn apply(shared: &Shared, block: &OpenBlock, index: u64, txs: &Txs, senders: &[Option<Address>]) -> Result<(Layer, Vec<Executed>), EngineError> {
    let spec = &block.spec;
    let prepared = prepare_all(txs, senders, spec.base_fee)?;
    shared.prefetch(&prefetch_list(spec, &prepared), &l1_slots())?;
    let below = block.snapshot().layers;
    let mut layer = Layer::default();
    if index == 0 {
        system_calls(shared, &below, spec, &mut layer)?;
    }
    let mut receipts = Vec::with_capacity(prepared.len());
    let mut cumulative = block.cumulative_gas();
    let canyon = spec.spec >= OpSpecId::CANYON;
    let regolith = spec.spec >= OpSpecId::REGOLITH;
    // One EVM for the whole flashblock: it owns the flashblock's layer, and each transaction commits into it.
    let zero_credit = (spec.spec < OpSpecId::ISTHMUS).then_some(op_revm::constants::OPERATOR_FEE_RECIPIENT);
    let db = ApplyDb { layer, below: &below, shared, zero_credit, stood_in: false, broken: None };
    let mut evm = engine_evm(db, spec.cfg(), spec.block_env(), L1BlockInfo::default(), ());
    for p in prepared {
        let base = Executed {
            hash: p.hash,
            ty: p.ty,
            status: true,
            cumulative_gas: cumulative,
            gas_used: 0,
            logs: Vec::new(),
            deposit_nonce: None,
            deposit_version: None,
            contract: None,
            effective_gas_price: p.effective_gas_price,
            from: p.from,
            to: None,
        };
        let Some(tx) = p.tx else {
            receipts.push(base);
            continue;
        };
        let nonce_before = if p.is_deposit { evm.ctx().db_ref().view().account(p.from)?.map(|a| a.nonce).unwrap_or(0) } else { p.nonce };
        let result = evm.transact_commit(tx).map_err(|e| evm_error("E_TX", format!("transaction {:#x} rejected", p.hash), e))?;
        if let Some(e) = evm.ctx().db_mut().broken.take() {
            return Err(EngineError::new("E_NODE", format!("transaction {:#x}: {}", p.hash, e.0)));
        }
        let gas_used = result.tx_gas_used();
        cumulative += gas_used;
        let success = result.is_success();
        receipts.push(Executed {
            status: success,
            cumulative_gas: cumulative,
            gas_used,
            logs: result.into_logs(),
            deposit_nonce: (p.is_deposit && regolith).then_some(nonce_before),
            deposit_version: (p.is_deposit && canyon).then_some(1),
            contract: if p.to.is_none() && success { Some(p.from.create(nonce_before)) } else { None },
            to: p.to,
            ..base
        });
    }
    let layer = std::mem::take(&mut evm.ctx().db_mut().layer);
    Ok((layer, receipts))
}

/// A flashblock's transactions as the stream carries them: EIP-2718 bytes back to back, transaction i at
/// `bytes[bounds[i]..bounds[i + 1]]`.
pub struct Txs {
    pub bytes: Vec<u8>,
    pub bounds: Vec<u32>,
}

impl Txs {
    /// Checked: `bounds` starts at 0, never decreases and ends at the bytes' length.
    pub fn new(bytes: Vec<u8>, bounds: Vec<u32>) -> Result<Self, EngineError> {
        let ok = bounds.first() == Some(&0) && bounds.windows(2).all(|w| w[0] <= w[1]) && bounds.last().map(|&e| e as usize) == Some(bytes.len());
        if !ok {
            return Err(EngineError::new("E_INPUT", format!("transaction bounds do not fit {} bytes (want 0, …, {} in order)", bytes.len(), bytes.len())));
        }
        Ok(Self { bytes, bounds })
    }

    /// From separate transactions (tests, simulations).
    pub fn of(list: &[Vec<u8>]) -> Self {
        let mut bounds = vec![0u32];
        let mut bytes = Vec::new();
        for t in list {
            bytes.extend_from_slice(t);
            bounds.push(bytes.len() as u32);
        }
        Self { bytes, bounds }
    }

    pub fn len(&self) -> usize {
        self.bounds.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> &[u8] {
        &self.bytes[self.bounds[i] as usize..self.bounds[i + 1] as usize]
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// Decodes a flashblock's transactions and recovers the senders not given in `senders` (one per transaction; an
/// empty slice: none given). Recovery is ~50 µs a transaction with libsecp256k1: when many are left to recover, the
/// work splits across the cores; decoding alone stays on this thread.
pub(crate) fn prepare_all(txs: &Txs, senders: &[Option<Address>], base_fee: u64) -> Result<Vec<Prepared>, EngineError> {
    let given = |i: usize| senders.get(i).copied().flatten();
    let n = txs.len();
    let to_recover = (0..n).filter(|&i| given(i).is_none()).count();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    if to_recover < 32 || threads < 2 {
        return txs.iter().enumerate().map(|(i, r)| prepare(r, base_fee, given(i))).collect();
    }
    let chunk = n.div_ceil(threads);
    let parts: Vec<Result<Vec<Prepared>, EngineError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .step_by(chunk)
            .map(|first| {
                let last = (first + chunk).min(n);
                scope.spawn(move || (first..last).map(|i| prepare(txs.get(i), base_fee, given(i))).collect::<Result<Vec<_>, _>>())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(EngineError::new("E_TX", "sender recovery panicked")))).collect()
    });
    let mut out = Vec::with_capacity(n);
    for p in parts {
        out.extend(p?);
    }
    Ok(out)
}

/// The database of one flashblock's execution: its own layer (owned, committed into after each transaction) above
/// the snapshot below it.
struct ApplyDb<'a> {
    layer: Layer,
    below: &'a [Arc<Layer>],
    shared: &'a Shared,
    /// Before Isthmus op-revm still credits the operator fee vault with zero after every transaction, where op-geth
    /// never touches it: a witness of such a block may lack the vault. When the node cannot give it, it is read as
    /// absent, and a transaction that leaves it anything but empty fails the apply (`broken`): the stand-in may only
    /// take a zero credit.
    zero_credit: Option<Address>,
    /// The transaction being executed read `zero_credit` as absent.
    stood_in: bool,
    broken: Option<DbError>,
}

impl<'a> ApplyDb<'a> {
    fn view(&self) -> Db<'_> {
        Db { top: Some(&self.layer), below: self.below, shared: self.shared }
    }
}

impl<'a> op_revm::revm::Database for ApplyDb<'a> {
    type Error = DbError;
    fn basic(&mut self, address: Address) -> Result<Option<AccountInfo>, DbError> {
        match self.view().account(address) {
            Err(e) if Some(address) == self.zero_credit && e.0 != crate::state::WOULD_WAIT => {
                self.stood_in = true;
                Ok(None)
            }
            other => other,
        }
    }
    fn code_by_hash(&mut self, code_hash: B256) -> Result<Bytecode, DbError> {
        self.view().code(code_hash)
    }
    fn storage(&mut self, address: Address, index: U256) -> Result<U256, DbError> {
        self.view().slot(address, index)
    }
    fn block_hash(&mut self, number: u64) -> Result<B256, DbError> {
        let mut d = self.view();
        op_revm::revm::Database::block_hash(&mut d, number)
    }
}

impl<'a> op_revm::revm::DatabaseCommit for ApplyDb<'a> {
    fn commit(&mut self, mut changes: op_revm::revm::primitives::AddressMap<op_revm::revm::state::Account>) {
        if std::mem::take(&mut self.stood_in) {
            if let Some(a) = self.zero_credit {
                // Empty as it was read: nothing to record (the node's account, whatever it is, is unchanged).
                if changes.remove(&a).is_some_and(|acc| !acc.info.is_empty()) {
                    self.broken = Some(DbError(format!("account {a:#x} is not known to the engine (the node could not give it) and the transaction changed it")));
                }
            }
        }
        self.layer.commit(changes, &self.shared.codes);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Reads

/// A read's failure: a stable code the TypeScript side maps to a JSON-RPC error (src/exec/addon-errors.ts: E_INPUT
/// invalid params, E_UNSUPPORTED method not found, E_REVERT 3 with the revert data, E_TOO_LARGE limit exceeded,
/// E_SIM_* eth_simulateV1's own codes, E_FAILED and E_NODE -32000), its message, and data for a revert.
#[derive(Debug)]
pub struct ReadError {
    pub code: &'static str,
    pub message: String,
    pub data: Option<String>,
}

impl From<EngineError> for ReadError {
    fn from(e: EngineError) -> Self {
        ReadError { code: if e.code == "E_INPUT" { "E_INPUT" } else { "E_FAILED" }, message: e.message, data: None }
    }
}
impl From<DbError> for ReadError {
    fn from(e: DbError) -> Self {
        ReadError { code: "E_NODE", message: e.0, data: None }
    }
}

/// geth-style state overrides as a layer on top of the snapshot.
/// An override's code lives in its layer's account info only (never in the shared code map, which would grow with
/// every caller's overrides).
pub(crate) fn override_layer(db: &Db, overrides: &Value) -> Result<Option<Layer>, ReadError> {
    let Some(map) = overrides.as_object() else { return Ok(None) };
    let mut layer = Layer::default();
    for (addr, o) in map {
        let a: Address = addr.parse().map_err(|_| ReadError { code: "E_INPUT", message: format!("state override: bad address {addr}"), data: None })?;
        let mut info = db.account(a)?.unwrap_or_default();
        if info.code.is_none() && info.code_hash != op_revm::revm::primitives::KECCAK_EMPTY {
            info.code = Some(db.code(info.code_hash)?);
        }
        let mut acc = LayerAccount::default();
        if let Some(v) = o.get("balance").filter(|v| !v.is_null()) {
            info.balance = hex_u256(v, "balance")?;
        }
        if let Some(v) = o.get("nonce").filter(|v| !v.is_null()) {
            info.nonce = hex_u64(v, "nonce")?;
        }
        if let Some(v) = o.get("code").filter(|v| !v.is_null()) {
            let code = bytes_of(v, "code")?;
            let bc = Bytecode::new_raw(code);
            info.code_hash = bc.hash_slow();
            info.code = Some(bc);
        }
        let whole = o.get("state").filter(|v| !v.is_null());
        let diff = o.get("stateDiff").filter(|v| !v.is_null());
        if whole.is_some() && diff.is_some() {
            return Err(ReadError { code: "E_INPUT", message: format!("state override for {addr}: both state and stateDiff"), data: None });
        }
        if let Some(s) = whole.or(diff) {
            acc.storage_reset = whole.is_some();
            for (k, v) in s.as_object().into_iter().flatten() {
                let k = U256::from_str_radix(k.trim_start_matches("0x"), 16).map_err(|_| ReadError { code: "E_INPUT", message: "state override: bad slot".into(), data: None })?;
                acc.storage.insert(k, hex_u256(v, "storage value")?);
            }
        }
        acc.info = Some(info);
        layer.accounts.insert(a, acc);
    }
    Ok(Some(layer))
}

pub(crate) fn apply_block_overrides(env: &mut BlockEnv, o: &Value) -> Result<(), ReadError> {
    let Some(m) = o.as_object() else { return Ok(()) };
    for (k, v) in m {
        if v.is_null() {
            continue;
        }
        match k.as_str() {
            "number" => env.number = hex_u256(v, "number")?,
            "time" | "timestamp" => env.timestamp = hex_u256(v, "time")?,
            "gasLimit" => env.gas_limit = hex_u64(v, "gasLimit")?,
            "feeRecipient" | "coinbase" => env.beneficiary = parse(v, "feeRecipient")?,
            "prevRandao" | "random" => env.prevrandao = Some(parse(v, "prevRandao")?),
            "baseFee" | "baseFeePerGas" => env.basefee = hex_u64(v, "baseFee")?,
            "difficulty" => env.difficulty = hex_u256(v, "difficulty")?,
            _ => {}
        }
    }
    Ok(())
}

pub(crate) struct CallSetup {
    pub(crate) tx: OpTransaction<TxEnv>,
    pub(crate) cfg: CfgEnv<OpSpecId>,
    pub(crate) block: BlockEnv,
    /// The L1 block info it runs with (see call_chain).
    pub(crate) chain: L1BlockInfo,
    /// The caller gave no gas limit: estimateGas searches up to this.
    gas_given: bool,
}

/// The L1 block info a call at `block` runs with: `l1`'s (the snapshot's, read once) when the call sees the snapshot's
/// own state at its own number, else none given (op-revm reads it from the state the call runs on).
fn call_chain(db: &Db, spec: &BlockSpec, block: &BlockEnv, l1: Option<&std::sync::OnceLock<L1BlockInfo>>) -> Result<L1BlockInfo, ReadError> {
    let Some(lock) = l1.filter(|_| block.number == U256::from(spec.number)) else { return Ok(L1BlockInfo::default()) };
    if let Some(info) = lock.get() {
        return Ok(info.clone());
    }
    let mut d = Db { top: db.top, below: db.below, shared: db.shared };
    let info = L1BlockInfo::try_fetch(&mut d, block.number, spec.spec).map_err(|e| ReadError { code: "E_FAILED", message: e.to_string(), data: None })?;
    let _ = lock.set(info.clone());
    Ok(info)
}

/// A call's setup. `l1`: the snapshot's L1 block info cell, when the call runs on the snapshot's state unchanged (no
/// state overrides).
pub(crate) fn call_setup(db: &Db, spec: &BlockSpec, req: &Value, block_overrides: &Value, l1: Option<&std::sync::OnceLock<L1BlockInfo>>) -> Result<CallSetup, ReadError> {
    let mut block = spec.block_env();
    apply_block_overrides(&mut block, block_overrides)?;
    let chain = call_chain(db, spec, &block, l1)?;
    let mut cfg = spec.cfg();
    let mut b = TxEnv {
        caller: match req.get("from").filter(|v| !v.is_null()) {
            Some(v) => parse(v, "from")?,
            None => Address::ZERO,
        },
        kind: match req.get("to").filter(|v| !v.is_null()) {
            Some(v) => TxKind::Call(parse(v, "to")?),
            None => TxKind::Create,
        },
        ..Default::default()
    };
    if let Some(v) = req.get("input").filter(|v| !v.is_null()).or_else(|| req.get("data").filter(|v| !v.is_null())) {
        b.data = bytes_of(v, "input")?;
    }
    if let Some(v) = req.get("value").filter(|v| !v.is_null()) {
        b.value = hex_u256(v, "value")?;
    }
    let gas_given = req.get("gas").is_some_and(|v| !v.is_null());
    // Without a gas value a call gets what one transaction may use: the block's gas limit within the RPC cap, and
    // from Osaka on (karst) within EIP-7825's per-transaction cap (2^24), as geth gives it. An explicit gas above that
    // cap is refused, as the chain would refuse the transaction.
    b.gas_limit = if gas_given { hex_u64(&req["gas"], "gas")? } else { block.gas_limit.min(RPC_GAS_CAP).min(cfg.tx_gas_limit_cap()) };
    b.gas_limit = b.gas_limit.min(RPC_GAS_CAP.max(block.gas_limit));
    let gas_price = req.get("gasPrice").filter(|v| !v.is_null());
    let max_fee = req.get("maxFeePerGas").filter(|v| !v.is_null());
    let tip = req.get("maxPriorityFeePerGas").filter(|v| !v.is_null());
    if let Some(v) = gas_price {
        b.gas_price = hex_u256(v, "gasPrice")?.to::<u128>();
        b.tx_type = 0;
    } else if max_fee.is_some() || tip.is_some() {
        b.tx_type = 2;
        b.gas_price = match max_fee {
            Some(v) => hex_u256(v, "maxFeePerGas")?.to::<u128>(),
            None => block.basefee as u128 + hex_u256(tip.unwrap(), "maxPriorityFeePerGas")?.to::<u128>(),
        };
        b.gas_priority_fee = match tip {
            Some(v) => Some(hex_u256(v, "maxPriorityFeePerGas")?.to::<u128>()),
            None => Some(0),
        };
    } else {
        // No fee given: a free call, as geth/op-geth answer it (no base fee check, no L1 or operator fee).
        b.tx_type = 2;
        b.gas_price = 0;
        b.gas_priority_fee = Some(0);
        cfg.disable_base_fee = true;
        cfg.disable_fee_charge = true;
    }
    if let Some(list) = req.get("accessList").filter(|v| !v.is_null()) {
        let items = list.as_array().ok_or_else(|| ReadError { code: "E_INPUT", message: "accessList: not a list".into(), data: None })?;
        let mut out = Vec::new();
        for it in items {
            let address: Address = parse(&it["address"], "accessList address")?;
            let keys = it["storageKeys"].as_array().map(|ks| ks.iter().filter_map(|k| k.as_str()?.parse().ok()).collect()).unwrap_or_default();
            out.push(AccessListItem { address, storage_keys: keys });
        }
        b.access_list = AccessList(out);
        if b.tx_type == 0 {
            b.tx_type = 1;
        }
    }
    b.nonce = match req.get("nonce").filter(|v| !v.is_null()) {
        Some(v) => hex_u64(v, "nonce")?,
        None => db.account(b.caller)?.map(|a| a.nonce).unwrap_or(0),
    };
    b.chain_id = Some(spec.chain_id);
    cfg.disable_nonce_check = true;
    cfg.disable_block_gas_limit = true;
    // eth_call lets a contract be the caller (geth skips the EIP-3607 check).
    cfg.disable_eip3607 = true;
    let tx = OpTransaction { base: b, enveloped_tx: Some(Bytes::new()), deposit: Default::default() };
    Ok(CallSetup { tx, cfg, block, chain, gas_given })
}

fn run(db: Db, spec: &BlockSpec, s: &CallSetup, gas: u64) -> Result<(ExecutionResult<OpHaltReason>, EvmState), ReadError> {
    let mut tx = s.tx.clone();
    tx.base.gas_limit = gas;
    let _ = spec;
    let mut evm = engine_evm(db, s.cfg.clone(), s.block.clone(), s.chain.clone(), ());
    match evm.transact(tx) {
        Ok(r) => Ok((r.result, r.state)),
        Err(e) => Err(ReadError { code: "E_FAILED", message: e.to_string(), data: None }),
    }
}

/// Bounds a read answered inline, on the JS thread: past its deadline (checked every 256 instructions), or at a
/// precompile call given more than [`INLINE_PRECOMPILE_GAS`] (one precompile run is not interruptible), every frame
/// halts and the read is answered on a read thread instead. It observes only; an execution within the budget is
/// exactly the one without it.
pub(crate) struct Budget {
    deadline: Instant,
    steps: u32,
    pub(crate) over: bool,
}

/// The largest gas a precompile call may get in an inline read (a precompile's run time is about its gas).
const INLINE_PRECOMPILE_GAS: u64 = 1_000_000;

impl<CTX> Inspector<CTX, EthInterpreter> for Budget {
    fn step(&mut self, interp: &mut Interpreter<EthInterpreter>, _context: &mut CTX) {
        self.steps = self.steps.wrapping_add(1);
        if !self.over && self.steps.is_multiple_of(256) && Instant::now() >= self.deadline {
            self.over = true;
        }
        if self.over {
            interp.halt_oog();
        }
    }

    fn call(&mut self, _context: &mut CTX, inputs: &mut CallInputs) -> Option<CallOutcome> {
        let low = inputs.bytecode_address.0[..18].iter().all(|b| *b == 0);
        if self.over || (low && inputs.gas_limit > INLINE_PRECOMPILE_GAS) {
            self.over = true;
            return Some(CallOutcome::new_oog(inputs.gas_limit, inputs.return_memory_offset.clone()));
        }
        None
    }
}

/// The JSON-RPC code of an inline read that ran out of its budget (never sent: the read runs again elsewhere).
const OVER_BUDGET: &str = "E_OVER_BUDGET";

fn run_budgeted(db: Db, spec: &BlockSpec, s: &CallSetup, deadline: Instant) -> Result<ExecutionResult<OpHaltReason>, ReadError> {
    let _ = spec;
    let budget = Budget { deadline, steps: 0, over: false };
    let mut evm = engine_evm(db, s.cfg.clone(), s.block.clone(), s.chain.clone(), budget);
    let out = evm.inspect_one_tx(s.tx.clone());
    if evm.0.inspector.over {
        return Err(ReadError { code: OVER_BUDGET, message: "over the inline budget".into(), data: None });
    }
    match out {
        Ok(r) => Ok(r),
        Err(e) => Err(ReadError { code: "E_FAILED", message: e.to_string(), data: None }),
    }
}

pub(crate) fn failure(r: &ExecutionResult<OpHaltReason>) -> ReadError {
    match r {
        ExecutionResult::Revert { output, .. } => {
            let data = format!("0x{}", hex::encode(output));
            let reason = decode_revert_reason(output);
            ReadError { code: "E_REVERT", message: match reason { Some(m) => format!("execution reverted: {m}"), None => "execution reverted".into() }, data: Some(data) }
        }
        ExecutionResult::Halt { reason, .. } => ReadError { code: "E_FAILED", message: halt_message(reason), data: None },
        ExecutionResult::Success { .. } => ReadError { code: "E_FAILED", message: "ok".into(), data: None },
    }
}

fn halt_message(reason: &OpHaltReason) -> String {
    let s = format!("{reason:?}");
    if s.contains("OutOfGas") {
        "out of gas".into()
    } else {
        format!("execution halted: {s}")
    }
}

/// `Error(string)` revert data as text.
fn decode_revert_reason(out: &Bytes) -> Option<String> {
    if out.len() < 68 || out[..4] != [0x08, 0xc3, 0x79, 0xa0] {
        return None;
    }
    let len = U256::from_be_slice(&out[36..68]).try_into().ok().filter(|l: &usize| 68 + *l <= out.len())?;
    String::from_utf8(out[68..68 + len].to_vec()).ok()
}

/// Answers a read inline (on the calling thread) when it can within `budget` from what is in memory: state reads and
/// eth_call only, no node read, no lock another thread holds, no longer than `budget`. None: answer it on a read
/// thread (the work done here is dropped; nothing was changed).
pub fn read_inline(shared: &Shared, spec: &BlockSpec, snap: &Snapshot, req: &Value, budget: Duration) -> Option<Result<Value, ReadError>> {
    if !matches!(req["method"].as_str(), Some("call" | "getBalance" | "getTransactionCount" | "getCode" | "getStorageAt")) {
        return None;
    }
    let deadline = Instant::now() + budget;
    let (out, waited) = no_wait(|| read_at(shared, spec, snap, req, Some(deadline)));
    match out {
        _ if waited => None,
        Err(e) if e.code == OVER_BUDGET => None,
        other => Some(other),
    }
}

/// Answers one read on `snap` (JSON request `{method, params...}`). Returns the JSON-RPC result value.
pub fn read(shared: &Shared, spec: &BlockSpec, snap: &Snapshot, req: &Value) -> Result<Value, ReadError> {
    read_at(shared, spec, snap, req, None)
}

fn read_at(shared: &Shared, spec: &BlockSpec, snap: &Snapshot, req: &Value, deadline: Option<Instant>) -> Result<Value, ReadError> {
    let method = req["method"].as_str().unwrap_or("");
    let base = Db { top: None, below: &snap.layers, shared };
    let overrides = override_layer(&base, &req["stateOverrides"])?;
    let db = || Db { top: overrides.as_ref(), below: &snap.layers, shared };
    // With state overrides the L1 block info may differ from the snapshot's: op-revm reads it then.
    let l1 = if overrides.is_none() { Some(&snap.l1) } else { None };
    match method {
        "getBalance" => {
            let a: Address = parse(&req["address"], "address")?;
            Ok(json!(format!("0x{:x}", db().account(a)?.map(|i| i.balance).unwrap_or_default())))
        }
        "getTransactionCount" => {
            let a: Address = parse(&req["address"], "address")?;
            Ok(json!(format!("0x{:x}", db().account(a)?.map(|i| i.nonce).unwrap_or(0))))
        }
        "getCode" => {
            let a: Address = parse(&req["address"], "address")?;
            let d = db();
            let code = match d.account(a)? {
                Some(info) => match info.code {
                    Some(c) if !c.is_empty() => c.original_bytes(),
                    _ => d.code(info.code_hash)?.original_bytes(),
                },
                None => Bytes::new(),
            };
            Ok(json!(format!("0x{}", hex::encode(&code))))
        }
        "getStorageAt" => {
            let a: Address = parse(&req["address"], "address")?;
            let k = hex_u256(&req["slot"], "slot")?;
            Ok(json!(format!("{:#x}", B256::from(db().slot(a, k)?))))
        }
        "call" => {
            let s = call_setup(&db(), spec, &req["tx"], &req["blockOverrides"], l1)?;
            let r = match deadline {
                Some(d) => run_budgeted(db(), spec, &s, d)?,
                None => run(db(), spec, &s, s.tx.base.gas_limit)?.0,
            };
            match &r {
                ExecutionResult::Success { output, .. } => Ok(json!(format!("0x{}", hex::encode(output.data())))),
                other => Err(failure(other)),
            }
        }
        "estimateGas" => estimate(&db, spec, &req["tx"], &req["blockOverrides"], l1),
        "simulateV1" => crate::simulate::simulate(shared, spec, snap, &req["payload"]),
        "createAccessList" => access_list(&db, spec, &req["tx"], &req["blockOverrides"], l1),
        _ => Err(ReadError { code: "E_UNSUPPORTED", message: format!("engine read {method:?} not supported"), data: None }),
    }
}

fn estimate<'a>(db: &dyn Fn() -> Db<'a>, spec: &BlockSpec, tx: &Value, block_overrides: &Value, l1: Option<&std::sync::OnceLock<L1BlockInfo>>) -> Result<Value, ReadError> {
    let s = call_setup(&db(), spec, tx, block_overrides, l1)?;
    let mut hi = s.tx.base.gas_limit;
    // With a fee, the caller's balance bounds the gas it can buy (geth does the same).
    if s.tx.base.gas_price > 0 {
        let bal = db().account(s.tx.base.caller)?.map(|a| a.balance).unwrap_or_default();
        let avail = bal.saturating_sub(s.tx.base.value) / U256::from(s.tx.base.gas_price);
        if avail < U256::from(hi) {
            hi = avail.to::<u64>();
        }
    }
    let (first, _) = run(db(), spec, &s, hi)?;
    if !first.is_success() {
        return Err(failure(&first));
    }
    let used = first.tx_gas_used();
    let refunded = first.gas().inner_refunded();
    let mut lo = used.saturating_sub(1).max(20_999);
    // geth's optimistic guess: what was used (before refunds) plus 1/63 for the call-stipend rule.
    let guess = ((used + refunded) * 64 / 63).min(hi);
    if guess > lo && guess < hi {
        let (r, _) = run(db(), spec, &s, guess)?;
        if r.is_success() {
            hi = guess;
        } else {
            lo = guess;
        }
    }
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        let (r, _) = run(db(), spec, &s, mid)?;
        if r.is_success() {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let _ = s.gas_given;
    Ok(json!(format!("0x{hi:x}")))
}

fn access_list<'a>(db: &dyn Fn() -> Db<'a>, spec: &BlockSpec, tx: &Value, block_overrides: &Value, l1: Option<&std::sync::OnceLock<L1BlockInfo>>) -> Result<Value, ReadError> {
    let mut s = call_setup(&db(), spec, tx, block_overrides, l1)?;
    let from = s.tx.base.caller;
    let to = match s.tx.base.kind {
        TxKind::Call(a) => Some(a),
        TxKind::Create => None,
    };
    let precompiles: Vec<Address> = (1u64..=0x11).map(|i| Address::from_word(B256::from(U256::from(i)))).chain(std::iter::once(Address::from_word(B256::from(U256::from(0x100u64))))).collect();
    // geth iterates until the list is stable: accessing a slot may change which slots are accessed.
    let mut list = s.tx.base.access_list.clone();
    let mut last: Option<(ExecutionResult<OpHaltReason>, AccessList)> = None;
    for _ in 0..4 {
        s.tx.base.access_list = list.clone();
        if s.tx.base.tx_type == 0 {
            s.tx.base.tx_type = 1;
        }
        let (r, state) = run(db(), spec, &s, s.tx.base.gas_limit)?;
        let mut items: Vec<AccessListItem> = Vec::new();
        let mut addrs: Vec<&Address> = state.keys().collect();
        addrs.sort();
        for a in addrs {
            if *a == from || Some(*a) == to || precompiles.contains(a) || *a == spec.coinbase {
                continue;
            }
            let acc = &state[a];
            let mut keys: Vec<B256> = acc.storage.keys().map(|k| B256::from(*k)).collect();
            keys.sort();
            items.push(AccessListItem { address: *a, storage_keys: keys });
        }
        // Slots of the sender and recipient are listed too (geth lists every touched slot, excluding only addresses).
        for a in [Some(from), to].into_iter().flatten() {
            if let Some(acc) = state.get(&a) {
                if !acc.storage.is_empty() {
                    let mut keys: Vec<B256> = acc.storage.keys().map(|k| B256::from(*k)).collect();
                    keys.sort();
                    items.push(AccessListItem { address: a, storage_keys: keys });
                }
            }
        }
        let next = AccessList(items);
        let stable = next == list;
        last = Some((r, next.clone()));
        if stable {
            break;
        }
        list = next;
    }
    let (r, list) = last.expect("ran at least once");
    let mut out = Map::new();
    out.insert(
        "accessList".into(),
        json!(list.0.iter().map(|i| json!({"address": format!("{:#x}", i.address), "storageKeys": i.storage_keys.iter().map(|k| format!("{k:#x}")).collect::<Vec<_>>()})).collect::<Vec<_>>()),
    );
    out.insert("gasUsed".into(), json!(format!("0x{:x}", r.tx_gas_used())));
    if let ExecutionResult::Revert { .. } | ExecutionResult::Halt { .. } = &r {
        out.insert("error".into(), json!(failure(&r).message));
    }
    Ok(Value::Object(out))
}

/// Unused-import guard for SpecId (kept for readers: OpSpecId maps onto it).
#[allow(dead_code)]
fn eth_spec(s: OpSpecId) -> SpecId {
    s.into_eth_spec()
}

#[allow(dead_code)]
fn info_default() -> AccountInfo {
    AccountInfo::default()
}

#[cfg(test)]
mod tests {
    //! EIP-7702 authorization refunds against an in-memory canonical state (the node client points nowhere: every
    //! account and slot the txs touch is folded into the cache first).
    use super::*;
    use crate::node::NodeClient;
    use op_revm::revm::context::transaction::{Authorization, RecoveredAuthority, RecoveredAuthorization};

    const CHAIN: u64 = 901;

    fn addr(n: u8) -> Address {
        Address::with_last_byte(n)
    }

    fn spec() -> BlockSpec {
        BlockSpec {
            number: 2,
            timestamp: 1_000,
            base_fee: 1,
            coinbase: addr(0xc0),
            gas_limit: 30_000_000,
            prev_randao: B256::ZERO,
            parent_hash: B256::ZERO,
            parent_beacon_root: None,
            spec: OpSpecId::ISTHMUS,
            chain_id: CHAIN,
        }
    }

    /// The canonical state: a funded sender, the L1Block slots, and `authority` as given (None: not in the trie).
    fn shared(sender: Address, authority: Address, authority_info: Option<AccountInfo>, sinks: &[Address]) -> Shared {
        let shared = Shared::new(NodeClient::new("http://127.0.0.1:9/", 100).unwrap(), usize::MAX);
        let mut canon = Layer::default();
        let funded = AccountInfo { balance: U256::from(10u128.pow(21)), ..Default::default() };
        canon.accounts.insert(sender, LayerAccount { info: Some(funded), ..Default::default() });
        canon.accounts.insert(authority, LayerAccount { info: authority_info, ..Default::default() });
        for a in prefetch_list(&spec(), &[]).into_iter().chain(sinks.iter().copied()) {
            canon.accounts.entry(a).or_default();
        }
        for (a, k) in l1_slots() {
            canon.accounts.entry(a).or_default().storage.insert(k, U256::ZERO);
        }
        shared.cache.write().unwrap().fold(&canon);
        shared
    }

    /// A 7702 tx from `sender` (nonce `nonce`) sending 1 wei to `sink`, authorizing `authority` (auth nonce `auth_nonce`).
    fn tx7702(sender: Address, nonce: u64, sink: Address, authority: Address, auth_nonce: u64) -> OpTransaction<TxEnv> {
        let auth = Authorization { chain_id: U256::from(CHAIN), address: addr(0x70), nonce: auth_nonce };
        let b = TxEnv {
            tx_type: 4,
            caller: sender,
            nonce,
            gas_limit: 100_000,
            gas_price: 10,
            gas_priority_fee: Some(1),
            chain_id: Some(CHAIN),
            kind: TxKind::Call(sink),
            value: U256::from(1),
            authorization_list: vec![Either::Right(RecoveredAuthorization::new_unchecked(auth, RecoveredAuthority::Valid(authority)))],
            ..Default::default()
        };
        OpTransaction { base: b, enveloped_tx: Some(Bytes::new()), deposit: Default::default() }
    }

    /// Runs `txs` in order on one flashblock layer with one EVM, as `apply` does; their gas used.
    fn run_all(shared: &Shared, txs: Vec<OpTransaction<TxEnv>>) -> Vec<u64> {
        let spec = spec();
        let db = ApplyDb { layer: Layer::default(), below: &[], shared, zero_credit: None, stood_in: false, broken: None };
        let mut evm = engine_evm(db, spec.cfg(), spec.block_env(), L1BlockInfo::default(), ());
        let mut out = Vec::new();
        for tx in txs {
            let result = evm.transact_commit(tx).expect("tx executes");
            assert!(result.is_success());
            out.push(result.tx_gas_used());
        }
        out
    }

    #[test]
    fn authority_not_in_trie_gets_no_refund_then_delegated_authority_does() {
        let (sender, authority) = (addr(0x01), addr(0xaa));
        let shared = shared(sender, authority, None, &[addr(0x51), addr(0x52)]);
        let gas = run_all(&shared, vec![tx7702(sender, 0, addr(0x51), authority, 0), tx7702(sender, 1, addr(0x52), authority, 1)]);
        // 21000 + 25000 per auth; EIP-7702 refunds 12500 (capped at gasUsed / 5 = 9200) only if the authority exists.
        assert_eq!(gas, vec![46_000, 36_800]);
    }

    #[test]
    fn existing_authority_gets_the_refund() {
        let (sender, authority) = (addr(0x01), addr(0xaa));
        let funded = AccountInfo { balance: U256::from(1), ..Default::default() };
        let shared = shared(sender, authority, Some(funded), &[addr(0x51)]);
        assert_eq!(run_all(&shared, vec![tx7702(sender, 0, addr(0x51), authority, 0)]), vec![36_800]);
    }

    // A signed EIP-1559 transaction (execution-apis chain-transactions.json, type 0x2).
    const SIGNED_1559: &str = "02f8d7870c72dd9d5e883e819001843b9aca01830186a0947dcd17433742f4c0ca53122ab541d0ba67fc27df028c1ee8f6decf498faf656d6974f85bf859947dcd17433742f4c0ca53122ab541d0ba67fc27dff842a00000000000000000000000000000000000000000000000000000000000000000a013bd2394f758553be374ffa4a9455cdf5e6ef3d905acd02746df2d12361e1ace01a088bad2c994f3043a59072f6d16e0bf4fababbea1ebfbb4706fcc3066dc3b7733a02e1aa511f0d7eeebd17d63d3072aee3b02374238a54fd48b4786553f4e51113c";

    /// `raw` re-signed with (r, n - s, !parity): the same signer, but a high s (EIP-2 rejects it).
    fn with_high_s(raw: &[u8]) -> Vec<u8> {
        use alloy_eips::eip2718::Encodable2718;
        let OpTxEnvelope::Eip1559(signed) = OpTxEnvelope::decode_2718(&mut &raw[..]).unwrap() else { panic!("not 1559") };
        let sig = signed.signature();
        let n = U256::from_be_bytes(hex!("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141"));
        let high = alloy_primitives::Signature::new(sig.r(), n - sig.s(), !sig.v());
        let tx = signed.tx().clone();
        OpTxEnvelope::Eip1559(alloy_consensus::Signed::new_unhashed(tx, high)).encoded_2718()
    }

    #[test]
    fn a_given_sender_is_taken_without_recovery() {
        let raw = hex::decode(SIGNED_1559).unwrap();
        let recovered = prepare(&raw, 1, None).expect("recovers").from;
        assert_ne!(recovered, Address::ZERO);
        // A sender given is used as is: no ecrecover ran (a recovery would have found `recovered`).
        let given = prepare(&raw, 1, Some(addr(0x42))).expect("decodes");
        assert_eq!(given.from, addr(0x42));
        assert_eq!(given.tx.as_ref().map(|t| t.base.caller), Some(addr(0x42)));
        assert_eq!(given.hash, keccak256(&raw));
    }

    #[test]
    fn a_given_sender_does_not_save_a_malformed_transaction() {
        let raw = hex::decode(SIGNED_1559).unwrap();
        let sender = prepare(&raw, 1, None).unwrap().from;
        let truncated = &raw[..raw.len() - 5];
        assert_eq!(prepare(truncated, 1, Some(sender)).err().map(|e| e.code), Some("E_TX"));
        let mut trailing = raw.clone();
        trailing.push(0);
        assert_eq!(prepare(&trailing, 1, Some(sender)).err().map(|e| e.code), Some("E_TX"));
        let high = with_high_s(&raw);
        assert!(prepare(&high, 1, None).is_err());
        let e = prepare(&high, 1, Some(sender)).err().expect("high s rejected with a sender given");
        assert!(e.message.contains("high s"), "{}", e.message);
    }

    #[test]
    fn senders_absent_or_null_are_recovered_here_in_order() {
        let raw = hex::decode(SIGNED_1559).unwrap();
        let sender = prepare(&raw, 1, None).unwrap().from;
        // 40 copies: enough to take the parallel path; every other one has its sender given (a wrong one, to tell them apart).
        let txs = vec![raw.clone(); 40];
        let senders: Vec<Option<Address>> = (0..40).map(|i| if i % 2 == 0 { Some(addr(0x42)) } else { None }).collect();
        let out = prepare_all(&Txs::of(&txs), &senders, 1).unwrap();
        for (i, p) in out.iter().enumerate() {
            assert_eq!(p.from, if i % 2 == 0 { addr(0x42) } else { sender }, "tx {i}");
        }
        let none = prepare_all(&Txs::of(&txs), &[], 1).unwrap();
        assert!(none.iter().all(|p| p.from == sender));
        let all_nulls = prepare_all(&Txs::of(&txs), &[None; 40], 1).unwrap();
        assert!(all_nulls.iter().all(|p| p.from == sender));
    }

    /// An EIP-1559 transaction from `sender` (given, so the signature is a placeholder in range) as raw bytes.
    fn raw_1559(nonce: u64, to: Address, value: u64, input: Vec<u8>, gas: u64) -> Vec<u8> {
        use alloy_eips::eip2718::Encodable2718;
        let tx = alloy_consensus::TxEip1559 {
            chain_id: CHAIN,
            nonce,
            gas_limit: gas,
            max_fee_per_gas: 10,
            max_priority_fee_per_gas: 1,
            to: TxKind::Call(to),
            value: U256::from(value),
            access_list: Default::default(),
            input: input.into(),
        };
        let sig = alloy_primitives::Signature::new(U256::from(1), U256::from(1), false);
        OpTxEnvelope::Eip1559(alloy_consensus::Signed::new_unhashed(tx, sig)).encoded_2718()
    }

    /// A node that lacks the code bytes of `lazy` (the block's fee recipient), as a witness-backed node does.
    fn witness_like(sender: Address, lazy: Address, lazy_hash: B256) -> crate::stubnode::StubNode {
        use crate::stubnode::{StubAccount, StubNode};
        let mut accounts = std::collections::HashMap::new();
        accounts.insert(sender, StubAccount { balance: U256::from(10u128.pow(21)), ..Default::default() });
        accounts.insert(lazy, StubAccount { balance: U256::from(5), nonce: 1, code_hash: Some(lazy_hash), ..Default::default() });
        accounts.insert(addr(0x51), StubAccount { code: Some(vec![0x00]), ..Default::default() });
        StubNode::start(accounts)
    }

    fn open_block(coinbase: Address) -> OpenBlock {
        OpenBlock { next_index: 1, ..OpenBlock::new(BlockSpec { coinbase, ..spec() }, Vec::new()) }
    }

    #[test]
    fn an_account_whose_code_the_node_lacks_is_credited_without_its_code() {
        let (sender, lazy, lazy_hash) = (addr(0x01), addr(0xfe), keccak256([0x60, 0x00]));
        let node = witness_like(sender, lazy, lazy_hash);
        let shared = Shared::new(NodeClient::new(&node.url, 5_000).unwrap(), usize::MAX);
        let block = open_block(lazy);
        // Pays the fee recipient its tip; also calls 0x51, whose code the node gives (no eth_getProof for it).
        let txs = Txs::of(&[raw_1559(0, addr(0x51), 1, Vec::new(), 100_000)]);
        let (layer, receipts) = apply(&shared, &block, 1, &txs, &[Some(sender)]).expect("the block executes");
        assert!(receipts[0].status);
        let credited = layer.accounts[&lazy].info.clone().expect("the fee recipient exists");
        let gas = receipts[0].gas_used;
        assert_eq!(credited.balance, U256::from(5 + gas), "credited its tip of 1 wei a gas");
        assert_eq!((credited.nonce, credited.code_hash, credited.code.is_none()), (1, lazy_hash, true));
        assert_eq!(node.calls("eth_getProof"), 1, "only the account without code is proved");
        // Its code stays unknown: a read of it is an error, never an empty code.
        let snap = Snapshot { layers: vec![Arc::new(layer)], l1: Default::default() };
        let e = read(&shared, &block.spec, &snap, &json!({"method": "getCode", "address": format!("{lazy:#x}")})).expect_err("getCode fails");
        assert!(e.message.contains("is not known to the engine"), "{}", e.message);
    }

    #[test]
    fn running_code_the_node_lacks_fails_the_apply() {
        let (sender, lazy, lazy_hash) = (addr(0x01), addr(0xfe), keccak256([0x60, 0x00]));
        let node = witness_like(sender, lazy, lazy_hash);
        let shared = Shared::new(NodeClient::new(&node.url, 5_000).unwrap(), usize::MAX);
        let block = open_block(addr(0xc0));
        let txs = Txs::of(&[raw_1559(0, lazy, 1, Vec::new(), 100_000)]);
        let e = apply(&shared, &block, 1, &txs, &[Some(sender)]).expect_err("the apply fails");
        assert_eq!(e.code, "E_NODE");
        assert!(e.message.contains(&format!("code of {lazy_hash:#x} is not known to the engine")), "{}", e.message);
    }

    #[test]
    fn a_node_that_gives_every_code_is_never_asked_for_proofs() {
        let sender = addr(0x01);
        let node = witness_like(sender, addr(0xfe), keccak256([0x60, 0x00]));
        let shared = Shared::new(NodeClient::new(&node.url, 5_000).unwrap(), usize::MAX);
        let txs = Txs::of(&[raw_1559(0, addr(0x51), 1, Vec::new(), 100_000)]);
        apply(&shared, &open_block(addr(0xc0)), 1, &txs, &[Some(sender)]).expect("the block executes");
        assert_eq!(node.calls("eth_getProof"), 0);
        assert!(node.calls("eth_getCode") > 0);
    }

    /// A node that lacks the operator fee vault and L1Block's slot 5 (pre-Isthmus blocks never touch them) and
    /// account 0x99.
    fn partial_witness(sender: Address) -> crate::stubnode::StubNode {
        use crate::stubnode::{StubAccount, StubNode};
        let l1block: Address = "0x4200000000000000000000000000000000000015".parse().unwrap();
        let vault: Address = "0x420000000000000000000000000000000000001b".parse().unwrap();
        let mut accounts = std::collections::HashMap::new();
        accounts.insert(sender, StubAccount { balance: U256::from(10u128.pow(21)), ..Default::default() });
        accounts.insert(vault, StubAccount { missing: true, ..Default::default() });
        accounts.insert(addr(0x99), StubAccount { missing: true, ..Default::default() });
        // Ecotone scalars set (a base fee scalar of 1): op-revm then never reads the pre-Ecotone overhead (slot 5).
        let scalars = (U256::from(3), U256::from(1) << 96);
        accounts.insert(l1block, StubAccount { code: Some(vec![0x00]), missing_slots: vec![U256::from(5)], storage: vec![scalars], ..Default::default() });
        StubNode::start(accounts)
    }

    #[test]
    fn what_the_node_lacks_fails_only_the_flashblock_that_reads_it() {
        let sender = addr(0x01);
        let node = partial_witness(sender);
        let shared = Shared::new(NodeClient::new(&node.url, 5_000).unwrap(), usize::MAX);
        let mut block = open_block(addr(0xc0));
        block.spec.spec = OpSpecId::ECOTONE;
        // The prefetch guessed at the vault and slot 5; the EVM never reads them: the flashblock executes.
        let ok = apply(&shared, &block, 1, &Txs::of(&[raw_1559(0, addr(0x51), 1, Vec::new(), 100_000)]), &[Some(sender)]).expect("executes");
        assert!(ok.1[0].status);
        // op-revm credits the operator fee vault with zero even before Isthmus: nothing recorded for it.
        let vault: Address = "0x420000000000000000000000000000000000001b".parse().unwrap();
        assert!(!ok.0.accounts.contains_key(&vault));
        // A transaction that reads the missing account fails the apply, naming it (never a zero).
        let e = apply(&shared, &block, 1, &Txs::of(&[raw_1559(0, addr(0x99), 1, Vec::new(), 100_000)]), &[Some(sender)]).expect_err("fails");
        assert_eq!(e.code, "E_NODE");
        assert!(e.message.contains(&format!("account {:#x}", addr(0x99))) && e.message.contains("not in the witness"), "{}", e.message);
        // Paying the vault something it cannot read fails too, as does any read of it from Isthmus on.
        let e = apply(&shared, &block, 1, &Txs::of(&[raw_1559(0, vault, 1, Vec::new(), 100_000)]), &[Some(sender)]).expect_err("fails");
        assert!(e.message.contains("the transaction changed it"), "{}", e.message);
        block.spec.spec = OpSpecId::ISTHMUS;
        let e = apply(&shared, &block, 1, &Txs::of(&[raw_1559(0, addr(0x51), 1, Vec::new(), 100_000)]), &[Some(sender)]).expect_err("fails");
        assert!(e.message.contains(&format!("account {vault:#x}")), "{}", e.message);
    }
}
