// Per-thread event-loop load for /metrics: utilisation (share of time busy) and delay (p99, max) over the last
// second, for the main thread (RPC, stream, ingest) and each worker that reports its own numbers.
import { performance, type EventLoopUtilization, type IntervalHistogram } from 'node:perf_hooks';
import type { Metrics, ThreadName } from './metrics.js';

/** One thread's load over the window since its previous sample. */
export interface ThreadLoad {
  utilization: number;
  lagP99Seconds: number;
  lagMaxSeconds: number;
}

/** A thread that can be sampled; null when it is not running. */
export type ThreadLoadSource = () => ThreadLoad | null;

/** The main thread's load: libuv's idle time for utilisation, its delay histogram (Metrics.mainLoopDelay) for lag. */
export function mainThreadLoad(delay: IntervalHistogram): { sample: ThreadLoadSource; stop(): void } {
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  return {
    sample() {
      const now = performance.eventLoopUtilization();
      const d = performance.eventLoopUtilization(now, last);
      last = now;
      // The histogram measures timer lateness over the resolution; nanoseconds.
      const load = { utilization: d.utilization, lagP99Seconds: delay.percentile(99) / 1e9, lagMaxSeconds: delay.max / 1e9 };
      delay.reset();
      return load;
    },
    stop: () => delay.disable(),
  };
}

/** Samples every source once a second into `metrics.threads`; returns the stop function. */
export function watchThreads(metrics: Metrics, sources: Readonly<Record<ThreadName, ThreadLoadSource>>, intervalMs = 1000): () => void {
  const tick = (): void => {
    for (const [name, sample] of Object.entries(sources) as [ThreadName, ThreadLoadSource][]) {
      const load = sample();
      const m = metrics.threads[name];
      if (load === null || m === undefined) continue;
      m.utilization.set(load.utilization);
      m.lagP99Seconds.set(load.lagP99Seconds);
      m.lagMaxSeconds.set(load.lagMaxSeconds);
    }
  };
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
