// Test oracle: the full recursive RLP decoder (strict, canonical, items as subarray views), kept only to check the
// one reader in src/chain/rlp.ts and to take transactions apart in tests. Never imported by src/.
/** A decoded RLP item: a byte string (a view into the input) or a list of items. */
export type RlpItem = Buffer | RlpItem[];

/** A malformed or non-canonical RLP input. Thrown internally; decoders catch it and return a reason value. */
export class RlpError extends Error {
  override readonly name = 'RlpError';
}

/** Nesting deeper than this is never a transaction or trie node; bounds recursion on hostile input. */
const MAX_DEPTH = 64;

function fail(reason: string, at: number): never {
  throw new RlpError(`${reason} at byte ${at}`);
}

/** Reads a big-endian length of `n` bytes at `pos`; rejects leading zeros and lengths a short header could hold. */
function readLongLength(buf: Buffer, pos: number, n: number, end: number): number {
  if (pos + n > end) fail('length bytes run past the end', pos);
  if (buf[pos] === 0) fail('length has leading zero bytes', pos);
  let len = 0;
  for (let i = 0; i < n; i++) len = len * 256 + (buf[pos + i] as number);
  if (len <= 55) fail('long-form length used for a short item', pos);
  return len;
}

/**
 * Decodes the item starting at `pos` (which must end by `end`); pushes it to `out` and returns the next position.
 * Strings are returned as subarray views of `buf`.
 */
function decodeAt(buf: Buffer, pos: number, end: number, out: RlpItem[], depth: number): number {
  const b = buf[pos] as number;
  if (b < 0x80) {
    out.push(buf.subarray(pos, pos + 1));
    return pos + 1;
  }
  if (b < 0xc0) {
    let start: number;
    let len: number;
    if (b <= 0xb7) {
      len = b - 0x80;
      start = pos + 1;
      if (len === 1 && start < end && (buf[start] as number) < 0x80) fail('single byte below 0x80 must not be wrapped', pos);
    } else {
      const n = b - 0xb7;
      len = readLongLength(buf, pos + 1, n, end);
      start = pos + 1 + n;
    }
    if (start + len > end) fail('string runs past the end of its container', pos);
    out.push(buf.subarray(start, start + len));
    return start + len;
  }
  let start: number;
  let len: number;
  if (b <= 0xf7) {
    len = b - 0xc0;
    start = pos + 1;
  } else {
    const n = b - 0xf7;
    len = readLongLength(buf, pos + 1, n, end);
    start = pos + 1 + n;
  }
  const listEnd = start + len;
  if (listEnd > end) fail('list runs past the end of its container', pos);
  if (depth >= MAX_DEPTH) fail('lists nested too deeply', pos);
  const items: RlpItem[] = [];
  let p = start;
  while (p < listEnd) p = decodeAt(buf, p, listEnd, items, depth + 1);
  out.push(items);
  return listEnd;
}

/** Decodes exactly one RLP item covering all of `input`. Throws `RlpError` on any malformed or trailing byte. */
export function decodeRlp(input: Uint8Array): RlpItem {
  const buf = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  if (buf.length === 0) fail('empty input', 0);
  const out: RlpItem[] = [];
  const next = decodeAt(buf, 0, buf.length, out, 0);
  if (next !== buf.length) fail('trailing bytes after the item', next);
  return out[0] as RlpItem;
}

/** Non-throwing form of `decodeRlp`. */
export function tryDecodeRlp(input: Uint8Array): { ok: true; item: RlpItem } | { ok: false; reason: string } {
  try {
    return { ok: true, item: decodeRlp(input) };
  } catch (e) {
    if (e instanceof RlpError) return { ok: false, reason: e.message };
    throw e;
  }
}
