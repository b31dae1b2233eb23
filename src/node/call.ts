// One node call in flight, whatever the transport: its deadline (one timer), the observe hook, and settling its
// Promise exactly once. The transports (./http1.ts, ./undici.ts) extend it with their own per-call state.
import { performance } from 'node:perf_hooks';
import { NodeError, type NodeErrorReason } from './error.js';

/** Called after every request with its duration (seconds) and outcome; for metrics. */
export type Observe = (seconds: number, error: NodeErrorReason | null) => void;

/** What a transport is given per call (a class, not closures: one object per call). */
export abstract class NodeCall {
  done = false;
  private readonly t0: number;
  private readonly timer: NodeJS.Timeout;

  constructor(
    readonly body: string | Buffer,
    readonly timeoutMs: number,
    /** Whether the call may be sent again when a kept-alive socket turns out closed before any answer byte. */
    readonly retry: boolean,
    private readonly observe: Observe | undefined,
    private readonly resolve: (b: Buffer) => void,
    private readonly reject: (e: NodeError) => void,
  ) {
    this.t0 = performance.now();
    this.timer = setTimeout(expire, timeoutMs, this);
  }

  /** The deadline passed: the call has already failed with 'timeout'; the transport drops what it holds for it. */
  protected abstract timedOut(): void;

  /** Settles with `err` or the answer `buf` (later calls are ignored). */
  finish(err: NodeError | null, buf: Buffer | null): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    this.observe?.((performance.now() - this.t0) / 1000, err === null ? null : err.reason);
    if (err !== null) this.reject(err);
    else this.resolve(buf as Buffer);
  }

  /** A complete HTTP answer: 2xx, or any status with a JSON body (a JSON-RPC error may come with 4xx/5xx). */
  answer(status: number, buf: Buffer): void {
    if (status >= 200 && status < 300) this.finish(null, buf);
    else if (buf.length > 0 && (buf[0] === 0x7b || buf[0] === 0x5b)) this.finish(null, buf);
    else this.finish(new NodeError('http', `node answered HTTP ${status}`), null);
  }

  /** Fails with reason 'connect'. */
  broke(message: string): void {
    this.finish(new NodeError('connect', message), null);
  }

  /** @internal the timer's callback */
  expire(): void {
    if (this.done) return;
    this.finish(new NodeError('timeout', `node did not answer within ${this.timeoutMs} ms`), null);
    this.timedOut();
  }
}

function expire(call: NodeCall): void {
  call.expire();
}
