// One node call in flight, whatever the transport: its deadline, the observe hook, and settling its Promise exactly
// once. The transports (./http1.ts, ./undici.ts) extend it with their own per-call state. Deadlines share one timer
// (below): arming and clearing a timer per call cost 10-20 µs of a forwarded call's round trip on these machines
// (measured against bench/baseline/bare-proxy.ts in one process, the two clients alternating).
import { performance } from 'node:perf_hooks';
import { NodeError, type NodeErrorReason } from './error.js';

/** Called after every request with its duration (seconds) and outcome; for metrics. */
export type Observe = (seconds: number, error: NodeErrorReason | null) => void;

/** What a transport is given per call (a class, not closures: one object per call). */
export abstract class NodeCall {
  done = false;
  private readonly t0: number;
  /** performance.now() at which the call fails with 'timeout'. */
  readonly deadline: number;

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
    this.deadline = this.t0 + timeoutMs;
    deadlines.add(this);
  }

  /** The deadline passed: the call has already failed with 'timeout'; the transport drops what it holds for it. */
  protected abstract timedOut(): void;

  /** Settles with `err` or the answer `buf` (later calls are ignored). */
  finish(err: NodeError | null, buf: Buffer | null): void {
    if (this.done) return;
    this.done = true;
    deadlines.remove(this);
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

  /** @internal the deadline passed */
  expire(): void {
    if (this.done) return;
    this.finish(new NodeError('timeout', `node did not answer within ${this.timeoutMs} ms`), null);
    this.timedOut();
  }
}

/** A sweep after the first runs at least this long after the previous one (a burst of deadlines is one sweep). */
const SWEEP_GAP_MS = 2;

/**
 * The deadlines of every call in flight, on one timer armed for the earliest: a call adds itself and removes itself
 * when it settles, with no timer work unless its deadline is the earliest (calls of one timeout arrive in deadline
 * order, so that is rare). The timer holds the process alive only while a call is in flight (as a timer per call
 * did): it is ref'd when the first call is added and unref'd when the last settles, and left armed in between.
 */
class Deadlines {
  private readonly calls = new Set<NodeCall>();
  private timer: NodeJS.Timeout | null = null;
  /** When the armed timer fires (performance.now()); Infinity when none is armed. */
  private firesAt = Infinity;
  private held = false;

  add(call: NodeCall): void {
    this.calls.add(call);
    if (call.deadline < this.firesAt) this.arm(call.deadline);
    else if (!this.held) {
      (this.timer as NodeJS.Timeout).ref();
      this.held = true;
    }
  }

  remove(call: NodeCall): void {
    if (!this.calls.delete(call) || this.calls.size > 0 || !this.held) return;
    this.timer?.unref();
    this.held = false;
  }

  private arm(at: number): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.firesAt = at;
    this.timer = setTimeout(sweep, Math.max(0, at - performance.now()), this);
    this.held = true;
  }

  /** @internal the timer fired: expire the calls past their deadline, re-arm for the earliest left. */
  sweep(): void {
    this.timer = null;
    this.firesAt = Infinity;
    this.held = false;
    const now = performance.now();
    let expired: NodeCall[] | null = null;
    for (const c of this.calls) if (c.deadline <= now) (expired ??= []).push(c);
    // expire() settles each call, which removes it from the set (and may start queued ones): outside the iteration,
    // earliest deadline first (a sweep that ran late fails its calls in the order they were due).
    if (expired !== null) for (const c of expired.sort(byDeadline)) c.expire();
    let next = Infinity;
    for (const c of this.calls) if (c.deadline < next) next = c.deadline;
    if (next !== Infinity) this.arm(Math.max(next, now + SWEEP_GAP_MS));
  }
}

const deadlines = new Deadlines();

function byDeadline(a: NodeCall, b: NodeCall): number {
  return a.deadline - b.deadline;
}

function sweep(d: Deadlines): void {
  d.sweep();
}
