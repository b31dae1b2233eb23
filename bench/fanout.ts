// Fan-out to 1,000 subscribers, flashblocksd against a minimal `ws` relay in the same run, each server in a process
// of its own (bench/fanout-server.ts): upstream frame sent → received by the last subscriber (main port, and the
// stream port on worker threads), and the server process's user-space and kernel CPU per frame; a bare uWS publish
// beside them shows the floor of a topic fan-out. Measures only.
import { WebSocketServer } from 'ws';
import { defaultStreamThreads } from '../src/config.js';
import { unichainMessages } from '../test/helpers/fixtures.js';
import { absNow, fmt, forkTs, frameKey, LatencyHistogram, percentile, request, sleep, SubscriberPool, waitExit, writePlot, type BenchOptions, type BenchResult, runStandalone } from './lib.js';
import { cdfChart, cdfPoints } from './svg.js';

const SUBSCRIBERS = 1000;
const CHILDREN = 2;
/** How long each server's idle CPU (subscribers connected, no frames) is measured, for the notes. */
const IDLE_MS = 1000;
const faster = (r: number): string => (r >= 1 ? `${fmt(r)}× faster than the ws relay` : `${fmt(1 / r)}× slower than the ws relay`);
const less = (r: number): string => (r >= 1 ? `${fmt(r)}× less than the ws relay` : `${fmt(1 / r)}× more than the ws relay`);

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

/** CPU (cumulative, µs) and RSS of a server process, as bench/fanout-server.ts reports them. */
interface Usage {
  userUs: number;
  systemUs: number;
  rssBytes: number;
  /** flashblocksd's decode + apply time so far (0 for the others). */
  decodeUs: number;
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
  /** Close codes the subscribers saw while frames flowed. */
  closes: Record<string, number>;
  /** CPU of the subscriber processes and of the server process while frames flowed, % of one core. */
  clientCpuPct: number;
  serverCpuPct: number;
  /** The server process's CPU per measured frame (µs), user space and kernel, scaled to 1,000 subscribers. */
  userUsPerFrame: number;
  systemUsPerFrame: number;
  /** Its CPU per ms with the subscribers connected and no frames (µs, user + system). */
  idleUsPerMs: number;
  /** flashblocksd's own decode + apply time per measured frame (µs; 0 for the others). */
  decodeUsPerFrame: number;
}

/** What one round of one server measured (sums, merged over rounds by {@link combine}). */
interface Round {
  /** last-of-1,000 latency per measured frame, ms */
  lat: number[];
  all: LatencyHistogram;
  rssGrowthBytes: number;
  incomplete: number;
  closes: Record<string, number>;
  clientCpuMs: number;
  clientWallMs: number;
  userUs: number;
  systemUs: number;
  wallMs: number;
  frames: number;
  idleUs: number;
  decodeUs: number;
}

/** The rounds of one server as one measurement. */
function combine(rounds: Round[]): Measured {
  const sum = (f: (r: Round) => number): number => rounds.reduce((a, r) => a + f(r), 0);
  const lat = rounds.flatMap((r) => r.lat);
  const all = new LatencyHistogram();
  const closes: Record<string, number> = {};
  for (const r of rounds) {
    all.merge(r.all.toJSON());
    for (const [code, n] of Object.entries(r.closes)) closes[code] = (closes[code] ?? 0) + n;
  }
  const frames = sum((r) => r.frames);
  const per1000 = 1000 / SUBSCRIBERS;
  return {
    p50Ms: percentile(lat, 50),
    p99Ms: percentile(lat, 99),
    maxMs: percentile(lat, 100),
    perFrame: lat,
    all,
    rssPer1000MiB: (sum((r) => r.rssGrowthBytes) / rounds.length / (1024 * 1024)) * per1000,
    incomplete: sum((r) => r.incomplete),
    closes,
    clientCpuPct: (sum((r) => r.clientCpuMs) / sum((r) => r.clientWallMs)) * 100,
    serverCpuPct: ((sum((r) => r.userUs) + sum((r) => r.systemUs)) / 1000 / sum((r) => r.wallMs)) * 100,
    userUsPerFrame: (sum((r) => r.userUs) / frames) * per1000,
    systemUsPerFrame: (sum((r) => r.systemUs) / frames) * per1000,
    idleUsPerMs: sum((r) => r.idleUs) / (IDLE_MS * rounds.length),
    decodeUsPerFrame: sum((r) => r.decodeUs) / frames,
  };
}

/** "p50 / p99 / max" of a measured server, ms. */
const triple = (m: Measured): string => `${fmt(m.p50Ms)} / ${fmt(m.p99Ms)} / ${fmt(m.maxMs)}`;

/** A server under test: bench/fanout-server.ts with `flag`, and for flashblocksd where its subscribers connect. */
interface Subject {
  flag: '--daemon' | '--relay' | '--uws';
  streamThreads: number | null;
}

/** One round: a fresh server process, the pool's subscribers on it, `frames` one every `intervalMs` (the first `warmup` not measured). */
async function measure(subject: Subject, pool: SubscriberPool, frames: Buffer[], warmup: number, intervalMs: number): Promise<Round> {
  const upstream = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
  await new Promise<void>((r) => upstream.once('listening', () => r()));
  const upstreamUrl = `ws://127.0.0.1:${(upstream.address() as { port: number }).port}/`;
  const connected = new Promise<import('ws').WebSocket>((r) => upstream.once('connection', (ws) => r(ws)));
  const server = forkTs('fanout-server.ts', [subject.flag]);
  try {
    const { url } = await request<{ url: string }>(server, { start: { upstreamUrl, streamThreads: subject.streamThreads, subscribers: SUBSCRIBERS } }, 'ready');
    const usage = (): Promise<Usage> => request<Usage>(server, { usage: true }, 'usage');
    const up = await connected;
    await sleep(200);
    const before = await usage();
    await pool.start(url, SUBSCRIBERS, 'wire');
    await sleep(300);
    const connectedUsage = await usage();
    await sleep(IDLE_MS);
    const idleEnd = await usage();

    const sentAt = new Map<string, number>();
    let cpu0 = idleEnd;
    let wall0 = 0;
    for (let i = 0; i < frames.length; i++) {
      if (i === warmup) {
        cpu0 = await usage();
        wall0 = absNow();
      }
      const f = frames[i]!;
      sentAt.set(frameKey(f), absNow());
      up.send(f, { binary: false });
      await sleep(intervalMs);
    }
    await sleep(500);
    const cpu1 = await usage();
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
    return {
      lat,
      all: rep.all,
      rssGrowthBytes: connectedUsage.rssBytes - before.rssBytes,
      incomplete,
      closes: rep.closes,
      clientCpuMs: rep.cpuMs,
      clientWallMs: rep.wallMs,
      userUs: cpu1.userUs - cpu0.userUs,
      systemUs: cpu1.systemUs - cpu0.systemUs,
      wallMs: wall,
      frames: frames.length - warmup,
      idleUs: idleEnd.userUs - connectedUsage.userUs + idleEnd.systemUs - connectedUsage.systemUs,
      decodeUs: cpu1.decodeUs - cpu0.decodeUs,
    };
  } finally {
    server.send({ stop: true });
    await waitExit(server);
    for (const c of upstream.clients) c.terminate();
    await new Promise<void>((r) => upstream.close(() => r()));
  }
}

/**
 * Runs flashblocksd (main port), the ws relay, the bare uWS publish and flashblocksd's stream port with the same
 * subscribers and frames, in rounds (the order rotating each round, so that a slow spell of this shared machine does
 * not fall on one server only).
 */
export async function run(opts: BenchOptions): Promise<BenchResult> {
  const rounds = opts.quick ? 1 : 2;
  const perRound = opts.quick ? 130 : 500;
  const warmup = opts.quick ? 20 : 25;
  const intervalMs = opts.quick ? 20 : 25;
  const frames = makeFrames(perRound + warmup);
  if (new Set(frames.map(frameKey)).size !== frames.length) throw new Error('fanout: frames are not distinguishable by frameKey');
  const streamThreads = defaultStreamThreads();
  const subjects: Subject[] = [
    { flag: '--daemon', streamThreads: null },
    { flag: '--relay', streamThreads: null },
    { flag: '--uws', streamThreads: null },
    { flag: '--daemon', streamThreads },
  ];
  const results: Round[][] = subjects.map(() => []);
  const pool = new SubscriberPool(CHILDREN);
  try {
    for (let r = 0; r < rounds; r++) {
      for (let k = 0; k < subjects.length; k++) {
        const i = (k + r) % subjects.length;
        results[i]!.push(await measure(subjects[i]!, pool, frames, warmup, intervalMs));
      }
    }
    const [ours, relay, floor, threaded] = results.map(combine) as [Measured, Measured, Measured, Measured];
    const ratio = relay.p99Ms / ours.p99Ms;
    const userRatio = relay.userUsPerFrame / ours.userUsPerFrame;
    const threadsLabel = `stream port on ${streamThreads} worker thread${streamThreads === 1 ? '' : 's'}`;
    const plot = writePlot('fanout-cdf', cdfChart(`Fan-out: upstream → last of ${fmt(SUBSCRIBERS)} subscribers, per frame`, 'ms (log)', [
      { name: 'flashblocksd (uWS topics)', points: cdfPoints(ours.perFrame) },
      { name: `flashblocksd, ${threadsLabel}`, points: cdfPoints(threaded.perFrame) },
      { name: 'minimal ws relay (baseline)', points: cdfPoints(relay.perFrame), dashed: true },
      { name: 'bare uWS publish (floor)', points: cdfPoints(floor.perFrame), dashed: true },
      { name: 'flashblocksd, every delivery', points: ours.all.cdf() },
      { name: 'ws relay, every delivery', points: relay.all.cdf(), dashed: true },
    ]), 'CDF of upstream → last of 1,000 subscribers per frame, flashblocksd vs a ws relay');
    const load =
      `while frames flowed the ${CHILDREN} subscriber processes used ${fmt(ours.clientCpuPct)} % of a core (relay run: ${fmt(relay.clientCpuPct)} %) and the ` +
      `server process ${fmt(ours.serverCpuPct)} % (relay: ${fmt(relay.serverCpuPct)} %), all on 2 cores`;
    const kernel = `the server's kernel time per frame (${fmt(ours.systemUsPerFrame)} µs vs the relay's ${fmt(relay.systemUsPerFrame)} µs: one send per subscriber either way) bounds the ratio`;
    // The least user time a server that decodes each frame could take here: the bare publish plus flashblocksd's own
    // decode + apply of the frame (wall time of synchronous work; sender recovery on other threads not included).
    const bound = floor.userUsPerFrame + ours.decodeUsPerFrame;
    const boundText = `flashblocksd's decode + apply of each frame alone took ${fmt(ours.decodeUsPerFrame)} µs (its flashblock_processing_seconds, same run): the bare publish plus that, ${fmt(bound)} µs, is ${less(relay.userUsPerFrame / bound)} — the most any server that decodes what it relays could reach here`;
    const floorText = `a bare uWS server publishing each frame to one topic (no decode, no slices, no cap check) measured p99 ${fmt(floor.p99Ms)} ms and ${fmt(floor.userUsPerFrame)} µs user / ${fmt(floor.systemUsPerFrame)} µs system per frame in the same run (${less(relay.userUsPerFrame / floor.userUsPerFrame)} user time): uWS's own per-socket send sets the floor`;
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
          bottleneck: `${kernel}; ${floorText}; ${load}; flashblocksd also decodes and applies each frame before it publishes, which the relay does not`,
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
          name: 'server user-space CPU per frame per 1,000 subscribers',
          value: ours.userUsPerFrame,
          unit: 'µs',
          baseline: { label: 'ws relay', value: relay.userUsPerFrame },
          verdict: `${less(userRatio)} (target ≥ 5× less)`,
          met: userRatio >= 5,
          design: 'fan-out to 1,000 subscribers: user-space CPU per frame ≥ 5× lower than a ws relay',
          bottleneck: `${floorText}; ${boundText}; flashblocksd's user time adds its upstream client, the decode and apply of every frame (sender recovery included), its background timers (idle: ${fmt(ours.idleUsPerMs * intervalMs)} µs per ${intervalMs} ms) and a loop turn per 128 subscribers; ${load}`,
        },
        {
          name: 'floor: a bare uWS publish to one topic, upstream → last of 1,000, p99 / user CPU per frame',
          value: floor.p99Ms,
          unit: 'ms',
          display: `${fmt(floor.p99Ms)} ms / ${fmt(floor.userUsPerFrame)} µs`,
          baseline: { label: 'ws relay', value: relay.p99Ms, display: `${fmt(relay.p99Ms)} ms / ${fmt(relay.userUsPerFrame)} µs` },
          verdict: `p99 ${faster(relay.p99Ms / floor.p99Ms)}, user CPU ${less(relay.userUsPerFrame / floor.userUsPerFrame)}; flashblocksd (same run): ${fmt(ours.p99Ms)} ms / ${fmt(ours.userUsPerFrame)} µs`,
        },
        {
          name: "bound: the bare publish + flashblocksd's decode + apply, user CPU per frame",
          value: bound,
          unit: 'µs',
          baseline: { label: 'ws relay', value: relay.userUsPerFrame },
          verdict: `${less(relay.userUsPerFrame / bound)}: the least a server that decodes each frame could use here; flashblocksd (same run): ${fmt(ours.userUsPerFrame)} µs, decode + apply ${fmt(ours.decodeUsPerFrame)} µs of it`,
        },
        { name: 'server kernel (system) CPU per frame per 1,000 subscribers', value: ours.systemUsPerFrame, unit: 'µs', baseline: { label: 'ws relay', value: relay.systemUsPerFrame }, verdict: less(relay.systemUsPerFrame / ours.systemUsPerFrame) },
        {
          name: `${threadsLabel}: server CPU per frame per 1,000 subscribers (user / system, all threads)`,
          value: threaded.userUsPerFrame + threaded.systemUsPerFrame,
          unit: 'µs',
          display: `${fmt(threaded.userUsPerFrame)} / ${fmt(threaded.systemUsPerFrame)} µs`,
          baseline: { label: 'ws relay', value: relay.userUsPerFrame + relay.systemUsPerFrame, display: `${fmt(relay.userUsPerFrame)} / ${fmt(relay.systemUsPerFrame)} µs` },
          verdict: `user ${less(relay.userUsPerFrame / threaded.userUsPerFrame)}; main port (same run): ${fmt(ours.userUsPerFrame)} / ${fmt(ours.systemUsPerFrame)} µs (one copy of each frame per thread, posted by the main thread)`,
        },
        { name: 'server RSS per 1,000 subscribers', value: ours.rssPer1000MiB, unit: 'MiB', baseline: { label: 'ws relay', value: relay.rssPer1000MiB }, verdict: ours.rssPer1000MiB > 0 && relay.rssPer1000MiB > 0 ? less(relay.rssPer1000MiB / ours.rssPer1000MiB) : 'not comparable (RSS fell during a run: GC)' },
      ],
      plots: [plot],
      notes:
        `${rounds === 1 ? '' : `${rounds} rounds of `}${perRound} frames (after ${warmup} warm-up) per server${rounds === 1 ? '' : ', in rotating order'}: the Unichain capture ` +
        `re-numbered, one every ${intervalMs} ms, text, ~2–3 KB. Each server runs in a fresh ` +
        `process of its own (bench/fanout-server.ts): flashblocksd = startDaemon (upstream ws client → ingest pipeline → fan-out queue → uWS topic publishes on ` +
        `/flashblocks, one call per group of 128 subscribers); relay = ws client → WebSocketServer sending each message to every client; ${threadsLabel} = the ` +
        `same daemon with the subscribers on --stream-port (--stream-threads ${streamThreads}, the default here: cores − 1, 1–4), frames posted once per ` +
        `thread in shared memory; floor = a ws client upstream and one uWS App.publish of each message to a topic all subscribers hold. The daemon has no ` +
        `node here: it polls its canonical head once a minute instead of every 100 ms. Subscribers: bare TCP sockets reading WebSocket frames into one ` +
        `shared buffer (bench/clients.ts \`wire\`: a fraction of a \`ws\` client's work and garbage per message, so that the servers' sending, not the ` +
        `clients' receiving, sets the last arrival), ${SUBSCRIBERS / CHILDREN} in each of ${CHILDREN} child processes, the same for every server; timestamps from performance.timeOrigin + ` +
        `performance.now() at the read that completed a frame; latency = last arrival − upstream send (the harness process sends upstream). Server CPU = ` +
        `process.cpuUsage() of the server process from the end of the warm-up to 500 ms after the last frame, per measured frame; this kernel samples the ` +
        `user/system split at its 250 Hz tick (the total is exact). Idle, with the subscribers connected, the server processes used ${fmt(ours.idleUsPerMs * intervalMs)} µs ` +
        `(relay ${fmt(relay.idleUsPerMs * intervalMs)} µs, floor ${fmt(floor.idleUsPerMs * intervalMs)} µs, stream port ${fmt(threaded.idleUsPerMs * intervalMs)} µs) per ${intervalMs} ms. RSS = growth of the server process while ` +
        `the subscribers connected. Upstream → last of 1,000, p50 / p99 / max: flashblocksd ${triple(ours)}, stream port ${triple(threaded)}, floor ` +
        `${triple(floor)}, relay ${triple(relay)} ms. Frames not seen by all 1,000: ` +
        `${ours.incomplete} (stream port ${threaded.incomplete}) vs ${relay.incomplete}; closes seen by subscribers: ${JSON.stringify(ours.closes)} ` +
        `(stream port ${JSON.stringify(threaded.closes)}) vs ${JSON.stringify(relay.closes)}.`,
    };
  } finally {
    pool.kill();
  }
}

runStandalone(import.meta.url, run);
