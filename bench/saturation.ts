// Throughput to saturation: the daemon (child process) ingesting the Base-shaped stream (a brotli flashblock every
// 200 ms) while an open-loop client raises a fixed request rate of the pending-state part of the RPC mix step by step, until
// p99 passes 10 ms or the achieved rate falls below 95 % of the target. The knee = the highest step that passed.
// Baseline, same run and steps: a bare uWS app (child process) answering each method with a constant copy of the
// daemon's own answer to it (same bytes per method) — the ceiling of this load generator on this machine.
import type { ChildProcess } from 'node:child_process';
import { startAnvil } from '../scripts/devnet/anvil.js';
import { startReplayServer } from '../test/helpers/replay-server.js';
import { mixBody, RPC_MIX, type Fresh, type MixReport } from './clients.js';
import { streamFrames, type Frame } from './combined.js';
import { fmt, forkTs, LatencyHistogram, request, sleep, waitExit, writePlot, type BenchOptions, type BenchResult, type BenchRow, runStandalone } from './lib.js';
import { lineChart } from './svg.js';

const P99_LIMIT_MS = 10;
const LOADERS = 2;
const LOCAL_MIX = RPC_MIX.filter((m) => !m.method.includes('forwarded'));

interface Step {
  target: number;
  achieved: number;
  p50: number;
  p99: number;
  max: number;
  errors: number;
  ok: boolean;
  /** p99 by method, ms */
  byMethod: Record<string, number>;
}

/** Steps the rate on `url` (split over the load children) until a step fails. */
async function stepUp(url: string, loaders: ChildProcess[], rates: number[], seconds: number): Promise<Step[]> {
  const steps: Step[] = [];
  for (const target of rates) {
    await Promise.all(loaders.map((c) => request(c, { mix: { url, rate: target / loaders.length, methods: LOCAL_MIX.map((m) => m.method) } }, 'started')));
    await sleep(seconds * 1000);
    const reps = await Promise.all(loaders.map((c) => request<MixReport>(c, { report: true }, 'report')));
    const h = new LatencyHistogram();
    let errors = 0;
    let completed = 0;
    let secs = 0;
    const per = new Map<string, LatencyHistogram>();
    for (const r of reps) {
      for (const [m, v] of Object.entries(r.byMethod)) {
        const x = per.get(m) ?? new LatencyHistogram();
        x.merge(v.latency);
        per.set(m, x);
      }
      completed += r.completed;
      secs = Math.max(secs, r.seconds);
      for (const m of Object.values(r.byMethod)) {
        h.merge(m.latency);
        errors += m.errors;
      }
    }
    const achieved = completed / secs;
    const p99 = h.percentile(99);
    const ok = p99 <= P99_LIMIT_MS && achieved >= 0.95 * target && errors === 0;
    steps.push({ target, achieved, p50: h.percentile(50), p99, max: h.max, errors, ok, byMethod: Object.fromEntries([...per].map(([m, x]) => [m, x.percentile(99)])) });
    process.stderr.write(`  ${url} ${target} req/s → ${fmt(achieved)} req/s, p99 ${fmt(p99)} ms${ok ? '' : ' (saturated)'}\n`);
    if (!ok) break;
    await sleep(300);
  }
  return steps;
}

const knee = (steps: Step[]): number => steps.filter((s) => s.ok).at(-1)?.achieved ?? 0;

export async function run(opts: BenchOptions): Promise<BenchResult> {
  const seconds = opts.quick ? 2 : 5;
  const factor = opts.quick ? 2 : Math.SQRT2;
  const rates: number[] = [];
  for (let r = 500; r <= 128_000; r *= factor) rates.push(Math.round(r / 100) * 100);
  // enough distinct frames for the longest possible run of the daemon subject
  const { frames } = streamFrames(Math.ceil((rates.length * (seconds + 0.6) + 5) * 5));

  const anvil = await startAnvil();
  const upstream = await startReplayServer();
  // --max-pending-blocks 2: the stream's blocks never become canonical on anvil; hold what a live daemon holds.
  // --max-ahead-ms 0: the stream starts at block 30,000,000, far ahead of anvil's head; no far-ahead bound here.
  const daemon = forkTs('daemon-child.ts', ['--flashblocks-url', upstream.url, '--node-rpc-url', anvil.url, '--port', '0', '--metrics-port', '0', '--log-level', 'error', '--max-pending-blocks', '2', '--max-ahead-ms', '0', '--execution', 'false']);
  const ceiling = forkTs('daemon-child.ts', ['--static']);
  const loaders = Array.from({ length: LOADERS }, () => forkTs('clients.ts', ['--rpc-mix']));
  let replay: NodeJS.Timeout | null = null;
  try {
    const ready = await request<{ rpcPort: number }>(daemon, {}, 'ready', 60_000);
    await upstream.waitForClients(1, 10_000);
    const url = `http://127.0.0.1:${ready.rpcPort}/`;
    let fresh: Fresh = { txHashes: [], senders: [] };
    let i = 0;
    const sendNext = (): void => {
      const f: Frame | undefined = frames[i++];
      if (f === undefined) return;
      upstream.send(f.data, { binary: true });
      fresh = { txHashes: f.txHashes.slice(-50), senders: f.senders.slice(-50) };
      for (const c of loaders) c.send({ fresh });
    };
    sendNext();
    replay = setInterval(sendNext, 200);
    await sleep(1000);
    // One answer of each method, mid-block, for the ceiling to send back: the same sizes (a pending block of ~1,000
    // hashes is ~70 KB; a receipt ~1 KB), so both move the same bytes through the load generator.
    const samples: Record<string, string> = {};
    for (const m of LOCAL_MIX) {
      const body = mixBody(m.method, 0, fresh);
      samples[(JSON.parse(body) as { method: string }).method] = await (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).text();
    }
    const sample = samples.eth_getTransactionReceipt!;
    const ours = await stepUp(url, loaders, rates, seconds);
    clearInterval(replay);
    replay = null;
    daemon.send({ stop: true });
    await waitExit(daemon);

    const c = await request<{ rpcPort: number }>(ceiling, { constant: sample, constants: samples }, 'ready', 30_000);
    const base = await stepUp(`http://127.0.0.1:${c.rpcPort}/`, loaders, rates, seconds);
    const ko = knee(ours);
    const kb = knee(base);
    const failed = (s: Step[]): string => {
      const last = s.at(-1);
      if (last === undefined || last.ok) return 'no step failed up to the highest rate tried';
      const methods = Object.entries(last.byMethod).map(([m, v]) => `${m} ${fmt(v)}`).join(', ');
      return `at ${fmt(last.target)} req/s: achieved ${fmt(last.achieved)} req/s, p99 ${fmt(last.p99)} ms${last.errors > 0 ? `, ${last.errors} errors` : ''} (p99 by method, ms: ${methods})`;
    };
    const rows: BenchRow[] = [
      { name: 'knee: highest fixed rate with p99 ≤ 10 ms, pending-state RPC mix while ingesting', value: ko, unit: 'req/s', baseline: { label: 'uWS constant answers of the same sizes', value: kb }, verdict: kb === 0 ? 'the ceiling saturated at the first step too (machine busy?)' : `${fmt((ko / kb) * 100)} % of the ceiling's knee` },
      ...ours.map((s): BenchRow => ({
        name: `flashblocksd at ${fmt(s.target)} req/s: achieved, p50 / p99 / max`,
        value: s.achieved,
        unit: 'req/s',
        display: `${fmt(s.achieved)} req/s, ${fmt(s.p50)} / ${fmt(s.p99)} / ${fmt(s.max)} ms`,
        verdict: s.ok ? 'below the knee' : `saturated${s.errors > 0 ? ` (${s.errors} errors)` : ''}`,
      })),
    ];
    const plots = [
      writePlot('saturation-p99', lineChart({
        title: 'Throughput to saturation: p99 latency vs fixed request rate', xLabel: 'target rate, req/s (log)', yLabel: 'p99 latency, ms (log)', logX: true, logY: true,
        series: [
          { name: 'flashblocksd (pending mix, ingesting)', points: ours.map((s) => [s.target, Math.max(0.5, s.p99)]) },
          { name: 'uWS constant answers (same sizes)', points: base.map((s) => [s.target, Math.max(0.5, s.p99)]), dashed: true },
        ],
        hLines: [{ y: P99_LIMIT_MS, label: 'p99 10 ms' }],
      }), 'p99 latency against fixed request rate, flashblocksd and the uWS constant-response ceiling'),
    ];
    return {
      title: 'Throughput to saturation',
      rows,
      plots,
      notes:
        `Load: ${LOADERS} child processes (bench/clients.ts --rpc-mix), open loop at a fixed rate paced every 1 ms over keep-alive connections, ` +
        `latency from each request's scheduled time (no coordinated omission), ${seconds} s per step, ` +
        `rates ×${fmt(factor)} from 500 req/s; a step fails when p99 > ${P99_LIMIT_MS} ms, the achieved rate is < 95 % of the target, or a request fails. ` +
        `Mix (the pending-state part of the combined mix): ${LOCAL_MIX.map((m) => `${m.method} ${m.weight}`).join(', ')} (weights), about the 50 newest ` +
        `transactions and their senders; the daemon ingests the 200 ms brotli stream of the combined suite meanwhile. (autocannon's overallRate sends each ` +
        `connection's quota in a burst at the start of every second, so it measures bursts, not a fixed rate.) flashblocksd ${failed(ours)}; ceiling ${failed(base)}.` +
        (ko === 0 ? ' No step passed: the knee is below the first rate.' : ''),
    };
  } finally {
    if (replay !== null) clearInterval(replay);
    if (daemon.exitCode === null) daemon.kill();
    ceiling.kill();
    for (const c of loaders) c.kill();
    await upstream.close();
    await anvil.stop();
  }
}

runStandalone(import.meta.url, run);
