// Polling filters served from the pending state: eth_newFilter, eth_newBlockFilter, eth_newPendingTransactionFilter,
// eth_getFilterChanges, eth_getFilterLogs, eth_uninstallFilter. Each filter buffers what the state events give until
// it is polled; never mutates state, never touches a socket.
//
// Log filters get each matching log once, as its flashblock is applied (as it is executed, for a transaction the
// stream carried no receipt for). When the block lands, the node's logs of that block reconcile the filter: a log
// delivered preconfirmed that the canonical block lacks (the block was replaced or reorged out) comes again with
// `removed: true`, and a canonical log never delivered (its flashblock missed, another block landed) comes then. A
// log is the same log when its transaction hash, log index and address are. Numeric fromBlock / toBlock bound the
// block numbers delivered (geth's rule; tags bound nothing). Block filters get each canonical block hash once, in
// order; pending-transaction filters each preconfirmed transaction once (its hash, or with `true` the object).
//
// Bounds (geth has none; reth caps): a filter buffers at most maxChangesPerFilter changes and drops the oldest past
// that, counted (rpc_filter_drops_total{reason="buffer_full"}); a client (a WebSocket connection, or an IP over HTTP)
// holds at most maxFiltersPerClient and the daemon maxFilters, refused with -32005; a filter not polled for
// idleTimeoutMs (geth's 5 minutes) is removed. Filters made over a WebSocket go when the connection closes.
// A change is one shared object or string for every filter that gets it: a full buffer costs a slot per change.
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { RpcCode, RpcError } from '../errors.js';
import type { RpcFilterKind } from '../metrics/metrics.js';
import type { Flashblock } from '../chain/flashblock.js';
import type { BlockView } from '../state/view.js';
import { GETLOGS_FILTER, logMatches, parseLogFilter, type LogFilter, type LogLike } from './filter.js';
import { ethGetLogs } from './methods/logs.js';
import { blockParam } from './methods/params.js';
import { Forward, type MethodContext } from './methods/types.js';
import { streamHasLogs } from './shapes/receipt.js';
import type { SubscriberSink } from './subscriptions.js';

/** Filters one client may hold (a WebSocket connection; over HTTP, a client IP). */
export const DEFAULT_MAX_FILTERS_PER_CLIENT = 100;
/** Filters the daemon holds in all. */
export const DEFAULT_MAX_FILTERS = 1000;
/** Changes a filter buffers between two polls; the oldest are dropped past it. */
export const DEFAULT_MAX_CHANGES_PER_FILTER = 10_000;
/** A filter not polled for this long is removed (geth's deadline). */
export const FILTER_IDLE_TIMEOUT_MS = 5 * 60_000;
/** Canonical blocks handled per catch-up step; a node that jumped further gets its newest ones handled. */
const MAX_CATCHUP_BLOCKS = 16;
/** Heights a log filter remembers its delivered logs of until they are reconciled; the oldest beyond are forgotten. */
const MAX_UNSETTLED_HEIGHTS = 64;
/** Preconfirmed transaction hashes remembered (so a replaced block's repeat is not announced twice). */
const MAX_ANNOUNCED_TXS = 100_000;

/** The methods served here. */
export const FILTER_METHODS: ReadonlySet<string> = new Set([
  'eth_newFilter', 'eth_newBlockFilter', 'eth_newPendingTransactionFilter', 'eth_getFilterChanges', 'eth_getFilterLogs',
  'eth_uninstallFilter',
]);

/** An HTTP request's client, asked only when a filter is installed (the per-client cap). */
export interface RequestOrigin {
  /** The client IP (trusted proxies applied), or '' when unknown. */
  clientIp(): string;
}

/** Bounds of the registry (see the file comment); defaults above. */
export interface FilterOptions {
  readonly maxFiltersPerClient?: number;
  readonly maxFilters?: number;
  readonly maxChangesPerFilter?: number;
  readonly idleTimeoutMs?: number;
}

type Log = Record<string, unknown>;

/** What a log filter asks for and what it was given of blocks not yet reconciled. */
class LogCriteria {
  /** Height → identity → the log delivered (preconfirmed or canonical), until the height is reconciled. */
  readonly delivered = new Map<number, Map<string, Log>>();
  constructor(
    readonly match: LogFilter,
    /** Lowest and highest block number delivered (-1 / Infinity: unbounded). */
    readonly fromNum: number,
    readonly toNum: number,
    /** The criteria as given (address, topics, fromBlock, toBlock), for eth_getFilterLogs. */
    readonly given: Readonly<Record<string, unknown>>,
  ) {}

  covers(height: number): boolean {
    return height >= this.fromNum && height <= this.toNum;
  }
}

class Filter {
  /** Changes since the last poll: buf[start …]. */
  buf: unknown[] = [];
  start = 0;
  constructor(
    readonly id: string,
    readonly kind: RpcFilterKind,
    readonly client: string,
    /** Pending-transaction filters: full objects instead of hashes. */
    readonly fullTx: boolean,
    readonly logs: LogCriteria | null,
    public polledAtMs: number,
  ) {}

  /** Appends a change; true when the oldest was dropped to stay within `cap`. */
  push(change: unknown, cap: number): boolean {
    this.buf.push(change);
    if (this.buf.length - this.start <= cap) return false;
    this.buf[this.start++] = undefined;
    if (this.start >= cap) {
      this.buf = this.buf.slice(this.start);
      this.start = 0;
    }
    return true;
  }

  /** The changes since the last poll, consumed. */
  take(): unknown[] {
    const out = this.start === 0 ? this.buf : this.buf.slice(this.start);
    this.buf = [];
    this.start = 0;
    return out;
  }
}

/** A log with the lower-case fields the matcher reads and its identity. */
interface SeenLog {
  readonly log: Log;
  readonly like: LogLike;
  readonly key: string;
}

function invalid(message: string): RpcError {
  return new RpcError(RpcCode.INVALID_PARAMS, message);
}

function notFound(): RpcError {
  return new RpcError(RpcCode.SERVER_ERROR, 'filter not found');
}

function arity(params: unknown[], max: number): void {
  if (params.length > max) throw invalid(`too many arguments, want at most ${max}`);
}

function seen(log: Log): SeenLog {
  const address = String(log.address).toLowerCase();
  const topics = Array.isArray(log.topics) ? (log.topics as unknown[]).map((x) => String(x).toLowerCase()) : [];
  const key = String(log.transactionHash).toLowerCase() + ':' + Number(log.logIndex) + ':' + address;
  return { log, like: { address, topics }, key };
}

/** A fromBlock / toBlock member: its number, or `none` for a tag or nothing (tags bound nothing, as in geth). */
function rangeBound(v: unknown, name: string, none: number): number {
  if (v === undefined || v === null) return none;
  try {
    const p = blockParam([v], 0, false);
    return p.kind === 'number' ? p.number : none;
  } catch (e) {
    if (e instanceof RpcError) throw invalid('invalid argument 0: ' + name + ': ' + e.message.replace(/^invalid argument 0: /, ''));
    throw e;
  }
}

/** The polling-filter registry over the state events (see the file comment). */
export class Filters {
  private readonly byId = new Map<string, Filter>();
  private readonly byClient = new Map<string, Set<Filter>>();
  private readonly byKind: Record<RpcFilterKind, Set<Filter>> = { logs: new Set(), blocks: new Set(), pending_transactions: new Set() };
  private readonly stops: (() => void)[];
  private readonly sweeper: NodeJS.Timeout;
  /** Preconfirmed transaction hash → its block number (insertion order ≈ height order; pruned as blocks land). */
  private readonly announced = new Map<string, number>();
  /** Newest canonical block whose hash and logs were handled, the newest announced, and rewinds seen. */
  private canonicalDone: number;
  private canonicalTarget: number;
  private epoch = 0;
  private catchingUp = false;
  private readonly maxPerClient: number;
  private readonly maxFilters: number;
  private readonly maxChanges: number;
  private readonly idleTimeoutMs: number;

  constructor(
    private readonly ctx: MethodContext,
    opts: FilterOptions = {},
    private readonly now: () => number = () => performance.now(),
  ) {
    this.maxPerClient = opts.maxFiltersPerClient ?? DEFAULT_MAX_FILTERS_PER_CLIENT;
    this.maxFilters = opts.maxFilters ?? DEFAULT_MAX_FILTERS;
    this.maxChanges = opts.maxChangesPerFilter ?? DEFAULT_MAX_CHANGES_PER_FILTER;
    this.idleTimeoutMs = opts.idleTimeoutMs ?? FILTER_IDLE_TIMEOUT_MS;
    this.canonicalDone = this.canonicalTarget = ctx.view.canonical;
    this.stops = [
      ctx.events.onApplied((block, fb) => this.onApplied(block, fb)),
      ctx.events.onCanonical((n) => this.onCanonical(n)),
    ];
    if (ctx.execution != null) this.stops.push(ctx.execution.onExecuted((block, index) => this.onExecuted(block, index)));
    // An idle filter lives between one and 1.2 timeouts (geth: up to two).
    this.sweeper = setInterval(() => this.sweep(), Math.max(1000, this.idleTimeoutMs / 5));
    this.sweeper.unref();
  }

  /** Whether `method` is served here. */
  handles(method: string): boolean {
    return FILTER_METHODS.has(method);
  }

  /**
   * Runs a filter method (one of FILTER_METHODS). `sink` is the WebSocket connection (null over HTTP); `origin` the
   * HTTP request, asked for its client IP when a filter is installed. Throws RpcError; may return a Promise
   * (eth_getFilterLogs over a canonical range).
   */
  call(method: string, params: unknown[], sink: SubscriberSink | null, origin: RequestOrigin | null): unknown {
    switch (method) {
      case 'eth_newFilter':
        return this.newFilter(params, sink, origin);
      case 'eth_newBlockFilter':
        arity(params, 0);
        return this.install('blocks', sink, origin, false, null);
      case 'eth_newPendingTransactionFilter': {
        arity(params, 1);
        const full = params[0];
        if (full !== undefined && full !== null && typeof full !== 'boolean') throw invalid('invalid argument 0: expected a boolean (true = full transaction objects)');
        return this.install('pending_transactions', sink, origin, full === true, null);
      }
      case 'eth_getFilterChanges':
        return this.changes(this.idParam(params));
      case 'eth_getFilterLogs':
        return this.logsNow(this.idParam(params));
      case 'eth_uninstallFilter':
        return this.uninstall(this.idParam(params));
      default:
        throw new RpcError(RpcCode.METHOD_NOT_FOUND, `the method ${method} does not exist/is not available`);
    }
  }

  /** Filters installed (all kinds). */
  get size(): number {
    return this.byId.size;
  }

  /** Drops the filters a closed WebSocket connection made. */
  disconnect(sink: SubscriberSink): void {
    const mine = this.byClient.get('ws:' + sink.id);
    if (mine !== undefined) for (const f of [...mine]) this.remove(f);
  }

  /** Removes filters not polled within the idle timeout (also run by a timer). */
  sweep(): void {
    const oldest = this.now() - this.idleTimeoutMs;
    for (const f of this.byId.values()) {
      if (f.polledAtMs >= oldest) continue;
      this.remove(f);
      this.ctx.metrics.rpcFilterDrops.expired.inc();
    }
  }

  /** Stops listening (shutdown); the filters stay readable. */
  close(): void {
    for (const s of this.stops) s();
    clearInterval(this.sweeper);
  }

  private idParam(params: unknown[]): string {
    arity(params, 1);
    const id = params[0];
    if (id === undefined) throw invalid('missing value for required argument 0');
    if (typeof id !== 'string') throw invalid('invalid argument 0: expected a filter id string');
    return id.toLowerCase();
  }

  private newFilter(params: unknown[], sink: SubscriberSink | null, origin: RequestOrigin | null): string {
    arity(params, 1);
    const v = params[0];
    if (v === undefined) throw invalid('missing value for required argument 0');
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw invalid('invalid argument 0: expected a filter object {address, topics, fromBlock, toBlock}');
    const o = v as Record<string, unknown>;
    if (o.blockHash !== undefined && o.blockHash !== null) {
      throw invalid('invalid argument 0: blockHash is not supported by eth_newFilter (a filter follows new blocks); use eth_getLogs with blockHash');
    }
    const match = parseLogFilter(o, GETLOGS_FILTER);
    const fromNum = rangeBound(o.fromBlock, 'fromBlock', -1);
    const toNum = rangeBound(o.toBlock, 'toBlock', Infinity);
    if (fromNum > toNum) throw invalid(`invalid argument 0: fromBlock ${fromNum} is after toBlock ${toNum}`);
    const given: Record<string, unknown> = {};
    for (const k of ['address', 'topics', 'fromBlock', 'toBlock']) if (o[k] !== undefined && o[k] !== null) given[k] = o[k];
    return this.install('logs', sink, origin, false, new LogCriteria(match, fromNum, toNum, given));
  }

  private install(kind: RpcFilterKind, sink: SubscriberSink | null, origin: RequestOrigin | null, fullTx: boolean, logs: LogCriteria | null): string {
    const drops = this.ctx.metrics.rpcFilterDrops;
    if (this.byId.size >= this.maxFilters) {
      drops.limit.inc();
      throw new RpcError(RpcCode.LIMIT_EXCEEDED, `too many filters installed (limit ${this.maxFilters} in all); retry later`);
    }
    const client = sink !== null ? 'ws:' + sink.id : 'ip:' + (origin?.clientIp() ?? '');
    let mine = this.byClient.get(client);
    if (mine !== undefined && mine.size >= this.maxPerClient) {
      drops.limit.inc();
      throw new RpcError(RpcCode.LIMIT_EXCEEDED, `too many filters for this client (limit ${this.maxPerClient}); remove one with eth_uninstallFilter (an unpolled one expires after ${Math.round(this.idleTimeoutMs / 1000)} s)`);
    }
    const id = '0x' + randomBytes(16).toString('hex');
    const f = new Filter(id, kind, client, fullTx, logs, this.now());
    if (mine === undefined) this.byClient.set(client, (mine = new Set()));
    mine.add(f);
    this.byId.set(id, f);
    this.byKind[kind].add(f);
    this.ctx.metrics.rpcFilters[kind].inc();
    return id;
  }

  private remove(f: Filter): void {
    if (!this.byId.delete(f.id)) return;
    this.byKind[f.kind].delete(f);
    const mine = this.byClient.get(f.client);
    mine?.delete(f);
    if (mine !== undefined && mine.size === 0) this.byClient.delete(f.client);
    this.ctx.metrics.rpcFilters[f.kind].dec();
  }

  private uninstall(id: string): boolean {
    const f = this.byId.get(id);
    if (f === undefined) return false;
    this.remove(f);
    return true;
  }

  private changes(id: string): unknown[] {
    const f = this.byId.get(id);
    if (f === undefined) throw notFound();
    f.polledAtMs = this.now();
    return f.take();
  }

  /**
   * eth_getFilterLogs: every matching log of the filter's range now, through eth_getLogs with its criteria (a range
   * ending at latest or open ends at pending: the held blocks from the pending state, the canonical part from the
   * node). Does not consume the filter's changes (as geth).
   */
  private logsNow(id: string): unknown {
    const f = this.byId.get(id);
    if (f === undefined || f.logs === null) throw notFound();
    const q: Record<string, unknown> = { ...f.logs.given };
    if (q.toBlock === undefined || q.toBlock === 'latest') q.toBlock = 'pending';
    const node = (fwd: Forward): Promise<unknown> => this.ctx.node.call('eth_getLogs', fwd.params ?? [q]);
    const r = ethGetLogs(this.ctx, [q], null);
    if (r instanceof Forward) return node(r);
    if (r instanceof Promise) return r.then((v: unknown) => (v instanceof Forward ? node(v) : v));
    return r;
  }

  // ---- state events ----

  private onApplied(block: BlockView, fb: Flashblock): void {
    const logs = this.byKind.logs.size > 0;
    const txs = this.byKind.pending_transactions.size > 0;
    if ((!logs && !txs) || block.number <= this.ctx.view.canonical) return;
    const index = fb.index;
    const from = index === 0 ? 0 : (block.txCountAt[index - 1] ?? 0);
    const to = block.txCountAt[index] ?? block.txCount;
    const shapes = this.ctx.shapes;
    for (let i = from; i < to; i++) {
      if (txs) this.announce(block, i, index);
      if (!logs) continue;
      const rec = block.txAt(i)!;
      if ((shapes.rawLogs(rec)?.length ?? 0) > 0) this.deliverLogs(block.number, shapes.logObjects(rec, index)!);
    }
  }

  /** Logs of transactions the stream gave no receipt for, once the engine has executed their flashblock. */
  private onExecuted(block: BlockView, index: number): void {
    if (this.byKind.logs.size === 0 || block.number <= this.ctx.view.canonical) return;
    const from = index === 0 ? 0 : (block.txCountAt[index - 1] ?? 0);
    const to = block.txCountAt[index] ?? block.txCount;
    const shapes = this.ctx.shapes;
    for (let i = from; i < to; i++) {
      const rec = block.txAt(i)!;
      if (streamHasLogs(rec) || (shapes.rawLogs(rec)?.length ?? 0) === 0) continue;
      this.deliverLogs(block.number, shapes.logObjects(rec, index)!);
    }
  }

  /** A preconfirmed transaction to every pending-transaction filter, unless announced already. */
  private announce(block: BlockView, i: number, index: number): void {
    const hash = block.txHash(i);
    if (this.announced.has(hash)) return;
    this.announced.set(hash, block.number);
    if (this.announced.size > MAX_ANNOUNCED_TXS) this.announced.delete(this.announced.keys().next().value!);
    let full: Log | null = null;
    for (const f of this.byKind.pending_transactions) {
      const change = f.fullTx ? (full ??= this.ctx.shapes.txObject(block.txAt(i)!, index)) : hash;
      this.push(f, change);
    }
  }

  /** Preconfirmed logs of block `height` to every log filter they match, each log once per filter. */
  private deliverLogs(height: number, logs: Log[]): void {
    for (const log of logs) {
      let s: SeenLog | null = null;
      for (const f of this.byKind.logs) {
        const c = f.logs!;
        if (!c.covers(height)) continue;
        s ??= seen(log);
        if (!logMatches(c.match, s.like)) continue;
        let d = c.delivered.get(height);
        if (d === undefined) {
          c.delivered.set(height, (d = new Map()));
          if (c.delivered.size > MAX_UNSETTLED_HEIGHTS) c.delivered.delete(c.delivered.keys().next().value!);
        }
        if (d.has(s.key)) continue;
        d.set(s.key, log);
        this.push(f, log);
      }
    }
  }

  private push(f: Filter, change: unknown): void {
    if (f.push(change, this.maxChanges)) this.ctx.metrics.rpcFilterDrops.buffer_full.inc();
  }

  // ---- canonical blocks ----

  private onCanonical(n: number): void {
    for (const [hash, height] of this.announced) {
      if (height > n) break;
      this.announced.delete(hash);
    }
    if (n < this.canonicalTarget) {
      // The node's head went back: what was handled above n belongs to a chain it no longer has.
      this.epoch++;
      this.canonicalTarget = n;
      this.canonicalDone = Math.min(this.canonicalDone, n);
      return;
    }
    this.canonicalTarget = n;
    if (this.byKind.logs.size === 0 && this.byKind.blocks.size === 0) {
      if (!this.catchingUp) this.canonicalDone = n;
      return;
    }
    if (!this.catchingUp) void this.catchUp();
  }

  /** Handles canonical blocks up to the newest announced, in order, a bounded step at a time. */
  private async catchUp(): Promise<void> {
    this.catchingUp = true;
    try {
      while (this.canonicalDone < this.canonicalTarget) {
        const to = this.canonicalTarget;
        const from = this.canonicalDone < 0 ? to : Math.max(this.canonicalDone + 1, to - MAX_CATCHUP_BLOCKS + 1);
        const epoch = this.epoch;
        await this.settle(from, to);
        if (epoch === this.epoch) this.canonicalDone = to;
      }
    } catch (e) {
      this.ctx.log.error('filters: canonical catch-up failed', { error: (e as Error).stack ?? String(e) });
      this.canonicalDone = this.canonicalTarget;
    } finally {
      this.catchingUp = false;
    }
  }

  /** Canonical blocks from … to: their hashes to block filters, their logs reconciled with every log filter. */
  private async settle(from: number, to: number): Promise<void> {
    const node = this.ctx.node;
    const hex = (n: number): string => '0x' + n.toString(16);
    const heights: number[] = [];
    for (let h = from; h <= to; h++) heights.push(h);
    const wantBlocks = this.byKind.blocks.size > 0;
    const wantLogs = this.byKind.logs.size > 0;
    const blocks = wantBlocks
      ? Promise.all(heights.map((h) => node.call<{ hash?: string } | null>('eth_getBlockByNumber', [hex(h), false]).then((b) => b?.hash ?? null, (e: unknown) => this.nodeFailed(h, e))))
      : null;
    const logs = wantLogs ? node.call<Log[]>('eth_getLogs', [this.canonicalQuery(hex(from), hex(to))]).catch((e: unknown) => this.nodeFailed(from, e)) : null;
    const hashes = blocks === null ? null : await blocks;
    const canon = logs === null ? null : await logs;
    if (hashes !== null) {
      for (let i = 0; i < hashes.length; i++) {
        const h = hashes[i];
        if (typeof h !== 'string') {
          this.ctx.metrics.rpcFilterDrops.node_error.inc();
          continue;
        }
        for (const f of this.byKind.blocks) this.push(f, h);
      }
    }
    if (!wantLogs) return;
    if (!Array.isArray(canon)) this.ctx.metrics.rpcFilterDrops.node_error.inc(heights.length);
    const byHeight = new Map<number, SeenLog[]>();
    if (Array.isArray(canon)) {
      for (const l of canon as Log[]) {
        const h = Number(l.blockNumber);
        let list = byHeight.get(h);
        if (list === undefined) byHeight.set(h, (list = []));
        list.push(seen(l));
      }
    }
    const removedCopies = new Map<Log, Log>();
    for (const f of this.byKind.logs) {
      for (const h of heights) {
        const c = f.logs!;
        const delivered = c.delivered.get(h);
        c.delivered.delete(h);
        if (!Array.isArray(canon) || !c.covers(h)) continue;
        for (const s of byHeight.get(h) ?? []) {
          if (!logMatches(c.match, s.like)) continue;
          if (delivered?.delete(s.key) === true) continue;
          this.push(f, s.log);
        }
        if (delivered === undefined) continue;
        for (const log of delivered.values()) {
          let gone = removedCopies.get(log);
          if (gone === undefined) removedCopies.set(log, (gone = { ...log, removed: true }));
          this.push(f, gone);
        }
      }
      // Heights at or below the range that were never reconciled (a step skipped them) are forgotten.
      for (const h of f.logs!.delivered.keys()) if (h <= to) f.logs!.delivered.delete(h);
    }
  }

  /**
   * The node query for canonical logs: every log of the range, narrowed to the union of the filters' addresses when
   * every log filter names some (a node serves one address's logs far cheaper than a whole block's).
   */
  private canonicalQuery(fromBlock: string, toBlock: string): Record<string, unknown> {
    const addresses = new Set<string>();
    for (const f of this.byKind.logs) {
      const a = f.logs!.match.addresses;
      if (a.length === 0) return { fromBlock, toBlock };
      for (const x of a) addresses.add(x);
    }
    return addresses.size > 1000 ? { fromBlock, toBlock } : { fromBlock, toBlock, address: [...addresses] };
  }

  private nodeFailed(n: number, e: unknown): null {
    this.ctx.log.limited('warn', 'filters:node', 5000, 'filters: a canonical block\'s hash or logs could not be read from the node; those changes are missing', { block: n, error: (e as Error).message });
    return null;
  }
}
