// RLP codec (pure): one allocation-free reader of canonical item headers (every decoder walks with it) and the
// encoder of Buffer/list trees. Must not accept non-canonical encodings and must not allocate while reading.

/** What `encodeRlp` accepts: byte strings and (nested) lists of them. */
export type RlpInput = Uint8Array | readonly RlpInput[];

/** `readRlpItem` results: 0 = a well-formed item header; the rest name what is wrong (`rlpProblem` words them). */
export const RLP_OK = 0;
export const RLP_EMPTY = 1;
export const RLP_WRAPPED_BYTE = 2;
export const RLP_LENGTH_PAST_END = 3;
export const RLP_LENGTH_LEADING_ZERO = 4;
export const RLP_LONG_FORM_SHORT = 5;
export const RLP_PAST_END = 6;

const PROBLEMS = [
  '',
  'no item: the input ends here',
  'single byte below 0x80 must not be wrapped',
  'length bytes run past the end',
  'length has leading zero bytes',
  'long-form length used for a short item',
  'item runs past the end of its container',
];

/** The words for a `readRlpItem` result other than RLP_OK. */
export function rlpProblem(code: number): string {
  return PROBLEMS[code] ?? `RLP problem ${code}`;
}

/**
 * The item `readRlpItem` parsed last: payload bounds [start, end) and whether it is a list. One shared register, so
 * walking a transaction allocates nothing (bench/ingest.ts); read it right after the call, before the next one.
 */
export const rlpItem = { start: 0, end: 0, isList: false };

/** Big-endian length of `n` bytes at `pos`, canonical (no leading zero, > 55); a negative RLP_* code when not. */
function longLength(b: Uint8Array, pos: number, n: number, end: number): number {
  if (pos + n > end) return -RLP_LENGTH_PAST_END;
  if (b[pos] === 0) return -RLP_LENGTH_LEADING_ZERO;
  let len = 0;
  for (let i = 0; i < n; i++) len = len * 256 + (b[pos + i] as number);
  return len <= 55 ? -RLP_LONG_FORM_SHORT : len;
}

/**
 * The one RLP reader: parses the canonical header of the item at `pos`, which must end by `end`, into `rlpItem`.
 * Returns RLP_OK or what is wrong; never throws, never allocates. Callers walk lists by reading item after item
 * from `rlpItem.start` to `rlpItem.end` (the full decoder used in tests is test/helpers/rlp-oracle.ts).
 */
export function readRlpItem(b: Uint8Array, pos: number, end: number): number {
  if (pos >= end) return RLP_EMPTY;
  const h = b[pos] as number;
  let start: number;
  let len: number;
  if (h < 0x80) {
    rlpItem.start = pos;
    rlpItem.end = pos + 1;
    rlpItem.isList = false;
    return RLP_OK;
  } else if (h <= 0xb7) {
    len = h - 0x80;
    start = pos + 1;
    if (len === 1 && start < end && (b[start] as number) < 0x80) return RLP_WRAPPED_BYTE;
    rlpItem.isList = false;
  } else if (h < 0xc0) {
    len = longLength(b, pos + 1, h - 0xb7, end);
    start = pos + 1 + h - 0xb7;
    rlpItem.isList = false;
  } else if (h <= 0xf7) {
    len = h - 0xc0;
    start = pos + 1;
    rlpItem.isList = true;
  } else {
    len = longLength(b, pos + 1, h - 0xf7, end);
    start = pos + 1 + h - 0xf7;
    rlpItem.isList = true;
  }
  if (len < 0) return -len;
  if (start + len > end) return RLP_PAST_END;
  rlpItem.start = start;
  rlpItem.end = start + len;
  return RLP_OK;
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
