//! The RLP walk of src/chain/lazy-tx.ts over a transaction's bytes: every consensus-encoding check of a full decode,
//! without building fields; accepts exactly what it accepts, or less (the JS decoder then decides). Pure.

const TX_DEPOSIT: u8 = 0x7e;

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

const N: [u8; 32] = alloy_primitives::hex!("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141");
const HALF_N: [u8; 32] = alloy_primitives::hex!("7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0");

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

/// A list whose every entry is a list `entry` reads to its exact end (from the entry's bounds); the list's end.
fn list_of(b: &[u8], pos: usize, end: usize, entry: impl Fn(&[u8], Item) -> Option<usize>) -> Option<usize> {
    let l = item(b, pos, end).filter(|i| i.list)?;
    let mut p = l.start;
    while p < l.end {
        let e = item(b, p, l.end).filter(|i| i.list)?;
        if entry(b, e)? != e.end {
            return None;
        }
        p = e.end;
    }
    Some(l.end)
}

/// [[address, [slot, ...]], ...]
fn access_list(b: &[u8], pos: usize, end: usize) -> Option<usize> {
    list_of(b, pos, end, |b, e| fixed_list(b, fixed(b, e.start, e.end, 20)?, e.end, 32))
}

/// [[chainId, address, nonce, yParity, r, s], ...]
fn authorizations(b: &[u8], pos: usize, end: usize) -> Option<usize> {
    list_of(b, pos, end, |b, e| {
        let mut q = scalar(b, e.start, e.end, 32)?.end;
        q = fixed(b, q, e.end, 20)?;
        q = scalar(b, q, e.end, 8)?.end;
        q = scalar(b, q, e.end, 1)?.end;
        q = scalar(b, q, e.end, 32)?.end;
        Some(scalar(b, q, e.end, 32)?.end)
    })
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
pub(super) fn check_deposit(b: &[u8]) -> Option<usize> {
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
pub(super) fn check_tx(b: &[u8]) -> Option<u8> {
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

/// The nonce of a signed transaction the walk accepted (legacy or typed 0x01-0x04), when it is below 2^53 (what the
/// TypeScript side holds as a number); None for deposits and larger nonces (read from the bytes there, as a bigint).
pub(super) fn nonce_of(b: &[u8]) -> Option<u64> {
    let first = *b.first()?;
    let at = if first >= 0xc0 { 0 } else { 1 };
    let l = item(b, at, b.len()).filter(|i| i.list)?;
    let mut p = l.start;
    if first < 0xc0 {
        if first == TX_DEPOSIT {
            return None;
        }
        p = scalar(b, p, l.end, 8)?.end; // chainId
    }
    let n = scalar(b, p, l.end, 8)?;
    let v = b[n.start..n.end].iter().fold(0u64, |a, &c| (a << 8) | c as u64);
    (v < 1 << 53).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rlp_walk_rejects_wrapped_single_bytes_and_high_s() {
        assert!(item(&[0x81, 0x05], 0, 2).is_none());
        assert!(item(&[0x81, 0x80], 0, 2).is_some());
        let mut s = vec![0xa0];
        s.extend_from_slice(&HALF_N);
        assert!(scalar(&s, 0, s.len(), 32).is_some());
        assert!(cmp32(&HALF_N, &HALF_N).is_eq());
    }

    #[test]
    fn nonce_is_read_from_legacy_and_typed_and_not_from_deposits() {
        // legacy [nonce=5, ...]: only the list header and the first item are read.
        assert_eq!(nonce_of(&[0xc3, 0x05, 0x80, 0x80]), Some(5));
        // typed 0x02 [chainId=1, nonce=0x0100, ...]
        assert_eq!(nonce_of(&[0x02, 0xc5, 0x01, 0x82, 0x01, 0x00, 0x80]), Some(256));
        // a nonce of 2^53 is left to the TypeScript side
        assert_eq!(nonce_of(&[0xc9, 0x87, 0x20, 0, 0, 0, 0, 0, 0, 0x80]), None);
        assert_eq!(nonce_of(&[0x7e, 0xc1, 0x80]), None);
    }
}
