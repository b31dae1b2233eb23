//! Calls at a snapshot: eth_call, eth_estimateGas, eth_createAccessList with geth-style state and block overrides,
//! an inline budget for the RPC thread, and the failure of a call as a ReadError (reverts with their data).
use crate::error::{failed, invalid, ReadError};
use crate::evm::engine_evm;
use crate::spec::{bytes_of, hex_fit, hex_u256, hex_u64, parse, BlockSpec};
use crate::state::{Db, Layer, LayerAccount};
use alloy_eips::eip2930::{AccessList, AccessListItem};
use alloy_primitives::{hex, Address, Bytes, TxKind, B256, U256};
use op_revm::revm::{
    bytecode::Bytecode,
    context::{BlockEnv, CfgEnv, TxEnv},
    context_interface::result::{EVMError, ExecutionResult},
    database::WrapDatabaseRef,
    state::{Account, EvmState},
    inspector::{InspectEvm, Inspector},
    interpreter::{interpreter::EthInterpreter, CallInputs, CallOutcome, Interpreter}, ExecuteEvm,
};
use op_revm::revm::context_interface::Cfg as _;
use op_revm::{L1BlockInfo, OpHaltReason, OpSpecId, OpTransaction, OpTransactionError};
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

/// geth's default gas cap for eth_call / eth_estimateGas.
const RPC_GAS_CAP: u64 = 50_000_000;

/// geth-style state overrides as a layer on top of the snapshot.
/// An override's code lives in its layer's account info only (never in the shared code map, which would grow with
/// every caller's overrides).
pub(crate) fn override_layer(db: &Db, overrides: &Value) -> Result<Option<Layer>, ReadError> {
    let Some(map) = overrides.as_object() else { return Ok(None) };
    let mut layer = Layer::default();
    for (addr, o) in map {
        let a: Address = addr.parse().map_err(|_| invalid(format!("state override: bad address {addr}")))?;
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
            let bc = Bytecode::new_raw_checked(code).map_err(|e| invalid(format!("stateOverrides code: {e}")))?;
            info.code_hash = bc.hash_slow();
            info.code = Some(bc);
        }
        let whole = o.get("state").filter(|v| !v.is_null());
        let diff = o.get("stateDiff").filter(|v| !v.is_null());
        if whole.is_some() && diff.is_some() {
            return Err(invalid(format!("state override for {addr}: both state and stateDiff")));
        }
        if let Some(s) = whole.or(diff) {
            acc.storage_reset = whole.is_some();
            for (k, v) in s.as_object().into_iter().flatten() {
                let k = U256::from_str_radix(k.trim_start_matches("0x"), 16).map_err(|_| invalid("state override: bad slot"))?;
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
}

/// The L1 block info a call at `block` runs with: `l1`'s (the snapshot's, read once) when the call sees the snapshot's
/// own state at its own number, else none given (op-revm reads it from the state the call runs on).
fn call_chain(db: &Db, spec: &BlockSpec, block: &BlockEnv, l1: Option<&std::sync::OnceLock<L1BlockInfo>>) -> Result<L1BlockInfo, ReadError> {
    let Some(lock) = l1.filter(|_| block.number == U256::from(spec.number)) else { return Ok(L1BlockInfo::default()) };
    if let Some(info) = lock.get() {
        return Ok(info.clone());
    }
    let mut d = WrapDatabaseRef(Db { top: db.top, below: db.below, shared: db.shared });
    let info = L1BlockInfo::try_fetch(&mut d, block.number, spec.spec).map_err(|e| failed(e.to_string()))?;
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
        caller: req.get("from").filter(|v| !v.is_null()).map(|v| parse(v, "from")).transpose()?.unwrap_or_default(),
        kind: req.get("to").filter(|v| !v.is_null()).map(|v| parse(v, "to")).transpose()?.map_or(TxKind::Create, TxKind::Call),
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
    // The cap is the chain's block gas limit, not an overridden one: a call must not buy gigabytes of EVM memory.
    b.gas_limit = b.gas_limit.min(RPC_GAS_CAP.max(spec.gas_limit));
    let gas_price = req.get("gasPrice").filter(|v| !v.is_null());
    let max_fee = req.get("maxFeePerGas").filter(|v| !v.is_null());
    let tip = req.get("maxPriorityFeePerGas").filter(|v| !v.is_null());
    if let Some(v) = gas_price {
        b.gas_price = hex_fit(v, "gasPrice")?;
        b.tx_type = 0;
    } else if max_fee.is_some() || tip.is_some() {
        b.tx_type = 2;
        b.gas_price = match max_fee {
            Some(v) => hex_fit(v, "maxFeePerGas")?,
            None => (block.basefee as u128).saturating_add(hex_fit(tip.unwrap(), "maxPriorityFeePerGas")?),
        };
        b.gas_priority_fee = match tip {
            Some(v) => Some(hex_fit(v, "maxPriorityFeePerGas")?),
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
        let items = list.as_array().ok_or_else(|| invalid("accessList: not a list"))?;
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
    Ok(CallSetup { tx, cfg, block, chain })
}

/// Runs the call with `gas` within `limit` (see [`Limit`]).
pub(crate) fn run(db: Db, s: &CallSetup, gas: u64, limit: Limit) -> Result<(ExecutionResult<OpHaltReason>, EvmState), ReadError> {
    if Instant::now() >= limit.deadline {
        return Err(limit.exceeded());
    }
    let mut tx = s.tx.clone();
    tx.base.gas_limit = gas;
    let (cfg, block, chain) = (s.cfg.clone(), s.block.clone(), s.chain.clone());
    let out = if limit.timeout.is_some() {
        engine_evm(WrapDatabaseRef(db), cfg, block, chain, ()).transact(tx)
    } else {
        let mut evm = engine_evm(WrapDatabaseRef(db), cfg, block, chain, Budget { deadline: limit.deadline, steps: 0, over: false });
        let out = evm.inspect_tx(tx);
        if evm.0.inspector.over {
            return Err(limit.exceeded());
        }
        out
    };
    out.map(|r| (r.result, r.state)).map_err(|e| ReadError { code: refused_as(&e), message: e.to_string(), data: None })
}

/// The stable code of a call refused as a transaction (eth_simulateV1 with validation tells them apart, as geth's
/// txValidationError; eth_call answers any of them -32000 with its message); E_NODE when the state could not be read;
/// E_FAILED for anything else (an invalid transaction of another kind).
fn refused_as<D>(e: &EVMError<D, OpTransactionError>) -> &'static str {
    use op_revm::revm::context_interface::result::InvalidTransaction as T;
    match e {
        EVMError::Transaction(OpTransactionError::Base(t)) => match t {
            T::NonceTooLow { .. } => "E_NONCE_LOW",
            T::NonceTooHigh { .. } => "E_NONCE_HIGH",
            T::GasPriceLessThanBasefee => "E_FEE_LOW",
            T::CallGasCostMoreThanGasLimit { .. } | T::GasFloorMoreThanGasLimit { .. } => "E_INTRINSIC_GAS",
            T::CallerGasLimitMoreThanBlock => "E_BLOCK_GAS",
            // gas × fee cap + value over the balance, or over 256 bits (geth: insufficient funds either way).
            T::LackOfFundForMaxFee { .. } | T::OverflowPaymentInTransaction => "E_FUNDS",
            T::RejectCallerWithCode => "E_NOT_EOA",
            T::CreateInitCodeSizeLimit => "E_INITCODE",
            // The fee fields contradict each other (geth: tip above fee cap, invalid params).
            T::PriorityFeeGreaterThanMaxFee => "E_FEE_PARAMS",
            _ => "E_FAILED",
        },
        // The state could not be read (the node failed, or a read was refused): no verdict on the call at all.
        EVMError::Database(_) => "E_NODE",
        _ => "E_FAILED",
    }
}

/// How long a read may run.
/// - Inline on the JS thread (`timeout` None): until `deadline`, checked every 256 instructions, and no precompile call
///   given more than [`INLINE_PRECOMPILE_GAS`] (one precompile run is not interruptible); past either it answers
///   [`OVER_BUDGET`] and runs again on a read thread.
/// - On a read thread: until `deadline`, `timeout` after the read was handed over (geth's --rpc.evmtimeout), checked
///   before every EVM run (each run of an estimate, each call of a simulation) and before every node read
///   (`state::within`); past it `E_TIMEOUT`. One run is bounded by its gas: the EVM runs without the inspector an
///   instruction check needs, which would cost the interpreter ~10 %.
#[derive(Clone, Copy)]
pub(crate) struct Limit {
    pub(crate) deadline: Instant,
    pub(crate) timeout: Option<Duration>,
}

impl Limit {
    pub(crate) fn inline(budget: Duration) -> Self {
        Limit { deadline: Instant::now() + budget, timeout: None }
    }

    pub(crate) fn timeout(ms: u32) -> Self {
        let t = Duration::from_millis(ms as u64);
        Limit { deadline: Instant::now() + t, timeout: Some(t) }
    }

    pub(crate) fn exceeded(&self) -> ReadError {
        match self.timeout {
            None => ReadError { code: OVER_BUDGET, message: "over the inline budget".into(), data: None },
            Some(t) => ReadError { code: TIMEOUT, message: format!("execution aborted (timeout = {t:?})"), data: None },
        }
    }
}

/// Stops an inline call at its [`Limit`]: every frame halts. It observes only; an execution within the budget is
/// exactly the one without it.
struct Budget {
    deadline: Instant,
    steps: u32,
    over: bool,
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

/// The code of an inline read that ran out of its budget (never sent: the read runs again elsewhere).
pub(crate) const OVER_BUDGET: &str = "E_OVER_BUDGET";
/// The code of a read past its timeout.
pub(crate) const TIMEOUT: &str = "E_TIMEOUT";

pub(crate) fn failure(r: &ExecutionResult<OpHaltReason>) -> ReadError {
    match r {
        ExecutionResult::Revert { output, .. } => {
            let data = format!("0x{}", hex::encode(output));
            let reason = decode_revert_reason(output);
            ReadError { code: "E_REVERT", message: match reason { Some(m) => format!("execution reverted: {m}"), None => "execution reverted".into() }, data: Some(data) }
        }
        ExecutionResult::Halt { reason, .. } => failed(halt_message(reason)),
        ExecutionResult::Success { .. } => failed("ok"),
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
    let end = U256::from_be_slice(&out[36..68]).try_into().ok().and_then(|l: usize| l.checked_add(68)).filter(|e| *e <= out.len())?;
    String::from_utf8(out[68..end].to_vec()).ok()
}

pub(crate) fn estimate<'a>(db: &dyn Fn() -> Db<'a>, spec: &BlockSpec, tx: &Value, block_overrides: &Value, l1: Option<&std::sync::OnceLock<L1BlockInfo>>, limit: Limit) -> Result<Value, ReadError> {
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
    let (first, _) = run(db(), &s, hi, limit)?;
    if !first.is_success() {
        return Err(failure(&first));
    }
    let used = first.tx_gas_used();
    let refunded = first.gas().inner_refunded();
    let mut lo = used.saturating_sub(1).max(20_999);
    // geth's optimistic guess, the first probe when it is strictly between the bounds: what was used (before refunds)
    // plus 1/63 for the call-stipend rule.
    let mut guess = Some(((used + refunded) * 64 / 63).min(hi)).filter(|&g| g > lo && g < hi);
    while lo + 1 < hi {
        let mid = guess.take().unwrap_or(lo + (hi - lo) / 2);
        let (r, _) = run(db(), &s, mid, limit)?;
        if r.is_success() {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(json!(format!("0x{hi:x}")))
}

pub(crate) fn access_list<'a>(db: &dyn Fn() -> Db<'a>, spec: &BlockSpec, tx: &Value, block_overrides: &Value, l1: Option<&std::sync::OnceLock<L1BlockInfo>>, limit: Limit) -> Result<Value, ReadError> {
    let mut s = call_setup(&db(), spec, tx, block_overrides, l1)?;
    let from = s.tx.base.caller;
    let to = s.tx.base.kind.to().copied();
    let precompiles: Vec<Address> = (1u64..=0x11).map(|i| Address::from_word(B256::from(U256::from(i)))).chain(std::iter::once(Address::from_word(B256::from(U256::from(0x100u64))))).collect();
    // geth iterates until the list is stable: accessing a slot may change which slots are accessed.
    let mut list = s.tx.base.access_list.clone();
    let mut last: Option<(ExecutionResult<OpHaltReason>, AccessList)> = None;
    // An account's touched slots, sorted.
    let item = |address: Address, acc: &Account| {
        let mut storage_keys: Vec<B256> = acc.storage.keys().map(|k| B256::from(*k)).collect();
        storage_keys.sort();
        AccessListItem { address, storage_keys }
    };
    for _ in 0..4 {
        s.tx.base.access_list = list.clone();
        if s.tx.base.tx_type == 0 {
            s.tx.base.tx_type = 1;
        }
        let (r, state) = run(db(), &s, s.tx.base.gas_limit, limit)?;
        let mut items: Vec<AccessListItem> = Vec::new();
        let mut addrs: Vec<&Address> = state.keys().collect();
        addrs.sort();
        for a in addrs {
            if *a == from || Some(*a) == to || precompiles.contains(a) || *a == spec.coinbase {
                continue;
            }
            items.push(item(*a, &state[a]));
        }
        // Slots of the sender and recipient are listed too (geth lists every touched slot, excluding only addresses).
        for a in [Some(from), to].into_iter().flatten() {
            if let Some(acc) = state.get(&a).filter(|acc| !acc.storage.is_empty()) {
                items.push(item(a, acc));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::NodeClient;
    use crate::state::{Shared, Snapshot};
    use serde_json::json;

    #[test]
    fn a_fee_or_block_number_too_large_is_invalid_input_never_a_panic() {
        // A panic here would poison the engine: one eth_call would restart it.
        let shared = Shared::new(NodeClient::new("http://127.0.0.1:9/", 100).unwrap(), usize::MAX);
        let spec = BlockSpec::for_tests();
        let db = Db { top: None, below: &[], shared: &shared };
        let max = format!("{:#x}", u128::MAX);
        let over = format!("{:#x}", U256::from(u128::MAX) + U256::from(1));
        for field in ["gasPrice", "maxFeePerGas", "maxPriorityFeePerGas"] {
            let fits = call_setup(&db, &spec, &json!({ field: max, "nonce": "0x0" }), &Value::Null, None);
            assert!(fits.is_ok(), "{field} = 2^128 - 1 is taken");
            let e = call_setup(&db, &spec, &json!({ field: over, "nonce": "0x0" }), &Value::Null, None).err().expect("refused");
            assert_eq!((e.code, e.message.as_str()), ("E_INPUT", format!("{field}: too large").as_str()));
        }
        let snap = Snapshot { layers: Vec::new(), l1: Default::default() };
        for (field, value) in [("number", format!("{:#x}", U256::from(u64::MAX) + U256::from(1))), ("time", "0x1".to_string() + &"0".repeat(20))] {
            let payload = json!({ "blockStateCalls": [{ "blockOverrides": { field: value } }] });
            let e = crate::simulate::simulate(&shared, &spec, &snap, &payload, Limit::timeout(5_000)).expect_err("refused");
            assert_eq!((e.code, e.message.as_str()), ("E_INPUT", format!("blockOverrides.{field}: too large").as_str()));
        }
        // The block after one at u64::MAX: too large, not a wrap to block 0.
        let payload = json!({ "blockStateCalls": [{ "blockOverrides": { "number": format!("{:#x}", u64::MAX) } }, {}] });
        let e = crate::simulate::simulate(&shared, &spec, &snap, &payload, Limit::timeout(5_000)).expect_err("refused");
        assert_eq!((e.code, e.message.as_str()), ("E_INPUT", "blockOverrides.number: too large"));
    }

    #[test]
    fn hostile_call_inputs_are_errors_or_bounded_never_a_panic_or_an_abort() {
        let shared = Shared::new(NodeClient::new("http://127.0.0.1:9/", 100).unwrap(), usize::MAX);
        let spec = BlockSpec::for_tests();
        let db = Db { top: None, below: &[], shared: &shared };
        // A code override starting 0xef01 that is no EIP-7702 delegation (revm's new_raw panics on it).
        let mut known = Layer::default();
        known.accounts.insert(Address::with_last_byte(1), crate::state::LayerAccount::default());
        let at_known = Db { top: Some(&known), below: &[], shared: &shared };
        let e = override_layer(&at_known, &json!({ "0x0000000000000000000000000000000000000001": { "code": "0xef01" } })).err().map(|e| e.code);
        assert_eq!(e, Some("E_INPUT"));
        // Revert data whose Error(string) length is 2^64 - 1: 68 + length wraps (the slice panicked).
        let mut out = vec![0x08, 0xc3, 0x79, 0xa0];
        out.extend([0u8; 32]);
        out.extend(U256::from(u64::MAX).to_be_bytes::<32>());
        assert_eq!(decode_revert_reason(&Bytes::from(out.clone())), None);
        out.splice(36..68, U256::from(2).to_be_bytes::<32>());
        out.extend(b"no");
        assert_eq!(decode_revert_reason(&Bytes::from(out)).as_deref(), Some("no"));
        // An overridden block gas limit does not raise the gas a call may buy (1 TB of EVM memory aborted the process).
        let huge = format!("{:#x}", u64::MAX);
        let s = call_setup(&db, &spec, &json!({ "gas": huge, "nonce": "0x0" }), &json!({ "gasLimit": huge }), None).expect("set up");
        assert_eq!(s.tx.base.gas_limit, RPC_GAS_CAP.max(spec.gas_limit));
        assert_eq!(s.block.gas_limit, u64::MAX, "the block's GASLIMIT is still the override");
    }
}
