// The eth_ method table: pending answers from state, everything else forwarded (with `pending` → `latest` when the
// pending state is not usable). Handlers validate params and return values; they never build envelopes.
//
// By-hash lookups (transactions, receipts, flashblock block hashes) look in pending state first and forward on a
// miss: held blocks are always above the canonical head, so the node cannot know them yet.
// eth_blockNumber (no params, or ["pending"]) is the pending height while pending state is usable: clients that wait
// for receipts re-check on a new block number (viem's waitForTransactionReceipt does), and every numeric tag up to
// that height is answered here (blocks, receipts, logs) or rewritten to `latest` for node-executed calls.
// eth_getTransactionCount(pending) for a sender without preconfirmed txs is the node's `latest` nonce (DESIGN §5).
// eth_call / eth_estimateGas / eth_getCode / eth_getStorageAt / eth_createAccessList with `pending` are forwarded
// with `latest`: the node's own notion of pending is not the flashblock state (exact execution: a later issue).
import { toQuantity } from '../../chain/hex.js';
import { RpcCode, RpcError } from '../../errors.js';
import type { BlockView } from '../../state/view.js';
import type { SubscriberSink } from '../subscriptions.js';
import { ethGetLogs } from './logs.js';
import { heldAbove, usablePending } from './pending.js';
import { address, arity, blockParam, bool, hash32, quantity, withLatest, type BlockParam } from './params.js';
import { ethSendRawTransactionSync } from './submit.js';
import { FORWARD_AS_IS, Forward, RawJson, type Handler, type MethodContext } from './types.js';

/** A block param resolved against state: the block and flashblock index, or null (forward). */
interface Target {
  block: BlockView;
  index: number;
}

function target(ctx: MethodContext, bp: BlockParam): Target | null {
  let b: BlockView | null = null;
  if (bp.kind === 'pending') b = usablePending(ctx);
  else if (bp.kind === 'number') b = heldAbove(ctx, bp.number);
  else if (bp.kind === 'hash') {
    const f = ctx.view.blockByFlashblockHash(bp.hash);
    return f === undefined || f.block.broken ? null : { block: f.block, index: f.index };
  }
  return b === null ? null : { block: b, index: b.lastIndex };
}

/** What to forward when state cannot answer: `pending` → `latest` at argument `i`, else the params unchanged. */
function miss(bp: BlockParam, params: unknown[], i: number): Forward {
  return bp.kind === 'pending' ? new Forward(withLatest(params, i)) : FORWARD_AS_IS;
}

function txAt(ctx: MethodContext, t: Target, i: number): unknown {
  if (i >= (t.block.txCountAt[t.index] as number)) return null;
  return ctx.shapes.txJson(t.block.txs[i]!, t.index);
}

const eth_blockNumber: Handler = (ctx, params) => {
  arity(params, 0, 1);
  const kind = params.length === 0 ? 'pending' : blockParam(params, 0, false).kind;
  if (kind === 'pending') {
    const b = usablePending(ctx);
    if (b !== null) return toQuantity(b.number);
  }
  return params.length === 0 ? FORWARD_AS_IS : new Forward([]);
};

const eth_getBlockByNumber: Handler = (ctx, params) => {
  arity(params, 1, 2);
  const bp = blockParam(params, 0, false);
  const full = bool(params, 1, false);
  const t = target(ctx, bp);
  return t === null ? miss(bp, params, 0) : ctx.shapes.blockJson(t.block, full, t.index);
};

const eth_getBlockByHash: Handler = (ctx, params) => {
  arity(params, 1, 2);
  const h = hash32(params, 0);
  const full = bool(params, 1, false);
  const f = ctx.view.blockByFlashblockHash(h);
  return f === undefined || f.block.broken ? FORWARD_AS_IS : ctx.shapes.blockJson(f.block, full, f.index);
};

const eth_getBlockReceipts: Handler = (ctx, params) => {
  arity(params, 1, 1);
  const bp = blockParam(params, 0, true);
  const t = target(ctx, bp);
  if (t === null) return miss(bp, params, 0);
  const count = t.block.txCountAt[t.index] as number;
  const parts: string[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const r = ctx.shapes.receiptJson(t.block.txs[i]!, t.index);
    if (r === null) {
      ctx.metrics.pendingFallbacks.no_metadata.inc();
      return miss(bp, params, 0);
    }
    parts[i] = r.json;
  }
  return new RawJson('[' + parts.join(',') + ']');
};

const eth_getBlockTransactionCountByNumber: Handler = (ctx, params) => {
  arity(params, 1, 1);
  const bp = blockParam(params, 0, false);
  const t = target(ctx, bp);
  return t === null ? miss(bp, params, 0) : toQuantity(t.block.txCountAt[t.index] as number);
};

const eth_getBlockTransactionCountByHash: Handler = (ctx, params) => {
  arity(params, 1, 1);
  const f = ctx.view.blockByFlashblockHash(hash32(params, 0));
  return f === undefined || f.block.broken ? FORWARD_AS_IS : toQuantity(f.block.txCountAt[f.index] as number);
};

const eth_getTransactionByHash: Handler = (ctx, params) => {
  arity(params, 1, 1);
  const rec = ctx.view.tx(hash32(params, 0));
  return rec === undefined ? FORWARD_AS_IS : ctx.shapes.txJson(rec);
};

const eth_getRawTransactionByHash: Handler = (ctx, params) => {
  arity(params, 1, 1);
  const rec = ctx.view.tx(hash32(params, 0));
  return rec === undefined ? FORWARD_AS_IS : rec.tx.raw;
};

const eth_getTransactionReceipt: Handler = (ctx, params) => {
  arity(params, 1, 1);
  const rec = ctx.view.tx(hash32(params, 0));
  if (rec === undefined) return FORWARD_AS_IS;
  const r = ctx.shapes.receiptJson(rec);
  if (r === null) {
    ctx.metrics.pendingFallbacks.no_metadata.inc();
    return FORWARD_AS_IS;
  }
  return r;
};

const eth_getTransactionByBlockNumberAndIndex: Handler = (ctx, params) => {
  arity(params, 2, 2);
  const bp = blockParam(params, 0, false);
  const i = quantity(params, 1);
  const t = target(ctx, bp);
  return t === null ? miss(bp, params, 0) : txAt(ctx, t, i);
};

const eth_getTransactionByBlockHashAndIndex: Handler = (ctx, params) => {
  arity(params, 2, 2);
  const h = hash32(params, 0);
  const i = quantity(params, 1);
  const f = ctx.view.blockByFlashblockHash(h);
  return f === undefined || f.block.broken ? FORWARD_AS_IS : txAt(ctx, f, i);
};

const eth_getBalance: Handler = (ctx, params) => {
  arity(params, 1, 2);
  const a = address(params, 0);
  const bp = blockParam(params, 1, true, true);
  if (bp.kind !== 'pending') return FORWARD_AS_IS;
  if (usablePending(ctx) !== null) {
    const v = ctx.view.balance(a);
    if (v !== null) return toQuantity(v);
  }
  return new Forward(withLatest(params, 1));
};

const eth_getTransactionCount: Handler = (ctx, params) => {
  arity(params, 1, 2);
  const a = address(params, 0);
  const bp = blockParam(params, 1, true, true);
  if (bp.kind !== 'pending') return FORWARD_AS_IS;
  if (usablePending(ctx) === null) return new Forward(withLatest(params, 1));
  // Senders still with the recovery worker: wait for its answer rather than recover them on the event loop.
  const settled = ctx.senders.settled(a);
  if (settled !== null) return settled.then(() => pendingNonce(ctx, a, params));
  return pendingNonce(ctx, a, params);
};

function pendingNonce(ctx: MethodContext, a: string, params: unknown[]): unknown {
  const n = ctx.view.nextNonce(a);
  if (n !== null) return toQuantity(n);
  // The node's `latest`, not its `pending`: pending here is the state after the last flashblock, and the node's
  // pending nonce counts its own mempool, which would make the answer jump between two different notions of pending
  // as the sender's transactions move from the mempool into a flashblock (DESIGN §5).
  return new Forward(withLatest(params, 1));
}

/**
 * A handler for node-executed methods: argument `i` = `pending`, or the number of a held pending block (which the
 * node does not have yet), is forwarded as `latest`.
 */
function pendingAsLatest(i: number): Handler {
  return (ctx, params) => {
    const tag = params[i];
    if (tag === 'pending') return new Forward(withLatest(params, i));
    if (typeof tag === 'string' && tag.length > 2 && tag.length < 16 && tag.startsWith('0x')) {
      const n = Number.parseInt(tag.slice(2), 16);
      if (heldAbove(ctx, n) !== null) return new Forward(withLatest(params, i));
    }
    return FORWARD_AS_IS;
  };
}

const eth_subscribe: Handler = (ctx, params, sink: SubscriberSink | null) => {
  if (sink === null) throw new RpcError(RpcCode.METHOD_NOT_FOUND, 'eth_subscribe needs a WebSocket connection');
  return ctx.subscriptions.subscribe(sink, params);
};

const eth_unsubscribe: Handler = (ctx, params, sink: SubscriberSink | null) => {
  if (sink === null) throw new RpcError(RpcCode.METHOD_NOT_FOUND, 'eth_unsubscribe needs a WebSocket connection');
  arity(params, 1, 1);
  if (typeof params[0] !== 'string') throw new RpcError(RpcCode.INVALID_PARAMS, 'invalid argument 0: expected a subscription id string');
  return ctx.subscriptions.unsubscribe(sink, params[0]);
};

/** The method table, keyed by full wire name. Methods not in it are forwarded to the node unchanged. */
export const ETH_METHODS: ReadonlyMap<string, Handler> = new Map<string, Handler>([
  ['eth_blockNumber', eth_blockNumber],
  ['eth_getBlockByNumber', eth_getBlockByNumber],
  ['eth_getBlockByHash', eth_getBlockByHash],
  ['eth_getBlockReceipts', eth_getBlockReceipts],
  ['eth_getBlockTransactionCountByNumber', eth_getBlockTransactionCountByNumber],
  ['eth_getBlockTransactionCountByHash', eth_getBlockTransactionCountByHash],
  ['eth_getTransactionByHash', eth_getTransactionByHash],
  ['eth_getRawTransactionByHash', eth_getRawTransactionByHash],
  ['eth_getTransactionReceipt', eth_getTransactionReceipt],
  ['eth_getTransactionByBlockNumberAndIndex', eth_getTransactionByBlockNumberAndIndex],
  ['eth_getTransactionByBlockHashAndIndex', eth_getTransactionByBlockHashAndIndex],
  ['eth_getBalance', eth_getBalance],
  ['eth_getTransactionCount', eth_getTransactionCount],
  ['eth_call', pendingAsLatest(1)],
  ['eth_estimateGas', pendingAsLatest(1)],
  ['eth_createAccessList', pendingAsLatest(1)],
  ['eth_getCode', pendingAsLatest(1)],
  ['eth_getStorageAt', pendingAsLatest(2)],
  ['eth_getLogs', ethGetLogs],
  ['eth_sendRawTransactionSync', ethSendRawTransactionSync],
  ['eth_subscribe', eth_subscribe],
  ['eth_unsubscribe', eth_unsubscribe],
]);
