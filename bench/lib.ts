// Shared benchmark helpers: timing loops, percentiles, and the result shape bench/run.ts writes to BENCHMARKS.md.
import { performance } from 'node:perf_hooks';

/** One row of a benchmark table: a subject measured next to its baseline in the same run. */
export interface BenchRow {
  /** What was measured, e.g. "parse+apply 200-tx flashblock". */
  name: string;
  /** Measured value of the subject and its unit ("µs", "ms", "req/s", "MiB"). */
  value: number;
  unit: string;
  /** The baseline measured in the same run and its label, when there is one. */
  baseline?: { label: string; value: number };
  /** Human text for the ratio/target, e.g. "1.21× JSON.parse (target ≤ 1.5×)". */
  verdict?: string;
  /** true / false when the row has a DESIGN §9 target, undefined otherwise. */
  met?: boolean;
}

export interface BenchResult {
  /** Section title in BENCHMARKS.md. */
  title: string;
  rows: BenchRow[];
  /** Free text under the table: method, inputs, caveats. */
  notes?: string;
}

export interface BenchOptions {
  quick: boolean;
}

/** Percentile (0..100) of a sorted-in-place numeric array. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  values.sort((a, b) => a - b);
  const idx = Math.min(values.length - 1, Math.max(0, Math.ceil((p / 100) * values.length) - 1));
  return values[idx] as number;
}

/** Runs `fn` repeatedly for about `ms` milliseconds after a warm-up; returns per-call times in microseconds. */
export function sampleMicros(fn: () => void, ms: number, warmupMs = Math.min(200, ms / 4)): number[] {
  const warmEnd = performance.now() + warmupMs;
  while (performance.now() < warmEnd) fn();
  const out: number[] = [];
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const t0 = performance.now();
    fn();
    out.push((performance.now() - t0) * 1000);
  }
  return out;
}

/** Formats a number with a sensible number of significant digits. */
export function fmt(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  if (Math.abs(n) >= 1000) return Math.round(n).toLocaleString('en-US');
  if (Math.abs(n) >= 10) return n.toFixed(1);
  return n.toFixed(2);
}
