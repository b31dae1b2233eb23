// Sequence verdicts (pure) and the bounded reorder buffer. Decides what a flashblock is relative to what we hold;
// knows nothing of sockets, metrics or how a block is stored.

/** What the pending state tells the sequencer about one height. */
export interface HeightView {
  payloadId: string;
  /** The index the next flashblock of this payload must have (= flashblocks applied so far). */
  nextIndex: number;
  broken: boolean;
}

/** The read-only picture classify() needs. */
export interface SequenceView {
  /** Highest canonical block number known, or -1. */
  canonical: number;
  /** Highest block number a flashblock may have now (far-ahead bound); Infinity while no canonical head is known. */
  aheadLimit: number;
  /** Block number of the last applied flashblock, or -1 before the first. */
  lastApplied: number;
  height(blockNumber: number): HeightView | undefined;
}

/** The verdict for one flashblock. Closed set; the names are metric label values. */
export type Verdict =
  | 'next' // the flashblock after the last applied one of the same build: apply
  | 'new_block' // index 0 of a height we do not hold: apply as a new block
  | 'replaced_payload' // index 0 with a new payload_id at a held height: the builder restarted the block; replace
  | 'duplicate' // already applied: ignore
  | 'gap' // same build, but flashblocks are missing before it: buffer
  | 'out_of_order' // index > 0 of a build we have no index 0 for, right after its predecessor block: buffer
  | 'joined_mid_block' // index > 0 of a block we never saw start, not following the last applied block: drop
  | 'stale' // at or below the canonical head: ignore
  | 'too_far_ahead' // beyond the far-ahead bound of the canonical head: refuse
  | 'broken'; // the build at this height is known broken: ignore until a new index 0

export interface SequenceKey {
  payloadId: string;
  index: number;
  blockNumber: number;
}

/** Classifies a decoded flashblock against the current state. Pure. */
export function classify(fb: SequenceKey, view: SequenceView): Verdict {
  if (fb.blockNumber <= view.canonical) return 'stale';
  if (fb.blockNumber > view.aheadLimit) return 'too_far_ahead';
  const h = view.height(fb.blockNumber);
  if (h === undefined) {
    if (fb.index === 0) return 'new_block';
    // Index 0 lost right after the previous block is a gap; anything else is a stream joined part-way through.
    return fb.blockNumber - 1 === view.lastApplied ? 'out_of_order' : 'joined_mid_block';
  }
  if (h.payloadId !== fb.payloadId) return fb.index === 0 ? 'replaced_payload' : 'out_of_order';
  if (fb.index < h.nextIndex) return 'duplicate';
  if (h.broken) return 'broken';
  if (fb.index === h.nextIndex) return 'next';
  return 'gap';
}

interface Held<T> {
  item: T;
  key: SequenceKey;
  sinceMs: number;
}

/**
 * Out-of-order flashblocks waiting for their predecessors. Bounded by `windowFrames` (oldest evicted) and by
 * `timeoutMs` (expired entries are returned by `expire`). Keyed by (payload_id, index); a second copy is ignored.
 */
export class ReorderBuffer<T> {
  private readonly held = new Map<string, Held<T>>();
  constructor(
    private readonly windowFrames: number,
    private readonly timeoutMs: number,
  ) {}

  /** Number of frames held. */
  get size(): number {
    return this.held.size;
  }

  /** Holds a frame; returns the entry evicted to stay within the window, if any. */
  hold(key: SequenceKey, item: T, nowMs: number): Held<T> | undefined {
    const k = key.payloadId + ':' + key.index;
    if (this.held.has(k)) return undefined;
    this.held.set(k, { item, key, sinceMs: nowMs });
    if (this.held.size <= this.windowFrames) return undefined;
    const oldest = this.held.keys().next().value as string;
    const ev = this.held.get(oldest);
    this.held.delete(oldest);
    return ev;
  }

  /** The held frame with this payload and index, if present (left held). */
  peek(payloadId: string, index: number): T | undefined {
    return this.held.get(payloadId + ':' + index)?.item;
  }

  /** Takes the held frame with this payload and index, if present. */
  take(payloadId: string, index: number): T | undefined {
    const k = payloadId + ':' + index;
    const h = this.held.get(k);
    if (h === undefined) return undefined;
    this.held.delete(k);
    return h.item;
  }

  /** Removes and returns entries held longer than the timeout. */
  expire(nowMs: number): Held<T>[] {
    const out: Held<T>[] = [];
    for (const [k, h] of this.held) {
      if (nowMs - h.sinceMs >= this.timeoutMs) {
        out.push(h);
        this.held.delete(k);
      }
    }
    return out;
  }

  /**
   * Drops everything at or below a block number (it became canonical), handing each dropped frame to `dropped`.
   * Returns how many were dropped.
   */
  dropUpTo(blockNumber: number, dropped?: (item: T) => void): number {
    let n = 0;
    for (const [k, h] of this.held) {
      if (h.key.blockNumber <= blockNumber) {
        this.held.delete(k);
        dropped?.(h.item);
        n++;
      }
    }
    return n;
  }

  /** Oldest hold time among the entries, or undefined when empty. */
  oldestSinceMs(): number | undefined {
    let min: number | undefined;
    for (const h of this.held.values()) if (min === undefined || h.sinceMs < min) min = h.sinceMs;
    return min;
  }
}
