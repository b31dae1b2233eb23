// Request-rate quotas (--rate-limit-rps) per client IP and per API key: rate-limiter-flexible's RateLimiterRedis
// (shared by every instance on the Redis) or RateLimiterMemory (this instance; also the fallback while Redis is away).
// Owns the Redis keys `flashblocksd:rate:*`; knows nothing of HTTP or WebSocket.
//
// Points are taken from the limiter in chunks ("leases"), not one per request: a chunk of ⌈rps/20⌉ points is consumed
// at once and spent locally until it runs out or its one-second window ends, so only one request in a chunk waits
// for a Redis round trip; the others are decided synchronously (bench/limits.ts measures both). Points taken are
// counted in Redis when taken, so the shared limit is never exceeded; the cost is that points an instance took but
// did not spend before the window ended are lost to the others, i.e. a key spread over N instances may get up to
// N × (chunk − 1) fewer requests a second than the limit (5 % of it per instance). A key over its quota is refused
// locally, without Redis, until its window ends. With rps ≤ 20 the chunk is 1: exact, one round trip per request.
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { RedisLink } from './redis.js';

export interface QuotaOptions {
  /** Requests per second per IP and per API key; 0 = no quota. */
  readonly rps: number;
  /** Points taken per limiter call (default ⌈rps/20⌉; 1 = every request asks the limiter). */
  readonly chunkPoints?: number;
}

/** Points taken for one key and not yet spent, valid until the limiter's window for that key ends. */
class Lease {
  left = 0;
  untilMs = 0;
  /** The limiter refused: the key is over its quota until untilMs (no limiter call before then). */
  refused = false;
  /** The limiter call in flight for this key: later requests wait for it instead of calling again. */
  inflight: Promise<void> | null = null;
}

/** What a check decided: allowed, or refused because of the IP's or the API key's quota. */
export type QuotaVerdict = 'ok' | 'ip' | 'key';

const SWEEP_EVERY = 1024;

/** Per-IP and per-API-key request quotas (see the file comment). */
export class RequestQuota {
  private readonly memory: RateLimiterMemory;
  private readonly redis: RateLimiterRedis | null;
  private readonly leases = new Map<string, Lease>();
  private readonly chunk: number;
  private readonly points: number;
  private calls = 0;

  constructor(
    opts: QuotaOptions,
    private readonly link: RedisLink | null,
  ) {
    this.points = opts.rps;
    this.chunk = Math.max(1, Math.min(opts.rps, opts.chunkPoints ?? Math.ceil(opts.rps / 20)));
    this.memory = new RateLimiterMemory({ points: opts.rps, duration: 1, keyPrefix: 'q' });
    this.redis =
      link === null
        ? null
        : new RateLimiterRedis({ storeClient: link.client, points: opts.rps, duration: 1, keyPrefix: 'flashblocksd:rate', rejectIfRedisNotReady: true });
  }

  /** The quota key of an API key (hashed: Redis never stores the key itself). */
  static apiKeyId(apiKey: string): string {
    return 'k:' + createHash('sha256').update(apiKey).digest('hex').slice(0, 32);
  }

  /**
   * Spends one request of `ip`'s quota and, when `apiKeyId` is set (see apiKeyId), of that key's. Synchronous while
   * a lease covers both; a Promise when a limiter (maybe Redis) must be asked. Never rejects.
   */
  check(ip: string, apiKeyId: string | null): QuotaVerdict | Promise<QuotaVerdict> {
    if (++this.calls % SWEEP_EVERY === 0) this.sweep();
    const a = this.take('i:' + ip);
    if (apiKeyId === null) return a === true ? 'ok' : a === false ? 'ip' : a.then((ok) => (ok ? 'ok' : 'ip'));
    if (a === false) return 'ip';
    if (a === true) {
      const b = this.take(apiKeyId);
      return b === true ? 'ok' : b === false ? 'key' : b.then((ok) => (ok ? 'ok' : 'key'));
    }
    return a.then(async (ok) => (!ok ? 'ip' : (await this.take(apiKeyId)) ? 'ok' : 'key'));
  }

  /** One point of `key`: from its lease when it has one, else from the limiter (a new lease). */
  private take(key: string): boolean | Promise<boolean> {
    let lease = this.leases.get(key);
    if (lease === undefined) this.leases.set(key, (lease = new Lease()));
    if (lease.inflight === null && performance.now() < lease.untilMs) {
      if (lease.left > 0) {
        lease.left--;
        return true;
      }
      if (lease.refused) return false;
    }
    return this.renew(key, lease);
  }

  private async renew(key: string, lease: Lease): Promise<boolean> {
    while (lease.inflight !== null) await lease.inflight;
    if (performance.now() < lease.untilMs) {
      if (lease.left > 0) {
        lease.left--;
        return true;
      }
      if (lease.refused) return false;
    }
    let done!: () => void;
    lease.inflight = new Promise<void>((r) => (done = r));
    try {
      const r = await this.consume(key);
      // The limiter counted the whole chunk; what was still under the limit before it is ours.
      const granted = Math.max(0, Math.min(this.chunk, this.points - (r.consumedPoints - this.chunk)));
      lease.untilMs = performance.now() + Math.max(1, r.msBeforeNext);
      lease.left = granted > 0 ? granted - 1 : 0;
      lease.refused = granted < this.chunk;
      return granted > 0;
    } finally {
      lease.inflight = null;
      done();
    }
  }

  /** The limiter's answer for a chunk of `key` (a rejection is an answer too); Redis failures fall back to memory. */
  private async consume(key: string): Promise<RateLimiterRes> {
    const link = this.link;
    if (this.redis !== null && link !== null && link.up) {
      try {
        return await this.redis.consume(key, this.chunk);
      } catch (e) {
        if (e instanceof RateLimiterRes) return e;
        link.failed(e);
      }
    }
    try {
      return await this.memory.consume(key, this.chunk);
    } catch (e) {
      if (e instanceof RateLimiterRes) return e;
      throw e;
    }
  }

  /** Drops leases whose window ended (bounds the map by the keys active in the last second). */
  private sweep(): void {
    if (this.leases.size < SWEEP_EVERY) return;
    const now = performance.now();
    for (const [k, l] of this.leases) if (l.inflight === null && l.untilMs <= now) this.leases.delete(k);
  }
}
