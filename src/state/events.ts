// Notifications of state changes, for readers that push (raw stream, subscriptions, sendRawTransactionSync).
// The ingest pipeline fires them synchronously after each apply; listeners must be quick and must not throw.
// Work that pushes to many sockets goes on the fan-out queue instead: it runs after the event loop has read pending
// I/O (RPC requests are answered from the new state first), a bounded slice per loop turn, in order. Readers that
// publish to topics (one native call reaches a whole topic) split their members with TopicShards. Knows no sockets.
import { performance } from 'node:perf_hooks';
import type { Flashblock } from '../chain/flashblock.js';
import type { BlockView, RawFrameView } from './view.js';

export type AppliedListener = (block: BlockView, fb: Flashblock, frame: RawFrameView) => void;
export type CanonicalListener = (blockNumber: number) => void;

/**
 * One slice of fan-out work: true when the task is finished, false to be called again on a later loop turn, or a
 * promise (work off the thread, e.g. a compression) after which it is called again.
 */
export type FanoutStep = () => boolean | Promise<unknown>;

/** Work per loop turn before the queue yields to I/O: a request waits at most about this long behind fan-out. */
export const FANOUT_SLICE_MS = 1;

/**
 * Fan-out tasks in FIFO order, one slice per event-loop turn (setImmediate: the loop polls sockets between two
 * slices, so a waiting RPC request is read and answered before the next slice). A task finishes before the next one
 * starts, so every subscriber sees frames in apply order. A throwing step ends its task and is reported.
 */
export class FanoutQueue {
  private readonly tasks: FanoutStep[] = [];
  private head = 0;
  private scheduled = false;
  private yieldFirst = false;
  private idleWaiters: (() => void)[] = [];
  /** Where a throwing step is reported (the pipeline sets its listener-error handler). */
  onError: (e: unknown) => void = () => undefined;
  /** Loop turns that ran a slice, and tasks finished (for tests and benchmarks). */
  turns = 0;
  finished = 0;

  /**
   * Appends a task; it starts after every task queued before it has finished. Into an idle queue, the first turn
   * only yields: the loop polls sockets once more before any fan-out work, so requests that arrived while the state
   * was being applied are answered from it first.
   */
  push(step: FanoutStep): void {
    if (this.head >= this.tasks.length && !this.scheduled) this.yieldFirst = true;
    this.tasks.push(step);
    this.schedule();
  }

  /** Tasks queued or running. */
  get pending(): number {
    return this.tasks.length - this.head;
  }

  /** Resolves once every task queued so far (and any queued meanwhile) has finished. */
  idle(): Promise<void> {
    if (this.pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Drops every queued task (shutdown: their sockets are closing). */
  clear(): void {
    this.tasks.length = 0;
    this.head = 0;
    this.wakeIdle();
  }

  private wakeIdle(): void {
    const w = this.idleWaiters;
    if (w.length === 0) return;
    this.idleWaiters = [];
    for (const fn of w) fn();
  }

  private schedule(): void {
    if (this.scheduled || this.head >= this.tasks.length) return;
    this.scheduled = true;
    setImmediate(this.turn);
  }

  private readonly turn = (): void => {
    this.scheduled = false;
    if (this.yieldFirst) {
      this.yieldFirst = false;
      this.schedule();
      return;
    }
    this.turns++;
    const step = this.tasks[this.head];
    if (step === undefined) return;
    let done: boolean | Promise<unknown> = true;
    try {
      done = step();
    } catch (e) {
      this.onError(e);
    }
    if (done instanceof Promise) {
      this.scheduled = true;
      const resume = (): void => {
        this.scheduled = false;
        this.schedule();
      };
      done.then(resume, (e: unknown) => {
        this.onError(e);
        resume();
      });
      return;
    }
    if (done) {
      this.finished++;
      this.tasks[this.head++] = undefined as unknown as FanoutStep;
      if (this.head === this.tasks.length) {
        this.tasks.length = 0;
        this.head = 0;
        this.wakeIdle();
      }
    }
    this.schedule();
  };
}

/**
 * A fan-out step over `n` items: calls `each(i)` for i = 0 … n-1 in order, stopping each turn once `budgetMs` has
 * passed (checked after every item: one send of a large payload can take a tenth of a millisecond, a clock read
 * ~50 ns). `each` is where a send happens; it must skip items that went away meanwhile.
 */
export function slicedStep(n: number, each: (i: number) => void, budgetMs: number = FANOUT_SLICE_MS): () => boolean {
  let i = 0;
  return () => {
    const until = performance.now() + budgetMs;
    while (i < n) {
      each(i++);
      if (performance.now() >= until) return i >= n;
    }
    return true;
  };
}

/**
 * Subscribers a fan-out on a thread that also answers RPC (the main thread) puts in one topic shard: one publish
 * reaches them in one native call, and the shards of a large message are spread over slices. 32 sends of a 256 KiB
 * frame take a few milliseconds on loopback here (test/stream/isolation.test.ts).
 */
export const SHARD_SUBSCRIBERS = 32;

/**
 * The members of one publish topic split into shards of at most `shardSize` members, each a topic of its own
 * (`<name>#<i>`): one publish call reaches a shard, and the shards of one message can be spread over fan-out slices
 * (so a request waits behind at most about one slice). With an unbounded `shardSize` there is one shard: one
 * publish per message. Holds counts only; the caller subscribes each member to the topic add() names.
 */
export class TopicShards {
  private readonly counts: number[] = [];
  private readonly names: string[] = [];
  private members = 0;

  constructor(
    readonly name: string,
    readonly shardSize: number = SHARD_SUBSCRIBERS,
  ) {
    if (!(shardSize >= 1)) throw new RangeError(`shard size must be ≥ 1, got ${shardSize}`);
  }

  /** Members in every shard. */
  get size(): number {
    return this.members;
  }

  /** Adds a member to the first shard with room; returns that shard's index (see topic()). */
  add(): number {
    let i = 0;
    while (i < this.counts.length && this.counts[i]! >= this.shardSize) i++;
    if (i === this.counts.length) {
      this.counts.push(0);
      this.names.push(`${this.name}#${i}`);
    }
    this.counts[i]!++;
    this.members++;
    return i;
  }

  /** Removes a member of shard `i`. */
  remove(i: number): void {
    if (!(this.counts[i]! > 0)) return;
    this.counts[i]!--;
    this.members--;
  }

  /** The topic name of shard `i`. */
  topic(i: number): string {
    return this.names[i]!;
  }

  /** Calls `fn` with the topic and member count of every non-empty shard, in shard order. */
  publishEach(fn: (topic: string, members: number) => void): void {
    for (let i = 0; i < this.counts.length; i++) if (this.counts[i]! > 0) fn(this.names[i]!, this.counts[i]!);
  }

  /**
   * A fan-out step publishing one message to every member: `publish(topic, members)` once per non-empty shard, in
   * shard order. Each slice publishes at least one shard, then more until `budgetMs` has passed. With `deferred`
   * (the publish only queues the message and the server sends it after the slice, as uWS does below 16 KiB) every
   * shard goes in the first slice: spreading them over slices cost more than it saved — with 1,000 subscribers of
   * 2.5 KB frames on 2 busy cores the frames fell behind by seconds, against tens of ms in one slice (bench/fanout.ts).
   * A member added meanwhile gets the message when its shard comes later, not when it came already.
   */
  publishStep(publish: (topic: string, members: number) => void, deferred: boolean, budgetMs: number = FANOUT_SLICE_MS): () => boolean {
    let i = 0;
    return () => {
      const until = performance.now() + budgetMs;
      let published = false;
      for (; i < this.counts.length; i++) {
        const n = this.counts[i]!;
        if (n === 0) continue;
        if (published && !deferred && performance.now() >= until) return false;
        publish(this.names[i]!, n);
        published = true;
      }
      return true;
    };
  }
}

/** A tiny synchronous event hub with O(1) unsubscribe, and the fan-out queue its pushing readers share. */
export class StateEvents {
  /** Where readers that push to many sockets (raw stream, subscriptions) queue their sends. */
  readonly fanout = new FanoutQueue();
  private readonly applied = new Set<AppliedListener>();
  private readonly canonical = new Set<CanonicalListener>();

  /** Called after every applied flashblock, in order. Returns the unsubscribe function. */
  onApplied(fn: AppliedListener): () => void {
    this.applied.add(fn);
    return () => this.applied.delete(fn);
  }

  /** Called after a canonical block was settled. Returns the unsubscribe function. */
  onCanonical(fn: CanonicalListener): () => void {
    this.canonical.add(fn);
    return () => this.canonical.delete(fn);
  }

  /** Fires applied listeners; a throwing listener is reported through `onError` and the others still run. */
  emitApplied(block: BlockView, fb: Flashblock, frame: RawFrameView, onError: (e: unknown) => void): void {
    for (const fn of this.applied) {
      try {
        fn(block, fb, frame);
      } catch (e) {
        onError(e);
      }
    }
  }

  /** Fires canonical listeners. */
  emitCanonical(n: number, onError: (e: unknown) => void): void {
    for (const fn of this.canonical) {
      try {
        fn(n);
      } catch (e) {
        onError(e);
      }
    }
  }
}
