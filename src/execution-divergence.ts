// The share of executed flashblocks that disagreed with the chain over a recent window: what /readyz and the
// divergence-ratio gauge judge a wrong fork (or an engine bug) by. Pure bookkeeping: no I/O, no clock, no metrics.
// A verdict may come after the flashblock (a stream receipt, an access list, the canonical block): markDiverged then
// turns the flashblocks of that block still in the window into diverging ones.

/** Executed flashblocks the share is taken over (about 20 s of a 200 ms stream). */
export const DIVERGENCE_WINDOW_FLASHBLOCKS = 100;
/** Fewer executed flashblocks than this in the window: no judgement yet (one odd flashblock at start-up is no share). */
export const DIVERGENCE_MIN_FLASHBLOCKS = 20;

interface Entry {
  number: number;
  index: number;
  diverged: boolean;
}

/** The last `sizeFlashblocks` executed flashblocks and whether each disagreed with the builder or the chain. */
export class DivergenceWindow {
  private readonly ring: Entry[] = [];
  /** Where the next entry goes once the ring is full. */
  private next = 0;
  private divergedCount = 0;

  constructor(
    private readonly sizeFlashblocks = DIVERGENCE_WINDOW_FLASHBLOCKS,
    private readonly minFlashblocks = DIVERGENCE_MIN_FLASHBLOCKS,
  ) {
    if (!(sizeFlashblocks >= 1) || !(minFlashblocks >= 1)) throw new RangeError('divergence window: sizes must be at least 1');
  }

  /** Records executed flashblock (number, index) and whether it disagreed; the oldest leaves a full window. */
  note(number: number, index: number, diverged: boolean): void {
    const e: Entry = { number, index, diverged };
    if (diverged) this.divergedCount++;
    if (this.ring.length < this.sizeFlashblocks) {
      this.ring.push(e);
      return;
    }
    if (this.ring[this.next]!.diverged) this.divergedCount--;
    this.ring[this.next] = e;
    this.next = (this.next + 1) % this.sizeFlashblocks;
  }

  /**
   * A later verdict: every flashblock of block `number` from `fromIndex` on still in the window disagreed (a
   * receipts root is cumulative, so what follows a differing receipt differs too). Returns how many turned.
   */
  markDiverged(number: number, fromIndex = 0): number {
    let turned = 0;
    for (const e of this.ring) {
      if (e.number === number && e.index >= fromIndex && !e.diverged) {
        e.diverged = true;
        turned++;
      }
    }
    this.divergedCount += turned;
    return turned;
  }

  /** Executed flashblocks in the window. */
  get size(): number {
    return this.ring.length;
  }

  /** Those that disagreed. */
  get diverged(): number {
    return this.divergedCount;
  }

  /** diverged / size (0 when empty). */
  get ratio(): number {
    return this.ring.length === 0 ? 0 : this.divergedCount / this.ring.length;
  }

  /**
   * Why executed state is not to be trusted: the share passed `maxRatio` (a line for /readyz), or null — also while
   * the window holds fewer than its minimum.
   */
  exceeds(maxRatio: number): string | null {
    if (this.ring.length < this.minFlashblocks || this.ratio <= maxRatio) return null;
    return `executed state diverges from the chain: ${this.divergedCount} of ${this.ring.length} flashblocks in the last ${this.sizeFlashblocks} (limit ${Math.round(maxRatio * 100)}%)`;
  }
}
