// Merkle-Patricia roots of ordered lists (transactionsRoot, receiptsRoot): keys are rlp(index), values the items.
// Pure and in-memory; builds the trie once per call and keeps nothing. Not a general (mutable) trie.
import { keccak256 } from './keccak.js';
import { encodeRlp, type RlpInput } from './rlp.js';
import { bigIntToBytes } from './hex.js';
import type { TrieCache } from './trie-cache.js';

export { TrieCache } from './trie-cache.js';

/** Root of the empty trie: keccak256(rlp("")). */
export const EMPTY_TRIE_ROOT = '0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421';

const EMPTY = Buffer.alloc(0);

interface Entry {
  /** Position in the list (the key is rlp(index)). */
  index: number;
  /** Key as nibbles (one per byte, 0..15). */
  path: Uint8Array;
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

/** One trie build: the sorted entries, how to read an item, and the optional leaf cache. */
class Builder {
  constructor(
    private readonly entries: Entry[],
    private readonly valueAt: (index: number) => Uint8Array,
    private readonly cache: TrieCache | null,
  ) {}

  leaf(e: Entry, depth: number): RlpInput {
    return [hexPrefix(e.path.subarray(depth), true), this.valueAt(e.index)];
  }

  /** The reference of the leaf for `e` at `depth`, from the cache when it sat at the same depth before. */
  leafRef(e: Entry, depth: number): RlpInput {
    if (this.cache === null) return reference(this.leaf(e, depth));
    const hit = this.cache.leaf(e.index, depth);
    if (hit !== null) return hit;
    const ref = reference(this.leaf(e, depth));
    this.cache.setLeaf(e.index, depth, ref);
    return ref;
  }

  /** The reference of the inner node over entries [lo, hi) at `depth`, from the cache when built before. */
  nodeRef(lo: number, hi: number, depth: number): RlpInput {
    if (this.cache === null) return reference(this.node(lo, hi, depth));
    const first = (this.entries[lo] as Entry).index;
    const last = (this.entries[hi - 1] as Entry).index;
    let ref = this.cache.node(depth, first, last, hi - lo);
    if (ref === null) {
      ref = reference(this.node(lo, hi, depth));
      this.cache.setNode(depth, first, last, hi - lo, ref);
    }
    return ref;
  }

  branch(lo: number, hi: number, depth: number): RlpInput[] {
    const entries = this.entries;
    const slots: RlpInput[] = new Array(17).fill(EMPTY);
    let i = lo;
    if ((entries[i] as Entry).path.length === depth) {
      slots[16] = this.valueAt((entries[i] as Entry).index);
      i++;
    }
    while (i < hi) {
      const nibble = (entries[i] as Entry).path[depth] as number;
      let j = i + 1;
      while (j < hi && (entries[j] as Entry).path[depth] === nibble) j++;
      slots[nibble] = j - i === 1 ? this.leafRef(entries[i] as Entry, depth + 1) : this.nodeRef(i, j, depth + 1);
      i = j;
    }
    return slots;
  }

  /** The node over entries [lo, hi) (more than one) at `depth`: a branch, or an extension above one. */
  node(lo: number, hi: number, depth: number): RlpInput {
    const shared = sharedPrefix(this.entries, lo, hi, depth);
    if (shared === 0) return this.branch(lo, hi, depth);
    const path = (this.entries[lo] as Entry).path.subarray(depth, depth + shared);
    return [hexPrefix(path, false), reference(this.branch(lo, hi, depth + shared))];
  }
}

/** Trie keys by index, shared by every call (a key depends only on its index). */
const keyByIndex: Entry[] = [];
const MAX_SHARED_KEYS = 1 << 16;

function keyOf(i: number): Entry {
  let e = keyByIndex[i];
  if (e === undefined) {
    e = { index: i, path: toNibbles(encodeRlp(bigIntToBytes(BigInt(i)))) };
    if (i < MAX_SHARED_KEYS) keyByIndex[i] = e;
  }
  return e;
}

/**
 * The keys rlp(0..count-1) in nibble order, without sorting: rlp(1..127) are the single bytes 0x01..0x7f, rlp(0) is
 * 0x80, and from 128 on rlp(i) is 0x81.. / 0x82.. followed by big-endian i, which sorts by i.
 */
function sortedKeys(count: number): Entry[] {
  const out: Entry[] = new Array(count);
  let o = 0;
  for (let i = 1; i < Math.min(count, 128); i++) out[o++] = keyOf(i);
  out[o++] = keyOf(0);
  for (let i = 128; i < count; i++) out[o++] = keyOf(i);
  return out;
}

/**
 * Root hash (lower-case 0x-hex) of the trie mapping rlp(i) → item i for i < count, as block headers commit to
 * transactions (EIP-2718 bytes) and receipts. `valueAt` is called only for items whose leaf is not in `cache`.
 */
export function orderedTrieRootOf(count: number, valueAt: (index: number) => Uint8Array, cache: TrieCache | null = null): string {
  if (count === 0) return EMPTY_TRIE_ROOT;
  const entries = sortedKeys(count);
  const b = new Builder(entries, valueAt, cache);
  const root = count === 1 ? b.leaf(entries[0] as Entry, 0) : b.node(0, count, 0);
  return '0x' + keccak256(encodeRlp(root)).toString('hex');
}

/** orderedTrieRootOf over an array of items. The empty list gives `EMPTY_TRIE_ROOT`. */
export function orderedTrieRoot(items: Uint8Array[]): string {
  return orderedTrieRootOf(items.length, (i) => items[i] as Uint8Array);
}
