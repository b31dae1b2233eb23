// The daemon as a child process for benchmarks (forked by bench/combined.ts and bench/saturation.ts, never run as a
// suite), so its CPU and RSS are its own. Arguments are daemon flags (`--flashblocks-url …`), read by loadConfig.
// Instrumentation, from outside src/: the state-events hub's emitApplied is wrapped to timestamp each flashblock when
// its apply finished (before readers are notified), when the synchronous listeners returned, and when the fan-out
// queue (raw-stream sends, eth_subscribe notifications) next drained. IPC: → {ready}; {report} → {report: rows}; {stop} → stops the daemon and exits, which
// writes the CPU profile when started with --cpu-prof.
// `--static`: instead of the daemon, a bare uWS app answering every POST with a constant (the ceiling baseline):
// IPC {constant} → {ready: {rpcPort}}.
import { loadConfig } from '../src/config.js';
import { startDaemon } from '../src/daemon.js';
import { silentLogger } from '../src/log.js';
import { loadUws } from '../src/binaries.js';
import { absNow } from './lib.js';

/**
 * [block number, index, received (abs ms), applied (abs ms), synchronous listeners returned (abs ms), fan-out queue
 * drained after it (abs ms; raw stream + subscriptions sent), the first RPC request after it dispatched (abs ms; 0:
 * none before the next flashblock)]
 */
export type AppliedRow = [number, number, number, number, number, number, number];

async function main(): Promise<void> {
  const config = loadConfig(process.argv.slice(2), {});
  const d = await startDaemon(config, { log: silentLogger });
  let rows: AppliedRow[] = [];
  const events = d.pipeline.events;
  const emit = events.emitApplied.bind(events);
  events.emitApplied = (block, fb, frame, onError) => {
    const applied = absNow();
    emit(block, fb, frame, onError);
    const row: AppliedRow = [fb.blockNumber, fb.index, performance.timeOrigin + frame.receivedAtMs, applied, absNow(), 0, 0];
    rows.push(row);
    void events.fanout.idle().then(() => (row[5] = absNow()));
  };
  // The RPC server observes flashblock_visible_seconds as the first request after an apply is dispatched.
  const visible = d.metrics.flashblockVisibleSeconds;
  const observe = visible.observe.bind(visible);
  visible.observe = (seconds) => {
    const last = rows.at(-1);
    if (last !== undefined && last[6] === 0) last[6] = absNow();
    observe(seconds);
  };
  process.on('message', (msg: { report?: true; stop?: true }) => {
    if (msg.report !== undefined) {
      process.send!({ report: rows });
      rows = [];
    } else if (msg.stop !== undefined) {
      void d.stop().finally(() => process.exit(0));
    }
  });
  process.on('disconnect', () => void d.stop().finally(() => process.exit(0)));
  process.send!({ ready: { rpcPort: d.rpcPort, metricsPort: d.metricsPort, streamPort: d.streamPort, pid: process.pid } });
}

function staticServer(): void {
  // Answers each JSON-RPC method with a fixed body (`constants`, keyed by method; `constant` for any other), so the
  // ceiling moves answers of the same sizes as the subject does.
  process.on('message', (msg: { constant?: string; constants?: Record<string, string>; stop?: true }) => {
    if (msg.stop !== undefined) process.exit(0);
    if (msg.constant === undefined) return;
    const fallback = msg.constant;
    const byMethod = Object.entries(msg.constants ?? {}).map(([m, body]) => [`"method":"${m}"`, body] as const);
    const uws = loadUws();
    const app = uws.App();
    app.post('/*', (res) => {
      res.onAborted(() => {});
      let text = '';
      res.onData((c, last) => {
        if (byMethod.length > 0) text += Buffer.from(c).toString('latin1');
        if (!last) return;
        const body = byMethod.find(([needle]) => text.includes(needle))?.[1] ?? fallback;
        res.cork(() => res.writeHeader('Content-Type', 'application/json').end(body));
      });
    });
    app.listen('127.0.0.1', 0, (ls) => {
      if (ls === false) throw new Error('static server: cannot listen');
      process.send!({ ready: { rpcPort: uws.us_socket_local_port(ls), pid: process.pid } });
    });
  });
  process.on('disconnect', () => process.exit(0));
}

if (process.argv.includes('--static')) staticServer();
else main().catch((e: unknown) => {
  console.error('daemon child:', (e as Error).message);
  process.exit(1);
});
