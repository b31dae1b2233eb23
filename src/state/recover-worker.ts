// Sender recovery on a worker thread: ecdsaRecover (~50 µs a transaction, ~10 ms for a 200-tx flashblock) runs off
// the event loop, so RPC requests and stream subscribers are not queued behind it (DESIGN §2). The main thread only
// prepares the inputs (signing hash, r‖s) and turns the returned public keys into addresses.
//
// The worker is a small CommonJS program evaluated from a string, not a file: it must run the same way from
// dist/, under tsx in tests, and inside the single binary. It loads the native secp256k1 binding by the path the
// main thread resolved; where that is impossible, start() returns null and recovery stays on the event loop.
// The daemon creates it only without the native core (which recovers every frame's senders on its own threads), and
// lazily (RecoveryWorker.lazy): the first batch starts it.
import { createRequire } from 'node:module';
import type { EventLoopUtilization } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import type { Logger } from '../log.js';
import type { RecoveryInput } from '../chain/signing.js';

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { monitorEventLoopDelay } = require('node:perf_hooks');
const secp = require(workerData.binding);
// Event-loop delay p99 and max (seconds) over the last second, for the main thread's /metrics (unref'd: never keeps
// the thread alive).
const delay = monitorEventLoopDelay({ resolution: workerData.lagResolutionMs });
delay.enable();
const lag = new Float64Array(workerData.lag);
setInterval(() => {
  lag[0] = delay.percentile(99) / 1e9;
  lag[1] = delay.max / 1e9;
  delay.reset();
}, 1000).unref();
parentPort.on('message', (m) => {
  // null = stop: sent after the last batch, so closing the port lets the thread end on its own.
  if (m === null) return parentPort.close();
  const pubs = new Array(m.inputs.length);
  for (let i = 0; i < m.inputs.length; i++) {
    const x = m.inputs[i];
    try {
      pubs[i] = secp.ecdsaRecover(x.sig, x.recid, x.hash, false);
    } catch {
      pubs[i] = null;
    }
  }
  parentPort.postMessage({ id: m.id, pubs });
});
`;

/** What SenderRecovery needs of a recovery thread (a RecoveryWorker, or one started at its first batch). */
export interface RecoveryThread {
  /** False once the thread failed (or could not start); the caller then recovers on the event loop. */
  readonly usable: boolean;
  /** Recovers the 65-byte public key of each input (null where recovery fails). Rejects if the thread is gone. */
  recover(inputs: RecoveryInput[]): Promise<(Uint8Array | null)[]>;
}

/** One worker thread recovering public keys for batches of transactions, one batch at a time, in order. */
export class RecoveryWorker implements RecoveryThread {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve(pubs: (Uint8Array | null)[]): void; reject(e: Error): void }>();
  private failed: Error | null = null;
  private closing = false;
  private exited = false;
  /** Public keys recovered by the worker so far. */
  recovered = 0;
  private lastElu: EventLoopUtilization | null = null;

  private constructor(
    private readonly worker: Worker,
    /** [lag p99 s, lag max s] written by the worker once a second. */
    private readonly lag: Float64Array,
    log: Logger,
  ) {
    worker.on('message', (m: { id: number; pubs: (Uint8Array | null)[] }) => {
      const w = this.waiting.get(m.id);
      if (w === undefined) return;
      this.waiting.delete(m.id);
      if (this.waiting.size === 0) this.worker.unref();
      this.recovered += m.pubs.length;
      w.resolve(m.pubs);
    });
    const fail = (e: Error): void => {
      if (this.failed === null && !this.closing) log.warn('sender recovery worker failed; recovering on the event loop from now on', { error: e.message });
      this.failed ??= e;
      for (const w of this.waiting.values()) w.reject(e);
      this.waiting.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => {
      this.exited = true;
      fail(new Error(`sender recovery worker exited (${code})`));
    });
    // Keeps the process alive only while a batch is out (ref'd in recover()).
    worker.unref();
  }

  /**
   * Starts the worker, or returns null (logged) when the native binding cannot be loaded on a thread here.
   * `lagResolutionMs`: how often the thread samples its event-loop delay (the daemon's LAG_RESOLUTION_MS).
   */
  static start(log: Logger, lagResolutionMs: number): RecoveryWorker | null {
    try {
      const binding = createRequire(import.meta.url).resolve('secp256k1/bindings');
      const lag = new SharedArrayBuffer(16);
      return new RecoveryWorker(new Worker(WORKER_SOURCE, { eval: true, workerData: { binding, lag, lagResolutionMs } }), new Float64Array(lag), log);
    } catch (e) {
      log.warn('sender recovery stays on the event loop: the worker thread could not start', { error: (e as Error).message });
      return null;
    }
  }

  /** A worker started at its first batch (see LazyRecoveryWorker); nothing runs until then. */
  static lazy(log: Logger, lagResolutionMs: number): LazyRecoveryWorker {
    return new LazyRecoveryWorker(log, lagResolutionMs);
  }

  /** The thread's event-loop load since the previous call (null once it has exited). */
  loopLoad(): { utilization: number; lagP99Seconds: number; lagMaxSeconds: number } | null {
    if (this.exited) return null;
    const now = this.worker.performance.eventLoopUtilization();
    const d = this.lastElu === null ? now : this.worker.performance.eventLoopUtilization(now, this.lastElu);
    this.lastElu = now;
    return { utilization: d.utilization, lagP99Seconds: this.lag[0]!, lagMaxSeconds: this.lag[1]! };
  }

  /** False once the worker failed; the caller then recovers on the event loop. */
  get usable(): boolean {
    return this.failed === null;
  }

  /** Recovers the 65-byte public key of each input (null where recovery fails). Rejects if the worker died. */
  recover(inputs: RecoveryInput[]): Promise<(Uint8Array | null)[]> {
    if (this.failed !== null) return Promise.reject(this.failed);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.worker.ref();
      this.worker.postMessage({ id, inputs });
    });
  }

  /**
   * Stops the thread once it has finished what it was given (batches already sent still answer). It is asked to end
   * rather than terminated: terminating a thread inside the native binding (loading it, or in ecdsaRecover) aborts
   * the whole process ("terminate called after throwing an instance of 'Napi::Error'", seen in the watchdog test).
   * Terminated only if it has not ended within `graceMs`.
   */
  async close(graceMs = 2000): Promise<void> {
    this.closing = true;
    if (this.exited) return;
    const exited = new Promise<void>((resolve) => this.worker.once('exit', () => resolve()));
    this.worker.ref();
    this.worker.postMessage(null);
    const timer = setTimeout(() => void this.worker.terminate(), graceMs);
    await exited;
    clearTimeout(timer);
  }
}

/**
 * A RecoveryWorker started by the first batch it is given, not before: frames decoded natively have their senders
 * recovered by the native core, so a daemon on such frames never starts the thread. A thread that cannot start
 * (logged once by RecoveryWorker.start) leaves it unusable, and recovery stays on the event loop.
 */
export class LazyRecoveryWorker implements RecoveryThread {
  private worker: RecoveryWorker | null = null;
  private cannotStart = false;
  private closed = false;

  constructor(
    private readonly log: Logger,
    private readonly lagResolutionMs: number,
  ) {}

  /** Whether the thread has been started (by a first batch). */
  get started(): boolean {
    return this.worker !== null;
  }

  get usable(): boolean {
    return !this.cannotStart && !this.closed && (this.worker === null || this.worker.usable);
  }

  /** Public keys recovered by the thread so far (0 before it started). */
  get recovered(): number {
    return this.worker?.recovered ?? 0;
  }

  /** See RecoveryWorker.recover; the first call starts the thread. */
  recover(inputs: RecoveryInput[]): Promise<(Uint8Array | null)[]> {
    if (this.closed) return Promise.reject(new Error('sender recovery worker closed'));
    if (this.worker === null && !this.cannotStart) {
      this.worker = RecoveryWorker.start(this.log, this.lagResolutionMs);
      this.cannotStart = this.worker === null;
    }
    if (this.worker === null) return Promise.reject(new Error('sender recovery worker could not start'));
    return this.worker.recover(inputs);
  }

  /** See RecoveryWorker.loopLoad; null while the thread has not started. */
  loopLoad(): { utilization: number; lagP99Seconds: number; lagMaxSeconds: number } | null {
    return this.worker?.loopLoad() ?? null;
  }

  /** Stops the thread if it started (see RecoveryWorker.close); none starts afterwards. */
  async close(graceMs?: number): Promise<void> {
    this.closed = true;
    await this.worker?.close(graceMs);
  }
}
