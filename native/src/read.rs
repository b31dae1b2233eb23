//! Reads at a snapshot, by method: state (balance, nonce, code, storage), calls (call.rs), simulations
//! (simulate.rs); inline on the calling thread when they can be answered from memory within a budget.
use crate::call::{access_list, call_setup, estimate, failure, override_layer, run, Limit, OVER_BUDGET};
use crate::error::ReadError;
use crate::spec::{hex_u256, parse, BlockSpec};
use crate::state::{no_wait, Db, Shared, Snapshot};
use alloy_primitives::{hex, Address, Bytes, B256};
use op_revm::revm::context_interface::result::ExecutionResult;
use serde_json::{json, Value};
use std::time::Duration;

/// Answers a read inline (on the calling thread) when it can within `budget` from what is in memory: state reads and
/// eth_call only, no node read, no lock another thread holds, no longer than `budget`. None: answer it on a read
/// thread (the work done here is dropped; nothing was changed).
pub(crate) fn read_inline(shared: &Shared, spec: &BlockSpec, snap: &Snapshot, req: &Value, budget: Duration) -> Option<Result<Value, ReadError>> {
    if !matches!(req["method"].as_str(), Some("call" | "getBalance" | "getTransactionCount" | "getCode" | "getStorageAt")) {
        return None;
    }
    let (out, waited) = no_wait(|| read(shared, spec, snap, req, Limit::inline(budget)));
    match out {
        _ if waited => None,
        Err(e) if e.code == OVER_BUDGET => None,
        other => Some(other),
    }
}

/// Answers one read on `snap` (JSON request `{method, params...}`) within `limit`. Returns the JSON-RPC result value.
pub(crate) fn read(shared: &Shared, spec: &BlockSpec, snap: &Snapshot, req: &Value, limit: Limit) -> Result<Value, ReadError> {
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
            match &run(db(), &s, s.tx.base.gas_limit, limit)?.0 {
                ExecutionResult::Success { output, .. } => Ok(json!(format!("0x{}", hex::encode(output.data())))),
                other => Err(failure(other)),
            }
        }
        "estimateGas" => estimate(&db, spec, &req["tx"], &req["blockOverrides"], l1, limit),
        "simulateV1" => crate::simulate::simulate(shared, spec, snap, &req["payload"], limit),
        "createAccessList" => access_list(&db, spec, &req["tx"], &req["blockOverrides"], l1, limit),
        _ => Err(ReadError { code: "E_UNSUPPORTED", message: format!("engine read {method:?} not supported"), data: None }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::TIMEOUT;
    use crate::node::NodeClient;
    use crate::state::within;
    use crate::stubnode::StubNode;
    use std::time::Instant;

    #[test]
    fn a_read_past_its_timeout_stops_and_answers_timeout() {
        let node = StubNode::start(Default::default());
        let shared = Shared::new(NodeClient::new(&node.url, 5_000).unwrap(), usize::MAX);
        let spec = BlockSpec::for_tests();
        let snap = Snapshot { layers: Vec::new(), l1: Default::default() };
        let code = |req: &Value, limit: Limit| read(&shared, &spec, &snap, req, limit).err().map(|e| (e.code, e.message));
        // JUMPDEST PUSH1 0 JUMP: a loop until the gas (the block's 30M) runs out, millions of instructions.
        let looping = "0x0000000000000000000000000000000000001009";
        // 300,000 turns of a counted loop, then STOP: 12M gas, a success.
        let counted = "0x000000000000000000000000000000000000100a";
        let overrides = json!({ looping: { "code": "0x5b600056" }, counted: { "code": "0x620493e05b8015601157600190036004565b00" } });
        let call = json!({ "method": "call", "tx": { "to": looping }, "stateOverrides": overrides });
        assert_eq!(code(&call, Limit::timeout(60_000)), Some(("E_FAILED", "out of gas".to_string())), "within its time the loop runs out of gas");
        // A read whose time ran out while it waited for a thread does not start.
        let mut expired = Limit::timeout(60_000);
        expired.deadline = Instant::now();
        assert_eq!(code(&call, expired), Some((TIMEOUT, "execution aborted (timeout = 60s)".to_string())));
        // Every run of an estimate counts: the first takes milliseconds, the bisection's next run is refused.
        let estimate = json!({ "method": "estimateGas", "tx": { "to": counted }, "stateOverrides": overrides });
        assert!(read(&shared, &spec, &snap, &estimate, Limit::timeout(60_000)).is_ok(), "the counted loop is estimated in time");
        assert_eq!(code(&estimate, Limit::timeout(1)).map(|c| c.0), Some(TIMEOUT));
        // 200 blocks of the loop (each block has its own gas) would keep a read thread busy for seconds; the timeout
        // covers every call.
        let mut blocks: Vec<Value> = (0..200).map(|_| json!({ "calls": [{ "to": looping }] })).collect();
        blocks[0]["stateOverrides"] = overrides.clone();
        let sim = json!({ "method": "simulateV1", "payload": { "blockStateCalls": blocks } });
        assert_eq!(code(&sim, Limit::timeout(50)).map(|c| c.0), Some(TIMEOUT));
        // Past its deadline a read starts no node read (the account is not cached: it would be one).
        let balance = json!({ "method": "getBalance", "address": "0x00000000000000000000000000000000000000b0" });
        let asked = || node.state.lock().unwrap().calls.values().sum::<usize>();
        let before = asked();
        let (r, timed_out) = within(Instant::now(), || read(&shared, &spec, &snap, &balance, Limit::timeout(60_000)));
        assert!(r.is_err() && timed_out, "refused for its deadline");
        assert_eq!(asked(), before, "the node was not asked");
        let (r, timed_out) = within(Instant::now() + Duration::from_secs(60), || read(&shared, &spec, &snap, &balance, Limit::timeout(60_000)));
        assert!(r.is_ok() && !timed_out, "in time: read from the node");
    }
}
