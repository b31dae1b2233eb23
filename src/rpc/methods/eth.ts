// The eth_ method table: pending answers from state, everything else forwarded (with `pending` → `latest` when the
// pending state is not usable). Handlers validate params and return values; they never build envelopes.
//
// By-hash lookups (transactions, receipts, flashblock block hashes) look in pending state first and forward on a
// miss: held blocks are always above the canonical head, so the node cannot know them yet.
// eth_blockNumber follows the spec: ["pending"] is the pending height, no tag is `latest` (the node's head), so a
// client counts a preconfirmed transaction as 0 confirmations. Numeric heights of held pending blocks (as a client
// gets from eth_blockNumber("pending")) are answered here (blocks, receipts, logs, balance and nonce at the pending
// height) or rewritten to `latest` for node-executed calls.
// eth_getTransactionCount(pending) = the higher of the node's `pending` count (its mempool: back-to-back sends) and
// the next nonce after the sender's preconfirmed transactions.
// eth_call / eth_estimateGas / eth_getCode / eth_getStorageAt / eth_createAccessList with `pending` answer from the
// execution engine (executed.ts), and eth_getBalance / eth_getTransactionCount take its answer too; without it they
// are forwarded with `latest`. The node's `pending` is never forwarded for state.
import { toQuantity } from '../../chain/hex.js';
import { TX_DEPOSIT } from '../../chain/types.js';
import { RpcCode, RpcError } from '../../errors.js';
import type { BlockView } from '../../state/view.js';
import type { SubscriberSink } from '../subscriptions.js';
import { TRACE_HANDLERS } from './trace.js';
import { eth_call, eth_createAccessList, eth_estimateGas, eth_simulateV1 } from './call.js';
import { atNewestState, executedAccount, listedAccount, pendingNonce, receiptsWithExecution } from './executed.js';
import { eth_getCode, eth_getProof, eth_getStorageAt } from './state.js';
import { eth_fillTransaction } from './fill.js';
import { ethGetLogs } from './logs.js';
import { txAsOf, txCountAsOf } from '../shapes/block.js';
import { heldAbove, heldStateBlock, usablePending } from './pending.js';
import { address, arity, blockParam, bool, checkBlockTag, hash32, quantity, withLatest, type BlockParam } from './params.js';
import { ethSendRawTransactionSync } from './submit.js';
import { FORWARD_AS_IS, Forward, FromState, RawJson, type Handler, type MethodContext } from './types.js';

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
  const rec = txAsOf(t.block, t.index, i);
  return rec === undefined ? null : ctx.shapes.txJson(rec, t.index);
}

const eth_blockNumber: Handler = (ctx, params) => {
  arity(params, 0, 1);
  if (params.length === 0) return FORWARD_AS_IS;
  if (params[0] === null) return new Forward([]);
  if (blockParam(params, 0, false).kind === 'pending') {
    const b = usablePending(ctx);
    if (b !== null) return toQuantity(b.number);
  }
  return new Forward([]);
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
  const count = txCountAsOf(t.block, t.index);
  const parts: string[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const r = ctx.shapes.receiptJson(txAsOf(t.block, t.index, i)!, t.index);
    if (r === null) {
      // Receipts the stream lacks (post-Azul) come from execution; without it, from the node.
      if (ctx.execution !== null) {
        return receiptsWithExecution(ctx, t.block, t.index, count).then((all) => (all === null ? miss(bp, params, 0) : new FromState(new RawJson('[' + all.join(',') + ']'))));
      }
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
  return t === null ? miss(bp, params, 0) : toQuantity(txCountAsOf(t.block, t.index));
};

const eth_getBlockTransactionCountByHash: Handler = (ctx, params) => {
  arity(params, 1, 1);
  const f = ctx.view.blockByFlashblockHash(hash32(params, 0));
  return f === undefined || f.block.broken ? FORWARD_AS_IS : toQuantity(txCountAsOf(f.block, f.index));
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
    const ex = ctx.execution;
    if (ex !== null) {
      // The stream carried no receipt (post-Azul): the executed one, once the engine has run its flashblock.
      return Promise.resolve(ex.readyFor(rec.block.number, rec.flashblockIndex)).then((ok) => {
        const x = ok ? ctx.shapes.receiptJson(rec) : null;
        if (x === null) ctx.metrics.pendingFallbacks[ok ? 'execution' : ex.fallbackReason?.(rec.block.number, rec.flashblockIndex) ?? 'execution'].inc();
        return x === null ? FORWARD_AS_IS : new FromState(x);
      });
    }
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

/**
 * The (address, block) params of an account query, and the held block that answers it: the pending block for
 * `pending`, the held block a number or flashblock hash names (EIP-1898 objects too, see heldStateBlock);
 * undefined when the node answers the query as it is.
 */
function accountQuery(ctx: MethodContext, params: unknown[]): { a: string; bp: BlockParam; top: BlockView | null | undefined } {
  arity(params, 1, 2);
  const a = address(params, 0);
  const bp = blockParam(params, 1, true, true);
  return { a, bp, top: bp.kind === 'pending' || bp.kind === 'number' || bp.kind === 'hash' ? heldStateBlock(ctx, params[1]) : undefined };
}

const eth_getBalance: Handler = (ctx, params) => {
  const { a, top } = accountQuery(ctx, params);
  if (top === undefined) return FORWARD_AS_IS;
  const listed = listedAccount(ctx, a, top)?.balance;
  if (listed !== undefined) return toQuantity(listed);
  if (ctx.execution !== null && top !== null && atNewestState(ctx, top)) {
    return executedAccount(ctx, top, (e) => e.getBalance(a)).then((v) => {
      if (v !== null) return new FromState(toQuantity(v));
      const s = balanceFromStream(ctx, a, top, params);
      return s instanceof Forward ? s : new FromState(s);
    });
  }
  return balanceFromStream(ctx, a, top, params);
};

/** The newest balance the stream reported at or below `top`, else the node's `latest`. */
function balanceFromStream(ctx: MethodContext, a: string, top: BlockView | null, params: unknown[]): unknown {
  if (top !== null) {
    // The newest balance reported at or below the block asked for (each block reports the accounts it touched).
    for (let n = top.number; n > ctx.view.canonical; n--) {
      const b = ctx.view.block(n);
      if (b === undefined || b.broken) break;
      const v = b.balanceOf(a);
      if (v !== undefined) return toQuantity(v);
    }
  }
  return new Forward(withLatest(params, 1));
}

const eth_getTransactionCount: Handler = (ctx, params) => {
  const { a, bp, top } = accountQuery(ctx, params);
  if (top === undefined) return FORWARD_AS_IS;
  const listed = listedAccount(ctx, a, top)?.nonce;
  if (bp.kind !== 'pending' && top !== null) {
    if (listed !== undefined) return toQuantity(listed);
    // A held height (by number or flashblock hash): the executed state's nonce when execution answers (see below), else the stream's.
    const fromStream = (): unknown => {
      const n = nonceAt(ctx, a, top.number);
      return n === null ? new Forward(withLatest(params, 1)) : toQuantity(n);
    };
    if (ctx.execution === null || !atNewestState(ctx, top)) return fromStream();
    return executedAccount(ctx, top, (e) => e.getTransactionCount(a)).then((x) => (x === null ? fromStream() : new FromState(toQuantity(x))));
  }
  return pendingNonce(ctx, a, top, listed).then(toQuantity);
};

/**
 * The nonce of `a` after held block `n`: one past its newest transaction in a held block at or below `n`, or null
 * when it has none there (then the node's latest is the answer). Numeric heights only; asks for the senders first.
 */
function nonceAt(ctx: MethodContext, a: string, n: number): bigint | null {
  for (let k = n; k > ctx.view.canonical; k--) {
    const b = ctx.view.block(k);
    if (b === undefined || b.broken) return null;
    for (let i = b.txCount - 1; i >= 0; i--) {
      const rec = b.txAt(i)!;
      if (rec.tx.from === null) ctx.senders.recover([rec]); // newest first: stops at the sender's last transaction
      if (rec.tx.from !== a) continue;
      // A deposit's nonce is in its receipt: the stream's, else the executed one (when the engine has it).
      const nonce = rec.tx.type === TX_DEPOSIT ? ((rec.receipt ?? ctx.shapes.receipts.facts(rec))?.depositNonce ?? null) : rec.tx.nonce;
      if (nonce !== null) return nonce + 1n;
    }
  }
  return null;
}

/**
 * A handler for node-executed methods: argument `i` = `pending`, or the number of a held pending block (which the
 * node does not have yet), is forwarded as `latest`.
 */
function pendingAsLatest(i: number): Handler {
  return (ctx, params) => {
    const tag = params[i];
    if (tag === 'pending') return new Forward(withLatest(params, i));
    checkBlockTag(params, i, true);
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
  ['eth_call', eth_call],
  ['eth_simulateV1', eth_simulateV1],
  ['eth_estimateGas', eth_estimateGas],
  ['eth_createAccessList', eth_createAccessList],
  ['eth_getCode', eth_getCode],
  ['eth_getStorageAt', eth_getStorageAt],
  ['eth_getProof', eth_getProof],
  ['eth_fillTransaction', eth_fillTransaction],
  ['eth_feeHistory', pendingAsLatest(1)],
  ['eth_getUncleCountByBlockNumber', pendingAsLatest(0)],
  ['eth_getUncleByBlockNumberAndIndex', pendingAsLatest(0)],
  ['eth_getLogs', ethGetLogs],
  ['eth_sendRawTransactionSync', ethSendRawTransactionSync],
  ['eth_subscribe', eth_subscribe],
  ['eth_unsubscribe', eth_unsubscribe],
  ...TRACE_HANDLERS,
]);
