// Fan-out latency: upstream frame sent → received by the last of 1,000 subscribers, for flashblocksd (full daemon:
// upstream ws → pipeline → uWS topic publishes), for flashblocksd with the subscribers on --stream-port (served by
// stream worker threads) and for a minimal `ws` relay, same run, same subscriber code; and the server's own CPU per
// frame (user + system, and user alone; every thread of the process) for all three. Then the fan-out alone, both
// ways: frames handed by a function call to flashblocksd's stream server (uWS topics) and to a `ws` broadcast loop,
// with no upstream socket and no ingest in the process. Measures only.
import { performance } from 'node:perf_hooks';
import type { us_listen_socket } from 'uWebSockets.js';
import WebSocket, { WebSocketServer } from 'ws';
import { defaultStreamThreads, loadConfig } from '../src/config.js';
import { startDaemon } from '../src/daemon.js';
import { silentLogger } from '../src/log.js';
import { loadUws } from '../src/native.js';
import { FanoutQueue } from '../src/state/events.js';
import type { RawFrameView } from '../src/state/view.js';
import { LocalAdmission } from '../src/stream/admission.js';
import { mountStream } from '../src/stream/server.js';
import { AccumulatingSink } from '../src/stream/sink.js';
import { unichainMessages } from '../test/helpers/fixtures.js';
import { freePort } from '../test/helpers/rpc-harness.js';
import { absNow, fmt, frameKey, LatencyHistogram, percentile, sleep, SubscriberPool, writePlot, type BenchOptions, type BenchResult, runStandalone } from './lib.js';
import { cdfChart, cdfPoints } from './svg.js';

const SUBSCRIBERS = 1000;
/** Padding of the large-frame runs of the fan-out alone (to ~32 KiB), and their frame interval. */
const LARGE_PAD_BYTES = 30 * 1024;
const LARGE_INTERVAL_MS = 100;
const CHILDREN = 2;
const faster = (r: number): string => (r >= 1 ? `${fmt(r)}× faster than the ws relay` : `${fmt(1 / r)}× slower than the ws relay`);

/** Distinct valid flashblock frames: the Unichain capture re-numbered as consecutive blocks. */
function makeFrames(n: number): Buffer[] {
  const msgs = unichainMessages();
  const out: Buffer[] = [];
  for (let b = 0; out.length < n; b++) {
    const blockNumber = 40_000_000 + b;
    for (const m of msgs) {
      const c = structuredClone(m) as Record<string, unknown>;
      c.payload_id = '0x' + blockNumber.toString(16).padStart(16, '0');
      (c.metadata as Record<string, unknown>).block_number = blockNumber;
      if (c.base !== null) (c.base as Record<string, unknown>).block_number = '0x' + blockNumber.toString(16);
      out.push(Buffer.from(JSON.stringify(c)));
    }
  }
  return out.slice(0, n);
}

interface Measured {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** last-of-1,000 latency per frame, ms */
  perFrame: number[];
  all: LatencyHistogram;
  rssPer1000MiB: number;
  incomplete: number;
  /** CPU of the subscriber processes and of the server process while frames flowed, % of one core */
  clientCpuPct: number;
  serverCpuPct: number;
  /** CPU time of the server process (user + system, µs) per frame, scaled to 1,000 subscribers; and its system share. */
  serverCpuUsPerFrame: number;
  /** The same, user-space time only (the kernel's send cost, the floor for every subject, left out). */
  serverUserUsPerFrame: number;
  serverSystemShare: number;
}

interface Subject {
  /** Starts the server subscribed to `upstreamUrl`; resolves with the URL subscribers connect to. */
  start(upstreamUrl: string): Promise<string>;
  stop(): Promise<void>;
  /** When set, frames are handed to the server by this call instead of through the upstream socket. */
  feed?(frame: Buffer): void;
}

async function measure(subject: Subject, pool: SubscriberPool, frames: Buffer[], warmup: number, intervalMs: number): Promise<Measured> {
  const upstream = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
  await new Promise<void>((r) => upstream.once('listening', () => r()));
  const upUrl = `ws://127.0.0.1:${(upstream.address() as { port: number }).port}/`;
  const connected = new Promise<WebSocket>((r) => upstream.once('connection', (ws) => r(ws)));
  const subUrl = await subject.start(upUrl);
  // A subject fed by function call never connects upstream.
  const up = subject.feed === undefined ? await connected : null;
  await sleep(200);
  const rssBefore = process.memoryUsage().rss;
  await pool.start(subUrl, SUBSCRIBERS, 'raw');
  await sleep(300);
  const rssAfter = process.memoryUsage().rss;

  const sentAt = new Map<string, number>();
  const cpu0 = process.cpuUsage();
  const wall0 = absNow();
  for (const f of frames) {
    sentAt.set(frameKey(f), absNow());
    if (subject.feed !== undefined) subject.feed(f);
    else up!.send(f, { binary: false });
    await sleep(intervalMs);
  }
  await sleep(500);
  const cpu = process.cpuUsage(cpu0);
  const wall = absNow() - wall0;
  const rep = await pool.report(sentAt);
  const lat: number[] = [];
  let incomplete = 0;
  frames.forEach((f, i) => {
    if (i < warmup) return;
    const k = frameKey(f);
    const e = rep.last.get(k);
    if (e === undefined || e[1] < SUBSCRIBERS) {
      incomplete++;
      return;
    }
    lat.push(e[0] - sentAt.get(k)!);
  });
  await subject.stop();
  for (const c of upstream.clients) c.terminate();
  await new Promise<void>((r) => upstream.close(() => r()));
  return {
    p50Ms: percentile(lat, 50),
    p99Ms: percentile(lat, 99),
    maxMs: percentile(lat, 100),
    perFrame: lat,
    all: rep.all,
    rssPer1000MiB: ((rssAfter - rssBefore) / (1024 * 1024)) * (1000 / SUBSCRIBERS),
    incomplete,
    clientCpuPct: (rep.cpuMs / rep.wallMs) * 100,
    serverCpuPct: ((cpu.user + cpu.system) / 1000 / wall) * 100,
    serverCpuUsPerFrame: ((cpu.user + cpu.system) / frames.length) * (1000 / SUBSCRIBERS),
    serverUserUsPerFrame: (cpu.user / frames.length) * (1000 / SUBSCRIBERS),
    serverSystemShare: cpu.system / Math.max(1, cpu.user + cpu.system),
  };
}

/** The daemon; with `streamThreads` set, the subscribers connect to --stream-port served by that many threads. */
function flashblocksd(streamThreads: number | null = null): Subject {
  let stop: () => Promise<void> = () => Promise.resolve();
  return {
    async start(upstreamUrl) {
      const streamPort = streamThreads === null ? 0 : await freePort();
      const config = {
        ...loadConfig([], {}),
        host: '127.0.0.1',
        port: 0,
        metricsPort: 0,
        flashblocksUrls: [upstreamUrl],
        execution: false,
        nodeRpcUrl: 'http://127.0.0.1:9',
        streamMaxPerIp: SUBSCRIBERS * 2,
        streamMaxSubscribers: SUBSCRIBERS * 2,
        streamPort,
        streamThreads: streamThreads ?? 0,
      };
      const d = await startDaemon(config, { log: silentLogger });
      stop = () => d.stop();
      return `ws://127.0.0.1:${streamPort > 0 ? streamPort : d.rpcPort}/flashblocks`;
    },
    stop: () => stop(),
  };
}

function wsRelay(): Subject {
  let wss: WebSocketServer | null = null;
  let client: WebSocket | null = null;
  return {
    async start(upstreamUrl) {
      const server = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
      wss = server;
      await new Promise<void>((r) => server.once('listening', () => r()));
      const c = new WebSocket(upstreamUrl, { perMessageDeflate: false });
      client = c;
      c.on('message', (data: Buffer, isBinary: boolean) => {
        for (const s of server.clients) if (s.readyState === WebSocket.OPEN) s.send(data, { binary: isBinary });
      });
      await new Promise<void>((r) => c.once('open', () => r()));
      return `ws://127.0.0.1:${(server.address() as { port: number }).port}/`;
    },
    async stop() {
      client?.terminate();
      const server = wss;
      if (server === null) return;
      for (const s of server.clients) s.terminate();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** The fan-out alone, flashblocksd's way: its stream server (uWS topic shards, main-thread settings), frames handed in. */
function streamAlone(): Subject {
  const uWS = loadUws();
  const listeners = new Set<(f: RawFrameView) => void>();
  let stop: () => Promise<void> = () => Promise.resolve();
  let index = 0;
  return {
    async start() {
      const app = uWS.App();
      const options = { ...loadConfig([], {}), streamMaxPerIp: SUBSCRIBERS * 2, streamMaxSubscribers: SUBSCRIBERS * 2 };
      const stream = mountStream(app, {
        options,
        frames: (fn) => {
          listeners.add(fn);
          return () => listeners.delete(fn);
        },
        fanout: new FanoutQueue(),
        admission: new LocalAdmission(options),
        sink: new AccumulatingSink(),
        log: silentLogger,
      });
      const listen = await new Promise<us_listen_socket>((resolve, reject) => app.listen('127.0.0.1', 0, (s) => (s === false ? reject(new Error('listen failed')) : resolve(s))));
      stop = async () => {
        await stream.drain(0);
        uWS.us_listen_socket_close(listen);
      };
      return `ws://127.0.0.1:${uWS.us_socket_local_port(listen)}/flashblocks`;
    },
    feed(data) {
      const f: RawFrameView = { data, isBinary: false, blockNumber: 1, index: index++, receivedAtMs: performance.now() };
      for (const fn of listeners) fn(f);
    },
    stop: () => stop(),
  };
}

/** The fan-out alone, the `ws` way: a WebSocketServer sending each frame handed in to every client. */
function relayAlone(): Subject {
  let wss: WebSocketServer | null = null;
  return {
    async start() {
      const server = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
      wss = server;
      await new Promise<void>((r) => server.once('listening', () => r()));
      return `ws://127.0.0.1:${(server.address() as { port: number }).port}/`;
    },
    feed(data) {
      for (const s of wss!.clients) if (s.readyState === WebSocket.OPEN) s.send(data, { binary: false });
    },
    async stop() {
      const server = wss;
      if (server === null) return;
      for (const s of server.clients) s.terminate();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** Runs the three subjects with the same 1,000 subscribers (two child processes) and frame schedule. */
export async function run(opts: BenchOptions): Promise<BenchResult> {
  const frameCount = opts.quick ? 150 : 1000;
  const warmup = opts.quick ? 20 : 50;
  const intervalMs = opts.quick ? 20 : 25;
  const frames = makeFrames(frameCount);
  if (new Set(frames.map(frameKey)).size !== frames.length) throw new Error('fanout: frames are not distinguishable by frameKey');
  const pool = new SubscriberPool(CHILDREN);
  try {
    const ours = await measure(flashblocksd(), pool, frames, warmup, intervalMs);
    const streamThreads = defaultStreamThreads();
    const threaded = await measure(flashblocksd(streamThreads), pool, frames, warmup, intervalMs);
    const relay = await measure(wsRelay(), pool, frames, warmup, intervalMs);
    const alone = await measure(streamAlone(), pool, frames, warmup, intervalMs);
    const relayAloneRun = await measure(relayAlone(), pool, frames, warmup, intervalMs);
    const userRatio = relay.serverUserUsPerFrame / ours.serverUserUsPerFrame;
    const aloneUserRatio = relayAloneRun.serverUserUsPerFrame / alone.serverUserUsPerFrame;
    const aloneRatio = relayAloneRun.p99Ms / alone.p99Ms;
    // The same frames padded to 32 KiB (a Base-sized brotli frame), 10 a second: uWS writes messages of 16 KiB and
    // more within the publish call, copying each into each subscriber's send buffer; ws writes the one buffer (writev).
    const large = frames.slice(0, Math.min(frames.length, 300)).map((f) => Buffer.concat([f.subarray(0, f.length - 1), Buffer.from(`,"_pad":"${'x'.repeat(LARGE_PAD_BYTES)}"}`)]));
    const aloneLarge = await measure(streamAlone(), pool, large, warmup, LARGE_INTERVAL_MS);
    const relayAloneLarge = await measure(relayAlone(), pool, large, warmup, LARGE_INTERVAL_MS);
    const ratio = relay.p99Ms / ours.p99Ms;
    const threadsLabel = `stream port on ${streamThreads} worker thread${streamThreads === 1 ? '' : 's'}`;
    const plot = writePlot('fanout-cdf', cdfChart(`Fan-out: upstream → last of ${fmt(SUBSCRIBERS)} subscribers, per frame`, 'ms (log)', [
      { name: 'flashblocksd (uWS topic publishes)', points: cdfPoints(ours.perFrame) },
      { name: `flashblocksd, ${threadsLabel}`, points: cdfPoints(threaded.perFrame) },
      { name: 'minimal ws relay (baseline)', points: cdfPoints(relay.perFrame), dashed: true },
      { name: 'flashblocksd, every delivery', points: ours.all.cdf() },
      { name: 'ws relay, every delivery', points: relay.all.cdf(), dashed: true },
    ]), 'CDF of upstream → last of 1,000 subscribers per frame, flashblocksd vs a ws relay');
    return {
      title: 'Fan-out to 1,000 subscribers',
      rows: [
        { name: 'upstream → last of 1,000 subscribers, p50', value: ours.p50Ms, unit: 'ms', baseline: { label: 'ws relay', value: relay.p50Ms }, verdict: faster(relay.p50Ms / ours.p50Ms) },
        {
          name: 'upstream → last of 1,000 subscribers, p99',
          value: ours.p99Ms,
          unit: 'ms',
          baseline: { label: 'ws relay', value: relay.p99Ms },
          verdict: `${faster(ratio)} (target ≥ 2× faster)`,
          met: ratio >= 2,
          design: 'fan-out to 1,000 subscribers: p99 ≥ 2× faster than a ws relay',
          bottleneck:
            `while frames flowed the ${CHILDREN} subscriber processes used ${fmt(ours.clientCpuPct)} % of a core (relay run: ${fmt(relay.clientCpuPct)} %) and ` +
            `the harness process holding the server ${fmt(ours.serverCpuPct)} % (relay: ${fmt(relay.serverCpuPct)} %), all on 2 cores; the clients' own receive ` +
            `time is inside both numbers and compresses the ratio` +
            (ours.p99Ms > relay.p99Ms ? `; flashblocksd also runs the ingest pipeline (decode + apply + deferred sender recovery) before it publishes, which the relay does not` : ''),
        },
        {
          name: `${threadsLabel}: upstream → last of 1,000 subscribers, p99`,
          value: threaded.p99Ms,
          unit: 'ms',
          baseline: { label: 'ws relay', value: relay.p99Ms },
          verdict: `${faster(relay.p99Ms / threaded.p99Ms)}; main port (same run): ${fmt(ours.p99Ms)} ms`,
        },
        { name: 'upstream → every subscriber (all deliveries), p99', value: ours.all.percentile(99), unit: 'ms', baseline: { label: 'ws relay', value: relay.all.percentile(99) }, verdict: faster(relay.all.percentile(99) / ours.all.percentile(99)) },
        {
          name: 'server CPU per frame per 1,000 subscribers (user + system)',
          value: ours.serverCpuUsPerFrame,
          unit: 'µs',
          baseline: { label: 'ws relay', value: relay.serverCpuUsPerFrame },
          verdict: `${fmt(relay.serverCpuUsPerFrame / ours.serverCpuUsPerFrame)}× less CPU than the ws relay; kernel (system) share ${fmt(ours.serverSystemShare * 100)} % vs ${fmt(relay.serverSystemShare * 100)} %`,
        },
        {
          name: 'server user-space CPU per frame per 1,000 subscribers',
          value: ours.serverUserUsPerFrame,
          unit: 'µs',
          baseline: { label: 'ws relay', value: relay.serverUserUsPerFrame },
          verdict: `${fmt(userRatio)}× less user CPU than the ws relay (target ≥ 5×); the daemon's process also decodes and applies every frame; stream port (same run): ${fmt(threaded.serverUserUsPerFrame)} µs`,
          met: userRatio >= 5,
          design: 'fan-out to 1,000 subscribers: user-space CPU per frame ≥ 5× lower than a ws relay',
        },
        {
          name: 'fan-out alone (frames handed over in-process, no ingest): server user-space CPU per frame per 1,000 subscribers',
          value: alone.serverUserUsPerFrame,
          unit: 'µs',
          baseline: { label: 'ws broadcast loop', value: relayAloneRun.serverUserUsPerFrame },
          verdict: `${fmt(aloneUserRatio)}× less user CPU than a ws broadcast loop; user + system ${fmt(alone.serverCpuUsPerFrame)} µs vs ${fmt(relayAloneRun.serverCpuUsPerFrame)} µs (kernel share ${fmt(alone.serverSystemShare * 100)} % vs ${fmt(relayAloneRun.serverSystemShare * 100)} %)`,
        },
        {
          name: 'fan-out alone, 32 KiB frames: server user-space CPU per frame per 1,000 subscribers',
          value: aloneLarge.serverUserUsPerFrame,
          unit: 'µs',
          baseline: { label: 'ws broadcast loop', value: relayAloneLarge.serverUserUsPerFrame },
          verdict: `${fmt(relayAloneLarge.serverUserUsPerFrame / aloneLarge.serverUserUsPerFrame)}× less user CPU than a ws broadcast loop (uWS copies a message of 16 KiB or more into each subscriber's buffer; ws writes the shared one); p99 ${fmt(aloneLarge.p99Ms)} ms vs ${fmt(relayAloneLarge.p99Ms)} ms`,
        },
        {
          name: 'fan-out alone: frame handed over → last of 1,000 subscribers, p99',
          value: alone.p99Ms,
          unit: 'ms',
          baseline: { label: 'ws broadcast loop', value: relayAloneRun.p99Ms },
          verdict: `${faster(aloneRatio).replace('the ws relay', 'the ws loop')}; p50 ${fmt(alone.p50Ms)} ms vs ${fmt(relayAloneRun.p50Ms)} ms`,
        },
        {
          name: `${threadsLabel}: server CPU per frame per 1,000 subscribers (all threads)`,
          value: threaded.serverCpuUsPerFrame,
          unit: 'µs',
          baseline: { label: 'ws relay', value: relay.serverCpuUsPerFrame },
          verdict: `${fmt(relay.serverCpuUsPerFrame / threaded.serverCpuUsPerFrame)}× less CPU than the ws relay; main port (same run): ${fmt(ours.serverCpuUsPerFrame)} µs (one copy of each frame per thread, posted by the main thread)`,
        },
        { name: 'server RSS per 1,000 subscribers', value: ours.rssPer1000MiB, unit: 'MiB', baseline: { label: 'ws relay', value: relay.rssPer1000MiB }, verdict: ours.rssPer1000MiB > 0 && relay.rssPer1000MiB > 0 ? `${fmt(relay.rssPer1000MiB / ours.rssPer1000MiB)}× less` : 'not comparable (RSS fell during a run: GC)' },
      ],
      plots: [plot],
      notes:
        `${frameCount - warmup} frames (${warmup} warm-up) of the Unichain capture re-numbered, one every ${intervalMs} ms, text, ~2–3 KB. ` +
        `flashblocksd = startDaemon (upstream ws client → ingest pipeline → fan-out queue → uWS publishes to topic shards of 32 subscribers on ` +
        `/flashblocks; frames under 16 KiB reach every shard in one slice, larger ones spread over ~1 ms slices); relay = ws client → ` +
        `WebSocketServer broadcasting each message to all clients; ${threadsLabel} = the same daemon with the subscribers on --stream-port ` +
        `(--stream-threads ${streamThreads}, the default here: cores − 1, 1–4), frames posted once per thread in shared memory. Subscribers: ws clients split over ${CHILDREN} child processes ` +
        `(bench/clients.ts), timestamps from performance.timeOrigin + performance.now(); latency = last arrival − upstream send. The server shares a ` +
        `process with the upstream and the harness; RSS = growth of that process while the subscribers connected; server CPU = ` +
        `process.cpuUsage() of that process over the frames (the subscribers' CPU is in their own processes, not in it), per frame. ` +
        `Max: ${fmt(ours.maxMs)} ms (stream port ${fmt(threaded.maxMs)} ms) vs ${fmt(relay.maxMs)} ms. Frames not seen by all 1,000: ${ours.incomplete} ` +
        `(stream port ${threaded.incomplete}) vs ${relay.incomplete}. Fan-out alone: the same frames handed by a function call to ` +
        `mountStream (the daemon's stream server, main-thread settings) and to a ws WebSocketServer looping over its clients, in this ` +
        `process with nothing else running in it; frames not seen by all: ${alone.incomplete} vs ${relayAloneRun.incomplete}; then ${large.length} ` +
        `of them padded to ${fmt(large[0]!.length / 1024)} KiB, one every ${LARGE_INTERVAL_MS} ms (not seen by all: ${aloneLarge.incomplete} vs ${relayAloneLarge.incomplete}).`,
    };
  } finally {
    pool.kill();
  }
}

runStandalone(import.meta.url, run);
