// A canonical block's transactions as the flashblocks a builder would have streamed: index 0 the deposits, the rest
// in slices. Pure; used by `flashblocksd check-execution` and by tests that replay real blocks.
import { TX_DEPOSIT } from '../chain/types.js';

/** True when the EIP-2718 0x-hex transaction is an OP deposit (type 0x7e). */
function isDeposit(tx: string): boolean {
  return tx.length >= 4 && Number.parseInt(tx.slice(2, 4), 16) === TX_DEPOSIT;
}

/**
 * Splits a block's transactions (EIP-2718 0x-hex, in block order) into flashblocks: index 0 holds the deposits that
 * open the block (it is empty when there are none), then up to `slices` non-empty parts of the rest, in order and as
 * even as can be (fewer when there are fewer transactions). A deposit later in the block (the devnet's anvil includes
 * user deposits anywhere) stays where it is: block order is never changed. Throws RangeError when `slices` is not a
 * positive whole number.
 */
export function splitBlock(txs: string[], slices: number): string[][] {
  if (!Number.isSafeInteger(slices) || slices < 1) throw new RangeError(`slices must be a whole number of at least 1, got ${slices}`);
  let deposits = 0;
  while (deposits < txs.length && isDeposit(txs[deposits]!)) deposits++;
  const out: string[][] = [txs.slice(0, deposits)];
  const rest = txs.length - deposits;
  const parts = Math.min(slices, rest);
  let at = deposits;
  for (let p = 0; p < parts; p++) {
    // The first (rest % parts) parts take one more: sizes differ by at most one.
    const size = Math.floor(rest / parts) + (p < rest % parts ? 1 : 0);
    out.push(txs.slice(at, at + size));
    at += size;
  }
  return out;
}
