// Shared limits benchmark: what --redis-url costs (a) per stream connection: upgrade → admitted (the server counts it
// as a subscriber and sends it frames; with Redis the socket opens first and is admitted on Redis's answer) with the
// per-IP lease taken in Redis vs counted locally; (b) per JSON-RPC request under --rate-limit-rps (high enough never to refuse):
// quota in Redis (leased in chunks, the daemon's way), quota in Redis with one round trip per request (chunk 1),
// quota in memory, and no quota. All in one run, against one real redis-server on loopback, interleaved in rounds.
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import type { us_listen_socket } from 'uWebSockets.js';
import { loadConfig } from '../src/config.js';
import { ConnectionLeases } from '../src/limits/connections.js';
import { RequestQuota } from '../src/limits/quota.js';
import { RedisLink } from '../src/limits/redis.js';
import { silentLogger } from '../src/log.js';
import { createMetrics } from '../src/metrics/metrics.js';
import { loadUws } from '../src/binaries.js';
import { mountLocalStream as mountStream } from '../src/stream/local.js';
import type { MountedStream } from '../src/stream/server.js';
import { unichainMessages, unichainRpcBlock } from '../test/helpers/fixtures.js';
import { feed, makePipeline } from '../test/helpers/ingest.js';
import { startRedis } from '../test/helpers/redis.js';
import { startRpc, type RpcHarness } from '../test/helpers/rpc-harness.js';
import { fmt, percentile, postLoad, runStandalone, sequentialPosts, type BenchOptions, type BenchResult, type BenchRow } from './lib.js';

const RPS = 10_000_000; // the flag's maximum: never refuses here
const signed = (x: number): string => (x >= 0 ? '+' : '−') + fmt(Math.abs(x));

interface StreamSubject {
  url: string;
  stream: MountedStream;
  close(): Promise<void>;
}

async function streamSubject(leases: ConnectionLeases | null): Promise<StreamSubject> {
  const uws = loadUws();
  const config = { ...loadConfig([], {}), streamMaxPerIp: 1_000_000 };
  const app = uws.App();
  const stream = mountStream(app, { options: config, events: makePipeline().pipeline.events, metrics: createMetrics({ version: 'b', commit: 'b' }), log: silentLogger, leases });
  const ls = await new Promise<us_listen_socket>((resolve, reject) => app.listen('127.0.0.1', 0, (s) => (s === false ? reject(new Error('listen')) : resolve(s))));
  return {
    url: `ws://127.0.0.1:${uws.us_socket_local_port(ls)}/flashblocks`,
    stream,
    async close() {
      await stream.drain(0);
      uws.us_listen_socket_close(ls);
    },
  };
}

/**
 * Sequential connects: time from the client's upgrade request to its admission (open, and counted by the server as a
 * subscriber: from then on it is sent frames), then a close awaited on both sides.
 */
async function connectMicros(s: StreamSubject, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const ws = new WebSocket(s.url, { perMessageDeflate: false });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    while (s.stream.subscriberCount() === 0) await new Promise((r) => setImmediate(r));
    out.push((performance.now() - t0) * 1000);
    const closed = new Promise<void>((r) => ws.once('close', () => r()));
    ws.close();
    await closed;
    while (s.stream.subscriberCount() > 0) await new Promise((r) => setImmediate(r));
  }
  return out;
}

/** Runs the suite; `quick` keeps it near 40 s. */
export async function run(opts: BenchOptions): Promise<BenchResult> {
  const redis = await startRedis();
  const metrics = createMetrics({ version: 'b', commit: 'b' });
  const link = new RedisLink(redis.url, metrics, silentLogger);
  const closers: (() => Promise<void>)[] = [];
  try {
    const t0 = performance.now();
    while (!link.up) {
      if (performance.now() - t0 > 10_000) throw new Error('redis link not up');
      await new Promise((r) => setTimeout(r, 20));
    }

    // ── (a) per connection ──
    const leases = new ConnectionLeases(link, { limit: 1_000_000 });
    closers.push(async () => leases.close());
    const shared = await streamSubject(leases);
    const local = await streamSubject(null);
    closers.push(() => shared.close(), () => local.close());
    const nConn = opts.quick ? 400 : 2000;
    const rounds = 4;
    await connectMicros(shared, 50);
    await connectMicros(local, 50);
    const connShared: number[] = [];
    const connLocal: number[] = [];
    for (let r = 0; r < rounds; r++) {
      connLocal.push(...(await connectMicros(local, nConn / rounds)));
      connShared.push(...(await connectMicros(shared, nConn / rounds)));
    }

    // ── (b) per request ──
    const variants: { name: string; h: RpcHarness }[] = [];
    const mk = async (name: string, quota: (() => RequestQuota) | null): Promise<void> => {
      const h = await startRpc(quota === null ? {} : { quota });
      closers.push(() => h.close());
      for (const m of unichainMessages()) feed(h.pipeline, m);
      variants.push({ name, h });
    };
    await mk('no quota', null);
    await mk('quota in memory', () => new RequestQuota({ rps: RPS }, null));
    await mk('quota in Redis, leased (the daemon)', () => new RequestQuota({ rps: RPS }, link));
    await mk('quota in Redis, one round trip per request', () => new RequestQuota({ rps: RPS, chunkPoints: 1 }, link));
    const txHash = (unichainRpcBlock() as { transactions: { hash: string }[] }).transactions[1]!.hash;
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getTransactionReceipt', params: [txHash] });
    const seconds = opts.quick ? 3 : 8;
    const nSeq = opts.quick ? 2000 : 8000;
    const rps = new Map<string, number[]>();
    const seq = new Map<string, number[]>();
    for (const v of variants) {
      rps.set(v.name, []);
      seq.set(v.name, []);
      await sequentialPosts(v.h.url, body, 200, { warmup: 100, requireOk: true });
    }
    for (let r = 0; r < 2; r++) {
      for (const v of variants) {
        // Pipelining 1: a request answered asynchronously (a Redis round trip) must not have another queued behind it
        // on the same connection (see bench/rpc.ts); the same for every variant.
        const res = await postLoad(v.h.url, body, seconds / 2, 32, { workers: 1, pipelining: 1 });
        rps.get(v.name)!.push(res.requests.average);
        seq.get(v.name)!.push(...(await sequentialPosts(v.h.url, body, nSeq / 2, { warmup: 100, requireOk: true })));
      }
    }
    const avg = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
    const offRps = avg(rps.get('no quota')!);
    const offP50 = percentile(seq.get('no quota')!, 50);
    const rows: BenchRow[] = [
      {
        name: 'stream upgrade → admitted p50, per-IP lease in Redis',
        value: percentile(connShared, 50),
        unit: 'µs',
        baseline: { label: 'counted locally (no --redis-url)', value: percentile(connLocal, 50) },
        verdict: `${signed(percentile(connShared, 50) - percentile(connLocal, 50))} µs per connection (one MULTI round trip; release on close is not waited for)`,
      },
      {
        name: 'stream upgrade → admitted p99, per-IP lease in Redis',
        value: percentile(connShared, 99),
        unit: 'µs',
        baseline: { label: 'counted locally', value: percentile(connLocal, 99) },
        verdict: `${signed(percentile(connShared, 99) - percentile(connLocal, 99))} µs`,
      },
    ];
    for (const v of variants.slice(1)) {
      const r = avg(rps.get(v.name)!);
      const p = percentile(seq.get(v.name)!, 50);
      rows.push(
        { name: `pending eth_getTransactionReceipt req/s, ${v.name}`, value: r, unit: 'req/s', baseline: { label: 'no quota', value: offRps }, verdict: `${fmt((r / offRps) * 100)} % of no quota` },
        { name: `pending eth_getTransactionReceipt p50 (sequential), ${v.name}`, value: p, unit: 'µs', baseline: { label: 'no quota', value: offP50 }, verdict: `${signed(p - offP50)} µs per request` },
      );
    }
    return {
      title: 'Shared limits (Redis)',
      rows,
      notes:
        `One redis-server 7 on loopback (no persistence), same 2 cores. Connections: ${nConn} sequential ws connects per subject in ${rounds} interleaved rounds ` +
        `(50 warm-up), each closed before the next; time from the client's request to its admission (open and counted as a subscriber). Requests: --rate-limit-rps ${fmt(RPS)} (never refuses), ` +
        `autocannon 32 connections, pipelining 1, ${seconds} s per variant in 2 interleaved rounds; p50 from ${nSeq} sequential keep-alive requests per variant. ` +
        'The daemon leases ⌈rps/20⌉ points per limiter call, so at this rps Redis is asked about once per window per client IP; ' +
        '"one round trip per request" is the same quota with a chunk of 1 (what every request would cost without leasing).',
    };
  } finally {
    for (const c of closers.reverse()) await c().catch(() => undefined);
    await link.close();
    await redis.stop();
  }
}

runStandalone(import.meta.url, run);
