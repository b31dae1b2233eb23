// When a `pending` read is answered from executed state (the execution engine behind ctx.execution), for the calls
// (call.ts), code and storage (state.ts), the engine's part of eth_getBalance / eth_getTransactionCount, and executed
// receipts. `pending`, or the number of the pending block, is answered by the engine once it has
// executed the flashblock `pending` means here (so the state is never older than the receipts served); when
// execution is off, down, failed at that block or still behind after the wait, the call is forwarded as `latest`
// and counted (pending_fallbacks_total{reason="execution"}); when execution disagrees with the builder or the chain
// there, likewise, counted as reason="diverged".
import { EngineUnavailableError, RpcReplyError, type NowRead } from '../../exec/engine.js';
import { RpcError } from '../../errors.js';
import type { AccountPost } from '../../chain/access-list.js';
import type { BlockView, TxView } from '../../state/view.js';
import { txAsOf } from '../shapes/block.js';
import { l1FeeFacts } from '../shapes/l1fee.js';
import { STREAM_RECEIPTS, type ReceiptFacts, type ReceiptSource } from '../shapes/receipt.js';
import { heldStateBlock } from './pending.js';
import { address, checkBlockTag, withLatest } from './params.js';
import { FORWARD_AS_IS, Forward, FromState, type ExecutionReads, type Handler, type MethodContext, type PendingExecution } from './types.js';

/**
 * The pending block a state read with block argument `tag` asks for: `pending`, or the newest held block by number
 * or by flashblock hash (EIP-1898 objects included; see heldStateBlock). null: `pending` that cannot be answered
 * from state (already counted), or an older held block (answered as latest); undefined: not a pending read.
 */
function pendingTarget(ctx: MethodContext, tag: unknown): BlockView | null | undefined {
  const b = heldStateBlock(ctx, tag);
  if (b === undefined || b === null) return b;
  return atNewestState(ctx, b) ? b : null;
}

/**
 * Whether held block `b`'s state is the newest executed state: it is the highest block, or the one below a highest
 * block without transactions yet (what `pending` answers as then, see usablePending) — the state is the same.
 */
export function atNewestState(ctx: MethodContext, b: BlockView): boolean {
  const top = ctx.view.highestNumber;
  return b.number === top || (b.number === top - 1 && (ctx.view.block(top)?.txCount ?? 0) === 0);
}

/**
 * The engine, once it can answer for `target` (see PendingExecution.readyFor), else null after counting the
 * fallback. Without execution: null, uncounted (pending state reads answer as latest by configuration).
 */
export async function engineFor(ctx: MethodContext, target: BlockView): Promise<ExecutionReads | null> {
  const ex = ctx.execution;
  if (ex === null) return null;
  if (await ex.readyFor(target.number, target.lastIndex)) return ex.engine;
  ctx.metrics.pendingFallbacks[ex.fallbackReason?.(target.number, target.lastIndex) ?? 'execution'].inc();
  return null;
}

/** Runs an engine read: an engine that went away is null (fallback, counted), its JSON-RPC errors pass through. */
export async function engineRead<T>(ctx: MethodContext, run: () => Promise<T>): Promise<T | null> {
  try {
    return await run();
  } catch (e) {
    if (e instanceof EngineUnavailableError) {
      ctx.metrics.pendingFallbacks.execution.inc();
      return null;
    }
    if (e instanceof RpcReplyError) throw new RpcError(e.code, e.rpcMessage, e.data ?? undefined);
    throw e;
  }
}

/** {@link ExecutionReads.readNow}, its JSON-RPC errors (reverts) as the RPC's. */
function readNow(e: ExecutionReads, r: NowRead): string | undefined {
  try {
    return e.readNow?.(r);
  } catch (err) {
    if (err instanceof RpcReplyError) throw new RpcError(err.code, err.rpcMessage, err.data ?? undefined);
    throw err;
  }
}

/** The held block a pending read names (`pending`, or a held height), without counting a fallback; null otherwise. */
function listedTarget(ctx: MethodContext, tag: unknown): BlockView | null {
  return heldStateBlock(ctx, tag) ?? null;
}

/**
 * What the stream's access lists (X Layer `metadata.access_list`, EIP-7928) say of `a` after held block `top`: exact
 * post-values from the moment its flashblock was applied, before and independently of execution; null when the held
 * blocks carry no complete access lists. A field left undefined was not changed there (the caller goes on as before).
 * Execution cross-checks these (chain/access-list.ts `postDiffers`) where the engine's reads are compared.
 */
export function listedAccount(ctx: MethodContext, a: string, top: BlockView | null): Readonly<AccountPost> | null {
  return top === null ? null : ctx.view.accountAfter(a, top.number);
}

/**
 * A handler for a state read with its block argument at `i`: `pending` (or the pending height) runs `read` on the
 * engine; everything else is forwarded as today (a held pending height the node lacks as `latest`). `check`
 * validates the other params first, so a bad call is refused the same way whichever path answers it. `listed`
 * answers from the stream's access list first when it knows the value (X Layer).
 */
export function executedRead(
  i: number,
  check: (params: unknown[]) => void,
  read: (e: ExecutionReads, params: unknown[]) => Promise<unknown>,
  listed?: (post: Readonly<AccountPost>, params: unknown[]) => string | undefined,
  now?: (params: unknown[]) => NowRead,
): Handler {
  return (ctx, params) => {
    check(params);
    const tag = params[i];
    if (listed !== undefined) {
      const post = listedAccount(ctx, address(params, 0), listedTarget(ctx, tag));
      const v = post === null ? undefined : listed(post, params);
      if (v !== undefined) return v; // a synchronous value is an answer from state
    }
    // Without execution `pending` answers as latest by configuration (no fallback counted); so does a held block
    // named by number or hash, which the node does not have yet.
    const target = ctx.execution === null && tag === 'pending' ? null : pendingTarget(ctx, tag);
    if (target === undefined) {
      if (tag !== undefined) checkBlockTag(params, i, true);
      return FORWARD_AS_IS;
    }
    if (target === null || ctx.execution === null) return new Forward(withLatest(params, i));
    // At once when the engine has executed the flashblock and can answer from memory (no thread hop, no Promise).
    if (now !== undefined && ctx.execution.engine.readNow !== undefined && ctx.execution.readyFor(target.number, target.lastIndex) === true) {
      const v = readNow(ctx.execution.engine, now(params));
      if (v !== undefined) return v;
    }
    return (async () => {
      const e = await engineFor(ctx, target);
      const v = e === null ? null : await engineRead(ctx, () => read(e, params));
      return v === null ? new Forward(withLatest(params, i)) : new FromState(v);
    })();
  };
}

/** The engine's answer for an account query at held block `top` when it is the newest one and execution can answer it, else null. */
export async function executedAccount<T>(ctx: MethodContext, top: BlockView | null, read: (e: NonNullable<MethodContext['execution']>['engine']) => Promise<T>): Promise<T | null> {
  if (ctx.execution === null || top === null || !atNewestState(ctx, top)) return null;
  const e = await engineFor(ctx, top);
  return e === null ? null : engineRead(ctx, () => read(e));
}

/**
 * The next nonce of `a` for a new transaction: the highest of the node's `pending` count (its mempool: a wallet's
 * back-to-back sends that no flashblock holds yet), the next nonce after its preconfirmed transactions and the
 * executed state's nonce. `top`: the pending block (null when `pending` cannot be answered from state: the node's).
 */
export function pendingNonce(ctx: MethodContext, a: string, top: BlockView | null, listed?: bigint): Promise<bigint> {
  const fromNode = ctx.node.call<string>('eth_getTransactionCount', [a, 'pending']);
  if (top === null) return fromNode.then(BigInt);
  // Senders still with the recovery worker: wait for its answer rather than recover them on the event loop.
  const settled = ctx.senders.settled(a);
  const fromState = settled === null ? ctx.view.nextNonce(a) : settled.then(() => ctx.view.nextNonce(a));
  // The executed state's nonce (exact for deposits and senders recovery has not reached), when execution answers. It
  // replaces the stream's: that one takes a deposit's receipt depositNonce as op-geth's pre-execution value, and a
  // chain that commits anvil's post-execution value (the devnet) made it one too high for depositors.
  const fromEngine = executedAccount(ctx, top, (e) => e.getTransactionCount(a));
  return Promise.all([fromNode, fromState, fromEngine]).then(([n, s, x]) => {
    let best = BigInt(n);
    // An X Layer access list's post-value is exact at once; then the engine's, then the stream's.
    const mine = listed ?? x ?? s;
    if (mine !== null && mine > best) best = mine;
    return best;
  });
}

/**
 * The receipt facts of a pending transaction from execution, or null when the engine has not executed it (or its
 * execution is not the transaction at that position). A deposit's nonce is the one the chain commits (the engine
 * learns op-geth's pre-execution or anvil's post-execution convention from diff.receipts_root).
 */
function executedFacts(e: ExecutionReads, rec: TxView): ReceiptFacts | null {
  const ex = e.receipt(rec.tx.hash);
  if (ex === null) return null;
  const all = e.blockReceipts(rec.block.number);
  if (all === null || all[rec.position]?.transactionHash !== rec.tx.hash) return null;
  let firstLogIndex = 0;
  for (let i = 0; i < rec.position; i++) firstLogIndex += all[i]!.logs.length;
  return {
    type: ex.type,
    status: ex.status ? 1 : 0,
    cumulativeGasUsed: ex.cumulativeGasUsed,
    gasUsed: ex.gasUsed,
    logs: ex.logs,
    firstLogIndex,
    contractAddress: ex.contractAddress,
    depositNonce: e.chainDepositNonce(ex),
    depositReceiptVersion: ex.depositReceiptVersion,
    // The engine reports no OP fee fields; the same computation as for stream receipts fills them.
    l1Fee: l1FeeFacts(rec),
  };
}

/**
 * Receipts and logs for the shapes: the stream's where it carried them (served at once), else the executed ones
 * (same builder, so byte-identical for the same facts) unless the block's execution disagreed with its
 * diff.receipts_root (then none: the node answers once the block is canonical). The sender comes from the shapes (they recover it first).
 * Its epoch moves with every executed flashblock (new receipts readable, or a block's found diverging), so the
 * shapes' cached answers built from execution are rebuilt then. The source lives as long as the shapes using it.
 */
export function executionReceiptSource(ex: PendingExecution): ReceiptSource {
  const e = ex.engine;
  let epoch = 0;
  ex.onExecuted(() => {
    epoch++;
  });
  return {
    epoch: () => epoch,
    facts: (rec) => {
      const s = STREAM_RECEIPTS.facts(rec);
      if (s !== null || rec.tx.from === null || !ex.receiptsVerified(rec.block.number)) return s;
      return executedFacts(e, rec);
    },
    logs: (rec) => {
      const s = STREAM_RECEIPTS.logs(rec);
      if (s !== null || !ex.receiptsVerified(rec.block.number)) return s;
      const f = executedFacts(e, rec);
      return f === null ? null : { logs: f.logs, firstLogIndex: f.firstLogIndex };
    },
  };
}

/**
 * Receipts of a pending block's first `count` transactions as of flashblock `index` (its post-exec one included, see
 * txAsOf): the stream's where it carried
 * them, the engine's otherwise (after waiting for it to execute that flashblock); null when neither has one.
 */
export async function receiptsWithExecution(ctx: MethodContext, block: BlockView, index: number, count: number): Promise<string[] | null> {
  const ex = ctx.execution;
  if (ex === null) return null;
  if (!(await ex.readyFor(block.number, index))) {
    ctx.metrics.pendingFallbacks[ex.fallbackReason?.(block.number, index) ?? 'execution'].inc();
    return null;
  }
  const out: string[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const s = ctx.shapes.receiptJson(txAsOf(block, index, i)!, index);
    if (s === null) return null;
    out[i] = s.json;
  }
  return out;
}
