// RLP codec (pure): strict canonical decoding into Buffer views and encoding of Buffer/list trees.
// Must not copy payload bytes on decode (items are subarray views) and must not accept non-canonical encodings.

/** A decoded RLP item: a byte string (a view into the input) or a list of items. */
export type RlpItem = Buffer | RlpItem[];

/** What `encodeRlp` accepts: byte strings and (nested) lists of them. */
export type RlpInput = Uint8Array | readonly RlpInput[];

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

/** Header bytes for a string (`offset` 0x80) or list (`offset` 0xc0) payload of `len` bytes. */
export function rlpHeader(len: number, offset: 0x80 | 0xc0): Buffer {
  if (len <= 55) return Buffer.from([offset + len]);
  let n = 0;
  for (let v = len; v > 0; v = Math.floor(v / 256)) n++;
  const h = Buffer.allocUnsafe(1 + n);
  h[0] = offset + 55 + n;
  for (let i = n, v = len; i >= 1; i--, v = Math.floor(v / 256)) h[i] = v % 256;
  return h;
}

/** Size of the header `encodeRlp` puts in front of a byte string with these contents. */
export function stringHeaderLength(data: Uint8Array): number {
  const len = data.length;
  if (len === 1 && (data[0] as number) < 0x80) return 0;
  if (len <= 55) return 1;
  let n = 0;
  for (let v = len; v > 0; v = Math.floor(v / 256)) n++;
  return 1 + n;
}

function collect(item: RlpInput, parts: Uint8Array[]): number {
  if (item instanceof Uint8Array) {
    if (item.length === 1 && (item[0] as number) < 0x80) {
      parts.push(item);
      return 1;
    }
    const h = rlpHeader(item.length, 0x80);
    parts.push(h, item);
    return h.length + item.length;
  }
  const at = parts.length;
  parts.push(EMPTY);
  let len = 0;
  for (let i = 0; i < item.length; i++) len += collect(item[i] as RlpInput, parts);
  const h = rlpHeader(len, 0xc0);
  parts[at] = h;
  return h.length + len;
}

const EMPTY = new Uint8Array(0);

/** RLP-encodes a byte string or a (nested) list of byte strings. */
export function encodeRlp(item: RlpInput): Buffer {
  const parts: Uint8Array[] = [];
  const total = collect(item, parts);
  return Buffer.concat(parts, total);
}
