// The upstream WebSocket client pool: one independent `ws` connection per URL, liveness, stall detection, backoff.
// Hands frames over untouched (never decodes or parses them) and never lets a socket error escape the pool.
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { redactUrl, type Logger } from '../log.js';
import { Backoff, backoffDelayMs } from './backoff.js';

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

/** Connection lifecycle events, for metrics and health. */
export type UpstreamEvent =
  | { kind: 'connected'; upstream: number; resumedAfter: ResumePosition | null }
  | { kind: 'resume_too_old'; upstream: number; position: ResumePosition }
  | { kind: 'disconnected'; upstream: number; code: number; reason: string; retryInMs: number; attempt: number }
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

/** Per-URL connection state; every field is set here so the shape stays stable. */
class Slot {
  ws: WebSocket | null = null;
  open = false;
  /** Consecutive connections that failed, or ended before delivering a frame or staying up `healthyResetMs`. */
  readonly backoff: Backoff;
  openedAtMs = 0;
  lastActivityMs = 0;
  lastPingMs = 0;
  healthy = false;
  oversized = false;
  lastError = '';
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
  ) {
    this.backoff = new Backoff(backoffInitialMs, backoffMaxMs);
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
      return new Slot(i, url, safeUrl, log.child({ upstream: i, url: safeUrl }), opts.backoffInitialMs, opts.backoffMaxMs);
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
      });
    } catch (err) {
      // Unreachable after validate(), but a throw here must still become a retry, not a crash.
      slot.lastError = safeMessage(err, slot);
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
      slot.healthy = false;
      slot.openedAtMs = now;
      slot.lastActivityMs = now;
      slot.lastPingMs = now;
      this.armTicker(slot, now);
      if (pos === null) slot.log.info('upstream connected', { attempt: slot.backoff.attempt });
      else slot.log.info(`upstream connected; resuming after flashblock ${pos.blockNumber}-${pos.index}`, { attempt: slot.backoff.attempt });
      this.emit({ kind: 'connected', upstream: index, resumedAfter: pos });
    });
    // Hot path: one clock read, one field write, one object for the handler.
    ws.on('message', (data, isBinary) => {
      const now = performance.now();
      slot.lastActivityMs = now;
      // The first frame proves the upstream is back: a drop after it is retried from backoffInitialMs (issue 17).
      if (!slot.healthy) {
        slot.healthy = true;
        slot.backoff.reset();
      }
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
        slot.log.warn(`upstream sent a frame larger than ${this.opts.maxFrameBytes} bytes; closing (1009)`);
        this.emit({ kind: 'oversized', upstream: index });
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
      slot.log.warn(`upstream silent for ${Math.round(silentMs)} ms (no frame, no pong); reconnecting`);
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
    if (!slot.healthy && now - slot.openedAtMs >= this.opts.healthyResetMs) {
      slot.healthy = true;
      slot.backoff.reset();
    }
    this.armTicker(slot, now);
  }

  /** Arms `slot`'s housekeeping for its first deadline after `now`: the next ping, the stall verdict, the reset. */
  private armTicker(slot: Slot, now: number): void {
    let due = Math.min(slot.lastPingMs + this.opts.pingIntervalMs, slot.lastActivityMs + this.opts.stallTimeoutMs);
    if (!slot.healthy) due = Math.min(due, slot.openedAtMs + this.opts.healthyResetMs);
    slot.ticker = setTimeout(() => this.tick(slot), Math.max(1, Math.ceil(due - now)));
  }

  private scheduleRetry(slot: Slot, code: number, reason: string): void {
    if (this.stopped) {
      slot.log.debug(`upstream closed (${code}) on stop`);
      return;
    }
    const retryInMs = slot.backoff.fail();
    const attempt = slot.backoff.attempt;
    const fields: Record<string, unknown> = { code, attempt, retryInMs };
    if (reason !== '') fields.reason = reason;
    if (slot.lastError !== '') fields.err = slot.lastError;
    const line = `upstream closed (${code}); reconnecting in ${retryInMs} ms (attempt ${attempt})`;
    if (slot.backoff.settled) slot.log.debug(line, fields);
    else slot.log.warn(line, fields);
    slot.retryTimer = setTimeout(() => this.connect(slot), retryInMs);
    this.emit({ kind: 'disconnected', upstream: slot.index, code, reason, retryInMs, attempt });
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
