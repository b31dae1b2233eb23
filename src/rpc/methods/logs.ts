// eth_getLogs whose range reaches `pending`: the canonical part from the node, the pending part from held blocks
// above the canonical head, concatenated without duplicates. Any other range is forwarded unchanged. Every filter is
// validated first (addresses, topics, their counts, the range tags), whichever part answers.
import { RpcCode, RpcError } from '../../errors.js';
import type { BlockView } from '../../state/view.js';
import { GETLOGS_FILTER, logMatches, parseLogFilter, type LogFilter } from '../filter.js';
import type { Shapes } from '../shapes/json.js';
import { heldAbove, usablePending } from './pending.js';
import { blockParam, hash32, type BlockParam } from './params.js';
import { FORWARD_AS_IS, Forward, FromState, type Handler, type MethodContext } from './types.js';

export { MAX_FILTER_ALTERNATIVES } from '../filter.js';

function invalid(msg: string): RpcError {
  return new RpcError(RpcCode.INVALID_PARAMS, 'invalid argument 0: ' + msg);
}

/** fromBlock / toBlock: a tag or a hex number, named in the error. */
function rangeParam(v: unknown, name: string): BlockParam {
  try {
    return blockParam([v], 0, false);
  } catch (e) {
    if (e instanceof RpcError) throw invalid(name + ': ' + e.message.replace(/^invalid argument 0: /, ''));
    throw e;
  }
}

/** The matching logs of `block` as of flashblock `index`; false when a transaction's logs are unknown. */
function blockLogs(shapes: Shapes, block: BlockView, index: number, f: LogFilter, out: unknown[]): boolean {
  const count = block.txCountAt[index] as number;
  for (let i = 0; i < count; i++) {
    const rec = block.txAt(i)!;
    const raw = shapes.rawLogs(rec);
    if (raw === null) return false;
    if (raw.length === 0) continue;
    const shaped = shapes.logObjects(rec, index)!;
    for (let j = 0; j < raw.length; j++) if (logMatches(f, raw[j]!)) out.push(shaped[j]);
  }
  return true;
}

function pendingToLatest(f: Record<string, unknown>): Forward {
  const g = { ...f };
  if (g.fromBlock === 'pending') g.fromBlock = 'latest';
  if (g.toBlock === 'pending') g.toBlock = 'latest';
  return new Forward([g]);
}

/** eth_getLogs: see the file comment. */
export const ethGetLogs: Handler = (ctx: MethodContext, params) => {
  if (params.length !== 1) throw new RpcError(RpcCode.INVALID_PARAMS, params.length === 0 ? 'missing value for required argument 0' : 'too many arguments, want at most 1');
  const f = params[0];
  if (f === null || typeof f !== 'object' || Array.isArray(f)) throw invalid('expected a filter object');
  const filter = f as Record<string, unknown>;
  const m = parseLogFilter(filter, GETLOGS_FILTER);
  if (filter.blockHash !== undefined && filter.blockHash !== null) {
    const h = hash32([filter.blockHash], 0);
    const fb = ctx.view.blockByFlashblockHash(h);
    if (fb === undefined || fb.block.broken) return FORWARD_AS_IS;
    const out: unknown[] = [];
    return blockLogs(ctx.shapes, fb.block, fb.index, m, out) ? out : FORWARD_AS_IS;
  }
  const fromRaw = filter.fromBlock ?? 'latest';
  const toRaw = filter.toBlock ?? 'latest';
  const from = rangeParam(fromRaw, 'fromBlock');
  const to = rangeParam(toRaw, 'toBlock');
  // The range reaches pending state when it ends at `pending` or at the number of a held pending block.
  let top: BlockView | null = null;
  let heldTo = false;
  if (to.kind === 'number') {
    top = heldAbove(ctx, to.number);
    heldTo = top !== null;
  }
  if (!heldTo && toRaw !== 'pending' && fromRaw !== 'pending') return FORWARD_AS_IS;
  if (!heldTo) top = usablePending(ctx);
  if (top === null) return pendingToLatest(filter);
  if (!heldTo && toRaw !== 'pending') {
    // fromBlock pending, toBlock an earlier tag or number: an empty range.
    return [];
  }
  const fromNum = from.kind === 'pending' ? top.number : from.kind === 'number' ? from.number : from.kind === 'earliest' ? 0 : -1;
  const canonical = ctx.view.canonical;
  const held = ctx.view.heldBlocks();
  const end = top;
  /** The pending part (and its lowest height), or null when a transaction's logs are unknown. */
  const collect = (): { local: unknown[]; first: number } | null => {
    const local: unknown[] = [];
    let first = end.number;
    for (const b of held) {
      if (b.broken || b.number <= canonical || b.number < fromNum || b.number > end.number) continue;
      if (b.number < first) first = b.number;
      if (!blockLogs(ctx.shapes, b, b.lastIndex, m, local)) return null;
    }
    return { local, first };
  };
  const got = collect();
  if (got !== null) return finish(ctx, filter, from, fromNum, got.local, got.first);
  const ex = ctx.execution;
  if (ex === null) {
    ctx.metrics.pendingFallbacks.no_metadata.inc();
    return pendingToLatest(filter);
  }
  // Logs the stream lacks (post-Azul) come from execution (the shapes' receipt source), once it has run the newest
  // flashblock asked for.
  return Promise.resolve(ex.readyFor(end.number, end.lastIndex)).then((ok) => {
    const x = ok ? collect() : null;
    if (x === null) {
      ctx.metrics.pendingFallbacks[ok ? 'execution' : ex.fallbackReason?.(end.number, end.lastIndex) ?? 'execution'].inc();
      return pendingToLatest(filter);
    }
    const out = finish(ctx, filter, from, fromNum, x.local, x.first);
    return out instanceof Promise ? out : new FromState(out);
  });
};

/** The pending part alone, or the node's canonical part below `first` followed by it. */
function finish(ctx: MethodContext, filter: Record<string, unknown>, from: BlockParam, fromNum: number, local: unknown[], first: number): unknown {
  if (from.kind === 'pending' || (fromNum >= first && from.kind !== 'latest' && from.kind !== 'safe' && from.kind !== 'finalized')) return local;
  // The canonical part ends at the node's head; anything at or above the first pending height served here is
  // dropped from it (the node may already hold a block that is still pending here).
  const canonFilter = { ...filter, toBlock: 'latest' };
  return ctx.node.call<Record<string, unknown>[]>('eth_getLogs', [canonFilter]).then((canon) => {
    const out: unknown[] = [];
    for (const l of canon) if (Number.parseInt(String(l.blockNumber), 16) < first) out.push(l);
    for (const l of local) out.push(l);
    return out;
  });
}
