//! Reads at a snapshot, by method: state (balance, nonce, code, storage), calls (call.rs), simulations
//! (simulate.rs); inline on the calling thread when they can be answered from memory within a budget.
use crate::call::{access_list, call_setup, estimate, failure, override_layer, run, run_budgeted, OVER_BUDGET};
use crate::error::ReadError;
use crate::spec::{hex_u256, parse, BlockSpec};
use crate::state::{no_wait, Db, Shared, Snapshot};
use alloy_primitives::{hex, Address, Bytes, B256};
use op_revm::revm::context_interface::result::ExecutionResult;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

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
                Some(d) => run_budgeted(db(), &s, d)?,
                None => run(db(), &s, s.tx.base.gas_limit)?.0,
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
