// Merkle-Patricia roots of ordered lists (transactionsRoot, receiptsRoot): keys are rlp(index), values the items.
// Pure and in-memory; builds the trie once per call and keeps nothing. Not a general (mutable) trie.
import { keccak256 } from './keccak.js';
import { encodeRlp, type RlpInput } from './rlp.js';
import { bigIntToBytes } from './hex.js';

/** Root of the empty trie: keccak256(rlp("")). */
export const EMPTY_TRIE_ROOT = '0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421';

const EMPTY = Buffer.alloc(0);

interface Entry {
  /** Key as nibbles (one per byte, 0..15). */
  path: Uint8Array;
  value: Uint8Array;
}

function toNibbles(key: Uint8Array): Uint8Array {
  const out = new Uint8Array(key.length * 2);
  for (let i = 0; i < key.length; i++) {
    const b = key[i] as number;
    out[2 * i] = b >> 4;
    out[2 * i + 1] = b & 15;
  }
  return out;
}

/** Hex-prefix encoding of a nibble path (Yellow Paper appendix C); `leaf` sets the terminator flag. */
function hexPrefix(nibbles: Uint8Array, leaf: boolean): Buffer {
  const odd = nibbles.length & 1;
  const out = Buffer.alloc(1 + (nibbles.length >> 1));
  const flag = (leaf ? 2 : 0) + odd;
  out[0] = odd ? (flag << 4) | (nibbles[0] as number) : flag << 4;
  for (let i = odd, o = 1; i < nibbles.length; i += 2, o++) {
    out[o] = ((nibbles[i] as number) << 4) | (nibbles[i + 1] as number);
  }
  return out;
}

/** How a node appears inside its parent: inline when its encoding is under 32 bytes, else by hash. */
function reference(node: RlpInput): RlpInput {
  const enc = encodeRlp(node);
  return enc.length < 32 ? node : keccak256(enc);
}

/** Nibbles shared by all entries in [lo, hi) from `depth` on (entries are sorted, so first vs last suffices). */
function sharedPrefix(entries: Entry[], lo: number, hi: number, depth: number): number {
  const a = (entries[lo] as Entry).path;
  const b = (entries[hi - 1] as Entry).path;
  let n = 0;
  while (depth + n < a.length && depth + n < b.length && a[depth + n] === b[depth + n]) n++;
  return n;
}

function buildBranch(entries: Entry[], lo: number, hi: number, depth: number): RlpInput[] {
  const slots: RlpInput[] = new Array(17).fill(EMPTY);
  let i = lo;
  if ((entries[i] as Entry).path.length === depth) {
    slots[16] = (entries[i] as Entry).value;
    i++;
  }
  while (i < hi) {
    const nibble = (entries[i] as Entry).path[depth] as number;
    let j = i + 1;
    while (j < hi && (entries[j] as Entry).path[depth] === nibble) j++;
    slots[nibble] = reference(buildNode(entries, i, j, depth + 1));
    i = j;
  }
  return slots;
}

function buildNode(entries: Entry[], lo: number, hi: number, depth: number): RlpInput {
  if (hi - lo === 1) {
    const e = entries[lo] as Entry;
    return [hexPrefix(e.path.subarray(depth), true), e.value];
  }
  const shared = sharedPrefix(entries, lo, hi, depth);
  if (shared === 0) return buildBranch(entries, lo, hi, depth);
  const path = (entries[lo] as Entry).path.subarray(depth, depth + shared);
  return [hexPrefix(path, false), reference(buildBranch(entries, lo, hi, depth + shared))];
}

function comparePaths(a: Entry, b: Entry): number {
  const n = Math.min(a.path.length, b.path.length);
  for (let i = 0; i < n; i++) {
    const d = (a.path[i] as number) - (b.path[i] as number);
    if (d !== 0) return d;
  }
  return a.path.length - b.path.length;
}

/**
 * Root hash (lower-case 0x-hex) of the trie mapping rlp(i) → items[i], as block headers commit to transactions
 * (EIP-2718 bytes) and receipts. The empty list gives `EMPTY_TRIE_ROOT`.
 */
export function orderedTrieRoot(items: Uint8Array[]): string {
  if (items.length === 0) return EMPTY_TRIE_ROOT;
  const entries: Entry[] = new Array(items.length);
  for (let i = 0; i < items.length; i++) {
    entries[i] = { path: toNibbles(encodeRlp(bigIntToBytes(BigInt(i)))), value: items[i] as Uint8Array };
  }
  entries.sort(comparePaths);
  return '0x' + keccak256(encodeRlp(buildNode(entries, 0, entries.length, 0))).toString('hex');
}
