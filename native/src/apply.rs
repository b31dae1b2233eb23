//! Executing flashblocks on the open pending block (op-revm): one layer per flashblock over the block's earlier ones,
//! the pre-execution system calls at index 0, receipts with block-cumulative gas. Pure engine logic: no threads, no
//! N-API.
use crate::error::EngineError;
use crate::evm::engine_evm;
use crate::spec::BlockSpec;
use crate::tx::{prepare_all, Prepared, Txs};
use crate::receipt::{BlockReceipts, Executed};
use crate::state::{Db, DbError, Layer, Shared, Snapshot};
use alloy_eips::{eip2935::HISTORY_STORAGE_ADDRESS, eip4788::BEACON_ROOTS_ADDRESS};
use alloy_primitives::{Address, Bytes, B256, U256};
use op_revm::revm::{
    bytecode::Bytecode,
    handler::system_call::{SystemCallEvm, SYSTEM_ADDRESS},
    state::{AccountInfo, EvmState},
    database::WrapDatabaseRef, ExecuteCommitEvm, ExecuteEvm,
};
use op_revm::revm::handler::EvmTr;
use op_revm::revm::context_interface::ContextTr;
use op_revm::{L1BlockInfo, OpSpecId};
use std::sync::Arc;

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
        let db = WrapDatabaseRef(Db { top: Some(&*layer), below, shared });
        let mut evm = engine_evm(db, spec.cfg(), spec.block_env(), L1BlockInfo::default(), ());
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
        op_revm::revm::DatabaseRef::block_hash_ref(&self.view(), number)
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

#[cfg(test)]
mod tests {
    //! EIP-7702 authorization refunds against an in-memory canonical state (the node client points nowhere: every
    //! account and slot the txs touch is folded into the cache first).
    use super::*;
    use crate::node::NodeClient;
    use crate::read::read;
    use crate::state::LayerAccount;
    use crate::tx::prepare;
    use alloy_eips::eip2718::Decodable2718;
    use alloy_primitives::{hex, keccak256, TxKind};
    use op_alloy_consensus::OpTxEnvelope;
    use op_revm::revm::context::transaction::{Authorization, RecoveredAuthority, RecoveredAuthorization};
    use op_revm::revm::context::TxEnv;
    use op_revm::revm::context_interface::either::Either;
    use op_revm::OpTransaction;
    use serde_json::json;

    const CHAIN: u64 = 901;

    fn addr(n: u8) -> Address {
        Address::with_last_byte(n)
    }

    fn spec() -> BlockSpec {
        BlockSpec::for_tests()
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
        let e = read(&shared, &block.spec, &snap, &json!({"method": "getCode", "address": format!("{lazy:#x}")}), crate::call::Limit::timeout(5_000)).expect_err("getCode fails");
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

    #[test]
    fn code_from_the_node_that_does_not_decode_is_a_node_error_not_a_panic() {
        use crate::stubnode::{StubAccount, StubNode};
        let bad = addr(0x77);
        let node = StubNode::start([(bad, StubAccount { code: Some(vec![0xef, 0x01]), ..Default::default() })].into_iter().collect());
        let shared = Shared::new(NodeClient::new(&node.url, 5_000).unwrap(), usize::MAX);
        let snap = Snapshot { layers: Vec::new(), l1: Default::default() };
        let e = read(&shared, &spec(), &snap, &json!({"method": "getCode", "address": format!("{bad:#x}")}), crate::call::Limit::timeout(5_000)).expect_err("fails");
        assert_eq!(e.code, "E_NODE");
        assert!(e.message.contains("does not decode"), "{}", e.message);
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
