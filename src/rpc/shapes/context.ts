// The one per-transaction context every RPC shape is built from: where the transaction sits (block hash as of a
// given flashblock, number, index, timestamp, base fee) and what its object shows from its receipt. "The receipt as
// of flashblock i" is another context, never a patched object. Pure; reads the state view (and the deposit extras
// source it is given) only.
import { TX_DEPOSIT } from '../../chain/types.js';
import type { TxView } from '../../state/view.js';

/** What a deposit's transaction object shows from its receipt: the pre-execution nonce and the receipt version. */
export interface DepositExtras {
  depositNonce: bigint | null;
  depositReceiptVersion: bigint | null;
}

/**
 * Where a deposit's receipt extras come from: the stream's receipt by default; the shapes pass their receipt source
 * (stream first, then execution), so the object is the same whichever producer had the receipt. null: none yet.
 */
export type DepositExtrasSource = (rec: TxView) => DepositExtras | null;

/** The stream's receipt only. */
export const STREAM_DEPOSIT_EXTRAS: DepositExtrasSource = (rec) => rec.receipt;

/** Where a transaction sits, and the receipt extras a deposit's transaction object shows. Nulls mean "not in a block". */
export interface TxContext {
  blockHash: string | null;
  blockNumber: bigint | null;
  transactionIndex: number | null;
  baseFeePerGas: bigint | null;
  /** The block's timestamp; shown as `blockTimestamp` when given (newer execution-apis; reth omits it). */
  blockTimestamp?: bigint | null;
  /** Deposit only: the receipt's depositReceiptVersion (e.g. "0x1"), shown when given. */
  depositReceiptVersion?: string | null;
  /** Deposit only: the receipt's depositNonce, shown as `nonce` when given (op-reth omits it otherwise). */
  depositNonce?: bigint | null;
  /** The flashblock the answer is given as of (its block_hash is `blockHash`); null outside pending state. */
  asOfFlashblock?: number | null;
}

/**
 * The context of a pending transaction as of flashblock `index` of its block (default: the latest applied); a
 * deposit's receipt extras from `deposit` (asked for deposits only).
 */
export function txContext(rec: TxView, index: number = rec.block.lastIndex, deposit: DepositExtrasSource = STREAM_DEPOSIT_EXTRAS): TxContext {
  const b = rec.block;
  const d = b.diffs[index];
  if (d === undefined) throw new Error(`block ${b.number} has no flashblock ${index}`);
  const r = rec.tx.type === TX_DEPOSIT ? deposit(rec) : null;
  return {
    blockHash: d.blockHash,
    blockNumber: BigInt(b.number),
    transactionIndex: rec.position,
    baseFeePerGas: b.base.baseFeePerGas,
    blockTimestamp: BigInt(b.base.timestamp),
    depositReceiptVersion: r?.depositReceiptVersion != null ? '0x' + r.depositReceiptVersion.toString(16) : null,
    depositNonce: r?.depositNonce ?? null,
    asOfFlashblock: index,
  };
}
