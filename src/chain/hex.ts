// Hex and quantity codecs for JSON-RPC values (pure). Owns shape checks; knows nothing of blocks or transactions.

const HEX_CHARS = /^0x[0-9a-fA-F]*$/;
const QUANTITY = /^0x(0|[1-9a-fA-F][0-9a-fA-F]*)$/;

/** True when `s` is 0x-prefixed hex data of an even number of digits (any length when `bytes` is undefined). */
export function isHexData(s: unknown, bytes?: number): s is string {
  if (typeof s !== 'string' || !HEX_CHARS.test(s) || (s.length & 1) !== 0) return false;
  return bytes === undefined || s.length === 2 + bytes * 2;
}

/** True when `s` is a canonical JSON-RPC quantity: 0x-prefixed hex without leading zeros. */
export function isQuantity(s: unknown): s is string {
  return typeof s === 'string' && s.length <= 66 && QUANTITY.test(s);
}

/**
 * True for a quantity as builders really emit it: 0x-prefixed hex of at most 64 digits; leading zeros tolerated
 * (some serialisers pad), empty digits not.
 */
export function isLooseQuantity(s: unknown): s is string {
  return typeof s === 'string' && s.length > 2 && s.length <= 66 && HEX_CHARS.test(s);
}

const LOWER_HEX_CHARS = /^0x[0-9a-f]*$/;

/**
 * `v` as lower-case 0x-hex data when it is 0x-hex of an even number of digits — exactly `chars` characters in all
 * unless `chars` is -1 — else null. An already lower-case `v` is returned as is (one regex test, no copy).
 */
export function lowerHexData(v: unknown, chars: number): string | null {
  if (typeof v !== 'string') return null;
  const n = v.length;
  if (chars === -1 ? (n & 1) !== 0 : n !== chars) return null;
  if (LOWER_HEX_CHARS.test(v)) return v;
  return HEX_CHARS.test(v) ? v.toLowerCase() : null;
}

/** A 20-byte address check. */
export function isAddress(s: unknown): s is string {
  return isHexData(s, 20);
}

/** A 32-byte hash check. */
export function isHash(s: unknown): s is string {
  return isHexData(s, 32);
}

/** Encodes a non-negative bigint or safe integer as a canonical quantity. */
export function toQuantity(n: bigint | number): string {
  return '0x' + n.toString(16);
}

/** Parses a quantity (loose or canonical) into a bigint. Caller has validated the shape. */
export function quantityToBigInt(s: string): bigint {
  return s.length === 2 ? 0n : BigInt(s);
}

/** Parses a quantity into a JS number; caller guarantees it fits (block numbers, indexes, gas). */
export function quantityToNumber(s: string): number {
  return Number.parseInt(s.slice(2), 16);
}

/** Normalises a loose quantity (leading zeros) to its canonical form. */
export function canonicalQuantity(s: string): string {
  let i = 2;
  while (i < s.length - 1 && s.charCodeAt(i) === 48) i++;
  const digits = s.slice(i).toLowerCase();
  return digits.length === 0 ? '0x0' : '0x' + digits;
}

/** Decodes 0x-hex into bytes. Caller has validated the shape. */
export function hexToBytes(s: string): Buffer {
  return Buffer.from(s.length > 2 ? s.slice(2) : '', 'hex');
}

/** Encodes bytes as lower-case 0x-hex. */
export function bytesToHex(b: Uint8Array): string {
  return '0x' + Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
}

/** Big-endian bytes (no leading zeros; empty for zero) to a bigint. */
export function bytesToBigInt(b: Uint8Array): bigint {
  if (b.length === 0) return 0n;
  return BigInt('0x' + Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex'));
}

/** A bigint as minimal big-endian bytes (empty for zero), as RLP wants scalars. */
export function bigIntToBytes(n: bigint): Buffer {
  if (n === 0n) return Buffer.alloc(0);
  let h = n.toString(16);
  if (h.length & 1) h = '0' + h;
  return Buffer.from(h, 'hex');
}
