// Flashblock pinning for HTTP JSON-RPC: the position an answer reflects (X-Flashblock), X-Flashblock-Min parsing,
// and the bounded set of requests waiting for a flashblock not applied yet. Reads the state view and its events;
// never writes a response and never builds an envelope (the transport and the dispatcher do).
import type { CounterCell, GaugeCell, PinOutcome } from '../metrics/metrics.js';
import type { StateEvents } from '../state/events.js';
import type { BlockView, PendingView } from '../state/view.js';

/** A flashblock: block number and flashblock index within the block. */
export interface FlashblockPosition {
  readonly block: number;
  readonly index: number;
}

/** One part of a position: decimal digits or 0x-prefixed hex. */
const PART = /^(?:0[xX][0-9a-fA-F]+|[0-9]+)$/;
/** Longer header values are refused before any parsing (a safe integer has at most 16 digits, 0x + 14 hex). */
const MAX_HEADER_CHARS = 64;

function parsePart(s: string): number | null {
  if (!PART.test(s)) return null;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : null;
}

/**
 * Parses an X-Flashblock-Min value `<block>-<index>` (each part decimal or 0x hex, e.g. `30000012-7` or
 * `0x1c9c38c-0x7`; surrounding blanks ignored). Null when malformed or a part is beyond 2^53 - 1.
 */
export function parseFlashblockPosition(value: string): FlashblockPosition | null {
  if (value.length > MAX_HEADER_CHARS) return null;
  const v = value.trim();
  const dash = v.indexOf('-');
  if (dash <= 0 || dash !== v.lastIndexOf('-')) return null;
  const block = parsePart(v.slice(0, dash));
  const index = parsePart(v.slice(dash + 1));
  return block === null || index === null ? null : { block, index };
}

/** The header form of a position: `<block>-<index>` in decimal. */
export function formatFlashblockPosition(p: FlashblockPosition): string {
  return p.block + '-' + p.index;
}

/** Why a pinned request is answered with an error instead of state: see FlashblockPins.admit. */
export type PinRefusal = 'timeout' | 'full' | 'draining';

/** What a finished wait reports to the transport. */
export type PinSettle = 'ready' | PinRefusal;

/**
 * Request bodies waiting requests may hold in all: a flood of large bodies is refused before --pin-max-waiters
 * full-size bodies (5 MiB each by default) pile up.
 */
export const PIN_MAX_HELD_BYTES = 64 * 1024 * 1024;

/** A request waiting for its flashblock; opaque to the transport except for `token`. */
export class PinWaiter {
  timer: NodeJS.Timeout | null = null;
  constructor(
    readonly pos: FlashblockPosition,
    /** The transport's request, handed back to `onSettle`. */
    readonly token: unknown,
    /** Size of the body it holds while waiting. */
    readonly bytes: number,
  ) {}
}

export interface PinOptions {
  /** How long a request behind its X-Flashblock-Min waits (0 = not at all). */
  readonly pinWaitMs: number;
  /** Requests that may wait at once; more are refused at once. */
  readonly pinMaxWaiters: number;
}

/** The metric handles pinning records into. */
export interface PinMetrics {
  readonly pinWaits: Readonly<Record<PinOutcome, CounterCell>>;
  readonly pinWaiters: GaugeCell;
}

/**
 * The flashblock position of the state and the requests waiting for a newer one. Waiters are released on the
 * StateEvents they wait for (applied flashblock, settled canonical block), never by polling; each has one timer for
 * its bound. Released requests are handed to `onSettle` from a setImmediate after the apply, not inside the
 * ingest pipeline's listener call.
 */
export class FlashblockPins {
  private readonly waiters = new Set<PinWaiter>();
  private scheduled = false;
  private closed = false;
  /** Sum of the waiters' body sizes (bounded by PIN_MAX_HELD_BYTES). */
  private heldBytes = 0;
  private readonly stops: (() => void)[];
  /** The X-Flashblock value cached for one pending block at one version (bumped on every apply). */
  private cachedBlock: BlockView | null = null;
  private cachedVersion = -1;
  private cachedHeader = '';

  constructor(
    private readonly view: PendingView,
    events: StateEvents,
    private readonly opts: PinOptions,
    private readonly metrics: PinMetrics,
    /** Called once per waiter that leaves the set other than by `cancel`. */
    private readonly onSettle: (token: unknown, how: PinSettle) => void,
  ) {
    this.stops = [events.onApplied(this.wake), events.onCanonical(this.wake)];
  }

  /**
   * The X-Flashblock value for the state as it is now: `<block>-<index>` of the newest flashblock applied to the
   * block `pending` means, or '' when there is none (no block held, or the newest is broken).
   */
  header(): string {
    const b = this.view.pendingBlock();
    if (b === null) return '';
    if (b !== this.cachedBlock || b.version !== this.cachedVersion) {
      this.cachedBlock = b;
      this.cachedVersion = b.version;
      this.cachedHeader = b.number + '-' + b.lastIndex;
    }
    return this.cachedHeader;
  }

  /**
   * Whether the state is at or past `p`: (block, index) compared in that order, so any flashblock of a newer block
   * counts as past; a block the node has settled as canonical counts as past whatever its index.
   */
  reached(p: FlashblockPosition): boolean {
    if (p.block <= this.view.canonical) return true;
    const b = this.view.pendingBlock();
    if (b === null) return false;
    return b.number > p.block || (b.number === p.block && b.lastIndex >= p.index);
  }

  /**
   * Admits a request asking for at least `p`: 'now' when the state is there already; a PinWaiter when it waits
   * (its `token` comes back through `onSettle`); otherwise why it is answered with an error at once ('timeout' when
   * --pin-wait-ms is 0, 'full' at --pin-max-waiters or PIN_MAX_HELD_BYTES, 'draining' after `close`). `bytes`: the
   * size of the body the request holds while it waits. Counts the outcome.
   */
  admit(p: FlashblockPosition, token: unknown, bytes = 0): 'now' | PinRefusal | PinWaiter {
    if (this.reached(p)) {
      this.metrics.pinWaits.immediate.inc();
      return 'now';
    }
    if (this.closed) return this.refuse('draining');
    if (this.opts.pinWaitMs === 0) {
      this.metrics.pinWaits.timeout.inc();
      return 'timeout';
    }
    if (this.waiters.size >= this.opts.pinMaxWaiters || this.heldBytes + bytes > PIN_MAX_HELD_BYTES) return this.refuse('full');
    const w = new PinWaiter(p, token, bytes);
    w.timer = setTimeout(this.expire, this.opts.pinWaitMs, w);
    this.waiters.add(w);
    this.heldBytes += bytes;
    this.metrics.pinWaiters.set(this.waiters.size);
    return w;
  }

  /** Forgets a waiter without settling it (its request was aborted). Idempotent. */
  cancel(w: PinWaiter): void {
    this.remove(w);
  }

  /** Requests waiting now. */
  get waiting(): number {
    return this.waiters.size;
  }

  /** Stops waiting for good: every waiter is settled 'draining' now, later requests are refused, events dropped. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const stop of this.stops) stop();
    for (const w of [...this.waiters]) {
      this.remove(w);
      this.metrics.pinWaits.refused.inc();
      this.onSettle(w.token, 'draining');
    }
  }

  /** The error message for a request not let through: asked and current positions, and what happened. */
  notYetMessage(p: FlashblockPosition, how: PinRefusal): string {
    const cur = this.header();
    const at = cur !== '' ? `at ${cur}` : `no pending flashblock${this.view.canonical >= 0 ? ` (canonical head ${this.view.canonical})` : ''}`;
    const head = `flashblock not yet applied: asked ${formatFlashblockPosition(p)}, ${at}`;
    switch (how) {
      case 'timeout':
        return this.opts.pinWaitMs === 0 ? `${head}; not waiting (--pin-wait-ms 0); retry or ask another instance` : `${head} after waiting ${this.opts.pinWaitMs} ms (--pin-wait-ms); retry or ask another instance`;
      case 'full':
        return `${head}; ${this.waiters.size} requests already waiting (at most --pin-max-waiters ${this.opts.pinMaxWaiters}, ${PIN_MAX_HELD_BYTES / 1048576} MiB of bodies), not waiting; retry or ask another instance`;
      case 'draining':
        return `${head}; server is shutting down, retry on another instance`;
    }
  }

  private refuse(how: 'full' | 'draining'): PinRefusal {
    this.metrics.pinWaits.refused.inc();
    return how;
  }

  private remove(w: PinWaiter): boolean {
    if (!this.waiters.delete(w)) return false;
    this.heldBytes -= w.bytes;
    if (w.timer !== null) clearTimeout(w.timer);
    w.timer = null;
    this.metrics.pinWaiters.set(this.waiters.size);
    return true;
  }

  /** StateEvents listener: O(1); the waiters are checked after the ingest call returns. */
  private readonly wake = (): void => {
    if (this.scheduled || this.waiters.size === 0) return;
    this.scheduled = true;
    setImmediate(this.flush);
  };

  private readonly flush = (): void => {
    this.scheduled = false;
    for (const w of this.waiters) {
      if (!this.reached(w.pos)) continue;
      this.remove(w);
      this.metrics.pinWaits.waited.inc();
      this.onSettle(w.token, 'ready');
    }
  };

  private readonly expire = (w: PinWaiter): void => {
    w.timer = null;
    if (!this.remove(w)) return;
    // The flashblock may have been applied in this very turn, before the flush ran.
    if (this.reached(w.pos)) {
      this.metrics.pinWaits.waited.inc();
      this.onSettle(w.token, 'ready');
      return;
    }
    this.metrics.pinWaits.timeout.inc();
    this.onSettle(w.token, 'timeout');
  };
}
