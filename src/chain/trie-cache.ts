// Node references of an ordered trie kept across calls for a list that only grows (a pending block's transactions,
// its executed receipts), for trie.ts: 32-byte hashes in typed arrays — leaves by index, inner nodes by the range of
// items below them — so a held block's trie costs a few ArrayBuffers, not objects per transaction. References of
// nodes that encode under 32 bytes (inlined in their parent; never a real transaction's or receipt's leaf) are kept
// as objects aside. Pure.
import { KeyTable } from './key-table.js';
import type { RlpInput } from './rlp.js';

const HASH_BYTES = 32;
/** Words per cached inner node: depth, first item, last item, item count. */
const NODE_WORDS = 4;

function nodeKey(depth: number, first: number, last: number, count: number): number {
  return (Math.imul(first, 0x9e3779b1) ^ Math.imul(last + 1, 0x85ebca6b) ^ Math.imul(count, 0xc2b2ae35) ^ depth) >>> 0;
}

/**
 * See the file comment. A leaf's reference depends only on its item and the depth it sits at; an inner node's only
 * on the depth and the set of items below it, named by its first and last item and how many lie between.
 */
export class TrieCache {
  /** Per item index: the depth its hashed leaf was built at, -1 when none. */
  private leafDepth = new Int16Array(64).fill(-1);
  private leafHash = new Uint8Array(64 * HASH_BYTES);
  private readonly nodes = new KeyTable(64);
  private nodeWords = new Int32Array(64 * NODE_WORDS);
  private nodeHash = new Uint8Array(64 * HASH_BYTES);
  private nodeCount = 0;
  /** Inline references (RLP lists under 32 bytes), by "leaf:index:depth" or "depth:first:last:count". */
  private inline: Map<string, RlpInput> | null = null;

  /** The reference of item `index`'s leaf when it was built at `depth`, else null. */
  leaf(index: number, depth: number): RlpInput | null {
    if (index < this.leafDepth.length && this.leafDepth[index] === depth) return this.leafHash.subarray(index * HASH_BYTES, (index + 1) * HASH_BYTES);
    return this.inline?.get(`leaf:${index}:${depth}`) ?? null;
  }

  setLeaf(index: number, depth: number, ref: RlpInput): void {
    if (!(ref instanceof Uint8Array)) {
      (this.inline ??= new Map()).set(`leaf:${index}:${depth}`, ref);
      return;
    }
    if (index >= this.leafDepth.length) {
      let n = this.leafDepth.length;
      while (n <= index) n *= 2;
      const d = new Int16Array(n).fill(-1);
      d.set(this.leafDepth);
      const h = new Uint8Array(n * HASH_BYTES);
      h.set(this.leafHash);
      this.leafDepth = d;
      this.leafHash = h;
    }
    this.leafDepth[index] = depth;
    this.leafHash.set(ref, index * HASH_BYTES);
  }

  /** The slot of the inner node over items first..last (count of them) at `depth`, or -1. */
  private slot(depth: number, first: number, last: number, count: number): number {
    const w = this.nodeWords;
    this.nodes.seek(nodeKey(depth, first, last, count));
    for (let s = this.nodes.next(); s >= 0; s = this.nodes.next()) {
      const o = s * NODE_WORDS;
      if (w[o] === depth && w[o + 1] === first && w[o + 2] === last && w[o + 3] === count) return s;
    }
    return -1;
  }

  /** The reference of the inner node over items first..last (`count` of them) at `depth`, else null. */
  node(depth: number, first: number, last: number, count: number): RlpInput | null {
    const s = this.slot(depth, first, last, count);
    if (s >= 0) return this.nodeHash.subarray(s * HASH_BYTES, (s + 1) * HASH_BYTES);
    return this.inline?.get(`${depth}:${first}:${last}:${count}`) ?? null;
  }

  setNode(depth: number, first: number, last: number, count: number, ref: RlpInput): void {
    if (!(ref instanceof Uint8Array)) {
      (this.inline ??= new Map()).set(`${depth}:${first}:${last}:${count}`, ref);
      return;
    }
    if (this.slot(depth, first, last, count) >= 0) return;
    const s = this.nodeCount++;
    if (s * NODE_WORDS >= this.nodeWords.length) {
      const w = new Int32Array(2 * this.nodeWords.length);
      w.set(this.nodeWords);
      const h = new Uint8Array(2 * this.nodeHash.length);
      h.set(this.nodeHash);
      this.nodeWords = w;
      this.nodeHash = h;
    }
    const o = s * NODE_WORDS;
    this.nodeWords[o] = depth;
    this.nodeWords[o + 1] = first;
    this.nodeWords[o + 2] = last;
    this.nodeWords[o + 3] = count;
    this.nodeHash.set(ref, s * HASH_BYTES);
    this.nodes.add(nodeKey(depth, first, last, count), s);
  }

  /** A copy with the leaves of items below `count` and every inner node (to extend by an item not kept here). */
  copyBelow(count: number): TrieCache {
    const c = new TrieCache();
    const n = Math.min(count, this.leafDepth.length);
    c.leafDepth = new Int16Array(Math.max(64, this.leafDepth.length)).fill(-1);
    c.leafDepth.set(this.leafDepth.subarray(0, n));
    c.leafHash = this.leafHash.slice();
    c.nodeWords = this.nodeWords.slice();
    c.nodeHash = this.nodeHash.slice();
    for (let s = 0; s < this.nodeCount; s++) {
      const o = s * NODE_WORDS;
      c.nodes.add(nodeKey(this.nodeWords[o]!, this.nodeWords[o + 1]!, this.nodeWords[o + 2]!, this.nodeWords[o + 3]!), s);
    }
    c.nodeCount = this.nodeCount;
    if (this.inline !== null) {
      c.inline = new Map();
      for (const [k, v] of this.inline) {
        if (k.startsWith('leaf:') && Number(k.split(':')[1]) >= count) continue;
        c.inline.set(k, v);
      }
    }
    return c;
  }
}
