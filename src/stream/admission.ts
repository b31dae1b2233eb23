// Admission of raw-stream connections: the global cap, per-IP and per-API-key limits, counted once for every place
// the stream is served (the main port, the stream port on the main thread, every stream thread), optionally shared
// with other instances through Redis leases. Owns the counts; knows nothing of sockets.
import type { ConnectionLeases, LeaseVerdict } from '../limits/connections.js';

/**
 * Why a connection was not admitted: a limit (labels of flashblocksd_stream_refusals_total), or `unavailable` when a
 * stream thread's question got no answer from the main thread in time (or a shared acquire failed unexpectedly).
 */
export type AdmissionRefusal = 'ip_limit' | 'key_limit' | 'global_limit' | 'unavailable';

/** A ticket (a positive integer, handed back to `release`) for an admitted connection, or why it was refused. */
export type Admit = number | AdmissionRefusal;

/** What the stream server asks before it upgrades a connection, and tells when the connection has gone. */
export interface Admission {
  /**
   * Admits one connection from `ip` (with API key `key`, null without keys); may wait for Redis (a promise: the main
   * thread's counts with `--redis-url` up) or the main thread (a stream thread, blocked). The promise never rejects.
   */
  acquire(ip: string, key: string | null): Admit | Promise<Admit>;
  /** Ends the admission of `ticket` (a closed connection, or an upgrade that did not happen). */
  release(ticket: number): void;
}

export interface AdmissionLimits {
  /** Connections per client IP and per API key (--stream-max-per-ip). */
  readonly streamMaxPerIp: number;
  /** Connections in all (--stream-max-subscribers). */
  readonly streamMaxSubscribers: number;
}

/** One admitted connection: what its release takes back. */
interface Held {
  readonly ip: string;
  readonly key: string | null;
  /** Its lease in the shared counts ('' without Redis). */
  readonly member: string;
}

/**
 * The counts of this instance (main thread). Without Redis, or while it is unreachable, they decide; with Redis up the
 * per-IP and per-key decisions are the shared leases' (the local counts are kept for when Redis goes away).
 */
export class LocalAdmission implements Admission {
  private readonly perIp = new Map<string, number>();
  private readonly perKey = new Map<string, number>();
  private readonly held = new Map<number, Held>();
  /** Shared acquires waiting for Redis: they count against the cap, so that waiting connections are bounded too. */
  private asking = 0;
  private nextTicket = 0;

  constructor(
    private readonly limits: AdmissionLimits,
    private readonly leases: ConnectionLeases | null = null,
  ) {}

  /** Connections admitted and not yet released. */
  get count(): number {
    return this.held.size;
  }

  /** Admissions waiting for Redis's answer. */
  get asked(): number {
    return this.asking;
  }

  private verdict(ip: string, key: string | null): 'ok' | AdmissionRefusal {
    if (this.held.size + this.asking >= this.limits.streamMaxSubscribers) return 'global_limit';
    if ((this.perIp.get(ip) ?? 0) >= this.limits.streamMaxPerIp) return 'ip_limit';
    if (key !== null && (this.perKey.get(key) ?? 0) >= this.limits.streamMaxPerIp) return 'key_limit';
    return 'ok';
  }

  private take(ip: string, key: string | null, member: string): number {
    this.perIp.set(ip, (this.perIp.get(ip) ?? 0) + 1);
    if (key !== null) this.perKey.set(key, (this.perKey.get(key) ?? 0) + 1);
    const ticket = ++this.nextTicket;
    this.held.set(ticket, { ip, key, member });
    return ticket;
  }

  acquire(ip: string, key: string | null): Admit | Promise<Admit> {
    const local = this.verdict(ip, key);
    const leases = this.leases;
    if (local === 'global_limit') return local;
    if (leases === null || !leases.shared) {
      if (local !== 'ok') return local;
      if (leases === null) return this.take(ip, key, '');
      const member = leases.member();
      leases.hold(member, ip, key);
      return this.take(ip, key, member);
    }
    const member = leases.member();
    this.asking++;
    return leases.acquire(member, ip, key).then((v: LeaseVerdict): Admit => {
      this.asking--;
      if (v === 'local') {
        // Redis failed during the call: this instance's counts decide, as when it is down.
        const again = this.verdict(ip, key);
        if (again !== 'ok') return again;
        leases.hold(member, ip, key);
        return this.take(ip, key, member);
      }
      if (v !== 'ok') return v;
      if (this.held.size >= this.limits.streamMaxSubscribers) {
        leases.release(member);
        return 'global_limit';
      }
      return this.take(ip, key, member);
    }, (): Admit => {
      this.asking--;
      return 'unavailable';
    });
  }

  release(ticket: number): void {
    const h = this.held.get(ticket);
    if (h === undefined) return;
    this.held.delete(ticket);
    if (h.member !== '') this.leases?.release(h.member);
    const n = (this.perIp.get(h.ip) ?? 1) - 1;
    if (n <= 0) this.perIp.delete(h.ip);
    else this.perIp.set(h.ip, n);
    if (h.key !== null) {
      const k = (this.perKey.get(h.key) ?? 1) - 1;
      if (k <= 0) this.perKey.delete(h.key);
      else this.perKey.set(h.key, k);
    }
  }
}

/**
 * A stream thread asks the main thread and waits, blocked, for the answer: its upgrade handler then upgrades
 * synchronously. (This uWS build closes a socket upgraded later, from `res.cork`, whenever the memory its old HTTP
 * state occupied reads as "connection: close" — uNetworking/uWebSockets#1929: one subscriber in a few hundred.)
 *
 * The answer goes through shared memory: `[request, value]` as Int32. The thread writes a request id (> 0) and posts
 * the question; the main thread claims the request (id → BUSY), writes the value, then publishes it (BUSY → −id) and
 * wakes the thread. A thread that stops waiting takes the request back (id → 0) first, so a late answer finds it gone
 * and releases what it admitted: a ticket is never lost and never handed to the wrong request.
 */
export const ADMISSION_SLOT_BYTES = 8;
const REQ = 0;
const VALUE = 1;
const BUSY = 0x7fffffff;
const IDS = 0x3fffffff;
const REFUSALS: readonly AdmissionRefusal[] = ['ip_limit', 'key_limit', 'global_limit', 'unavailable'];
const encode = (a: Admit): number => (typeof a === 'number' ? a : -1 - REFUSALS.indexOf(a));
const decode = (v: number): Admit => (v > 0 ? v : REFUSALS[-1 - v]!);

/** Thread side: asks and waits (a worker thread may block; the main thread never does). */
export class AdmissionAsker {
  private readonly slot: Int32Array;
  private lastId = 0;
  constructor(
    shared: SharedArrayBuffer,
    private readonly waitMs: number,
  ) {
    this.slot = new Int32Array(shared);
  }

  /** Posts the question (`post`, with its id) and returns the answer, or `unavailable` after `waitMs` without one. */
  ask(post: (id: number) => void): Admit {
    const id = (this.lastId % IDS) + 1;
    this.lastId = id;
    const slot = this.slot;
    Atomics.store(slot, REQ, id);
    post(id);
    const deadline = performance.now() + this.waitMs;
    for (;;) {
      const now = Atomics.load(slot, REQ);
      if (now === -id) return decode(Atomics.load(slot, VALUE));
      if (now === id) {
        const left = deadline - performance.now();
        if (left <= 0 && Atomics.compareExchange(slot, REQ, id, 0) === id) return 'unavailable';
        Atomics.wait(slot, REQ, id, Math.max(left, 0));
      } else {
        // BUSY: the main thread is between claiming and publishing (two stores); it is not waited on for long.
        Atomics.wait(slot, REQ, now, 1);
      }
    }
  }
}

/**
 * Main side: publishes the answer to request `id` and returns true, or returns false when the thread stopped waiting
 * for it (the caller then releases a ticket it holds).
 */
export function answerAdmission(shared: SharedArrayBuffer, id: number, a: Admit): boolean {
  const slot = new Int32Array(shared);
  if (Atomics.compareExchange(slot, REQ, id, BUSY) !== id) return false;
  Atomics.store(slot, VALUE, encode(a));
  Atomics.store(slot, REQ, -id);
  Atomics.notify(slot, REQ);
  return true;
}
