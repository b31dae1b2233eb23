// Fan-out latency: upstream frame sent → received by the last of 1,000 subscribers, for flashblocksd (full daemon:
// upstream ws → pipeline → uWS publish) and for a minimal `ws` relay, same run, same subscriber code. Measures only.
import { fork, type ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import WebSocket, { WebSocketServer } from 'ws';
import { loadConfig } from '../src/config.js';
import { startDaemon } from '../src/daemon.js';
import { silentLogger } from '../src/log.js';
import { unichainMessages } from '../test/helpers/fixtures.js';
import { fmt, percentile, type BenchOptions, type BenchResult } from './lib.js';

const SUBSCRIBERS = 1000;
const CHILDREN = 2;
const KEY_BYTES = 48; // `{"payload_id":"0x…","index":N` identifies a frame without parsing it
const now = (): number => performance.timeOrigin + performance.now();

// ── child: a batch of subscribers that time every frame ───────────────────────────────────────────────────────
interface ChildStart {
  url: string;
  count: number;
}

function runChild(): void {
  let sockets: WebSocket[] = [];
  /** frame key → [latest arrival among this child's subscribers, number of arrivals] */
  const seen = new Map<string, [number, number]>();
  process.on('message', (msg: { start?: ChildStart; report?: true }) => {
    if (msg.start !== undefined) {
      const { url, count } = msg.start;
      let open = 0;
      sockets = [];
      seen.clear();
      for (let i = 0; i < count; i++) {
        const ws = new WebSocket(url, { perMessageDeflate: false });
        ws.on('message', (data: Buffer) => {
          const t = now();
          const key = data.toString('latin1', 0, KEY_BYTES);
          const e = seen.get(key);
          if (e === undefined) seen.set(key, [t, 1]);
          else {
            if (t > e[0]) e[0] = t;
            e[1]++;
          }
        });
        ws.on('error', () => {});
        ws.on('open', () => {
          if (++open === count) process.send!({ ready: true });
        });
        sockets.push(ws);
      }
    } else if (msg.report !== undefined) {
      process.send!({ seen: [...seen.entries()] });
      for (const ws of sockets) ws.terminate();
      sockets = [];
    }
  });
}

// ── parent ───────────────────────────────────────────────────────────────────────────────────────────────────────
function request<T>(child: ChildProcess, msg: unknown, field: string): Promise<T> {
  return new Promise((resolve) => {
    const on = (m: Record<string, unknown>): void => {
      if (m[field] === undefined) return;
      child.off('message', on);
      resolve(m[field] as T);
    };
    child.on('message', on);
    child.send(msg as never);
  });
}

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
  rssPer1000MiB: number;
  incomplete: number;
}

interface Subject {
  /** Starts the server subscribed to `upstreamUrl`; resolves with the URL subscribers connect to. */
  start(upstreamUrl: string): Promise<string>;
  stop(): Promise<void>;
}

async function measure(subject: Subject, children: ChildProcess[], frames: Buffer[], warmup: number, intervalMs: number): Promise<Measured> {
  const upstream = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
  await new Promise<void>((r) => upstream.once('listening', () => r()));
  const upUrl = `ws://127.0.0.1:${(upstream.address() as { port: number }).port}/`;
  const connected = new Promise<WebSocket>((r) => upstream.once('connection', (ws) => r(ws)));
  const subUrl = await subject.start(upUrl);
  const up = await connected;
  await new Promise((r) => setTimeout(r, 200));
  const rssBefore = process.memoryUsage().rss;
  await Promise.all(children.map((c) => request(c, { start: { url: subUrl, count: SUBSCRIBERS / CHILDREN } }, 'ready')));
  await new Promise((r) => setTimeout(r, 300));
  const rssAfter = process.memoryUsage().rss;

  const sentAt = new Map<string, number>();
  for (const f of frames) {
    const key = f.toString('latin1', 0, KEY_BYTES);
    sentAt.set(key, now());
    up.send(f, { binary: false });
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  await new Promise((r) => setTimeout(r, 500));
  const reports = await Promise.all(children.map((c) => request<[string, [number, number]][]>(c, { report: true }, 'seen')));
  const last = new Map<string, [number, number]>();
  for (const rep of reports) {
    for (const [k, [t, n]] of rep) {
      const e = last.get(k);
      if (e === undefined) last.set(k, [t, n]);
      else last.set(k, [Math.max(e[0], t), e[1] + n]);
    }
  }
  const lat: number[] = [];
  let incomplete = 0;
  frames.forEach((f, i) => {
    if (i < warmup) return;
    const k = f.toString('latin1', 0, KEY_BYTES);
    const e = last.get(k);
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
    rssPer1000MiB: ((rssAfter - rssBefore) / (1024 * 1024)) * (1000 / SUBSCRIBERS),
    incomplete,
  };
}

function flashblocksd(): Subject {
  let stop: () => Promise<void> = () => Promise.resolve();
  return {
    async start(upstreamUrl) {
      const config = {
        ...loadConfig([], {}),
        host: '127.0.0.1',
        port: 0,
        metricsPort: 0,
        flashblocksUrls: [upstreamUrl],
        nodeRpcUrl: 'http://127.0.0.1:9',
        streamMaxPerIp: SUBSCRIBERS * 2,
        streamMaxSubscribers: SUBSCRIBERS * 2,
      };
      const d = await startDaemon(config, { log: silentLogger });
      stop = () => d.stop();
      return `ws://127.0.0.1:${d.rpcPort}/flashblocks`;
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

/** Runs both subjects with the same 1,000 subscribers (two child processes) and frame schedule. */
export async function run(opts: BenchOptions): Promise<BenchResult> {
  const frameCount = opts.quick ? 150 : 1000;
  const warmup = opts.quick ? 20 : 50;
  const intervalMs = opts.quick ? 20 : 25;
  const frames = makeFrames(frameCount);
  const self = fileURLToPath(import.meta.url);
  const children = Array.from({ length: CHILDREN }, () => fork(self, ['--fanout-child'], { execArgv: ['--import', 'tsx'], stdio: 'inherit' }));
  try {
    const ours = await measure(flashblocksd(), children, frames, warmup, intervalMs);
    const relay = await measure(wsRelay(), children, frames, warmup, intervalMs);
    const ratio = relay.p99Ms / ours.p99Ms;
    return {
      title: 'Fan-out to 1,000 subscribers',
      rows: [
        { name: 'upstream → last of 1,000 subscribers, p50', value: ours.p50Ms, unit: 'ms', baseline: { label: 'ws relay', value: relay.p50Ms }, verdict: `${fmt(relay.p50Ms / ours.p50Ms)}× faster than the ws relay` },
        { name: 'upstream → last of 1,000 subscribers, p99', value: ours.p99Ms, unit: 'ms', baseline: { label: 'ws relay', value: relay.p99Ms }, verdict: `${fmt(ratio)}× faster than the ws relay (target ≥ 5×)`, met: ratio >= 5 },
        { name: 'server RSS per 1,000 subscribers', value: ours.rssPer1000MiB, unit: 'MiB', baseline: { label: 'ws relay', value: relay.rssPer1000MiB } },
      ],
      notes:
        `${frameCount - warmup} frames (${warmup} warm-up) of the Unichain capture re-numbered, one every ${intervalMs} ms, text, ~2–3 KB. ` +
        `flashblocksd = startDaemon (upstream ws client → ingest pipeline → uWS publish on /flashblocks); relay = ws client → ` +
        `WebSocketServer broadcasting each message to all clients. Subscribers: ws clients split over ${CHILDREN} child processes, ` +
        `timestamps from performance.timeOrigin + performance.now(); latency = last arrival − upstream send. The server shares a ` +
        `process with the upstream and the harness; RSS = growth of that process while the subscribers connected. ` +
        `Max: ${fmt(ours.maxMs)} ms vs ${fmt(relay.maxMs)} ms. Frames not seen by all 1,000: ${ours.incomplete} vs ${relay.incomplete}.`,
    };
  } finally {
    for (const c of children) c.kill();
  }
}

if (process.argv.includes('--fanout-child')) {
  runChild();
} else if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const quick = process.argv.includes('--quick');
  run({ quick }).then(
    (r) => {
      console.log(JSON.stringify(r, null, 2));
      process.exit(0);
    },
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
}
