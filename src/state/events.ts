// Notifications of state changes, for readers that push (raw stream, subscriptions, sendRawTransactionSync).
// The ingest pipeline fires them synchronously after each apply; listeners must be quick and must not throw.
import type { Flashblock } from '../chain/flashblock.js';
import type { BlockView, RawFrameView } from './view.js';

export type AppliedListener = (block: BlockView, fb: Flashblock, frame: RawFrameView) => void;
export type CanonicalListener = (blockNumber: number) => void;

/** A tiny synchronous event hub with O(1) unsubscribe. */
export class StateEvents {
  private readonly applied = new Set<AppliedListener>();
  private readonly canonical = new Set<CanonicalListener>();

  /** Called after every applied flashblock, in order. Returns the unsubscribe function. */
  onApplied(fn: AppliedListener): () => void {
    this.applied.add(fn);
    return () => this.applied.delete(fn);
  }

  /** Called after a canonical block was settled. Returns the unsubscribe function. */
  onCanonical(fn: CanonicalListener): () => void {
    this.canonical.add(fn);
    return () => this.canonical.delete(fn);
  }

  /** Fires applied listeners; a throwing listener is reported through `onError` and the others still run. */
  emitApplied(block: BlockView, fb: Flashblock, frame: RawFrameView, onError: (e: unknown) => void): void {
    for (const fn of this.applied) {
      try {
        fn(block, fb, frame);
      } catch (e) {
        onError(e);
      }
    }
  }

  /** Fires canonical listeners. */
  emitCanonical(n: number, onError: (e: unknown) => void): void {
    for (const fn of this.canonical) {
      try {
        fn(n);
      } catch (e) {
        onError(e);
      }
    }
  }
}
