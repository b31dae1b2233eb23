// The one reconnect policy: capped exponential delays with full jitter above a floor, reset once a connection proves
// useful. Used by the upstream pool and the canonical tracker's newHeads socket; knows nothing of sockets or timers.

/**
 * Delay before reconnect attempt `attempt` (1-based): uniformly random in [initialMs, ceiling], where the ceiling
 * doubles from initialMs per attempt and is capped at maxMs. The floor keeps a flapping peer from being hammered.
 */
export function backoffDelayMs(attempt: number, initialMs: number, maxMs: number): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.min(Math.max(attempt - 1, 0), 30));
  return Math.round(initialMs + Math.random() * (ceiling - initialMs));
}

/** Failures (since the last reset) retried with the ceiling held at QUICK_CEILING_MS before it may climb on. */
const QUICK_ATTEMPTS = 30;
/**
 * The ceiling during the first QUICK_ATTEMPTS failures: a peer that comes back after a restart of a few seconds is
 * found within ~0.5 s (issue 17: next frame within 1 s p99), at the cost of ~3 refused connects a second meanwhile.
 */
const QUICK_CEILING_MS = 500;

/**
 * Consecutive failures of one connection and the delay they call for. `fail()` after every connection that ended
 * or never opened; `reset()` once a connection delivered something (its first frame or message). The first
 * QUICK_ATTEMPTS failures wait at most QUICK_CEILING_MS (never less than `initialMs`); a peer that keeps failing
 * after that climbs to `maxMs` and stays there until a connection succeeds.
 */
export class Backoff {
  /** Failures since the last reset (the attempt number of the next reconnect). */
  attempt = 0;
  /**
   * Settled: the peer is known gone (a retired chain, a long absence), so every retry waits the cap, jittered down
   * by at most a tenth (many daemons do not hit an endpoint in step) — no quick retries, no storm.
   */
  settled = false;

  constructor(
    readonly initialMs: number,
    readonly maxMs: number,
  ) {
    if (!(initialMs > 0) || !(maxMs >= initialMs)) throw new RangeError(`backoff: need 0 < initialMs (${initialMs}) ≤ maxMs (${maxMs})`);
  }

  /** Counts one failure and returns how long to wait before the next attempt. */
  fail(): number {
    this.attempt++;
    if (this.settled) return Math.max(this.initialMs, Math.round(this.maxMs * (0.9 + 0.1 * Math.random())));
    const cap = this.attempt <= QUICK_ATTEMPTS ? Math.min(this.maxMs, Math.max(this.initialMs, QUICK_CEILING_MS)) : this.maxMs;
    return backoffDelayMs(this.attempt, this.initialMs, cap);
  }

  /** The connection proved healthy: the next failure waits `initialMs` again. */
  reset(): void {
    this.attempt = 0;
  }
}

/** What one failure of an episode calls for in the log. */
export type EpisodeStep = 'first' | 'summary' | 'repeat';

/** A finished episode: how long the peer was failing and how many attempts failed meanwhile. */
export interface EpisodeEnd {
  durationMs: number;
  failures: number;
}

/**
 * One run of consecutive failures of a connection, from the first failure until a connection proves healthy (the
 * same moment `Backoff.reset()` is called). Decides how loud each failure is: the first one is said once (warn), the
 * rest are repeats (debug) except one summary per `summaryIntervalMs`. Pure: the caller passes the wall clock.
 */
export class FailureEpisode {
  active = false;
  /** Wall-clock time (ms since the epoch) of the episode's first failure. */
  startedAtMs = 0;
  /** Failures since the episode started. */
  failures = 0;
  /** The last failure's description. */
  lastReason = '';
  private lastSummaryMs = 0;

  constructor(readonly summaryIntervalMs: number) {
    if (!(summaryIntervalMs > 0)) throw new RangeError(`failure episode: summaryIntervalMs must be positive, got ${summaryIntervalMs}`);
  }

  /** Counts one failure described by `reason` and says how loudly to report it. */
  fail(nowMs: number, reason: string): EpisodeStep {
    this.failures++;
    this.lastReason = reason;
    if (!this.active) {
      this.active = true;
      this.startedAtMs = nowMs;
      this.lastSummaryMs = nowMs;
      this.failures = 1;
      return 'first';
    }
    if (nowMs - this.lastSummaryMs >= this.summaryIntervalMs) {
      this.lastSummaryMs = nowMs;
      return 'summary';
    }
    return 'repeat';
  }

  /** The connection proved healthy: ends the episode and returns it, or null when none was running. */
  end(nowMs: number): EpisodeEnd | null {
    if (!this.active) return null;
    this.active = false;
    const ended = { durationMs: Math.max(0, nowMs - this.startedAtMs), failures: this.failures };
    this.failures = 0;
    this.lastReason = '';
    return ended;
  }
}
