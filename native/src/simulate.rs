//! eth_simulateV1 on the pending state: several blocks of calls, each block with its own state and block overrides,
//! on top of the newest executed flashblock and with the pending block's own env (number, timestamp, base fee,
//! fee recipient, prev_randao) as the first simulated block's defaults. State carries from call to call and block
//! to block. Without `validation` a call runs as eth_call does: nonces are not checked, a call without a fee is free
//! (gas price 0), one with a fee pays it as a transaction would; with it, nonce, fee (none given is 0, below any base
//! fee), balance, init code size and the sender (an account with code other than an EIP-7702 delegation may not send,
//! EIP-3607) are checked as a transaction's, and a call that fails them fails the request. BASEFEE is the
//! pending block's base fee (or the block override's), as NUMBER, TIMESTAMP, COINBASE and PREVRANDAO are its own.
//! The state, transactions and receipts roots are not computed (the simulated state has no trie) and are omitted.
use crate::call::{apply_block_overrides, call_setup, failure, override_layer, run, Limit, TIMEOUT};
use crate::error::{invalid, ReadError};
use crate::spec::BlockSpec;
use crate::receipt::log_json;
use crate::state::{Db, Layer, Shared, Snapshot};
use alloy_primitives::{hex, keccak256, Bloom, B256, U256};
use op_revm::revm::context_interface::result::ExecutionResult;
use serde_json::{json, Value};
use std::sync::Arc;

/// keccak256(rlp([])): the ommers hash of a block without ommers.
const EMPTY_OMMERS_HASH: B256 = B256::new(hex!("1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347"));

/// Simulated blocks per request (geth's limit is 256).
const MAX_BLOCKS: usize = 256;
/// Calls per request, across blocks.
const MAX_CALLS: usize = 1000;

/// Answers `eth_simulateV1(payload, "pending")`: the list of simulated blocks with their call results.
pub(crate) fn simulate(shared: &Shared, spec: &BlockSpec, snap: &Snapshot, payload: &Value, limit: Limit) -> Result<Value, ReadError> {
    let blocks = payload.get("blockStateCalls").and_then(|b| b.as_array()).ok_or_else(|| invalid("eth_simulateV1: blockStateCalls is required"))?;
    if blocks.len() > MAX_BLOCKS {
        return Err(invalid(format!("eth_simulateV1: at most {MAX_BLOCKS} blocks")));
    }
    let calls_total: usize = blocks.iter().map(|b| b.get("calls").and_then(|c| c.as_array()).map_or(0, |c| c.len())).sum();
    if calls_total > MAX_CALLS {
        return Err(invalid(format!("eth_simulateV1: at most {MAX_CALLS} calls")));
    }
    let validation = payload.get("validation").and_then(|v| v.as_bool()).unwrap_or(false);
    // Layers the simulation adds, newest first, above the snapshot.
    let mut added: Vec<Arc<Layer>> = Vec::new();
    let mut out = Vec::with_capacity(blocks.len());
    let mut parent_hash = spec.parent_hash;
    let mut prev_number: Option<u64> = None;
    let mut prev_time: Option<u64> = None;
    let mut log_index: u64 = 0;
    let scratch_codes = std::sync::RwLock::new(crate::state::HashMap::default());
    for (bi, b) in blocks.iter().enumerate() {
        let below: Vec<Arc<Layer>> = added.iter().cloned().chain(snap.layers.iter().cloned()).collect();
        // State overrides of this block, as a layer of their own.
        let base_db = Db { top: None, below: &below, shared };
        if let Some(l) = override_layer(&base_db, b.get("stateOverrides").unwrap_or(&Value::Null))? {
            added.insert(0, Arc::new(l));
        }
        let below: Vec<Arc<Layer>> = added.iter().cloned().chain(snap.layers.iter().cloned()).collect();
        // The block's env: the pending block's for the first, then one block (and the chain's block time) later each.
        let mut env = spec.block_env();
        if bi > 0 {
            // In 256 bits: one past u64::MAX is "too large" below, never a wrap.
            env.number = U256::from(prev_number.unwrap_or(spec.number)) + U256::from(1);
            env.timestamp = U256::from(prev_time.unwrap_or(spec.timestamp)) + U256::from(2);
        }
        apply_block_overrides(&mut env, b.get("blockOverrides").unwrap_or(&Value::Null))?;
        let too_large = |what: &str| invalid(format!("blockOverrides.{what}: too large"));
        let number: u64 = env.number.try_into().map_err(|_| too_large("number"))?;
        let time: u64 = env.timestamp.try_into().map_err(|_| too_large("time"))?;
        if let Some(p) = prev_number.filter(|&p| number <= p) {
            return Err(ReadError { code: "E_SIM_NUMBER", message: format!("block numbers must increase: {number} after {p}"), data: None });
        }
        if let Some(p) = prev_time.filter(|&p| time <= p) {
            return Err(ReadError { code: "E_SIM_TIMESTAMP", message: format!("block timestamps must increase: {time} after {p}"), data: None });
        }
        let mut layer = Layer::default();
        let mut results = Vec::new();
        let mut gas_used_block: u64 = 0;
        let mut bloom = Bloom::ZERO;
        for (ci, call) in b.get("calls").and_then(|c| c.as_array()).into_iter().flatten().enumerate() {
            let db = Db { top: Some(&layer), below: &below, shared };
            let mut s = call_setup(&db, spec, call, &Value::Null, None)?;
            s.block = env.clone();
            // Without validation a call runs as eth_call runs it (call_setup): free when it gives no fee, charged and
            // refunded as a transaction when it gives one (as geth). With validation it is checked as a transaction:
            // its nonce, its fee against the base fee even when it gives none (a fee of 0, as geth refuses it), and its
            // sender's code (EIP-3607, which eth_call skips).
            if validation {
                s.cfg.disable_nonce_check = false;
                s.cfg.disable_base_fee = false;
                s.cfg.disable_fee_charge = false;
                s.cfg.disable_eip3607 = false;
            }
            let gas = if call.get("gas").is_some_and(|g| !g.is_null()) { s.tx.base.gas_limit } else { env.gas_limit.saturating_sub(gas_used_block).min(s.tx.base.gas_limit) };
            // The call's L1 block info is none given (call_setup without the snapshot's): op-revm reads it from the state.
            let (result, state) = match run(db, &s, gas, limit) {
                Ok(v) => v,
                // Out of time, or state that could not be read: the simulation has no answer (a call that could not
                // read its state did not fail; the calls after it would run on the wrong state).
                Err(e) if e.code == TIMEOUT || e.code == "E_NODE" => return Err(e),
                Err(e) => {
                    if validation {
                        // eth_simulateV1's codes for a call that is no valid transaction, as geth's txValidationError
                        // (src/exec/addon.ts maps them): execution-apis' -380xx, invalid params for contradicting
                        // fee fields, internal error for any other refusal.
                        let code = match e.code {
                            "E_NONCE_LOW" => "E_SIM_NONCE_LOW",
                            "E_NONCE_HIGH" => "E_SIM_NONCE_HIGH",
                            "E_FEE_LOW" => "E_SIM_FEE_LOW",
                            "E_INTRINSIC_GAS" => "E_SIM_INTRINSIC_GAS",
                            "E_FUNDS" => "E_SIM_FUNDS",
                            "E_BLOCK_GAS" => "E_SIM_BLOCK_GAS",
                            "E_NOT_EOA" => "E_SIM_NOT_EOA",
                            "E_INITCODE" => "E_SIM_INITCODE",
                            "E_FEE_PARAMS" => "E_SIM_FEE_PARAMS",
                            _ => "E_SIM_INTERNAL",
                        };
                        return Err(ReadError { code, message: format!("call {ci} of block {bi}: {}", e.message), data: None });
                    }
                    results.push(json!({"returnData": "0x", "logs": [], "gasUsed": "0x0", "status": "0x0", "error": {"code": -32000, "message": e.message}}));
                    continue;
                }
            };
            // Code deployed in a simulation stays in its layer (the account info holds it), never in the shared map.
            layer.commit(state, &scratch_codes);
            for l in result.logs() {
                bloom.accrue_log(l);
            }
            let used = result.tx_gas_used();
            gas_used_block += used;
            // A stand-in transaction hash for the logs: the call's position (the calls are not signed transactions).
            let tx_hash = keccak256([number.to_be_bytes().as_slice(), (ci as u64).to_be_bytes().as_slice()].concat());
            let logs: Vec<Value> = result
                .logs()
                .iter()
                .map(|l| {
                    let mut v = log_json(l);
                    v["blockNumber"] = json!(format!("0x{number:x}"));
                    v["transactionIndex"] = json!(format!("0x{ci:x}"));
                    v["transactionHash"] = json!(format!("{tx_hash:#x}"));
                    v["logIndex"] = json!(format!("0x{log_index:x}"));
                    v["removed"] = json!(false);
                    log_index += 1;
                    v
                })
                .collect();
            let mut r = json!({
                "status": if result.is_success() { "0x1" } else { "0x0" },
                "gasUsed": format!("0x{used:x}"),
                "logs": logs,
                "returnData": format!("0x{}", hex::encode(match &result {
                    ExecutionResult::Success { output, .. } => output.data().clone(),
                    ExecutionResult::Revert { output, .. } => output.clone(),
                    ExecutionResult::Halt { .. } => Default::default(),
                })),
            });
            if !result.is_success() {
                let f = failure(&result);
                // Part of eth_simulateV1's result document (a call's own outcome, not a failure of the request): the
                // JSON-RPC code is written here, as its spec shapes it.
                let code = if f.code == "E_REVERT" { 3 } else { -32000 };
                r["error"] = json!({"code": code, "message": f.message, "data": f.data});
            }
            results.push(r);
        }
        added.insert(0, Arc::new(layer));
        let hash = keccak256([parent_hash.as_slice(), number.to_be_bytes().as_slice(), time.to_be_bytes().as_slice()].concat());
        out.push(json!({
            "number": format!("0x{number:x}"),
            "hash": format!("{hash:#x}"),
            "parentHash": format!("{parent_hash:#x}"),
            "timestamp": format!("0x{time:x}"),
            "gasLimit": format!("0x{:x}", env.gas_limit),
            "gasUsed": format!("0x{gas_used_block:x}"),
            "baseFeePerGas": format!("0x{:x}", env.basefee),
            "miner": format!("{:#x}", env.beneficiary),
            "mixHash": format!("{:#x}", env.prevrandao.unwrap_or(B256::ZERO)),
            "logsBloom": format!("{bloom:#x}"),
            "difficulty": "0x0",
            "nonce": "0x0000000000000000",
            "extraData": "0x",
            "sha3Uncles": format!("{EMPTY_OMMERS_HASH:#x}"),
            "uncles": [],
            "transactions": [],
            "calls": results,
        }));
        parent_hash = hash;
        prev_number = Some(number);
        prev_time = Some(time);
    }
    Ok(Value::Array(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::NodeClient;
    use crate::stubnode::{StubAccount, StubNode};
    use alloy_primitives::Address;

    /// Code returning BALANCE(`who`) as one word.
    fn balance_of(who: Address) -> String {
        format!("0x73{}3160005260206000f3", hex::encode(who))
    }

    #[test]
    fn without_validation_a_call_that_gives_a_fee_pays_it_and_one_that_gives_none_is_free() {
        let sender = Address::with_last_byte(0x5e);
        let reader = Address::with_last_byte(0xba);
        let start = U256::from(10u128.pow(18));
        let node = StubNode::start([(sender, StubAccount { balance: start, ..Default::default() })].into_iter().collect());
        let shared = Shared::new(NodeClient::new(&node.url, 5_000).unwrap(), usize::MAX);
        let snap = Snapshot { layers: Vec::new(), l1: Default::default() };
        let from = format!("{sender:#x}");
        let to = format!("{:#x}", Address::with_last_byte(0xde));
        let payload = json!({ "blockStateCalls": [{
            "stateOverrides": { format!("{reader:#x}"): { "code": balance_of(sender) } },
            "calls": [
                { "from": from, "to": to, "gas": "0x186a0", "gasPrice": "0x3b9aca00" },
                { "to": format!("{reader:#x}") },
                { "from": from, "to": to, "gas": "0x186a0" },
                { "to": format!("{reader:#x}") },
            ],
        }]});
        let out = simulate(&shared, &BlockSpec::for_tests(), &snap, &payload, Limit::timeout(5_000)).expect("simulated");
        let calls = out[0]["calls"].as_array().unwrap();
        let balance = |i: usize| U256::from_str_radix(calls[i]["returnData"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
        assert_eq!(calls[0]["gasUsed"], "0x5208");
        // 21,000 gas at 1 gwei, charged once: not refunded the 79,000 it did not use on top of a charge never made.
        assert_eq!(balance(1), start - U256::from(21_000u64 * 1_000_000_000));
        assert_eq!(balance(3), balance(1), "a call without a fee costs nothing");
    }

    #[test]
    fn with_validation_a_call_is_checked_as_a_transaction() {
        let sender = Address::with_last_byte(0x5e);
        let node = StubNode::start([(sender, StubAccount { balance: U256::from(10u128.pow(18)), nonce: 3, ..Default::default() })].into_iter().collect());
        let shared = Shared::new(NodeClient::new(&node.url, 5_000).unwrap(), usize::MAX);
        let snap = Snapshot { layers: Vec::new(), l1: Default::default() };
        let from = format!("{sender:#x}");
        let to = format!("{:#x}", Address::with_last_byte(0xde));
        let sim = |call: Value, validation: bool| {
            let payload = json!({ "validation": validation, "blockStateCalls": [{ "calls": [call] }] });
            simulate(&shared, &BlockSpec::for_tests(), &snap, &payload, Limit::timeout(5_000)).map_err(|e| (e.code, e.message))
        };
        // The pending block's base fee is 1: a call without a fee pays 0, which a transaction may not.
        let free = json!({ "from": from, "to": to });
        assert!(sim(free.clone(), false).is_ok(), "without validation: a free call");
        let e = sim(free, true).expect_err("refused");
        assert!(e.0 == "E_SIM_FEE_LOW" && e.1.contains("basefee"), "{e:?}");
        let paid = json!({ "from": from, "to": to, "maxFeePerGas": "0x2", "maxPriorityFeePerGas": "0x1" });
        assert_eq!(sim(paid.clone(), true).map(|v| v[0]["calls"][0]["status"].clone()), Ok(json!("0x1")));
        let mut stale = paid.clone();
        stale["nonce"] = json!("0x2");
        assert_eq!(sim(stale, true).expect_err("refused").0, "E_SIM_NONCE_LOW", "a nonce below the account's");
        let mut ahead = paid.clone();
        ahead["nonce"] = json!("0x4");
        assert_eq!(sim(ahead, true).expect_err("refused").0, "E_SIM_NONCE_HIGH");
        let mut short = paid.clone();
        short["gas"] = json!("0x5207");
        assert_eq!(sim(short, true).expect_err("refused").0, "E_SIM_INTRINSIC_GAS", "below 21,000 gas");
        let mut rich = paid;
        rich["value"] = json!("0xde0b6b3a7640000");
        assert_eq!(sim(rich, true).expect_err("refused").0, "E_SIM_FUNDS", "more value than its balance: insufficient funds");
    }

    /// Simulates `calls` with validation in one block (with `overrides`) for a sender (0x5e: 1 ETH, nonce 3) on a stub
    /// node.
    fn validated(overrides: Value, calls: Value) -> Result<Value, (&'static str, String)> {
        let sender = Address::with_last_byte(0x5e);
        let node = StubNode::start([(sender, StubAccount { balance: U256::from(10u128.pow(18)), nonce: 3, ..Default::default() })].into_iter().collect());
        let shared = Shared::new(NodeClient::new(&node.url, 5_000).unwrap(), usize::MAX);
        let snap = Snapshot { layers: Vec::new(), l1: Default::default() };
        let payload = json!({ "validation": true, "blockStateCalls": [{ "stateOverrides": overrides, "calls": calls }] });
        simulate(&shared, &BlockSpec::for_tests(), &snap, &payload, Limit::timeout(5_000)).map_err(|e| (e.code, e.message))
    }

    /// A call from 0x5e with a fee above the base fee (1).
    fn paid() -> Value {
        json!({ "from": format!("{:#x}", Address::with_last_byte(0x5e)), "to": format!("{:#x}", Address::with_last_byte(0xde)), "maxFeePerGas": "0x2", "maxPriorityFeePerGas": "0x1" })
    }

    fn status(out: Result<Value, (&'static str, String)>) -> Result<Value, (&'static str, String)> {
        out.map(|v| v[0]["calls"][0]["status"].clone())
    }

    #[test]
    fn with_validation_a_tip_above_the_fee_cap_is_invalid_params() {
        let mut tipped = paid();
        tipped["maxPriorityFeePerGas"] = json!("0x3");
        let e = validated(Value::Null, json!([tipped])).expect_err("refused");
        assert!(e.0 == "E_SIM_FEE_PARAMS" && e.1.contains("priority fee is greater than max fee"), "{e:?}");
    }

    #[test]
    fn with_validation_init_code_over_the_limit_is_refused() {
        // EIP-3860: at most 2 × 24,576 bytes.
        let mut create = paid();
        create.as_object_mut().unwrap().remove("to");
        create["input"] = json!(format!("0x{}", "00".repeat(49_153)));
        let e = validated(Value::Null, json!([create.clone()])).expect_err("refused");
        assert!(e.0 == "E_SIM_INITCODE" && e.1.contains("initcode size limit"), "{e:?}");
        create["input"] = json!(format!("0x{}", "00".repeat(49_152)));
        assert_eq!(status(validated(Value::Null, json!([create]))), Ok(json!("0x1")), "init code at the limit");
    }

    #[test]
    fn with_validation_a_sender_with_code_is_no_eoa() {
        let from = format!("{:#x}", Address::with_last_byte(0x5e));
        let e = validated(json!({ from.clone(): { "code": "0x00" } }), json!([paid()])).expect_err("refused");
        assert!(e.0 == "E_SIM_NOT_EOA" && e.1.contains("senders with deployed code"), "{e:?}");
        // An EIP-7702 delegation is still an EOA's.
        let delegated = json!({ from: { "code": format!("0xef0100{}", "11".repeat(20)) } });
        assert_eq!(status(validated(delegated, json!([paid()]))), Ok(json!("0x1")), "a delegated EOA sends");
    }

    #[test]
    fn state_the_node_cannot_give_fails_the_simulation_never_a_failed_call() {
        let missing = Address::with_last_byte(0x77);
        let sender = Address::with_last_byte(0x5e);
        let accounts = [(missing, StubAccount { missing: true, ..Default::default() }), (sender, StubAccount { balance: U256::from(10u128.pow(18)), ..Default::default() })];
        let node = StubNode::start(accounts.into_iter().collect());
        let shared = Shared::new(NodeClient::new(&node.url, 5_000).unwrap(), usize::MAX);
        let snap = Snapshot { layers: Vec::new(), l1: Default::default() };
        let reader = Address::with_last_byte(0xba);
        for validation in [false, true] {
            let payload = json!({ "validation": validation, "blockStateCalls": [{
                "stateOverrides": { format!("{reader:#x}"): { "code": balance_of(missing) } },
                "calls": [
                    { "from": format!("{sender:#x}"), "to": format!("{reader:#x}"), "maxFeePerGas": "0x2", "maxPriorityFeePerGas": "0x1" },
                    { "from": format!("{sender:#x}"), "to": format!("{:#x}", Address::with_last_byte(0xde)), "maxFeePerGas": "0x2", "maxPriorityFeePerGas": "0x1" },
                ],
            }]});
            let e = simulate(&shared, &BlockSpec::for_tests(), &snap, &payload, Limit::timeout(5_000)).expect_err("no answer without the state");
            assert_eq!(e.code, "E_NODE", "validation {validation}: {}", e.message);
        }
    }
}
