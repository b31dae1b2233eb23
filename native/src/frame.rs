//! Flashblock frame decoding for the ingest path: one parse of the frame's JSON (sonic-rs), the same validation as
//! src/ingest/frame.ts, every transaction checked by the RLP walk of src/chain/lazy-tx.ts and hashed, and sender
//! recovery in parallel off the JS thread. Knows nothing of pending state.
//!
//! The rule that keeps verdicts identical: this decoder only ever *accepts* what the JS decoder accepts, with the
//! same result; whatever it is unsure of (bad input, an escape in a hex string, a rare shape) it *declines*, and the
//! caller runs the JS decoder, which words the exact reason. test/ingest/native-frame.test.ts runs both on every
//! vector and fuzz case.
//!
//! The result is a compact layout the TypeScript reader (src/ingest/native-frame.ts) walks in the same order it is
//! written: `u` (u32s: string bounds, counts, small numbers, flags), `s` (every string value JS keeps, lower-cased,
//! concatenated: JS takes substrings of it), `q` (quantities that fit 64 bits), and the signed transactions' bytes.

use alloy_primitives::{keccak256, Address};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use sonic_rs::{JsonContainerTrait, JsonValueTrait, Value};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Why the native decoder left a frame to the JS decoder (tests and diagnostics; never shown as a verdict).
type Decline = &'static str;
type R<T> = std::result::Result<T, Decline>;

const TX_DEPOSIT: u8 = 0x7e;
const NONE: u32 = u32::MAX;

// ---------------------------------------------------------------------------------------------------------------
// The layout writer.

pub(crate) struct Out {
    u: Vec<u32>,
    s: Vec<u8>,
    q: Vec<u64>,
    /// Every transaction's bytes, back to back (bounds in `u`); the signed ones are listed in `signed`.
    tx_bytes: Vec<u8>,
    signed: Vec<u32>,
}

impl Out {
    /// Appends `v` (already checked to be ASCII hex data) lower-cased to `s`; pushes its bounds.
    fn str_lower(&mut self, v: &str) {
        let start = self.s.len() as u32;
        // Checked hex: only A-F can be upper case (a branch-free fold the compiler vectorises).
        if v.bytes().fold(false, |a, c| a | (c.wrapping_sub(b'A') < 6)) {
            self.s.extend(v.bytes().map(|c| c.to_ascii_lowercase()));
        } else {
            self.s.extend_from_slice(v.as_bytes());
        }
        self.u.push(start);
        self.u.push(self.s.len() as u32);
    }

    fn str_raw(&mut self, v: &[u8]) {
        let start = self.s.len() as u32;
        self.s.extend_from_slice(v);
        self.u.push(start);
        self.u.push(self.s.len() as u32);
    }

    /// A number below 2^53 as (high, low) 32-bit halves.
    fn num(&mut self, n: u64) {
        self.u.push((n >> 32) as u32);
        self.u.push(n as u32);
    }

    /// A loose quantity (checked): 0 then its value in `q` when it fits 64 bits, else 1 then its text.
    fn qty(&mut self, v: &str) {
        let digits = v[2..].trim_start_matches('0');
        if digits.len() <= 16 {
            self.u.push(0);
            self.q.push(if digits.is_empty() { 0 } else { u64::from_str_radix(digits, 16).unwrap_or(0) });
        } else {
            self.u.push(1);
            self.str_lower(v);
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Shapes (the checks of src/chain/hex.ts).

fn is_hex_body(b: &[u8]) -> bool {
    alloy_primitives::hex::check_raw(b)
}

/// `0x` + hex digits (any count).
fn is_hex_chars(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 2 && b[0] == b'0' && b[1] == b'x' && is_hex_body(&b[2..])
}

/// isHexData: an even number of digits.
fn is_hex_data(s: &str) -> bool {
    is_hex_chars(s) && s.len().is_multiple_of(2)
}

/// isLooseQuantity.
fn is_loose_quantity(s: &str) -> bool {
    s.len() > 2 && s.len() <= 66 && is_hex_chars(s)
}

fn string(v: &Value) -> R<&str> {
    v.as_str().ok_or("not a string")
}

/// lowerHexData(v, chars) != null.
fn hex_of(v: &Value, chars: usize) -> R<&str> {
    let s = string(v)?;
    if s.len() != chars || !is_hex_chars(s) {
        return Err("not hex of the expected length");
    }
    Ok(s)
}

fn data_of(v: &Value) -> R<&str> {
    let s = string(v)?;
    if !is_hex_data(s) {
        return Err("not hex data");
    }
    Ok(s)
}

fn quantity_of(v: &Value) -> R<&str> {
    let s = string(v)?;
    if !is_loose_quantity(s) {
        return Err("not a quantity");
    }
    Ok(s)
}

/// smallQuantity: a loose quantity of at most 15 characters, as a number.
fn small_quantity(v: &Value) -> R<u64> {
    let s = quantity_of(v)?;
    if s.len() > 15 {
        return Err("quantity too large");
    }
    u64::from_str_radix(&s[2..], 16).map_err(|_| "quantity")
}

/// A JSON number that is a non-negative safe integer (JS `Number.isSafeInteger(n) && n >= 0`); floats decline.
fn safe_uint(v: &Value) -> R<u64> {
    match v.as_u64() {
        Some(n) if n < (1u64 << 53) => Ok(n),
        _ => Err("not a non-negative safe integer"),
    }
}

/// The fields of an object by name, refusing duplicates of the names asked for (JSON.parse keeps the last one).
fn fields<'a, const N: usize>(v: &'a Value, names: [&str; N]) -> R<[Option<&'a Value>; N]> {
    let o = v.as_object().ok_or("not an object")?;
    let mut out: [Option<&Value>; N] = [None; N];
    for (k, val) in o.iter() {
        if let Some(i) = names.iter().position(|n| *n == k) {
            if out[i].is_some() {
                return Err("duplicate key");
            }
            out[i] = Some(val);
        }
    }
    Ok(out)
}

fn req(v: Option<&Value>) -> R<&Value> {
    v.ok_or("missing field")
}

// ---------------------------------------------------------------------------------------------------------------
// Transactions: the RLP walk of src/chain/lazy-tx.ts (accepts exactly what it accepts, or less).

#[derive(Clone, Copy)]
struct Item {
    start: usize,
    end: usize,
    list: bool,
}

fn item(b: &[u8], pos: usize, end: usize) -> Option<Item> {
    if pos >= end {
        return None;
    }
    let h = b[pos];
    let (start, len, list) = if h < 0x80 {
        return Some(Item { start: pos, end: pos + 1, list: false });
    } else if h <= 0xb7 {
        let len = (h - 0x80) as usize;
        if len == 1 && pos + 1 < end && b[pos + 1] < 0x80 {
            return None;
        }
        (pos + 1, len, false)
    } else if h < 0xc0 {
        let n = (h - 0xb7) as usize;
        (pos + 1 + n, long_len(b, pos + 1, n, end)?, false)
    } else if h <= 0xf7 {
        (pos + 1, (h - 0xc0) as usize, true)
    } else {
        let n = (h - 0xf7) as usize;
        (pos + 1 + n, long_len(b, pos + 1, n, end)?, true)
    };
    let e = start.checked_add(len)?;
    if e > end {
        return None;
    }
    Some(Item { start, end: e, list })
}

fn long_len(b: &[u8], pos: usize, n: usize, end: usize) -> Option<usize> {
    if pos + n > end || b[pos] == 0 {
        return None;
    }
    let mut len: usize = 0;
    for &c in &b[pos..pos + n] {
        len = len.checked_mul(256)?.checked_add(c as usize)?;
    }
    if len <= 55 {
        None
    } else {
        Some(len)
    }
}

fn bytes_item(b: &[u8], pos: usize, end: usize) -> Option<Item> {
    item(b, pos, end).filter(|i| !i.list)
}

/// A canonical unsigned integer of at most `max` bytes.
fn scalar(b: &[u8], pos: usize, end: usize, max: usize) -> Option<Item> {
    let i = bytes_item(b, pos, end)?;
    let len = i.end - i.start;
    if len > max || (len > 0 && b[i.start] == 0) {
        return None;
    }
    Some(i)
}

fn fixed(b: &[u8], pos: usize, end: usize, n: usize) -> Option<usize> {
    bytes_item(b, pos, end).filter(|i| i.end - i.start == n).map(|i| i.end)
}

fn to_address(b: &[u8], pos: usize, end: usize, allow_create: bool) -> Option<usize> {
    let i = bytes_item(b, pos, end)?;
    let len = i.end - i.start;
    (len == 20 || (len == 0 && allow_create)).then_some(i.end)
}

const N: [u8; 32] = hex32("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141");
const HALF_N: [u8; 32] = hex32("7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0");

const fn hex32(s: &str) -> [u8; 32] {
    let b = s.as_bytes();
    let mut out = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        out[i] = (nib(b[2 * i]) << 4) | nib(b[2 * i + 1]);
        i += 1;
    }
    out
}

const fn nib(c: u8) -> u8 {
    if c <= b'9' {
        c - b'0'
    } else {
        c - b'a' + 10
    }
}

/// Compares a canonical scalar payload with a 32-byte constant (shorter = smaller).
fn cmp32(p: &[u8], k: &[u8; 32]) -> std::cmp::Ordering {
    if p.len() < 32 {
        return std::cmp::Ordering::Less;
    }
    p.cmp(&k[..])
}

/// r in [1, n-1], s in [1, n/2]; the end of s.
fn signature_rs(b: &[u8], pos: usize, end: usize) -> Option<usize> {
    let r = scalar(b, pos, end, 32)?;
    if r.end == r.start || cmp32(&b[r.start..r.end], &N).is_ge() {
        return None;
    }
    let s = scalar(b, r.end, end, 32)?;
    if s.end == s.start || cmp32(&b[s.start..s.end], &HALF_N).is_gt() {
        return None;
    }
    Some(s.end)
}

fn fixed_list(b: &[u8], pos: usize, end: usize, n: usize) -> Option<usize> {
    let l = item(b, pos, end).filter(|i| i.list)?;
    let mut p = l.start;
    while p < l.end {
        p = fixed(b, p, l.end, n)?;
    }
    Some(l.end)
}

fn access_list(b: &[u8], pos: usize, end: usize) -> Option<usize> {
    let l = item(b, pos, end).filter(|i| i.list)?;
    let mut p = l.start;
    while p < l.end {
        let e = item(b, p, l.end).filter(|i| i.list)?;
        let q = fixed(b, e.start, e.end, 20)?;
        if fixed_list(b, q, e.end, 32)? != e.end {
            return None;
        }
        p = e.end;
    }
    Some(l.end)
}

fn authorizations(b: &[u8], pos: usize, end: usize) -> Option<usize> {
    let l = item(b, pos, end).filter(|i| i.list)?;
    let mut p = l.start;
    while p < l.end {
        let e = item(b, p, l.end).filter(|i| i.list)?;
        let mut q = scalar(b, e.start, e.end, 32)?.end;
        q = fixed(b, q, e.end, 20)?;
        q = scalar(b, q, e.end, 8)?.end;
        q = scalar(b, q, e.end, 1)?.end;
        q = scalar(b, q, e.end, 32)?.end;
        q = scalar(b, q, e.end, 32)?.end;
        if q != e.end {
            return None;
        }
        p = e.end;
    }
    Some(l.end)
}

fn check_legacy(b: &[u8]) -> Option<()> {
    let end = b.len();
    let l = item(b, 0, end).filter(|i| i.list && i.end == end)?;
    let mut p = scalar(b, l.start, end, 8)?.end;
    p = scalar(b, p, end, 32)?.end;
    p = scalar(b, p, end, 8)?.end;
    p = to_address(b, p, end, true)?;
    p = scalar(b, p, end, 32)?.end;
    p = bytes_item(b, p, end)?.end;
    let v = scalar(b, p, end, 32)?;
    let vb = &b[v.start..v.end];
    if vb.len() > 6 {
        // EIP-155: chain id = (v - 35) / 2 must be < 2^64, i.e. v < 2^65 + 35 (so v has at most 9 bytes).
        if vb.len() > 9 {
            return None;
        }
        let mut x: u128 = 0;
        for &c in vb {
            x = (x << 8) | c as u128;
        }
        if (x - 35) >> 1 > u64::MAX as u128 {
            return None;
        }
    } else {
        let x = vb.iter().fold(0u64, |a, &c| (a << 8) | c as u64);
        if x != 27 && x != 28 && x < 35 {
            return None;
        }
    }
    (signature_rs(b, v.end, end)? == end).then_some(())
}

fn check_typed(b: &[u8], ty: u8) -> Option<()> {
    let end = b.len();
    let l = item(b, 1, end).filter(|i| i.list && i.end == end)?;
    let mut p = scalar(b, l.start, end, 8)?.end; // chainId
    p = scalar(b, p, end, 8)?.end; // nonce
    p = scalar(b, p, end, 32)?.end; // gasPrice / maxPriorityFeePerGas
    if ty != 1 {
        p = scalar(b, p, end, 32)?.end; // maxFeePerGas
    }
    p = scalar(b, p, end, 8)?.end; // gas
    p = to_address(b, p, end, ty == 1 || ty == 2)?;
    p = scalar(b, p, end, 32)?.end; // value
    p = bytes_item(b, p, end)?.end; // input
    p = access_list(b, p, end)?;
    if ty == 3 {
        p = scalar(b, p, end, 32)?.end;
        p = fixed_list(b, p, end, 32)?;
    } else if ty == 4 {
        p = authorizations(b, p, end)?;
    }
    let y = scalar(b, p, end, 1)?;
    if y.end > y.start && b[y.start] != 1 {
        return None;
    }
    (signature_rs(b, y.end, end)? == end).then_some(())
}

/// Deposit: the offset of `from`.
fn check_deposit(b: &[u8]) -> Option<usize> {
    let end = b.len();
    let l = item(b, 1, end).filter(|i| i.list && i.end == end)?;
    let mut p = fixed(b, l.start, end, 32)?;
    let from = bytes_item(b, p, end).filter(|i| i.end - i.start == 20)?;
    p = to_address(b, from.end, end, true)?;
    p = scalar(b, p, end, 16)?.end;
    p = scalar(b, p, end, 32)?.end;
    p = scalar(b, p, end, 8)?.end;
    let sys = bytes_item(b, p, end)?;
    if sys.end - sys.start > 1 || (sys.end > sys.start && b[sys.start] != 1) {
        return None;
    }
    (bytes_item(b, sys.end, end)?.end == end).then_some(from.start)
}

/// The EIP-2718 type if the walk accepts `b` (types 0-4 and deposits; anything else is the JS decoder's to judge).
fn check_tx(b: &[u8]) -> Option<u8> {
    let first = *b.first()?;
    if first >= 0xc0 {
        check_legacy(b).map(|_| 0)
    } else if first == TX_DEPOSIT {
        check_deposit(b).map(|_| TX_DEPOSIT)
    } else if (1..=4).contains(&first) {
        check_typed(b, first).map(|_| first)
    } else {
        None
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_hex(s: &mut Vec<u8>, bytes: &[u8]) {
    s.extend_from_slice(b"0x");
    for &c in bytes {
        s.push(HEX[(c >> 4) as usize]);
        s.push(HEX[(c & 15) as usize]);
    }
}

fn transactions(out: &mut Out, v: &Value) -> R<()> {
    let arr = v.as_array().ok_or("diff.transactions is not an array")?;
    out.u.push(arr.len() as u32);
    for (i, t) in arr.iter().enumerate() {
        let s = string(t)?;
        // decode_to_slice checks the digits.
        if s.len() < 4 || !s.len().is_multiple_of(2) || !s.starts_with("0x") {
            return Err("transaction is not hex bytes");
        }
        let start = out.tx_bytes.len();
        out.tx_bytes.resize(start + (s.len() - 2) / 2, 0);
        alloy_primitives::hex::decode_to_slice(&s.as_bytes()[2..], &mut out.tx_bytes[start..]).map_err(|_| "transaction is not hex bytes")?;
        let raw = &out.tx_bytes[start..];
        let ty = check_tx(raw).ok_or("transaction not accepted by the walk")?;
        let hash = keccak256(raw);
        let end = out.tx_bytes.len() as u32;
        out.u.extend_from_slice(&[ty as u32, start as u32, end]);
        let h = out.s.len() as u32;
        push_hex(&mut out.s, hash.as_slice());
        out.u.push(h);
        out.u.push(out.s.len() as u32);
        if ty == TX_DEPOSIT {
            let from = start + check_deposit(&out.tx_bytes[start..]).ok_or("deposit")?;
            let f = out.s.len() as u32;
            let (bytes, s) = (&out.tx_bytes, &mut out.s);
            push_hex(s, &bytes[from..from + 20]);
            out.u.push(f);
            out.u.push(out.s.len() as u32);
        } else {
            out.signed.extend_from_slice(&[i as u32, start as u32, end]);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------------
// The frame.

fn base(out: &mut Out, v: &Value) -> R<u64> {
    let [pbbr, parent, fee, randao, number, gas_limit, ts, extra, base_fee] = fields(
        v,
        ["parent_beacon_block_root", "parent_hash", "fee_recipient", "prev_randao", "block_number", "gas_limit", "timestamp", "extra_data", "base_fee_per_gas"],
    )?;
    out.str_lower(hex_of(req(pbbr)?, 66)?);
    out.str_lower(hex_of(req(parent)?, 66)?);
    out.str_lower(hex_of(req(fee)?, 42)?);
    out.str_lower(hex_of(req(randao)?, 66)?);
    let n = small_quantity(req(number)?)?;
    out.num(n);
    out.qty(quantity_of(req(gas_limit)?)?);
    out.num(small_quantity(req(ts)?)?);
    out.str_lower(data_of(req(extra)?)?);
    out.qty(quantity_of(req(base_fee)?)?);
    Ok(n)
}

fn diff(out: &mut Out, v: &Value) -> R<()> {
    let [state_root, receipts_root, bloom, gas_used, block_hash, blob, wroot, withdrawals, post_exec, txs] = fields(
        v,
        ["state_root", "receipts_root", "logs_bloom", "gas_used", "block_hash", "blob_gas_used", "withdrawals_root", "withdrawals", "post_exec_tx", "transactions"],
    )?;
    if let Some(w) = withdrawals.filter(|w| !w.is_null()) {
        if !w.as_array().is_some_and(|a| a.is_empty()) {
            return Err("non-empty diff.withdrawals is left to the JS decoder");
        }
    }
    out.str_lower(hex_of(req(state_root)?, 66)?);
    out.str_lower(hex_of(req(receipts_root)?, 66)?);
    out.str_lower(hex_of(req(bloom)?, 2 + 512)?);
    out.qty(quantity_of(req(gas_used)?)?);
    out.str_lower(hex_of(req(block_hash)?, 66)?);
    match blob.filter(|b| !b.is_null()) {
        None => out.u.push(0),
        Some(b) => {
            out.u.push(1);
            out.qty(quantity_of(b)?);
        }
    }
    match wroot.filter(|b| !b.is_null()) {
        None => out.u.push(0),
        Some(w) => {
            out.u.push(1);
            out.str_lower(hex_of(w, 66)?);
        }
    }
    // Post-exec (0x7d, Lagoon): hex as sent; the TypeScript side decodes it with the full decoder (and may decline).
    match post_exec.filter(|p| !p.is_null()) {
        None => out.u.push(0),
        Some(p) => {
            let p = string(p)?;
            if p.len() < 4 || !is_hex_data(p) {
                return Err("diff.post_exec_tx is not hex bytes");
            }
            out.u.push(1);
            out.str_raw(p.as_bytes());
        }
    }
    transactions(out, req(txs)?)
}

fn receipt_tag(k: &str) -> Option<u32> {
    Some(match k {
        "Legacy" => 0,
        "Eip2930" => 1,
        "Eip1559" => 2,
        "Eip4844" => 3,
        "Eip7702" => 4,
        "Deposit" => 0x7e,
        "PostExec" => 0x7d,
        _ => return None,
    })
}

fn optional_qty(out: &mut Out, v: Option<&Value>) -> R<()> {
    match v.filter(|v| !v.is_null()) {
        None => out.u.push(0),
        Some(v) => {
            out.u.push(1);
            out.qty(quantity_of(v)?);
        }
    }
    Ok(())
}

fn receipt(out: &mut Out, v: &Value) -> R<()> {
    let o = v.as_object().ok_or("receipt is not an object")?;
    let mut body = v;
    let mut ty = NONE;
    let tagged = if o.len() == 1 { o.iter().next().and_then(|(k, inner)| receipt_tag(k).map(|t| (t, inner))) } else { None };
    if let Some((t, inner)) = tagged {
        if !inner.is_object() {
            return Err("tagged receipt body is not an object");
        }
        ty = t;
        body = inner;
    }
    let [type_, status, cumulative, logs, nonce, version] = fields(body, ["type", "status", "cumulativeGasUsed", "logs", "depositNonce", "depositReceiptVersion"])?;
    if tagged.is_none() {
        if let Some(t) = type_ {
            let t = small_quantity(t)?;
            if t > 0x7f {
                return Err("receipt type out of range");
            }
            ty = t as u32;
        } else if !o.is_empty() && status.is_none() && cumulative.is_none() {
            return Err("unknown receipt shape");
        }
    }
    out.u.push(ty);
    out.u.push(match status {
        None => 2,
        Some(s) if s.is_null() => 2,
        Some(s) if s.as_bool() == Some(true) || s.as_str() == Some("0x1") => 1,
        Some(s) if s.as_bool() == Some(false) || s.as_str() == Some("0x0") => 0,
        Some(_) => return Err("bad receipt status"),
    });
    optional_qty(out, cumulative)?;
    match logs.filter(|l| !l.is_null()) {
        None => out.u.push(0),
        Some(l) => {
            let arr = l.as_array().ok_or("receipt logs is not an array")?;
            out.u.push(arr.len() as u32);
            for log in arr.iter() {
                let [address, topics, data] = fields(log, ["address", "topics", "data"])?;
                out.str_lower(hex_of(req(address)?, 42)?);
                let ts = req(topics)?.as_array().ok_or("topics is not an array")?;
                if ts.len() > 4 {
                    return Err("more than 4 topics");
                }
                out.u.push(ts.len() as u32);
                for t in ts.iter() {
                    out.str_lower(hex_of(t, 66)?);
                }
                out.str_lower(data_of(req(data)?)?);
            }
        }
    }
    optional_qty(out, nonce)?;
    optional_qty(out, version)
}

/// `"<block>-<index>"` (1-15 and 1-7 ASCII digits); (block + 1, index + 1), (0, 0) for none.
fn prev_id(v: Option<&Value>) -> R<(u64, u64)> {
    let Some(v) = v.filter(|v| !v.is_null()) else { return Ok((0, 0)) };
    let s = string(v)?;
    let (a, b) = s.split_once('-').ok_or("bad prev_flashblock_id")?;
    let digits = |x: &str, max: usize| !x.is_empty() && x.len() <= max && x.bytes().all(|c| c.is_ascii_digit());
    if !digits(a, 15) || !digits(b, 7) {
        return Err("bad prev_flashblock_id");
    }
    let (a, b): (u64, u64) = (a.parse().map_err(|_| "prev")?, b.parse().map_err(|_| "prev")?);
    Ok(if a == 0 && b == 0 { (0, 0) } else { (a + 1, b + 1) })
}

fn metadata(out: &mut Out, v: &Value) -> R<u64> {
    let [number, prev, receipts, balances, al] = fields(v, ["block_number", "prev_flashblock_id", "receipts", "new_account_balances", "access_list"])?;
    let n = safe_uint(req(number)?)?;
    out.num(n);
    let (pb, pi) = prev_id(prev)?;
    out.num(pb);
    out.num(pi);
    match receipts.filter(|r| !r.is_null()) {
        None => out.u.push(0),
        Some(r) => {
            let o = r.as_object().ok_or("receipts is not an object")?;
            out.u.push(1);
            out.u.push(o.len() as u32);
            for (k, rv) in o.iter() {
                if k.len() != 66 || !is_hex_chars(k) {
                    return Err("bad receipt key");
                }
                out.str_lower(k);
                receipt(out, rv)?;
            }
        }
    }
    match balances.filter(|r| !r.is_null()) {
        None => out.u.push(0),
        Some(b) => {
            let o = b.as_object().ok_or("balances is not an object")?;
            out.u.push(1);
            out.u.push(o.len() as u32);
            for (k, bv) in o.iter() {
                if k.len() != 42 || !is_hex_chars(k) {
                    return Err("bad balance key");
                }
                out.str_lower(k);
                out.qty(quantity_of(bv)?);
            }
        }
    }
    match al.and_then(|a| a.as_str()) {
        None => out.u.push(0),
        Some(s) if is_hex_data(s) => {
            out.u.push(1);
            out.str_raw(s.as_bytes());
        }
        Some(_) => out.u.push(2),
    }
    Ok(n)
}

fn frame(out: &mut Out, root: &Value) -> R<()> {
    let [index, payload_id, meta, base_v, diff_v] = fields(root, ["index", "payload_id", "metadata", "base", "diff"])?;
    let idx = safe_uint(req(index)?)?;
    if idx > 1_000_000 {
        return Err("index out of range");
    }
    out.num(idx);
    let pid = string(req(payload_id)?)?;
    if !is_hex_data(pid) || pid.len() < 4 || pid.len() > 66 {
        return Err("bad payload_id");
    }
    out.str_lower(pid);
    let number = metadata(out, req(meta)?)?;
    match base_v.filter(|b| !b.is_null()) {
        None if idx == 0 => return Err("index 0 without base"),
        None => out.u.push(0),
        Some(b) => {
            out.u.push(1);
            if base(out, b)? != number {
                return Err("base.block_number differs");
            }
        }
    }
    diff(out, req(diff_v)?)
}

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

/// The layout of one accepted frame (see the module comment), or the reason the JS decoder must decide.
#[napi(object, object_from_js = false)]
pub struct FrameLayout {
    /// Empty when accepted; else why the native decoder declined (the JS decoder then decides and words it).
    pub declined: String,
    pub u: Uint32Array,
    pub s: LayoutText,
    pub q: BigUint64Array,
    /// Every transaction's bytes back to back (the bounds are in `u`); `recoverSenders` reads the signed ones.
    pub tx_bytes: Buffer,
    /// Per signed transaction: [index in the flashblock, start, end) into `tx_bytes`.
    pub signed: Uint32Array,
}

fn declined(why: &str) -> FrameLayout {
    FrameLayout {
        declined: why.to_string(),
        u: Uint32Array::new(Vec::new()),
        s: LayoutText(Vec::new()),
        q: BigUint64Array::new(Vec::new()),
        tx_bytes: Vec::new().into(),
        signed: Uint32Array::new(Vec::new()),
    }
}

/// Decodes a frame's JSON text (already inflated when it came as brotli). Never throws for bad input: a frame it does
/// not accept comes back with `declined` set.
pub(crate) fn decode(json: &[u8]) -> std::result::Result<Out, Decline> {
    let root: Value = sonic_rs::from_slice(json).map_err(|_| "json")?;
    let mut out = Out { u: Vec::with_capacity(8192), s: Vec::with_capacity(json.len() / 2), q: Vec::with_capacity(1024), tx_bytes: Vec::new(), signed: Vec::new() };
    frame(&mut out, &root)?;
    Ok(out)
}

/// N-API: decodes one flashblock frame's JSON bytes into a `FrameLayout` (see `decode`).
#[napi(js_name = "decodeFlashblock")]
pub fn decode_flashblock(json: &[u8]) -> FrameLayout {
    match catch_unwind(AssertUnwindSafe(|| decode(json))) {
        Err(_) => declined("native decoder panicked"),
        Ok(Err(why)) => declined(why),
        // Every string in `s` is ASCII (hex and "0x"), so its bytes read the same as Latin-1.
        Ok(Ok(o)) => FrameLayout {
            declined: String::new(),
            u: Uint32Array::new(o.u),
            s: LayoutText(o.s),
            q: BigUint64Array::new(o.q),
            tx_bytes: o.tx_bytes.into(),
            signed: Uint32Array::new(o.signed),
        },
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Sender recovery.

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

/// N-API: recovers senders off the JS thread (libuv's pool, fanned out to the cores). `signed` is `FrameLayout`'s
/// (triples [index, start, end)); resolves to 21 bytes per triple (see `recover_all`).
#[napi(js_name = "recoverSenders")]
pub fn recover_senders(tx_bytes: &[u8], signed: &[u32]) -> AsyncTask<RecoverTask> {
    let bounds = signed.chunks_exact(3).map(|t| (t[1] as usize, t[2] as usize)).collect();
    AsyncTask::new(RecoverTask { bytes: tx_bytes.to_vec(), bounds })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declines_what_it_does_not_accept() {
        assert_eq!(decode(b"[1,2]").err(), Some("not an object"));
        assert_eq!(decode(b"{").err(), Some("json"));
        assert_eq!(decode(br#"{"index":0,"payload_id":"0x01","metadata":{"block_number":1},"diff":{}}"#).err(), Some("index 0 without base"));
    }

    #[test]
    fn rlp_walk_rejects_wrapped_single_bytes_and_high_s() {
        assert!(item(&[0x81, 0x05], 0, 2).is_none());
        assert!(item(&[0x81, 0x80], 0, 2).is_some());
        let mut s = vec![0xa0];
        s.extend_from_slice(&HALF_N);
        assert!(scalar(&s, 0, s.len(), 32).is_some());
        assert!(cmp32(&HALF_N, &HALF_N).is_eq());
    }
}

