// eth_subscribe / eth_unsubscribe for the WebSocket JSON-RPC endpoint: pending kinds fed by state events, canonical
// kinds fetched from the node. Each notification payload is serialised once and shared; never mutates state.
import { randomBytes } from 'node:crypto';
import type { ServiceContext, SubscriberSink, SubscriptionHub } from '../context.js';
import { RpcCode, RpcError } from '../errors.js';
import type { WsSubscriptionKind } from '../metrics/metrics.js';
import type { PendingBlock } from '../state/block.js';
import { blockToRpc, logsToRpc, receiptToRpc, txToRpc } from '../state/view.js';

/** The subscription kinds served here. */
export const SUBSCRIPTION_KINDS = ['newFlashblocks', 'newFlashblockTransactions', 'newPendingTransactions', 'pendingLogs', 'newHeads', 'logs'] as const;
export type SubscriptionKind = (typeof SUBSCRIPTION_KINDS)[number];

/** Subscriptions one connection may hold. */
export const DEFAULT_MAX_PER_CONNECTION = 100;

/** A geth-style log filter, normalised to lower case. Empty address list = any address. */
export interface LogFilter {
  addresses: string[];
  /** Positional; null = wildcard; an array = any of. */
  topics: (string[] | null)[];
}

class Sub {
  /** `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"<id>","result":` — only the id varies. */
  readonly prefix: string;
  constructor(
    readonly id: string,
    readonly sink: SubscriberSink,
    readonly kind: SubscriptionKind,
    readonly fullTx: boolean,
    readonly filter: LogFilter | null,
  ) {
    this.prefix = '{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"' + id + '","result":';
  }
}

type Hub = Pick<ServiceContext, 'events' | 'node' | 'metrics' | 'log'>;

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const TOPIC = /^0x[0-9a-fA-F]{64}$/;

function invalid(message: string): RpcError {
  return new RpcError(RpcCode.INVALID_PARAMS, message);
}

/** Validates and normalises a `{address, topics}` filter (params[1] of pendingLogs/logs). */
export function parseLogFilter(v: unknown): LogFilter {
  if (v === undefined || v === null) return { addresses: [], topics: [] };
  if (typeof v !== 'object' || Array.isArray(v)) throw invalid('params[1]: expected a filter object {address, topics}');
  const o = v as { address?: unknown; topics?: unknown };
  const addresses: string[] = [];
  if (o.address !== undefined && o.address !== null) {
    const list = Array.isArray(o.address) ? (o.address as unknown[]) : [o.address];
    for (const a of list) {
      if (typeof a !== 'string' || !ADDRESS.test(a)) throw invalid('params[1].address: expected a 20-byte hex address or an array of them');
      addresses.push(a.toLowerCase());
    }
  }
  const topics: (string[] | null)[] = [];
  if (o.topics !== undefined && o.topics !== null) {
    if (!Array.isArray(o.topics) || o.topics.length > 4) throw invalid('params[1].topics: expected an array of at most 4 positions');
    for (let i = 0; i < o.topics.length; i++) {
      const p: unknown = o.topics[i];
      if (p === null) {
        topics.push(null);
        continue;
      }
      const alts = Array.isArray(p) ? (p as unknown[]) : [p];
      const out: string[] = [];
      let wildcard = false;
      for (const x of alts) {
        if (x === null) wildcard = true;
        else if (typeof x === 'string' && TOPIC.test(x)) out.push(x.toLowerCase());
        else throw invalid(`params[1].topics[${i}]: expected null, a 32-byte hex topic, or an array of them`);
      }
      topics.push(wildcard || (Array.isArray(p) && out.length === 0) ? null : out);
    }
  }
  return { addresses, topics };
}

/** Whether a log (lower-case address and topics) matches a filter, with geth semantics. */
export function logMatches(f: LogFilter, address: string, topics: readonly string[]): boolean {
  if (f.addresses.length > 0 && !f.addresses.includes(address)) return false;
  if (f.topics.length > topics.length) return false;
  for (let i = 0; i < f.topics.length; i++) {
    const want = f.topics[i];
    if (want !== null && want !== undefined && !want.includes(topics[i]!)) return false;
  }
  return true;
}

/**
 * The subscription hub. Pending kinds are notified synchronously from `events.onApplied`; `newHeads` and `logs` are
 * fetched once per canonical block from the node and fanned out. Per notification the work is one serialisation
 * of the payload plus one string concatenation per subscriber.
 */
export class Subscriptions implements SubscriptionHub {
  private readonly byId = new Map<string, Sub>();
  private readonly bySink = new Map<number, Set<Sub>>();
  private readonly byKind: Record<SubscriptionKind, Set<Sub>> = {
    newFlashblocks: new Set(),
    newFlashblockTransactions: new Set(),
    newPendingTransactions: new Set(),
    pendingLogs: new Set(),
    newHeads: new Set(),
    logs: new Set(),
  };
  private readonly stops: (() => void)[];

  constructor(
    private readonly ctx: Hub,
    private readonly maxPerConnection: number = DEFAULT_MAX_PER_CONNECTION,
  ) {
    this.stops = [ctx.events.onApplied((block, fb) => this.onApplied(block, fb.index)), ctx.events.onCanonical((n) => this.onCanonical(n))];
  }

  /** Validates params (kind, then its options) and registers a subscription; returns its id. */
  subscribe(sink: SubscriberSink, params: unknown[]): string {
    const kind = params[0];
    if (typeof kind !== 'string' || !(SUBSCRIPTION_KINDS as readonly string[]).includes(kind)) {
      throw invalid(`params[0]: unsupported subscription kind ${JSON.stringify(kind)}; expected one of ${SUBSCRIPTION_KINDS.join(', ')}`);
    }
    const k = kind as SubscriptionKind;
    let fullTx = false;
    let filter: LogFilter | null = null;
    if (k === 'newFlashblockTransactions' || k === 'newPendingTransactions') {
      const p = params[1];
      if (p !== undefined && p !== null && typeof p !== 'boolean') {
        throw invalid(`params[1]: expected a boolean (true = full transaction objects${k === 'newFlashblockTransactions' ? ' with receipts' : ''})`);
      }
      fullTx = p === true;
    } else if (k === 'pendingLogs' || k === 'logs') {
      filter = parseLogFilter(params[1]);
    }
    let mine = this.bySink.get(sink.id);
    if (mine !== undefined && mine.size >= this.maxPerConnection) {
      throw new RpcError(RpcCode.LIMIT_EXCEEDED, `too many subscriptions on this connection (limit ${this.maxPerConnection}); unsubscribe first`);
    }
    const id = '0x' + randomBytes(16).toString('hex');
    const sub = new Sub(id, sink, k, fullTx, filter);
    if (mine === undefined) this.bySink.set(sink.id, (mine = new Set()));
    mine.add(sub);
    this.byId.set(id, sub);
    this.byKind[k].add(sub);
    this.ctx.metrics.wsSubscriptions[k as WsSubscriptionKind].inc();
    return id;
  }

  /** Removes a subscription of this connection; false when it is unknown or belongs to another connection. */
  unsubscribe(sink: SubscriberSink, id: string): boolean {
    const sub = this.byId.get(typeof id === 'string' ? id.toLowerCase() : '');
    if (sub === undefined || sub.sink.id !== sink.id) return false;
    this.remove(sub);
    return true;
  }

  /** Drops every subscription of a closed connection. */
  disconnect(sink: SubscriberSink): void {
    const mine = this.bySink.get(sink.id);
    if (mine === undefined) return;
    for (const sub of [...mine]) this.remove(sub);
  }

  /** Subscriptions currently held (all connections). */
  get size(): number {
    return this.byId.size;
  }

  /** Stops listening to state events (shutdown). */
  close(): void {
    for (const s of this.stops) s();
  }

  private remove(sub: Sub): void {
    this.byId.delete(sub.id);
    this.byKind[sub.kind].delete(sub);
    const mine = this.bySink.get(sub.sink.id);
    mine?.delete(sub);
    if (mine !== undefined && mine.size === 0) this.bySink.delete(sub.sink.id);
    this.ctx.metrics.wsSubscriptions[sub.kind as WsSubscriptionKind].dec();
  }

  private static fanOut(subs: Iterable<Sub>, shared: string): void {
    for (const s of subs) s.sink.send(s.prefix + shared + '}}');
  }

  private onApplied(block: PendingBlock, index: number): void {
    const k = this.byKind;
    if (k.newFlashblocks.size > 0) Subscriptions.fanOut(k.newFlashblocks, JSON.stringify(blockToRpc(block, false, index)));
    if (k.newFlashblockTransactions.size === 0 && k.newPendingTransactions.size === 0 && k.pendingLogs.size === 0) return;
    const from = index === 0 ? 0 : (block.txCountAt[index - 1] ?? 0);
    const to = block.txCountAt[index] ?? block.txs.length;
    for (let i = from; i < to; i++) {
      const rec = block.txs[i]!;
      if (k.newFlashblockTransactions.size > 0) this.notifyTx(rec.tx.hash, rec);
      if (k.newPendingTransactions.size > 0) this.notifyPendingTx(rec);
      if (k.pendingLogs.size > 0 && rec.receipt !== null && rec.receipt.logs.length > 0) this.notifyLogs(k.pendingLogs, logsToRpc(rec));
    }
  }

  private notifyTx(hash: string, rec: PendingBlock['txs'][number]): void {
    let hashJson: string | null = null;
    let fullJson: string | null = null;
    for (const s of this.byKind.newFlashblockTransactions) {
      if (s.fullTx) {
        if (fullJson === null) {
          const o = txToRpc(rec);
          o.receipt = receiptToRpc(rec);
          fullJson = JSON.stringify(o);
        }
        s.sink.send(s.prefix + fullJson + '}}');
      } else {
        if (hashJson === null) hashJson = '"' + hash + '"';
        s.sink.send(s.prefix + hashJson + '}}');
      }
    }
  }

  /**
   * newPendingTransactions (geth's kind; ethers' provider.on('pending') asks for it): the hash of each transaction
   * as it is preconfirmed, or with `true` the transaction object. Each shape is serialised at most once.
   */
  private notifyPendingTx(rec: PendingBlock['txs'][number]): void {
    let hashJson: string | null = null;
    let fullJson: string | null = null;
    for (const s of this.byKind.newPendingTransactions) {
      if (s.fullTx) s.sink.send(s.prefix + (fullJson ??= JSON.stringify(txToRpc(rec))) + '}}');
      else s.sink.send(s.prefix + (hashJson ??= '"' + rec.tx.hash + '"') + '}}');
    }
  }

  /** One notification per log (geth semantics); each log is serialised at most once. */
  private notifyLogs(subs: Set<Sub>, logs: Record<string, unknown>[]): void {
    for (const log of logs) {
      const address = String(log.address).toLowerCase();
      const topics = (log.topics as string[]).map((t) => t.toLowerCase());
      let json: string | null = null;
      for (const s of subs) {
        if (!logMatches(s.filter!, address, topics)) continue;
        if (json === null) json = JSON.stringify(log);
        s.sink.send(s.prefix + json + '}}');
      }
    }
  }

  private onCanonical(n: number): void {
    const k = this.byKind;
    if (k.newHeads.size === 0 && k.logs.size === 0) return;
    const tag = '0x' + n.toString(16);
    if (k.newHeads.size > 0) {
      this.ctx.node.call<Record<string, unknown> | null>('eth_getBlockByNumber', [tag, false]).then(
        (b) => {
          if (b === null) return;
          delete b.transactions;
          delete b.uncles;
          Subscriptions.fanOut(this.byKind.newHeads, JSON.stringify(b));
        },
        (e: unknown) => this.nodeFailed('newHeads', n, e),
      );
    }
    if (k.logs.size > 0) {
      this.ctx.node.call<Record<string, unknown>[]>('eth_getLogs', [{ fromBlock: tag, toBlock: tag }]).then(
        (logs) => this.notifyLogs(this.byKind.logs, logs),
        (e: unknown) => this.nodeFailed('logs', n, e),
      );
    }
  }

  private nodeFailed(kind: string, n: number, e: unknown): void {
    this.ctx.log.limited('warn', 'subs:' + kind, 5000, `${kind} notification skipped: the node call failed`, { block: n, error: (e as Error).message });
  }
}
