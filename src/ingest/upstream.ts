// The upstream WebSocket client pool: one independent `ws` connection per URL, liveness, stall detection, backoff.
// Hands frames over untouched (never decodes or parses them) and never lets a socket error escape the pool.
// Failures are logged by what happened (DNS, refused, TLS, HTTP status, timeout, close code) once per episode.
import { performance } from 'node:perf_hooks';
import type { LookupFunction } from 'node:net';
import WebSocket from 'ws';
import { redactUrl, type Logger } from '../log.js';
import { Backoff, FailureEpisode, backoffDelayMs } from './backoff.js';

export { backoffDelayMs };

/** One frame exactly as the upstream sent it. */
export interface UpstreamFrame {
  /** The original bytes: rebroadcast these, never a re-serialisation. */
  data: Buffer;
  isBinary: boolean;
  /** Index of the upstream in `UpstreamOptions.urls`. */
  upstream: number;
  /** `performance.now()` when the frame was handed over. */
  receivedAtMs: number;
}

/** A flashblock position: the last one applied, which a resuming upstream replays after. */
export interface ResumePosition {
  blockNumber: number;
  index: number;
}

/**
 * The close code a flashblocksd raw stream sends when it no longer holds the flashblock after a resume position
 * (src/stream/server.ts's CLOSE_RESUME_TOO_OLD; repeated here because ingest never imports its readers).
 */
export const CLOSE_RESUME_TOO_OLD = 4000;

/** Why a connect failed or a connection ended: a closed set (log field `failure`, usable as a metric label). */
export const UPSTREAM_FAILURES = ['dns', 'refused', 'tls', 'http_status', 'timeout', 'network', 'closed', 'stalled', 'oversized'] as const;
export type UpstreamFailure = (typeof UPSTREAM_FAILURES)[number];

/** Connection lifecycle events, for metrics and health. */
export type UpstreamEvent =
  | { kind: 'connected'; upstream: number; resumedAfter: ResumePosition | null }
  | { kind: 'resume_too_old'; upstream: number; position: ResumePosition }
  | {
      kind: 'disconnected';
      upstream: number;
      code: number;
      reason: string;
      /** What happened, from a closed set; `description` says it in words (the log line's). */
      failure: UpstreamFailure;
      description: string;
      retryInMs: number;
      attempt: number;
    }
  | { kind: 'stalled'; upstream: number; silentMs: number }
  | { kind: 'oversized'; upstream: number };

export interface UpstreamOptions {
  urls: string[];
  pingIntervalMs: number;
  /** No frame and no pong for this long → the socket is terminated and reconnected (usually 1000). */
  stallTimeoutMs: number;
  backoffInitialMs: number;
  backoffMaxMs: number;
  /** A connection that stayed up this long resets the backoff (so does its first frame). */
  healthyResetMs: number;
  maxFrameBytes: number;
  connectTimeoutMs: number;
  /**
   * Relay tier (--upstream-resume): asked at every connect; a position adds `block_number=<B>&index=<I>` to the URL
   * so an upstream that is another flashblocksd replays what came after it. Null = connect without a position.
   * After a close 4000 (position too old for the upstream's replay buffer) the next connect goes without one.
   */
  resumeFrom?: () => ResumePosition | null;
  /** While an upstream keeps failing, one summary line this often (default 60 000); each failure is at debug. */
  failureSummaryMs?: number;
  /** The host name resolver (node:dns lookup's signature); the system's when absent. Tests answer with a failure. */
  lookup?: LookupFunction;
}

export interface UpstreamHandlers {
  /** Called synchronously for every frame. Must not throw (a throw is caught and logged, the frame is lost). */
  onFrame(f: UpstreamFrame): void;
  onEvent?(e: UpstreamEvent): void;
}

/** How long `stop()` waits for a closing handshake before destroying the socket. */
const CLOSE_GRACE_MS = 500;
/** A ping due within this many ms is sent now rather than after one more wake-up. */
const TIMER_SLACK_MS = 2;
const MAX_PAYLOAD_ERROR = 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH';
const DEFAULT_FAILURE_SUMMARY_MS = 60_000;

/** Per-URL connection state; every field is set here so the shape stays stable. */
class Slot {
  ws: WebSocket | null = null;
  open = false;
  /** Consecutive connections that failed, or ended before delivering a frame or staying up `healthyResetMs`. */
  readonly backoff: Backoff;
  /** The run of failures since the last healthy connection: decides how loud each failure is logged. */
  readonly episode: FailureEpisode;
  /** The current connection reached `open` (a later close is "closed with code C after N s"). */
  wasOpen = false;
  openedAtMs = 0;
  lastActivityMs = 0;
  lastPingMs = 0;
  healthy = false;
  oversized = false;
  lastError = '';
  /** Set by the first error (or a stall, an oversized frame) of the current connection: what happened, in words. */
  failure: UpstreamFailure | null = null;
  failureText = '';
  ticker: NodeJS.Timeout | null = null;
  retryTimer: NodeJS.Timeout | null = null;
  /** The URL of the current connection: `url`, plus a resume position when one was sent. */
  connectUrl: string;
  /** The position sent on the current connection, or null. */
  resumedAfter: ResumePosition | null = null;
  /** Set by a close 4000: the next connect goes without a position. */
  skipResume = false;
  constructor(
    readonly index: number,
    readonly url: string,
    readonly safeUrl: string,
    readonly log: Logger,
    backoffInitialMs: number,
    backoffMaxMs: number,
    failureSummaryMs: number,
  ) {
    this.backoff = new Backoff(backoffInitialMs, backoffMaxMs);
    this.episode = new FailureEpisode(failureSummaryMs);
    this.connectUrl = url;
  }
}

/** `url` with `block_number` and `index` set to `pos` (other query parameters and the path kept). */
export function resumeUrl(url: string, pos: ResumePosition): string {
  const u = new URL(url);
  u.searchParams.set('block_number', String(pos.blockNumber));
  u.searchParams.set('index', String(pos.index));
  return u.toString();
}

/**
 * Keeps one WebSocket connection open to every upstream URL, each reconnecting on its own with capped exponential
 * backoff (full jitter over [initial, ceiling]) and passing every frame to `handlers.onFrame` as received.
 */
export class UpstreamPool {
  private readonly slots: Slot[];
  private stopped = false;
  private started = false;

  /** Validates the options (throws RangeError on nonsense, naming only redacted URLs); connects nothing yet. */
  constructor(
    private readonly opts: UpstreamOptions,
    private readonly handlers: UpstreamHandlers,
    log: Logger,
  ) {
    validate(opts);
    this.slots = opts.urls.map((url, i) => {
      const safeUrl = redactUrl(url);
      const child = log.child({ upstream: i, url: safeUrl });
      const summaryMs = opts.failureSummaryMs ?? DEFAULT_FAILURE_SUMMARY_MS;
      return new Slot(i, url, safeUrl, child, opts.backoffInitialMs, opts.backoffMaxMs, summaryMs);
    });
    if (opts.pingIntervalMs >= opts.stallTimeoutMs) {
      log.warn('pingIntervalMs >= stallTimeoutMs: a quiet but healthy upstream will be reported stalled', {
        pingIntervalMs: opts.pingIntervalMs,
        stallTimeoutMs: opts.stallTimeoutMs,
      });
    }
  }

  /** Connects to all upstreams at once; each one then lives and reconnects independently. Idempotent. */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    for (const slot of this.slots) this.connect(slot);
  }

  /** Closes every socket and cancels every timer; resolves once all sockets are closed. No reconnects afterwards. */
  async stop(): Promise<void> {
    this.stopped = true;
    const closing: Promise<void>[] = [];
    for (const slot of this.slots) {
      if (slot.retryTimer !== null) clearTimeout(slot.retryTimer);
      slot.retryTimer = null;
      this.stopTicker(slot);
      const ws = slot.ws;
      if (ws === null || ws.readyState === WebSocket.CLOSED) continue;
      closing.push(
        new Promise<void>((resolve) => {
          ws.once('close', () => resolve());
          if (ws.readyState === WebSocket.OPEN) {
            ws.close(1001, 'shutting down');
            const kill = setTimeout(() => ws.terminate(), CLOSE_GRACE_MS);
            ws.once('close', () => clearTimeout(kill));
          } else {
            ws.terminate();
          }
        }),
      );
    }
    await Promise.all(closing);
  }

  /** Number of upstreams with an open connection. */
  connectedCount(): number {
    let n = 0;
    for (const slot of this.slots) if (slot.open) n++;
    return n;
  }

  /**
   * Settles every upstream's reconnects at --backoff-max-ms (true: the chain stopped streaming) or back to the usual
   * quick-then-climbing policy (false). Reconnect lines go to debug while settled: the one line saying why is the
   * caller's.
   */
  settleAtCap(on: boolean): void {
    for (const slot of this.slots) slot.backoff.settled = on;
  }

  /** Whether upstream `i` (index in `urls`) has an open connection. */
  isConnected(i: number): boolean {
    return this.slots[i]?.open ?? false;
  }

  private connect(slot: Slot): void {
    slot.retryTimer = null;
    if (this.stopped) return;
    slot.oversized = false;
    slot.lastError = '';
    slot.wasOpen = false;
    slot.failure = null;
    slot.failureText = '';
    const pos = this.opts.resumeFrom === undefined || slot.skipResume ? null : this.opts.resumeFrom();
    slot.skipResume = false;
    slot.resumedAfter = pos;
    slot.connectUrl = pos === null ? slot.url : resumeUrl(slot.url, pos);
    let ws: WebSocket;
    try {
      ws = new WebSocket(slot.connectUrl, {
        perMessageDeflate: false,
        skipUTF8Validation: true, // frames are parsed by JSON.parse downstream; invalid UTF-8 fails there
        maxPayload: this.opts.maxFrameBytes,
        handshakeTimeout: this.opts.connectTimeoutMs,
        followRedirects: false,
        ...(this.opts.lookup === undefined ? {} : { lookup: this.opts.lookup }),
      });
    } catch (err) {
      // Unreachable after validate(), but a throw here must still become a retry, not a crash.
      slot.lastError = safeMessage(err, slot);
      this.noteFailure(slot, 'network', `cannot connect: ${slot.lastError}`);
      this.scheduleRetry(slot, 1006, '');
      return;
    }
    ws.binaryType = 'nodebuffer';
    slot.ws = ws;
    const index = slot.index;
    const onFrame = this.handlers.onFrame;

    ws.on('open', () => {
      const now = performance.now();
      slot.open = true;
      slot.wasOpen = true;
      slot.healthy = false;
      slot.openedAtMs = now;
      slot.lastActivityMs = now;
      slot.lastPingMs = now;
      this.armTicker(slot, now);
      // Within a failure episode this is one more attempt: the info line comes once the connection proves healthy.
      const line = pos === null ? 'upstream connected' : `upstream connected; resuming after flashblock ${pos.blockNumber}-${pos.index}`;
      if (slot.episode.active) slot.log.debug(line, { attempt: slot.backoff.attempt });
      else slot.log.info(line, { attempt: slot.backoff.attempt });
      this.emit({ kind: 'connected', upstream: index, resumedAfter: pos });
    });
    // Hot path: one clock read, one field write, one object for the handler.
    ws.on('message', (data, isBinary) => {
      const now = performance.now();
      slot.lastActivityMs = now;
      // The first frame proves the upstream is back: a drop after it is retried from backoffInitialMs (issue 17).
      if (!slot.healthy) this.markHealthy(slot);
      try {
        onFrame({ data: data as Buffer, isBinary, upstream: index, receivedAtMs: now });
      } catch (err) {
        slot.log.limited('error', `upstream-onframe-${index}`, 5000, 'frame handler threw; frame dropped', {
          err: err instanceof Error ? err.message : String(err),
        });
      }
    });
    ws.on('pong', () => {
      slot.lastActivityMs = performance.now();
    });
    ws.on('error', (err: Error & { code?: string }) => {
      slot.lastError = safeMessage(err, slot);
      if (err.code === MAX_PAYLOAD_ERROR && !slot.oversized) {
        slot.oversized = true;
        this.noteFailure(slot, 'oversized', `sent a frame larger than ${this.opts.maxFrameBytes} bytes (--max-frame-bytes); closed it with 1009`);
        this.emit({ kind: 'oversized', upstream: index });
      } else if (!slot.wasOpen) {
        const [failure, text] = describeConnectError(err, slot, this.opts.connectTimeoutMs);
        this.noteFailure(slot, failure, text);
      }
    });
    ws.on('close', (code: number, reason: Buffer) => {
      this.stopTicker(slot);
      slot.open = false;
      if (slot.ws === ws) slot.ws = null;
      if (code === CLOSE_RESUME_TOO_OLD && slot.resumedAfter !== null) this.resumeTooOld(slot, slot.resumedAfter);
      // Our own 1009 close: the peer's reply is never read, so ws reports 1006.
      this.scheduleRetry(slot, slot.oversized ? 1009 : code, reason.toString());
    });
  }

  /**
   * A socket's housekeeping — the stall verdict, the ping, the backoff reset — run when the first of their deadlines
   * is due, then re-armed: one timer per socket and no fixed tick, so frames flowing cost no wake-up (an idle daemon's
   * each costs ~0.2 ms of CPU on a small VM) and a silent upstream is judged stalled on time.
   */
  private tick(slot: Slot): void {
    slot.ticker = null;
    const ws = slot.ws;
    if (ws === null || !slot.open) return;
    const now = performance.now();
    const silentMs = now - slot.lastActivityMs;
    if (silentMs >= this.opts.stallTimeoutMs) {
      this.noteFailure(slot, 'stalled', `silent for ${Math.round(silentMs)} ms (no frame, no pong; --stall-timeout-ms ${this.opts.stallTimeoutMs})`);
      this.emit({ kind: 'stalled', upstream: slot.index, silentMs });
      slot.lastError = 'stalled';
      this.stopTicker(slot);
      ws.terminate();
      return;
    }
    // A timer can run up to a loop turn early by this clock (libuv arms it from the turn's start).
    if (now - slot.lastPingMs >= this.opts.pingIntervalMs - TIMER_SLACK_MS) {
      slot.lastPingMs = now;
      ws.ping(undefined, undefined, noop);
    }
    if (!slot.healthy && now - slot.openedAtMs >= this.opts.healthyResetMs) this.markHealthy(slot);
    this.armTicker(slot, now);
  }

  /** Arms `slot`'s housekeeping for its first deadline after `now`: the next ping, the stall verdict, the reset. */
  private armTicker(slot: Slot, now: number): void {
    let due = Math.min(slot.lastPingMs + this.opts.pingIntervalMs, slot.lastActivityMs + this.opts.stallTimeoutMs);
    if (!slot.healthy) due = Math.min(due, slot.openedAtMs + this.opts.healthyResetMs);
    slot.ticker = setTimeout(() => this.tick(slot), Math.max(1, Math.ceil(due - now)));
  }

  /** Records what went wrong with the current connection; the first cause of a connection wins. */
  private noteFailure(slot: Slot, failure: UpstreamFailure, text: string): void {
    if (slot.failure !== null) return;
    slot.failure = failure;
    slot.failureText = text;
  }

  /** The connection proved useful (its first frame, or up `healthyResetMs`): backoff reset, a failure episode ends. */
  private markHealthy(slot: Slot): void {
    slot.healthy = true;
    slot.backoff.reset();
    const ended = slot.episode.end(Date.now());
    if (ended !== null) {
      const s = seconds(ended.durationMs);
      const attempts = ended.failures === 1 ? '1 attempt' : `${ended.failures} attempts`;
      slot.log.info(`upstream connected again after ${s} s, ${attempts}`, { failedForMs: ended.durationMs, attempts: ended.failures });
    }
  }

  /**
   * Schedules the next connect and says what happened: at warn for an episode's first failure, then at debug with a
   * summary (info) every `failureSummaryMs` while it lasts; all at debug while settled (the caller said why).
   */
  private scheduleRetry(slot: Slot, code: number, reason: string): void {
    if (this.stopped) {
      slot.log.debug(`upstream closed (${code}) on stop`);
      return;
    }
    let failure = slot.failure;
    let text = slot.failureText;
    if (slot.wasOpen && failure !== 'stalled' && failure !== 'oversized') {
      failure = 'closed';
      const why = reason !== '' ? ` (${JSON.stringify(reason)})` : code === 1006 ? ' (no close frame)' : '';
      text = `closed with code ${code}${why} after ${seconds(performance.now() - slot.openedAtMs)} s`;
    } else if (failure === null) {
      failure = 'network';
      text = `connection failed (${code})`;
    }
    const retryInMs = slot.backoff.fail();
    const attempt = slot.backoff.attempt;
    const fields: Record<string, unknown> = { failure, code, attempt, retryInMs };
    if (reason !== '') fields.reason = reason;
    if (slot.lastError !== '') fields.err = slot.lastError;
    const now = Date.now();
    const step = slot.episode.fail(now, text);
    const line = `upstream: ${text}; reconnecting in ${retryInMs} ms (attempt ${attempt})`;
    if (step === 'first') {
      const said = `${line}; until it is back, each retry is logged at debug with a summary every ${interval(slot.episode.summaryIntervalMs)}`;
      if (slot.backoff.settled) slot.log.debug(said, fields);
      else slot.log.warn(said, fields);
    } else if (step === 'summary') {
      const ep = slot.episode;
      const since = new Date(ep.startedAtMs).toISOString();
      const said = `upstream still failing: ${ep.failures} attempts since ${since} (${seconds(now - ep.startedAtMs)} s); last: ${text}; reconnecting in ${retryInMs} ms`;
      const sfields = { failure, attempts: ep.failures, since, retryInMs };
      if (slot.backoff.settled) slot.log.debug(said, sfields);
      else slot.log.info(said, sfields);
    } else {
      slot.log.debug(line, fields);
    }
    slot.retryTimer = setTimeout(() => this.connect(slot), retryInMs);
    this.emit({ kind: 'disconnected', upstream: slot.index, code, reason, failure, description: text, retryInMs, attempt });
  }

  /** The upstream no longer holds what followed our position: reconnect without one; the frames between are lost. */
  private resumeTooOld(slot: Slot, pos: ResumePosition): void {
    slot.skipResume = true;
    slot.log.warn(
      `upstream no longer holds the flashblocks after ${pos.blockNumber}-${pos.index} (close ${CLOSE_RESUME_TOO_OLD}); ` +
        'reconnecting without a resume position: the flashblocks in between are missed (a larger --replay-ring-frames upstream keeps more)',
    );
    this.emit({ kind: 'resume_too_old', upstream: slot.index, position: pos });
  }

  private stopTicker(slot: Slot): void {
    if (slot.ticker !== null) clearTimeout(slot.ticker);
    slot.ticker = null;
  }

  private emit(e: UpstreamEvent): void {
    const onEvent = this.handlers.onEvent;
    if (onEvent === undefined) return;
    try {
      onEvent.call(this.handlers, e);
    } catch (err) {
      this.slots[e.upstream]?.log.error('upstream event handler threw', {
        kind: e.kind,
        err: err instanceof Error ? err.message : String(err),
      });
    }
  }
}

function validate(o: UpstreamOptions): void {
  if (o.urls.length === 0) throw new RangeError('upstream: at least one URL is required');
  for (const url of o.urls) {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw new RangeError(`upstream: not a URL: ${redactUrl(url)}`);
    }
    if (u.protocol !== 'ws:' && u.protocol !== 'wss:') {
      throw new RangeError(`upstream: URL must be ws:// or wss://: ${redactUrl(url)}`);
    }
  }
  const positive: (keyof UpstreamOptions)[] = [
    'pingIntervalMs',
    'stallTimeoutMs',
    'backoffInitialMs',
    'backoffMaxMs',
    'healthyResetMs',
    'maxFrameBytes',
    'connectTimeoutMs',
  ];
  for (const k of positive) {
    const v = o[k];
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) {
      throw new RangeError(`upstream: ${k} must be a positive number, got ${String(v)}`);
    }
  }
  if (o.backoffInitialMs > o.backoffMaxMs) throw new RangeError('upstream: backoffInitialMs > backoffMaxMs');
  const summary = o.failureSummaryMs;
  if (summary !== undefined && !(Number.isFinite(summary) && summary > 0)) {
    throw new RangeError(`upstream: failureSummaryMs must be a positive number, got ${String(summary)}`);
  }
}

/** Codes Node and OpenSSL give a failed certificate check or TLS handshake. */
const TLS_CODES = new Set([
  'EPROTO',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * What a connect that never reached `open` ran into, in words an operator can act on: the host cannot be resolved,
 * the port refuses, TLS failed, the upgrade got an HTTP status instead of 101, or nothing answered in time.
 */
function describeConnectError(err: Error & { code?: string }, slot: Slot, connectTimeoutMs: number): [UpstreamFailure, string] {
  const code = err.code ?? '';
  const msg = slot.lastError;
  const u = new URL(slot.url);
  const host = u.hostname;
  const port = u.port !== '' ? u.port : u.protocol === 'wss:' ? '443' : '80';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_FAIL' || code === 'EAI_NODATA') {
    const temporary = code === 'EAI_AGAIN' ? ' (the resolver did not answer; temporary)' : '';
    return ['dns', `cannot resolve host ${host} (${code})${temporary}`];
  }
  if (code === 'ECONNREFUSED') return ['refused', `connection refused by ${host}:${port} (nothing listening)`];
  const status = /^Unexpected server response: (\d+)$/.exec(msg);
  if (status !== null) return ['http_status', `upgrade refused: HTTP ${status[1]} (not a WebSocket endpoint, or the path or key is wrong)`];
  if (msg === 'Opening handshake has timed out') return ['timeout', `opening handshake timed out after ${connectTimeoutMs} ms (--connect-timeout-ms)`];
  if (code === 'ETIMEDOUT') return ['timeout', `connection to ${host}:${port} timed out (${code})`];
  if (TLS_CODES.has(code) || code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_') || /\b(TLS|SSL|certificate)\b/.test(msg)) {
    // OpenSSL messages carry "...:SSL routines:<function>:<reason>:<file>"; the reason is the readable part.
    const ssl = /SSL routines:[^:]*:([^:]+):/.exec(msg);
    return ['tls', `TLS error: ${ssl !== null ? ssl[1] : msg}${code !== '' ? ` (${code})` : ''}`];
  }
  return ['network', `cannot connect to ${host}:${port}: ${msg !== '' ? msg : code}`];
}

/** An interval in words: whole seconds as `60 s`, anything else in ms. */
function interval(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

/** Milliseconds as seconds with one decimal (log wording). */
function seconds(ms: number): string {
  return (ms / 1000).toFixed(1);
}

/** An error's message with the raw URL and its secrets replaced (ws and node put addresses into messages). */
function safeMessage(err: unknown, slot: Slot): string {
  let msg = err instanceof Error ? err.message : String(err);
  if (slot.connectUrl !== slot.url && msg.includes(slot.connectUrl)) msg = msg.split(slot.connectUrl).join(slot.safeUrl);
  if (msg.includes(slot.url)) msg = msg.split(slot.url).join(slot.safeUrl);
  const u = new URL(slot.url);
  for (const secret of [u.password, u.username, u.search]) {
    if (secret.length > 1 && msg.includes(secret)) msg = msg.split(secret).join('redacted');
  }
  return msg;
}

function noop(): void {}
