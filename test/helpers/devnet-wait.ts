// Waiting on the devnet's own events in tests: resolves at the next flashblock the sequencer builds that matches.
import type { BuiltFlashblock, Devnet } from '../../scripts/devnet/sequencer.js';

/** Resolves with the next flashblock `devnet` builds for which `pred` holds. */
export function nextFlashblock(devnet: Pick<Devnet, 'onFlashblock'>, pred: (fb: BuiltFlashblock) => boolean): Promise<BuiltFlashblock> {
  return new Promise((resolve) => {
    const off = devnet.onFlashblock((fb) => {
      if (pred(fb)) {
        off();
        resolve(fb);
      }
    });
  });
}

/** What {@link holdSealOfTx} returns: name the transaction once sent, release the seal once the reads are done. */
export interface SealHold {
  /** The transaction whose block's seal is held (set right after sending it). */
  track(hash: string): void;
  /** The reads are done: the held block seals. */
  release(): void;
}

/**
 * Holds the canonical seal of the block that includes the transaction named by `track` until `release`, so reads
 * meant to run while it is only preconfirmed do, however slow the machine (the node answers reads meanwhile). Other
 * blocks seal as usual. Released and removed at the test's teardown.
 */
export function holdSealOfTx(devnet: Pick<Devnet, 'onFlashblock' | 'holdSeals'>, t: { teardown(fn: () => void): void }): SealHold {
  const blockOf = new Map<string, number>();
  const offFlashblocks = devnet.onFlashblock((fb) => {
    for (const r of fb.receipts) blockOf.set(r.hash.toLowerCase(), fb.blockNumber);
  });
  let hash: string | null = null;
  let release: () => void = () => undefined;
  const reads = new Promise<void>((r) => (release = r));
  const stopHolding = devnet.holdSeals((last) => (hash !== null && blockOf.get(hash) === last.blockNumber ? reads : Promise.resolve()), 60_000);
  t.teardown(() => {
    release();
    stopHolding();
    offFlashblocks();
  });
  return {
    track: (h) => void (hash = h.toLowerCase()),
    release: () => {
      release();
      stopHolding();
    },
  };
}
