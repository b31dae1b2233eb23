//! Flashblock frame decoding for the ingest path: one parse of the frame's JSON (sonic-rs), the same validation as
//! src/ingest/frame.ts, every transaction checked by the RLP walk of src/chain/lazy-tx.ts and hashed, and sender
//! recovery in parallel off the JS thread. Knows nothing of pending state.
//!
//! The rule that keeps verdicts identical: this decoder only ever *accepts* what the JS decoder accepts, with the
//! same result; whatever it is unsure of (bad input, an escape in a hex string, a rare shape, a receipt quantity of
//! 2^53 or more) it *declines*, and the caller runs the JS decoder, which words the exact reason.
//! test/ingest/native-frame.test.ts runs both on every vector and fuzz case.
//!
//! The result (layout.rs) is one byte buffer of tables and one external string that src/chain/layout-body.ts reads in
//! place: a held flashblock is those two and a handful of views, whatever its transaction count.

mod layout;
mod parse;
mod recover;
mod shape;
mod txcheck;

pub use recover::{recover_all, recover_senders, RecoverTask};

use layout::Out;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use shape::Decline;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The layout's strings (ASCII: hex, "0x", digits), handed to JS as one V8 external one-byte string: its bytes stay
/// in this Vec, freed when the string is collected. A held block's hashes and keys are slices of it, so the JS heap
/// keeps a header per frame instead of a ~100 KB copy that every scavenge moves and that is promoted with the block.
pub struct LayoutText(pub Vec<u8>);

/// Below this a copy costs less than an external string's bookkeeping (V8 may copy short ones anyway).
const EXTERNAL_TEXT_MIN: usize = 4096;

extern "C" {
    // Exported by Node since 20.4 (node_api.h, experimental there, Node-API 10 later); not enabled in napi-sys
    // without the napi10 feature, which would also require Node 22.
    fn node_api_create_external_string_latin1(
        env: sys::napi_env,
        str_: *const std::os::raw::c_char,
        length: isize,
        finalize_cb: sys::napi_finalize,
        finalize_hint: *mut std::ffi::c_void,
        result: *mut sys::napi_value,
        copied: *mut bool,
    ) -> sys::napi_status;
}

/// Frees the Vec of a `LayoutText` (its length and capacity are boxed in the hint).
unsafe extern "C" fn free_layout_text(_env: sys::napi_env, data: *mut std::ffi::c_void, hint: *mut std::ffi::c_void) {
    let (len, cap) = *Box::from_raw(hint.cast::<(usize, usize)>());
    drop(Vec::from_raw_parts(data.cast::<u8>(), len, cap));
}

impl TypeName for LayoutText {
    fn type_name() -> &'static str {
        "String"
    }
    fn value_type() -> ValueType {
        ValueType::String
    }
}

impl ToNapiValue for LayoutText {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        let mut result = std::ptr::null_mut();
        if val.0.len() < EXTERNAL_TEXT_MIN {
            check_status!(sys::napi_create_string_latin1(env, val.0.as_ptr().cast(), val.0.len() as isize, &mut result))?;
            return Ok(result);
        }
        let mut v = std::mem::ManuallyDrop::new(val.0);
        let (ptr, len, cap) = (v.as_mut_ptr(), v.len(), v.capacity());
        let hint = Box::into_raw(Box::new((len, cap)));
        let mut copied = false;
        let status = node_api_create_external_string_latin1(env, ptr.cast(), len as isize, Some(free_layout_text), hint.cast(), &mut result, &mut copied);
        // On success the finalizer owns the Vec (it already ran when V8 copied); on failure it never runs.
        if status != sys::Status::napi_ok {
            drop(Box::from_raw(hint));
            drop(Vec::from_raw_parts(ptr, len, cap));
            check_status!(status)?;
        }
        Ok(result)
    }
}

/// The layout of one accepted frame (see layout.rs), or the reason the JS decoder must decide.
#[napi(object, object_from_js = false)]
pub struct FrameLayout {
    /// Empty when accepted; else why the native decoder declined (the JS decoder then decides and words it).
    pub declined: String,
    /// Header, words, quantities and the transactions' bytes (layout.rs).
    pub buf: Buffer,
    pub s: LayoutText,
}

fn declined(why: &str) -> FrameLayout {
    FrameLayout { declined: why.to_string(), buf: Vec::new().into(), s: LayoutText(Vec::new()) }
}

thread_local! {
    /// The tables under construction, reused by every frame decoded on this thread (only the text leaves with the
    /// layout, and the buffer is allocated at its final size).
    static SCRATCH: RefCell<Out> = RefCell::new(Out::default());
}

/// Decodes a frame's JSON text (already inflated when it came as brotli) into its layout buffer and text, or the
/// reason it declines.
pub(crate) fn decode(json: &[u8]) -> std::result::Result<(Vec<u8>, Vec<u8>), Decline> {
    let root: sonic_rs::Value = sonic_rs::from_slice(json).map_err(|_| "json")?;
    SCRATCH.with(|cell| {
        let mut out = cell.borrow_mut();
        out.clear();
        out.s = Vec::with_capacity(json.len() / 2);
        parse::frame(&mut out, &root)?;
        Ok((out.buffer(), std::mem::take(&mut out.s)))
    })
}

/// N-API: decodes one flashblock frame's JSON bytes into a `FrameLayout` (see `decode`). Never throws for bad input:
/// a frame it does not accept comes back with `declined` set.
#[napi(js_name = "decodeFlashblock")]
pub fn decode_flashblock(json: &[u8]) -> FrameLayout {
    match catch_unwind(AssertUnwindSafe(|| decode(json))) {
        Err(_) => declined("native decoder panicked"),
        Ok(Err(why)) => declined(why),
        // Every string in the text is ASCII (hex and "0x"), so its bytes read the same as Latin-1.
        Ok(Ok((buf, s))) => FrameLayout { declined: String::new(), buf: buf.into(), s: LayoutText(s) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declines_what_it_does_not_accept() {
        assert_eq!(decode(b"[1,2]").err(), Some("not an object"));
        assert_eq!(decode(b"{").err(), Some("json"));
        assert_eq!(decode(br#"{"index":0,"payload_id":"0x01","metadata":{"block_number":1},"diff":{}}"#).err(), Some("index 0 without base"));
        let big = br#"{"index":1,"payload_id":"0x01","metadata":{"block_number":1,"receipts":{"0x1111111111111111111111111111111111111111111111111111111111111111":{"Eip1559":{"status":"0x1","cumulativeGasUsed":"0x20000000000000","logs":[]}}}},"diff":{}}"#;
        assert_eq!(decode(big).err(), Some("quantity of 2^53 or more"));
    }

    #[test]
    fn a_panic_in_one_decode_leaves_the_scratch_usable() {
        let r = catch_unwind(|| SCRATCH.with(|c| {
            let _held = c.borrow_mut();
            panic!("in the middle of a frame");
        }));
        assert!(r.is_err());
        assert_eq!(decode(b"{").err(), Some("json"));
    }
}
