//! A block's post-state diff: every account its applied flashblocks changed, merged, as JSON — what a state root
//! over the parent's trie needs (`blockChanges`). Reads layers only; changes nothing.
use crate::state::{Layer, LayerAccount, Shared};
use alloy_primitives::{hex, Address, B256};
use op_revm::revm::primitives::KECCAK_EMPTY;
use serde_json::{json, Value};
use std::sync::Arc;

/// The changes of `layers` (oldest first) as one: the newest account info, storage written since the newest reset.
pub fn merge(layers: &[Arc<Layer>]) -> Layer {
    let mut out = Layer::default();
    for layer in layers {
        for (a, acc) in &layer.accounts {
            let e = out.accounts.entry(*a).or_default();
            if acc.storage_reset {
                e.storage.clear();
                e.storage_reset = true;
            }
            e.info = acc.info.clone();
            e.storage.extend(acc.storage.iter().map(|(k, v)| (*k, *v)));
        }
    }
    out
}

/// `{"accounts": [...]}`, sorted by address. Per account: `deleted` (destroyed, or left empty: EIP-161 removes it
/// from the trie), `storageReset` (its storage before the block is void), balance and nonce (quantities), codeHash,
/// `code` (null when the engine never got the bytes: see `Shared::prefetch`), and `storage` as [slot, value] pairs
/// of 32-byte words sorted by slot (a zero value: the slot is deleted).
pub fn changes_json(shared: &Shared, layers: &[Arc<Layer>]) -> Value {
    let merged = merge(layers);
    let mut addresses: Vec<&Address> = merged.accounts.keys().collect();
    addresses.sort();
    let accounts: Vec<Value> = addresses.into_iter().map(|a| account_json(shared, a, &merged.accounts[a])).collect();
    json!({ "accounts": accounts })
}

fn account_json(shared: &Shared, a: &Address, acc: &LayerAccount) -> Value {
    let info = acc.info.clone().unwrap_or_default();
    let code = if info.code_hash == KECCAK_EMPTY || info.code_hash == B256::ZERO {
        Some(Vec::new())
    } else {
        match &info.code {
            Some(c) if !c.is_empty() => Some(c.original_bytes().to_vec()),
            _ => shared.codes.read().unwrap_or_else(|e| e.into_inner()).get(&info.code_hash).map(|c| c.original_bytes().to_vec()),
        }
    };
    let mut storage: Vec<(B256, B256)> = acc.storage.iter().map(|(k, v)| (B256::from(*k), B256::from(*v))).collect();
    storage.sort();
    json!({
        "address": format!("{a:#x}"),
        "deleted": acc.info.as_ref().is_none_or(|i| i.is_empty()),
        "storageReset": acc.storage_reset,
        "balance": format!("{:#x}", info.balance),
        "nonce": format!("{:#x}", info.nonce),
        "codeHash": format!("{:#x}", info.code_hash),
        "code": code.map(|c| format!("0x{}", hex::encode(c))),
        "storage": storage.iter().map(|(k, v)| json!([format!("{k:#x}"), format!("{v:#x}")])).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::{apply, OpenBlock};
    use crate::spec::BlockSpec;
    use crate::node::NodeClient;
    use crate::stubnode::{StubAccount, StubNode};
    use alloy_primitives::{keccak256, TxKind, U256};
    use op_revm::revm::state::AccountInfo;

    fn addr(n: u8) -> Address {
        Address::with_last_byte(n)
    }

    fn account(balance: u64, storage: &[(u64, u64)], reset: bool) -> LayerAccount {
        LayerAccount {
            info: Some(AccountInfo { balance: U256::from(balance), ..Default::default() }),
            storage: storage.iter().map(|(k, v)| (U256::from(*k), U256::from(*v))).collect(),
            storage_reset: reset,
        }
    }

    fn layer(accounts: Vec<(Address, LayerAccount)>) -> Arc<Layer> {
        Arc::new(Layer { accounts: accounts.into_iter().collect() })
    }

    fn slots(acc: &LayerAccount) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = acc.storage.iter().map(|(k, v)| (k.to::<u64>(), v.to::<u64>())).collect();
        v.sort();
        v
    }

    #[test]
    fn later_flashblocks_win_and_a_reset_voids_earlier_slots() {
        let (a, b, c) = (addr(1), addr(2), addr(3));
        let merged = merge(&[
            layer(vec![(a, account(1, &[(1, 5), (2, 6)], false)), (b, account(7, &[(1, 1)], false))]),
            layer(vec![(a, account(2, &[(2, 8)], false)), (c, account(3, &[], false))]),
            layer(vec![(b, account(9, &[(3, 3)], true))]),
        ]);
        let (ma, mb, mc) = (&merged.accounts[&a], &merged.accounts[&b], &merged.accounts[&c]);
        assert_eq!((ma.info.as_ref().unwrap().balance, slots(ma), ma.storage_reset), (U256::from(2), vec![(1, 5), (2, 8)], false));
        assert_eq!((mb.info.as_ref().unwrap().balance, slots(mb), mb.storage_reset), (U256::from(9), vec![(3, 3)], true));
        assert_eq!(mc.info.as_ref().unwrap().balance, U256::from(3));
    }

    #[test]
    fn destroyed_and_empty_accounts_are_deleted() {
        let shared = Shared::new(NodeClient::new("http://127.0.0.1:9/", 100).unwrap(), usize::MAX);
        let destroyed = LayerAccount { info: None, storage: Default::default(), storage_reset: true };
        let empty = LayerAccount { info: Some(AccountInfo::default()), ..Default::default() };
        let out = changes_json(&shared, &[layer(vec![(addr(1), account(1, &[], false)), (addr(2), account(5, &[(1, 1)], false))]), layer(vec![(addr(2), destroyed), (addr(3), empty)])]);
        let accounts = out["accounts"].as_array().unwrap();
        let deleted: Vec<(&str, bool)> = accounts.iter().map(|a| (a["address"].as_str().unwrap(), a["deleted"].as_bool().unwrap())).collect();
        assert_eq!(
            deleted,
            vec![("0x0000000000000000000000000000000000000001", false), ("0x0000000000000000000000000000000000000002", true), ("0x0000000000000000000000000000000000000003", true)]
        );
        assert_eq!(accounts[1]["storageReset"], json!(true));
        assert_eq!(accounts[1]["storage"], json!([]));
    }

    /// Stores its calldata's first word at slot 1: PUSH1 0 CALLDATALOAD PUSH1 1 SSTORE STOP.
    const STORE: [u8; 7] = [0x60, 0x00, 0x35, 0x60, 0x01, 0x55, 0x00];

    fn raw_call(nonce: u64, to: Address, value: u64, word: u64) -> Vec<u8> {
        use alloy_eips::eip2718::Encodable2718;
        let tx = alloy_consensus::TxEip1559 {
            chain_id: 901,
            nonce,
            gas_limit: 100_000,
            max_fee_per_gas: 10,
            max_priority_fee_per_gas: 1,
            to: TxKind::Call(to),
            value: U256::from(value),
            access_list: Default::default(),
            input: U256::from(word).to_be_bytes::<32>().to_vec().into(),
        };
        let sig = alloy_primitives::Signature::new(U256::from(1), U256::from(1), false);
        op_alloy_consensus::OpTxEnvelope::Eip1559(alloy_consensus::Signed::new_unhashed(tx, sig)).encoded_2718()
    }

    #[test]
    fn two_flashblocks_give_one_diff_with_code_known_and_unknown() {
        let (sender, store, lazy, fresh) = (addr(0x01), addr(0x5e), addr(0xfe), addr(0x77));
        let lazy_hash = keccak256([0x60, 0x00]);
        let node = StubNode::start(
            [
                (sender, StubAccount { balance: U256::from(10u128.pow(21)), ..Default::default() }),
                (store, StubAccount { code: Some(STORE.to_vec()), ..Default::default() }),
                (lazy, StubAccount { balance: U256::from(5), code_hash: Some(lazy_hash), ..Default::default() }),
            ]
            .into_iter()
            .collect(),
        );
        let shared = Shared::new(NodeClient::new(&node.url, 5_000).unwrap(), usize::MAX);
        let spec = BlockSpec { coinbase: lazy, ..BlockSpec::for_tests() };
        let mut block = OpenBlock { next_index: 1, ..OpenBlock::new(spec, Vec::new()) };
        for (i, tx) in [raw_call(0, store, 0, 7), raw_call(1, store, 3, 9)].into_iter().enumerate() {
            let (l, receipts) = apply(&shared, &block, 1 + i as u64, &crate::tx::Txs::of(&[tx]), &[Some(sender)]).expect("applies");
            block.layers.push(Arc::new(l));
            block.receipts.list.extend(receipts);
        }
        let (l, _) = apply(&shared, &block, 3, &crate::tx::Txs::of(&[raw_call(2, fresh, 11, 0)]), &[Some(sender)]).expect("applies");
        block.layers.push(Arc::new(l));
        let out = changes_json(&shared, &block.layers);
        let by: std::collections::HashMap<String, &Value> = out["accounts"].as_array().unwrap().iter().map(|a| (a["address"].as_str().unwrap().to_string(), a)).collect();
        let s = by[&format!("{store:#x}")];
        assert_eq!(s["storage"], json!([[format!("{:#x}", B256::with_last_byte(1)), format!("{:#x}", B256::with_last_byte(9))]]), "the newest value of slot 1");
        assert_eq!((s["balance"].as_str(), s["code"].as_str(), s["deleted"].as_bool()), (Some("0x3"), Some("0x60003560015500"), Some(false)));
        assert_eq!(s["codeHash"], json!(format!("{:#x}", keccak256(STORE))));
        assert_eq!(by[&format!("{sender:#x}")]["nonce"], json!("0x3"));
        let f = by[&format!("{fresh:#x}")];
        assert_eq!((f["balance"].as_str(), f["code"].as_str(), f["codeHash"].as_str()), (Some("0xb"), Some("0x"), Some(format!("{KECCAK_EMPTY:#x}").as_str())));
        // The fee recipient was credited without its code ever read: its code stays null, its hash the node's.
        let c = by[&format!("{lazy:#x}")];
        assert_eq!((c["code"].clone(), c["codeHash"].as_str()), (Value::Null, Some(format!("{lazy_hash:#x}").as_str())));
    }
}
