// A stream thread (--stream-port with --stream-threads ≥ 1): its own uWS app on the stream port running the same
// stream server as the main port, fed by the frames the main thread posts. Limits are asked of the main thread (one
// blocking round trip per upgrade, see admission.ts); metrics and logs go back to it. Holds no state but its replay
// ring and its sockets.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { createLogger } from '../log.js';
import { LAG_RESOLUTION_MS } from '../metrics/metrics.js';
import { loadUws } from '../binaries.js';
import { FanoutQueue } from '../state/events.js';
import type { RawFrameView } from '../state/view.js';
import { AdmissionAsker, type Admission, type Admit } from './admission.js';
import { mountStream } from './server.js';
import { AccumulatingSink } from './sink.js';
import type { FromThread, StreamThreadData, ToThread } from './threads.js';

/** How often counted metrics go to the main thread. */
const REPORT_INTERVAL_MS = 250;

/** Admission decided by the main thread, which holds the counts of every place the stream is served. */
class RemoteAdmission implements Admission {
  private readonly asker: AdmissionAsker;
  constructor(
    private readonly send: (m: FromThread) => void,
    shared: SharedArrayBuffer,
    waitMs: number,
  ) {
    // The main thread answers at its next turn (milliseconds), or after Redis with shared limits.
    this.asker = new AdmissionAsker(shared, waitMs);
  }
  acquire(ip: string, key: string | null): Admit {
    return this.asker.ask((id) => this.send({ t: 'acquire', id, ip, key }));
  }
  release(ticket: number): void {
    this.send({ t: 'release', ticket });
  }
}

function run(port: MessagePort, data: StreamThreadData): void {
  const send = (m: FromThread): void => port.postMessage(m);
  const log = createLogger({
    level: data.logLevel,
    emit: (level, msg, fields) => {
      try {
        send({ t: 'log', level, msg, fields });
      } catch {
        send({ t: 'log', level, msg, fields: { note: 'fields not transferable' } });
      }
    },
  });
  const uWS = loadUws();
  const fanout = new FanoutQueue();
  fanout.onError = (e) => log.error('stream fan-out step failed', { error: String(e) });
  const sink = new AccumulatingSink();
  const admission = new RemoteAdmission(send, data.admission, data.admissionWaitMs);
  const listeners = new Set<(f: RawFrameView) => void>();
  const app = uWS.App();
  const stream = mountStream(app, {
    options: data.options,
    frames: (fn) => {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    fanout,
    admission,
    sink,
    log,
  });

  const delay = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
  delay.enable();
  const lag = new Float64Array(data.lag);
  const lagTimer = setInterval(() => {
    lag[0] = delay.percentile(99) / 1e9;
    lag[1] = delay.max / 1e9;
    delay.reset();
  }, 1000);
  const reportTimer = setInterval(() => send({ t: 'metrics', delta: sink.take() }), REPORT_INTERVAL_MS);

  let listenSocket: unknown = null;
  app.listen(data.host, data.port, (s) => {
    listenSocket = s || null;
    send({ t: 'ready', ok: listenSocket !== null });
  });

  let ended = false;
  /**
   * Closes subscribers (1001) and the listener, then every socket uWS still holds (HTTP keep-alive, closing
   * handshakes), reports the last counts and lets the thread end. A uWS socket still open when the thread's loop
   * ends aborts the whole process (Node's uv_loop_close check), so every way out goes through here.
   */
  const shutdown = (): void => {
    if (ended) return;
    ended = true;
    if (listenSocket !== null) uWS.us_listen_socket_close(listenSocket as never);
    void stream.drain(0);
    fanout.clear();
    (app as unknown as { close(): void }).close();
    clearInterval(lagTimer);
    clearInterval(reportTimer);
    delay.disable();
    send({ t: 'metrics', delta: sink.take() });
    port.close();
  };
  // An unexpected error ends this thread only: reported, then the same clean shutdown (never an abort).
  const crash = (e: unknown): void => {
    send({ t: 'crashed', error: e instanceof Error ? e.message : String(e) });
    shutdown();
  };
  process.on('uncaughtException', crash);
  process.on('unhandledRejection', crash);

  port.on('message', (m: ToThread) => {
    if (m.t === 'frame') {
      const frame: RawFrameView = { data: Buffer.from(m.data), isBinary: m.isBinary, blockNumber: m.blockNumber, index: m.index, receivedAtMs: m.receivedAtMs };
      for (const fn of listeners) fn(frame);
    } else shutdown();
  });
}

if (parentPort === null) throw new Error('src/stream/worker.ts is a worker thread entry; it is started by src/stream/threads.ts');
run(parentPort, workerData as StreamThreadData);
