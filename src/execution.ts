// The pending-execution feed: starts the execution engine (src/exec) at the node's canonical head, hands it every
// applied flashblock in stream order (read from the state events; the pipeline stays the single writer of state),
// records each outcome (metrics, cross-checks against the stream's receipts), tells it about settled canonical
// blocks, and answers "may a read use executed state as of flashblock (n, i)?" for the RPC handlers. Where the
// stream carries access lists (X Layer), each executed flashblock's listed post-values are compared with the
// engine's state. A flashblock whose execution disagrees with the builder (its receipts root, a stream receipt,
// an access-list post-value), every later flashblock of its block and every block executed on top of it serve no
// executed state until the engine has settled past it (the chain's block in, what was built on it executed again);
// so do the blocks above a canonical block the engine finds it executed differently, until executed again on the
// node's state. The share of diverging flashblocks over the last 100 executed (src/execution-divergence.ts) is a
// gauge; above --execution-max-divergence-percent no executed state is served at all and /readyz is not ready.
// Each flashblock's work carries the senders ingest recovered (the engine recovers only the others),
// and the engine waits for that frame's recovery in flight rather than run a second one on the same cores.
// Engine failures are values here: they never reach the pipeline and never crash the daemon.
import { performance } from 'node:perf_hooks';
import { applyAccessList, postDiffers, type AccountChanges, type AccountPost } from './chain/access-list.js';
import { SENDER_ROW, type ApplyFailure, type CanonicalVerdict, type ExecutionEngine, type FlashblockWork } from './exec/engine.js';
import { DivergenceWindow } from './execution-divergence.js';
import type { ExecutedReceipt } from './exec/receipts.js';
import type { Logger } from './log.js';
import type { ExecutionDivergenceSource, ExecutionOutcome, Metrics } from './metrics/metrics.js';
import type { StateEvents } from './state/events.js';
import { packTxBytes, type BlockView, type PendingView, type TxView } from './state/view.js';

/** How long the engine waits for ingest's recovery of a flashblock's senders before recovering the rest itself. */
const SENDER_WAIT_MS = 100;

/**
 * The senders ingest recovered (src/state/senders.ts SenderRecovery): what the feed hands the engine with each
 * flashblock so that it does not recover them a second time.
 */
export interface RecoveredSenders {
  /**
   * Positions [from, to) of `block` as FlashblockWork.senders rows into `out` (21 bytes each): 1 and the sender when
   * the native core or the recovery worker recovered it from the transaction's own bytes, else 0 and zeros.
   */
  recoveredSenderRows(block: BlockView, from: number, to: number, out: Uint8Array): void;
  /** Settles when the recovery of flashblock `index` of `block` started at its arrival has answered; null: none in flight. */
  recovering(block: BlockView, index: number): Promise<void> | null;
}

/** The engine's lifecycle as /readyz shows it. */
export type ExecutionPhase = 'off' | 'starting' | 'up' | 'restarting' | 'down';

export interface ExecutionFeedOptions {
  /** How long a read waits for the engine to reach the flashblock it must include, ms. */
  waitMs: number;
  /** First delay before retrying a failed start (doubles up to 30 s). */
  startRetryMs?: number;
  /** /readyz reports the engine lagging (not ready) beyond this many flashblocks in flight (default 5). */
  maxLagFlashblocks?: number;
  /**
   * Senders not recovered yet when a flashblock is handed over: the engine waits (up to 100 ms) for the frame's
   * recovery started at its arrival ('ingest', default), or recovers them itself at once ('engine'; for
   * bench/engine-senders.ts, which measures both).
   */
  senderRecovery?: 'ingest' | 'engine';
  /**
   * Above this share of diverging flashblocks among the last 100 executed (0-1), no executed state is served and
   * /readyz says execution is not ready (default 0.25: a wrong fork passes it, one odd block does not).
   */
  maxDivergenceRatio?: number;
}

/** Why a pending read at a flashblock is not answered from executed state: execution disagrees there, or any other. */
export type ExecutionFallback = 'diverged' | 'execution';

export interface ExecutionFeedDeps {
  engine: ExecutionEngine;
  view: PendingView;
  events: StateEvents;
  /** Senders ingest recovered; absent: the engine recovers every sender. */
  senders?: RecoveredSenders;
  metrics: Metrics;
  log: Logger;
  /** The node's canonical head (eth_blockNumber). */
  canonicalHead(): Promise<number>;
  /**
   * Why the engine may not run now (no fork known: the chain is not learned yet, or has no preset and no
   * --execution-hardfork), or null when it may. Asked before each start; the daemon calls startNow() when it changes.
   * "cannot run" in the answer marks a configuration to fix (/readyz down), anything else a wait. Absent: always may.
   */
  runnable?(): string | null;
}

/** Per held block: the BlockView fed (a replaced build is a new object) and the next index to hand over. */
interface Fed {
  view: BlockView;
  next: number;
  /** An apply failed: the block's later flashblocks are not fed and reads at it fall back. */
  failed: boolean;
  /**
   * The first index whose execution disagreed with the builder (receipts root, a stream receipt, an access-list
   * post-value), or null: from it on no executed state or receipt of the block is served.
   */
  divergedAt: number | null;
}

interface Waiter {
  number: number;
  index: number;
  resolve: (ok: boolean) => void;
  timer: NodeJS.Timeout;
}

/** The first stream receipt field that differs from execution (status, gasUsed, logs), or null. */
function streamDiffers(rec: TxView, ex: ExecutedReceipt): { field: string; stream: string; executed: string } | null {
  const r = rec.receipt;
  if (r === null) return null;
  if (r.status !== null && (r.status === 1) !== ex.status) return { field: 'status', stream: String(r.status), executed: ex.status ? '1' : '0' };
  if (rec.gasUsed !== null && rec.gasUsed !== ex.gasUsed) return { field: 'gasUsed', stream: String(rec.gasUsed), executed: String(ex.gasUsed) };
  if (r.logs.length !== ex.logs.length) return { field: 'logs (count)', stream: String(r.logs.length), executed: String(ex.logs.length) };
  for (let i = 0; i < r.logs.length; i++) {
    const a = r.logs[i]!;
    const b = ex.logs[i]!;
    if (a.address.toLowerCase() !== b.address) return { field: `logs[${i}].address`, stream: a.address.toLowerCase(), executed: b.address };
    if (a.data.toLowerCase() !== b.data) return { field: `logs[${i}].data`, stream: a.data.toLowerCase(), executed: b.data };
    if (a.topics.length !== b.topics.length) return { field: `logs[${i}].topics (count)`, stream: String(a.topics.length), executed: String(b.topics.length) };
    for (let k = 0; k < a.topics.length; k++) {
      if (a.topics[k]!.toLowerCase() !== b.topics[k]) return { field: `logs[${i}].topics[${k}]`, stream: a.topics[k]!.toLowerCase(), executed: b.topics[k]! };
    }
  }
  return null;
}

/** Settles when `p` settles or after `ms`, whichever comes first; never rejects. */
function settleWithin(p: Promise<void>, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    timer.unref();
    const done = (): void => {
      clearTimeout(timer);
      resolve();
    };
    p.then(done, done);
  });
}

/** Feeds the engine and gates reads on it. One per daemon; `start` once, `stop` once. */
export class ExecutionFeed {
  private phase: ExecutionPhase = 'starting';
  private readonly fed = new Map<number, Fed>();
  /** Newest flashblock the engine executed successfully (and made visible). */
  private done: { number: number; index: number } | null = null;
  /** Flashblocks handed over and not yet answered, oldest first, with the time they were applied to state. */
  private readonly inflight: { number: number; index: number; appliedMs: number }[] = [];
  private waiters: Waiter[] = [];
  private readonly executedListeners = new Set<(block: BlockView, index: number) => void>();
  private offApplied: (() => void) | null = null;
  private offCanonical: (() => void) | null = null;
  private stopped = false;
  private restartsSeen = 0;
  private nodeReadsSeen = 0;
  private readTimeoutsSeen = 0;
  private cacheDropsSeen = 0;
  private readsSeen = { inline: 0, threads: 0, memo: 0 };
  /** Flashblocks handed to the engine, and how many it verified (the verified share is their ratio). */
  private handed = 0;
  private verifiedCount = 0;
  /** Held blocks not handed over for want of their parent: flashblocks seen (counted as no_parent once canonical). */
  private readonly unfed = new Map<number, number>();
  /** The engine's node reads when the last block's index 0 was handed over, and that block. */
  private blockStart: { number: number; reads: number } | null = null;
  private readonly ticker: NodeJS.Timeout;
  private startTimer: NodeJS.Timeout | null = null;
  private lastStartError: string | null = null;
  /** The engine itself cannot run (the native core is missing or does not load): no start is tried again. */
  private cannotRun = false;
  /** Per applied block build: each flashblock's access list (X Layer), by index, until it is cross-checked. */
  private readonly accessLists = new WeakMap<BlockView, (readonly AccountChanges[] | undefined)[]>();
  /**
   * Blocks whose execution disagreed with the builder or the chain, until the engine has settled past them (then
   * what was built on them is either on the chain's state or executed again): the blocks above serve no executed state.
   */
  private readonly divergedBlocks = new Set<number>();
  private window = new DivergenceWindow();
  /** The window's verdict (a line for /readyz) as of the last flashblock or verdict, or null. */
  private divergingNow: string | null = null;
  private offVerdict: (() => void) | null = null;

  constructor(
    private readonly d: ExecutionFeedDeps,
    private readonly o: ExecutionFeedOptions,
  ) {
    this.ticker = setInterval(() => this.refresh(), 250);
    this.ticker.unref();
  }

  /** Starts the engine in the background (retrying with backoff); feeding begins once it is up. */
  start(): void {
    this.offApplied = this.d.events.onApplied((block, fb) => {
      if (fb.accessList !== null) {
        let l = this.accessLists.get(block);
        if (l === undefined) this.accessLists.set(block, (l = []));
        l[fb.index] = fb.accessList;
      }
      this.feed(block);
    });
    this.offVerdict = this.d.engine.onCanonicalVerdict?.((n, verdict) => this.canonicalVerdict(n, verdict)) ?? null;
    this.offCanonical = this.d.events.onCanonical((n) => {
      this.d.engine.noteCanonical(n);
      this.countUnfed(n);
      // A block held back for want of its parent may start now (the engine forks at the new head).
      if (this.phase === 'up' || this.phase === 'restarting') this.catchUp();
    });
    void this.startEngine(this.o.startRetryMs ?? 500);
  }

  /**
   * Starts the engine now rather than at its next retry (the node answers again, or the chain became known), when it
   * is down; a start under way or an engine up is left alone.
   */
  startNow(): void {
    if (this.stopped || this.phase !== 'down' || this.cannotRun) return;
    if (this.startTimer !== null) clearTimeout(this.startTimer);
    this.startTimer = null;
    void this.startEngine(this.o.startRetryMs ?? 500);
  }

  /**
   * The node's head went back to `n` (src/ingest/canonical.ts: a reset, a restore, another node behind the URL), or its
   * chain changed: nothing executed so far belongs to its chain. Forgets it and starts the engine over at the node's
   * head (a start under way reads that head anyway).
   */
  rebase(n: number): void {
    if (this.stopped) return;
    this.fed.clear();
    this.unfed.clear();
    this.divergedBlocks.clear();
    this.window = new DivergenceWindow();
    this.divergingNow = null;
    this.done = null;
    this.blockStart = null;
    this.d.log.info(`execution engine: starting over at block ${n} (what it executed belongs to a chain the node no longer has)`, { block: n });
    if (this.phase === 'up' || this.phase === 'restarting') this.phase = 'down';
    this.startNow();
  }

  private async startEngine(delayMs: number): Promise<void> {
    if (this.stopped) return;
    const wait = this.d.runnable?.() ?? null;
    if (wait !== null) {
      this.phase = 'down';
      if (wait !== this.lastStartError) {
        if (/cannot run/.test(wait)) this.d.log.error(`execution engine cannot run; pending state reads answer as latest: ${wait.replace(/^.*?cannot run: /, '')}`);
        else this.d.log.warn(`execution engine waits: ${wait}; pending state reads answer as latest meanwhile`);
      }
      this.lastStartError = wait;
      return;
    }
    this.phase = 'starting';
    try {
      const head = await this.d.canonicalHead();
      await this.d.engine.start(Math.max(head, this.d.view.canonical));
      if (this.stopped) return;
      this.phase = 'up';
      this.lastStartError = null;
      this.d.log.info('execution engine started', { canonical: head });
      this.catchUp();
    } catch (e) {
      if (this.stopped) return;
      this.phase = 'down';
      this.lastStartError = (e as Error).message;
      // Nothing to run (the native core is missing or did not load): retrying cannot help. The error says what to
      // do; said once.
      if (/cannot run/.test(this.lastStartError)) {
        this.cannotRun = true;
        const why = this.lastStartError.replace(/^execution engine(: cannot run:| cannot run:|:) /, '');
        this.d.log.error(`execution engine cannot run; pending state reads answer as latest: ${why}`, { error: this.lastStartError });
        return;
      }
      this.d.log.warn(`execution engine did not start; retrying in ${delayMs} ms (pending state reads answer as latest meanwhile)`, { error: (e as Error).message });
      this.startTimer = setTimeout(() => void this.startEngine(Math.min(30_000, delayMs * 2)), delayMs);
      this.startTimer.unref();
    }
  }

  /** Feeds every held, unbroken block's flashblocks the engine has not had yet (after start: the blocks held so far). */
  private catchUp(): void {
    for (const b of this.d.view.heldBlocks()) this.feed(b);
  }

  private feed(block: BlockView): void {
    if (this.phase === 'starting' || this.phase === 'down' || this.stopped) return;
    if (block.number <= this.d.view.canonical) return;
    let f = this.fed.get(block.number);
    if (f === undefined || f.view !== block) {
      // The engine builds block N on its own execution of N-1, or on the node's N-1 once canonical. A block whose
      // parent it does not hold (joined mid-block, a failed block, start-up) waits for the node's N-1; reads at it
      // answer as latest meanwhile.
      if (!this.parentReady(block.number)) {
        this.unfed.set(block.number, block.lastIndex + 1);
        return;
      }
      this.unfed.delete(block.number);
      // A new build at this height (or the first): start over from index 0; builds above it are void too.
      for (const n of this.fed.keys()) if (n >= block.number) this.fed.delete(n);
      for (const n of this.divergedBlocks) if (n >= block.number) this.divergedBlocks.delete(n);
      if (this.done !== null && this.done.number >= block.number) this.done = null;
      f = { view: block, next: 0, failed: false, divergedAt: null };
      this.fed.set(block.number, f);
    }
    if (block.broken) f.failed = true;
    if (f.failed) {
      // Not handed over: an earlier flashblock of the block was not executed (counted, logged once with the failure).
      for (; f.next <= block.lastIndex; f.next++) this.count('block_failed');
      return;
    }
    for (; f.next <= block.lastIndex; f.next++) this.hand(f, f.next);
    for (const n of this.fed.keys()) if (n <= this.d.view.canonical) this.fed.delete(n);
  }

  private count(outcome: ExecutionOutcome): void {
    this.d.metrics.executionFlashblocks[outcome].inc();
  }

  /** Blocks ≤ canonical `n` that were never handed over (their parent was not there): counted as no_parent. */
  private countUnfed(n: number): void {
    for (const [k, seen] of this.unfed) {
      if (k > n) continue;
      this.unfed.delete(k);
      this.d.metrics.executionFlashblocks.no_parent.inc(seen);
      this.d.log.info('execution engine: block canonical before it could be executed (its parent was not executed here); reads at it answered as latest', { block: k, flashblocks: seen });
    }
  }

  /** Whether block `n` can be executed now: its parent is canonical, or handed to the engine and not failed. */
  private parentReady(n: number): boolean {
    if (n - 1 <= this.d.view.canonical) return true;
    const p = this.fed.get(n - 1);
    return p !== undefined && !p.failed;
  }

  private hand(f: Fed, index: number): void {
    const b = f.view;
    const from = index === 0 ? 0 : (b.txCountAt[index - 1] as number);
    const to = b.txCountAt[index] as number;
    // The flashblock's transactions as the engine takes them: their bytes copied back to back, and their bounds.
    const { bytes, offsets: bounds } = packTxBytes(b, Array.from({ length: to - from }, (_, k) => from + k));
    const src = this.d.senders;
    let senders: Uint8Array | undefined;
    let sendersRecovered: Promise<void> | null = null;
    if (src !== undefined) {
      const rows = Buffer.allocUnsafe(SENDER_ROW * (to - from));
      const fill = (): void => src.recoveredSenderRows(b, from, to, rows);
      fill();
      senders = rows;
      const inFlight = this.o.senderRecovery === 'engine' ? null : src.recovering(b, index);
      if (inFlight !== null) sendersRecovered = settleWithin(inFlight, SENDER_WAIT_MS).then(fill);
    }
    const work: FlashblockWork = {
      blockNumber: b.number,
      index,
      env: { ...b.base, number: b.number },
      txs: { bytes, bounds },
      receiptsRoot: b.diffs[index]?.receiptsRoot ?? null,
      senders,
      sendersRecovered,
    };
    const entry = { number: b.number, index, appliedMs: performance.now() };
    this.inflight.push(entry);
    this.handed++;
    if (index === 0) this.noteBlockStart(b.number);
    this.d.metrics.executionLagFlashblocks.set(this.inflight.length);
    void this.d.engine.applyFlashblock(work).then((out) => {
      const k = this.inflight.indexOf(entry);
      if (k >= 0) this.inflight.splice(k, 1);
      this.d.metrics.executionLagFlashblocks.set(this.inflight.length);
      const m = this.d.metrics;
      if (!out.ok) {
        this.notExecuted(b, index, out.reason, out.message);
        this.settleWaiters();
        return;
      }
      m.executionFlashblocks.executed.inc();
      this.refresh();
      m.executionApplySeconds.observe(out.applyMs / 1000);
      // A flashblock of a block that diverged earlier diverges too (its root is cumulative), whatever its own verdict.
      const earlier = this.fed.get(b.number);
      this.window.note(b.number, index, out.verified === false || (earlier?.view === b && earlier.divergedAt !== null));
      this.judge();
      if (out.verified === true) {
        m.executionVerified.inc();
        this.verifiedCount++;
      } else if (out.verified === false) {
        this.diverged(b, index, 'receipts_root');
        // What the operator can compare: the stream's root and gas against execution's cumulative gas, and which
        // positions this flashblock added (the stream-receipt check below names the first differing one, where the
        // stream carries receipts).
        const diff = b.diffs[index];
        const lastReceipt = out.receipts[out.receipts.length - 1];
        this.d.log.warn('execution engine: executed receipts root differs from the flashblock; its block\'s executed state and receipts are not served from here on', {
          block: b.number,
          index,
          positions: to > from ? `${from}-${to - 1}` : 'none',
          streamReceiptsRoot: diff?.receiptsRoot ?? null,
          streamGasUsed: diff === undefined ? null : String(diff.gasUsed),
          executedGasUsed: lastReceipt === undefined ? null : String(lastReceipt.cumulativeGasUsed),
        });
      }
      m.executionVerifiedRatio.set(this.verifiedCount / this.handed);
      // Cross-check the stream's receipts (where it carried them) against execution, while the block is held (a
      // dropped block's flashblocks may no longer be readable).
      const held = this.d.view.block(b.number) === b;
      for (let i = 0; held && from + i < to; i++) {
        // Executed receipts are parsed when read: only where the stream carried one to compare with.
        const rec = b.txAt(from + i);
        if (rec === undefined || rec.receipt === null) continue;
        const ex = out.receipts[i];
        if (ex === undefined || ex.transactionHash !== b.txHash(from + i)) continue;
        const diff = streamDiffers(rec, ex);
        if (diff !== null) {
          this.diverged(b, index, 'stream_receipt');
          this.d.log.warn('execution engine: stream receipt differs from execution', { block: b.number, index, position: from + i, tx: rec.tx.hash, ...diff });
        }
      }
      this.crossCheckAccessList(b, index);
      if (this.fed.get(b.number)?.view === b && (this.done === null || b.number > this.done.number || (b.number === this.done.number && index > this.done.index))) {
        this.done = { number: b.number, index };
      }
      this.settleWaiters();
      if (this.fed.get(b.number)?.view === b) {
        for (const fn of this.executedListeners) {
          try {
            fn(b, index);
          } catch (e) {
            this.d.log.error('execution listener failed', { error: (e as Error).message });
          }
        }
      }
    });
  }

  /**
   * Compares what flashblock `index` of `b`'s access list says each listed account holds after it (balance, nonce,
   * code, the storage slots it wrote) with the engine's executed state; a disagreement counts one access_list
   * divergence per account, with a warn line naming the field. The reads are pinned to this flashblock's executed
   * state (the engine keeps the last few dozen), so flashblocks executed meanwhile do not disturb them; one the engine
   * no longer holds gets no verdict.
   */
  private crossCheckAccessList(b: BlockView, index: number): void {
    const lists = this.accessLists.get(b);
    const list = lists?.[index];
    if (lists === undefined || list === undefined) return;
    lists[index] = undefined;
    if (list.length === 0) return;
    const e = this.d.engine;
    const at = { number: b.number, index };
    const posts = new Map<string, AccountPost>();
    applyAccessList(posts, list);
    void Promise.all(
      [...posts].map(async ([address, post]) => {
        const slots = [...post.storage.keys()];
        const [balance, nonce, code, values] = await Promise.all([
          post.balance === undefined ? undefined : e.getBalance(address, at),
          post.nonce === undefined ? undefined : e.getTransactionCount(address, at),
          post.code === undefined ? undefined : e.getCode(address, at),
          Promise.all(slots.map((k) => e.getStorageAt(address, k, at))),
        ]);
        const storage = new Map<string, bigint>();
        for (let i = 0; i < slots.length; i++) storage.set(slots[i]!, BigInt(values[i]!));
        return { address, fields: postDiffers(post, { balance, nonce, code, storage }) };
      }),
    ).then(
      (checked) => {
        if (this.stopped) return;
        for (const c of checked) {
          if (c.fields.length === 0) continue;
          this.diverged(b, index, 'access_list');
          this.d.log.warn("execution engine: the stream's access list disagrees with execution", { block: b.number, index, account: c.address, field: c.fields.join(', ') });
        }
      },
      (err: unknown) => this.d.log.debug('execution engine: access-list cross-check not done (engine read failed)', { block: b.number, index, error: (err as Error).message }),
    );
  }

  /**
   * Execution of flashblock `index` of `b` disagreed with the builder (`source`): counted; from it on its block, and
   * the blocks executed on top of it until the engine settles past it, serve no executed state (nor its receipts).
   */
  private diverged(b: BlockView, index: number, source: ExecutionDivergenceSource): void {
    this.d.metrics.executionDivergences[source].inc();
    const f = this.fed.get(b.number);
    if (f?.view === b) {
      if (f.divergedAt === null || index < f.divergedAt) f.divergedAt = index;
      this.divergedBlocks.add(b.number);
    }
    this.window.markDiverged(b.number, index);
    this.judge();
  }

  /**
   * The engine compared canonical block `n` with its execution: a mismatch (same transactions, another receipts
   * root) is a divergence of the whole block, and the blocks executed on it serve no executed state until the engine
   * has executed them again on the node's state.
   */
  private canonicalVerdict(n: number, verdict: CanonicalVerdict): void {
    if (verdict !== 'mismatch' || this.stopped) return;
    this.d.metrics.executionDivergences.canonical.inc();
    this.divergedBlocks.add(n);
    this.window.markDiverged(n, 0);
    this.judge();
    this.d.log.warn("execution engine: the canonical block's receipts root differs from the executed one; the blocks executed on it serve no executed state until executed again on the node's state", { block: n });
    this.settleWaiters();
  }

  /** The divergence share: its gauge, and the /readyz line when it passes the bound. */
  private judge(): void {
    this.divergingNow = this.window.exceeds(this.o.maxDivergenceRatio ?? 0.25);
    this.d.metrics.executionDivergenceRatio.set(this.window.ratio);
  }

  /**
   * Whether executed state as of flashblock (n, i) disagrees with the builder or the chain: the share over the
   * window passed its bound, the block diverged at or before i, or it was executed on a block that diverged and the
   * engine has not settled past that one yet.
   */
  private divergedFor(n: number, i: number): boolean {
    if (this.divergingNow !== null) return true;
    const f = this.fed.get(n);
    if (f !== undefined && f.divergedAt !== null && i >= f.divergedAt) return true;
    if (this.divergedBlocks.size === 0) return false;
    // The engine's settled height: its blocks above a mismatch executed again.
    const settled = this.d.engine.settled;
    for (const m of this.divergedBlocks) if (m < n && m > settled) return true;
    return false;
  }

  /**
   * Counts a flashblock the engine did not execute by its reason and logs it: a stop is no failure (info); not the
   * next block (canonical already) is no failure of the block's state (debug); a later flashblock of a block that
   * failed is counted as block_failed (the failure itself was logged); anything else marks its block failed (warn).
   */
  private notExecuted(b: BlockView, index: number, reason: ApplyFailure, message: string): void {
    const cur = this.fed.get(b.number);
    const mine = cur?.view === b;
    if (this.stopped) {
      this.count('stopped');
      this.d.log.info('execution engine: flashblock not executed, the daemon is stopping', { block: b.number, index });
    } else if (mine && cur.failed) {
      this.count('block_failed');
    } else if (reason === 'not_next') {
      this.count('not_next');
      this.d.log.debug('execution engine: flashblock not executed, its block is canonical already or not open', { block: b.number, index, error: message });
    } else {
      this.count(reason);
      if (mine) cur.failed = true;
      this.d.log.warn(`execution engine: flashblock not executed (${reason}); pending state reads at its block answer as latest`, { block: b.number, index, reason, error: message });
    }
    this.d.metrics.executionVerifiedRatio.set(this.verifiedCount / this.handed);
    // A failure may have restarted the engine: its counters move now, not at the next tick.
    this.refresh();
  }

  /** Node reads per block: the engine's reads between two consecutive blocks' first flashblocks handed over. */
  private noteBlockStart(n: number): void {
    const reads = this.d.engine.status().nodeReads;
    const prev = this.blockStart;
    if (prev !== null && prev.number === n - 1) this.d.metrics.executionNodeReadsPerBlock.set(reads - prev.reads);
    this.blockStart = { number: n, reads };
  }

  /** Resolves waiters whose flashblock is executed (true) or can no longer be (false). */
  private settleWaiters(): void {
    if (this.waiters.length === 0) return;
    const keep: Waiter[] = [];
    for (const w of this.waiters) {
      const v = this.verdict(w.number, w.index);
      if (v === null) keep.push(w);
      else {
        clearTimeout(w.timer);
        w.resolve(v);
      }
    }
    this.waiters = keep;
  }

  /** true: reads may answer for flashblock (n, i); false: they cannot (fall back); null: not yet, wait. */
  private verdict(n: number, i: number): boolean | null {
    // Not ready (restarting after a panic, or nothing executed yet): answer as latest at once rather than wait.
    if (this.phase !== 'up' || this.stopped || !this.d.engine.ready) return false;
    const f = this.fed.get(n);
    if (f !== undefined && f.failed) return false;
    if (this.divergedFor(n, i)) return false;
    const d = this.done;
    if (d !== null && (d.number > n || (d.number === n && d.index >= i))) return true;
    // The engine never gets to a block it was not given (not held, or canonical already): nothing to wait for.
    if (f === undefined || f.next <= i) return n <= this.d.view.canonical ? true : false;
    return null;
  }

  /**
   * Whether reads may answer from executed state that includes flashblock `index` of block `number`: at once when
   * the engine is there, after waiting up to waitMs while it executes it, false when it is off, down, failed there
   * or still behind after the wait (the caller answers as latest).
   */
  readyFor(number: number, index: number): Promise<boolean> | boolean {
    const v = this.verdict(number, index);
    if (v !== null) return v;
    if (this.o.waitMs === 0) return false;
    return new Promise<boolean>((resolve) => {
      const w: Waiter = {
        number,
        index,
        resolve,
        timer: setTimeout(() => {
          this.waiters = this.waiters.filter((x) => x !== w);
          resolve(false);
        }, this.o.waitMs),
      };
      this.waiters.push(w);
    });
  }

  /**
   * Why readyFor(number, index) said no, for the fallback's count: `diverged` when execution disagrees with the
   * builder or the chain there, else `execution` (off, down, failed, behind).
   */
  fallbackReason(number: number, index: number): ExecutionFallback {
    return this.phase === 'up' && !this.stopped && this.divergedFor(number, index) ? 'diverged' : 'execution';
  }

  /** False when an executed flashblock of held block `n` disagreed with the builder (then its executed receipts are not served). */
  receiptsVerified(n: number): boolean {
    return (this.fed.get(n)?.divergedAt ?? null) === null;
  }

  /**
   * Whether the engine has answered for flashblock (n, i): executed it, or it will not be (its block failed, was
   * never handed over, or is canonical already).
   */
  answered(n: number, i: number): boolean {
    if (n <= this.d.view.canonical) return true;
    const b = this.d.view.block(n);
    const f = this.fed.get(n);
    // Not held (joined mid-block), broken, or waiting for its parent: nothing will be executed there.
    if (f === undefined || f.view !== b) return b === undefined || b.broken || this.unfed.has(n);
    if (f.failed) return true;
    if (f.next <= i) return false;
    for (const e of this.inflight) if (e.number === n && e.index <= i) return false;
    return true;
  }


  /** Called after each flashblock the engine executed (its executed receipts are readable then); returns the unsubscribe. */
  onExecuted(fn: (block: BlockView, index: number) => void): () => void {
    this.executedListeners.add(fn);
    return () => this.executedListeners.delete(fn);
  }

  /** The engine (for reads after readyFor said yes). */
  get engine(): ExecutionEngine {
    return this.d.engine;
  }

  /** The lifecycle phase, for /readyz. */
  get state(): ExecutionPhase {
    return this.phase;
  }

  /**
   * The phase and a line of detail for /readyz; `lagging` says why the engine is too far behind the stream to be
   * ready (more than maxLagFlashblocks in flight, or the oldest waiting longer than --execution-wait-ms), else null.
   */
  health(): { phase: ExecutionPhase; detail: string; lagging: string | null; diverging: string | null } {
    const st = this.d.engine.status();
    const at = this.done === null ? 'nothing executed yet' : `executed up to ${this.done.number}/${this.done.index}`;
    const lag = this.inflight.length;
    // An error is news while the engine is not up; once it runs again it is history (the log has it).
    const last = this.phase === 'up' && st.ready ? null : (st.lastError ?? this.lastStartError);
    const err = last === null ? '' : `; last error: ${last}`;
    // Before the first executed flashblock the engine is not ready yet: that is starting, not a restart.
    const phase = this.phase === 'restarting' && st.restarts === 0 && this.done === null ? 'starting' : this.phase;
    const maxLag = this.o.maxLagFlashblocks ?? 5;
    const oldest = this.inflight[0];
    const ageMs = oldest === undefined ? 0 : Math.round(performance.now() - oldest.appliedMs);
    const boundMs = this.o.waitMs > 0 ? this.o.waitMs : 1000;
    const lagging =
      lag > maxLag ? `lagging: ${lag} flashblocks behind (limit ${maxLag})` : ageMs > boundMs ? `lagging: the oldest flashblock waits ${ageMs} ms (limit ${boundMs} ms)` : null;
    return { phase, detail: `${at}, ${lag} flashblocks behind, ${st.restarts} restarts, ${st.divergences} divergences${err}`, lagging, diverging: this.divergingNow };
  }

  /** Newest executed flashblock, or null. */
  get executed(): { number: number; index: number } | null {
    return this.done;
  }

  /** Updates the gauges and the restart and node-read counters from the engine's status (called on a timer and on reads). */
  refresh(): void {
    const st = this.d.engine.status();
    const m = this.d.metrics;
    if (st.restarts > this.restartsSeen) {
      m.executionRestarts.inc(st.restarts - this.restartsSeen);
      this.restartsSeen = st.restarts;
    }
    if (st.nodeReads > this.nodeReadsSeen) {
      m.executionNodeReads.inc(st.nodeReads - this.nodeReadsSeen);
      this.nodeReadsSeen = st.nodeReads;
    }
    for (const where of ['inline', 'threads', 'memo'] as const) {
      if (st.reads[where] > this.readsSeen[where]) m.executionReads[where].inc(st.reads[where] - this.readsSeen[where]);
    }
    this.readsSeen = { ...st.reads };
    if (st.readTimeouts > this.readTimeoutsSeen) m.executionReadTimeouts.inc(st.readTimeouts - this.readTimeoutsSeen);
    this.readTimeoutsSeen = st.readTimeouts;
    if (st.cacheBytes != null) m.executionCacheBytes.set(st.cacheBytes);
    if (st.cacheDrops > this.cacheDropsSeen) m.executionCacheDrops.inc(st.cacheDrops - this.cacheDropsSeen);
    this.cacheDropsSeen = st.cacheDrops;
    if (this.phase === 'up' || this.phase === 'restarting') {
      // The engine restarts itself after a panic (and re-executes what it holds); reads wait for it meanwhile.
      this.phase = st.ready ? 'up' : 'restarting';
    }
    m.executionUp.set(this.phase === 'up' && st.ready ? 1 : 0);
    const oldest = this.inflight[0];
    m.executionLagSeconds.set(oldest === undefined ? 0 : (performance.now() - oldest.appliedMs) / 1000);
    if (this.divergedBlocks.size > 0) {
      for (const n of this.divergedBlocks) if (n <= st.settled) this.divergedBlocks.delete(n);
    }
    if (this.phase === 'up') this.settleWaiters();
  }

  /** Stops feeding and the engine; pending waiters answer false. Idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.phase = 'off';
    clearInterval(this.ticker);
    if (this.startTimer !== null) clearTimeout(this.startTimer);
    this.offApplied?.();
    this.offCanonical?.();
    this.offVerdict?.();
    for (const w of this.waiters) {
      clearTimeout(w.timer);
      w.resolve(false);
    }
    this.waiters = [];
    this.d.metrics.executionUp.set(0);
    await this.d.engine.stop().catch(() => undefined);
  }
}
