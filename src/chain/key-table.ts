// An open-addressing hash table of small non-negative integers (transaction positions, balance references, trie node
// slots) under u32 keys, in two typed arrays: a held block's indexes cost a few ArrayBuffers, not an object or Map
// entry per transaction. Keys may collide; the caller checks each candidate against what it stands for. Never
// deletes. Pure.

const MIN_SLOTS = 16;
/** Fibonacci hashing's multiplier (2^32 / φ): spreads keys whose low bits repeat. */
const SPREAD = 0x9e3779b1;

/**
 * See the file comment. A probe: `seek(key)`, then `next()` until -1, each result a value stored under `key` (or a
 * colliding key's, never: the key is compared); `replace` overwrites the value `next` returned last. `add` between
 * `seek` and the last `next` invalidates the probe.
 */
export class KeyTable {
  private keys: Uint32Array;
  /** value + 1; 0 = empty slot. */
  private vals: Int32Array;
  private shift: number;
  private mask: number;
  private count = 0;
  private cursor = 0;
  private want = 0;
  private last = -1;

  /** A table sized for `expected` entries without growing. */
  constructor(expected = 0) {
    let slots = MIN_SLOTS;
    while (slots < 2 * expected) slots *= 2;
    this.keys = new Uint32Array(slots);
    this.vals = new Int32Array(slots);
    this.mask = slots - 1;
    this.shift = 32 - Math.log2(slots);
  }

  /** Entries stored. */
  get size(): number {
    return this.count;
  }

  private slotOf(key: number): number {
    return Math.imul(key, SPREAD) >>> this.shift;
  }

  /** Starts a probe for `key` (an unsigned 32-bit number). */
  seek(key: number): void {
    this.want = key >>> 0;
    this.cursor = this.slotOf(key);
  }

  /** The next value stored under the sought key, or -1 when there is none left. */
  next(): number {
    const vals = this.vals;
    for (;;) {
      const v = vals[this.cursor]!;
      if (v === 0) return -1;
      const at = this.cursor;
      this.cursor = (at + 1) & this.mask;
      if (this.keys[at] === this.want) {
        this.last = at;
        return v - 1;
      }
    }
  }

  /** Overwrites the value `next` returned last. */
  replace(value: number): void {
    this.vals[this.last] = value + 1;
  }

  /** Stores `value` (≥ 0) under `key`; the caller has probed that it is not there (or wants a second entry). */
  add(key: number, value: number): void {
    if (2 * (this.count + 1) > this.vals.length) this.grow();
    this.place(key >>> 0, value + 1);
    this.count++;
  }

  private place(key: number, stored: number): void {
    let at = this.slotOf(key);
    while (this.vals[at] !== 0) at = (at + 1) & this.mask;
    this.keys[at] = key;
    this.vals[at] = stored;
  }

  private grow(): void {
    const keys = this.keys;
    const vals = this.vals;
    this.keys = new Uint32Array(2 * keys.length);
    this.vals = new Int32Array(2 * vals.length);
    this.mask = this.vals.length - 1;
    this.shift--;
    for (let i = 0; i < vals.length; i++) if (vals[i] !== 0) this.place(keys[i]!, vals[i]!);
  }
}
