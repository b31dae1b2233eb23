// JSON-RPC log objects: a receipt's logs positioned in their block from the transaction's context. Pure.
import type { FlashLog } from '../../chain/flashblock.js';
import { toQuantity } from '../../chain/hex.js';
import type { TxContext } from './context.js';

const q = toQuantity;

/**
 * The RPC logs of one transaction (`logs` in emission order), with logIndex running from `firstLogIndex` (the logs
 * of the block's earlier transactions: a fact of the receipts, not of the position).
 */
export function logsToRpc(logs: readonly Readonly<FlashLog>[], txHash: string, ctx: TxContext, firstLogIndex: number): Record<string, unknown>[] {
  const bn = ctx.blockNumber === null ? null : q(ctx.blockNumber);
  const ti = ctx.transactionIndex === null ? null : q(ctx.transactionIndex);
  const ts = ctx.blockTimestamp == null ? null : q(ctx.blockTimestamp);
  const first = firstLogIndex;
  const out: Record<string, unknown>[] = new Array(logs.length);
  for (let i = 0; i < logs.length; i++) {
    const l = logs[i]!;
    out[i] = {
      address: l.address,
      topics: l.topics,
      data: l.data,
      blockHash: ctx.blockHash,
      blockNumber: bn,
      blockTimestamp: ts,
      transactionHash: txHash,
      transactionIndex: ti,
      logIndex: q(first + i),
      removed: false,
    };
  }
  return out;
}
