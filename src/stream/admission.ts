// Admission of raw-stream connections: the global cap, per-IP and per-API-key limits, counted once for every place
// the stream is served (the main port, the stream port on the main thread, every stream thread), optionally shared
// with other instances through Redis leases. Owns the counts; knows nothing of sockets.
import type { ConnectionLeases, LeaseVerdict } from '../limits/connections.js';

/** Why a connection was not admitted (labels of flashblocksd_stream_refusals_total). */
export type AdmissionRefusal = 'ip_limit' | 'key_limit' | 'global_limit';

/** A ticket (a positive integer, handed back to `release`) for an admitted connection, or why it was refused. */
export type Admit = number | AdmissionRefusal;

/** What the stream server asks before it upgrades a connection, and tells when the connection has gone. */
export interface Admission {
  /** Admits one connection from `ip` (with API key `key`, null without keys); may wait for Redis or the main thread. */
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
  private nextTicket = 0;

  constructor(
    private readonly limits: AdmissionLimits,
    private readonly leases: ConnectionLeases | null = null,
  ) {}

  /** Connections admitted and not yet released. */
  get count(): number {
    return this.held.size;
  }

  private verdict(ip: string, key: string | null): 'ok' | AdmissionRefusal {
    if (this.held.size >= this.limits.streamMaxSubscribers) return 'global_limit';
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
    return leases.acquire(member, ip, key).then((v: LeaseVerdict): Admit => {
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
