//! JSON value shapes for the frame decoder: the checks of src/chain/hex.ts (hex strings, quantities, safe integers)
//! and field access that refuses duplicate names. Pure; a failed check is a `Decline` (the JS decoder then words it).

use sonic_rs::{JsonContainerTrait, JsonValueTrait, Value};

/// Why the native decoder left a frame to the JS decoder (tests and diagnostics; never shown as a verdict).
pub(super) type Decline = &'static str;
pub(super) type R<T> = std::result::Result<T, Decline>;

// ---------------------------------------------------------------------------------------------------------------
// Shapes (the checks of src/chain/hex.ts).

/// `0x` + hex digits (any count).
pub(super) fn is_hex_chars(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 2 && b[0] == b'0' && b[1] == b'x' && alloy_primitives::hex::check_raw(&b[2..])
}

/// isHexData: an even number of digits.
pub(super) fn is_hex_data(s: &str) -> bool {
    is_hex_chars(s) && s.len().is_multiple_of(2)
}

/// isLooseQuantity.
pub(super) fn is_loose_quantity(s: &str) -> bool {
    s.len() > 2 && s.len() <= 66 && is_hex_chars(s)
}

pub(super) fn string(v: &Value) -> R<&str> {
    v.as_str().ok_or("not a string")
}

/// lowerHexData(v, chars) != null.
pub(super) fn hex_of(v: &Value, chars: usize) -> R<&str> {
    let s = string(v)?;
    if s.len() != chars || !is_hex_chars(s) {
        return Err("not hex of the expected length");
    }
    Ok(s)
}

pub(super) fn data_of(v: &Value) -> R<&str> {
    let s = string(v)?;
    if !is_hex_data(s) {
        return Err("not hex data");
    }
    Ok(s)
}

pub(super) fn quantity_of(v: &Value) -> R<&str> {
    let s = string(v)?;
    if !is_loose_quantity(s) {
        return Err("not a quantity");
    }
    Ok(s)
}

/// smallQuantity: a loose quantity of at most 15 characters, as a number.
pub(super) fn small_quantity(v: &Value) -> R<u64> {
    let s = quantity_of(v)?;
    if s.len() > 15 {
        return Err("quantity too large");
    }
    u64::from_str_radix(&s[2..], 16).map_err(|_| "quantity")
}

/// A JSON number that is a non-negative safe integer (JS `Number.isSafeInteger(n) && n >= 0`); floats decline.
pub(super) fn safe_uint(v: &Value) -> R<u64> {
    match v.as_u64() {
        Some(n) if n < (1u64 << 53) => Ok(n),
        _ => Err("not a non-negative safe integer"),
    }
}

/// The fields of an object by name, refusing duplicates of the names asked for (JSON.parse keeps the last one).
pub(super) fn fields<'a, const N: usize>(v: &'a Value, names: [&str; N]) -> R<[Option<&'a Value>; N]> {
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

pub(super) fn req(v: Option<&Value>) -> R<&Value> {
    v.ok_or("missing field")
}

/// A loose quantity below 2^53 (the TypeScript side holds it as a number); a larger one is the JS decoder's.
pub(super) fn safe_quantity(v: &Value) -> R<u64> {
    let s = quantity_of(v)?;
    let digits = s[2..].trim_start_matches('0');
    if digits.len() > 14 {
        return Err("quantity of 2^53 or more");
    }
    let n = if digits.is_empty() { 0 } else { u64::from_str_radix(digits, 16).map_err(|_| "quantity")? };
    if n >= 1 << 53 {
        return Err("quantity of 2^53 or more");
    }
    Ok(n)
}

/// The u32 of 8 hex digits (checked hex, either case).
fn hex_u32(d: &[u8]) -> u32 {
    d.iter().fold(0u32, |a, &c| (a << 4) | ((c & 0x0f) + if c > b'9' { 9 } else { 0 }) as u32)
}

/// The table key of an address: its first 4 bytes xor its last 4, big-endian (src/chain/layout-body.ts `addressKey`).
pub(super) fn address_key(addr: &str) -> u32 {
    let b = addr.as_bytes();
    hex_u32(&b[2..10]) ^ hex_u32(&b[34..42])
}

/// The table key of a 32-byte hash: its first 4 bytes, big-endian (src/chain/layout-body.ts `hashKey`).
pub(super) fn hash_key(hash: &[u8; 32]) -> u32 {
    u32::from_be_bytes([hash[0], hash[1], hash[2], hash[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_hex_in_either_case() {
        assert_eq!(hex_u32(b"00ff10aB"), 0x00ff_10ab);
        assert_eq!(address_key("0x12345678000000000000000000000000000000ff"), 0x1234_5678 ^ 0xff);
        assert_eq!(address_key("0xABCDEF0100000000000000000000000000000000"), 0xabcd_ef01);
        let mut h = [0u8; 32];
        h[..4].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(hash_key(&h), 0xdead_beef);
    }

    #[test]
    fn safe_quantities_stop_below_2_pow_53() {
        let q = |s: &str| safe_quantity(&sonic_rs::from_str::<Value>(&format!("\"{s}\"")).unwrap());
        assert_eq!(q("0x0"), Ok(0));
        assert_eq!(q("0x001F"), Ok(31));
        assert_eq!(q("0x1fffffffffffff"), Ok((1 << 53) - 1));
        assert!(q("0x20000000000000").is_err());
        assert!(q("0x").is_err());
    }
}
