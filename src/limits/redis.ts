// The link to the Redis that shared limits live in (ioredis): whether limits are shared right now, the one warn/info
// log per outage, flashblocksd_redis_up and flashblocksd_redis_fallbacks_total. Never makes a request wait long: no
// offline queue, a short command timeout; callers fall back to local limits whenever `up` is false or a command fails.
import { Redis } from 'ioredis';
import type { Logger } from '../log.js';
import { redactUrl } from '../log.js';
import type { Metrics } from '../metrics/metrics.js';

/** Settings of the link; the defaults suit the daemon, tests shorten the probe. */
export interface RedisLinkOptions {
  /** A command that has not answered after this long fails (the caller then uses local limits). */
  readonly commandTimeoutMs?: number;
  readonly connectTimeoutMs?: number;
  /** While a command failed on a connection ioredis still calls ready (a hung Redis), a PING probes it this often. */
  readonly probeMs?: number;
}

/**
 * One ioredis client plus the shared/local decision. `up` is true while the client is connected and ready and no
 * command has failed since; listeners registered with `onUp` run on every return to shared limits (the connection
 * leases re-register what this instance holds then).
 */
export class RedisLink {
  readonly client: Redis;
  private readonly url: string;
  /** null until the first connect attempt settled. */
  private state: boolean | null = null;
  /** A command failed although ioredis reports `ready`: local limits until a PING answers. */
  private suspect = false;
  private probe: NodeJS.Timeout | null = null;
  private readonly probeMs: number;
  private readonly upListeners: (() => void)[] = [];
  private closed = false;

  constructor(
    url: string,
    private readonly metrics: Metrics,
    private readonly log: Logger,
    opts: RedisLinkOptions = {},
  ) {
    this.url = redactUrl(url);
    this.probeMs = opts.probeMs ?? 1000;
    metrics.redisUp.set(0);
    this.client = new Redis(url, {
      // Nothing queues while disconnected: a command fails at once and the request is decided locally.
      enableOfflineQueue: false,
      commandTimeout: opts.commandTimeoutMs ?? 250,
      connectTimeout: opts.connectTimeoutMs ?? 1000,
      maxRetriesPerRequest: 0,
      // Reconnect forever, quickly at first, at most every 2 s.
      retryStrategy: (times: number) => Math.min(50 * times, 2000),
      lazyConnect: false,
    });
    this.client.on('ready', () => {
      this.suspect = false;
      this.mark(true, null);
    });
    this.client.on('error', (e: Error) => this.mark(false, e.message));
    this.client.on('close', () => this.mark(false, 'connection closed'));
  }

  /** Whether limits are shared through Redis right now. */
  get up(): boolean {
    return this.state === true && !this.suspect && this.client.status === 'ready';
  }

  /** Runs `fn` on every return to shared limits (after the first connect too). */
  onUp(fn: () => void): void {
    this.upListeners.push(fn);
  }

  /** A command failed (timeout, connection lost): local limits until Redis answers again. */
  failed(err: unknown): void {
    if (this.closed) return;
    this.suspect = true;
    this.mark(false, err instanceof Error ? err.message : String(err));
    if (this.probe !== null) return;
    this.probe = setInterval(() => {
      if (this.client.status !== 'ready') return; // ioredis reconnects by itself and emits ready
      this.client.ping().then(
        () => {
          this.suspect = false;
          this.mark(true, null);
        },
        () => undefined,
      );
    }, this.probeMs);
    this.probe.unref();
  }

  private mark(up: boolean, why: string | null): void {
    if (this.closed) return;
    if (up && this.probe !== null) {
      clearInterval(this.probe);
      this.probe = null;
    }
    if (this.state === up) return;
    const first = this.state === null;
    this.state = up;
    this.metrics.redisUp.set(up ? 1 : 0);
    if (up) {
      this.log.info(first ? 'redis connected; connection limits and rate quotas are shared' : 'redis reachable again; connection limits and rate quotas are shared again', { redis: this.url });
      for (const fn of this.upListeners) fn();
    } else {
      this.metrics.redisFallbacks.inc();
      this.log.warn('redis unreachable; connection limits and rate quotas are local to this instance until it returns (reconnecting)', { redis: this.url, reason: why });
    }
  }

  /**
   * Closes the client; no more logs or metric changes. QUIT is answered after every command sent before it (the
   * releases of the connections a drain just closed), so they reach Redis; a dead or hung Redis fails it at once or
   * within the command timeout.
   */
  async close(): Promise<void> {
    this.closed = true;
    if (this.probe !== null) clearInterval(this.probe);
    this.probe = null;
    try {
      if (this.client.status === 'ready') await this.client.quit();
    } catch {
      // unreachable: nothing more to flush
    } finally {
      this.client.disconnect();
    }
  }
}
