// The replay ring: the last N applied raw frames in apply order, for `?replay=block` and `?block_number=&index=`
// resume. Bounded by construction; holds references to the frames only, never copies or decodes them.
import type { RawFrameView as RawFrame } from '../state/view.js';

/** What a resume request gets: the frames after the position, or `too_old` when the ring no longer has them. */
export type ResumeResult = { ok: true; frames: RawFrame[] } | { ok: false; reason: 'too_old' };

function cmp(aBlock: number, aIndex: number, bBlock: number, bIndex: number): number {
  return aBlock !== bBlock ? aBlock - bBlock : aIndex - bIndex;
}

/** A fixed-capacity ring of raw frames, oldest evicted first. */
export class ReplayRing {
  private readonly slots: (RawFrame | undefined)[];
  private head = 0; // next write position
  private count = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`replay ring capacity must be ≥ 1, got ${capacity}`);
    this.slots = new Array<RawFrame | undefined>(capacity);
  }

  get size(): number {
    return this.count;
  }

  /** Appends an applied frame (evicting the oldest when full). */
  push(frame: RawFrame): void {
    this.slots[this.head] = frame;
    this.head = (this.head + 1) % this.capacity;
    if (this.count < this.capacity) this.count++;
  }

  /** The i-th oldest frame held (0 = oldest). */
  at(i: number): RawFrame {
    return this.slots[(this.head - this.count + i + this.capacity) % this.capacity] as RawFrame;
  }

  /** The frames of the newest block so far, oldest first (from its index 0 when the ring still has it). */
  currentBlock(): RawFrame[] {
    if (this.count === 0) return [];
    const newest = this.at(this.count - 1);
    let start = this.count - 1;
    while (start > 0) {
      const f = this.at(start);
      if (f.index === 0) break;
      const prev = this.at(start - 1);
      if (prev.blockNumber !== newest.blockNumber || prev.index >= f.index) break;
      start--;
    }
    return this.slice(start);
  }

  /**
   * Every frame applied after position (blockNumber, index), in apply order. `too_old` when the frame that followed
   * it has been evicted (or was never held): the subscriber cannot be brought up to date without a gap.
   */
  resumeAfter(blockNumber: number, index: number): ResumeResult {
    if (this.count === 0) return { ok: true, frames: [] };
    // The last occurrence wins: a replaced payload restarts a block, and the client saw the newest build.
    for (let i = this.count - 1; i >= 0; i--) {
      const f = this.at(i);
      if (f.blockNumber === blockNumber && f.index === index) return { ok: true, frames: this.slice(i + 1) };
    }
    const newest = this.at(this.count - 1);
    if (cmp(blockNumber, index, newest.blockNumber, newest.index) >= 0) return { ok: true, frames: [] };
    const oldest = this.at(0);
    if (cmp(blockNumber, index, oldest.blockNumber, oldest.index) < 0) {
      const follows = (oldest.blockNumber === blockNumber && oldest.index === index + 1) || (oldest.blockNumber === blockNumber + 1 && oldest.index === 0);
      return follows ? { ok: true, frames: this.slice(0) } : { ok: false, reason: 'too_old' };
    }
    // Inside the held range but never seen here (a gap upstream): everything newer than the position.
    let start = this.count;
    while (start > 0) {
      const f = this.at(start - 1);
      if (cmp(f.blockNumber, f.index, blockNumber, index) <= 0) break;
      start--;
    }
    return { ok: true, frames: this.slice(start) };
  }

  private slice(from: number): RawFrame[] {
    const out: RawFrame[] = new Array(this.count - from);
    for (let i = from; i < this.count; i++) out[i - from] = this.at(i);
    return out;
  }
}
