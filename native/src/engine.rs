//! flashblocksd's native core, as N-API functions: an OP-stack EVM (op-revm) that keeps the pending block open and
//! executes each flashblock's new transactions on it, with a state cache over the node that survives blocks.
//!
//! Threads: one apply thread (flashblocks and settles, strictly in call order) and a few read threads; the JS event
//! loop only hands over a string and gets a Promise. Reads take the newest published snapshot, so they never wait for
//! an apply and never see half a flashblock. A panic is caught at the thread boundary, rejects its Promise with code
//! E_PANIC and poisons the engine (the TypeScript side starts a new one); it never aborts the process.
use crate::apply::OpenBlock;
use crate::call::Limit;
use crate::error::{EngineError, ReadError};
use crate::spec::BlockSpec;
use crate::tx::Txs;
use crate::{apply, changes, node, read as reads, receipt, spec, state, trace};
use napi::bindgen_prelude::*;
use napi::{Env, JsDeferred};
use napi_derive::napi;
use alloy_primitives::B256;
use serde_json::{json, Value};
use crate::state::{Shared, Snapshot};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::thread;

/// Rust's allocations only (V8's heap is its own): the EVM allocates per read and per transaction.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

type Job = Box<dyn FnOnce() + Send + 'static>;
type Resolver = Box<dyn FnOnce(Env) -> napi::Result<String> + Send + 'static>;

/// The newest executed flashblock, as reads see it.
struct Head {
    spec: BlockSpec,
    snap: Snapshot,
    number: u64,
    index: u64,
    /// This engine's count of published heads when this one was: a head (re)executed at the same position has a
    /// higher one, so JS can tell answers from two heads apart (its read memo, src/exec/memo.ts).
    seq: u64,
    /// What a trace needs to execute this flashblock again: the state before it (layers newest first), its
    /// transactions and senders as applied, and the block position of its first transaction.
    below: Vec<Arc<state::Layer>>,
    txs: Arc<Txs>,
    senders: Arc<Vec<Option<alloy_primitives::Address>>>,
    first_pos: u64,
}

impl Head {
    fn flashblock(&self) -> trace::Flashblock<'_> {
        trace::Flashblock { spec: &self.spec, index: self.index, below: &self.below, txs: &self.txs, senders: &self.senders, first_pos: self.first_pos }
    }
}

struct Inner {
    shared: Shared,
    blocks: Mutex<BTreeMap<u64, OpenBlock>>,
    head: RwLock<Option<Arc<Head>>>,
    /// The last executed flashblocks' snapshots (newest last), for reads pinned to one of them (`at`).
    recent: RwLock<std::collections::VecDeque<Arc<Head>>>,
    panic_next: AtomicBool,
    poisoned: AtomicBool,
    /// Heads published so far (Head::seq).
    head_seq: AtomicU64,
    /// The chain's deposit-nonce convention as learned from its roots (receipt::DepositNonce): 1 when "after".
    deposit_after: AtomicBool,
}

impl Inner {
    fn deposit_nonce(&self) -> receipt::DepositNonce {
        if self.deposit_after.load(Ordering::Relaxed) {
            receipt::DepositNonce::After
        } else {
            receipt::DepositNonce::Before
        }
    }

    fn set_deposit_nonce(&self, m: receipt::DepositNonce) {
        self.deposit_after.store(m == receipt::DepositNonce::After, Ordering::Relaxed);
    }
}

/// The engine: `apply`, `settle`, `read` return Promises of JSON strings.
#[napi]
pub struct Engine {
    inner: Arc<Inner>,
    apply_tx: Mutex<Option<Sender<Job>>>,
    read_tx: Mutex<Option<Sender<Job>>>,
    /// Traces (debug_trace*, trace_*): their own thread at a lower priority, so a burst of traces neither waits in
    /// front of reads nor takes the cores the event loop and the apply thread need.
    trace_tx: Mutex<Option<Sender<Job>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".into()
    }
}

/// Runs `f` on the thread behind `tx`, settling a Promise with its string or `CODE: message` error.
fn submit(env: &Env, tx: &Mutex<Option<Sender<Job>>>, inner: Arc<Inner>, f: impl FnOnce(&Inner) -> std::result::Result<String, EngineError> + Send + 'static) -> Result<Object<'static>> {
    // Refused before a deferred exists: a deferred dropped unsettled keeps its threadsafe function, and with it the
    // Node event loop, alive for good (a process that never exits). `close` and `submit` both run on the JS thread,
    // so the sender seen here is still there at the send below.
    let guard = lock(tx);
    let Some(sender) = guard.as_ref() else {
        return Err(Error::new(Status::GenericFailure, "E_CLOSED: engine closed"));
    };
    let (deferred, promise): (JsDeferred<String, Resolver>, Object<'_>) = env.create_deferred()?;
    let job: Job = Box::new(move || {
        let out = catch_unwind(AssertUnwindSafe(|| f(&inner)));
        match out {
            Ok(Ok(s)) => deferred.resolve(Box::new(move |_| Ok(s))),
            Ok(Err(e)) => deferred.reject(Error::new(Status::GenericFailure, format!("{}: {}", e.code, e.message))),
            Err(p) => {
                inner.poisoned.store(true, Ordering::SeqCst);
                deferred.reject(Error::new(Status::GenericFailure, format!("E_PANIC: {}", panic_text(p))));
            }
        }
    });
    if let Err(e) = sender.send(job) {
        drop(guard);
        // The thread is gone: run the job here so its Promise settles (it only rejects or does little work).
        (e.0)();
    }
    // SAFETY of the lifetime: the promise object belongs to the current handle scope, which outlives this call.
    Ok(unsafe { std::mem::transmute::<Object<'_>, Object<'static>>(promise) })
}

fn spawn_worker(name: String, rx: Arc<Mutex<Receiver<Job>>>, nice: i32) {
    let _ = thread::Builder::new().name(name).stack_size(16 * 1024 * 1024).spawn(move || {
        if nice != 0 {
            lower_priority(nice);
        }
        loop {
            let job = { lock(&rx).recv() };
            match job {
                Ok(job) => job(),
                Err(_) => return,
            }
        }
    });
}

/// The calling thread's nice value raised to `nice` (Linux: per thread). A trace thread at nice 10 gets about a tenth
/// of a core the event loop or the apply thread also wants, and all of an idle one.
fn lower_priority(nice: i32) {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on the calling thread (who = 0) takes plain integers.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, nice);
    }
}

/// The niceness of the trace thread.
const TRACE_NICE: i32 = 10;

#[napi]
impl Engine {
    /// `node_url`: the node's http(s) URL (credentials in it become a Basic authorization). `node_headers`: a JSON
    /// object of extra headers sent with every node call. `node_ca_pem`: a CA trusted besides the Mozilla roots.
    /// `cache_cap_bytes`: the state cache's bound (dropped whole above it). `read_threads`: threads answering reads.
    #[napi(constructor)]
    pub fn new(node_url: String, node_headers: String, node_ca_pem: Option<String>, cache_cap_bytes: f64, read_threads: u32, timeout_ms: u32) -> Result<Self> {
        let invalid = |m: String| Error::new(Status::InvalidArg, m);
        let headers = match serde_json::from_str::<Value>(&node_headers) {
            Ok(Value::Object(m)) => m.into_iter().map(|(k, v)| match v {
                Value::String(v) => Ok((k, v)),
                _ => Err(invalid(format!("node header {k:?}: its value must be a string"))),
            }),
            _ => return Err(invalid("node headers must be a JSON object of strings".into())),
        }
        .collect::<Result<Vec<_>>>()?;
        let options = node::NodeOptions { timeout_ms: timeout_ms as u64, headers, ca_pem: node_ca_pem };
        let node = node::NodeClient::with(&node_url, options).map_err(|e| invalid(e.0))?;
        let inner = Arc::new(Inner {
            shared: Shared::new(node, cache_cap_bytes.max(1.0) as usize),
            blocks: Mutex::new(BTreeMap::new()),
            head: RwLock::new(None),
            recent: RwLock::new(std::collections::VecDeque::new()),
            panic_next: AtomicBool::new(false),
            poisoned: AtomicBool::new(false),
            head_seq: AtomicU64::new(0),
            deposit_after: AtomicBool::new(false),
        });
        let (atx, arx) = channel::<Job>();
        spawn_worker("fbd-apply".into(), Arc::new(Mutex::new(arx)), 0);
        let (rtx, rrx) = channel::<Job>();
        let rrx = Arc::new(Mutex::new(rrx));
        for i in 0..read_threads.clamp(1, 16) {
            spawn_worker(format!("fbd-read-{i}"), rrx.clone(), 0);
        }
        let (ttx, trx) = channel::<Job>();
        spawn_worker("fbd-trace".into(), Arc::new(Mutex::new(trx)), TRACE_NICE);
        Ok(Self { inner, apply_tx: Mutex::new(Some(atx)), read_tx: Mutex::new(Some(rtx)), trace_tx: Mutex::new(Some(ttx)) })
    }

    /// Starts over at canonical height `height`: drops the cache, every open block and the head.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn reset(&self, env: &Env, height: f64) -> Result<Object<'static>> {
        let h = height as u64;
        submit(env, &self.apply_tx, self.inner.clone(), move |inner| {
            lock(&inner.blocks).clear();
            *inner.head.write().unwrap_or_else(|e| e.into_inner()) = None;
            inner.recent.write().unwrap_or_else(|e| e.into_inner()).clear();
            inner.shared.cache.write().unwrap_or_else(|e| e.into_inner()).clear(h);
            Ok("{}".into())
        })
    }

    /// Executes one flashblock. `work`: JSON of the block env, `number`, `index` and the stream's cumulative
    /// `receiptsRoot` (null: none); `txs`: its transactions' EIP-2718 bytes back to back, transaction i at
    /// `txs[bounds[i]..bounds[i + 1]]`; `senders`: 21 bytes per transaction, a flag (1: the sender follows, recovered at
    /// ingest from these bytes; 0: the engine recovers it) and 20 address bytes, or null (the engine recovers all).
    /// Resolves with a line of JSON `{"verified", "depositNonce", "hashes", "ends"}` (verified: the block's receipts
    /// root so far equals `receiptsRoot`, null when none was given; depositNonce: the chain's convention, "pre" or
    /// "reported", when this check decided it — a matching root over a deposit receipt — else null; hashes: the
    /// transactions'; ends: where each receipt ends in what follows), then the receipts' JSON back to back.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn apply(&self, env: &Env, work: String, txs: &[u8], bounds: &[u32], senders: Option<&[u8]>) -> Result<Object<'static>> {
        let txs = Txs::new(txs.to_vec(), bounds.to_vec());
        let senders = senders.map(|s| s.to_vec());
        submit(env, &self.apply_tx, self.inner.clone(), move |inner| apply(inner, &work, txs?, senders.as_deref()))
    }

    /// Block `number` is canonical with `hash` and `receipts_root` (empty strings: the header is not known). When the
    /// engine executed all of it (no failed flashblock) on the canonical state below, its receipts root is compared:
    /// equal, its changes are folded into the cache; else the cache is dropped. Resolves with
    /// `{"matched": true|false|null, "dropped": [open blocks built on the old state], "depositNonce"}` (matched null:
    /// nothing was compared; depositNonce as `apply` gives it).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn settle(&self, env: &Env, number: f64, hash: String, receipts_root: String) -> Result<Object<'static>> {
        let n = number as u64;
        submit(env, &self.apply_tx, self.inner.clone(), move |inner| settle(inner, n, &hash, &receipts_root))
    }

    /// State reads at the newest executed flashblock, one JSON request `{method, ...}` a line, run in order on one
    /// read thread (a batch costs the JS thread one hand-over and one answer, however many reads it holds). Resolves
    /// with their answers, one a line in the same order: `{"result": …}`, `{"error": {code, message, data}}` or
    /// `{"unavailable": true}`. A read not answered `timeout_ms` after this call (waiting included) stops and answers
    /// E_TIMEOUT.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn read(&self, env: &Env, reqs: String, timeout_ms: u32) -> Result<Object<'static>> {
        let limit = Limit::timeout(timeout_ms);
        submit(env, &self.read_tx, self.inner.clone(), move |inner| Ok(reqs.split('\n').map(|r| read(inner, r, limit)).collect::<Vec<_>>().join("\n")))
    }

    /// A trace (`trace::answer`'s requests), on the trace thread; answered as `read` answers.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn trace(&self, env: &Env, req: String) -> Result<Object<'static>> {
        // A trace is bounded by its own request's timeoutMs (trace.rs); this limit is for reads only.
        submit(env, &self.trace_tx, self.inner.clone(), move |inner| Ok(read(inner, &req, Limit::timeout(u32::MAX))))
    }

    /// The same read answered on the calling thread when it can be within `budget_us` from memory (state reads and
    /// eth_call; no node read, no waiting on another thread's lock): its answer as `read` gives it, or null (ask
    /// `read`). A panic poisons the engine and throws E_PANIC, as on the engine's threads.
    #[napi]
    pub fn read_inline(&self, req: String, budget_us: u32) -> Result<Option<String>> {
        let inner = &self.inner;
        if inner.poisoned.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let out = catch_unwind(AssertUnwindSafe(|| {
            let v: Value = serde_json::from_str(&req).ok()?;
            let head = head_for(inner, &v, false)?;
            let r = reads::read_inline(&inner.shared, &head.spec, &head.snap, &v, std::time::Duration::from_micros(budget_us as u64))?;
            Some(read_answer(r, &head))
        }));
        match out {
            Ok(v) => Ok(v),
            Err(p) => {
                inner.poisoned.store(true, Ordering::SeqCst);
                Err(Error::new(Status::GenericFailure, format!("E_PANIC: {}", panic_text(p))))
            }
        }
    }

    /// Block `number`'s post-state diff so far: every account its applied flashblocks changed, merged
    /// (`changes::changes_json`), or `null` when the engine does not hold the block (never applied, or settled).
    /// Runs on the apply thread, after every apply and settle submitted before it.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn block_changes(&self, env: &Env, number: f64) -> Result<Object<'static>> {
        if !(number >= 0.0 && number.fract() == 0.0 && number <= u64::MAX as f64) {
            return Err(Error::new(Status::InvalidArg, format!("E_INPUT: block number {number} is not a non-negative integer")));
        }
        let n = number as u64;
        submit(env, &self.apply_tx, self.inner.clone(), move |inner| {
            Ok(match lock(&inner.blocks).get(&n) {
                Some(b) => changes::changes_json(&inner.shared, &b.layers).to_string(),
                None => "null".into(),
            })
        })
    }

    /// JSON-RPC calls this engine made to its node so far (a batch counts its length). Takes no lock.
    #[napi]
    pub fn node_reads(&self) -> f64 {
        self.inner.shared.node.reads() as f64
    }

    /// The state cache's size (its estimate, bytes), or null while the apply thread holds it (the JS thread never
    /// waits for it).
    #[napi]
    pub fn cache_bytes(&self) -> Option<f64> {
        self.inner.shared.cache.try_read().ok().map(|c| c.bytes() as f64)
    }

    /// Times the state cache passed its bound and was dropped whole (its state is read from the node again).
    #[napi]
    pub fn cache_drops(&self) -> f64 {
        self.inner.shared.cache_drops.load(Ordering::Relaxed) as f64
    }

    /// Test hook: the next apply panics inside the engine (proves a panic is an error and a restart, not an abort).
    #[napi]
    pub fn panic_next_apply(&self) {
        self.inner.panic_next.store(true, Ordering::SeqCst);
    }

    /// Stops the engine's threads once their queued work is done.
    #[napi]
    pub fn close(&self) {
        lock(&self.apply_tx).take();
        lock(&self.read_tx).take();
        lock(&self.trace_tx).take();
    }
}

fn u64_of(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// The senders given with a flashblock (see `Engine::apply`): none, or one 21-byte row per transaction.
fn senders_of(rows: Option<&[u8]>, txs: usize) -> std::result::Result<Vec<Option<alloy_primitives::Address>>, EngineError> {
    let Some(rows) = rows else { return Ok(Vec::new()) };
    if rows.len() != 21 * txs {
        return Err(EngineError::new("E_INPUT", format!("senders: {} bytes for {txs} transactions (21 a transaction)", rows.len())));
    }
    rows.chunks_exact(21)
        .map(|r| match r[0] {
            0 => Ok(None),
            1 => Ok(Some(alloy_primitives::Address::from_slice(&r[1..]))),
            f => Err(EngineError::new("E_INPUT", format!("senders: flag {f} (0 or 1)"))),
        })
        .collect()
}

fn apply(inner: &Inner, work: &str, txs: Txs, senders: Option<&[u8]>) -> std::result::Result<String, EngineError> {
    if inner.poisoned.load(Ordering::SeqCst) {
        return Err(EngineError::new("E_POISONED", "engine state lost after a panic; restart it"));
    }
    if inner.panic_next.swap(false, Ordering::SeqCst) {
        panic!("forced panic (test hook)");
    }
    let w: Value = serde_json::from_str(work).map_err(|e| EngineError::new("E_INPUT", e.to_string()))?;
    let number = u64_of(&w["number"]);
    let index = u64_of(&w["index"]);
    let want_root: Option<B256> = match &w["receiptsRoot"] {
        Value::Null => None,
        v => Some(v.as_str().and_then(|s| s.parse().ok()).ok_or_else(|| EngineError::new("E_INPUT", "receiptsRoot: not a 32-byte hex word"))?),
    };
    let senders = senders_of(senders, txs.len())?;
    let mut blocks = lock(&inner.blocks);
    if index == 0 {
        let spec = spec::block_spec(&w)?;
        // A new build at this height replaces the old one, and everything above it.
        let stale: Vec<u64> = blocks.range(number..).map(|(k, _)| *k).collect();
        for k in stale {
            blocks.remove(&k);
        }
        let parent_layers = match blocks.get(&(number - 1)) {
            Some(p) => p.snapshot().layers,
            None => {
                let mut c = inner.shared.cache.write().unwrap_or_else(|e| e.into_inner());
                if c.height + 1 > number {
                    return Err(EngineError::new("E_NOT_NEXT", format!("block {number} is not above the canonical head {}", c.height)));
                }
                if c.height + 1 < number {
                    // The node moved on without us settling the blocks between: their state is unknown here.
                    c.clear(number - 1);
                }
                Vec::new()
            }
        };
        inner.shared.note_hash(number - 1, spec.parent_hash);
        blocks.insert(number, OpenBlock::new(spec, parent_layers));
    }
    let block = blocks.get_mut(&number).ok_or_else(|| EngineError::new("E_NOT_NEXT", format!("block {number} is not open (no index 0)")))?;
    if block.failed {
        return Err(EngineError::new("E_NOT_NEXT", format!("block {number} is not open (flashblock {} failed)", block.next_index)));
    }
    if block.next_index != index {
        return Err(EngineError::new("E_NOT_NEXT", format!("flashblock {number}/{index} out of order (expected index {})", block.next_index)));
    }
    let below = block.snapshot().layers;
    let first_pos = block.tx_count();
    let (layer, receipts) = match apply::apply(&inner.shared, block, index, &txs, &senders) {
        Ok(v) => v,
        Err(e) => {
            // A failed index 0 leaves no open block behind; a later one leaves the block refusing more flashblocks,
            // never folded into the cache at its settle.
            if index == 0 {
                blocks.remove(&number);
            } else if let Some(b) = blocks.get_mut(&number) {
                b.failed = true;
            }
            return Err(e);
        }
    };
    let block = blocks.get_mut(&number).expect("open block");
    block.layers.push(Arc::new(layer));
    block.next_index = index + 1;
    let answer = receipts_answer(&receipts);
    block.receipts.list.extend(receipts);
    // A zero root is no root (OP subblocks, op-reth's own emitter): verified at the canonical block instead.
    let mut decided = None;
    let verified = want_root.filter(|r| !r.is_zero()).map(|want| match block.receipts.check(want, inner.deposit_nonce()) {
        Some(m) => {
            inner.set_deposit_nonce(m);
            decided = block.receipts.has_deposit().then_some(m);
            true
        }
        None => false,
    });
    let seq = inner.head_seq.fetch_add(1, Ordering::SeqCst) + 1;
    let head = Arc::new(Head {
        spec: block.spec.clone(),
        snap: block.snapshot(),
        number,
        index,
        seq,
        below,
        txs: Arc::new(txs),
        senders: Arc::new(senders),
        first_pos,
    });
    {
        let mut h = inner.head.write().unwrap_or_else(|e| e.into_inner());
        if h.as_ref().is_none_or(|h| h.number <= number) {
            *h = Some(head.clone());
        }
    }
    {
        let mut r = inner.recent.write().unwrap_or_else(|e| e.into_inner());
        // A rebuilt block replaces what was executed at and above its height.
        r.retain(|h| h.number < number || (h.number == number && h.index < index));
        r.push_back(head);
        while r.len() > RECENT_HEADS {
            r.pop_front();
        }
    }
    let (hashes, ends, body) = answer;
    Ok(format!("{}\n{body}", json!({ "verified": verified, "depositNonce": decided.map(receipt::DepositNonce::name), "hashes": hashes, "ends": ends })))
}

/// The receipts of an apply as its answer carries them: their hashes, and each receipt's JSON (`Executed::json`) back
/// to back with where each ends, so the TypeScript side keeps one string and parses a receipt only when asked for it.
fn receipts_answer(receipts: &[receipt::Executed]) -> (Vec<String>, Vec<usize>, String) {
    let mut body = String::with_capacity(receipts.len() * 512);
    let mut ends = Vec::with_capacity(receipts.len());
    for r in receipts {
        body.push_str(&r.json().to_string());
        ends.push(body.len());
    }
    (receipts.iter().map(|r| format!("{:#x}", r.hash)).collect(), ends, body)
}

fn settle(inner: &Inner, number: u64, hash: &str, receipts_root: &str) -> std::result::Result<String, EngineError> {
    let mut blocks = lock(&inner.blocks);
    if let Ok(h) = hash.parse() {
        inner.shared.note_hash(number, h);
    }
    let mut dropped = Vec::new();
    let mut matched = None;
    let mut decided = None;
    {
        let mut c = inner.shared.cache.write().unwrap_or_else(|e| e.into_inner());
        if number <= c.height {
            return Ok(json!({ "matched": matched, "dropped": dropped, "depositNonce": null }).to_string());
        }
        if let (Ok(root), Some(b)) = (receipts_root.parse::<B256>(), blocks.get_mut(&number)) {
            if !b.failed && c.height + 1 == number {
                let m = b.receipts.check(root, inner.deposit_nonce());
                if let Some(m) = m {
                    inner.set_deposit_nonce(m);
                    decided = b.receipts.has_deposit().then_some(m);
                }
                matched = Some(m.is_some());
            }
        }
        match (matched, blocks.get(&number)) {
            (Some(true), Some(b)) => {
                for l in &b.layers {
                    c.fold(l);
                }
                c.height = number;
            }
            _ => {
                c.clear(number);
                // Blocks above were built on state that is not the chain's (or not known): void.
                for k in blocks.range(number + 1..).map(|(k, _)| *k).collect::<Vec<_>>() {
                    blocks.remove(&k);
                    dropped.push(k);
                }
            }
        }
    }
    for k in blocks.range(..=number).map(|(k, _)| *k).collect::<Vec<_>>() {
        blocks.remove(&k);
    }
    {
        let mut h = inner.head.write().unwrap_or_else(|e| e.into_inner());
        if h.as_ref().is_some_and(|h| h.number <= number || dropped.contains(&h.number)) {
            *h = None;
        }
    }
    inner.recent.write().unwrap_or_else(|e| e.into_inner()).retain(|h| h.number > number && !dropped.contains(&h.number));
    Ok(json!({ "matched": matched, "dropped": dropped, "depositNonce": decided.map(receipt::DepositNonce::name) }).to_string())
}

/// How many executed flashblocks stay readable by `at` (a few blocks' worth at 10 flashblocks a block).
const RECENT_HEADS: usize = 32;

/// The snapshot a read answers at: the newest executed flashblock, or the one `at` names (`{number, index}`) while it
/// is among the recent ones. `wait`: false on the JS thread (a lock held elsewhere is None: ask a read thread).
fn head_for(inner: &Inner, v: &Value, wait: bool) -> Option<Arc<Head>> {
    let at = v.get("at").filter(|a| a.is_object());
    match at {
        None => {
            if wait {
                inner.head.read().unwrap_or_else(|e| e.into_inner()).clone()
            } else {
                inner.head.try_read().ok()?.clone()
            }
        }
        Some(a) => {
            let (n, i) = (u64_of(&a["number"]), u64_of(&a["index"]));
            let r = if wait { inner.recent.read().unwrap_or_else(|e| e.into_inner()) } else { inner.recent.try_read().ok()? };
            r.iter().rev().find(|h| h.number == n && h.index == i).cloned()
        }
    }
}

fn read(inner: &Inner, req: &str, limit: Limit) -> String {
    let v: Value = match serde_json::from_str(req) {
        Ok(v) => v,
        Err(e) => return json!({"error": {"code": "E_INPUT", "message": e.to_string()}}).to_string(),
    };
    let Some(head) = head_for(inner, &v, true) else { return r#"{"unavailable":true}"#.into() };
    let method = v["method"].as_str().unwrap_or("");
    if trace::is_trace(method) {
        // A block trace replays every executed flashblock of the block up to `at`'s; all of them must still be held.
        let heads: Vec<Arc<Head>> = if trace::is_block_trace(method) {
            let r = inner.recent.read().unwrap_or_else(|e| e.into_inner());
            let mut hs: Vec<Arc<Head>> = r.iter().filter(|h| h.number == head.number && h.index <= head.index).cloned().collect();
            hs.sort_by_key(|h| h.index);
            hs.dedup_by_key(|h| h.index);
            if hs.len() as u64 != head.index + 1 || hs.iter().enumerate().any(|(i, h)| h.index != i as u64) {
                return r#"{"unavailable":true}"#.into();
            }
            hs
        } else {
            vec![head.clone()]
        };
        let fbs: Vec<trace::Flashblock> = heads.iter().map(|h| h.flashblock()).collect();
        return read_answer(trace::answer(&inner.shared, &fbs, &head.spec, &head.snap, &v), &head);
    }
    let (r, timed_out) = state::within(limit.deadline, || reads::read(&inner.shared, &head.spec, &head.snap, &v, limit));
    read_answer(if timed_out { Err(limit.exceeded()) } else { r }, &head)
}

fn read_answer(r: std::result::Result<Value, ReadError>, head: &Head) -> String {
    match r {
        Ok(r) => json!({"result": r, "number": head.number, "index": head.index, "seq": head.seq}).to_string(),
        Err(e) => json!({"error": {"code": e.code, "message": e.message, "data": e.data}, "seq": head.seq}).to_string(),
    }
}
