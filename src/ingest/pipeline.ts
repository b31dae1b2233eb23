// The per-frame pipeline: decode → hedge de-duplication → sequence verdict → apply to state → notify. Single writer
// of PendingState. Per-frame problems are values: counted by reason, logged with block/index, never thrown.
import { performance } from 'node:perf_hooks';
import type { Logger } from '../log.js';
import type { PendingState } from '../state/pending.js';
import type { PendingBlock, RawFrame } from '../state/block.js';
import { StateEvents } from '../state/events.js';
import type { RecoveryThread } from '../state/recover-worker.js';
import { SenderRecovery, type NativeSignedTxs } from '../state/senders.js';
import type { Flashblock } from '../chain/flashblock.js';
import type { ChainMatch } from './chain-match.js';
import { decodeFrame, type DecodeErrorReason } from './frame.js';
import { framePool, nativeDecoder, type NativeDecoder } from './native-frame.js';
import { RELEASE_GRACE_MS } from '../chain/frame-pool.js';
import { classify, ReorderBuffer, type SequenceView, type Verdict } from './sequence.js';
import type { UpstreamFrame } from './upstream.js';

/**
 * Verdict labels as counted: the sequence verdicts of frames, plus events — what the reorder buffer decided
 * (`gap_filled`, `gap_skipped`), a held block dropped because the stream went on without it (`abandoned`), and an
 * index 0 whose `prev_flashblock_id` names flashblocks of the previous block that never arrived (`predecessor_missing`),
 * and an OP subblocks sequence discarded on a skipped or repeated index or a foreign payload (`sequence_discarded`).
 */
export type VerdictLabel =
  | Exclude<Verdict, 'gap' | 'broken'>
  | 'gap_buffered'
  | 'gap_filled'
  | 'gap_skipped'
  | 'abandoned'
  | 'predecessor_missing'
  | 'sequence_discarded';

/** Where the pipeline reports what happened (metrics in production, counters in tests). */
export interface IngestObserver {
  frame(upstream: number, isBinary: boolean, bytes: number): void;
  decodeError(reason: DecodeErrorReason): void;
  /** A flashblock copy from `upstream`: the first seen (`first`) or a later copy dropped. */
  copy(upstream: number, first: boolean): void;
  verdict(v: VerdictLabel): void;
  /** A flashblock was applied; `seconds` = parse + apply time of the frame that carried it. */
  applied(fb: Flashblock, block: PendingBlock, seconds: number, receivedAtMs: number): void;
  reorg(hashes: string[], blockNumber: number): void;
  brokenBlock(blockNumber: number): void;
}


export interface PipelineOptions {
  maxFrameBytes: number;
  gapWindowFrames: number;
  gapTimeoutMs: number;
  /** Time slice for sender recovery between frames (when it runs on the event loop). */
  recoverSliceMs?: number;
  /**
   * Recovers senders of frames the JS decoder handled off the event loop when given and usable (the daemon gives a
   * lazily started one); else recovery runs here in slices.
   */
  recoveryWorker?: RecoveryThread | null;
  /**
   * L2 block time (default 2000): the unit of the far-ahead bound, and how long a held block may go without a
   * flashblock while a lower one keeps receiving them before it counts as abandoned.
   */
  blockTimeMs?: number;
  /**
   * Far-ahead bound: a flashblock above canonical + 1 + ⌊(time since that head was settled + maxAheadMs) / blockTimeMs⌋
   * is refused (`too_far_ahead`). Undefined or 0 = no bound.
   */
  maxAheadMs?: number;
  /** Checks that the node is on the stream's chain (src/ingest/chain-match.ts); fed every first copy. */
  chainMatch?: ChainMatch | null;
  /**
   * The stream's dialect (a chain preset's `dialect`: 'op-rbuilder' | 'op-subblocks' | 'xlayer' | 'base'); default
   * 'op-rbuilder'. 'op-subblocks' applies the subblocks spec's sequence rule (specs/protocol/subblocks.md
   * "Sequence"): a skipped index, an index repeated with other content (a byte-identical re-send is only a
   * duplicate), or a frame of another payload_id or block number discards the
   * current sequence (its block is marked broken, pending falls back to the node) until the next index 0, instead
   * of buffering; frames of a block whose index 0 was missed are dropped, not buffered. Every other dialect keeps
   * the reorder buffer.
   */
  dialect?: string;
  /**
   * Decode frames with the native core (native/src/frame) when its addon is built, and recover their senders
   * there, off the JS thread (default true). Same verdicts either way; false = the JS decoder (and `recoveryWorker`).
   */
  nativeDecode?: boolean;
  /**
   * How long the memory of a natively decoded flashblock outlives its block (the frame pool's grace period): at least
   * as long as a reader may hold a dropped block's views (a read waiting up to --execution-wait-ms for execution).
   * Default 2,000 ms; the process's pool takes the last pipeline's value.
   */
  layoutGraceMs?: number;
}

interface Held {
  fb: Flashblock;
  frame: RawFrame;
}

const HEDGE_MEMORY = 4096;
/** Stale frames in a row before the episode is explained at warn (about a block's flashblocks at the usual cadence). */
const STALE_EPISODE_FRAMES = 10;

/** The ingest pipeline; feed it frames with `handleFrame`, canonical heads with `settle`, time with `tick`. */
export class IngestPipeline {
  private readonly reorder: ReorderBuffer<Held>;
  /** (payload_id:index) → upstream that delivered it first; a ring bounds memory. */
  private readonly firstCopy = new Map<string, number>();
  private readonly ring: string[] = new Array(HEDGE_MEMORY);
  private ringPos = 0;
  private readonly view: SequenceView;
  /** Recovers the senders of applied transactions (worker thread or event-loop slices); readers ask it for them. */
  readonly senders: SenderRecovery;
  private blockTimeMs: number;
  /** performance.now() when the canonical head last advanced (the far-ahead bound counts from it). */
  private canonicalSeenMs = 0;
  /** Block number whose mid-block join was last logged (one line per block). */
  private joinLogged = -1;
  /** The subblocks sequence rule applies (PipelineOptions.dialect). */
  private strictSequence: boolean;
  /** Frames dropped as stale (at or below the canonical head) since the last applied one: an episode is warned once. */
  private staleRun = { frames: 0, warned: false, firstBlock: -1 };
  /** The native decoder, or null (PipelineOptions.nativeDecode). */
  private readonly native: NativeDecoder | null;
  /** The signed transactions of natively decoded flashblocks, for native sender recovery once applied. */
  private readonly signedOf = new WeakMap<Flashblock, NativeSignedTxs>();

  constructor(
    readonly state: PendingState,
    private readonly opts: PipelineOptions,
    private readonly log: Logger,
    private readonly observer: IngestObserver | null = null,
    /** Where applied flashblocks and settled heads are announced (stream, subscriptions, RPC waiters). */
    readonly events: StateEvents = new StateEvents(),
  ) {
    this.reorder = new ReorderBuffer<Held>(opts.gapWindowFrames, opts.gapTimeoutMs);
    events.fanout.onError = this.onListenerError;
    this.native = opts.nativeDecode === false ? null : nativeDecoder();
    const native = this.native;
    // The pool's memory is allocated and touched now, at start-up, not by the first frame.
    if (native !== null) framePool().graceMs = opts.layoutGraceMs ?? RELEASE_GRACE_MS;
    this.senders = new SenderRecovery(state, {
      worker: opts.recoveryWorker ?? null,
      sliceMs: opts.recoverSliceMs ?? 2,
      native: native === null ? null : (txBytes, signed) => native.recoverSenders(txBytes, signed),
      nativeNow: native?.recoverNow ?? null,
      nativeUrgent: native?.recoverUrgent ?? null,
    });
    this.blockTimeMs = opts.blockTimeMs ?? 2000;
    this.strictSequence = opts.dialect === 'op-subblocks';
    this.view = {
      canonical: -1,
      aheadLimit: Infinity,
      lastApplied: -1,
      height: (n) => {
        const b = state.block(n);
        return b === undefined ? undefined : { payloadId: b.payloadId, nextIndex: b.nextIndex, broken: b.broken };
      },
    };
  }

  /** The chain became known (or changed) after start-up: its block time and stream dialect from now on. */
  setChain(c: { blockTimeMs: number; dialect: string }): void {
    this.blockTimeMs = c.blockTimeMs;
    this.strictSequence = c.dialect === 'op-subblocks';
  }

  /**
   * The node's head went back to `n`: the held blocks belong to a chain the node no longer has. They are dropped (with
   * frames waiting for a predecessor), `n` becomes the canonical head, and the stream's frames above it apply again.
   * Returns the number of pending blocks dropped.
   */
  rewind(n: number, nowMs: number = performance.now()): number {
    const dropped = this.state.rewind(n);
    this.reorder.dropUpTo(Number.MAX_SAFE_INTEGER, (h) => h.fb.body.release());
    this.canonicalSeenMs = nowMs;
    this.view.lastApplied = -1;
    this.events.emitCanonical(n, this.onListenerError);
    return dropped;
  }

  /**
   * A frame at or below the canonical head: counted (verdict `stale`); a run of them as long as a block's flashblocks
   * is explained once at warn (the stream is behind the node, or the node's head is ahead of this stream's chain).
   */
  private noteStale(fb: Flashblock): void {
    const r = this.staleRun;
    if (r.frames === 0) r.firstBlock = fb.blockNumber;
    r.frames++;
    if (r.warned || r.frames < STALE_EPISODE_FRAMES) return;
    r.warned = true;
    this.log.warn(
      `flashblocks for blocks the node already has are dropped as stale: ${r.frames} so far, from block ${r.firstBlock} (now ${fb.blockNumber}) while the canonical head is ${this.state.canonical}. ` +
        "The stream is behind the node (a lagging or different builder), or the node's head went back (a reset or restore: the daemon re-anchors once the lower head holds); pending answers as latest meanwhile",
      { block: fb.blockNumber, canonical: this.state.canonical, dropped: r.frames },
    );
  }

  private endStaleRun(applied: number): void {
    if (this.staleRun.warned) this.log.info(`flashblocks apply again at block ${applied}, after ${this.staleRun.frames} dropped as stale`, { block: applied, dropped: this.staleRun.frames });
    this.staleRun = { frames: 0, warned: false, firstBlock: -1 };
  }

  /** Frames held while waiting for a missing predecessor. */
  get bufferedFrames(): number {
    return this.reorder.size;
  }

  /** Handles one upstream frame end to end. Never throws. */
  handleFrame(f: UpstreamFrame): void {
    const t0 = performance.now();
    this.observer?.frame(f.upstream, f.isBinary, f.data.length);
    const r = decodeFrame(f.data, this.opts.maxFrameBytes, f.isBinary, this.native);
    if (!r.ok) {
      this.observer?.decodeError(r.reason);
      this.log.limited('warn', 'decode:' + r.reason, 1000, 'flashblock dropped: ' + r.reason, {
        upstream: f.upstream,
        block: r.blockNumber,
        index: r.index,
        detail: r.detail,
      });
      return;
    }
    const fb = r.fb;
    if (r.senders != null) this.signedOf.set(fb, r.senders);
    if (fb.accessListProblem !== null) {
      this.log.limited('warn', 'access-list', 1000, 'metadata.access_list does not decode; flashblock kept without it (pending state reads wait for execution)', {
        block: fb.blockNumber,
        index: fb.index,
        detail: fb.accessListProblem,
      });
    }
    const key = fb.payloadId + ':' + fb.index;
    const first = this.firstCopy.get(key);
    if (first !== undefined) {
      this.observer?.copy(f.upstream, false);
      if (first === f.upstream) {
        this.observer?.verdict('duplicate');
        if (this.strictSequence && this.distinctRepeat(fb, f.data)) this.discard(fb.blockNumber, 'index repeated with other content');
      }
      fb.body.release();
      return;
    }
    this.rememberCopy(key, f.upstream);
    this.observer?.copy(f.upstream, true);
    this.opts.chainMatch?.observe(fb, this.state.canonical, f.receivedAtMs);
    const frame: RawFrame = { data: f.data, isBinary: f.isBinary, blockNumber: fb.blockNumber, index: fb.index, receivedAtMs: f.receivedAtMs };
    // A frame dropped for where the stream was, not for what it is: another upstream's copy may still apply.
    if (!this.process(fb, frame, t0)) this.firstCopy.delete(key);
    // Its memory (the native layout's pool region) goes back unless the state or the reorder buffer keeps it.
    if (!this.keeps(fb)) fb.body.release();
  }

  /** Whether `fb` was applied (its block holds its body) or waits in the reorder buffer. */
  private keeps(fb: Flashblock): boolean {
    return this.state.block(fb.blockNumber)?.bodies[fb.index] === fb.body || this.reorder.peek(fb.payloadId, fb.index)?.fb === fb;
  }

  private rememberCopy(key: string, upstream: number): void {
    const old = this.ring[this.ringPos];
    if (old !== undefined) this.firstCopy.delete(old);
    this.ring[this.ringPos] = key;
    this.ringPos = (this.ringPos + 1) % HEDGE_MEMORY;
    this.firstCopy.set(key, upstream);
  }

  /** Sets the view to the state as of `nowMs` before classifying. */
  private refreshView(nowMs: number): SequenceView {
    const v = this.view;
    v.canonical = this.state.canonical;
    const max = this.opts.maxAheadMs;
    v.aheadLimit =
      v.canonical < 0 || max === undefined || max <= 0
        ? Infinity
        : v.canonical + 1 + Math.floor((Math.max(0, nowMs - this.canonicalSeenMs) + max) / this.blockTimeMs);
    return v;
  }

  /** Classifies and acts; false when the frame was dropped only because of where the stream stands. */
  private process(fb: Flashblock, frame: RawFrame, t0: number): boolean {
    const v = classify(fb, this.refreshView(frame.receivedAtMs));
    if (this.strictSequence && ((v === 'duplicate' && this.distinctRepeat(fb, frame.data)) || v === 'gap' || v === 'out_of_order' || v === 'joined_mid_block')) {
      const at = this.strictDiscardAt(fb, v);
      if (at !== null) {
        if (v !== 'gap') this.observer?.verdict(v);
        const held = this.state.block(fb.blockNumber);
        const why =
          v === 'duplicate' ? 'index repeated with other content'
          : v === 'gap' ? `index skipped (${fb.index} after ${(held?.nextIndex ?? 1) - 1})`
          : at === fb.blockNumber ? `frame of another payload (${fb.payloadId}) at the same height`
          : `frame of the same payload paired with another block number (${fb.blockNumber})`;
        this.discard(at, why);
        return true;
      }
      if (v === 'out_of_order') {
        // Before this block's index 0: the spec's consumer ignores it (never buffered on this dialect).
        this.observer?.verdict(v);
        return false;
      }
    }
    switch (v) {
      case 'stale':
        this.noteStale(fb);
        this.observer?.verdict(v);
        return true;
      case 'duplicate':
        this.observer?.verdict(v);
        return true;
      case 'broken':
        this.observer?.verdict('gap_skipped');
        return true;
      case 'too_far_ahead':
        this.observer?.verdict(v);
        this.log.limited('warn', 'too-far-ahead', 1000, 'flashblock too far ahead of the canonical head; refused', {
          block: fb.blockNumber,
          index: fb.index,
          canonical: this.view.canonical,
          limit: this.view.aheadLimit,
        });
        return false;
      case 'joined_mid_block':
        this.observer?.verdict(v);
        if (this.joinLogged !== fb.blockNumber) {
          this.joinLogged = fb.blockNumber;
          this.log.info('joined the stream mid-block; serving from the next block', { block: fb.blockNumber, index: fb.index });
        }
        return false;
      case 'gap':
      case 'out_of_order': {
        this.observer?.verdict(v === 'gap' ? 'gap_buffered' : 'out_of_order');
        this.log.limited('info', 'gap', 1000, 'flashblock ahead of sequence; buffered', { block: fb.blockNumber, index: fb.index, verdict: v });
        const evicted = this.reorder.hold(fb, { fb, frame }, frame.receivedAtMs);
        if (evicted !== undefined) this.giveUp(evicted.item.fb, 'reorder window full');
        return true;
      }
      case 'new_block':
      case 'replaced_payload':
      case 'next':
        this.observer?.verdict(v);
        if (v === 'replaced_payload') this.log.info('builder restarted the block; new payload replaces the old', { block: fb.blockNumber, payloadId: fb.payloadId });
        if (fb.index === 0) this.checkPredecessor(fb);
        this.apply(fb, frame, t0);
        this.drain(fb);
        return true;
    }
  }

  /**
   * Index 0 names the last flashblock of the previous block (`prev_flashblock_id`); when the held previous block stops
   * short of it, its last flashblocks never arrived (the index sequence alone cannot tell a block's tail is missing).
   */
  private checkPredecessor(fb: Flashblock): void {
    if (fb.prevBlockNumber < 0) return;
    const prev = this.state.block(fb.prevBlockNumber);
    if (prev === undefined || prev.lastIndex >= fb.prevIndex) return;
    this.observer?.verdict('predecessor_missing');
    this.log.warn('flashblocks of the previous block never arrived (prev_flashblock_id); it is held as of its last one received', {
      block: prev.number,
      heldUpTo: prev.lastIndex,
      builtUpTo: fb.prevIndex,
      next: fb.blockNumber,
    });
  }

  private apply(fb: Flashblock, frame: RawFrame, t0: number): void {
    const now = performance.now();
    const block = fb.index === 0 ? this.state.startBlock(fb, frame, now) : this.state.appendFlashblock(fb, frame, now);
    this.view.lastApplied = block.number;
    if (this.staleRun.frames > 0) this.endStaleRun(block.number);
    if (this.state.highestNumber > block.number) this.dropAbandoned(block.number, frame.receivedAtMs);
    this.observer?.applied(fb, block, (performance.now() - t0) / 1000, frame.receivedAtMs);
    // Recovery first: a natively decoded frame's starts now on the native pool (nothing waits here), and the execution
    // feed, an applied listener, finds it in flight (SenderRecovery.recovering) rather than recover the senders again.
    this.senders.added(block, fb.index, this.signedOf.get(fb) ?? null);
    this.events.emitApplied(block, fb, frame, this.onListenerError);
  }

  /**
   * A held block above the one the stream is filling that got no flashblock for a block time is abandoned (a
   * far-future frame, or a build the sequencer left): it would otherwise stay `pending` for good. Dropped here.
   */
  private dropAbandoned(live: number, nowMs: number): void {
    const gone: number[] = [];
    for (const b of this.state.heldBlocks()) {
      if (b.number <= live) continue;
      const last = b.frames[b.frames.length - 1];
      if (last !== undefined && nowMs - last.receivedAtMs >= this.blockTimeMs) gone.push(b.number);
    }
    if (gone.length === 0) return;
    this.state.dropBlocks(gone);
    for (let i = 0; i < gone.length; i++) this.observer?.verdict('abandoned');
    this.log.warn('held blocks above the live one got no flashblock for a block time; dropped as abandoned', { blocks: gone, live });
  }

  /** Applies buffered successors that became contiguous. */
  private drain(after: Flashblock): void {
    let payloadId = after.payloadId;
    let index = after.index + 1;
    for (;;) {
      const held = this.reorder.take(payloadId, index);
      if (held === undefined) return;
      if (classify(held.fb, this.refreshView(held.frame.receivedAtMs)) !== 'next') {
        held.fb.body.release();
        return;
      }
      this.observer?.verdict('gap_filled');
      this.apply(held.fb, held.frame, performance.now());
      payloadId = held.fb.payloadId;
      index++;
    }
  }

  private giveUp(fb: Flashblock, why: string): void {
    fb.body.release();
    this.observer?.verdict('gap_skipped');
    const b = this.state.block(fb.blockNumber);
    if (b !== undefined && this.state.markBroken(fb.blockNumber, why)) {
      this.observer?.brokenBlock(fb.blockNumber);
      this.log.warn('pending block marked broken; pending answers fall back to the node until the next block', {
        block: fb.blockNumber,
        missingIndex: b.payloadId === fb.payloadId ? b.nextIndex : 0,
        reason: why,
      });
    }
  }

  /**
   * The block whose subblocks sequence `fb` breaks (verdict `v`), or null when it breaks none: a gap or repeat breaks
   * its own block's; a frame of another payload at a held height breaks that block's; a frame of the payload being
   * filled under another block number breaks the block being filled. A frame of an unknown payload at a height we
   * do not hold (its index 0 missed) breaks nothing: it is dropped like any frame before the next index 0.
   */
  private strictDiscardAt(fb: Flashblock, v: Verdict): number | null {
    if (v === 'duplicate' || v === 'gap') return fb.blockNumber;
    const held = this.state.block(fb.blockNumber);
    if (held !== undefined) return held.payloadId !== fb.payloadId ? fb.blockNumber : null;
    const filling = this.state.block(this.view.lastApplied);
    return filling !== undefined && filling.payloadId === fb.payloadId ? filling.number : null;
  }

  /**
   * A repeated (payload_id, index) whose bytes differ from the applied frame: a distinct subblock at a used index,
   * which the subblocks spec forbids. A byte-identical repeat (a resumed or re-sent frame) is only a duplicate.
   */
  private distinctRepeat(fb: Flashblock, data: Buffer): boolean {
    const b = this.state.block(fb.blockNumber);
    const applied = b !== undefined && b.payloadId === fb.payloadId ? b.frames[fb.index] : undefined;
    return applied !== undefined && !applied.data.equals(data);
  }

  /**
   * Discards the subblocks sequence at `blockNumber` (the spec's "discard its current sequence"): the block is marked
   * broken, so pending answers fall back to the node and its later frames are ignored until a new index 0.
   */
  private discard(blockNumber: number, why: string): void {
    if (!this.state.markBroken(blockNumber, why)) return;
    this.observer?.verdict('sequence_discarded');
    this.observer?.brokenBlock(blockNumber);
    this.log.warn('subblocks sequence discarded; pending answers fall back to the node until the next index 0', { block: blockNumber, reason: why });
  }

  /** Expires gaps that stayed open too long. Call every few tens of ms. */
  tick(nowMs: number = performance.now()): void {
    for (const h of this.reorder.expire(nowMs)) this.giveUp(h.item.fb, 'missing flashblock never arrived');
  }

  private readonly onListenerError = (e: unknown): void => {
    this.log.limited('error', 'listener', 1000, 'state listener failed', { error: (e as Error).message, stack: (e as Error).stack });
  };

  /** Settles canonical block `n` (with its transaction hashes when known): counts preconfirmation reorgs, prunes. */
  settle(n: number, canonicalTxHashes: ReadonlySet<string> | null, nowMs: number = performance.now()): void {
    if (n <= this.state.canonical) return;
    this.canonicalSeenMs = nowMs;
    const res = this.state.settleCanonical(n, canonicalTxHashes);
    this.reorder.dropUpTo(n, (h) => h.fb.body.release());
    this.events.emitCanonical(n, this.onListenerError);
    if (res.reorged.length > 0) {
      this.observer?.reorg(res.reorged, n);
      this.log.warn('preconfirmation reorg: preconfirmed transactions missing from the canonical block', {
        block: n,
        count: res.reorged.length,
        hashes: res.reorged.slice(0, 10),
      });
    }
  }
}
