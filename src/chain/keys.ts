// Table keys of hashes and addresses, the same numbers native/src/frame/shape.rs writes into a frame's layout, and
// comparisons of lower-case hex text with bytes, for pending state's typed-array indexes. Pure; allocates nothing.

/** The value of one hex digit's character code (either case; the caller has checked the shape). */
function nibble(c: number): number {
  return (c & 0x0f) + (c > 57 ? 9 : 0);
}

/** The unsigned 32-bit value of the 8 hex digits of `s` at `at`. */
export function hexU32(s: string, at: number): number {
  let v = 0;
  for (let i = at; i < at + 8; i++) v = (v << 4) | nibble(s.charCodeAt(i));
  return v >>> 0;
}

/** The table key of a 32-byte hash (0x-hex): its first 4 bytes, big-endian. */
export function hashKey(hash: string): number {
  return hexU32(hash, 2);
}

/** The table key of an address (0x-hex): its first 4 bytes xor its last 4, big-endian. */
export function addressKey(address: string): number {
  return (hexU32(address, 2) ^ hexU32(address, 34)) >>> 0;
}

/** addressKey of the 20-byte address at `b[at, at + 20)`. */
export function addressKeyOfBytes(b: Uint8Array, at: number): number {
  const first = ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
  const last = ((b[at + 16]! << 24) | (b[at + 17]! << 16) | (b[at + 18]! << 8) | b[at + 19]!) >>> 0;
  return (first ^ last) >>> 0;
}

/** Whether `b[at, at + n)` are the bytes the 0x-hex text `hex` (2 + 2n characters, lower case) spells. */
export function bytesAreHex(b: Uint8Array, at: number, n: number, hex: string): boolean {
  if (hex.length !== 2 + 2 * n) return false;
  for (let i = 0; i < n; i++) {
    const hi = hex.charCodeAt(2 + 2 * i);
    const lo = hex.charCodeAt(3 + 2 * i);
    if (hi > 102 || lo > 102 || (hi > 57 && hi < 97) || (lo > 57 && lo < 97) || hi < 48 || lo < 48) return false;
    if (b[at + i] !== ((nibble(hi) << 4) | nibble(lo))) return false;
  }
  return true;
}

/** Writes the 20 bytes the 0x-hex address `hex` spells to `b` at `at` (the caller has checked its shape). */
export function writeAddress(b: Uint8Array, at: number, hex: string): void {
  for (let i = 0; i < 20; i++) b[at + i] = (nibble(hex.charCodeAt(2 + 2 * i)) << 4) | nibble(hex.charCodeAt(3 + 2 * i));
}

