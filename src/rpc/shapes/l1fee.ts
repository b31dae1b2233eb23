// The OP L1 fee facts of a pending transaction: its block's L1 attributes (from the L1-info deposit, the first
// transaction of flashblock 0) run through the pure calculator in chain/l1fee.ts. Every receipt producer (stream
// metadata, execution) takes its l1Fee facts from here, so their receipts agree byte for byte. Never invents values:
// no L1-info deposit (the devnet emits none) or an unknown layout means no fields.
import { hexToBytes } from '../../chain/hex.js';
import { l1AttributesOf, txL1Fee, type L1Attributes, type TxL1Fee } from '../../chain/l1fee.js';
import { TX_DEPOSIT, type DecodedTx } from '../../chain/types.js';
import type { BlockView, TxView } from '../../state/view.js';

/**
 * Whether an Ecotone-layout L1-info deposit means Fjord is active. The layout is the same from Ecotone through
 * Holocene, so the calldata cannot say; every OP-stack chain that serves flashblocks activated Fjord (the Superchain
 * in July 2024, before flashblocks existed), and the Isthmus and Jovian layouts imply it anyway.
 */
export const ECOTONE_LAYOUT_MEANS_FJORD = true;

/** Decoded attributes by the block's first transaction object (a re-built block has a new one). */
const attributesByDeposit = new WeakMap<Readonly<DecodedTx>, L1Attributes | null>();
/** A transaction's fields and the attributes they were computed with (the same tx may land in another block). */
const feeByTx = new WeakMap<Readonly<DecodedTx>, { attrs: L1Attributes; fee: TxL1Fee }>();

/** The L1 attributes `block`'s L1-info deposit set, or null when its first transaction is none (or unknown). */
export function blockL1Attributes(block: BlockView): L1Attributes | null {
  const first = block.txs[0];
  if (first === undefined || first.flashblockIndex !== 0) return null;
  let a = attributesByDeposit.get(first.tx);
  if (a === undefined) {
    a = l1AttributesOf(first.tx);
    attributesByDeposit.set(first.tx, a);
  }
  return a;
}

/** The OP fee fields of `rec`'s receipt; null for deposits and when its block has no usable L1 attributes. */
export function l1FeeFacts(rec: TxView): TxL1Fee | null {
  if (rec.tx.type === TX_DEPOSIT) return null;
  const attrs = blockL1Attributes(rec.block);
  if (attrs === null) return null;
  const c = feeByTx.get(rec.tx);
  if (c !== undefined && c.attrs === attrs) return c.fee;
  // Cached: FastLZ over the raw bytes per receipt build would repeat on every flashblock (the receipt JSON cache is
  // per block version).
  const fee = txL1Fee(hexToBytes(rec.tx.raw), attrs, ECOTONE_LAYOUT_MEANS_FJORD);
  feeByTx.set(rec.tx, { attrs, fee });
  return fee;
}
