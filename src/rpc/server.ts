// The JSON-RPC transports on the shared uWS app: HTTP POST on any path and WebSocket on `/`, both feeding the one
// Dispatcher. Owns limits, CORS, Content-Type checks and draining; never interprets JSON-RPC itself.
// uWS lifetimes: onAborted first, non-final body chunks copied, writes after an await corked, and nothing touches a
// response after it was aborted or ended. The stream module owns /flashblocks*, /ws*; they are not registered here.
// Flashblock pinning (./pin.ts): every HTTP answer carries X-Flashblock; a request with X-Flashblock-Min waits
// (bounded) for that flashblock before it is dispatched.
import { performance } from 'node:perf_hooks';
import type { HttpRequest, HttpResponse, TemplatedApp, WebSocket, us_socket_context_t } from 'uWebSockets.js';
import { RpcCode } from '../errors.js';
import { CidrList, clientIp, forwardedFor } from '../limits/ip.js';
import { RequestQuota, type QuotaVerdict } from '../limits/quota.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/metrics.js';
import type { NodeClient } from '../node/client.js';
import type { StateEvents } from '../state/events.js';
import type { PendingView, SenderSource } from '../state/view.js';
import { Dispatcher, errorEnvelope, type DispatchOptions, type Reply } from './dispatch.js';
import { Filters, type FilterOptions, type RequestOrigin } from './filters.js';
import type { MethodContext, MethodOptions, PendingExecution } from './methods/types.js';
import { executionReceiptSource } from './methods/executed.js';
import { FlashblockPins, parseFlashblockPosition, type FlashblockPosition, type PinOptions, type PinSettle, type PinWaiter } from './pin.js';
import { Shapes } from './shapes/json.js';
import { STREAM_RECEIPTS } from './shapes/receipt.js';
import { Subscriptions, type SubscriberSink } from './subscriptions.js';

/** The settings the JSON-RPC transports read (built from Config by the daemon). */
export interface RpcOptions extends DispatchOptions, Omit<MethodOptions, 'maxResponseBytes'>, PinOptions, FilterOptions {
  readonly maxBodyBytes: number;
  /** CORS allowed origins ('*' = any); CORS is off when empty. */
  readonly corsOrigins: readonly string[];
  /** Per-WebSocket send buffer; a connection above it is closed. */
  readonly streamMaxBackpressureBytes: number;
  readonly streamIdleTimeoutS: number;
  /** eth_subscribe subscriptions one connection may hold. */
  readonly maxSubscriptionsPerConnection?: number;
  /** CIDRs whose X-Forwarded-For is honoured (the client IP of the rate quota). */
  readonly trustedProxies?: readonly string[];
  /** API keys: a POST to /<key> also counts against that key's rate quota. */
  readonly apiKeys?: readonly string[];
}

/** What the RPC module is given: its settings, the read-only state view and its senders, events, the node. */
export interface RpcDeps {
  readonly options: RpcOptions;
  readonly view: PendingView;
  readonly senders: SenderSource;
  readonly events: StateEvents;
  readonly node: NodeClient;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** Whether `pending` may be answered from state now (see MethodContext.pendingUsable). */
  pendingUsable(): boolean;
  /** True while the chain is known to have stopped streaming flashblocks (see MethodContext.upstreamRetired). */
  upstreamRetired?(): boolean;
  /** Executed pending state (absent or null: execution off). */
  readonly execution?: PendingExecution | null;
  /** Request-rate quotas (--rate-limit-rps); null or absent: none. */
  readonly quota?: RequestQuota | null;
}

/** The mounted JSON-RPC transports. */
export interface MountedRpc {
  /**
   * Stop accepting new work; close WebSocket clients with 1001; resolve when in-flight work finished and no request
   * has ended for `quietMs` (default DRAIN_QUIET_MS, at most the grace), or when `graceMs` ran out.
   */
  drain(graceMs: number, quietMs?: number): Promise<void>;
  /** What the handlers run with (its eth_subscribe hub included); for benchmarks and tests. */
  readonly ctx: MethodContext;
  /** The polling filters (eth_newFilter …); for tests. */
  readonly filters: Filters;
}

/** The handlers' context over `deps`: the shapes over its senders and an eth_subscribe hub over its events. */
export function methodContext(deps: RpcDeps): MethodContext {
  // With execution, receipts and logs the stream lacks come from the engine (the same builders shape both).
  const shapes = new Shapes(deps.senders, deps.execution != null ? executionReceiptSource(deps.execution) : STREAM_RECEIPTS);
  return {
    options: deps.options,
    view: deps.view,
    senders: deps.senders,
    shapes,
    events: deps.events,
    node: deps.node,
    metrics: deps.metrics,
    log: deps.log,
    pendingUsable: () => deps.pendingUsable(),
    ...(deps.upstreamRetired === undefined ? {} : { upstreamRetired: () => deps.upstreamRetired!() }),
    execution: deps.execution ?? null,
    subscriptions: new Subscriptions({ events: deps.events, node: deps.node, shapes, metrics: deps.metrics, log: deps.log, execution: deps.execution ?? null }, deps.options.maxSubscriptionsPerConnection),
  };
}

/** Media types accepted as JSON-RPC bodies (geth's list). Anything else, or none, is HTTP 415. */
const JSON_TYPES: ReadonlySet<string> = new Set(['application/json', 'application/json-rpc', 'application/jsonrequest']);

const JSON_HEADER = 'application/json';
const BODY_415 = errorEnvelope('null', RpcCode.INVALID_REQUEST, 'invalid content type, only application/json is supported');
const BODY_405 = errorEnvelope('null', RpcCode.INVALID_REQUEST, 'method not allowed: send JSON-RPC as HTTP POST (or over WebSocket on /)');
const BODY_503 = errorEnvelope('null', RpcCode.SERVER_ERROR, 'server is shutting down; retry on another instance');
/** Headers a browser may read from an answer (CORS): the flashblock it reflects. */
const EXPOSED_HEADERS = 'X-Flashblock';

const BODY_429 = errorEnvelope('null', RpcCode.LIMIT_EXCEEDED, 'rate limit exceeded');

/** The rate-limit answer to a WebSocket message: the JSON-RPC error with the request's id when it has one. */
function rateLimitedMessage(text: string): string {
  let id = 'null';
  try {
    const m = JSON.parse(text) as unknown;
    if (m !== null && typeof m === 'object' && !Array.isArray(m) && 'id' in m) id = JSON.stringify((m as { id: unknown }).id) ?? 'null';
  } catch {
    // not JSON: id null
  }
  return errorEnvelope(id, RpcCode.LIMIT_EXCEEDED, 'rate limit exceeded');
}

/**
 * An over-limit body is read and dropped up to this many bytes (or 4× the body limit if larger) so that the 413
 * reaches the client; past it the connection is closed at once.
 */
const TOO_LARGE_DRAIN_BYTES = 64 * 1024 * 1024;

/** True for a Content-Type whose media type (before parameters) is a JSON type. */
export function isJsonContentType(header: string): boolean {
  const semi = header.indexOf(';');
  const mt = (semi === -1 ? header : header.slice(0, semi)).trim().toLowerCase();
  return JSON_TYPES.has(mt);
}

/** One HTTP request in flight. */
class HttpCall implements RequestOrigin {
  aborted = false;
  done = false;
  size = 0;
  chunks: Buffer[] | null = null;
  /** Over the body limit: the rest of the body is read and dropped, then 413 is answered (see TOO_LARGE_DRAIN_BYTES). */
  discarding = false;
  /** X-Flashblock-Min, parsed; null when absent. */
  pin: FlashblockPosition | null = null;
  /** X-Flashblock-Min as sent when it did not parse (answered 400 once the body is read), else null. */
  badPin: string | null = null;
  /** While waiting for the pinned flashblock: the waiter and the body to dispatch once released. */
  waiter: PinWaiter | null = null;
  text = '';
  /** X-Flashblock value to send ('' = none): the state's position when the answer was computed. */
  flashblock = '';
  constructor(
    readonly res: HttpResponse,
    /** Access-Control-Allow-Origin value to send, or '' for none. */
    readonly allowOrigin: string,
    /** Client IP for the rate quota ('' until known: clientIp() works it out when asked). */
    public ip: string,
    /** Quota id of the API key in the path (RequestQuota.apiKeyId), or null. */
    readonly keyId: string | null,
    /** X-Forwarded-For when trusted proxies are configured and `ip` is not yet known, else ''. */
    private readonly xff: string,
    private readonly trusted: CidrList,
  ) {}

  /** The client IP (trusted proxies applied), worked out on first use: only a filter install asks without a quota. */
  clientIp(): string {
    if (this.ip === '' && !this.aborted) this.ip = clientIp(Buffer.from(this.res.getRemoteAddressAsText()).toString(), this.xff, this.trusted);
    return this.ip;
  }
}

interface WsData {
  sink: WsSink | null;
  /** Client IP for the rate quota ('' without one). */
  ip: string;
}

/** The end of every eth_subscription notification (see shapes/subscription.ts notification()). */
const NOTIFICATION_END = '}}';

/** A WebSocket JSON-RPC connection as the dispatcher and subscription hub see it. */
class WsSink implements SubscriberSink {
  open = true;
  constructor(
    readonly id: number,
    private readonly ws: WebSocket<WsData>,
    /** The socket's send-buffer cap (uWS maxBackpressure). */
    private readonly maxBackpressure: number,
  ) {}
  send(text: string | Buffer): boolean {
    if (!this.open) return false;
    // 2 = dropped (over maxBackpressure); uWS closes the socket itself when closeOnBackpressureLimit is set.
    return this.ws.send(text, false) !== 2;
  }
  sendShared(prefix: string, payload: Buffer): boolean {
    if (!this.open) return false;
    const bytes = prefix.length + payload.length + NOTIFICATION_END.length;
    // Near the cap, uWS could drop a later fragment and leave half a message: send it whole then (all or nothing).
    if (this.ws.getBufferedAmount() + bytes > this.maxBackpressure) return this.send(prefix + payload.toString('utf8') + NOTIFICATION_END);
    // Three fragments of one text message, written together, around the one encoded copy of the payload.
    let ok = false;
    this.ws.cork(() => {
      ok = this.ws.sendFirstFragment(prefix, false);
      ok = this.ws.sendFragment(payload) && ok;
      ok = this.ws.sendLastFragment(NOTIFICATION_END) && ok;
    });
    return ok;
  }
  close(code: number, reason: string): void {
    if (!this.open) return;
    this.open = false;
    this.ws.end(code, reason);
  }
}

/**
 * Mounts HTTP JSON-RPC (POST on every path; OPTIONS when CORS is configured; 405 for other methods) and WebSocket
 * JSON-RPC on `/` on `app`. Returns the handle whose `drain` answers 503 to new requests, waits for in-flight ones
 * up to `graceMs` and closes WebSocket clients with 1001.
 */
export function mountRpc(app: TemplatedApp, deps: RpcDeps): MountedRpc {
  const cfg = deps.options;
  const ctx = methodContext(deps);
  const subscriptions = ctx.subscriptions;
  const filters = new Filters(ctx, cfg);
  const dispatcher = new Dispatcher(ctx, cfg, undefined, filters);
  const maxBody = cfg.maxBodyBytes;
  const drainLimit = Math.max(TOO_LARGE_DRAIN_BYTES, 4 * maxBody);
  const anyOrigin = cfg.corsOrigins.includes('*');
  const origins = new Set(cfg.corsOrigins);
  const corsOn = cfg.corsOrigins.length > 0;
  const quota = deps.quota ?? null;
  const trusted = new CidrList(cfg.trustedProxies ?? []);
  /** Quota id per configured API key, computed once. */
  const keyIds = new Map((cfg.apiKeys ?? []).map((k) => [k, RequestQuota.apiKeyId(k)] as const));
  const metrics = deps.metrics;
  let draining = false;
  let inflight = 0;
  let onIdle: (() => void) | null = null;
  /** When the last HTTP request ended (performance.now()); drain waits for a quiet spell after it. */
  let lastAnsweredAt = 0;
  const sinks = new Set<WsSink>();
  let nextSinkId = 1;
  /** Arrival time (performance.now()) of the newest applied frame no request has read yet; 0 when one has. */
  let unreadSince = 0;
  const stopWatchingApplies = deps.events.onApplied((_b, _fb, frame) => {
    unreadSince = frame.receivedAtMs;
  });
  /** Called as a request is dispatched (it reads the state now): the first after an apply times its visibility. */
  const noteRead = (): void => {
    if (unreadSince === 0) return;
    deps.metrics.flashblockVisibleSeconds.observe((performance.now() - unreadSince) / 1000);
    unreadSince = 0;
  };

  const allowOriginFor = (origin: string): string => (!corsOn || origin === '' ? '' : anyOrigin ? '*' : origins.has(origin) ? origin : '');
  const pins = new FlashblockPins(deps.view, deps.events, cfg, deps.metrics, settlePin);

  function end(call: HttpCall): void {
    if (call.done) return;
    call.done = true;
    lastAnsweredAt = performance.now();
    inflight--;
    if (inflight === 0 && onIdle !== null) onIdle();
  }

  function write(res: HttpResponse, status: string, body: string | Buffer | null, allowOrigin: string, close: boolean, flashblock = ''): void {
    res.writeStatus(status);
    if (body !== null) res.writeHeader('Content-Type', JSON_HEADER);
    if (flashblock !== '') res.writeHeader('X-Flashblock', flashblock);
    if (allowOrigin !== '') {
      res.writeHeader('Access-Control-Allow-Origin', allowOrigin);
      if (allowOrigin !== '*') res.writeHeader('Vary', 'Origin');
      res.writeHeader('Access-Control-Expose-Headers', EXPOSED_HEADERS);
    }
    res.end(body ?? undefined, close);
  }

  function respond(call: HttpCall, body: Reply): void {
    if (call.aborted || call.done) return;
    // While draining, answer and close (Connection: close): a keep-alive client would otherwise send its next
    // request on this socket just as the process exits, and get a connection reset instead of an answer.
    write(call.res, '200 OK', body, call.allowOrigin, draining, call.flashblock);
    end(call);
  }

  /** A complete body: answered 400 for a malformed X-Flashblock-Min, held while its flashblock is missing, or run. */
  function deliver(call: HttpCall, text: string): void {
    if (call.badPin !== null) {
      write(call.res, '400 Bad Request', badPinBody(call.badPin), call.allowOrigin, draining);
      end(call);
      return;
    }
    if (call.pin !== null) {
      const r = pins.admit(call.pin, call, call.size);
      if (r === 'now') dispatchHttp(call, text);
      else if (typeof r === 'string') refusePinned(call, text, r);
      else {
        call.waiter = r;
        call.text = text;
      }
      return;
    }
    dispatchHttp(call, text);
  }

  /** A waiter's end (FlashblockPins.onSettle): outside any uWS callback, so the writes are corked. */
  function settlePin(token: unknown, how: PinSettle): void {
    const call = token as HttpCall;
    const text = call.text;
    call.waiter = null;
    call.text = '';
    if (call.aborted || call.done) return;
    call.res.cork(() => (how === 'ready' ? dispatchHttp(call, text) : refusePinned(call, text, how)));
  }

  function refusePinned(call: HttpCall, text: string, how: Exclude<PinSettle, 'ready'>): void {
    const pin = call.pin as FlashblockPosition;
    call.flashblock = pins.header();
    const data = { asked: pin.block + '-' + pin.index, current: call.flashblock === '' ? null : call.flashblock };
    respond(call, dispatcher.refuse(text, RpcCode.SERVER_ERROR, pins.notYetMessage(pin, how), data));
  }

  /** Answers HTTP 429 with the JSON-RPC error -32005 (Retry-After: 1, the quota's window). */
  function refuseRate(call: HttpCall, verdict: QuotaVerdict): void {
    if (call.aborted || call.done) return;
    metrics.rateLimited[verdict === 'key' ? 'key' : 'ip'].inc();
    const res = call.res.writeStatus('429 Too Many Requests').writeHeader('Retry-After', '1').writeHeader('Content-Type', JSON_HEADER);
    if (call.allowOrigin !== '') {
      res.writeHeader('Access-Control-Allow-Origin', call.allowOrigin);
      if (call.allowOrigin !== '*') res.writeHeader('Vary', 'Origin');
    }
    res.end(BODY_429, draining);
    end(call);
  }

  /** Delivers `text` (pinning, then dispatch) once the quota allows it (synchronously while the quota has points leased). */
  function admitHttp(call: HttpCall, text: string): void {
    if (quota === null) return deliver(call, text);
    const v = quota.check(call.ip, call.keyId);
    if (v === 'ok') return deliver(call, text);
    if (typeof v === 'string') return refuseRate(call, v);
    void v.then((verdict) => {
      if (call.aborted || call.done) return end(call);
      call.res.cork(() => (verdict === 'ok' ? deliver(call, text) : refuseRate(call, verdict)));
    });
  }

  function dispatchHttp(call: HttpCall, text: string): void {
    noteRead();
    // The answer reflects the state as of this moment: handlers answering from state run synchronously inside
    // handle(), so nothing is applied in between. An answer that completes later (forwarded to the node, or from
    // the execution engine) carries this same position: the flashblock current when its dispatch started.
    call.flashblock = pins.header();
    const r = dispatcher.handle(text, null, call);
    if (r instanceof Promise) {
      void r.then((body) => {
        if (!call.aborted && !call.done) call.res.cork(() => respond(call, body));
        else end(call);
      });
    } else respond(call, r);
  }

  app.post('/*', (res: HttpResponse, req: HttpRequest) => {
    let ip = '';
    let keyId: string | null = null;
    let xff = '';
    if (quota !== null) {
      ip = clientIp(Buffer.from(res.getRemoteAddressAsText()).toString(), forwardedFor(req), trusted);
      if (keyIds.size > 0) keyId = keyIds.get(req.getUrl().slice(1)) ?? null;
    } else if (trusted.size > 0) xff = forwardedFor(req);
    const call = new HttpCall(res, allowOriginFor(corsOn ? req.getHeader('origin') : ''), ip, keyId, xff, trusted);
    inflight++;
    res.onAborted(() => {
      call.aborted = true;
      if (call.waiter !== null) {
        pins.cancel(call.waiter);
        call.waiter = null;
        call.text = '';
      }
      end(call);
    });
    if (draining) {
      write(res, '503 Service Unavailable', BODY_503, call.allowOrigin, true);
      end(call);
      return;
    }
    if (!isJsonContentType(req.getHeader('content-type'))) {
      write(res, '415 Unsupported Media Type', BODY_415, call.allowOrigin, true);
      end(call);
      return;
    }
    // Read now: `req` is only valid during this callback.
    const minPin = req.getHeader('x-flashblock-min');
    if (minPin !== '') {
      call.pin = parseFlashblockPosition(minPin);
      if (call.pin === null) call.badPin = minPin;
    }
    const cl = req.getHeader('content-length');
    if (cl !== '' && Number(cl) > maxBody) {
      // A client waiting for 100 Continue has sent no body: answer now. One that announced more than we would
      // drain gets the answer now too (and may see its upload cut off).
      if (req.getHeader('expect').toLowerCase() === '100-continue' || Number(cl) > drainLimit) {
        write(res, '413 Payload Too Large', tooLarge(maxBody), call.allowOrigin, true);
        end(call);
        return;
      }
      call.discarding = true;
    }
    res.onData((ab: ArrayBuffer, isLast: boolean) => {
      if (call.done) return;
      call.size += ab.byteLength;
      if (call.discarding || call.size > maxBody) {
        // Over the limit: keep nothing, read the rest and answer 413 once the client has sent it all. Closing while
        // it still sends makes the kernel reset the connection, and clients that write the whole body before they
        // read (Node's fetch) then see EPIPE instead of the 413.
        call.discarding = true;
        call.chunks = null;
        if (isLast || call.size > drainLimit) {
          write(res, '413 Payload Too Large', tooLarge(maxBody), call.allowOrigin, true);
          end(call);
        }
        return;
      }
      if (!isLast) {
        // uWS reuses `ab` after this callback returns: keep a copy.
        (call.chunks ??= []).push(Buffer.from(new Uint8Array(ab)));
        return;
      }
      let text: string;
      if (call.chunks === null) text = Buffer.from(ab).toString('utf8');
      else {
        call.chunks.push(Buffer.from(ab));
        text = Buffer.concat(call.chunks).toString('utf8');
        call.chunks = null;
      }
      admitHttp(call, text);
    });
  });

  if (corsOn) {
    app.options('/*', (res: HttpResponse, req: HttpRequest) => {
      const allow = allowOriginFor(req.getHeader('origin'));
      const reqHeaders = req.getHeader('access-control-request-headers');
      res.writeStatus('204 No Content');
      if (allow !== '') {
        res.writeHeader('Access-Control-Allow-Origin', allow);
        if (allow !== '*') res.writeHeader('Vary', 'Origin');
        res.writeHeader('Access-Control-Allow-Methods', 'POST, OPTIONS');
        res.writeHeader('Access-Control-Allow-Headers', reqHeaders !== '' ? reqHeaders : 'content-type');
        res.writeHeader('Access-Control-Max-Age', '600');
      }
      res.endWithoutBody(0);
    });
  }

  app.any('/*', (res: HttpResponse) => {
    res.writeStatus('405 Method Not Allowed');
    res.writeHeader('Allow', corsOn ? 'POST, OPTIONS' : 'POST');
    res.writeHeader('Content-Type', JSON_HEADER);
    res.end(BODY_405);
  });

  app.ws<WsData>('/', {
    maxPayloadLength: maxBody,
    maxBackpressure: cfg.streamMaxBackpressureBytes,
    closeOnBackpressureLimit: 1, // typed as a number in this build; any truthy value enables it
    idleTimeout: cfg.streamIdleTimeoutS,
    sendPingsAutomatically: true,
    upgrade: (res: HttpResponse, req: HttpRequest, context: us_socket_context_t) => {
      if (draining) {
        write(res, '503 Service Unavailable', BODY_503, '', true);
        return;
      }
      const ip = quota === null ? '' : clientIp(Buffer.from(res.getRemoteAddressAsText()).toString(), forwardedFor(req), trusted);
      res.upgrade<WsData>(
        { sink: null, ip },
        req.getHeader('sec-websocket-key'),
        req.getHeader('sec-websocket-protocol'),
        req.getHeader('sec-websocket-extensions'),
        context,
      );
    },
    open: (ws: WebSocket<WsData>) => {
      const sink = new WsSink(nextSinkId++, ws, cfg.streamMaxBackpressureBytes);
      ws.getUserData().sink = sink;
      sinks.add(sink);
    },
    message: (ws: WebSocket<WsData>, message: ArrayBuffer) => {
      const data = ws.getUserData();
      const sink = data.sink;
      if (sink === null) return;
      const text = Buffer.from(message).toString('utf8');
      if (quota !== null) {
        const v = quota.check(data.ip, null);
        if (v !== 'ok') {
          // Messages are answered in arrival order only per dispatch anyway; a message waiting for the quota is
          // dispatched when it is decided.
          inflight++;
          void Promise.resolve(v).then((verdict) => {
            inflight--;
            if (!sink.open) {
              // closed while waiting: nothing to answer
            } else if (verdict === 'ok') ws.cork(() => dispatchWs(ws, sink, text));
            else {
              metrics.rateLimited.ip.inc();
              if (sink.open) ws.cork(() => sink.send(rateLimitedMessage(text)));
            }
            if (inflight === 0 && onIdle !== null) onIdle();
          });
          return;
        }
      }
      dispatchWs(ws, sink, text);
    },
    close: (ws: WebSocket<WsData>) => {
      const sink = ws.getUserData().sink;
      if (sink === null) return;
      sink.open = false;
      sinks.delete(sink);
      subscriptions.disconnect(sink);
      filters.disconnect(sink);
    },
  });

  function dispatchWs(ws: WebSocket<WsData>, sink: WsSink, text: string): void {
    noteRead();
    const r = dispatcher.handle(text, sink);
    if (r instanceof Promise) {
      inflight++;
      void r.then((out) => {
        inflight--;
        if (out !== null && sink.open) ws.cork(() => sink.send(out));
        if (inflight === 0 && onIdle !== null) onIdle();
      });
    } else if (r !== null) sink.send(r);
  }

  return {
    ctx,
    filters,
    drain(graceMs: number, quietMs: number = DRAIN_QUIET_MS): Promise<void> {
      draining = true;
      stopWatchingApplies();
      subscriptions.close();
      filters.close();
      // Waiting requests are answered now (the -32000 error, saying the server is shutting down).
      pins.close();
      for (const s of [...sinks]) s.close(1001, 'server shutting down');
      // Done when nothing is in flight and nothing has been for DRAIN_QUIET_MS, or at the grace's end: a keep-alive
      // client that has just had an answer sends its next request on the same connection a moment later (new
      // connections are refused by now), and gets an answer with Connection: close instead of a connection the exit
      // closed under it. Each connection gets at most one such answer, so the quiet spell comes.
      const deadline = performance.now() + graceMs;
      const quiet = Math.min(quietMs, graceMs);
      return new Promise<void>((resolve) => {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const check = (): void => {
          clearTimeout(timer);
          const now = performance.now();
          const quietAt = lastAnsweredAt + quiet;
          if (now >= deadline || (inflight === 0 && now >= quietAt)) {
            onIdle = null;
            resolve();
            return;
          }
          // In flight: onIdle calls again when the last one ends; the deadline bounds the wait either way.
          timer = setTimeout(check, (inflight === 0 ? Math.min(quietAt, deadline) : deadline) - now);
        };
        onIdle = check;
        check();
      });
    },
  };
}

/**
 * How long drain waits after the last request ended before it counts the server idle: a keep-alive client's next
 * request follows its answer within a loop turn, milliseconds on a busy machine.
 */
const DRAIN_QUIET_MS = 50;

/** HTTP 400 body for an X-Flashblock-Min that does not parse (the value quoted, at most 64 characters). */
function badPinBody(value: string): string {
  const shown = value.length > 64 ? value.slice(0, 64) + '…' : value;
  return errorEnvelope('null', RpcCode.INVALID_PARAMS, `invalid X-Flashblock-Min ${JSON.stringify(shown)}: expected <block>-<index>, each decimal or 0x hex (e.g. 30000012-7)`);
}

function tooLarge(maxBody: number): string {
  return errorEnvelope('null', RpcCode.INVALID_REQUEST, `request body exceeds the ${maxBody}-byte limit`);
}
