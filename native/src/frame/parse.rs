//! The frame's JSON (parsed once by sonic-rs) validated as src/ingest/frame.ts validates it and written to the layout
//! (layout.rs): the frame's own fields in reading order, each transaction checked by the RLP walk and hashed, each
//! receipt joined to its transaction here (by hash), balances keyed for the TypeScript side's tables. Declines (the
//! JS decoder then decides and words the reason) whatever it is unsure of.

use super::layout::{num, text, Out, BALANCE_STRIDE, NONE};
use super::shape::{address_key, data_of, fields, hex_of, is_hex_chars, is_hex_data, quantity_of, req, safe_quantity, safe_uint, small_quantity, string, R};
use super::txcheck::{check_deposit, check_tx, nonce_of};
use alloy_primitives::keccak256;
use sonic_rs::{JsonContainerTrait, JsonValueTrait, Value};

const TX_DEPOSIT: u8 = 0x7e;

fn transactions(out: &mut Out, v: &Value) -> R<()> {
    let arr = v.as_array().ok_or("diff.transactions is not an array")?;
    for (i, t) in arr.iter().enumerate() {
        let s = string(t)?;
        // decode_to_slice checks the digits.
        if s.len() < 4 || !s.len().is_multiple_of(2) || !s.starts_with("0x") {
            return Err("transaction is not hex bytes");
        }
        let start = out.tx_bytes.len();
        out.tx_bytes.resize(start + (s.len() - 2) / 2, 0);
        alloy_primitives::hex::decode_to_slice(&s.as_bytes()[2..], &mut out.tx_bytes[start..]).map_err(|_| "transaction is not hex bytes")?;
        let end = out.tx_bytes.len();
        let raw = &out.tx_bytes[start..end];
        let ty = check_tx(raw).ok_or("transaction not accepted by the walk")?;
        let hash = keccak256(raw);
        if ty == TX_DEPOSIT {
            let from = start + check_deposit(raw).ok_or("deposit")?;
            out.tx_row(ty, start, end, &hash.0, Some(from), None);
        } else {
            let nonce = nonce_of(raw);
            out.tx_row(ty, start, end, &hash.0, None, nonce);
            out.signed.extend_from_slice(&[i as u32, start as u32, end as u32]);
        }
    }
    Ok(())
}

/// Pushes an optional field's flag to `f` (0: absent or null, 1: present); the field when present. The flag goes in
/// before the field is checked: a declined frame's layout is dropped whole (`decode`).
fn present<'a>(f: &mut Vec<u32>, v: Option<&'a Value>) -> Option<&'a Value> {
    let v = v.filter(|v| !v.is_null());
    f.push(v.is_some() as u32);
    v
}

fn base(out: &mut Out, v: &Value) -> R<u64> {
    let [pbbr, parent, fee, randao, number, gas_limit, ts, extra, base_fee] = fields(
        v,
        ["parent_beacon_block_root", "parent_hash", "fee_recipient", "prev_randao", "block_number", "gas_limit", "timestamp", "extra_data", "base_fee_per_gas"],
    )?;
    out.str_field(hex_of(req(pbbr)?, 66)?);
    out.str_field(hex_of(req(parent)?, 66)?);
    out.str_field(hex_of(req(fee)?, 42)?);
    out.str_field(hex_of(req(randao)?, 66)?);
    let n = small_quantity(req(number)?)?;
    num(&mut out.f, n);
    out.qty_field(quantity_of(req(gas_limit)?)?);
    num(&mut out.f, small_quantity(req(ts)?)?);
    out.str_field(data_of(req(extra)?)?);
    out.qty_field(quantity_of(req(base_fee)?)?);
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
    out.str_field(hex_of(req(state_root)?, 66)?);
    out.str_field(hex_of(req(receipts_root)?, 66)?);
    out.str_field(hex_of(req(bloom)?, 2 + 512)?);
    out.qty_field(quantity_of(req(gas_used)?)?);
    out.str_field(hex_of(req(block_hash)?, 66)?);
    if let Some(b) = present(&mut out.f, blob) {
        out.qty_field(quantity_of(b)?);
    }
    if let Some(w) = present(&mut out.f, wroot) {
        out.str_field(hex_of(w, 66)?);
    }
    // Post-exec (0x7d, Lagoon): hex as sent; the TypeScript side decodes it with the full decoder (and may decline).
    if let Some(p) = present(&mut out.f, post_exec) {
        let p = string(p)?;
        if p.len() < 4 || !is_hex_data(p) {
            return Err("diff.post_exec_tx is not hex bytes");
        }
        out.raw_field(p.as_bytes());
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

/// An optional quantity below 2^53 as (present, high, low); a larger one declines.
fn optional_safe(r: &mut Vec<u32>, v: Option<&Value>) -> R<()> {
    match v.filter(|v| !v.is_null()) {
        None => r.extend_from_slice(&[0, 0, 0]),
        Some(v) => {
            r.push(1);
            num(r, safe_quantity(v)?);
        }
    }
    Ok(())
}

/// One receipt into the receipt area: type (NONE: none given), status (0, 1, 2 = none), cumulative gas, deposit
/// nonce and receipt version (each present, high, low), the log count, then per log the address (text offset), the
/// topic count and topics (text offsets), the data (text bounds). Returns its word offset.
fn receipt(out: &mut Out, v: &Value) -> R<u32> {
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
    let at = out.r.len() as u32;
    out.r.push(ty);
    out.r.push(match status {
        None => 2,
        Some(s) if s.is_null() => 2,
        Some(s) if s.as_bool() == Some(true) || s.as_str() == Some("0x1") => 1,
        Some(s) if s.as_bool() == Some(false) || s.as_str() == Some("0x0") => 0,
        Some(_) => return Err("bad receipt status"),
    });
    optional_safe(&mut out.r, cumulative)?;
    optional_safe(&mut out.r, nonce)?;
    optional_safe(&mut out.r, version)?;
    match logs.filter(|l| !l.is_null()) {
        None => out.r.push(0),
        Some(l) => {
            let arr = l.as_array().ok_or("receipt logs is not an array")?;
            out.r.push(arr.len() as u32);
            for log in arr.iter() {
                let [address, topics, data] = fields(log, ["address", "topics", "data"])?;
                let a = text(&mut out.s, hex_of(req(address)?, 42)?);
                out.r.push(a);
                let ts = req(topics)?.as_array().ok_or("topics is not an array")?;
                if ts.len() > 4 {
                    return Err("more than 4 topics");
                }
                out.r.push(ts.len() as u32);
                for t in ts.iter() {
                    let at = text(&mut out.s, hex_of(t, 66)?);
                    out.r.push(at);
                }
                let d = text(&mut out.s, data_of(req(data)?)?);
                out.r.push(d);
                out.r.push(out.s.len() as u32);
            }
        }
    }
    Ok(at)
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
    num(&mut out.f, n);
    let (pb, pi) = prev_id(prev)?;
    num(&mut out.f, pb);
    num(&mut out.f, pi);
    if let Some(r) = receipts.filter(|r| !r.is_null()) {
        let o = r.as_object().ok_or("receipts is not an object")?;
        out.has_receipts = true;
        for (k, rv) in o.iter() {
            if k.len() != 66 || !is_hex_chars(k) {
                return Err("bad receipt key");
            }
            let mut key = [0u8; 32];
            alloy_primitives::hex::decode_to_slice(&k.as_bytes()[2..], &mut key).map_err(|_| "bad receipt key")?;
            let at = receipt(out, rv)?;
            out.receipt_of.insert(key, at);
        }
    }
    if let Some(b) = balances.filter(|r| !r.is_null()) {
        let o = b.as_object().ok_or("balances is not an object")?;
        out.balance_count = o.len() as u32;
        for (k, bv) in o.iter() {
            if k.len() != 42 || !is_hex_chars(k) {
                return Err("bad balance key");
            }
            let key = text(&mut out.s, k);
            out.b.push(key);
            out.b.push(address_key(k));
            let before = out.b.len();
            Out::qty_into(&mut out.b, &mut out.q, &mut out.s, quantity_of(bv)?);
            if out.b.len() - before == 2 {
                out.b.push(0);
            }
            debug_assert_eq!(out.b.len() % BALANCE_STRIDE, 0, "a fixed stride");
        }
    }
    match al.and_then(|a| a.as_str()) {
        None => out.f.push(0),
        Some(s) if is_hex_data(s) => {
            out.f.push(1);
            out.raw_field(s.as_bytes());
        }
        Some(_) => out.f.push(2),
    }
    Ok(n)
}

/// Validates and lays out one frame (see the module comment).
pub(super) fn frame(out: &mut Out, root: &Value) -> R<()> {
    let [index, payload_id, meta, base_v, diff_v] = fields(root, ["index", "payload_id", "metadata", "base", "diff"])?;
    let idx = safe_uint(req(index)?)?;
    if idx > 1_000_000 {
        return Err("index out of range");
    }
    num(&mut out.f, idx);
    let pid = string(req(payload_id)?)?;
    if !is_hex_data(pid) || pid.len() < 4 || pid.len() > 66 {
        return Err("bad payload_id");
    }
    out.str_field(pid);
    let number = metadata(out, req(meta)?)?;
    if let Some(b) = present(&mut out.f, base_v) {
        if base(out, b)? != number {
            return Err("base.block_number differs");
        }
    } else if idx == 0 {
        return Err("index 0 without base");
    }
    diff(out, req(diff_v)?)
}
