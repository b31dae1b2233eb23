// JSON-RPC 2.0 envelopes: parse, validate, batch, run handlers, forward misses to the node as one batch, reassemble
// in request order. The only place error envelopes are built. Transport-agnostic: no sockets here.
import { performance } from 'node:perf_hooks';
import { RpcCode, RpcError } from '../errors.js';
import { NodeError, retryableMethod } from '../node/client.js';
import type { RpcSource } from '../metrics/metrics.js';
import { ForwardPolicy } from './allow.js';
import type { Filters, RequestOrigin } from './filters.js';
import { ETH_METHODS } from './methods/eth.js';
import { isGuardedForward } from './methods/trace.js';
import { FORWARD_AS_IS, Forward, FromState, RawJson, type Handler, type MethodContext, type MethodTable } from './methods/types.js';
import type { SubscriberSink } from './subscriptions.js';

/** Deepest `[`/`{` nesting accepted; JSON.parse recurses, so deeper bodies are refused before parsing. */
export const MAX_JSON_DEPTH = 64;

/** What a dispatch produces: the reply body, or null when nothing is sent back (notifications only). */
export type Reply = string | Buffer | null;

const PRE = '{"jsonrpc":"2.0","id":';
const MID_RESULT = ',"result":';
const MID_ERROR = ',"error":';

function errorBody(code: number, message: string, data?: unknown): string {
  return data === undefined ? JSON.stringify({ code, message }) : JSON.stringify({ code, message, data });
}

/** A complete error envelope with an already-serialised id. */
export function errorEnvelope(idJson: string, code: number, message: string, data?: unknown): string {
  return PRE + idJson + MID_ERROR + errorBody(code, message, data) + '}';
}

/** How many times `c` occurs in `s`, counting no further than `limit + 1`. */
function countUpTo(s: string, c: string, limit: number): number {
  let n = 0;
  for (let i = s.indexOf(c); i !== -1 && n <= limit; i = s.indexOf(c, i + 1)) n++;
  return n;
}

/** True when `s` nests arrays/objects deeper than `max` (strings are skipped; a linear scan, no allocation). */
export function nestedDeeperThan(s: string, max: number): boolean {
  // Most bodies open fewer brackets than `max` in all: then no nesting can be deeper (found by the native indexOf,
  // several times faster than the scan below).
  const opens = countUpTo(s, '{', max);
  if (opens <= max && opens + countUpTo(s, '[', max - opens) <= max) return false;
  let depth = 0;
  let inStr = false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (inStr) {
      if (c === 92) i++;
      else if (c === 34) inStr = false;
    } else if (c === 34) inStr = true;
    else if (c === 91 || c === 123) {
      if (++depth > max) return true;
    } else if (c === 93 || c === 125) depth--;
  }
  return false;
}

/** One request of a call or batch, from validation to its serialised response. */
class Item {
  /** Serialised id; null for a notification (no reply). */
  idJson: string | null = null;
  /** A valid request without an id: run it, never answer it. */
  notify = false;
  method = '';
  params: unknown[] = [];
  /** The finished response envelope (or null while in progress / for notifications). */
  out: string | null = null;
  fwd: Forward | null = null;
  source: RpcSource = 'state';
  t0: number;
  constructor(t0: number) {
    this.t0 = t0;
  }
}

const EMPTY: unknown[] = [];

/** Envelope limits and the namespaces let through (built from Config by the daemon). */
export interface DispatchOptions {
  readonly maxBatchItems: number;
  readonly maxResponseBytes: number;
  /** Methods to forward beyond the default allow-list (names, ns_* or *): --forward-methods. */
  readonly forwardMethods: readonly string[];
  /** Namespaces forwarded anyway: --allow-namespaces. */
  readonly allowNamespaces: readonly string[];
}

/** Parses and answers JSON-RPC bodies for any transport. */
export class Dispatcher {
  /** Which methods missing from the table may go to the node (src/rpc/allow.ts). */
  private readonly forwardable: ForwardPolicy;

  constructor(
    private readonly ctx: MethodContext,
    private readonly opts: DispatchOptions,
    private readonly methods: MethodTable = ETH_METHODS,
    /** The polling filters (eth_newFilter …), answered after the table and before forwarding; null: forwarded. */
    private readonly filters: Filters | null = null,
  ) {
    this.forwardable = new ForwardPolicy(opts.forwardMethods, opts.allowNamespaces);
  }

  /**
   * Answers one request body (single call or batch). Returns synchronously when every item was answered from
   * state; a Promise when something had to wait for the node. `sink` is the WebSocket connection (null on HTTP);
   * `origin` the HTTP request (its client, for the polling filters' per-client cap). Never throws and never rejects.
   */
  handle(text: string, sink: SubscriberSink | null, origin: RequestOrigin | null = null): Reply | Promise<Reply> {
    const t0 = performance.now();
    if (nestedDeeperThan(text, MAX_JSON_DEPTH)) {
      return errorEnvelope('null', RpcCode.PARSE_ERROR, `parse error: JSON nested deeper than ${MAX_JSON_DEPTH} levels`);
    }
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch (e) {
      return errorEnvelope('null', RpcCode.PARSE_ERROR, 'parse error: ' + (e as Error).message);
    }
    if (Array.isArray(msg)) return this.batch(msg, sink, origin, t0);
    const item = this.prepare(msg, t0);
    if (item.out === null) this.run(item, sink, origin);
    if (item.fwd !== null) return this.forwardSingle(item, text);
    if (item.out === null) return this.finishLater([item], false, null);
    this.record(item);
    return this.capped(item.notify ? null : item.out);
  }

  /**
   * Answers every request of a body with the same error without running any (e.g. a flashblock the request is
   * pinned to was not applied in time): one envelope per request that has an id, echoing it, in a batch when the
   * body is a batch; null when all are notifications. A body that does not parse gets one error with a null id.
   */
  refuse(text: string, code: number, message: string, data?: unknown): Reply {
    let msg: unknown = null;
    if (!nestedDeeperThan(text, MAX_JSON_DEPTH)) {
      try {
        msg = JSON.parse(text);
      } catch {
        msg = null;
      }
    }
    if (!Array.isArray(msg)) {
      const id = refusedId(msg);
      return id === undefined ? null : errorEnvelope(id, code, message, data);
    }
    if (msg.length === 0) return errorEnvelope('null', code, message, data);
    const out: string[] = [];
    for (const m of msg) {
      const id = refusedId(m);
      if (id !== undefined) out.push(errorEnvelope(id, code, message, data));
    }
    return out.length === 0 ? null : '[' + out.join(',') + ']';
  }

  private batch(list: unknown[], sink: SubscriberSink | null, origin: RequestOrigin | null, t0: number): Reply | Promise<Reply> {
    if (list.length === 0) return errorEnvelope('null', RpcCode.INVALID_REQUEST, 'invalid request: empty batch');
    if (list.length > this.opts.maxBatchItems) {
      return errorEnvelope('null', RpcCode.INVALID_REQUEST, `batch too large: ${list.length} items, the limit is ${this.opts.maxBatchItems}`);
    }
    const items: Item[] = new Array(list.length);
    let fwds: Item[] | null = null;
    let waiting = false;
    for (let i = 0; i < list.length; i++) {
      const item = this.prepare(list[i], t0);
      if (item.out === null) this.run(item, sink, origin);
      if (item.fwd !== null) (fwds ??= []).push(item);
      else if (item.out === null) waiting = true;
      items[i] = item;
    }
    if (fwds === null && !waiting) return this.assemble(items);
    return this.finishLater(items, true, fwds);
  }

  /** Validates an envelope. On failure `out` is already the error reply. */
  private prepare(msg: unknown, t0: number): Item {
    const item = new Item(t0);
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) {
      item.out = errorEnvelope('null', RpcCode.INVALID_REQUEST, 'invalid request: expected a JSON-RPC request object');
      item.source = 'error';
      return item;
    }
    const o = msg as Record<string, unknown>;
    const id = o.id;
    let idJson: string | null = null;
    if (id !== undefined) {
      if (typeof id === 'number') {
        // 1e400 parses to Infinity, which has no JSON form: refused rather than echoed as invalid JSON.
        if (!Number.isFinite(id)) return this.invalid(item, 'null', 'invalid request: id must be a finite number, a string or null');
        idJson = '' + id;
      }
      else if (typeof id === 'string' || id === null) idJson = JSON.stringify(id);
      else return this.invalid(item, 'null', 'invalid request: id must be a string, number or null');
    }
    const reply = idJson ?? 'null';
    if (o.jsonrpc !== '2.0') return this.invalid(item, reply, 'invalid request: "jsonrpc" must be "2.0"');
    if (typeof o.method !== 'string' || o.method === '') return this.invalid(item, reply, 'invalid request: "method" must be a non-empty string');
    item.method = o.method;
    const p = o.params;
    if (p === undefined || p === null) item.params = EMPTY;
    else if (Array.isArray(p)) item.params = p;
    else {
      item.out = errorEnvelope(reply, RpcCode.INVALID_PARAMS, 'invalid params: "params" must be an array (by-name params are not supported)');
      item.source = 'error';
      return item;
    }
    item.idJson = idJson;
    item.notify = idJson === null;
    return item;
  }

  private invalid(item: Item, idJson: string, message: string): Item {
    item.out = errorEnvelope(idJson, RpcCode.INVALID_REQUEST, message);
    item.source = 'error';
    return item;
  }

  /** Runs the handler: sets `out`, or `fwd`, or leaves both null while its Promise settles (tracked by finishLater). */
  private run(item: Item, sink: SubscriberSink | null, origin: RequestOrigin | null): void {
    const m = item.method;
    const h: Handler | undefined = this.methods.get(m);
    const filters = h === undefined && this.filters !== null && this.filters.handles(m) ? this.filters : null;
    if (h === undefined && filters === null) {
      if (!this.forwardable.allows(m)) {
        this.fail(item, new RpcError(RpcCode.METHOD_NOT_FOUND, this.forwardable.refusal(m)));
        return;
      }
      item.fwd = FORWARD_AS_IS;
      item.source = 'node';
      return;
    }
    let r: unknown;
    try {
      r = h !== undefined ? h(this.ctx, item.params, sink) : filters!.call(m, item.params, sink, origin);
    } catch (e) {
      this.fail(item, e);
      return;
    }
    if (r instanceof Forward) {
      if (this.refusedForward(item)) return;
      item.fwd = r;
      item.source = 'node';
    } else if (r instanceof Promise) {
      item.source = 'node';
      pendingOf.set(
        item,
        r.then(
          (v) => {
            if (v instanceof Forward) return this.forwardLate(item, v);
            if (v instanceof FromState) {
              item.source = 'state';
              return this.succeed(item, v.value);
            }
            return this.succeed(item, v);
          },
          (e) => this.fail(item, e),
        ),
      );
    } else this.succeed(item, r);
  }

  /** A handler's Promise decided to forward after all (e.g. the execution engine could not answer in time). */
  /**
   * A trace method whose target is not pending goes to the node only when --forward-methods allows it (its handler
   * answers pending targets itself); otherwise it is refused as any method off the allow-list is. True: refused.
   */
  private refusedForward(item: Item): boolean {
    if (!isGuardedForward(item.method) || this.forwardable.allows(item.method)) return false;
    this.ctx.metrics.traceRefusals.not_pending_not_allowed.inc();
    this.fail(item, new RpcError(RpcCode.METHOD_NOT_FOUND, `${this.forwardable.refusal(item.method)} (flashblocksd traces pending blocks and preconfirmed transactions itself; this target is not pending)`));
    return true;
  }

  private async forwardLate(item: Item, fwd: Forward): Promise<void> {
    if (this.refusedForward(item)) return;
    item.fwd = fwd;
    await this.forwardBatch([item], false);
  }

  private succeed(item: Item, r: unknown): void {
    const json = r instanceof RawJson ? r.json : r === undefined ? 'null' : JSON.stringify(r);
    item.out = PRE + (item.idJson ?? 'null') + MID_RESULT + json + '}';
  }

  private fail(item: Item, e: unknown): void {
    item.source = 'error';
    const idJson = item.idJson ?? 'null';
    if (e instanceof RpcError) item.out = errorEnvelope(idJson, e.code, e.message, e.data);
    else if (e instanceof NodeError) item.out = nodeErrorEnvelope(idJson, e, item.method, this.ctx.pendingUsable());
    else {
      this.ctx.log.error('rpc handler failed', { method: item.method, error: (e as Error)?.stack ?? String(e) });
      item.out = errorEnvelope(idJson, RpcCode.INTERNAL_ERROR, 'internal error');
    }
  }

  /** A lone forwarded call: unchanged params go to the node byte for byte and its reply comes back as is. */
  private async forwardSingle(item: Item, text: string): Promise<Reply> {
    const fwd = item.fwd as Forward;
    try {
      if (fwd.params === null) {
        // A read may be sent once more if a kept-alive socket to the node turns out closed (src/node/http1.ts).
        const buf = await this.ctx.node.postRaw(text, undefined, retryableMethod(item.method));
        this.record(item);
        return item.notify ? null : this.cappedBuffer(item, buf);
      }
      await this.forwardBatch([item], false);
    } catch (e) {
      this.fail(item, e);
    }
    this.record(item);
    return this.capped(item.notify ? null : item.out);
  }

  /**
   * Sends `items` to the node as one batch (or one object when `asBatch` is false), with ids 0…n-1 so duplicate
   * client ids cannot collide, and sets each item's `out` from the matching answer.
   */
  private async forwardBatch(items: Item[], asBatch: boolean): Promise<void> {
    const parts: string[] = new Array(items.length);
    let retry = true;
    for (let i = 0; i < items.length; i++) {
      const it = items[i]!;
      if (retry && !retryableMethod(it.method)) retry = false;
      const params = it.fwd!.params ?? it.params;
      parts[i] = '{"jsonrpc":"2.0","id":' + i + ',"method":' + JSON.stringify(it.method) + ',"params":' + JSON.stringify(params) + '}';
    }
    let buf: Buffer;
    try {
      buf = await this.ctx.node.postRaw(asBatch ? '[' + parts.join(',') + ']' : (parts[0] as string), undefined, retry);
    } catch (e) {
      for (const it of items) this.fail(it, e);
      return;
    }
    let answer: unknown;
    try {
      answer = JSON.parse(buf.toString('utf8'));
    } catch {
      for (const it of items) this.fail(it, new NodeError('http', 'node answered with invalid JSON'));
      return;
    }
    const list = Array.isArray(answer) ? answer : [answer];
    for (const a of list) {
      if (a === null || typeof a !== 'object') continue;
      const r = a as { id?: unknown; result?: unknown; error?: unknown };
      const it = typeof r.id === 'number' ? items[r.id] : list.length === 1 && !asBatch ? items[0] : undefined;
      if (it === undefined || it.out !== null) continue;
      const idJson = it.idJson ?? 'null';
      if (r.error !== undefined && r.error !== null) {
        it.out = PRE + idJson + MID_ERROR + JSON.stringify(r.error) + '}';
      } else it.out = PRE + idJson + MID_RESULT + (r.result === undefined ? 'null' : JSON.stringify(r.result)) + '}';
    }
    // A batch refused as a whole (one error object, e.g. a rate limit) answers every item with that error.
    const whole = !Array.isArray(answer) && asBatch ? (answer as { error?: unknown }).error : undefined;
    for (const it of items) {
      if (it.out !== null) continue;
      it.source = 'error';
      it.out = whole !== undefined && whole !== null
        ? PRE + (it.idJson ?? 'null') + MID_ERROR + JSON.stringify(whole) + '}'
        : errorEnvelope(it.idJson ?? 'null', RpcCode.SERVER_ERROR, 'node answered without a response for this request');
    }
  }

  /** Waits for forwarded items (one upstream batch) and async handlers, then assembles the reply. */
  private async finishLater(items: Item[], isBatch: boolean, fwds: Item[] | null): Promise<Reply> {
    const waits: Promise<void>[] = [];
    if (fwds !== null) waits.push(this.forwardBatch(fwds, true));
    for (const it of items) {
      const p = pendingOf.get(it);
      if (p !== undefined) {
        waits.push(p);
        pendingOf.delete(it);
      }
    }
    await Promise.all(waits);
    if (!isBatch) {
      const it = items[0]!;
      this.record(it);
      return this.capped(it.notify ? null : it.out);
    }
    return this.assemble(items);
  }

  private assemble(items: Item[]): Reply {
    let out = '';
    const cap = this.opts.maxResponseBytes;
    for (let i = 0; i < items.length; i++) {
      const it = items[i]!;
      this.record(it);
      if (it.notify) continue;
      let s = it.out as string;
      if (out.length + s.length > cap) s = errorEnvelope(it.idJson ?? 'null', RpcCode.LIMIT_EXCEEDED, `response exceeds the ${cap}-byte limit`);
      out = out.length === 0 ? s : out + ',' + s;
    }
    return out.length === 0 ? null : '[' + out + ']';
  }

  private capped(s: string | null): string | null {
    const cap = this.opts.maxResponseBytes;
    if (s === null || s.length <= cap) return s;
    return errorEnvelope(idOf(s), RpcCode.LIMIT_EXCEEDED, `response exceeds the ${cap}-byte limit`);
  }

  private cappedBuffer(item: Item, buf: Buffer): Reply {
    const cap = this.opts.maxResponseBytes;
    if (buf.length <= cap) return buf;
    item.source = 'error';
    return errorEnvelope(item.idJson ?? 'null', RpcCode.LIMIT_EXCEEDED, `response exceeds the ${cap}-byte limit`);
  }

  private record(item: Item): void {
    const h = this.ctx.metrics.rpcHandle(item.method, item.source);
    h.counter.inc();
    h.histogram.observe((performance.now() - item.t0) / 1000);
  }
}

/**
 * The serialised id to answer a refused request with: its own when valid, 'null' for a malformed one, undefined for
 * a notification (a valid request without an id gets no answer).
 */
function refusedId(m: unknown): string | undefined {
  if (m === null || typeof m !== 'object' || Array.isArray(m)) return 'null';
  const o = m as Record<string, unknown>;
  const id = o.id;
  if (id === undefined) return o.jsonrpc === '2.0' && typeof o.method === 'string' && o.method !== '' ? undefined : 'null';
  if (typeof id === 'number') return Number.isFinite(id) ? '' + id : 'null';
  if (typeof id === 'string' || id === null) return JSON.stringify(id);
  return 'null';
}

/** Handler Promises of items still running (kept off Item so the common synchronous path stays lean). */
const pendingOf = new WeakMap<Item, Promise<void>>();

/** The serialised id at the head of an envelope built here (for replacing an oversized reply). */
function idOf(envelope: string): string {
  const start = PRE.length;
  const r = envelope.indexOf(MID_RESULT, start);
  const e = envelope.indexOf(MID_ERROR, start);
  const end = r === -1 ? e : e === -1 ? r : Math.min(r, e);
  return end === -1 ? 'null' : envelope.slice(start, end);
}

/**
 * A node failure as a JSON-RPC error: the node's own error passes through; transport failures are explained, saying
 * whether pending state still answers (`pendingFresh`: the same judgement /readyz and the pending fallback use).
 */
function nodeErrorEnvelope(idJson: string, e: NodeError, method: string, pendingFresh: boolean): string {
  // The node client refused an answer over its size bound: the same error as an over-limit reply built here.
  if (e.limitBytes !== undefined) return errorEnvelope(idJson, RpcCode.LIMIT_EXCEEDED, `response exceeds the ${e.limitBytes}-byte limit`);
  switch (e.reason) {
    case 'rpc':
      return errorEnvelope(idJson, e.rpcCode ?? RpcCode.SERVER_ERROR, e.message, e.rpcData);
    case 'timeout':
      return errorEnvelope(idJson, RpcCode.TIMEOUT, `${method}: ${e.message}`);
    case 'connect':
      return errorEnvelope(
        idJson,
        RpcCode.SERVER_ERROR,
        `${method}: ${e.message}; ${pendingFresh ? 'methods at "pending" still answer from flashblocks' : 'pending state is not fresh either (see /readyz)'}`,
      );
    case 'http':
      return errorEnvelope(idJson, RpcCode.SERVER_ERROR, `${method}: ${e.message}`);
    case 'disabled':
      return errorEnvelope(idJson, RpcCode.SERVER_ERROR, `${method} needs the node and no --node-rpc-url is configured`);
  }
}
