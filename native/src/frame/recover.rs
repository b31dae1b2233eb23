//! Sender recovery of a natively decoded flashblock's signed transactions, off the JS thread (a few recovery threads
//! at low priority): one recovery for the daemon and the engine (native/src/tx.rs takes these senders).

use alloy_primitives::Address;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::thread::Thread;
use std::time::{Duration, Instant};
use std::sync::{Arc, Mutex, OnceLock};

/// Per transaction: 1 + the sender; 0 when its signature does not recover; 2 when it is not decoded here (a type the
/// engine's decoder lacks, e.g. 0x03): the caller recovers that one itself.
fn sender_of(raw: &[u8]) -> (u8, Address) {
    use alloy_eips::eip2718::Decodable2718;
    use op_alloy_consensus::OpTxEnvelope;
    let Ok(env) = OpTxEnvelope::decode_2718(&mut &raw[..]) else { return (2, Address::ZERO) };
    let r = match &env {
        OpTxEnvelope::Legacy(s) => crate::tx::recover(s.signature(), s.signature_hash()),
        OpTxEnvelope::Eip2930(s) => crate::tx::recover(s.signature(), s.signature_hash()),
        OpTxEnvelope::Eip1559(s) => crate::tx::recover(s.signature(), s.signature_hash()),
        OpTxEnvelope::Eip7702(s) => crate::tx::recover(s.signature(), s.signature_hash()),
        _ => return (2, Address::ZERO),
    };
    match r {
        Ok(a) => (1, a),
        Err(_) => (0, Address::ZERO),
    }
}

/// How long a recovery thread works before it offers its core back (see `recover_all`).
const GIVE_WAY_EVERY: Duration = Duration::from_micros(50);

/// Recovers the senders of the transactions at `bounds` (pairs [start, end) into `bytes`): 21 bytes each, a status
/// (see `sender_of`) and the address, on the calling thread. With `give_way`, the thread yields its core every
/// `GIVE_WAY_EVERY` of work: a low-priority thread woken onto the event loop's core can be picked to run there (the
/// scheduler counts what it is owed) and then keeps the core until the next tick, up to 4 ms here (HZ 250); yielding
/// hands it back within ~50 µs (perf sched, before: the event loop preempted 2–4 ms in half the frames).
pub fn recover_all(bytes: &[u8], bounds: &[(usize, usize)], give_way: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(bounds.len() * 21);
    let mut since = Instant::now();
    for &(a, b) in bounds {
        if give_way && since.elapsed() >= GIVE_WAY_EVERY {
            std::thread::yield_now();
            since = Instant::now();
        }
        let mut r = [0u8; 21];
        if a <= b && b <= bytes.len() {
            let (st, addr) = catch_unwind(|| sender_of(&bytes[a..b])).unwrap_or((2, Address::ZERO));
            r[0] = st;
            r[1..].copy_from_slice(addr.as_slice());
        } else {
            r[0] = 2;
        }
        out.extend_from_slice(&r);
    }
    out
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type Job = Box<dyn FnOnce() + Send + 'static>;

/// One recovery thread's inbox: a lock-free stack of jobs (pushed by any thread, taken whole by its owner) and the
/// thread to unpark. No lock is shared with the event loop: a low-priority thread preempted while holding one would stall
/// it (a shared `Mutex<Receiver>` also made every send wait ~45 µs for the thread holding it).
struct Inbox {
    head: AtomicPtr<Node>,
    thread: Thread,
}

struct Node {
    job: Job,
    next: *mut Node,
}

impl Inbox {
    fn push(&self, job: Job) {
        let node = Box::into_raw(Box::new(Node { job, next: std::ptr::null_mut() }));
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            // SAFETY: `node` is ours until the exchange below publishes it.
            unsafe { (*node).next = head };
            match self.head.compare_exchange_weak(head, node, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(now) => head = now,
            }
        }
        self.thread.unpark();
    }

    /// The owner's loop: takes every queued job (oldest first) and runs it, parks when there is none.
    fn serve(&self) -> ! {
        loop {
            let mut p = self.head.swap(std::ptr::null_mut(), Ordering::Acquire);
            if p.is_null() {
                std::thread::park();
                continue;
            }
            let mut jobs = Vec::new();
            while !p.is_null() {
                // SAFETY: the swap took the whole list; each node came from Box::into_raw in `push` and is freed once.
                let node = unsafe { Box::from_raw(p) };
                p = node.next;
                jobs.push(node.job);
            }
            for job in jobs.into_iter().rev() {
                // A job that panics (recover_all catches per transaction; this is the belt) must not end the thread:
                // the jobs queued behind it would never run and their callers would wait for ever.
                let _ = catch_unwind(AssertUnwindSafe(job));
            }
        }
    }
}

/// The recovery threads (started on first use, then kept for the process's life).
static RECOVERY: OnceLock<Vec<Arc<Inbox>>> = OnceLock::new();
/// The thread the next batch starts on (round robin).
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Recovery threads: one per core, at most 4.
fn recovery_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(4)
}

/// Puts the calling thread in SCHED_IDLE (Linux; any user may): a recovery thread then never preempts a normal
/// thread when it wakes, and yields the core as soon as one wants it — it runs in the time the event loop and the
/// rest of the machine leave (still a small share under full load, so it never starves). Nice 19 was not enough:
/// with kernel 6.18's EEVDF scheduler a woken nice-19 thread took the event loop's core for its whole batch (2–4.5 ms,
/// perf sched: the event loop preempted, state R) whenever the other core was busy; at nice 0 on libuv's pool it did
/// too (bench/ingest.ts paced p99 3.9 ms). Elsewhere the thread keeps the default policy.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: sched_setscheduler reads the sched_param we pass and keeps no pointer to it.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
            // Not permitted (a seccomp or container policy): the lowest nice value instead.
            libc::setpriority(libc::PRIO_PROCESS, 0, 19);
        }
    }
}

fn threads() -> &'static [Arc<Inbox>] {
    RECOVERY.get_or_init(|| (0..recovery_threads()).filter_map(|i| spawn_inbox(format!("fbd-recover-{i}"), true)).collect())
}

/// Starts a thread named `name` serving a new inbox (at idle priority when `idle`); None when it cannot start.
fn spawn_inbox(name: String, idle: bool) -> Option<Arc<Inbox>> {
    let (tx, rx) = channel::<Arc<Inbox>>();
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        if idle {
            lower_priority();
        }
        if let Ok(inbox) = rx.recv() {
            inbox.serve();
        }
    });
    let thread = spawned.ok()?.thread().clone();
    let inbox = Arc::new(Inbox { head: AtomicPtr::new(std::ptr::null_mut()), thread });
    tx.send(inbox.clone()).ok()?;
    Some(inbox)
}

/// The thread for urgent recoveries (`recoverStartUrgent`): one, at the default priority, started on first use.
static URGENT: OnceLock<Option<Arc<Inbox>>> = OnceLock::new();

fn urgent_thread() -> Option<&'static Arc<Inbox>> {
    URGENT.get_or_init(|| spawn_inbox("fbd-recover-urgent".into(), false)).as_ref()
}

/// Runs `job` on recovery thread `k` (modulo their count), or here when there is none (none could start).
fn dispatch(k: usize, job: Job) {
    let all = threads();
    if all.is_empty() {
        return job();
    }
    all[k % all.len()].push(job);
}

/// Where a finished batch goes: the JS callback `(id, rows) => void` that `recoverInit` registered. Weak: it does not
/// keep the event loop alive (the TypeScript side holds the loop while batches are in flight).
type Done = ThreadsafeFunction<FnArgs<(u32, Buffer)>, Unknown<'static>, FnArgs<(u32, Buffer)>, Status, false, true>;

static DONE: OnceLock<Mutex<Option<Arc<Done>>>> = OnceLock::new();

fn done_slot() -> &'static Mutex<Option<Arc<Done>>> {
    DONE.get_or_init(|| Mutex::new(None))
}

/// N-API: registers the callback finished recoveries are handed to (`(id, rows)`: 21 bytes per signed transaction,
/// see `recover_all`); a later call replaces it.
#[napi(js_name = "recoverInit", ts_args_type = "done: (id: number, rows: Buffer) => void")]
pub fn recover_init(done: Done) {
    *lock(done_slot()) = Some(Arc::new(done));
}

/// N-API: starts recovering the senders of `signed` (the layout's triples [index in the flashblock, start, end) into
/// `tx_bytes`) on the recovery threads — a batch of 16 or more split over them — and returns at once; the callback
/// of `recoverInit` gets `(id, rows)` when the last chunk is done. Nothing on the calling thread but a copy of the
/// bytes, a queue push and an unpark.
#[napi(js_name = "recoverStart")]
pub fn recover_start(id: u32, tx_bytes: &[u8], signed: &[u32]) -> napi::Result<()> {
    start(id, tx_bytes, signed, false)
}

/// N-API: as `recoverStart`, on one thread at the default priority instead of the idle-priority ones, whole: for a
/// batch that is late because the recovery threads get no core (every core busy) and that a query waits for: the
/// scheduler shares the cores with it fairly, and the event loop keeps its turns without doing the work.
#[napi(js_name = "recoverStartUrgent")]
pub fn recover_start_urgent(id: u32, tx_bytes: &[u8], signed: &[u32]) -> napi::Result<()> {
    start(id, tx_bytes, signed, true)
}

fn start(id: u32, tx_bytes: &[u8], signed: &[u32], urgent: bool) -> napi::Result<()> {
    let Some(done) = lock(done_slot()).clone() else {
        return Err(napi::Error::from_reason("recoverStart before recoverInit"));
    };
    // try_lock: a recovery thread (low priority) holding the lock may not run again soon; a fresh buffer does then.
    let mut bytes = SPARE.try_lock().ok().and_then(|mut s| s.pop()).unwrap_or_default();
    bytes.clear();
    bytes.extend_from_slice(tx_bytes);
    let mut bounds = SPARE_BOUNDS.try_lock().ok().and_then(|mut s| s.pop()).unwrap_or_default();
    bounds.clear();
    bounds.extend(signed.chunks_exact(3).map(|t| (t[1] as usize, t[2] as usize)));
    let n = bounds.len();
    // The threads started, not available_parallelism() again: that reads cgroup files (~40 µs a call).
    let urgent = if urgent { urgent_thread() } else { None };
    let chunks = if n < 16 || urgent.is_some() { 1 } else { threads().len().clamp(1, n) };
    let batch = Arc::new(Batch { id, bytes, bounds, size: n.div_ceil(chunks).max(1), give_way: urgent.is_none(), parts: Mutex::new(Vec::new()), left: AtomicUsize::new(0), done });
    let chunks = n.div_ceil(batch.size).max(1);
    batch.left.store(chunks, Ordering::Relaxed);
    *lock(&batch.parts) = vec![Vec::new(); chunks];
    if let Some(inbox) = urgent {
        inbox.push(Box::new(move || batch.run(0, 0, 1)));
        return Ok(());
    }
    // One job from here (one thread woken); it queues the batch's other chunks itself, off this thread.
    let first = NEXT.fetch_add(1, Ordering::Relaxed);
    dispatch(first, Box::new(move || batch.run(first, 0, chunks)));
    Ok(())
}

/// N-API: recovers the senders of `signed` (triples as for `recoverStart`) on the calling thread and returns the rows
/// (21 bytes per triple, see `recover_all`). For a read that needs a sender before the recovery threads have it: the
/// same recovery as theirs (~35 µs a transaction through N-API), not a second implementation.
#[napi(js_name = "recoverNow")]
pub fn recover_now(tx_bytes: &[u8], signed: &[u32]) -> Buffer {
    let bounds: Vec<(usize, usize)> = signed.chunks_exact(3).map(|t| (t[1] as usize, t[2] as usize)).collect();
    recover_all(tx_bytes, &bounds, false).into()
}

/// Byte and bound buffers of finished batches, reused so that a batch copies into memory already touched (a fresh
/// 40 KB allocation per flashblock cost ~30 µs of page faults on the event loop at the stream's pace).
static SPARE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
static SPARE_BOUNDS: Mutex<Vec<Vec<(usize, usize)>>> = Mutex::new(Vec::new());
/// Spare buffers kept (a few batches are in flight at most).
const SPARES: usize = 4;

/// One batch's chunks as they finish; the last one hands every row, in order, to the callback.
struct Batch {
    id: u32,
    bytes: Vec<u8>,
    bounds: Vec<(usize, usize)>,
    /// Transactions per chunk.
    size: usize,
    /// Yield the core every `GIVE_WAY_EVERY` (the idle-priority threads); not on the urgent thread, whose every
    /// yield under load waits behind all the machine's runnable threads (bench/combined.ts: nonce queries p99 1.8 s).
    give_way: bool,
    parts: Mutex<Vec<Vec<u8>>>,
    left: AtomicUsize,
    done: Arc<Done>,
}

impl Batch {
    /// Chunk `k` of `chunks`, on recovery thread `first + k`; chunk 0 first hands chunks 1.. to the next threads.
    fn run(self: Arc<Self>, first: usize, k: usize, chunks: usize) {
        if k == 0 {
            for j in 1..chunks {
                let b = self.clone();
                dispatch(first + j, Box::new(move || b.run(first, j, chunks)));
            }
        }
        let (from, to) = (k * self.size, ((k + 1) * self.size).min(self.bounds.len()));
        let rows = recover_all(&self.bytes, &self.bounds[from.min(to)..to], self.give_way);
        lock(&self.parts)[k] = rows;
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            let out = std::mem::take(&mut *lock(&self.parts)).concat();
            // Fails only once the environment is gone (shutdown): nobody waits then.
            let _ = self.done.call(FnArgs::from((self.id, Buffer::from(out))), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        let mut spare = lock(&SPARE);
        if spare.len() < SPARES {
            spare.push(std::mem::take(&mut self.bytes));
        }
        drop(spare);
        let mut spare = lock(&SPARE_BOUNDS);
        if spare.len() < SPARES {
            spare.push(std::mem::take(&mut self.bounds));
        }
    }
}
