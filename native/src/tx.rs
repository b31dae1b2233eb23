//! Transactions as the engine takes them: a flashblock's EIP-2718 bytes with their bounds (Txs), decoded and their
//! senders taken as given or recovered (prepare), ready for the EVM.
use crate::error::EngineError;
use alloy_consensus::Transaction as _;
use alloy_eips::{eip2718::Decodable2718, Typed2718 as _};
use alloy_primitives::{keccak256, Address, Bytes, B256, U256};
use op_alloy_consensus::OpTxEnvelope;
use op_revm::revm::{
    context::TxEnv,
    context_interface::either::Either,
};
use op_revm::{transaction::deposit::DepositTransactionParts, OpTransaction};

/// A decoded transaction ready for the EVM.
pub struct Prepared {
    pub hash: B256,
    pub ty: u8,
    pub from: Address,
    pub to: Option<Address>,
    pub nonce: u64,
    pub tx: Option<OpTransaction<TxEnv>>,
    pub is_deposit: bool,
    pub effective_gas_price: u128,
}

/// The signer of `hash` (libsecp256k1, as revm's ecrecover precompile uses it).
pub(crate) fn recover(sig: &alloy_primitives::Signature, hash: B256) -> Result<Address, alloy_primitives::SignatureError> {
    let mut rs = [0u8; 64];
    rs[..32].copy_from_slice(&sig.r().to_be_bytes::<32>());
    rs[32..].copy_from_slice(&sig.s().to_be_bytes::<32>());
    // EIP-2: a high s is not a valid signature of a transaction.
    if sig.normalize_s().is_some() {
        return Err(alloy_primitives::SignatureError::FromBytes("high s"));
    }
    let word = op_revm::revm::precompile::secp256k1::bitcoin_secp256k1::ecrecover(&alloy_primitives::B512::from(rs), sig.v() as u8, &hash)
        .map_err(|_| alloy_primitives::SignatureError::FromBytes("unrecoverable signature"))?;
    Ok(Address::from_word(word))
}

/// What `recover` rejects without the curve arithmetic: r and s in [1, n), s ≤ n/2 (EIP-2). A signature passing this
/// may still not recover; a sender given to `prepare` comes from a recovery of the same bytes that succeeded.
fn check_signature(sig: &alloy_primitives::Signature) -> Result<(), alloy_primitives::SignatureError> {
    const N: U256 = U256::from_be_bytes(alloy_primitives::hex!("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141"));
    if sig.r().is_zero() || sig.r() >= N || sig.s().is_zero() {
        return Err(alloy_primitives::SignatureError::FromBytes("r or s out of range"));
    }
    if sig.normalize_s().is_some() {
        return Err(alloy_primitives::SignatureError::FromBytes("high s"));
    }
    Ok(())
}

/// Decodes one EIP-2718 transaction and recovers its sender, or takes `sender` when given (recovered at ingest from
/// these same bytes by `frame::recover_all`, or the JS worker): then no ecrecover runs, but the transaction is still
/// decoded and a malformed one or an out-of-range signature is still rejected. A deposit's sender is always its own
/// `from` (a given one is ignored). Type 0x7D (post-exec) is not executed (`tx: None`), as op-reth's executor
/// short-circuits it before the EVM.
pub fn prepare(raw: &[u8], base_fee: u64, sender: Option<Address>) -> Result<Prepared, EngineError> {
    let hash = keccak256(raw);
    let mut rest = raw;
    let env = OpTxEnvelope::decode_2718(&mut rest).map_err(|e| EngineError::new("E_TX", format!("undecodable transaction {hash:#x}: {e}")))?;
    if !rest.is_empty() {
        return Err(EngineError::new("E_TX", format!("undecodable transaction {hash:#x}: {} bytes after its encoding", rest.len())));
    }
    let bad_sig = |e: alloy_primitives::SignatureError| EngineError::new("E_TX", format!("transaction {hash:#x}: bad signature ({e})"));
    // The signing hash (a keccak of the re-encoded transaction) only when the sender is not given.
    let signer = |sig: &alloy_primitives::Signature, signing_hash: &dyn Fn() -> B256| match sender {
        Some(a) => check_signature(sig).map(|()| a),
        None => recover(sig, signing_hash()),
    };
    let mut deposit = DepositTransactionParts::default();
    let from = match &env {
        OpTxEnvelope::Legacy(s) => signer(s.signature(), &|| s.signature_hash()).map_err(bad_sig)?,
        OpTxEnvelope::Eip2930(s) => signer(s.signature(), &|| s.signature_hash()).map_err(bad_sig)?,
        OpTxEnvelope::Eip1559(s) => signer(s.signature(), &|| s.signature_hash()).map_err(bad_sig)?,
        OpTxEnvelope::Eip7702(s) => signer(s.signature(), &|| s.signature_hash()).map_err(bad_sig)?,
        OpTxEnvelope::Deposit(d) => {
            let t = d.inner();
            deposit = DepositTransactionParts::new(t.source_hash, (t.mint != 0).then_some(t.mint), t.is_system_transaction);
            t.from
        }
        OpTxEnvelope::PostExec(_) => {
            return Ok(Prepared { hash, ty: 0x7d, from: Address::ZERO, to: None, nonce: 0, tx: None, is_deposit: false, effective_gas_price: 0 });
        }
    };
    let is_deposit = env.is_deposit();
    // The rest from alloy's accessors: a legacy or 2930 gas price is its max fee (no tip); a deposit has neither fee,
    // nor an access or authorization list.
    let b = TxEnv {
        tx_type: env.ty(),
        caller: from,
        gas_limit: env.gas_limit(),
        gas_price: env.max_fee_per_gas(),
        gas_priority_fee: env.max_priority_fee_per_gas(),
        kind: env.kind(),
        value: env.value(),
        data: env.input().clone(),
        nonce: env.nonce(),
        // A deposit has none: it keeps TxEnv's default (op-revm does not validate a deposit's env).
        chain_id: if is_deposit { TxEnv::default().chain_id } else { env.chain_id() },
        access_list: env.access_list().cloned().unwrap_or_default(),
        authorization_list: env.authorization_list().into_iter().flatten().cloned().map(Either::Left).collect(),
        ..Default::default()
    };
    let effective_gas_price = b.gas_priority_fee.map_or(b.gas_price, |tip| b.gas_price.min((base_fee as u128).saturating_add(tip)));
    let tx = OpTransaction { base: b, enveloped_tx: (!is_deposit).then(|| Bytes::copy_from_slice(raw)), deposit };
    Ok(Prepared { hash, ty: env.ty(), from, to: env.to(), nonce: env.nonce(), tx: Some(tx), is_deposit, effective_gas_price })
}

/// A flashblock's transactions as the stream carries them: EIP-2718 bytes back to back, transaction i at
/// `bytes[bounds[i]..bounds[i + 1]]`.
pub struct Txs {
    pub bytes: Vec<u8>,
    pub bounds: Vec<u32>,
}

impl Txs {
    /// Checked: `bounds` starts at 0, never decreases and ends at the bytes' length.
    pub fn new(bytes: Vec<u8>, bounds: Vec<u32>) -> Result<Self, EngineError> {
        let ok = bounds.first() == Some(&0) && bounds.windows(2).all(|w| w[0] <= w[1]) && bounds.last().map(|&e| e as usize) == Some(bytes.len());
        if !ok {
            return Err(EngineError::new("E_INPUT", format!("transaction bounds do not fit {} bytes (want 0, …, {} in order)", bytes.len(), bytes.len())));
        }
        Ok(Self { bytes, bounds })
    }

    /// From separate transactions (tests, simulations).
    pub fn of(list: &[Vec<u8>]) -> Self {
        let mut bounds = vec![0u32];
        let mut bytes = Vec::new();
        for t in list {
            bytes.extend_from_slice(t);
            bounds.push(bytes.len() as u32);
        }
        Self { bytes, bounds }
    }

    pub fn len(&self) -> usize {
        self.bounds.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> &[u8] {
        &self.bytes[self.bounds[i] as usize..self.bounds[i + 1] as usize]
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// Decodes a flashblock's transactions and recovers the senders not given in `senders` (one per transaction; an
/// empty slice: none given). Recovery is ~50 µs a transaction with libsecp256k1: when many are left to recover, the
/// work splits across the cores; decoding alone stays on this thread.
pub(crate) fn prepare_all(txs: &Txs, senders: &[Option<Address>], base_fee: u64) -> Result<Vec<Prepared>, EngineError> {
    let given = |i: usize| senders.get(i).copied().flatten();
    let n = txs.len();
    let to_recover = (0..n).filter(|&i| given(i).is_none()).count();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    if to_recover < 32 || threads < 2 {
        return txs.iter().enumerate().map(|(i, r)| prepare(r, base_fee, given(i))).collect();
    }
    let chunk = n.div_ceil(threads);
    let parts: Vec<Result<Vec<Prepared>, EngineError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .step_by(chunk)
            .map(|first| {
                let last = (first + chunk).min(n);
                scope.spawn(move || (first..last).map(|i| prepare(txs.get(i), base_fee, given(i))).collect::<Result<Vec<_>, _>>())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(EngineError::new("E_TX", "sender recovery panicked")))).collect()
    });
    let mut out = Vec::with_capacity(n);
    for p in parts {
        out.extend(p?);
    }
    Ok(out)
}
