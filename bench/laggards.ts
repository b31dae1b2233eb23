// Memory held by raw-stream subscribers closed for backpressure (issue 17): a stream server in a child process
// (mountStream + the real ingest pipeline), 3 readers and 100 subscribers that never read, ~200 KB frames, the default
// 4 MiB cap. Prints the server's RSS before, at the peak, and 0/1/5/15 s after the last laggard was closed, and how
// many laggard sockets the server still holds. Standalone (not a suite of run.ts): `npx tsx bench/laggards.ts`.
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';

const LAGGARDS = 100;
const READERS = 3;
const PAD_BYTES = 200 * 1024;

type Msg = { kind: string; [k: string]: unknown };

/** Server sockets on `port` still owned by a process (inode ≠ 0), from /proc/net/tcp. */
function ownedServerSockets(port: number): number {
  const hexPort = ':' + port.toString(16).toUpperCase().padStart(4, '0');
  let n = 0;
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length >= 10 && f[1]!.endsWith(hexPort) && f[3] !== '0A' && f[9] !== '0') n++;
  }
  return n;
}

async function server(): Promise<void> {
  const { loadConfig } = await import('../src/config.js');
  const { silentLogger } = await import('../src/log.js');
  const { createMetrics } = await import('../src/metrics/metrics.js');
  const { loadUws } = await import('../src/binaries.js');
  const { PendingState } = await import('../src/state/pending.js');
  const { IngestPipeline } = await import('../src/ingest/pipeline.js');
  const { mountLocalStream: mountStream } = await import('../src/stream/local.js');
  const uWS = loadUws();
  const config = { ...loadConfig([], {}), streamMaxPerIp: 10_000 };
  const state = new PendingState({ maxPendingBlocks: 8 });
  const pipeline = new IngestPipeline(state, { maxFrameBytes: config.maxFrameBytes, gapWindowFrames: 16, gapTimeoutMs: 1000 }, silentLogger);
  const metrics = createMetrics({ version: 'bench', commit: 'bench' });
  const app = uWS.App();
  const stream = mountStream(app, { options: config, events: pipeline.events, metrics, log: silentLogger });
  const listen = await new Promise<unknown>((resolve) => app.listen('127.0.0.1', 0, resolve));
  const port = uWS.us_socket_local_port(listen as never);
  const capture = JSON.parse(readFileSync(fileURLToPath(new URL('../test/fixtures/flashblocks/unichain-sepolia-block-35535698.messages.json', import.meta.url)), 'utf8')) as Record<string, unknown>[];
  let block = 80_000_000;
  const frames = (): Buffer[] =>
    capture.map((m) => {
      const c = structuredClone(m) as Record<string, any>;
      c.payload_id = '0x' + block.toString(16).padStart(16, '0');
      c.metadata.block_number = block;
      if (c.base) c.base.block_number = '0x' + block.toString(16);
      c._pad = 'x'.repeat(PAD_BYTES);
      return Buffer.from(JSON.stringify(c));
    });
  const send = (m: Msg): void => void process.send!(m);
  const rss = (): number => process.memoryUsage().rss;
  process.on('message', async (m: Msg) => {
    if (m.kind === 'rss') {
      global.gc?.();
      send({ kind: 'rss', rss: rss(), subscribers: stream.subscriberCount(), owned: ownedServerSockets(port) });
    } else if (m.kind === 'lag') {
      let peak = rss();
      let fed = 0;
      while (metrics.streamSlowCloses.value < LAGGARDS && fed < 20_000) {
        for (const f of frames()) {
          pipeline.handleFrame({ data: f, isBinary: false, upstream: 0, receivedAtMs: performance.now() });
          fed++;
        }
        block++;
        peak = Math.max(peak, rss());
        await new Promise((r) => setTimeout(r, 5));
      }
      send({ kind: 'lag', fed, peak, closed: metrics.streamSlowCloses.value, peakBuffered: stream.peakBufferedBytes() });
    }
  });
  send({ kind: 'port', port });
}

function ask(child: ChildProcess, kind: string): Promise<Msg> {
  return new Promise((resolve) => {
    const on = (m: Msg): void => {
      if (m.kind !== kind) return;
      child.off('message', on);
      resolve(m);
    };
    child.on('message', on);
    child.send({ kind });
  });
}

async function main(): Promise<void> {
  const child = fork(fileURLToPath(import.meta.url), ['server'], { execArgv: ['--import', 'tsx', '--expose-gc'], stdio: 'inherit' });
  const port = await new Promise<number>((resolve) => child.once('message', (m: Msg) => resolve(m.port as number)));
  const url = `ws://127.0.0.1:${port}/flashblocks`;
  const open = (): Promise<WebSocket> =>
    new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { perMessageDeflate: false });
      ws.on('error', () => {});
      ws.once('open', () => resolve(ws));
      ws.once('unexpected-response', () => reject(new Error('refused')));
    });
  const readers = await Promise.all(Array.from({ length: READERS }, open));
  const laggards = await Promise.all(Array.from({ length: LAGGARDS }, open));
  for (const ws of laggards) ws.pause();
  const mib = (b: unknown): string => ((b as number) / 1048576).toFixed(0) + ' MiB';
  const before = await ask(child, 'rss');
  console.log(`server RSS before: ${mib(before.rss)} (${before.subscribers} subscribers)`);
  const lag = await ask(child, 'lag');
  const closedAt = performance.now();
  console.log(`${lag.closed} laggards closed after ${lag.fed} frames of ~${PAD_BYTES / 1024} KiB; server RSS peak ${mib(lag.peak)}; peak per-socket buffer ${mib(lag.peakBuffered)}`);
  for (const at of [0, 1000, 5000, 15000]) {
    const wait = closedAt + at - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const r = await ask(child, 'rss');
    console.log(`+${at / 1000} s: server RSS ${mib(r.rss)}; server sockets still held ${r.owned} (readers ${READERS})`);
  }
  for (const ws of [...readers, ...laggards]) ws.terminate();
  child.kill();
}

if (process.argv[2] === 'server') void server();
else void main();
