//! Flashblock frame decoding for the ingest path: one parse of the frame's JSON (sonic-rs), the same validation as
//! src/ingest/frame.ts, every transaction checked by the RLP walk of src/chain/lazy-tx.ts and hashed, and sender
//! recovery in parallel off the JS thread. Knows nothing of pending state.
//!
//! The rule that keeps verdicts identical: this decoder only ever *accepts* what the JS decoder accepts, with the
//! same result; whatever it is unsure of (bad input, an escape in a hex string, a rare shape, a receipt quantity of
//! 2^53 or more) it *declines*, and the caller runs the JS decoder, which words the exact reason.
//! test/ingest/native-frame.test.ts runs both on every vector and fuzz case.
//!
//! The result (layout.rs) is one run of bytes — tables, quantities, transaction bytes, text — written into memory JS
//! provides (its frame pool) and read in place by src/chain/layout-body.ts: a held flashblock costs the JS heap one
//! small object, whatever its transaction count, and allocates no memory of its own.

mod layout;
mod parse;
mod recover;
mod shape;
mod txcheck;

pub use recover::{recover_all, recover_init, recover_now, recover_start, recover_start_urgent};

use layout::Out;
use napi::bindgen_prelude::BufferSlice;
use napi_derive::napi;
use shape::Decline;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What decoding one frame gave: accepted (`declined` empty; its layout is `size` bytes, written when it fit the room
/// offered, else kept for `takeLayout`) or declined with the reason (the JS decoder then decides and words it).
#[napi(object, object_from_js = false)]
pub struct DecodeOutcome {
    pub declined: String,
    /// The layout's size in bytes (0 when declined).
    pub size: u32,
    /// Whether the layout was written at the offset given.
    pub written: bool,
}

fn declined(why: &str) -> DecodeOutcome {
    DecodeOutcome { declined: why.to_string(), size: 0, written: false }
}

thread_local! {
    /// The layout under construction, reused by every frame decoded on this thread; the last accepted one stays here
    /// until the next decode (for `takeLayout`).
    static SCRATCH: RefCell<Out> = RefCell::new(Out::default());
}

/// Nesting deeper than any frame's: sonic-rs builds its DOM by recursion without a depth limit, so a frame nested
/// millions deep would overflow this thread's stack (an abort, not a panic). Such a frame goes to the JS decoder.
const MAX_DEPTH: u32 = 64;

/// Whether `json` nests deeper than MAX_DEPTH, counting brackets inside strings too (a frame's strings hold none, so
/// this only ever over-counts text that is no frame). The depth is the parser's while the text parses: opens minus
/// closes so far. By 64-byte chunks (counts the compiler vectorises); a chunk that could pass the limit byte by byte.
fn too_deep(json: &[u8]) -> bool {
    let limit = MAX_DEPTH as i64;
    let mut depth = 0i64;
    for chunk in json.chunks(64) {
        // '[' and '{' are 0x5b and 0x7b, ']' and '}' 0x5d and 0x7d: one compare each with bit 5 set.
        let opens = chunk.iter().map(|&b| ((b | 0x20) == b'{') as u8).sum::<u8>() as i64;
        let closes = chunk.iter().map(|&b| ((b | 0x20) == b'}') as u8).sum::<u8>() as i64;
        if depth + opens > limit {
            for &b in chunk {
                depth += matches!(b, b'[' | b'{') as i64 - matches!(b, b']' | b'}') as i64;
                if depth > limit {
                    return true;
                }
            }
        } else {
            depth += opens - closes;
        }
    }
    false
}

/// Decodes a frame's JSON text (already inflated when it came as brotli) into the scratch layout; its size, or the
/// reason it declines.
pub(crate) fn decode(json: &[u8]) -> std::result::Result<usize, Decline> {
    if too_deep(json) {
        return Err("nested too deep");
    }
    SCRATCH.with(|cell| {
        let mut out = cell.borrow_mut();
        out.clear();
        let root: sonic_rs::Value = sonic_rs::from_slice(json).map_err(|_| "json")?;
        if let Err(why) = parse::frame(&mut out, &root) {
            out.clear(); // nothing for takeLayout
            return Err(why);
        }
        Ok(out.size())
    })
}

/// Writes the last accepted layout at `mem[at..]`; false when it does not fit or `at` is not 8-aligned.
fn write_last(mem: &mut [u8], at: usize) -> bool {
    SCRATCH.with(|cell| {
        let out = cell.borrow();
        let size = out.size();
        if out.f.is_empty() || !at.is_multiple_of(8) || at.checked_add(size).is_none_or(|end| end > mem.len()) {
            return false;
        }
        out.write(&mut mem[at..at + size]);
        true
    })
}

/// N-API: decodes one flashblock frame's JSON bytes; writes its layout into `mem` at byte `at` (8-aligned) when it
/// takes at most `room` bytes. Never throws for bad input: a frame it does not accept comes back `declined`.
#[napi(js_name = "decodeFlashblock")]
pub fn decode_flashblock(json: &[u8], mut mem: BufferSlice, at: u32, room: u32) -> DecodeOutcome {
    match catch_unwind(AssertUnwindSafe(|| {
        let size = decode(json)?;
        let written = size <= room as usize && write_last(&mut mem, at as usize);
        Ok::<_, Decline>((size, written))
    })) {
        Err(_) => declined("native decoder panicked"),
        Ok(Err(why)) => declined(why),
        Ok(Ok((size, written))) => DecodeOutcome { declined: String::new(), size: size as u32, written },
    }
}

/// N-API: writes the layout of the frame `decodeFlashblock` accepted last (when it did not fit the room offered) into
/// `mem` at byte `at` (8-aligned); false when there is none, it does not fit, or `at` is not 8-aligned.
#[napi(js_name = "takeLayout")]
pub fn take_layout(mut mem: BufferSlice, at: u32) -> bool {
    catch_unwind(AssertUnwindSafe(|| write_last(&mut mem, at as usize))).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_nested_too_deep_is_declined_before_it_is_parsed() {
        // Two million levels overflowed the stack inside sonic-rs (the test thread's 2 MiB sooner than that).
        let deep = format!("{{\"index\":{}{}}}", "[".repeat(2_000_000), "]".repeat(2_000_000));
        assert_eq!(decode(deep.as_bytes()), Err("nested too deep"));
        let shallow = format!("{{\"index\":{}1{}}}", "[".repeat(40), "]".repeat(40));
        assert_eq!(decode(shallow.as_bytes()).err().map(|why| why != "nested too deep"), Some(true), "declined for its shape, not its depth");
        // The depth at a chunk's end carries into the next: 40 opens, 30 closes, 40 opens is 50 deep, 70 is too deep.
        let carried = |more: usize| format!("{}{}{}", "[".repeat(40), "]".repeat(30), "[".repeat(more));
        assert!(!too_deep(carried(40).as_bytes()) && too_deep(carried(60).as_bytes()));
    }

    #[test]
    fn an_accepted_layout_is_written_where_it_fits_or_kept_for_later() {
        let h = format!("0x{}", "11".repeat(32));
        let json = format!(
            r#"{{"index":1,"payload_id":"0x01","metadata":{{"block_number":1}},"diff":{{"state_root":"{h}","receipts_root":"{h}","logs_bloom":"0x{}","gas_used":"0x0","block_hash":"{h}","transactions":[]}}}}"#,
            "0".repeat(512)
        );
        let json = json.as_bytes();
        let size = decode(json).expect("a valid frame");
        assert_eq!(size % 8, 0);
        assert_eq!(decode(json), Ok(size), "nothing of the previous frame is kept");
        let mut mem = vec![0u8; size + 16];
        assert!(!write_last(&mut mem, 4), "not 8-aligned");
        assert!(!write_last(&mut mem, 24), "does not fit");
        assert!(write_last(&mut mem, 16));
        assert_eq!(u32::from_ne_bytes(mem[16..20].try_into().unwrap()), 0xfb1a_0003);
        assert_eq!(decode(b"{").err(), Some("json"));
        assert!(!write_last(&mut mem, 16), "a declined frame leaves nothing to take");
    }

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
