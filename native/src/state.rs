//! The engine's state: a cache of the node's canonical state at one height (kept across blocks, bounded), immutable
//! per-flashblock layers of pending changes above it, and the revm `Database` that reads through them. Reads take a
//! snapshot (an `Arc` list of layers) so they never see half a flashblock and never wait for an apply.
use crate::node::{NodeClient, NodeError};
use op_revm::revm::{
    bytecode::Bytecode,
    database_interface::{DBErrorMarker, DatabaseRef},
    primitives::{Address, B256, KECCAK_EMPTY, U256},
    state::{AccountInfo, EvmState},
};
use serde_json::{json, Value};
use std::cell::Cell;
use std::time::Instant;
use std::collections::BTreeMap;

/// The state maps' hash map: foldhash (per-process random seed), several times faster than SipHash on 20- and
/// 32-byte keys, which every account and slot lookup of every layer pays.
pub type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a read on this thread may wait for.
#[derive(Clone, Copy)]
enum Gate {
    /// Anything (applies, traces).
    Open,
    /// Nothing: an inline read on the JS thread — no node read, no lock another thread holds. A read that would wait
    /// fails with [`WOULD_WAIT`] and is run again on a read thread.
    NoWait,
    /// Node reads until this deadline (a read thread's read timeout).
    Until(Instant),
}

thread_local! {
    static GATE: Cell<Gate> = const { Cell::new(Gate::Open) };
    /// Whether the read in progress was refused something by its gate.
    static REFUSED: Cell<bool> = const { Cell::new(false) };
}

/// The error of a read that would have waited (see [`no_wait`]).
pub const WOULD_WAIT: &str = "E_WOULD_WAIT";

/// Runs `f` behind `gate`; returns its result and whether the gate refused it something.
fn gated<R>(gate: Gate, f: impl FnOnce() -> R) -> (R, bool) {
    GATE.with(|c| c.set(gate));
    REFUSED.with(|c| c.set(false));
    let r = f();
    GATE.with(|c| c.set(Gate::Open));
    (r, REFUSED.with(|c| c.replace(false)))
}

/// Runs `f` with this thread in no-wait mode; returns its result and whether it would have waited somewhere.
pub fn no_wait<R>(f: impl FnOnce() -> R) -> (R, bool) {
    gated(Gate::NoWait, f)
}

/// Runs `f` with node reads refused past `deadline` on this thread; returns its result and whether one was refused.
pub fn within<R>(deadline: Instant, f: impl FnOnce() -> R) -> (R, bool) {
    gated(Gate::Until(deadline), f)
}

fn waiting() -> bool {
    matches!(GATE.with(|c| c.get()), Gate::NoWait)
}

/// Whether this thread may read the node now (see [`Gate`]).
fn may_read_node() -> Result<(), DbError> {
    match GATE.with(|c| c.get()) {
        Gate::NoWait => Err(would_wait()),
        Gate::Until(d) if Instant::now() >= d => Err(refused("the read's time ran out before a node read")),
        _ => Ok(()),
    }
}

fn refused(why: &str) -> DbError {
    REFUSED.with(|c| c.set(true));
    DbError(why.into())
}

fn would_wait() -> DbError {
    refused(WOULD_WAIT)
}

/// A read lock; in no-wait mode only when free at once.
fn read_lock<T>(l: &RwLock<T>) -> Result<RwLockReadGuard<'_, T>, DbError> {
    if waiting() {
        return match l.try_read() {
            Ok(g) => Ok(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Ok(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => Err(would_wait()),
        };
    }
    Ok(l.read().unwrap_or_else(|e| e.into_inner()))
}

/// What one node batch of [`Shared::fetch`] read: accounts (None: empty) and slots.
#[derive(Default)]
struct Fetched {
    accounts: Vec<(Address, Option<AccountInfo>)>,
    slots: Vec<(Address, U256, U256)>,
}

/// A database error: the node could not answer (the apply or read fails; nothing half-applied is published).
#[derive(Debug, Clone)]
pub struct DbError(pub String);

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for DbError {}
impl DBErrorMarker for DbError {}

impl From<NodeError> for DbError {
    fn from(e: NodeError) -> Self {
        DbError(e.0)
    }
}

/// The node's canonical state at `height`, as far as it has been read.
#[derive(Default)]
pub struct Cache {
    pub height: u64,
    /// None: the account does not exist. Code lives in `Shared::codes`.
    accounts: HashMap<Address, Option<AccountInfo>>,
    storage: HashMap<Address, HashMap<U256, U256>>,
    bytes: usize,
}

const ACCOUNT_BYTES: usize = 120;
const SLOT_BYTES: usize = 96;

impl Cache {
    pub fn clear(&mut self, height: u64) {
        self.height = height;
        self.accounts.clear();
        self.storage.clear();
        self.bytes = 0;
    }
    pub fn bytes(&self) -> usize {
        self.bytes
    }
    fn put_account(&mut self, a: Address, info: Option<AccountInfo>) {
        if self.accounts.insert(a, info).is_none() {
            self.bytes += ACCOUNT_BYTES;
        }
    }
    fn put_slot(&mut self, a: Address, k: U256, v: U256) {
        if self.storage.entry(a).or_default().insert(k, v).is_none() {
            self.bytes += SLOT_BYTES;
        }
    }
    /// Applies a settled block's changes (the block is canonical and equals what was executed).
    pub fn fold(&mut self, layer: &Layer) {
        for (a, acc) in &layer.accounts {
            if acc.storage_reset {
                if let Some(s) = self.storage.remove(a) {
                    self.bytes = self.bytes.saturating_sub(s.len() * SLOT_BYTES);
                }
            }
            self.put_account(*a, acc.info.clone());
            for (k, v) in &acc.storage {
                self.put_slot(*a, *k, *v);
            }
        }
    }
}

/// One account's changes within a layer.
#[derive(Clone, Default, Debug)]
pub struct LayerAccount {
    /// None: destroyed (or never existed after an override).
    pub info: Option<AccountInfo>,
    pub storage: HashMap<U256, U256>,
    /// Storage below this layer is void for this account (created, destroyed, or overridden whole).
    pub storage_reset: bool,
}

/// The state changes of one flashblock (or of the system calls that open a block, or of a read's overrides).
#[derive(Default, Debug)]
pub struct Layer {
    pub accounts: HashMap<Address, LayerAccount>,
}

impl Layer {
    /// Records the changes revm reports after one transaction.
    pub fn commit(&mut self, state: EvmState, codes: &RwLock<HashMap<B256, Bytecode>>) {
        for (address, account) in state {
            if !account.is_touched() {
                continue;
            }
            let entry = self.accounts.entry(address).or_default();
            if account.is_selfdestructed() {
                entry.info = None;
                entry.storage.clear();
                entry.storage_reset = true;
                continue;
            }
            if account.is_created() {
                entry.storage.clear();
                entry.storage_reset = true;
            }
            let mut info = account.info;
            if let Some(code) = &info.code {
                if info.code_hash != KECCAK_EMPTY {
                    if let Ok(mut c) = codes.write() {
                        c.entry(info.code_hash).or_insert_with(|| code.clone());
                    }
                }
            }
            info.account_id = None;
            entry.info = Some(info);
            for (k, slot) in account.storage {
                if slot.is_changed() {
                    entry.storage.insert(k, slot.present_value());
                }
            }
        }
    }
}

/// Everything the engine's threads share.
pub struct Shared {
    pub node: NodeClient,
    pub cache: RwLock<Cache>,
    pub codes: RwLock<HashMap<B256, Bytecode>>,
    /// Canonical and pending block hashes known (parent hashes from `base`, settled blocks, node reads).
    pub hashes: RwLock<BTreeMap<u64, B256>>,
    pub cap_bytes: usize,
    /// Times the cache passed `cap_bytes` and was dropped whole.
    pub cache_drops: AtomicU64,
}

impl Shared {
    pub fn new(node: NodeClient, cap_bytes: usize) -> Self {
        Self {
            node,
            cache: RwLock::new(Cache::default()),
            codes: RwLock::new(HashMap::default()),
            hashes: RwLock::new(BTreeMap::new()),
            cap_bytes,
            cache_drops: AtomicU64::new(0),
        }
    }

    /// Keeps the block-hash map to the last 512 blocks below `newest`.
    pub fn note_hash(&self, number: u64, hash: B256) {
        if let Ok(mut h) = self.hashes.write() {
            h.insert(number, hash);
            while h.len() > 512 {
                let first = *h.keys().next().unwrap();
                h.remove(&first);
            }
        }
    }

    fn over_cap(&self) {
        let mut c = self.cache.write().unwrap_or_else(|e| e.into_inner());
        if c.bytes > self.cap_bytes {
            let h = c.height;
            c.clear(h);
            self.cache_drops.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Reads accounts (balance, nonce, code each) and slots the cache lacks from the node, in one batch, at the
    /// cache's height. Best-effort: the list is a guess at what a flashblock touches, so an item the node cannot
    /// answer (a witness-backed node lacks what the block never touched) stays uncached and fails only if the EVM
    /// then reads it ([`Self::canonical_account`], [`Self::canonical_slot`]). A node that cannot be reached at all
    /// fails it.
    pub fn prefetch(&self, addresses: &[Address], slots: &[(Address, U256)]) -> Result<(), DbError> {
        self.fetch(addresses, slots, false).map(|_| ())
    }

    /// `prefetch`; `strict`: an item the node cannot answer fails the read (its error, never a zero). Returns what it
    /// read from the node (nothing for what was cached already), whether or not the cache kept it.
    fn fetch(&self, addresses: &[Address], slots: &[(Address, U256)], strict: bool) -> Result<Fetched, DbError> {
        let (height, missing, missing_slots) = {
            let c = self.cache.read().unwrap_or_else(|e| e.into_inner());
            let mut seen = std::collections::HashSet::with_hasher(foldhash::fast::RandomState::default());
            let m: Vec<Address> = addresses.iter().copied().filter(|a| !c.accounts.contains_key(a) && seen.insert(*a)).collect();
            let ms: Vec<(Address, U256)> = slots
                .iter()
                .copied()
                .filter(|(a, k)| c.storage.get(a).is_none_or(|s| !s.contains_key(k)))
                .collect();
            (c.height, m, ms)
        };
        if missing.is_empty() && missing_slots.is_empty() {
            return Ok(Fetched::default());
        }
        let tag = format!("0x{height:x}");
        let mut calls = Vec::with_capacity(missing.len() * 3 + missing_slots.len());
        for a in &missing {
            let a = format!("{a:#x}");
            calls.push(("eth_getBalance".to_string(), json!([a, tag])));
            calls.push(("eth_getTransactionCount".to_string(), json!([a, tag])));
            calls.push(("eth_getCode".to_string(), json!([a, tag])));
        }
        for (a, k) in &missing_slots {
            calls.push(("eth_getStorageAt".to_string(), json!([format!("{a:#x}"), format!("{k:#x}"), tag])));
        }
        let answers = self.node.batch(&calls)?;
        // An item's answer, or None (skipped) when it failed and the read is not strict.
        let item = |r: &Result<Value, NodeError>, what: &dyn Fn() -> String| -> Result<Option<Value>, DbError> {
            match r {
                Ok(v) => Ok(Some(v.clone())),
                Err(e) if strict => Err(DbError(format!("{}: {}", what(), e.0))),
                Err(_) => Ok(None),
            }
        };
        let mut infos = Vec::with_capacity(missing.len());
        // Accounts whose code the node could not give (a witness-backed node lacks the bytes of code no transaction
        // of the block ran): their code hash comes from eth_getProof, one batch for all of them.
        let mut codeless: Vec<(Address, U256, u64)> = Vec::new();
        for (i, a) in missing.iter().enumerate() {
            let what = || format!("account {a:#x}");
            let (Some(bal), Some(nonce)) = (item(&answers[3 * i], &what)?, item(&answers[3 * i + 1], &what)?) else { continue };
            let nonce: u64 = quantity(&nonce)?.try_into().map_err(|_| DbError(format!("{}: the node's nonce is over 2^64", what())))?;
            let bal = quantity(&bal)?;
            match &answers[3 * i + 2] {
                Ok(code) => infos.push((*a, self.account_info(bal, nonce, data(code)?)?)),
                Err(_) => codeless.push((*a, bal, nonce)),
            }
        }
        if !codeless.is_empty() {
            let proofs: Vec<(String, Value)> = codeless.iter().map(|(a, _, _)| ("eth_getProof".to_string(), json!([format!("{a:#x}"), [], tag]))).collect();
            let proved = self.node.batch(&proofs)?;
            for ((a, bal, nonce), proof) in codeless.into_iter().zip(proved) {
                let Some(proof) = item(&proof, &|| format!("code of {a:#x} unavailable and eth_getProof failed"))? else { continue };
                let hash: B256 = proof
                    .get("codeHash")
                    .and_then(|h| h.as_str())
                    .and_then(|h| h.parse().ok())
                    .ok_or_else(|| DbError(format!("eth_getProof of {a:#x}: no codeHash")))?;
                infos.push((a, self.account_without_code(bal, nonce, hash)));
            }
        }
        let mut vals = Vec::with_capacity(missing_slots.len());
        for (j, (a, k)) in missing_slots.iter().enumerate() {
            if let Some(v) = item(&answers[3 * missing.len() + j], &|| format!("slot {k:#x} of {a:#x}"))? {
                vals.push((*a, *k, quantity(&v)?));
            }
        }
        {
            let mut c = self.cache.write().unwrap_or_else(|e| e.into_inner());
            // The cache moved to another height meanwhile (a settle): these values are of the old one, not kept.
            if c.height != height {
                return Ok(Fetched { accounts: infos, slots: vals });
            }
            for (a, info) in &infos {
                c.put_account(*a, info.clone());
            }
            for (a, k, v) in &vals {
                c.put_slot(*a, *k, *v);
            }
        }
        self.over_cap();
        Ok(Fetched { accounts: infos, slots: vals })
    }

    /// A node's code that does not decode (an 0xef01 prefix that is not an EIP-7702 delegation) is the node's error.
    fn account_info(&self, balance: U256, nonce: u64, code: Vec<u8>) -> Result<Option<AccountInfo>, DbError> {
        if balance.is_zero() && nonce == 0 && code.is_empty() {
            return Ok(None);
        }
        let (code_hash, bytecode) = if code.is_empty() {
            (KECCAK_EMPTY, Bytecode::default())
        } else {
            let bc = Bytecode::new_raw_checked(code.into()).map_err(|e| DbError(format!("the node's code does not decode: {e}")))?;
            let h = bc.hash_slow();
            if let Ok(mut c) = self.codes.write() {
                c.entry(h).or_insert_with(|| bc.clone());
            }
            (h, bc)
        };
        Ok(Some(AccountInfo { balance, nonce, code_hash, account_id: None, code: Some(bytecode) }))
    }

    /// An account whose code bytes the node could not give: its code hash only (`code: None`). Executing its code
    /// asks `code_by_hash`, which fails the apply unless the bytes are known from elsewhere ([`Db::code`]).
    fn account_without_code(&self, balance: U256, nonce: u64, code_hash: B256) -> Option<AccountInfo> {
        if code_hash == KECCAK_EMPTY || code_hash == B256::ZERO {
            // Empty code always decodes.
            return self.account_info(balance, nonce, Vec::new()).ok().flatten();
        }
        let code = self.codes.read().unwrap_or_else(|e| e.into_inner()).get(&code_hash).cloned();
        Some(AccountInfo { balance, nonce, code_hash, account_id: None, code })
    }

    fn cached_account(&self, a: &Address) -> Result<Option<Option<AccountInfo>>, DbError> {
        Ok(read_lock(&self.cache)?.accounts.get(a).cloned())
    }

    fn cached_slot(&self, a: &Address, k: &U256) -> Result<Option<U256>, DbError> {
        Ok(read_lock(&self.cache)?.storage.get(a).and_then(|s| s.get(k)).copied())
    }

    // A read below a snapshot's layers may use the node's answer at any height from the cache's when the snapshot was
    // taken to now: the blocks settled in between are among the snapshot's layers (what they touched never gets here),
    // and what they did not touch is the same at every such height. So the node's answer is used whether or not the
    // cache kept it (it moved to another height, or was dropped for its cap, meanwhile).

    fn canonical_account(&self, a: Address) -> Result<Option<AccountInfo>, DbError> {
        if let Some(v) = self.cached_account(&a)? {
            return Ok(v);
        }
        may_read_node()?;
        let fetched = self.fetch(&[a], &[], true)?;
        if let Some((_, info)) = fetched.accounts.into_iter().find(|(x, _)| *x == a) {
            return Ok(info);
        }
        // Cached by another thread since the first look.
        self.cached_account(&a)?.ok_or_else(|| DbError(format!("account {a:#x}: no answer from the node")))
    }

    fn canonical_slot(&self, a: Address, k: U256) -> Result<U256, DbError> {
        if let Some(v) = self.cached_slot(&a, &k)? {
            return Ok(v);
        }
        may_read_node()?;
        let fetched = self.fetch(&[], &[(a, k)], true)?;
        if let Some((_, _, v)) = fetched.slots.into_iter().find(|(x, y, _)| *x == a && *y == k) {
            return Ok(v);
        }
        self.cached_slot(&a, &k)?.ok_or_else(|| DbError(format!("slot {k:#x} of {a:#x}: no answer from the node")))
    }

    fn block_hash(&self, number: u64) -> Result<B256, DbError> {
        if let Some(h) = read_lock(&self.hashes)?.get(&number) {
            return Ok(*h);
        }
        may_read_node()?;
        let b = self.node.call("eth_getBlockByNumber", json!([format!("0x{number:x}"), false]))?;
        let h = b.get("hash").and_then(|h| h.as_str()).ok_or_else(|| DbError(format!("node has no block {number}")))?;
        let h: B256 = h.parse().map_err(|_| DbError("bad block hash from node".into()))?;
        self.note_hash(number, h);
        Ok(h)
    }
}

/// Parses a JSON-RPC quantity.
pub fn quantity(v: &Value) -> Result<U256, DbError> {
    let s = v.as_str().ok_or_else(|| DbError("expected a hex quantity from the node".into()))?;
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.is_empty() {
        return Ok(U256::ZERO);
    }
    U256::from_str_radix(s, 16).map_err(|_| DbError("bad hex quantity from the node".into()))
}

/// Parses JSON-RPC data.
pub fn data(v: &Value) -> Result<Vec<u8>, DbError> {
    let s = v.as_str().ok_or_else(|| DbError("expected hex data from the node".into()))?;
    alloy_primitives::hex::decode(s).map_err(|_| DbError("bad hex data from the node".into()))
}

/// A consistent view: layers newest first (a read's overrides, then flashblocks, then the parent block's) above the
/// shared canonical cache.
#[derive(Clone, Default)]
pub struct Snapshot {
    pub layers: Vec<Arc<Layer>>,
    /// The L1 block info (L1Block contract) at this state, read by the first call that needs it: the same for every
    /// read of the snapshot without state overrides, which op-revm would otherwise read again on each.
    pub l1: std::sync::OnceLock<op_revm::L1BlockInfo>,
}

/// revm's database over an optional mutable top layer (the flashblock being executed), a snapshot, and the cache.
pub struct Db<'a> {
    pub top: Option<&'a Layer>,
    pub below: &'a [Arc<Layer>],
    pub shared: &'a Shared,
}

impl<'a> Db<'a> {
    fn layers(&self) -> impl Iterator<Item = &Layer> {
        self.top.into_iter().chain(self.below.iter().map(|l| l.as_ref()))
    }

    pub fn account(&self, a: Address) -> Result<Option<AccountInfo>, DbError> {
        for l in self.layers() {
            if let Some(acc) = l.accounts.get(&a) {
                return Ok(acc.info.clone());
            }
        }
        self.shared.canonical_account(a)
    }

    pub fn slot(&self, a: Address, k: U256) -> Result<U256, DbError> {
        for l in self.layers() {
            if let Some(acc) = l.accounts.get(&a) {
                if let Some(v) = acc.storage.get(&k) {
                    return Ok(*v);
                }
                if acc.storage_reset || acc.info.is_none() {
                    return Ok(U256::ZERO);
                }
            }
        }
        self.shared.canonical_slot(a, k)
    }

    pub fn code(&self, hash: B256) -> Result<Bytecode, DbError> {
        if hash == KECCAK_EMPTY || hash == B256::ZERO {
            return Ok(Bytecode::default());
        }
        read_lock(&self.shared.codes)?
            .get(&hash)
            .cloned()
            .ok_or_else(|| DbError(format!("code of {hash:#x} is not known to the engine (the node did not give its bytes)")))
    }
}

/// The same reads by reference: what tracers (revm-inspectors), a replay's CacheDB and an EVM (in a WrapDatabaseRef) read.
impl<'a> DatabaseRef for Db<'a> {
    type Error = DbError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, DbError> {
        self.account(address)
    }

    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, DbError> {
        self.code(code_hash)
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, DbError> {
        self.slot(address, index)
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, DbError> {
        self.shared.block_hash(number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stubnode::{StubAccount, StubNode};

    #[test]
    fn a_cache_dropped_for_its_bound_as_it_fills_still_answers_what_the_node_said() {
        let (a, k) = (Address::with_last_byte(0xa1), U256::from(7));
        let account = StubAccount { balance: U256::from(5), nonce: 3, storage: vec![(k, U256::from(9))], ..Default::default() };
        let node = StubNode::start([(a, account)].into_iter().collect());
        // A bound of one byte: every fill is dropped right after it is stored.
        let shared = Shared::new(NodeClient::new(&node.url, 5_000).unwrap(), 1);
        let db = Db { top: None, below: &[], shared: &shared };
        let info = db.account(a).unwrap().expect("the node's account, not an empty one");
        assert_eq!((info.nonce, info.balance), (3, U256::from(5)));
        assert_eq!(db.slot(a, k).unwrap(), U256::from(9));
        assert!(shared.cache_drops.load(Ordering::Relaxed) >= 2, "both fills were dropped");
    }
}
