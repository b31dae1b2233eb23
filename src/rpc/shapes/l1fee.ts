// The OP L1 fee facts of a pending transaction: its block's L1 attributes (from the L1-info deposit, the first
// transaction of flashblock 0) run through the pure calculator in chain/l1fee.ts. Every receipt producer (stream
// metadata, execution) takes its l1Fee facts from here, so their receipts agree byte for byte. Never invents values:
// no L1-info deposit (the devnet emits none) or an unknown layout means no fields.
import { hexToBytes } from '../../chain/hex.js';
import { l1AttributesOf, txL1Fee, type L1Attributes, type TxL1Fee } from '../../chain/l1fee.js';
import { TX_DEPOSIT } from '../../chain/types.js';
import type { BlockView, TxView } from '../../state/view.js';

/**
 * Whether an Ecotone-layout L1-info deposit means Fjord is active. The layout is the same from Ecotone through
 * Holocene, so the calldata cannot say; every OP-stack chain that serves flashblocks activated Fjord (the Superchain
 * in July 2024, before flashblocks existed), and the Isthmus and Jovian layouts imply it anyway.
 */
export const ECOTONE_LAYOUT_MEANS_FJORD = true;

/** Decoded attributes by block (its first transaction, the L1-info deposit, never changes: a re-built block is new). */
const attributesByBlock = new WeakMap<BlockView, L1Attributes | null>();

/** The L1 attributes `block`'s L1-info deposit set, or null when its first transaction is none (or unknown). */
export function blockL1Attributes(block: BlockView): L1Attributes | null {
  if (block.txCount === 0 || (block.txCountAt[0] as number) === 0) return null;
  let a = attributesByBlock.get(block);
  if (a === undefined) {
    a = l1AttributesOf(block.txAt(0)!.tx);
    attributesByBlock.set(block, a);
  }
  return a;
}

/**
 * The OP fee fields of `rec`'s receipt; null for deposits and when its block has no usable L1 attributes. Computed
 * per call (FastLZ over the bytes, a few µs): receipts are cached as JSON per block version (json.ts), and a cache
 * per transaction would keep an object per transaction for the block's life.
 */
export function l1FeeFacts(rec: TxView): TxL1Fee | null {
  if (rec.tx.type === TX_DEPOSIT) return null;
  const attrs = blockL1Attributes(rec.block);
  if (attrs === null) return null;
  const b = rec.block;
  const fee = txL1Fee(rec.position < b.txCount ? b.txBytes(rec.position) : hexToBytes(rec.tx.raw), attrs, ECOTONE_LAYOUT_MEANS_FJORD);
  return fee;
}
