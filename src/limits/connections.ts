// Connection counts shared by every instance on one Redis: per client IP and per API key, as leases. Owns the Redis
// keys `flashblocksd:conn:*`; decides nothing about sockets (the stream server asks, and counts locally as well).
//
// Why leases and not counters: a counter (INCR on connect, DECR on close) leaks forever when an instance dies without
// closing its sockets (kill -9, OOM, lost host). Here each connection is one member `<instance>:<n>` of a sorted set
// per IP and per key, scored with the time its lease ends; the owning instance renews every lease it holds on a
// heartbeat, and an acquire first drops expired members. A dead instance's connections therefore stop counting one
// lease (30 s) after its last heartbeat, and a Redis that restarted empty gets every open connection back on the next
// heartbeat (run at once when Redis returns). Scores are wall-clock ms of the instance that wrote them: clocks of the
// instances must agree to well under the lease (NTP does).
//
// Acquire is one MULTI (drop expired, add self, count): atomic without a script. Two instances racing for the last
// slot can both see limit + 1 and both refuse (one retry then succeeds); the limit is never exceeded.
//
// A member this instance no longer holds may still be in Redis: an acquire that timed out (a hung Redis runs it when
// it wakes up), or a release made while Redis was unreachable. Those are removed as soon as Redis answers again, so
// a client that went away during an outage does not count until its lease would have expired.
import { createHash, randomBytes } from 'node:crypto';
import type { RedisLink } from './redis.js';

/** What a shared acquire decided; `local` = Redis unavailable, decide with this instance's own counts. */
export type LeaseVerdict = 'ok' | 'ip_limit' | 'key_limit' | 'local';

const PREFIX = 'flashblocksd:conn:';
/** Members kept for removal once Redis is back; past this many, the rest simply expire with their lease. */
const MAX_STALE = 65_536;

export interface ConnectionLeaseOptions {
  /** Connections allowed per IP and per API key across all instances (--stream-max-per-ip). */
  readonly limit: number;
  /** A connection stops counting this long after its instance last renewed it. */
  readonly leaseMs?: number;
  /** How often held leases are renewed (well under leaseMs). */
  readonly heartbeatMs?: number;
}

/** The Redis key counting connections for `apiKey`: a hash, so that Redis never stores the key itself. */
function keyOfApiKey(apiKey: string): string {
  return `${PREFIX}key:${createHash('sha256').update(apiKey).digest('hex').slice(0, 32)}`;
}

/** Connection leases of this instance in the shared Redis (see the file comment). */
export class ConnectionLeases {
  /** Random per process: a restarted instance never renews its predecessor's leases. */
  readonly instanceId = randomBytes(6).toString('hex');
  private seq = 0;
  /** Every open connection of this instance, shared or admitted locally while Redis was away: member → its keys. */
  private readonly held = new Map<string, readonly string[]>();
  /** Members not held that Redis may still count (see the file comment): removed on the next exchange with Redis. */
  private readonly stale = new Map<string, readonly string[]>();
  private readonly limit: number;
  private readonly leaseMs: number;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly link: RedisLink,
    opts: ConnectionLeaseOptions,
  ) {
    this.limit = opts.limit;
    this.leaseMs = opts.leaseMs ?? 30_000;
    this.timer = setInterval(() => this.renew(), opts.heartbeatMs ?? 10_000);
    this.timer.unref();
    link.onUp(() => this.renew());
  }

  /** Whether acquire will ask Redis (false: decide locally now). */
  get shared(): boolean {
    return this.link.up;
  }

  /** A fresh member name for one connection. */
  member(): string {
    return `${this.instanceId}:${++this.seq}`;
  }

  private keysFor(ip: string, apiKey: string | null): readonly string[] {
    return apiKey === null ? [`${PREFIX}ip:${ip}`] : [`${PREFIX}ip:${ip}`, keyOfApiKey(apiKey)];
  }

  /**
   * Takes a lease for `member` under `ip` (and `apiKey`) unless that would exceed the limit anywhere. On `ok` the
   * lease is held until `release`; on a refusal nothing is held; on `local` nothing is held either (call `hold` if
   * the connection is admitted locally).
   */
  async acquire(member: string, ip: string, apiKey: string | null): Promise<LeaseVerdict> {
    if (!this.link.up) return 'local';
    const keys = this.keysFor(ip, apiKey);
    const now = Date.now();
    let out: [Error | null, unknown][] | null;
    try {
      const multi = this.link.client.multi();
      for (const k of keys) multi.zremrangebyscore(k, '-inf', now).zadd(k, now + this.leaseMs, member).zcard(k).pexpire(k, 2 * this.leaseMs);
      out = await multi.exec();
    } catch (e) {
      // Perhaps sent and run later (a hung Redis): removed once Redis answers again, unless hold() takes it.
      this.forget(member, keys);
      this.link.failed(e);
      return 'local';
    }
    const failure = out === null ? new Error('MULTI aborted') : (out.find((r) => r[0] !== null)?.[0] ?? null);
    if (failure !== null) {
      this.forget(member, keys);
      this.link.failed(failure);
      return 'local';
    }
    this.held.set(member, keys);
    const counts = out as [null, number][];
    if ((counts[2]?.[1] ?? 0) > this.limit) {
      this.release(member);
      return 'ip_limit';
    }
    if (keys.length > 1 && (counts[6]?.[1] ?? 0) > this.limit) {
      this.release(member);
      return 'key_limit';
    }
    return 'ok';
  }

  /** Records a connection admitted by local counts; the next renewal registers it in Redis. */
  hold(member: string, ip: string, apiKey: string | null): void {
    this.stale.delete(member);
    this.held.set(member, this.keysFor(ip, apiKey));
  }

  /** Drops the lease of a closed connection (removed from Redis now, or once it answers again). */
  release(member: string): void {
    const keys = this.held.get(member);
    if (keys === undefined) return;
    this.held.delete(member);
    if (!this.link.up) return this.forget(member, keys);
    const p = this.link.client.pipeline();
    for (const k of keys) p.zrem(k, member);
    p.exec().then(
      (out) => {
        if (out?.some((r) => r[0] !== null) ?? true) this.forget(member, keys);
      },
      () => this.forget(member, keys),
    );
  }

  /** Keeps `member` for removal once Redis answers again (bounded: past MAX_STALE it expires with its lease). */
  private forget(member: string, keys: readonly string[]): void {
    if (this.held.has(member) || this.stale.size >= MAX_STALE) return;
    this.stale.set(member, keys);
  }

  /** Members kept for removal from Redis (released or lost while it was unreachable). */
  staleCount(): number {
    return this.stale.size;
  }

  /** Connections this instance holds (shared or local). */
  heldCount(): number {
    return this.held.size;
  }

  /**
   * Renews (or, after a Redis restart, re-creates) every lease this instance holds, one ZADD per key, and removes the
   * stale members (ZREM). Runs on the heartbeat and whenever Redis is back.
   */
  renew(): void {
    if (!this.link.up || (this.held.size === 0 && this.stale.size === 0)) return;
    const p = this.link.client.pipeline();
    if (this.held.size > 0) {
      const exp = Date.now() + this.leaseMs;
      const byKey = new Map<string, (string | number)[]>();
      for (const [member, keys] of this.held) {
        for (const k of keys) {
          let args = byKey.get(k);
          if (args === undefined) byKey.set(k, (args = []));
          args.push(exp, member);
        }
      }
      for (const [k, args] of byKey) p.zadd(k, ...args).pexpire(k, 2 * this.leaseMs);
    }
    const removed = [...this.stale];
    this.stale.clear();
    for (const [member, keys] of removed) for (const k of keys) p.zrem(k, member);
    const failed = (e: unknown): void => {
      for (const [member, keys] of removed) this.forget(member, keys);
      this.link.failed(e);
    };
    p.exec().then(
      (out) => {
        const err = out?.find((r) => r[0] !== null)?.[0];
        if (err != null) failed(err);
      },
      failed,
    );
  }

  /** Stops renewing (the leases expire on their own; the stream's drain releases them first). */
  close(): void {
    clearInterval(this.timer);
  }
}
