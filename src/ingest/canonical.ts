// Canonical head tracking: follows the node's head (newHeads over WebSocket when configured, else polling) and
// settles pending blocks that became canonical. Knows the node only through NodeClient and a ws URL.
import WebSocket from 'ws';
import type { Logger } from '../log.js';
import { redactUrl } from '../log.js';
import type { NodeClient } from '../node/client.js';
import { NodeError } from '../node/client.js';
import { Backoff } from './backoff.js';

export interface CanonicalOptions {
  pollMs: number;
  /** ws:// URL for eth_subscribe newHeads; '' = poll only. */
  wsUrl: string;
  /** How many blocks back a jump is settled one by one (beyond that, settled at once without reorg checks). */
  maxCatchUpBlocks: number;
  /** newHeads WebSocket: connect timeout, first reconnect delay (doubles) and its cap. */
  wsConnectTimeoutMs: number;
  wsRetryInitialMs: number;
  wsRetryMaxMs: number;
  /**
   * A head below the one followed so far is believed (the node was reset, restored, or replaced behind its URL) once
   * every poll for this long (and at least REWIND_CONFIRM_POLLS polls in a row) answered lower: a node behind a load
   * balancer a block behind its peer is not a rewind. Default 2000.
   */
  rewindConfirmMs?: number;
}

/** Polls in a row that must answer a lower head before it is believed. */
export const REWIND_CONFIRM_POLLS = 3;

/** What the tracker drives: the pipeline's settle() and what it holds. */
export interface CanonicalSink {
  settle(n: number, canonicalTxHashes: ReadonlySet<string> | null): void;
  /** Whether a preconfirmed block at this height is held (only then are its canonical hashes fetched). */
  holds(n: number): boolean;
  /** The head settled so far (-1 at start). */
  canonical(): number;
  /** The node's head went back from `from` to `to` (confirmed): everything above `to` is void. */
  rewind?(from: number, to: number): void;
  /**
   * The node answered after not answering (`downMs`: for how long), or for the first time (`downMs` null when it never
   * failed before). Once per transition.
   */
  reachable?(downMs: number | null, head: number): void;
  /** The node stopped answering (the first failed poll after an answer, or at start). Once per transition. */
  unreachable?(error: string): void;
}

/** Follows the canonical head. */
export class CanonicalTracker {
  private timer: NodeJS.Timeout | null = null;
  private ws: WebSocket | null = null;
  private busy = false;
  private stopped = false;
  private wanted = -1;
  /** Last time the node answered (performance.now()), for readiness. */
  lastOkMs = 0;
  /** Head the node reported last. */
  head = -1;
  private readonly wsBackoff: Backoff;
  /** performance.now() of the first failed poll of the current outage, null while the node answers. */
  private downSinceMs: number | null = null;
  /** Whether the node ever answered a poll. */
  private everAnswered = false;
  /** A lower head being confirmed: since when, how many polls in a row, the newest lower head. */
  private lower: { sinceMs: number; polls: number; head: number } | null = null;
  /** Incremented by each rewind: a catch-up that awaited across one settles nothing of the old chain. */
  private epoch = 0;

  constructor(
    private readonly node: NodeClient,
    private readonly sink: CanonicalSink,
    private readonly opts: CanonicalOptions,
    private readonly log: Logger,
  ) {
    this.wsBackoff = new Backoff(opts.wsRetryInitialMs, opts.wsRetryMaxMs);
  }

  /** Starts polling (and the newHeads subscription when a WebSocket URL is set). */
  start(): void {
    if (!this.node.enabled) return;
    this.timer = setInterval(() => void this.poll(), this.opts.pollMs);
    this.timer.unref();
    void this.poll();
    if (this.opts.wsUrl !== '') this.connectWs();
  }

  /** Stops everything; no further node calls. */
  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.ws?.terminate();
    this.ws = null;
  }

  private connectWs(): void {
    if (this.stopped) return;
    const ws = new WebSocket(this.opts.wsUrl, { perMessageDeflate: false, handshakeTimeout: this.opts.wsConnectTimeoutMs });
    this.ws = ws;
    ws.on('open', () => {
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['newHeads'] }));
      this.log.info('node newHeads subscription open', { url: redactUrl(this.opts.wsUrl) });
    });
    ws.on('message', (data: Buffer) => {
      this.wsBackoff.reset(); // the node answered: a later drop is retried from the start
      try {
        const msg = JSON.parse(data.toString('utf8')) as { id?: number; result?: unknown; params?: { result?: { number?: string } } };
        // The subscription is live from its answer on: a head the node made before it (while the socket connected)
        // comes with no notification, so poll once now rather than wait for the next poll.
        if (msg.id === 1 && typeof msg.result === 'string') void this.poll();
        const num = msg.params?.result?.number;
        if (typeof num === 'string') this.advance(Number.parseInt(num.slice(2), 16));
      } catch {
        /* not ours to judge: polling still runs */
      }
    });
    ws.on('error', () => {});
    ws.on('close', () => {
      if (this.stopped) return;
      const delay = this.wsBackoff.fail();
      this.log.limited('warn', 'newheads-close', 10_000, `node newHeads subscription closed; reconnecting in ${delay} ms (polling continues)`);
      setTimeout(() => this.connectWs(), delay).unref();
    });
  }

  private async poll(): Promise<void> {
    try {
      const hex = await this.node.call<string>('eth_blockNumber', [], Math.max(this.opts.pollMs * 10, 1000));
      if (this.stopped) return;
      const now = performance.now();
      this.lastOkMs = now;
      const n = Number.parseInt(hex.slice(2), 16);
      if (this.downSinceMs !== null || !this.everAnswered) {
        const downMs = this.downSinceMs === null ? null : now - this.downSinceMs;
        this.downSinceMs = null;
        this.everAnswered = true;
        this.sink.reachable?.(downMs, n);
      }
      this.judgeLower(n, now);
      this.advance(n);
    } catch (e) {
      if (this.stopped) return; // a poll cut short by the stop (the node client closed): not a failure
      const why = e instanceof NodeError ? e.message : String(e);
      this.lower = null;
      if (this.downSinceMs === null) {
        this.downSinceMs = performance.now();
        this.sink.unreachable?.(why);
      } else {
        this.log.debug('canonical head poll failed again', { error: why });
      }
    }
  }

  /** A polled head below the one followed: counted until it is confirmed (then the sink rewinds), else forgotten. */
  private judgeLower(n: number, now: number): void {
    if (!Number.isSafeInteger(n) || n >= this.wanted || this.wanted < 0) {
      this.lower = null;
      return;
    }
    if (this.lower === null) this.lower = { sinceMs: now, polls: 0, head: n };
    this.lower.polls++;
    this.lower.head = n;
    if (this.lower.polls < REWIND_CONFIRM_POLLS || now - this.lower.sinceMs < (this.opts.rewindConfirmMs ?? 2000)) return;
    const from = this.wanted;
    this.lower = null;
    this.epoch++;
    this.wanted = n;
    this.head = n;
    this.sink.rewind?.(from, n);
  }

  /** Notes a new head and settles the blocks up to it, one at a time, in order. */
  advance(n: number): void {
    if (!Number.isSafeInteger(n) || n <= this.wanted) return;
    this.wanted = n;
    this.head = n;
    this.lastOkMs = performance.now();
    if (!this.busy) void this.catchUp();
  }

  private async catchUp(): Promise<void> {
    this.busy = true;
    const epoch = this.epoch;
    try {
      while (!this.stopped && this.sink.canonical() < this.wanted) {
        const from = this.sink.canonical();
        const target = this.wanted;
        if (from < 0 || target - from > this.opts.maxCatchUpBlocks) {
          // First head, or a jump too long to check block by block: settle all but the newest without reorg checks.
          const floor = target - 1;
          if (floor > from) {
            this.sink.settle(floor, null);
            continue;
          }
        }
        const k = from + 1;
        let hashes: Set<string> | null = null;
        if (this.sink.holds(k)) {
          try {
            const block = await this.node.call<{ transactions: string[] } | null>('eth_getBlockByNumber', ['0x' + k.toString(16), false]);
            if (block === null || epoch !== this.epoch) break; // the node's view is behind its own head report (retry next poll), or it rewound
            hashes = new Set(block.transactions.map((h) => h.toLowerCase()));
          } catch (e) {
            if (this.stopped || epoch !== this.epoch) break; // cut short by the stop or a rewind: nothing to settle
            this.log.limited('warn', 'canonical-fetch', 10_000, 'could not fetch canonical block; settling without reorg check', { block: k, error: (e as Error).message });
          }
        }
        this.sink.settle(k, hashes);
      }
    } finally {
      this.busy = false;
    }
  }
}
