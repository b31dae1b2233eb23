//! Executed receipts: what an apply hands back (as JSON) and what the receipts root commits to (EIP-2718 bytes, OP
//! deposit receipts included), with the root of a block so far checked here against the stream's and the chain's.
use crate::root::{ordered_root, RootCache};
use alloy_consensus::{Eip2718EncodableReceipt, Eip658Value, Receipt};
use alloy_primitives::{hex, logs_bloom, Address, Log, B256};
use op_alloy_consensus::{OpDepositReceipt, OpReceipt};
use serde_json::{json, Value};

/// One executed transaction's receipt, the fields the root covers and the EVM's own answer for the rest.
#[derive(Clone, Debug)]
pub struct Executed {
    pub hash: B256,
    /// EIP-2718 type (0, 1, 2, 4, 0x7d post-exec, 0x7e deposit).
    pub ty: u8,
    pub status: bool,
    pub cumulative_gas: u64,
    pub gas_used: u64,
    pub logs: Vec<Log>,
    /// Deposits from Regolith on: the sender's nonce before the deposit (op-geth's and op-reth's convention).
    pub deposit_nonce: Option<u64>,
    /// Deposits from Canyon on.
    pub deposit_version: Option<u64>,
    pub contract: Option<Address>,
    pub effective_gas_price: u128,
    pub from: Address,
    pub to: Option<Address>,
}

/// How the chain commits a deposit's nonce in its receipt: the nonce before the deposit (op-geth, op-reth) or the one
/// after it (anvil, the devnet's node). Learned from the roots the chain gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DepositNonce {
    Before,
    After,
}

impl DepositNonce {
    pub fn other(self) -> Self {
        match self {
            DepositNonce::Before => DepositNonce::After,
            DepositNonce::After => DepositNonce::Before,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DepositNonce::Before => "pre",
            DepositNonce::After => "reported",
        }
    }
}

impl Executed {
    /// The deposit nonce as the chain commits it under `mode`.
    pub fn chain_deposit_nonce(&self, mode: DepositNonce) -> Option<u64> {
        self.deposit_nonce.map(|n| if mode == DepositNonce::After { n + 1 } else { n })
    }

    /// The EIP-2718 encoding the receipts root commits to.
    pub fn encode(&self, mode: DepositNonce) -> Vec<u8> {
        // The logs by reference: the encoding reads them, nothing copies them.
        let inner = Receipt { status: Eip658Value::Eip658(self.status), cumulative_gas_used: self.cumulative_gas, logs: self.logs.iter().collect::<Vec<&Log>>() };
        let r = match self.ty {
            0 => OpReceipt::Legacy(inner),
            1 => OpReceipt::Eip2930(inner),
            2 => OpReceipt::Eip1559(inner),
            4 => OpReceipt::Eip7702(inner),
            0x7d => OpReceipt::PostExec(inner),
            _ => OpReceipt::Deposit(OpDepositReceipt { inner, deposit_nonce: self.chain_deposit_nonce(mode), deposit_receipt_version: self.deposit_version }),
        };
        let bloom = logs_bloom(self.logs.iter());
        let mut out = Vec::with_capacity(300);
        r.eip2718_encode_with_bloom(&bloom, &mut out);
        out
    }

    /// The receipt as the TypeScript side takes it (src/exec/revm.ts), the deposit nonce as executed (the apply's
    /// answer names the convention the chain uses, which may be learned later).
    pub fn json(&self) -> Value {
        json!({
            "hash": format!("{:#x}", self.hash),
            "type": self.ty,
            "status": self.status,
            "cumulativeGasUsed": self.cumulative_gas,
            "gasUsed": self.gas_used,
            "logs": self.logs.iter().map(log_json).collect::<Vec<_>>(),
            "depositNonce": self.deposit_nonce,
            "depositReceiptVersion": self.deposit_version,
            "contractAddress": self.contract.map(|a| format!("{a:#x}")),
            "effectiveGasPrice": format!("0x{:x}", self.effective_gas_price),
            "from": format!("{:#x}", self.from),
            "to": self.to.map(|a| format!("{a:#x}")),
        })
    }
}

pub(crate) fn log_json(l: &Log) -> Value {
    json!({
        "address": format!("{:#x}", l.address),
        "topics": l.data.topics().iter().map(|t| format!("{t:#x}")).collect::<Vec<_>>(),
        "data": format!("0x{}", hex::encode(&l.data.data)),
    })
}

/// An open block's receipts so far and its receipts trie, cached for the deposit-nonce convention it was built with.
#[derive(Default)]
pub struct BlockReceipts {
    pub list: Vec<Executed>,
    cache: RootCache,
    cached_mode: Option<DepositNonce>,
}

impl BlockReceipts {
    /// The receipts root of the block so far under `mode`.
    pub fn root(&mut self, mode: DepositNonce) -> B256 {
        if self.cached_mode != Some(mode) {
            self.cache = RootCache::default();
            self.cached_mode = Some(mode);
        }
        let list = &self.list;
        ordered_root(list.len(), |i| list[i].encode(mode), Some(&mut self.cache))
    }

    /// Whether a receipt so far carries a deposit nonce: the one place the two conventions differ.
    pub fn has_deposit(&self) -> bool {
        self.list.iter().any(|r| r.deposit_nonce.is_some())
    }

    /// Whether the root so far is `want`, under `mode` or else under the other convention (only when the block holds
    /// a deposit, the one place they differ): Some(the convention that matched), None when neither did.
    pub fn check(&mut self, want: B256, mode: DepositNonce) -> Option<DepositNonce> {
        if self.root(mode) == want {
            return Some(mode);
        }
        if !self.has_deposit() {
            return None;
        }
        let list = &self.list;
        (ordered_root(list.len(), |i| list[i].encode(mode.other()), None) == want).then_some(mode.other())
    }
}
