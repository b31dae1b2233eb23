//! Sender recovery of a natively decoded flashblock's signed transactions, off the JS thread (libuv's pool, fanned
//! out to the cores): one recovery for the daemon and the engine (native/src/exec.rs takes these senders).

use alloy_primitives::Address;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::panic::catch_unwind;

/// Per transaction: 1 + the sender; 0 when its signature does not recover; 2 when it is not decoded here (a type the
/// engine's decoder lacks, e.g. 0x03): the caller recovers that one itself.
fn sender_of(raw: &[u8]) -> (u8, Address) {
    use alloy_eips::eip2718::Decodable2718;
    use op_alloy_consensus::OpTxEnvelope;
    let Ok(env) = OpTxEnvelope::decode_2718(&mut &raw[..]) else { return (2, Address::ZERO) };
    let r = match &env {
        OpTxEnvelope::Legacy(s) => crate::exec::recover(s.signature(), s.signature_hash()),
        OpTxEnvelope::Eip2930(s) => crate::exec::recover(s.signature(), s.signature_hash()),
        OpTxEnvelope::Eip1559(s) => crate::exec::recover(s.signature(), s.signature_hash()),
        OpTxEnvelope::Eip7702(s) => crate::exec::recover(s.signature(), s.signature_hash()),
        _ => return (2, Address::ZERO),
    };
    match r {
        Ok(a) => (1, a),
        Err(_) => (0, Address::ZERO),
    }
}

/// Recovers the senders of the transactions at `bounds` (pairs [start, end) into `bytes`): 21 bytes each, a status
/// (see `sender_of`) and the address. Splits across up to 4 threads when there are many.
pub fn recover_all(bytes: &[u8], bounds: &[(usize, usize)]) -> Vec<u8> {
    let one = |&(a, b): &(usize, usize)| -> [u8; 21] {
        let mut r = [0u8; 21];
        if a <= b && b <= bytes.len() {
            let (st, addr) = catch_unwind(|| sender_of(&bytes[a..b])).unwrap_or((2, Address::ZERO));
            r[0] = st;
            r[1..].copy_from_slice(addr.as_slice());
        } else {
            r[0] = 2;
        }
        r
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    let parts: Vec<[u8; 21]> = if bounds.len() < 16 || threads < 2 {
        bounds.iter().map(one).collect()
    } else {
        let chunk = bounds.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let hs: Vec<_> = bounds.chunks(chunk).map(|c| scope.spawn(move || c.iter().map(one).collect::<Vec<_>>())).collect();
            hs.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
        })
    };
    parts.concat()
}

pub struct RecoverTask {
    bytes: Vec<u8>,
    bounds: Vec<(usize, usize)>,
}

impl Task for RecoverTask {
    type Output = Vec<u8>;
    type JsValue = Buffer;
    fn compute(&mut self) -> napi::Result<Self::Output> {
        let out = recover_all(&self.bytes, &self.bounds);
        if out.len() != self.bounds.len() * 21 {
            return Err(napi::Error::from_reason("sender recovery lost a thread"));
        }
        Ok(out)
    }
    fn resolve(&mut self, _env: Env, out: Self::Output) -> napi::Result<Self::JsValue> {
        Ok(out.into())
    }
}

/// N-API: recovers senders off the JS thread (libuv's pool, fanned out to the cores). `signed` is the layout's
/// signed list (triples [index in the flashblock, start, end) into `tx_bytes`); resolves to 21 bytes per triple (see `recover_all`).
#[napi(js_name = "recoverSenders")]
pub fn recover_senders(tx_bytes: &[u8], signed: &[u32]) -> AsyncTask<RecoverTask> {
    let bounds = signed.chunks_exact(3).map(|t| (t[1] as usize, t[2] as usize)).collect();
    AsyncTask::new(RecoverTask { bytes: tx_bytes.to_vec(), bounds })
}
