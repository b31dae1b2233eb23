// Whole lists of what pending state and flashblock bodies hand out one at a time (tests only: production code reads
// by position, so a held block keeps no object per transaction).
import type { FlashReceipt, Flashblock } from '../../src/chain/flashblock.js';
import type { DecodedTx } from '../../src/chain/types.js';
import type { BlockView, TxView } from '../../src/state/view.js';

/** Every transaction of `block`, as views. */
export function txsOf(block: BlockView): TxView[] {
  return Array.from({ length: block.txCount }, (_, i) => block.txAt(i)!);
}

/** Every transaction of a decoded flashblock. */
export function fbTxs(fb: Flashblock): DecodedTx[] {
  return Array.from({ length: fb.body.txCount }, (_, i) => fb.body.tx(i));
}

/** The receipts a decoded flashblock joined to its transactions, by hash; null when its metadata carried none. */
export function fbReceipts(fb: Flashblock): Map<string, FlashReceipt> | null {
  const b = fb.body;
  if (!b.hasReceipts) return null;
  const out = new Map<string, FlashReceipt>();
  for (let i = 0; i < b.txCount; i++) {
    const r = b.receipt(i);
    if (r !== null) out.set(b.txHash(i), r);
  }
  return out;
}

/** A decoded flashblock's new_account_balances; null when its metadata carried none. */
export function fbBalances(fb: Flashblock): Map<string, bigint> | null {
  const b = fb.body;
  if (b.balanceCount < 0) return null;
  const out = new Map<string, bigint>();
  for (let e = 0; e < b.balanceCount; e++) out.set(b.balanceAddress(e), b.balance(e));
  return out;
}
