//! Traces at `pending`: geth's `debug_trace*` and parity's `trace_*`, from the executed flashblocks. A transaction is
//! traced by executing its flashblock again from the state before it (index 0's system calls and the earlier
//! transactions run without a tracer), with the pending block's env; a call on the newest (or a pinned) executed
//! state. The tracers are revm-inspectors' (geth's built-in ones through its DebugInspector, parity's through its
//! TracingInspector and trace builders); this file is only the glue: which state, which transactions, which shape.
//!
//! Bounded: every trace has a deadline and a size limit; both stop the EVM (every frame halts) and answer an error,
//! never a partial trace. Runs on the engine's read threads, on immutable snapshots: never behind an apply.
use crate::evm::{engine_evm, EngineEvm};
use crate::apply::system_calls;
use crate::call::{call_setup, override_layer};
use crate::error::{failed, invalid, ReadError};
use crate::spec::BlockSpec;
use crate::tx::{prepare_all, Prepared};
use crate::state::{Db, Layer, Shared, Snapshot};
use alloy_primitives::{Address, B256};
use alloy_rpc_types_eth::TransactionInfo;
use alloy_rpc_types_trace::geth::{GethDebugBuiltInTracerType, GethDebugTracerType, GethDebugTracingOptions};
use alloy_rpc_types_trace::parity::TraceType;
use op_revm::revm::context_interface::result::ResultAndState;
use op_revm::revm::database::CacheDB;
use op_revm::revm::interpreter::interpreter::EthInterpreter;
use op_revm::revm::interpreter::interpreter_types::StackTr;
use op_revm::revm::interpreter::{CallInputs, CallOutcome, CreateInputs, CreateOutcome, Gas, InstructionResult, Interpreter, InterpreterResult, InterpreterTypes};
use op_revm::revm::{DatabaseCommit, ExecuteCommitEvm, InspectEvm, Inspector};
use op_revm::{L1BlockInfo, OpHaltReason};
use revm_inspectors::tracing::{DebugInspector, DebugInspectorError, TracingInspector, TracingInspectorConfig, TransactionContext};
use serde_json::{json, Value};
use alloy_primitives::map::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One executed flashblock as a trace replays it.
pub struct Flashblock<'a> {
    pub spec: &'a BlockSpec,
    pub index: u64,
    /// The state before it: layers newest first (its block's earlier flashblocks, then the parent's).
    pub below: &'a [Arc<Layer>],
    /// Its transactions (EIP-2718) and their senders where recovered at ingest, as it was applied.
    pub txs: &'a crate::tx::Txs,
    pub senders: &'a [Option<Address>],
    /// transactionIndex of its first transaction within the block.
    pub first_pos: u64,
}

/// geth's default per-trace timeout.
const DEFAULT_TIMEOUT_MS: u64 = 5_000;
/// The answer bound when the request gives none (the daemon always gives --max-response-bytes).
const DEFAULT_MAX_BYTES: usize = 64 << 20;
/// The fewest bytes one recorded EVM step takes in an answer (a struct log or vmTrace entry): the step count is
/// bounded by the answer bound over this, so a trace that could never be sent stops early instead of filling memory.
const MIN_STEP_BYTES: usize = 48;

fn timeout() -> ReadError {
    failed("execution timeout")
}

fn too_large(max: usize) -> ReadError {
    ReadError { code: "E_TOO_LARGE", message: format!("trace larger than the response limit ({max} bytes)"), data: None }
}

/// Why a guarded trace stopped.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    Timeout,
    TooLarge,
}

/// Stops a trace past its deadline (checked every 256 steps), past `max_steps` recorded steps, or once what the
/// tracers copy passes `max_bytes` (each call's or create's input; each recorded step's stack, 32 bytes a word): every
/// frame then halts out of gas, and the trace answers an error. A tracer's memory so never outgrows the answer bound,
/// whatever a transaction passes around in a loop. It observes only; a trace within its bounds is exactly the
/// execution without it.
struct Guard {
    deadline: Instant,
    max_steps: u64,
    steps: u64,
    /// Step records hold the stack (the struct logger, a mux holding it).
    records_steps: bool,
    max_bytes: usize,
    bytes: usize,
    stop: Option<Stop>,
}

impl Guard {
    /// Counts `n` bytes the tracers copy.
    fn charge(&mut self, n: usize) {
        self.bytes = self.bytes.saturating_add(n);
    }

    fn check(&mut self) {
        if self.stop.is_none() {
            if self.steps > self.max_steps || self.bytes > self.max_bytes {
                self.stop = Some(Stop::TooLarge);
            } else if self.steps.is_multiple_of(256) && Instant::now() >= self.deadline {
                self.stop = Some(Stop::Timeout);
            }
        }
    }
}

impl<CTX, INTR: InterpreterTypes> Inspector<CTX, INTR> for Guard {
    fn step(&mut self, interp: &mut Interpreter<INTR>, _context: &mut CTX) {
        self.steps += 1;
        if self.records_steps {
            self.charge(interp.stack.len() * 32);
        }
        self.check();
        if self.stop.is_some() {
            interp.halt_oog();
        }
    }

    fn call(&mut self, _context: &mut CTX, inputs: &mut CallInputs) -> Option<CallOutcome> {
        self.charge(inputs.input.len());
        self.check();
        self.stop.map(|_| CallOutcome::new_oog(inputs.gas_limit, inputs.return_memory_offset.clone()))
    }

    fn create(&mut self, _context: &mut CTX, inputs: &mut CreateInputs) -> Option<CreateOutcome> {
        self.charge(inputs.init_code().len());
        self.check();
        self.stop.map(|_| CreateOutcome::new(InterpreterResult::new(InstructionResult::OutOfGas, alloy_primitives::Bytes::new(), Gas::new(inputs.gas_limit())), None))
    }
}

/// What every trace request may say of its bounds: `timeoutMs`, `maxBytes`.
struct Bounds {
    deadline: Instant,
    max_bytes: usize,
}

impl Bounds {
    fn of(req: &Value) -> Bounds {
        let ms = req["timeoutMs"].as_u64().unwrap_or(DEFAULT_TIMEOUT_MS);
        let max_bytes = req["maxBytes"].as_u64().map_or(DEFAULT_MAX_BYTES, |b| b as usize);
        Bounds { deadline: Instant::now() + Duration::from_millis(ms), max_bytes }
    }

    fn guard(&self, records_steps: bool) -> Guard {
        let max_steps = if records_steps { (self.max_bytes / MIN_STEP_BYTES) as u64 } else { u64::MAX };
        Guard { deadline: self.deadline, max_steps, steps: 0, records_steps, max_bytes: self.max_bytes, bytes: 0, stop: None }
    }

    fn check_time(&self) -> Result<(), ReadError> {
        if Instant::now() >= self.deadline {
            return Err(timeout());
        }
        Ok(())
    }

    /// `v` when its JSON fits the bound.
    fn fit(&self, v: Value) -> Result<Value, ReadError> {
        if json_len(&v) > self.max_bytes {
            return Err(too_large(self.max_bytes));
        }
        Ok(v)
    }

    fn stopped(&self, g: &Guard) -> Result<(), ReadError> {
        match g.stop {
            Some(Stop::Timeout) => Err(timeout()),
            Some(Stop::TooLarge) => Err(too_large(self.max_bytes)),
            None => Ok(()),
        }
    }
}

/// The length of `v` as JSON, without keeping the text.
fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// Adds `v` to a block trace's answer `out` of `size` bytes so far, or refuses once the answer would pass `max`.
fn push_bounded(out: &mut Vec<Value>, size: &mut usize, v: Value, max: usize) -> Result<(), ReadError> {
    *size += json_len(&v);
    if *size > max {
        return Err(too_large(max));
    }
    out.push(v);
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------------
// Requests

/// geth's tracing options (`options`), refused with a clear error when they name no built-in tracer.
fn geth_options(req: &Value) -> Result<GethDebugTracingOptions, ReadError> {
    let mut raw = match &req["options"] {
        Value::Null => json!({}),
        v => v.clone(),
    };
    // geth's muxTracer takes `{}` for a tracer without options (4byteTracer, noopTracer); revm-inspectors' mux wants
    // nothing there (and `{}`, not nothing, for the others).
    if raw["tracer"] == "muxTracer" {
        if let Some(m) = raw.get_mut("tracerConfig").and_then(|c| c.as_object_mut()) {
            for (name, v) in m.iter_mut() {
                if matches!(name.as_str(), "4byteTracer" | "noopTracer") && v.as_object().is_some_and(|o| o.is_empty()) {
                    *v = Value::Null;
                }
            }
        }
    }
    let opts: GethDebugTracingOptions = serde_json::from_value(raw).map_err(|e| invalid(format!("tracer options: {e}")))?;
    if let Some(GethDebugTracerType::JsTracer(name)) = &opts.tracer {
        return Err(invalid(format!(
            "tracer {:?} is not a built-in tracer; JavaScript tracers are not supported (built-in: callTracer, prestateTracer, 4byteTracer, flatCallTracer, muxTracer, noopTracer, or none for the struct logger)",
            short(name)
        )));
    }
    Ok(opts)
}

fn short(s: &str) -> String {
    if s.len() <= 40 {
        s.to_string()
    } else {
        format!("{}…", &s[..s.char_indices().take_while(|(i, _)| *i < 40).last().map_or(0, |(i, c)| i + c.len_utf8())])
    }
}

/// Whether these options record every EVM step (the struct logger, or a mux holding none of the others).
fn geth_records_steps(opts: &GethDebugTracingOptions) -> bool {
    matches!(&opts.tracer, None | Some(GethDebugTracerType::BuiltInTracer(GethDebugBuiltInTracerType::MuxTracer)))
}

fn debug_inspector(opts: GethDebugTracingOptions) -> Result<DebugInspector, ReadError> {
    DebugInspector::new(opts).map_err(|e| match e {
        DebugInspectorError::InvalidTracerConfig => invalid("invalid tracerConfig for this tracer"),
        DebugInspectorError::UnsupportedTracer => invalid("unsupported tracer"),
        other => invalid(other.to_string()),
    })
}

/// `traceTypes` of a parity request: a non-empty subset of trace, stateDiff, vmTrace.
fn trace_types(v: &Value) -> Result<HashSet<TraceType>, ReadError> {
    let list: Vec<TraceType> = serde_json::from_value(v.clone()).map_err(|_| invalid("trace types: expected a list of \"trace\", \"stateDiff\", \"vmTrace\""))?;
    if list.is_empty() {
        return Err(invalid("trace types: empty (ask for \"trace\", \"stateDiff\" and/or \"vmTrace\")"));
    }
    Ok(list.into_iter().collect())
}

fn hash_of(req: &Value) -> Result<B256, ReadError> {
    req["hash"].as_str().and_then(|s| s.parse().ok()).ok_or_else(|| invalid("hash: expected a 32-byte transaction hash"))
}

fn block_hash_of(req: &Value) -> Option<B256> {
    req["blockHash"].as_str().and_then(|s| s.parse().ok())
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<Value, ReadError> {
    serde_json::to_value(v).map_err(|e| failed(format!("trace encoding: {e}")))
}

fn exec_failed<E: std::fmt::Display>(what: &str, e: E) -> ReadError {
    failed(format!("{what}: {e}"))
}

// ---------------------------------------------------------------------------------------------------------------
// Replaying a flashblock

type TraceDb<'d> = CacheDB<Db<'d>>;
type TraceEvm<'d, I> = EngineEvm<TraceDb<'d>, (I, Guard)>;

/// One transaction a replay traced: where it is, and the state before it through `db` (read by prestate and state
/// diff builders) together with the inspector that watched it.
struct Traced<'e, I> {
    prepared: &'e Prepared,
    position: u64,
    result: &'e ResultAndState<OpHaltReason>,
    inspector: &'e mut I,
    db: &'e TraceDb<'e>,
    evm_tx: &'e op_revm::OpTransaction<op_revm::revm::context::TxEnv>,
    block: &'e op_revm::revm::context::BlockEnv,
}

/// Executes `fb`'s transactions in order, each committed; those `want` picks run under the inspector (reset before
/// each by `fresh`) and are handed to `each` before their changes are committed. Stops after the transaction `each`
/// returns true for.
fn replay<I>(
    shared: &Shared,
    fb: &Flashblock,
    bounds: &Bounds,
    records_steps: bool,
    mut fresh: impl FnMut() -> Result<I, ReadError>,
    want: impl Fn(&Prepared) -> bool,
    mut each: impl FnMut(Traced<'_, I>) -> Result<bool, ReadError>,
) -> Result<(), ReadError>
where
    I: for<'d> Inspector<op_revm::OpContext<TraceDb<'d>>, EthInterpreter>,
{
    let prepared = prepare_all(fb.txs, fb.senders, fb.spec.base_fee)?;
    // The state a replay of `fb` starts from: the state before it, and for index 0 the block's pre-execution system
    // calls applied (as the apply did them).
    let mut system = Layer::default();
    if fb.index == 0 {
        system_calls(shared, fb.below, fb.spec, &mut system)?;
    }
    let start = Db { top: Some(&system), below: fb.below, shared };
    let mut evm: TraceEvm<'_, I> = engine_evm(CacheDB::new(start), fb.spec.cfg(), fb.spec.block_env(), L1BlockInfo::default(), (fresh()?, bounds.guard(records_steps)));
    for (i, p) in prepared.iter().enumerate() {
        bounds.check_time()?;
        // A post-exec (0x7D) transaction is not executed (see tx::prepare): nothing to trace.
        let Some(tx) = p.tx.clone() else { continue };
        if !want(p) {
            evm.transact_commit(tx).map_err(|e| exec_failed(&format!("transaction {:#x}", p.hash), e))?;
            continue;
        }
        evm.0.inspector.0 = fresh()?;
        let result = evm.inspect_tx(tx).map_err(|e| exec_failed(&format!("transaction {:#x}", p.hash), e))?;
        bounds.stopped(&evm.0.inspector.1)?;
        let inner = &mut evm.0;
        let done = each(Traced {
            prepared: p,
            position: fb.first_pos + i as u64,
            result: &result,
            inspector: &mut inner.inspector.0,
            db: &inner.ctx.journaled_state.database,
            evm_tx: &inner.ctx.tx,
            block: &inner.ctx.block,
        })?;
        if done {
            return Ok(());
        }
        evm.0.ctx.journaled_state.database.commit(result.state);
    }
    Ok(())
}

/// The trace of the transaction `hash` (replayed in the flashblock of `fbs` holding it): what `f` makes of it.
fn one<I>(
    shared: &Shared,
    fbs: &[Flashblock],
    bounds: &Bounds,
    hash: B256,
    records_steps: bool,
    fresh: impl FnMut() -> Result<I, ReadError>,
    mut f: impl FnMut(Traced<'_, I>, &Flashblock) -> Result<Value, ReadError>,
) -> Result<Value, ReadError>
where
    I: for<'d> Inspector<op_revm::OpContext<TraceDb<'d>>, EthInterpreter>,
{
    let fb = holding(fbs, hash)?;
    let mut out = None;
    replay(shared, fb, bounds, records_steps, fresh, |p| p.hash == hash, |t| {
        out = Some(f(t, fb)?);
        Ok(true)
    })?;
    bounds.fit(out.ok_or_else(|| failed(format!("transaction {hash:#x} is not executed (a post-exec transaction)")))?)
}

/// The traces of every transaction of `fbs` in order: the values `f` makes of each, in one list.
fn all<I>(
    shared: &Shared,
    fbs: &[Flashblock],
    bounds: &Bounds,
    records_steps: bool,
    mut fresh: impl FnMut() -> Result<I, ReadError>,
    mut f: impl FnMut(Traced<'_, I>, &Flashblock) -> Result<Vec<Value>, ReadError>,
) -> Result<Value, ReadError>
where
    I: for<'d> Inspector<op_revm::OpContext<TraceDb<'d>>, EthInterpreter>,
{
    let mut out = Vec::new();
    let mut size = 0;
    for fb in fbs {
        replay(shared, fb, bounds, records_steps, &mut fresh, |_| true, |t| {
            for v in f(t, fb)? {
                push_bounded(&mut out, &mut size, v, bounds.max_bytes)?;
            }
            Ok(false)
        })?;
    }
    Ok(Value::Array(out))
}

/// The flashblock of `fbs` (one: the one carrying the transaction) that holds `hash`, or an error.
fn holding<'a, 'b>(fbs: &'b [Flashblock<'a>], hash: B256) -> Result<&'b Flashblock<'a>, ReadError> {
    for fb in fbs {
        for raw in fb.txs.iter() {
            if alloy_primitives::keccak256(raw) == hash {
                return Ok(fb);
            }
        }
    }
    Err(failed(format!("transaction {hash:#x} not found in the executed flashblock")))
}

fn tx_info(p: &Prepared, position: u64, fb: &Flashblock, block_hash: Option<B256>) -> TransactionInfo {
    TransactionInfo {
        hash: Some(p.hash),
        index: Some(position),
        block_hash,
        block_number: Some(fb.spec.number),
        base_fee: Some(fb.spec.base_fee),
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------------------------------------------
// geth: debug_traceTransaction, debug_traceBlock*, debug_traceCall

/// The geth trace of the transaction `t` watched with `insp`.
fn geth_result(t: Traced<'_, DebugInspector>, block_hash: Option<B256>) -> Result<Value, ReadError> {
    let ctx = TransactionContext { block_hash, tx_index: Some(t.position as usize), tx_hash: Some(t.prepared.hash) };
    let mut db = t.db;
    let mux = matches!(t.inspector, DebugInspector::Mux(..));
    let trace = t.inspector.get_result(Some(ctx), t.evm_tx, t.block, t.result, &mut db).map_err(|e| failed(format!("tracer: {e}")))?;
    let mut v = to_json(&trace)?;
    if mux {
        top_gas_is_the_limit(&mut v, op_revm::revm::context_interface::Transaction::gas_limit(t.evm_tx));
    }
    Ok(v)
}

/// A muxTracer's callTracer and flatCallTracer report the top call's gas as the transaction's gas limit, as geth's
/// (and these tracers alone here) do: revm-inspectors' mux leaves it at the gas left after the intrinsic cost.
fn top_gas_is_the_limit(mux: &mut Value, gas_limit: u64) {
    let limit = json!(format!("{gas_limit:#x}"));
    if let Some(top) = mux.get_mut("callTracer").and_then(|c| c.as_object_mut()) {
        top.insert("gas".into(), limit.clone());
    }
    for f in mux.get_mut("flatCallTracer").and_then(|c| c.as_array_mut()).into_iter().flatten() {
        if f["traceAddress"].as_array().is_some_and(|a| a.is_empty()) {
            if let Some(action) = f.get_mut("action").and_then(|a| a.as_object_mut()) {
                action.insert("gas".into(), limit.clone());
            }
        }
    }
}

fn trace_transaction(shared: &Shared, fbs: &[Flashblock], req: &Value) -> Result<Value, ReadError> {
    let bounds = Bounds::of(req);
    let hash = hash_of(req)?;
    let opts = geth_options(req)?;
    let steps = geth_records_steps(&opts);
    one(shared, fbs, &bounds, hash, steps, || debug_inspector(opts.clone()), |t, _| geth_result(t, block_hash_of(req)))
}

fn trace_block(shared: &Shared, fbs: &[Flashblock], req: &Value) -> Result<Value, ReadError> {
    let bounds = Bounds::of(req);
    let opts = geth_options(req)?;
    let steps = geth_records_steps(&opts);
    all(shared, fbs, &bounds, steps, || debug_inspector(opts.clone()), |t, _| {
        let hash = t.prepared.hash;
        Ok(vec![json!({ "txHash": format!("{hash:#x}"), "result": geth_result(t, block_hash_of(req))? })])
    })
}

/// The database of a call on `snap`: the snapshot with the request's state overrides on top.
fn call_db<'a>(shared: &'a Shared, snap: &'a Snapshot, overrides: Option<&'a Layer>) -> Db<'a> {
    Db { top: overrides, below: &snap.layers, shared }
}

fn trace_call(shared: &Shared, spec: &BlockSpec, snap: &Snapshot, req: &Value) -> Result<Value, ReadError> {
    let bounds = Bounds::of(req);
    let opts = geth_options(req)?;
    let steps = geth_records_steps(&opts);
    let base = call_db(shared, snap, None);
    let overrides = override_layer(&base, &req["stateOverrides"])?;
    let db = call_db(shared, snap, overrides.as_ref());
    let l1 = if overrides.is_none() { Some(&snap.l1) } else { None };
    let s = call_setup(&db, spec, &req["tx"], &req["blockOverrides"], l1)?;
    let mut evm: TraceEvm<'_, DebugInspector> = engine_evm(CacheDB::new(db), s.cfg, s.block, s.chain, (debug_inspector(opts)?, bounds.guard(steps)));
    let result = evm.inspect_tx(s.tx).map_err(|e| exec_failed("call", e))?;
    bounds.stopped(&evm.0.inspector.1)?;
    let inner = &mut evm.0;
    let mut d = &inner.ctx.journaled_state.database;
    let mux = matches!(inner.inspector.0, DebugInspector::Mux(..));
    let trace = inner.inspector.0.get_result(None, &inner.ctx.tx, &inner.ctx.block, &result, &mut d).map_err(|e| failed(format!("tracer: {e}")))?;
    let mut v = to_json(&trace)?;
    if mux {
        top_gas_is_the_limit(&mut v, op_revm::revm::context_interface::Transaction::gas_limit(&inner.ctx.tx));
    }
    bounds.fit(v)
}

// ---------------------------------------------------------------------------------------------------------------
// parity: trace_call(Many), trace_replayTransaction, trace_replayBlockTransactions, trace_transaction, trace_block

/// The tracer configuration for `types`: revm-inspectors' parity one, with storage writes recorded for a vmTrace too
/// (its `ex.store` of an SSTORE is empty otherwise, where OpenEthereum gave the key and value).
fn parity_config(types: &HashSet<TraceType>) -> TracingInspectorConfig {
    let c = TracingInspectorConfig::from_parity_config(types);
    if types.contains(&TraceType::VmTrace) {
        c.set_state_diffs(true)
    } else {
        c
    }
}

fn parity_records_steps(types: &HashSet<TraceType>) -> bool {
    types.contains(&TraceType::VmTrace)
}

/// `trace`/`stateDiff`/`vmTrace` results of the transaction `t`.
fn parity_results(t: Traced<'_, TracingInspector>, types: &HashSet<TraceType>) -> Result<Value, ReadError> {
    let insp = std::mem::take(t.inspector);
    let r = insp.into_parity_builder().into_trace_results_with_state(t.result, types, t.db).map_err(|e| failed(e.0))?;
    to_json(&r)
}

/// The localized traces (trace_transaction's shape) of the transaction `t`.
fn parity_localized(t: Traced<'_, TracingInspector>, fb: &Flashblock, block_hash: Option<B256>) -> Result<Vec<Value>, ReadError> {
    let info = tx_info(t.prepared, t.position, fb, block_hash);
    let insp = std::mem::take(t.inspector);
    insp.into_parity_builder().into_localized_transaction_traces(info).iter().map(to_json).collect()
}

/// A parity replay's result: the transaction's `trace`/`stateDiff`/`vmTrace` and its hash.
fn replayed(t: Traced<'_, TracingInspector>, types: &HashSet<TraceType>) -> Result<Value, ReadError> {
    let hash = t.prepared.hash;
    let mut v = parity_results(t, types)?;
    v["transactionHash"] = json!(format!("{hash:#x}"));
    Ok(v)
}

fn replay_transaction(shared: &Shared, fbs: &[Flashblock], req: &Value) -> Result<Value, ReadError> {
    let bounds = Bounds::of(req);
    let hash = hash_of(req)?;
    let types = trace_types(&req["traceTypes"])?;
    let config = parity_config(&types);
    one(shared, fbs, &bounds, hash, parity_records_steps(&types), || Ok(TracingInspector::new(config)), |t, _| replayed(t, &types))
}

fn replay_block(shared: &Shared, fbs: &[Flashblock], req: &Value) -> Result<Value, ReadError> {
    let bounds = Bounds::of(req);
    let types = trace_types(&req["traceTypes"])?;
    let config = parity_config(&types);
    all(shared, fbs, &bounds, parity_records_steps(&types), || Ok(TracingInspector::new(config)), |t, _| Ok(vec![replayed(t, &types)?]))
}

fn transaction_parity(shared: &Shared, fbs: &[Flashblock], req: &Value) -> Result<Value, ReadError> {
    let bounds = Bounds::of(req);
    let hash = hash_of(req)?;
    let fresh = || Ok(TracingInspector::new(TracingInspectorConfig::default_parity()));
    one(shared, fbs, &bounds, hash, false, fresh, |t, fb| Ok(Value::Array(parity_localized(t, fb, block_hash_of(req))?)))
}

fn block_parity(shared: &Shared, fbs: &[Flashblock], req: &Value) -> Result<Value, ReadError> {
    let bounds = Bounds::of(req);
    all(shared, fbs, &bounds, false, || Ok(TracingInspector::new(TracingInspectorConfig::default_parity())), |t, fb| parity_localized(t, fb, block_hash_of(req)))
}

/// trace_callMany (trace_call is a list of one): each call on the state the previous ones left.
fn call_many(shared: &Shared, spec: &BlockSpec, snap: &Snapshot, req: &Value) -> Result<Value, ReadError> {
    let bounds = Bounds::of(req);
    let calls = req["calls"].as_array().ok_or_else(|| invalid("calls: expected a list of [call, traceTypes]"))?;
    let base = call_db(shared, snap, None);
    let overrides = override_layer(&base, &req["stateOverrides"])?;
    let db = call_db(shared, snap, overrides.as_ref());
    let mut cache = CacheDB::new(call_db(shared, snap, overrides.as_ref()));
    let mut out = Vec::with_capacity(calls.len());
    let mut size = 0;
    for c in calls {
        bounds.check_time()?;
        let types = trace_types(&c["traceTypes"])?;
        // The caller's nonce as the earlier calls left it (a call without a nonce takes the sender's).
        let mut tx = c["tx"].clone();
        if tx.get("nonce").is_none_or(|n| n.is_null()) {
            if let Some(from) = tx.get("from").and_then(|f| f.as_str()).and_then(|f| f.parse::<Address>().ok()) {
                use op_revm::revm::Database as _;
                let nonce = cache.basic(from).map_err(|e| failed(e.0))?.map_or(0, |a| a.nonce);
                tx["nonce"] = json!(format!("0x{nonce:x}"));
            }
        }
        let s = call_setup(&db, spec, &tx, &req["blockOverrides"], None)?;
        let insp = TracingInspector::new(parity_config(&types));
        let mut evm: TraceEvm<'_, TracingInspector> = engine_evm(cache, s.cfg, s.block, s.chain, (insp, bounds.guard(parity_records_steps(&types))));
        let result = evm.inspect_tx(s.tx).map_err(|e| exec_failed("call", e))?;
        bounds.stopped(&evm.0.inspector.1)?;
        let insp = std::mem::take(&mut evm.0.inspector.0);
        let v = to_json(&insp.into_parity_builder().into_trace_results_with_state(&result, &types, &evm.0.ctx.journaled_state.database).map_err(|e| failed(e.0))?)?;
        push_bounded(&mut out, &mut size, v, bounds.max_bytes)?;
        cache = std::mem::replace(&mut evm.0.ctx.journaled_state.database, CacheDB::new(call_db(shared, snap, overrides.as_ref())));
        cache.commit(result.state);
    }
    Ok(Value::Array(out))
}

/// Whether `method` is a trace this module answers.
pub fn is_trace(method: &str) -> bool {
    matches!(
        method,
        "traceTransaction" | "traceBlock" | "traceCall" | "traceCallMany" | "traceReplayTransaction" | "traceReplayBlock" | "traceTransactionParity" | "traceBlockParity"
    )
}

/// Whether `method` traces a whole block (all of its executed flashblocks up to the one asked for).
pub fn is_block_trace(method: &str) -> bool {
    matches!(method, "traceBlock" | "traceReplayBlock" | "traceBlockParity")
}

/// Answers trace request `req`. `fbs`: the flashblock carrying the transaction (transaction traces), or the block's
/// executed flashblocks from index 0 in order (block traces); `spec` and `snap`: the state calls run on.
pub fn answer(shared: &Shared, fbs: &[Flashblock], spec: &BlockSpec, snap: &Snapshot, req: &Value) -> Result<Value, ReadError> {
    match req["method"].as_str().unwrap_or("") {
        "traceTransaction" => trace_transaction(shared, fbs, req),
        "traceBlock" => trace_block(shared, fbs, req),
        "traceCall" => trace_call(shared, spec, snap, req),
        "traceCallMany" => call_many(shared, spec, snap, req),
        "traceReplayTransaction" => replay_transaction(shared, fbs, req),
        "traceReplayBlock" => replay_block(shared, fbs, req),
        "traceTransactionParity" => transaction_parity(shared, fbs, req),
        "traceBlockParity" => block_parity(shared, fbs, req),
        m => Err(ReadError { code: "E_UNSUPPORTED", message: format!("engine trace {m:?} not supported"), data: None }),
    }
}

#[cfg(test)]
mod tests {
    //! Traces of a flashblock applied over a stub node: the replay starts from the state before the flashblock and
    //! runs the earlier transactions untraced; the bounds stop a trace with an error, never a partial answer.
    use super::*;
    use crate::apply::{apply, OpenBlock};
    use crate::node::NodeClient;
    use crate::stubnode::{StubAccount, StubNode};
    use alloy_eips::eip2718::Encodable2718;
    use alloy_primitives::{TxKind, U256};
    use op_alloy_consensus::OpTxEnvelope;

    const CHAIN: u64 = 901;
    /// SLOAD 0, +1, SSTORE 0.
    const COUNTER: [u8; 10] = [0x60, 0x00, 0x54, 0x60, 0x01, 0x01, 0x60, 0x00, 0x55, 0x00];
    /// CALL 0x52 with all gas, no data; then STOP.
    const CALLER: [u8; 16] = [0x60, 0x00, 0x60, 0x00, 0x60, 0x00, 0x60, 0x00, 0x60, 0x00, 0x60, 0x52, 0x5a, 0xf1, 0x50, 0x00];

    fn addr(n: u8) -> Address {
        Address::with_last_byte(n)
    }

    fn spec() -> BlockSpec {
        BlockSpec::for_tests()
    }

    fn raw(nonce: u64, to: Address) -> Vec<u8> {
        let tx = alloy_consensus::TxEip1559 {
            chain_id: CHAIN,
            nonce,
            gas_limit: 200_000,
            max_fee_per_gas: 10,
            max_priority_fee_per_gas: 1,
            to: TxKind::Call(to),
            value: U256::ZERO,
            access_list: Default::default(),
            input: Default::default(),
        };
        let sig = alloy_primitives::Signature::new(U256::from(1), U256::from(1), false);
        OpTxEnvelope::Eip1559(alloy_consensus::Signed::new_unhashed(tx, sig)).encoded_2718()
    }

    struct Setup {
        _node: StubNode,
        shared: Shared,
        spec: BlockSpec,
        layer: Arc<Layer>,
        txs: crate::tx::Txs,
        senders: Vec<Option<Address>>,
        receipts: Vec<crate::receipt::Executed>,
    }

    /// Flashblock 1 of block 2: the sender calls the counter (slot 0 → 1), then the caller, which calls the counter
    /// (slot 0 → 2).
    fn setup() -> Setup {
        let sender = addr(0x01);
        let mut accounts = std::collections::HashMap::new();
        accounts.insert(sender, StubAccount { balance: U256::from(10u128.pow(21)), ..Default::default() });
        accounts.insert(addr(0x52), StubAccount { code: Some(COUNTER.to_vec()), ..Default::default() });
        accounts.insert(addr(0x53), StubAccount { code: Some(CALLER.to_vec()), ..Default::default() });
        let node = StubNode::start(accounts);
        let shared = Shared::new(NodeClient::new(&node.url, 5_000).unwrap(), usize::MAX);
        let block = OpenBlock { next_index: 1, ..OpenBlock::new(spec(), Vec::new()) };
        let txs = crate::tx::Txs::of(&[raw(0, addr(0x52)), raw(1, addr(0x53))]);
        let senders = vec![Some(sender); 2];
        let (layer, receipts) = apply(&shared, &block, 1, &txs, &senders).expect("the flashblock executes");
        Setup { _node: node, shared, spec: spec(), layer: Arc::new(layer), txs, senders, receipts }
    }

    impl Setup {
        fn fb(&self) -> Flashblock<'_> {
            Flashblock { spec: &self.spec, index: 1, below: &[], txs: &self.txs, senders: &self.senders, first_pos: 3 }
        }
        fn after(&self) -> Snapshot {
            Snapshot { layers: vec![self.layer.clone()], l1: Default::default() }
        }
        fn ask(&self, req: Value) -> Result<Value, ReadError> {
            answer(&self.shared, &[self.fb()], &self.spec, &self.after(), &req)
        }
        fn hash(&self, i: usize) -> String {
            format!("{:#x}", alloy_primitives::keccak256(self.txs.get(i)))
        }
    }

    fn err(r: Result<Value, ReadError>) -> ReadError {
        match r {
            Ok(v) => panic!("expected an error, got {v}"),
            Err(e) => e,
        }
    }

    #[test]
    fn a_transaction_is_traced_on_the_state_the_earlier_ones_left() {
        let s = setup();
        let pre = s.ask(json!({"method": "traceTransaction", "hash": s.hash(1), "options": {"tracer": "prestateTracer"}})).unwrap();
        let counter = &pre[format!("{:#x}", addr(0x52))];
        assert_eq!(counter["storage"][format!("{:#x}", B256::ZERO)], json!(format!("{:#x}", B256::with_last_byte(1))), "tx 0 wrote 1 before tx 1 ran: {pre}");
        let calls = s.ask(json!({"method": "traceTransaction", "hash": s.hash(1), "options": {"tracer": "callTracer"}})).unwrap();
        assert_eq!(calls["to"], json!(format!("{:#x}", addr(0x53))));
        assert_eq!(calls["calls"][0]["to"], json!(format!("{:#x}", addr(0x52))), "the inner call: {calls}");
        let mux = s.ask(json!({"method": "traceTransaction", "hash": s.hash(1), "options": {"tracer": "muxTracer", "tracerConfig": {"callTracer": {}, "4byteTracer": {}}}})).unwrap();
        assert_eq!(mux["callTracer"], calls, "geth's mux config with {{}} for option-less tracers; its callTracer is the callTracer's");
        let steps = s.ask(json!({"method": "traceTransaction", "hash": s.hash(1)})).unwrap();
        assert_eq!(steps["gas"], json!(s.receipts[1].gas_used), "the struct logger's gas is the receipt's");
        assert_eq!(steps["failed"], json!(false));
        assert!(steps["structLogs"].as_array().unwrap().iter().any(|l| l["op"] == "CALL"));
    }

    #[test]
    fn a_block_trace_has_every_transaction_in_order() {
        let s = setup();
        let all = s.ask(json!({"method": "traceBlock", "options": {"tracer": "callTracer"}})).unwrap();
        let hashes: Vec<_> = all.as_array().unwrap().iter().map(|t| t["txHash"].clone()).collect();
        assert_eq!(hashes, vec![json!(s.hash(0)), json!(s.hash(1))]);
        let flat = s.ask(json!({"method": "traceBlockParity", "blockHash": format!("{:#x}", B256::with_last_byte(9))})).unwrap();
        let flat = flat.as_array().unwrap();
        assert_eq!(flat.len(), 3, "one call, then a call with one inner call: {flat:?}");
        assert_eq!(flat[2]["transactionPosition"], json!(4), "positions count from the flashblock's first: {flat:?}");
        assert_eq!(flat[2]["traceAddress"], json!([0]));
    }

    #[test]
    fn parity_state_diff_shows_the_transactions_own_change() {
        let s = setup();
        let r = s.ask(json!({"method": "traceReplayTransaction", "hash": s.hash(1), "traceTypes": ["stateDiff", "trace"]})).unwrap();
        let slot = &r["stateDiff"][format!("{:#x}", addr(0x52))]["storage"][format!("{:#x}", B256::ZERO)]["*"];
        assert_eq!(slot["from"], json!(format!("{:#x}", B256::with_last_byte(1))), "{r}");
        assert_eq!(slot["to"], json!(format!("{:#x}", B256::with_last_byte(2))));
        assert_eq!(r["transactionHash"], json!(s.hash(1)));
        let vm = s.ask(json!({"method": "traceReplayTransaction", "hash": s.hash(1), "traceTypes": ["vmTrace"]})).unwrap();
        let ops = vm["vmTrace"]["ops"].as_array().expect("vmTrace ops");
        let call = ops.iter().find(|o| o["sub"].is_object()).expect("the CALL's sub-trace");
        let store = call["sub"]["ops"].as_array().unwrap().iter().find(|o| o["op"] == "SSTORE").and_then(|o| o["ex"]["store"].as_object().cloned()).expect("the inner SSTORE's store");
        assert_eq!(store["val"], json!("0x2"), "the counter's write in the inner call: {store:?}");
    }

    #[test]
    fn calls_run_on_the_state_after_the_flashblock_and_call_many_carries_state() {
        let s = setup();
        let call = json!({"from": format!("{:#x}", addr(0x01)), "to": format!("{:#x}", addr(0x52))});
        let pre = s.ask(json!({"method": "traceCall", "tx": call, "options": {"tracer": "prestateTracer"}})).unwrap();
        let calls = s.ask(json!({"method": "traceCall", "tx": call, "options": {"tracer": "callTracer"}})).unwrap();
        let mux = s.ask(json!({"method": "traceCall", "tx": call, "options": {"tracer": "muxTracer", "tracerConfig": {"callTracer": {}}}})).unwrap();
        assert_eq!(mux["callTracer"], calls, "a call's muxTracer callTracer is the callTracer's, top gas included");
        assert_eq!(pre[format!("{:#x}", addr(0x52))]["storage"][format!("{:#x}", B256::ZERO)], json!(format!("{:#x}", B256::with_last_byte(2))));
        let many = s.ask(json!({"method": "traceCallMany", "calls": [{"tx": call, "traceTypes": ["stateDiff"]}, {"tx": call, "traceTypes": ["stateDiff"]}]})).unwrap();
        let to = |i: usize| many[i]["stateDiff"][format!("{:#x}", addr(0x52))]["storage"][format!("{:#x}", B256::ZERO)]["*"]["to"].clone();
        assert_eq!((to(0), to(1)), (json!(format!("{:#x}", B256::with_last_byte(3))), json!(format!("{:#x}", B256::with_last_byte(4)))), "{many}");
    }

    #[test]
    fn bounds_and_bad_tracers_answer_errors() {
        let s = setup();
        let e = err(s.ask(json!({"method": "traceTransaction", "hash": s.hash(1), "timeoutMs": 0})));
        assert_eq!((e.code, e.message.as_str()), ("E_FAILED", "execution timeout"));
        let e = err(s.ask(json!({"method": "traceTransaction", "hash": s.hash(1), "maxBytes": 200})));
        assert_eq!(e.code, "E_TOO_LARGE", "{}", e.message);
        let e = err(s.ask(json!({"method": "traceBlock", "maxBytes": 200})));
        assert_eq!(e.code, "E_TOO_LARGE", "{}", e.message);
        let e = err(s.ask(json!({"method": "traceTransaction", "hash": s.hash(1), "options": {"tracer": "{step: function() {}}"}})));
        assert_eq!(e.code, "E_INPUT");
        assert!(e.message.contains("JavaScript tracers are not supported"), "{}", e.message);
        let e = err(s.ask(json!({"method": "traceTransaction", "hash": format!("{:#x}", B256::with_last_byte(7))})));
        assert!(e.message.contains("not found"), "{}", e.message);
        let e = err(s.ask(json!({"method": "traceReplayTransaction", "hash": s.hash(1), "traceTypes": []})));
        assert_eq!(e.code, "E_INPUT");
    }

    #[test]
    fn a_call_loop_passing_large_inputs_stops_at_the_byte_bound_not_at_the_deadline_or_the_memory() {
        let s = setup();
        // 64 KiB of memory, then CALL(gas, 0xdead, 0, 0, 64 KiB, 0, 0) in a loop until the gas runs out: a callTracer
        // copies every input (30 M gas: ~200,000 calls, ~13 GB), where the steps are few and cheap.
        let code = "0x600161ffe0525b60006000620100006000600061dead5af150600656";
        let looper = "0x00000000000000000000000000000000000000aa";
        let req = |tracer: &str| json!({"method": "traceCall", "tx": {"from": format!("{:#x}", addr(0x01)), "to": looper, "gas": "0x1c9c380"},
            "stateOverrides": {looper: {"code": code}}, "options": {"tracer": tracer}, "maxBytes": 1 << 20, "timeoutMs": 600_000});
        for tracer in ["callTracer", "flatCallTracer"] {
            let e = err(s.ask(req(tracer)));
            assert_eq!(e.code, "E_TOO_LARGE", "{tracer}: {}", e.message);
        }
    }
}
