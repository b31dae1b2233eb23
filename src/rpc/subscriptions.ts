// eth_subscribe / eth_unsubscribe for the WebSocket JSON-RPC endpoint: pending kinds fed by state events, canonical
// kinds fetched from the node. Each notification payload is serialised once and shared; never mutates state.
// Notifications are built and sent as fan-out tasks (state events' queue): after the loop has answered waiting RPC
// requests, in slices of about a millisecond, in order.
import { randomBytes } from 'node:crypto';
import { RpcCode, RpcError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Metrics, WsSubscriptionKind } from '../metrics/metrics.js';
import type { NodeClient } from '../node/client.js';
import { slicedStep, type StateEvents } from '../state/events.js';
import type { BlockView, TxView } from '../state/view.js';
import { logMatches, parseLogFilter, SUBSCRIPTION_FILTER, type LogFilter } from './filter.js';
import type { PendingExecution } from './execution.js';
import type { Shapes } from './shapes/json.js';
import { flashblockPayloadJson, headOfBlock, notification, notificationPrefix, transactionWithReceipt } from './shapes/subscription.js';
import { streamHasLogs, streamHasReceipt } from './shapes/receipt.js';

/** One WebSocket JSON-RPC connection as the subscription hub sees it. */
export interface SubscriberSink {
  /** Unique per connection. */
  readonly id: number;
  /** Sends one text message; false when the socket is closed or over its backpressure cap (message dropped). */
  send(text: string): boolean;
  /**
   * Sends the text message `prefix + payload + '}}'` without building it (a socket writes the three parts as
   * WebSocket fragments of one message): the payload is encoded once for every subscriber. Optional; without it the
   * message is built and sent with send().
   */
  sendShared?(prefix: string, payload: Buffer): boolean;
}

/** Shared payloads at least this large are sent as fragments around one encoded copy (see sendShared). */
const SHARED_PAYLOAD_BYTES = 1024;

/** The subscription kinds served here. */
export const SUBSCRIPTION_KINDS = ['newFlashblocks', 'newFlashblockTransactions', 'newPendingTransactions', 'pendingLogs', 'newHeads', 'logs'] as const;
export type SubscriptionKind = (typeof SUBSCRIPTION_KINDS)[number];

/** Subscriptions one connection may hold. */
export const DEFAULT_MAX_PER_CONNECTION = 100;

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
    this.prefix = notificationPrefix(id);
  }
}

/** What the hub needs: state events, the node (canonical kinds), the shapes, metrics and a logger. */
export interface SubscriptionDeps {
  events: StateEvents;
  node: NodeClient;
  shapes: Shapes;
  metrics: Metrics;
  log: Logger;
  /**
   * Executed pending state: pendingLogs of transactions the stream gave no receipt for follow their execution, and
   * newFlashblockTransactions with full objects wait for it (bounded by readyFor) to include their receipts.
   */
  execution?: PendingExecution | null;
}

function invalid(message: string): RpcError {
  return new RpcError(RpcCode.INVALID_PARAMS, message);
}

/**
 * The subscription hub. Pending kinds are notified synchronously from `events.onApplied`; `newHeads` and `logs` are
 * fetched once per canonical block from the node and fanned out. Per notification the work is one serialisation
 * of the payload plus one string concatenation per subscriber.
 */
export class Subscriptions {
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
  /** Full newFlashblockTransactions notifications waiting for execution, chained so they leave in stream order. */
  private fullTxQueue: Promise<void> = Promise.resolve();
  private fullTxWaiting = 0;
  /** Notifications collected by the fan-out task being built (null outside one): a text, or a prefix + shared payload. */
  private outbox: [SubscriberSink, string, Buffer | null][] | null = null;

  constructor(
    private readonly ctx: SubscriptionDeps,
    private readonly maxPerConnection: number = DEFAULT_MAX_PER_CONNECTION,
  ) {
    this.stops = [
      // No task (and no loop turn of the fan-out queue) per flashblock while nobody holds a pending-kind subscription.
      ctx.events.onApplied((block, fb) => {
        if (this.pendingSubscribers()) this.deliver(() => this.onApplied(block, fb.index));
      }),
      ctx.events.onCanonical((n) => this.onCanonical(n)),
    ];
    const ex = ctx.execution;
    if (ex != null) {
      this.stops.push(ex.onExecuted((block, index) => {
        if (this.byKind.pendingLogs.size > 0) this.deliver(() => this.onExecuted(block, index));
      }));
    }
  }

  /** Whether any subscription is notified per applied flashblock. */
  private pendingSubscribers(): boolean {
    const k = this.byKind;
    return k.newFlashblocks.size > 0 || k.newFlashblockTransactions.size > 0 || k.newPendingTransactions.size > 0 || k.pendingLogs.size > 0;
  }

  /**
   * Queues a fan-out task: its first slice runs `collect` (which builds the payloads; every send in it is collected),
   * the following slices send what it collected.
   */
  private deliver(collect: () => void): void {
    let send: (() => boolean) | null = null;
    this.ctx.events.fanout.push(() => {
      if (send === null) {
        const box: [SubscriberSink, string, Buffer | null][] = (this.outbox = []);
        try {
          collect();
        } finally {
          this.outbox = null;
        }
        if (box.length === 0) return true;
        send = slicedStep(box.length, (i) => {
          const [sink, text, shared] = box[i]!;
          if (shared === null) sink.send(text);
          else Subscriptions.sendShared(sink, text, shared);
        });
        return false;
      }
      return send();
    });
  }

  /** Sends now, or into the fan-out task being built. */
  private emit(sink: SubscriberSink, text: string): void {
    if (this.outbox !== null) this.outbox.push([sink, text, null]);
    else sink.send(text);
  }

  /** A notification `prefix` + `shared` + '}}' (fragments when the sink can, else built). */
  private static sendShared(sink: SubscriberSink, prefix: string, shared: Buffer): void {
    if (sink.sendShared !== undefined) sink.sendShared(prefix, shared);
    else sink.send(prefix + shared.toString('utf8') + '}}');
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
      filter = parseLogFilter(params[1], SUBSCRIPTION_FILTER);
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

  /**
   * One payload to every subscription in `subs`. A large one is encoded once and sent around each subscription's
   * prefix, so 100 subscribers of a 140 KB pending block cost one copy, not 100 strings of 140 KB to build, encode
   * and collect.
   */
  private fanOut(subs: Iterable<Sub>, shared: string): void {
    if (shared.length < SHARED_PAYLOAD_BYTES) {
      for (const s of subs) this.emit(s.sink, notification(s.prefix, shared));
      return;
    }
    const payload = Buffer.from(shared, 'utf8');
    for (const s of subs) {
      if (this.outbox !== null) this.outbox.push([s.sink, s.prefix, payload]);
      else Subscriptions.sendShared(s.sink, s.prefix, payload);
    }
  }

  private onApplied(block: BlockView, index: number): void {
    const k = this.byKind;
    if (k.newFlashblocks.size > 0) this.fanOut(k.newFlashblocks, flashblockPayloadJson(this.ctx.shapes.blockJson(block, false, index).json, index));
    if (k.newFlashblockTransactions.size === 0 && k.newPendingTransactions.size === 0 && k.pendingLogs.size === 0) return;
    const from = index === 0 ? 0 : (block.txCountAt[index - 1] ?? 0);
    const to = block.txCountAt[index] ?? block.txCount;
    if (k.newFlashblockTransactions.size > 0) this.notifyFlashblockTxs(block, index, from, to);
    if (k.newPendingTransactions.size === 0 && k.pendingLogs.size === 0) return;
    for (let i = from; i < to; i++) {
      const rec = block.txAt(i)!;
      if (k.newPendingTransactions.size > 0) this.notifyPendingTx(rec, index);
      if (k.pendingLogs.size > 0 && (this.ctx.shapes.rawLogs(rec)?.length ?? 0) > 0) this.notifyLogs(k.pendingLogs, this.ctx.shapes.logObjects(rec, index)!);
    }
  }

  /**
   * pendingLogs of the flashblock's transactions the stream carried no receipt for (post-Azul), once executed: the
   * shapes' receipt source answers from execution then.
   */
  private onExecuted(block: BlockView, index: number): void {
    if (this.byKind.pendingLogs.size === 0) return;
    const from = index === 0 ? 0 : (block.txCountAt[index - 1] ?? 0);
    const to = block.txCountAt[index] ?? block.txCount;
    for (let i = from; i < to; i++) {
      const rec = block.txAt(i)!;
      if (streamHasLogs(rec) || (this.ctx.shapes.rawLogs(rec)?.length ?? 0) === 0) continue;
      this.notifyLogs(this.byKind.pendingLogs, this.ctx.shapes.logObjects(rec, index)!);
    }
  }

  /**
   * newFlashblockTransactions for transactions [from, to) of flashblock `index`: hashes at once; full objects with
   * their receipts — at once when the stream carried every receipt (or execution is off), else once the engine has
   * executed the flashblock or readyFor gave up (receipt null then), after any earlier flashblock still waiting.
   */
  private notifyFlashblockTxs(block: BlockView, index: number, from: number, to: number): void {
    let full = false;
    for (const s of this.byKind.newFlashblockTransactions) {
      if (s.fullTx) {
        full = true;
        continue;
      }
      for (let i = from; i < to; i++) this.emit(s.sink, notification(s.prefix, '"' + block.txHash(i) + '"'));
    }
    if (!full) return;
    const ex = this.ctx.execution;
    let wait = false;
    if (ex != null) for (let i = from; i < to && !wait; i++) wait = !streamHasReceipt(block.txAt(i)!);
    if (!wait && this.fullTxWaiting === 0) {
      this.sendFullTxs(block, index, from, to);
      return;
    }
    // Asked now, so each flashblock's bounded wait starts at its apply; only the sending is chained.
    const ready = wait ? ex!.readyFor(block.number, index) : true;
    this.fullTxWaiting++;
    this.fullTxQueue = this.fullTxQueue
      .then(() => ready)
      .then(() => this.deliver(() => this.sendFullTxs(block, index, from, to)))
      .catch((e: unknown) => this.ctx.log.error('newFlashblockTransactions notification failed', { block: block.number, index, error: (e as Error).message }))
      .finally(() => this.fullTxWaiting--);
  }

  /** Full transaction objects with their receipts (as of flashblock `index`), each serialised once for all. */
  private sendFullTxs(block: BlockView, index: number, from: number, to: number): void {
    for (let i = from; i < to; i++) {
      const rec = block.txAt(i)!;
      let json: string | null = null;
      for (const s of this.byKind.newFlashblockTransactions) {
        if (!s.fullTx) continue;
        json ??= JSON.stringify(transactionWithReceipt(this.ctx.shapes.txObject(rec, index), this.ctx.shapes.receiptObject(rec, index)));
        this.emit(s.sink, notification(s.prefix, json));
      }
    }
  }

  /**
   * newPendingTransactions (geth's kind; ethers' provider.on('pending') asks for it): the hash of each transaction
   * as it is preconfirmed, or with `true` the transaction object. Each shape is serialised at most once.
   */
  private notifyPendingTx(rec: TxView, index: number): void {
    let hashJson: string | null = null;
    let fullJson: string | null = null;
    for (const s of this.byKind.newPendingTransactions) {
      if (s.fullTx) this.emit(s.sink, notification(s.prefix, (fullJson ??= JSON.stringify(this.ctx.shapes.txObject(rec, index)))));
      else this.emit(s.sink, notification(s.prefix, (hashJson ??= '"' + rec.tx.hash + '"')));
    }
  }

  /** One notification per log (geth semantics); each log is serialised at most once. */
  private notifyLogs(subs: Set<Sub>, logs: Record<string, unknown>[]): void {
    for (const log of logs) {
      const seen = { address: String(log.address).toLowerCase(), topics: (log.topics as string[]).map((t) => t.toLowerCase()) };
      let json: string | null = null;
      for (const s of subs) {
        if (!logMatches(s.filter!, seen)) continue;
        if (json === null) json = JSON.stringify(log);
        this.emit(s.sink, notification(s.prefix, json));
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
          if (b !== null) this.deliver(() => this.fanOut(this.byKind.newHeads, JSON.stringify(headOfBlock(b))));
        },
        (e: unknown) => this.nodeFailed('newHeads', n, e),
      );
    }
    if (k.logs.size > 0) {
      this.ctx.node.call<Record<string, unknown>[]>('eth_getLogs', [{ fromBlock: tag, toBlock: tag }]).then(
        (logs) => this.deliver(() => this.notifyLogs(this.byKind.logs, logs)),
        (e: unknown) => this.nodeFailed('logs', n, e),
      );
    }
  }

  private nodeFailed(kind: string, n: number, e: unknown): void {
    this.ctx.log.limited('warn', 'subs:' + kind, 5000, `${kind} notification skipped: the node call failed`, { block: n, error: (e as Error).message });
  }
}
