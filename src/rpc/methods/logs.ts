// eth_getLogs whose range reaches `pending`: the canonical part from the node, the pending part from held blocks
// above the canonical head, concatenated without duplicates. Any other range is forwarded unchanged. Every filter is
// validated first (addresses, topics, their counts, the range tags), whichever part answers.
import type { ServiceContext } from '../../context.js';
import { RpcCode, RpcError } from '../../errors.js';
import type { PendingBlock } from '../../state/block.js';
import { logsToRpc } from '../../state/view.js';
import { heldAbove, usablePending } from './pending.js';
import { blockParam, hash32, type BlockParam } from './params.js';
import { FORWARD_AS_IS, Forward, type Handler } from './types.js';

interface Matcher {
  addresses: Set<string> | null;
  /** Per topic position: null = any, else the accepted values. */
  topics: (Set<string> | null)[];
}

function invalid(msg: string): RpcError {
  return new RpcError(RpcCode.INVALID_PARAMS, 'invalid argument 0: ' + msg);
}

/** Addresses in one filter, and alternatives in one topic position (reth's and geth's limit). */
export const MAX_FILTER_ALTERNATIVES = 1000;

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const TOPIC = /^0x[0-9a-fA-F]{64}$/;

/** One value or an array of them, each matching `shape`, lower-cased; null entries (wildcards) when `nullable`. */
function lowerSet(v: unknown, what: string, shape: RegExp, want: string, nullable: boolean): Set<string> | null {
  const list = Array.isArray(v) ? (v as unknown[]) : [v];
  if (list.length > MAX_FILTER_ALTERNATIVES) throw invalid(`${what}: ${list.length} values, at most ${MAX_FILTER_ALTERNATIVES} allowed`);
  const out = new Set<string>();
  let wildcard = false;
  for (const x of list) {
    if (x === null && nullable) wildcard = true;
    else if (typeof x !== 'string' || !shape.test(x)) throw invalid(`${what}: expected ${want}, got ${JSON.stringify(x)?.slice(0, 80)}`);
    else out.add(x.toLowerCase());
  }
  return wildcard ? null : out;
}

function matcher(f: Record<string, unknown>): Matcher {
  const addresses = f.address === undefined || f.address === null ? null : lowerSet(f.address, 'address', ADDRESS, 'a 20-byte hex address', false);
  const topics: (Set<string> | null)[] = [];
  if (f.topics !== undefined && f.topics !== null) {
    if (!Array.isArray(f.topics)) throw invalid('topics must be an array');
    if (f.topics.length > 4) throw invalid('at most 4 topic positions');
    const list = f.topics as unknown[];
    for (let i = 0; i < list.length; i++) {
      const t = list[i];
      topics.push(t === null || (Array.isArray(t) && t.length === 0) ? null : lowerSet(t, `topics[${i}]`, TOPIC, 'null or a 32-byte hex topic', true));
    }
  }
  return { addresses, topics };
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

function matches(m: Matcher, log: Record<string, unknown>): boolean {
  if (m.addresses !== null && !m.addresses.has(log.address as string)) return false;
  const topics = log.topics as string[];
  for (let i = 0; i < m.topics.length; i++) {
    const want = m.topics[i];
    if (want === null || want === undefined) continue;
    const have = topics[i];
    if (have === undefined || !want.has(have)) return false;
  }
  return true;
}

/** The matching logs of `block` as of flashblock `index`; null when a receipt is missing from the stream. */
function blockLogs(block: PendingBlock, index: number, m: Matcher, out: unknown[]): boolean {
  const count = block.txCountAt[index] as number;
  const hash = block.diffs[index]!.blockHash;
  for (let i = 0; i < count; i++) {
    const rec = block.txs[i]!;
    if (rec.receipt === null) return false;
    const logs = logsToRpc(rec, hash);
    for (const l of logs) if (matches(m, l)) out.push(l);
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
export const ethGetLogs: Handler = (ctx: ServiceContext, params) => {
  if (params.length !== 1) throw new RpcError(RpcCode.INVALID_PARAMS, params.length === 0 ? 'missing value for required argument 0' : 'too many arguments, want at most 1');
  const f = params[0];
  if (f === null || typeof f !== 'object' || Array.isArray(f)) throw invalid('expected a filter object');
  const filter = f as Record<string, unknown>;
  const m = matcher(filter);
  if (filter.blockHash !== undefined && filter.blockHash !== null) {
    const h = hash32([filter.blockHash], 0);
    const fb = ctx.state.blockByFlashblockHash(h);
    if (fb === undefined || fb.block.broken) return FORWARD_AS_IS;
    const out: unknown[] = [];
    return blockLogs(fb.block, fb.index, m, out) ? out : FORWARD_AS_IS;
  }
  const fromRaw = filter.fromBlock ?? 'latest';
  const toRaw = filter.toBlock ?? 'latest';
  const from = rangeParam(fromRaw, 'fromBlock');
  const to = rangeParam(toRaw, 'toBlock');
  // The range reaches pending state when it ends at `pending` or at the number of a held pending block.
  let top: PendingBlock | null = null;
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
  const canonical = ctx.state.canonical;
  const local: unknown[] = [];
  let first = top.number;
  const held = ctx.state.heldBlocks();
  for (const b of held) {
    if (b.broken || b.number <= canonical || b.number < fromNum || b.number > top.number) continue;
    if (b.number < first) first = b.number;
    if (!blockLogs(b, b.lastIndex, m, local)) {
      ctx.metrics.pendingFallbacks.no_metadata.inc();
      return pendingToLatest(filter);
    }
  }
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
};
