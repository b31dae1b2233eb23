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

/**
 * Consecutive failures of one connection and the delay they call for. `fail()` after every connection that ended
 * or never opened; `reset()` once a connection delivered something (its first frame or message), so a peer that
 * comes back after a restart is retried from `initialMs` while one that never answers climbs to `maxMs` and stays.
 */
export class Backoff {
  /** Failures since the last reset (the attempt number of the next reconnect). */
  attempt = 0;

  constructor(
    readonly initialMs: number,
    readonly maxMs: number,
  ) {
    if (!(initialMs > 0) || !(maxMs >= initialMs)) throw new RangeError(`backoff: need 0 < initialMs (${initialMs}) ≤ maxMs (${maxMs})`);
  }

  /** Counts one failure and returns how long to wait before the next attempt. */
  fail(): number {
    this.attempt++;
    return backoffDelayMs(this.attempt, this.initialMs, this.maxMs);
  }

  /** The connection proved healthy: the next failure waits `initialMs` again. */
  reset(): void {
    this.attempt = 0;
  }
}
