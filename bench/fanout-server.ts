// The server under test in bench/fanout.ts, in a process of its own (forked, never run as a suite), so that its CPU
// and RSS are its own: `--daemon` = flashblocksd (startDaemon, subscribers on /flashblocks or on --stream-port),
// `--relay` = a minimal `ws` relay (ws client upstream, WebSocketServer broadcasting every message to every client),
// `--uws` = the floor of a uWS topic fan-out (ws client upstream, one uWS publish of each message to one topic that
// every client is subscribed to: no decode, no slices, no limits).
// IPC: {start: {upstreamUrl, streamThreads?, subscribers}} → {ready: {url, pid}}; {usage} → {usage: {userUs, systemUs,
// rssBytes, decodeUs}} (cumulative, the harness takes differences; decodeUs = flashblocksd's own decode + apply time,
// its flashblock_processing_seconds sum, 0 for the others); {stop} → stops the server and exits.
import WebSocket, { WebSocketServer } from 'ws';
import { loadConfig } from '../src/config.js';
import { startDaemon } from '../src/daemon.js';
import { silentLogger } from '../src/log.js';
import { loadUws } from '../src/binaries.js';
import { freePort } from '../test/helpers/rpc-harness.js';

interface Start {
  upstreamUrl: string;
  /** flashblocksd only: serve the subscribers on --stream-port with this many threads (null: on --port). */
  streamThreads?: number | null;
  /** Subscribers the limits must admit. */
  subscribers: number;
}

/** A started server: where subscribers connect, and how it stops. */
interface Running {
  url: string;
  stop(): Promise<void>;
  /** Time spent decoding and applying frames so far (µs); 0 for a server that does not decode. */
  decodeUs(): number;
}

async function daemon(s: Start): Promise<Running> {
  const threads = s.streamThreads ?? null;
  const streamPort = threads === null ? 0 : await freePort();
  const config = {
    ...loadConfig([], {}),
    host: '127.0.0.1',
    port: 0,
    metricsPort: 0,
    flashblocksUrls: [s.upstreamUrl],
    execution: false,
    // No node here: its canonical head is polled once a minute, not every 100 ms (each poll of a dead node builds an
    // error; a live node's answer would cost about as much), so that the CPU measured is the stream's.
    nodeRpcUrl: 'http://127.0.0.1:9',
    canonicalPollMs: 60_000,
    streamMaxPerIp: s.subscribers * 2,
    streamMaxSubscribers: s.subscribers * 2,
    streamPort,
    streamThreads: threads ?? 0,
  };
  const d = await startDaemon(config, { log: silentLogger });
  return {
    url: `ws://127.0.0.1:${streamPort > 0 ? streamPort : d.rpcPort}/flashblocks`,
    stop: () => d.stop(),
    decodeUs: () => d.metrics.processingSeconds.sum * 1e6,
  };
}

async function relay(s: Start): Promise<Running> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
  await new Promise<void>((r) => server.once('listening', () => r()));
  const up = new WebSocket(s.upstreamUrl, { perMessageDeflate: false });
  up.on('message', (data: Buffer, isBinary: boolean) => {
    for (const c of server.clients) if (c.readyState === WebSocket.OPEN) c.send(data, { binary: isBinary });
  });
  await new Promise<void>((r) => up.once('open', () => r()));
  return {
    url: `ws://127.0.0.1:${(server.address() as { port: number }).port}/`,
    decodeUs: () => 0,
    async stop() {
      up.terminate();
      for (const c of server.clients) c.terminate();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

async function uwsPublish(s: Start): Promise<Running> {
  const uWS = loadUws();
  const app = uWS.App();
  app.ws('/*', { compression: 0, maxPayloadLength: 1024, idleTimeout: 120, maxBackpressure: 4 * 1024 * 1024, open: (ws) => void ws.subscribe('all') });
  const listen = await new Promise<unknown>((r) => app.listen('127.0.0.1', 0, r));
  if (listen === false) throw new Error('uws: cannot listen');
  const up = new WebSocket(s.upstreamUrl, { perMessageDeflate: false });
  up.on('message', (data: Buffer, isBinary: boolean) => void app.publish('all', data, isBinary));
  await new Promise<void>((r) => up.once('open', () => r()));
  return {
    url: `ws://127.0.0.1:${uWS.us_socket_local_port(listen as never)}/`,
    decodeUs: () => 0,
    async stop() {
      up.terminate();
      uWS.us_listen_socket_close(listen as never);
      (app as unknown as { close(): void }).close();
    },
  };
}

const kind = process.argv.includes('--relay') ? relay : process.argv.includes('--uws') ? uwsPublish : daemon;
let running: Running | null = null;
process.on('message', (m: { start?: Start; usage?: true; stop?: true }) => {
  if (m.start !== undefined) {
    void kind(m.start).then(
      (r) => {
        running = r;
        process.send!({ ready: { url: r.url, pid: process.pid } });
      },
      (e: unknown) => {
        console.error('fanout server:', (e as Error).message);
        process.exit(1);
      },
    );
  } else if (m.usage !== undefined) {
    const c = process.cpuUsage();
    process.send!({ usage: { userUs: c.user, systemUs: c.system, rssBytes: process.memoryUsage().rss, decodeUs: running?.decodeUs() ?? 0 } });
  } else if (m.stop !== undefined) {
    void (running?.stop() ?? Promise.resolve()).finally(() => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
