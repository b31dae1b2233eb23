// JSON-RPC receipts, one builder for every producer: the facts of a receipt (from the stream's metadata today, from
// execution next) plus the transaction's context give the same object, field for field and byte for byte, whoever
// produced the facts. Models: reth rpc-eth-types' receipt builder, node-reth's. Pure: the sender is passed in.
import type { FlashLog } from '../../chain/flashblock.js';
import { logsBloom } from '../../chain/bloom.js';
import { toQuantity } from '../../chain/hex.js';
import { contractAddress } from '../../chain/sender.js';
import type { TxL1Fee } from '../../chain/l1fee.js';
import { TX_DEPOSIT, type DecodedTx } from '../../chain/types.js';
import type { TxView } from '../../state/view.js';
import { txContext, type TxContext } from './context.js';
import { l1FeeFacts } from './l1fee.js';
import { logsToRpc } from './log.js';
import { effectiveGasPrice } from './transaction.js';

const q = toQuantity;

/**
 * OP-stack fee fields as op-geth/op-reth show them on non-deposit receipts (chain/l1fee.ts says which per fork);
 * null ones are omitted.
 */
export type OpL1Fee = TxL1Fee;

/** What a receipt says beyond where its transaction sits: the output of whichever producer ran the transaction. */
export interface ReceiptFacts {
  /** EIP-2718 type of the receipt (the transaction's). */
  type: number;
  status: number;
  cumulativeGasUsed: bigint;
  gasUsed: bigint;
  logs: readonly Readonly<FlashLog>[];
  /** logIndex of the first of `logs` within the block (the count of the earlier transactions' logs). */
  firstLogIndex: number;
  /** The address a creation deployed to, else null. */
  contractAddress: string | null;
  depositNonce: bigint | null;
  depositReceiptVersion: bigint | null;
  /**
   * OP fee fields; every producer takes them from l1FeeFacts (the block's L1-info deposit), so receipts of the
   * same transaction agree; null for deposits and blocks without an L1-info deposit.
   */
  l1Fee: OpL1Fee | null;
}

/** The address a creation by `from` deploys to (deposits at their depositNonce), or null for a call. */
export function createdAddress(tx: Readonly<DecodedTx>, from: string, depositNonce: bigint | null): string | null {
  if (tx.to !== null || !tx.executes) return null;
  const nonce = tx.type === TX_DEPOSIT ? depositNonce : tx.nonce;
  return nonce === null ? null : contractAddress(from, nonce);
}

/** One transaction's logs and where they start in the block. */
export interface TxLogs {
  logs: readonly Readonly<FlashLog>[];
  firstLogIndex: number;
}

/**
 * Where receipts come from: the stream's metadata today (STREAM_RECEIPTS); a source backed by execution can stand in
 * front of it and every shape, handler and subscription serves its receipts and logs unchanged.
 */
export interface ReceiptSource {
  /** The facts of `rec`'s receipt (its sender known), or null when this source has none (the caller forwards). */
  facts(rec: TxView): ReceiptFacts | null;
  /** `rec`'s logs in emission order and the block logIndex of the first (no sender needed); null when unknown. */
  logs(rec: TxView): TxLogs | null;
  /**
   * A number that changes whenever this source may answer differently for a transaction the stream carried no
   * receipt for (execution moved on: a flashblock executed, a block's receipts found diverging). Answers built
   * from such facts are cached only while it stays the same. Absent: never changes (the stream's metadata).
   */
  epoch?(): number;
}

/**
 * Whether the stream's receipt alone answers for `rec`: carried, with gasUsed (the previous cumulative gas known) and
 * logIndexes (every earlier transaction's logs known) derivable. Otherwise execution completes it.
 */
export function streamHasReceipt(rec: TxView): boolean {
  const r = rec.receipt;
  return r !== null && r.cumulativeGasUsed !== null && rec.gasUsed !== null && (rec.firstLogIndex >= 0 || r.logs.length === 0);
}

/** Whether the stream's receipt gives `rec`'s logs with their logIndexes. */
export function streamHasLogs(rec: TxView): boolean {
  const r = rec.receipt;
  return r !== null && (rec.firstLogIndex >= 0 || r.logs.length === 0);
}

/**
 * The facts the stream's metadata gives for a pending transaction (gasUsed from the difference of cumulative gas),
 * or null when it carried no usable receipt, the sender is unknown, or the receipt alone cannot give gasUsed or its
 * logIndexes (an earlier transaction's receipt is missing: execution completes it; else the caller forwards).
 */
export function streamReceiptFacts(rec: TxView): ReceiptFacts | null {
  const r = rec.receipt;
  const from = rec.tx.from;
  if (r === null || from === null || !streamHasReceipt(rec)) return null;
  return {
    type: r.type ?? rec.tx.type,
    status: r.status ?? 1,
    cumulativeGasUsed: r.cumulativeGasUsed as bigint,
    gasUsed: rec.gasUsed as bigint,
    logs: r.logs,
    firstLogIndex: rec.firstLogIndex,
    contractAddress: createdAddress(rec.tx, from, r.depositNonce),
    depositNonce: r.depositNonce,
    depositReceiptVersion: r.depositReceiptVersion,
    l1Fee: l1FeeFacts(rec),
  };
}

const L1_FIELDS = [
  'l1GasPrice', 'l1GasUsed', 'l1Fee', 'l1FeeScalar', 'l1BaseFeeScalar', 'l1BlobBaseFee', 'l1BlobBaseFeeScalar',
  'operatorFeeScalar', 'operatorFeeConstant', 'daFootprintGasScalar', 'blobGasUsed',
] as const;

/**
 * The JSON-RPC receipt of `tx` (sent by `from`) at `ctx` with `facts`. Field order is fixed here, so two producers
 * of the same facts serialise identically.
 */
export function buildReceipt(tx: Readonly<DecodedTx>, from: string, ctx: TxContext, facts: ReceiptFacts): Record<string, unknown> {
  const out: Record<string, unknown> = {
    type: q(facts.type),
    status: q(facts.status),
    cumulativeGasUsed: q(facts.cumulativeGasUsed),
    logs: logsToRpc(facts.logs, tx.hash, ctx, facts.firstLogIndex),
    logsBloom: logsBloom(facts.logs),
    transactionHash: tx.hash,
    transactionIndex: ctx.transactionIndex === null ? null : q(ctx.transactionIndex),
    blockHash: ctx.blockHash,
    blockNumber: ctx.blockNumber === null ? null : q(ctx.blockNumber),
    // Not in the execution-apis receipt schema, but geth (1.16+) and anvil return it; clients use it to avoid a
    // block lookup.
    blockTimestamp: ctx.blockTimestamp == null ? null : q(ctx.blockTimestamp),
    gasUsed: q(facts.gasUsed),
    effectiveGasPrice: q(effectiveGasPrice(tx, ctx.baseFeePerGas)),
    from,
    to: tx.to,
    contractAddress: facts.contractAddress,
  };
  if (tx.type === TX_DEPOSIT) {
    if (facts.depositNonce !== null) out.depositNonce = q(facts.depositNonce);
    if (facts.depositReceiptVersion !== null) out.depositReceiptVersion = q(facts.depositReceiptVersion);
  } else if (facts.l1Fee !== null) {
    const f = facts.l1Fee;
    for (const k of L1_FIELDS) {
      const v = f[k];
      if (v !== null) out[k] = typeof v === 'string' ? v : q(v);
    }
  }
  return out;
}

/** Receipts as the stream's metadata gives them. */
export const STREAM_RECEIPTS: ReceiptSource = {
  facts: streamReceiptFacts,
  logs: (rec) => (rec.receipt === null || !streamHasLogs(rec) ? null : { logs: rec.receipt.logs, firstLogIndex: rec.firstLogIndex }),
};

/** The receipt of a pending transaction as of flashblock `index` from `source`, or null (forward to the node). */
export function receiptToRpc(rec: TxView, index: number = rec.block.lastIndex, source: ReceiptSource = STREAM_RECEIPTS): Record<string, unknown> | null {
  const facts = source.facts(rec);
  return facts === null ? null : buildReceipt(rec.tx, rec.tx.from as string, txContext(rec, index), facts);
}

/** The RPC logs of a pending transaction as of flashblock `index` from `source`; null when it does not know them. */
export function pendingLogs(rec: TxView, index: number = rec.block.lastIndex, source: ReceiptSource = STREAM_RECEIPTS): Record<string, unknown>[] | null {
  const l = source.logs(rec);
  return l === null ? null : logsToRpc(l.logs, rec.tx.hash, txContext(rec, index), l.firstLogIndex);
}
