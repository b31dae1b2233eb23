// The stream port (--stream-port): the raw stream served again on a port of its own, by --stream-threads worker
// threads each listening on it (SO_REUSEPORT among our own threads), or by the main thread with 0 threads. This is the
// main side: it checks the port, starts and stops the threads, posts every applied frame to each once, answers their
// admission requests from the shared counts and adds their metrics. The stream logic itself is server.ts, in each
// thread (this uWS build cannot hand an accepted socket to another thread, hence a port of their own).
import type { EventLoopUtilization } from 'node:perf_hooks';
import { isSea } from 'node:sea';
import { Worker } from 'node:worker_threads';
import type { TemplatedApp } from 'uWebSockets.js';
import { StartupCode, StartupError } from '../errors.js';
import type { LogFields, Logger, LogLevel } from '../log.js';
import type { CounterCell } from '../metrics/metrics.js';
import type { ThreadLoad, ThreadLoadSource } from '../metrics/threads.js';
import { listenExclusive, type loadUws } from '../binaries.js';
import type { FanoutQueue } from '../state/events.js';
import { ADMISSION_SLOT_BYTES, answerAdmission, type Admission, type Admit } from './admission.js';
import { mountStream, type FrameSource, type MountedStream, type StreamOptions } from './server.js';
import type { SinkDelta, StreamMetricsHub } from './sink.js';

/** What a stream thread is started with. */
export interface StreamThreadData {
  readonly name: string;
  readonly host: string;
  readonly port: number;
  readonly logLevel: LogLevel;
  readonly options: StreamOptions;
  /** [lag p99 s, lag max s], written by the thread once a second. */
  readonly lag: SharedArrayBuffer;
  /** Where the main thread answers the thread's admission requests (admission.ts, AdmissionAsker). */
  readonly admission: SharedArrayBuffer;
  /** How long an upgrade waits for that answer before it is refused (503). */
  readonly admissionWaitMs: number;
}

/** Main thread → stream thread. */
export type ToThread =
  | { t: 'frame'; data: SharedArrayBuffer; isBinary: boolean; blockNumber: number; index: number; receivedAtMs: number }
  | { t: 'stop' };

/** Stream thread → main thread. */
export type FromThread =
  | { t: 'ready'; ok: boolean }
  | { t: 'acquire'; id: number; ip: string; key: string | null }
  | { t: 'release'; ticket: number }
  | { t: 'metrics'; delta: SinkDelta }
  | { t: 'log'; level: LogLevel; msg: string; fields: LogFields }
  /** An unexpected error: the thread closes its sockets and ends. */
  | { t: 'crashed'; error: string };

export interface StreamPortOptions {
  readonly host: string;
  /** The port (> 0). */
  readonly port: number;
  /** Worker threads; 0 = the main thread serves the port. */
  readonly threads: number;
  readonly logLevel: LogLevel;
  readonly options: StreamOptions;
  /** How long stop() waits for a thread to exit before terminating it. */
  readonly stopTimeoutMs?: number;
  /**
   * How long a thread's upgrade waits for the main thread's admission before it is refused with 503 (default 2 s;
   * its other sockets wait meanwhile).
   */
  readonly admissionWaitMs?: number;
}

export interface StreamPortDeps {
  readonly uWS: ReturnType<typeof loadUws>;
  readonly frames: FrameSource;
  /** The main thread's fan-out queue (used with 0 threads). */
  readonly fanout: FanoutQueue;
  /** The counts shared with the main port. */
  readonly admission: Admission;
  readonly hub: StreamMetricsHub;
  /** Stream threads that died without being asked to. */
  readonly crashes: CounterCell;
  readonly log: Logger;
}

/** A running stream port. */
export interface StreamPort {
  readonly port: number;
  /** Load of each stream thread (`stream-1` …) for the per-thread metrics; empty with 0 threads. */
  readonly loads: Readonly<Record<string, ThreadLoadSource>>;
  /** Stream threads running now. */
  threadCount(): number;
  /** Closes every subscriber (1001) and the listeners; resolves once every thread has exited. */
  stop(graceMs: number): Promise<void>;
}

/**
 * The worker entry next to this file: worker.js from dist/; from source (tests, benchmarks under tsx) worker.ts,
 * through a bootstrap that registers tsx in the thread (Node 20 does not apply --import loader hooks to workers).
 */
function workerEntry(): { file: string | URL; eval: boolean } {
  if (!import.meta.url.endsWith('.ts')) return { file: new URL('./worker.js', import.meta.url), eval: false };
  const entry = new URL('./worker.ts', import.meta.url).href;
  return { file: `import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(entry)}); });`, eval: true };
}

/** One stream thread, seen from the main thread. */
class StreamThread {
  readonly worker: Worker;
  readonly ready: Promise<boolean>;
  readonly exited: Promise<void>;
  /** Admissions its connections hold: released when it exits, whatever way. */
  private readonly tickets = new Set<number>();
  private readonly lag: Float64Array;
  private readonly admissionSlot = new SharedArrayBuffer(ADMISSION_SLOT_BYTES);
  private lastElu: EventLoopUtilization | null = null;
  running = true;

  constructor(
    readonly name: string,
    opts: StreamPortOptions,
    private readonly deps: StreamPortDeps,
    stopping: () => boolean,
  ) {
    const lag = new SharedArrayBuffer(16);
    this.lag = new Float64Array(lag);
    const data: StreamThreadData = { name, host: opts.host, port: opts.port, logLevel: opts.logLevel, options: opts.options, lag, admission: this.admissionSlot, admissionWaitMs: opts.admissionWaitMs ?? 2000 };
    const entry = workerEntry();
    this.worker = new Worker(entry.file, { eval: entry.eval, workerData: data, name });
    const log = deps.log.child({ thread: name });
    let markReady: (ok: boolean) => void = () => undefined;
    let failed = false;
    const fail = (error: string): void => {
      if (failed) return;
      failed = true;
      deps.crashes.inc();
      log.error('stream thread failed; its subscribers are disconnected, the other threads and the main port go on', { error });
    };
    this.ready = new Promise((resolve) => (markReady = resolve));
    this.worker.on('message', (m: FromThread) => {
      switch (m.t) {
        case 'ready':
          return markReady(m.ok);
        case 'acquire':
          return this.acquire(m.id, m.ip, m.key);
        case 'release':
          this.tickets.delete(m.ticket);
          return deps.admission.release(m.ticket);
        case 'metrics':
          return deps.hub.add(name, m.delta);
        case 'log':
          return log[m.level](m.msg, m.fields);
        case 'crashed':
          return fail(m.error);
      }
    });
    this.worker.on('error', (e) => fail(e.message));
    this.exited = new Promise((resolve) => {
      this.worker.once('exit', (code) => {
        this.running = false;
        markReady(false);
        for (const t of this.tickets) deps.admission.release(t);
        this.tickets.clear();
        deps.hub.setSubscribers(name, 0);
        if (!stopping()) fail(`exited (${code})`);
        resolve();
      });
    });
  }

  /** Answers the thread, which waits blocked for it (or has stopped waiting: then the ticket goes back). */
  private acquire(id: number, ip: string, key: string | null): void {
    const answer = (a: Admit): void => {
      const admitted = typeof a === 'number';
      if (admitted && !this.running) return this.deps.admission.release(a);
      if (admitted) this.tickets.add(a);
      if (answerAdmission(this.admissionSlot, id, a) || !admitted) return;
      this.tickets.delete(a);
      this.deps.admission.release(a);
    };
    const v = this.deps.admission.acquire(ip, key);
    if (v instanceof Promise) void v.then(answer);
    else answer(v);
  }

  post(m: ToThread): void {
    if (this.running) this.worker.postMessage(m);
  }

  /** Event-loop load since the previous call (null once it has exited). */
  load(): ThreadLoad | null {
    if (!this.running) return null;
    const now = this.worker.performance.eventLoopUtilization();
    const d = this.lastElu === null ? now : this.worker.performance.eventLoopUtilization(now, this.lastElu);
    this.lastElu = now;
    return { utilization: d.utilization, lagP99Seconds: this.lag[0]!, lagMaxSeconds: this.lag[1]! };
  }
}

/** Binds `port` exclusively once: fails start-up when anything else holds it. Returns the app and its socket. */
async function claim(deps: StreamPortDeps, host: string, port: number): Promise<{ app: TemplatedApp; socket: unknown }> {
  const app = deps.uWS.App();
  const socket = await new Promise<unknown>((resolve) => listenExclusive(app, host, port, resolve));
  if (!socket) throw new StartupError(StartupCode.PORT_IN_USE, `cannot listen on ${host}:${port} (in use or not permitted); choose another --stream-port`);
  return { app, socket };
}

/**
 * Starts the stream port. Throws StartupError: PORT_IN_USE when the port is taken (checked by binding it exclusively
 * from the main thread first; the threads then bind it together), CONFIG_INVALID for threads in the single binary.
 */
export async function startStreamPort(opts: StreamPortOptions, deps: StreamPortDeps): Promise<StreamPort> {
  if (opts.threads > 0 && isSea()) {
    throw new StartupError(
      StartupCode.CONFIG_INVALID,
      `--stream-threads ${opts.threads}: the single-file binary cannot start stream worker threads (they load a file that is not in it); use --stream-threads 0 (the main thread serves --stream-port), or run from the npm package`,
    );
  }
  const { uWS } = deps;
  const { app, socket } = await claim(deps, opts.host, opts.port);
  if (opts.threads === 0) return onMainThread(opts, deps, app, socket);
  uWS.us_listen_socket_close(socket as never);

  let stopping = false;
  const threads: StreamThread[] = [];
  for (let i = 1; i <= opts.threads; i++) threads.push(new StreamThread(`stream-${i}`, opts, deps, () => stopping));
  // Each frame is copied once into shared memory; every thread gets the same buffer (no copy per thread or subscriber).
  const unsubscribe = deps.frames((f) => {
    const data = new SharedArrayBuffer(f.data.length);
    new Uint8Array(data).set(f.data);
    const m: ToThread = { t: 'frame', data, isBinary: f.isBinary, blockNumber: f.blockNumber, index: f.index, receivedAtMs: f.receivedAtMs };
    for (const th of threads) th.post(m);
  });
  const stopTimeoutMs = opts.stopTimeoutMs ?? 5000;
  const stop = async (_graceMs: number): Promise<void> => {
    stopping = true;
    unsubscribe();
    for (const th of threads) th.post({ t: 'stop' });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, stopTimeoutMs)));
    await Promise.race([Promise.all(threads.map((th) => th.exited)), late]);
    clearTimeout(timer);
    const stuck = threads.filter((th) => th.running);
    if (stuck.length > 0) {
      // Only a thread whose JavaScript never returns gets here (shutdown closes every socket); terminating it with
      // uWS sockets open may abort the process, which is then exiting anyway.
      deps.log.warn('stream threads did not exit in time; terminating them', { threads: stuck.map((th) => th.name), timeoutMs: stopTimeoutMs });
      await Promise.all(stuck.map((th) => th.worker.terminate().then(() => th.exited)));
    }
  };
  const ok = await Promise.all(threads.map((th) => th.ready));
  if (ok.includes(false)) {
    await stop(0);
    throw new StartupError(StartupCode.PORT_IN_USE, `stream threads could not listen on ${opts.host}:${opts.port} (taken meanwhile, or a thread failed to start: see the log); choose another --stream-port`);
  }
  const loads: Record<string, ThreadLoadSource> = {};
  for (const th of threads) loads[th.name] = () => th.load();
  return { port: opts.port, loads, threadCount: () => threads.filter((th) => th.running).length, stop };
}

/** --stream-threads 0: the same stream server, on the main thread, on the claimed listener. */
function onMainThread(opts: StreamPortOptions, deps: StreamPortDeps, app: TemplatedApp, socket: unknown): StreamPort {
  const stream: MountedStream = mountStream(app, { options: opts.options, frames: deps.frames, fanout: deps.fanout, admission: deps.admission, sink: deps.hub.sink('stream-port'), log: deps.log });
  return {
    port: opts.port,
    loads: {},
    threadCount: () => 0,
    async stop(graceMs: number) {
      deps.uWS.us_listen_socket_close(socket as never);
      await stream.drain(graceMs);
    },
  };
}
