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
