//! The frame's layout as the TypeScript side reads it (src/chain/layout-body.ts walks the same format): one run of
//! bytes — u32 words, u64 quantities, the transactions' bytes and the text of every string JS keeps (lower-cased hex,
//! concatenated) — written into memory JS provides (its frame pool), so a held flashblock allocates nothing of its
//! own. Writes what `parse.rs` validated; knows no JSON.
//!
//! Words: a fixed header (`H_*` below), the frame's own fields in reading order, then fixed-stride tables JS reads
//! by position with no per-transaction object: transactions (`TX_STRIDE`), receipts (variable, reached from their
//! transaction), balances (`BALANCE_STRIDE`) and the signed transactions (triples for `recoverSenders`).

use super::shape::hash_key;
use std::collections::HashMap;

pub(super) const NONE: u32 = u32::MAX;
const MAGIC: u32 = 0xfb1a_0003;

// Header words.
const H_MAGIC: usize = 0;
const H_WORDS: usize = 1;
const H_Q_AT: usize = 2;
const H_Q_COUNT: usize = 3;
const H_TX_BYTES_AT: usize = 4;
const H_TX_BYTES_LEN: usize = 5;
const H_TX_COUNT: usize = 6;
const H_TX_TABLE_AT: usize = 7;
const H_HAS_RECEIPTS: usize = 8;
const H_BALANCE_COUNT: usize = 9;
const H_BALANCE_TABLE_AT: usize = 10;
const H_RECEIPTS_AT: usize = 11;
const H_SIGNED_AT: usize = 12;
const H_SIGNED_COUNT: usize = 13;
const H_FIELDS_AT: usize = 14;
const H_TEXT_AT: usize = 15;
const H_TEXT_LEN: usize = 16;
const HEADER_WORDS: usize = 18;

/// Per transaction: type, bytes [start, end) in the transaction area, hash (text offset, 66 chars), hash key, the
/// deposit's sender (text offset, 42 chars, or NONE), its receipt (word offset in the receipt area, or NONE), nonce
/// (high, low; NONE, NONE for a deposit or a nonce of 2^53 or more).
pub(super) const TX_STRIDE: usize = 9;
/// Per balance: address (text offset, 42 chars), address key, then 0 + q index, or 1 + text [start, end).
pub(super) const BALANCE_STRIDE: usize = 5;

/// The layout being written; reused across frames (only the text leaves with the result).
#[derive(Default)]
pub(crate) struct Out {
    pub(super) f: Vec<u32>,
    pub(super) txs: Vec<u32>,
    pub(super) r: Vec<u32>,
    pub(super) b: Vec<u32>,
    pub(super) signed: Vec<u32>,
    pub(super) s: Vec<u8>,
    pub(super) q: Vec<u64>,
    pub(super) tx_bytes: Vec<u8>,
    /// Receipt key (the transaction hash) → word offset in `r`; the last of duplicate keys wins, as in a JS Map.
    pub(super) receipt_of: HashMap<[u8; 32], u32, foldhash::fast::RandomState>,
    pub(super) has_receipts: bool,
    pub(super) balance_count: u32,
}

/// Appends `v` (checked ASCII hex) lower-cased to the text; returns its start.
pub(super) fn text(s: &mut Vec<u8>, v: &str) -> u32 {
    let start = s.len() as u32;
    // Checked hex: only A-F can be upper case (a branch-free fold the compiler vectorises).
    if v.bytes().fold(false, |a, c| a | (c.wrapping_sub(b'A') < 6)) {
        s.extend(v.bytes().map(|c| c.to_ascii_lowercase()));
    } else {
        s.extend_from_slice(v.as_bytes());
    }
    start
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `0x` + the lower-case hex of `bytes` to the text; returns its start.
pub(super) fn hex_text(s: &mut Vec<u8>, bytes: &[u8]) -> u32 {
    let start = s.len() as u32;
    s.extend_from_slice(b"0x");
    for &c in bytes {
        s.push(HEX[(c >> 4) as usize]);
        s.push(HEX[(c & 15) as usize]);
    }
    start
}

/// A number below 2^53 as (high, low) 32-bit halves.
pub(super) fn num(w: &mut Vec<u32>, n: u64) {
    w.push((n >> 32) as u32);
    w.push(n as u32);
}

impl Out {
    pub(super) fn clear(&mut self) {
        self.f.clear();
        self.txs.clear();
        self.r.clear();
        self.b.clear();
        self.signed.clear();
        self.q.clear();
        self.s.clear();
        self.tx_bytes.clear();
        self.receipt_of.clear();
        self.has_receipts = false;
        self.balance_count = NONE;
    }

    /// A field string: its bounds in the text.
    pub(super) fn str_field(&mut self, v: &str) {
        let start = text(&mut self.s, v);
        self.f.push(start);
        self.f.push(self.s.len() as u32);
    }

    /// A field string kept as sent (no lower-casing: post-exec hex, access lists).
    pub(super) fn raw_field(&mut self, v: &[u8]) {
        self.f.push(self.s.len() as u32);
        self.s.extend_from_slice(v);
        self.f.push(self.s.len() as u32);
    }

    /// A loose quantity (checked) into `w`: 0 and its index in `q` when it fits 64 bits, else 1 and its text bounds.
    pub(super) fn qty_into(w: &mut Vec<u32>, q: &mut Vec<u64>, s: &mut Vec<u8>, v: &str) {
        let digits = v[2..].trim_start_matches('0');
        if digits.len() <= 16 {
            w.push(0);
            w.push(q.len() as u32);
            q.push(if digits.is_empty() { 0 } else { u64::from_str_radix(digits, 16).unwrap_or(0) });
        } else {
            w.push(1);
            let start = text(s, v);
            w.push(start);
            w.push(s.len() as u32);
        }
    }

    pub(super) fn qty_field(&mut self, v: &str) {
        Self::qty_into(&mut self.f, &mut self.q, &mut self.s, v);
    }

    /// One transaction's row (its bytes already at [start, end) of `tx_bytes`).
    pub(super) fn tx_row(&mut self, ty: u8, start: usize, end: usize, hash: &[u8; 32], from: Option<usize>, nonce: Option<u64>) {
        let h = hex_text(&mut self.s, hash);
        let from = match from {
            Some(at) => hex_text(&mut self.s, &self.tx_bytes[at..at + 20]),
            None => NONE,
        };
        let receipt = self.receipt_of.get(hash).copied().unwrap_or(NONE);
        let (hi, lo) = nonce.map_or((NONE, NONE), |n| ((n >> 32) as u32, n as u32));
        self.txs.extend_from_slice(&[ty as u32, start as u32, end as u32, h, hash_key(hash), from, receipt, hi, lo]);
    }

    /// The layout's size in bytes (a multiple of 8).
    pub(super) fn size(&self) -> usize {
        self.areas().size
    }

    fn areas(&self) -> Areas {
        let fields_at = HEADER_WORDS;
        let tx_table_at = fields_at + self.f.len();
        let receipts_at = tx_table_at + self.txs.len();
        let balances_at = receipts_at + self.r.len();
        let signed_at = balances_at + self.b.len();
        let words = signed_at + self.signed.len();
        let q_at = (words * 4).next_multiple_of(8);
        let tx_at = q_at + self.q.len() * 8;
        let text_at = tx_at + self.tx_bytes.len();
        let size = (text_at + self.s.len()).next_multiple_of(8);
        Areas { tx_table_at, receipts_at, balances_at, signed_at, words, q_at, tx_at, text_at, size }
    }

    /// Writes the layout to `dest` (at least `size()` bytes, its start 8-aligned within the memory JS reads).
    pub(super) fn write(&self, dest: &mut [u8]) {
        let a = self.areas();
        let mut header = [0u32; HEADER_WORDS];
        header[H_MAGIC] = MAGIC;
        header[H_WORDS] = a.words as u32;
        header[H_Q_AT] = a.q_at as u32;
        header[H_Q_COUNT] = self.q.len() as u32;
        header[H_TX_BYTES_AT] = a.tx_at as u32;
        header[H_TX_BYTES_LEN] = self.tx_bytes.len() as u32;
        header[H_TX_COUNT] = (self.txs.len() / TX_STRIDE) as u32;
        header[H_TX_TABLE_AT] = a.tx_table_at as u32;
        header[H_HAS_RECEIPTS] = self.has_receipts as u32;
        header[H_BALANCE_COUNT] = self.balance_count;
        header[H_BALANCE_TABLE_AT] = a.balances_at as u32;
        header[H_RECEIPTS_AT] = a.receipts_at as u32;
        header[H_SIGNED_AT] = a.signed_at as u32;
        header[H_SIGNED_COUNT] = (self.signed.len() / 3) as u32;
        header[H_FIELDS_AT] = HEADER_WORDS as u32;
        header[H_TEXT_AT] = a.text_at as u32;
        header[H_TEXT_LEN] = self.s.len() as u32;
        let mut at = 0;
        for part in [&header[..], &self.f, &self.txs, &self.r, &self.b, &self.signed] {
            for (d, w) in dest[at..at + 4 * part.len()].chunks_exact_mut(4).zip(part) {
                d.copy_from_slice(&w.to_ne_bytes());
            }
            at += 4 * part.len();
        }
        dest[at..a.q_at].fill(0);
        for (d, x) in dest[a.q_at..a.tx_at].chunks_exact_mut(8).zip(&self.q) {
            d.copy_from_slice(&x.to_ne_bytes());
        }
        dest[a.tx_at..a.text_at].copy_from_slice(&self.tx_bytes);
        dest[a.text_at..a.text_at + self.s.len()].copy_from_slice(&self.s);
        dest[a.text_at + self.s.len()..a.size].fill(0);
    }
}

/// Where each area of a layout starts (bytes, or words for the tables) and its total size.
struct Areas {
    tx_table_at: usize,
    receipts_at: usize,
    balances_at: usize,
    signed_at: usize,
    words: usize,
    q_at: usize,
    tx_at: usize,
    text_at: usize,
    size: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(b: &[u8], i: usize) -> u32 {
        u32::from_ne_bytes(b[4 * i..4 * i + 4].try_into().unwrap())
    }

    #[test]
    fn the_buffer_places_every_area_where_its_header_says() {
        let mut o = Out::default();
        o.clear();
        o.f.extend_from_slice(&[7, 8, 9]);
        o.q.push(0x0102_0304_0506_0708);
        o.tx_bytes.extend_from_slice(&[0xaa, 0xbb]);
        o.tx_row(2, 0, 2, &[0x11; 32], None, Some(5));
        let mut b = vec![0xee; o.size()];
        o.write(&mut b);
        assert_eq!(word(&b, H_MAGIC), MAGIC);
        assert_eq!(word(&b, H_FIELDS_AT), HEADER_WORDS as u32);
        assert_eq!(word(&b, HEADER_WORDS), 7);
        assert_eq!(word(&b, H_TX_COUNT), 1);
        let row = word(&b, H_TX_TABLE_AT) as usize;
        assert_eq!(word(&b, row), 2);
        assert_eq!(word(&b, row + 4), 0x1111_1111);
        assert_eq!(word(&b, row + 6), NONE, "no receipt");
        assert_eq!(word(&b, row + 8), 5);
        let q_at = word(&b, H_Q_AT) as usize;
        assert_eq!(q_at % 8, 0);
        assert_eq!(u64::from_ne_bytes(b[q_at..q_at + 8].try_into().unwrap()), 0x0102_0304_0506_0708);
        let tx_at = word(&b, H_TX_BYTES_AT) as usize;
        assert_eq!(&b[tx_at..tx_at + 2], &[0xaa, 0xbb]);
        let text_at = word(&b, H_TEXT_AT) as usize;
        assert_eq!(text_at, tx_at + 2);
        assert_eq!(&b[text_at..text_at + 4], b"0x11");
        assert_eq!(b.len() % 8, 0);
        assert!(b[text_at + o.s.len()..].iter().all(|&x| x == 0), "the padding is written too");
    }
}
