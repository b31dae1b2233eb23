// Sender recovery for pending transactions: the signed transactions whose sender is unknown. With the native core,
// one path: every flashblock's go to its recovery threads (a frame the JS decoder handled is laid out for it here),
// late batches to its urgent thread, then on this thread through its synchronous recovery. Without it, the worker
// thread beside this file (recover-worker.ts) or, without that either, the event loop in short slices. The only writer
// of senders (a held block's columns) and of the sender nonce index after apply; readers ask it (SenderSource) and
// then read. The execution engine takes the senders recovered off this thread (recoveredSenderRows, recovering)
// instead of recovering them a second time. Waiting work is kept as (block, position) pairs, never an object per
// transaction.
import { addressOfPublicKey, recoverSender, recoveryInput, type RecoveryInput } from '../chain/sender.js';
import { TX_DEPOSIT } from '../chain/types.js';
import type { PendingBlock } from './block.js';
import type { PendingState } from './pending.js';
import type { RecoveryThread } from './recover-worker.js';
import { packTxBytes, type BlockView, type SenderSource, type TxView } from './view.js';

export interface SenderRecoveryOptions {
  /**
   * Without `native`: recovers off the event loop when given and usable; else recovery runs on the event loop in
   * slices (a lazily started thread, recover-worker.ts, starts at the first batch).
   */
  worker?: RecoveryThread | null;
  /** Time slice for recovery on the event loop between frames. */
  sliceMs?: number;
  /**
   * The native core's recovery (native/src/frame/recover.rs, through src/ingest/native-frame.ts) for flashblocks the
   * native decoder laid out: resolves to 21 bytes per signed transaction (status 1 = recovered, 0 = does not recover,
   * 2 = left to this side; then the address). Runs on the core's idle-priority recovery threads, so nothing waits for a
   * socket poll first.
   */
  native?: ((txBytes: Buffer, signed: Uint32Array) => Promise<Buffer>) | null;
  /**
   * The same native recovery on this thread (rows as for `native`): a read that needs a sender now, before the
   * recovery threads have it, pays ~35 µs instead of the JS path's ~120 µs (signing hash, libsecp256k1 binding, keccak).
   */
  nativeNow?: ((txBytes: Buffer, signed: Uint32Array) => Buffer) | null;
  /**
   * The same native recovery on one thread at the default priority (rows as for `native`): for batches that are late
   * because the idle-priority threads get no core, which a query waits for (see `recoverLate`).
   */
  nativeUrgent?: ((txBytes: Buffer, signed: Uint32Array) => Promise<Buffer>) | null;
}

/** One transaction's [index, start, end) for `nativeNow` (reused: it is read before the call returns). */
const ONE = new Uint32Array(3);

/** A flashblock's signed transactions as the native decoder laid them out (src/chain/layout-body.ts). */
export interface NativeSignedTxs {
  /** Every transaction's bytes, read when the recovery starts (a frame pool layout may have moved until then). */
  txBytes(): Buffer;
  /** Per signed transaction: [index in the flashblock, start, end) into `txBytes()`. */
  signed: Uint32Array;
}

/** One flashblock's native recovery, waiting or in flight, and its completion. */
/**
 * How long a nonce query waits for the native core's batches before it recovers what they still hold on this
 * thread. A 200-transaction batch takes ~5 ms on idle cores; the recovery threads run at idle priority, so on a
 * machine whose cores are all busy they may take much longer, and a query must not wait for that.
 */
export const NATIVE_WAIT_MS = 25;

/** Rounds on the native core's urgent thread before what is left is recovered on the event loop (see recoverLate). */
const URGENT_ROUNDS = 3;

interface NativeBatch {
  block: PendingBlock;
  /** The flashblock, and the position of its first transaction in the block. */
  index: number;
  first: number;
  txs: NativeSignedTxs;
  done: Promise<void>;
  resolve: () => void;
}

/** Positions awaiting recovery on this side, with their blocks (two parallel lists). */
class Queue {
  blocks: PendingBlock[] = [];
  positions: number[] = [];
  get length(): number {
    return this.positions.length;
  }
  push(block: PendingBlock, position: number): void {
    this.blocks.push(block);
    this.positions.push(position);
  }
  /** Empties the queue, returning what it held. */
  take(): Queue {
    const q = new Queue();
    q.blocks = this.blocks;
    q.positions = this.positions;
    this.blocks = [];
    this.positions = [];
    return q;
  }
}

/** Recovers pending senders; see the file comment. */
export class SenderRecovery implements SenderSource {
  private queued = new Queue();
  /** The batch the worker holds; empty when none is in flight. */
  private inWorker = new Queue();
  /** Settles when the worker's batch has been applied (or failed); null when none is in flight. */
  private inWorkerDone: Promise<void> | null = null;
  private sliceScheduled = false;
  /** The late native batches' recovery on this thread while it runs (recoverLate). */
  private lateRecovery: Promise<void> | null = null;
  /** A batch for the worker is due (prepared after the loop has polled sockets once; see schedule()). */
  private workerScheduled = false;
  /** Resolvers of drained(), called once nothing awaits recovery. */
  private drainWaiters: (() => void)[] = [];
  /**
   * Native recoveries, one per flashblock, in order: one in flight at a time (`nativeRunning`), so a burst of frames
   * (a replay) never floods the recovery threads; a waiting one whose block is gone is dropped.
   */
  private readonly native = new Set<NativeBatch>();
  private nativeRunning: NativeBatch | null = null;

  constructor(
    private readonly state: PendingState,
    private readonly opts: SenderRecoveryOptions = {},
  ) {}

  /**
   * Queues the transactions of flashblock `index` of `block` whose sender is unknown, and schedules recovery; with
   * `signed` (the native decoder's layout of them) and native recovery available, hands them to the native core.
   */
  added(block: PendingBlock, index: number, signed: NativeSignedTxs | null = null): void {
    const from = index === 0 ? 0 : (block.txCountAt[index - 1] as number);
    const to = block.txCountAt[index] as number;
    if (this.opts.native != null) {
      // One path with the native core: a frame the JS decoder handled has its signed transactions laid out here.
      this.recoverNatively(block, index, from, signed ?? signedOf(block, from, to));
      return;
    }
    for (let i = from; i < to; i++) if (!block.senderKnown(i) && block.txType(i) !== TX_DEPOSIT) this.queued.push(block, i);
    this.schedule();
  }

  /** Senders awaiting recovery (queued, in the worker's batch or in the native core). */
  get unrecoveredCount(): number {
    let n = this.queued.length + this.inWorker.length;
    for (const b of this.native) {
      const sig = b.txs.signed;
      for (let k = 0; k < sig.length; k += 3) if (!b.block.senderKnown(b.first + sig[k]!)) n++;
    }
    return n;
  }

  /** Hands the signed transactions of one flashblock to the native core; what it leaves (status 2) or a failure is queued. */
  private recoverNatively(block: PendingBlock, index: number, first: number, txs: NativeSignedTxs): void {
    if (txs.signed.length === 0) return;
    let resolve: () => void = () => undefined;
    const done = new Promise<void>((r) => (resolve = r));
    for (const b of this.native) if (b !== this.nativeRunning && !this.state.holds(b.block)) this.dropNative(b);
    this.native.add({ block, index, first, txs, done, resolve });
    this.startNative();
  }

  private dropNative(b: NativeBatch): void {
    this.native.delete(b);
    if (this.nativeRunning === b) this.nativeRunning = null;
    b.resolve();
  }

  /** Whether every signed transaction of a native batch has its sender. */
  private static allKnown(b: NativeBatch): boolean {
    const sig = b.txs.signed;
    for (let k = 0; k < sig.length; k += 3) if (!b.block.senderKnown(b.first + sig[k]!)) return false;
    return true;
  }

  /** Starts the next waiting native batch when none is in flight. */
  private startNative(): void {
    const recover = this.opts.native;
    if (this.nativeRunning !== null || recover == null) return;
    for (const b of this.native) {
      if (!this.state.holds(b.block) || SenderRecovery.allKnown(b)) {
        this.dropNative(b); // settled meanwhile, or recovered here by recoverQueued()
        continue;
      }
      this.nativeRunning = b;
      recover(b.txs.txBytes(), b.txs.signed).then(
        (out) => this.nativeAnswered(b, out),
        () => {
          const sig = b.txs.signed;
          for (let k = 0; k < sig.length; k += 3) this.requeue(b.block, b.first + sig[k]!);
          this.nativeDone(b);
        },
      );
      return;
    }
    this.notifyIfDrained();
  }

  private nativeAnswered(b: NativeBatch, out: Buffer): void {
    this.applyRows(b.block, b.first, b.txs.signed, out);
    this.nativeDone(b);
  }

  /** Writes a native answer's rows (21 bytes per triple of `sig`) for the flashblock whose first tx is at `first`. */
  private applyRows(block: PendingBlock, first: number, sig: Uint32Array, out: Buffer): void {
    const held = this.state.holds(block);
    for (let k = 0; 3 * k < sig.length; k++) {
      const p = first + sig[3 * k]!;
      const status = out[21 * k];
      if (status === 2) {
        this.requeue(block, p);
        continue;
      }
      // Recovered on this thread meanwhile (recoverQueued): the same address, or it is not handed on.
      if (status === 1) block.setSenderRecovered(p, out, 21 * k + 1);
      // A block settled or replaced meanwhile no longer indexes its senders.
      if (held && block.senderKnown(p)) block.noteNonce(p);
    }
  }

  /** Queues `position` for this side when its block is held and its sender still unknown. */
  private requeue(block: PendingBlock, position: number): void {
    if (!block.senderKnown(position) && this.state.holds(block)) this.queued.push(block, position);
  }

  private nativeDone(b: NativeBatch): void {
    this.dropNative(b);
    this.startNative();
    if (this.queued.length > 0) this.schedule();
    else this.notifyIfDrained();
  }

  /**
   * The sender of the transaction at `position` of `block` when the native core or the worker recovered it from the
   * transaction's own bytes; null when it is not recovered (yet), does not recover, is a deposit (its `from` is part
   * of it), or was recovered on this thread.
   */
  recoveredSender(block: BlockView, position: number): string | null {
    return (block as PendingBlock).recoveredSender(position);
  }

  /** recoveredSender of positions [from, to) as FlashblockWork.senders rows (21 bytes each) into `out`. */
  recoveredSenderRows(block: BlockView, from: number, to: number, out: Uint8Array): void {
    (block as PendingBlock).recoveredSenderRows(from, to, out);
  }

  /**
   * Settles once the native core has answered for the signed transactions of flashblock `index` of `block` (their
   * senders are written then, or left to this side); null when there is no such recovery waiting or in flight.
   * Frames the JS decoder handled get null: their worker batches are not per flashblock.
   */
  recovering(block: BlockView, index: number): Promise<void> | null {
    for (const b of this.native) if (b.block === block && b.index === index) return b.done;
    return null;
  }

  /** Resolves once every sender queued so far has been recovered (or found unrecoverable): an event to wait on. */
  drained(): Promise<void> {
    if (this.unrecoveredCount === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  private notifyIfDrained(): void {
    if (this.drainWaiters.length === 0 || this.unrecoveredCount > 0) return;
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of waiters) w();
  }

  private schedule(): void {
    const worker = this.opts.worker;
    if (worker != null && worker.usable) {
      // Preparing a batch (signing hash per transaction, ~1–3 ms for 200) waits until the loop has polled sockets
      // once after the apply: requests that arrived meanwhile are answered from the new state first. A reader that
      // needs the senders meanwhile (settled) sends the batch at once.
      if (this.workerScheduled) return;
      this.workerScheduled = true;
      setImmediate(() => setImmediate(() => this.flushToWorker()));
      return;
    }
    if (this.sliceScheduled || this.queued.length === 0) return;
    this.sliceScheduled = true;
    setImmediate(() => {
      this.sliceScheduled = false;
      if (this.recoverQueued(this.opts.sliceMs ?? 2) > 0) this.schedule();
      else this.notifyIfDrained();
    });
  }

  private flushToWorker(): void {
    if (!this.workerScheduled) return;
    this.workerScheduled = false;
    const worker = this.opts.worker;
    if (worker != null && worker.usable) this.recoverOn(worker);
    else this.schedule();
  }

  /** Recovers one sender on this thread and indexes its nonce; false when its signature does not recover. */
  private recoverOne(block: PendingBlock, position: number): boolean {
    if (block.senderKnown(position)) return true;
    const now = this.opts.nativeNow;
    if (now != null) {
      const raw = block.txBytes(position);
      ONE[2] = raw.length;
      const row = now(Buffer.from(raw.buffer, raw.byteOffset, raw.length), ONE);
      if (row[0] === 0) return false;
      if (row[0] === 1) {
        // Recovered from the transaction's own bytes by the native core, as its threads would have: the engine may
        // take it (recoveredSender).
        block.setSenderRecovered(position, row, 1);
        if (this.state.holds(block)) block.noteNonce(position);
        return true;
      }
      // 2: a type the native decoder lacks; the JS path below recovers it.
    }
    const from = recoverSender(block.txObject(position));
    if (from === null) return false;
    block.setSenderHex(position, from, false);
    if (this.state.holds(block)) block.noteNonce(position);
    return true;
  }

  /**
   * Recovers queued senders on this thread for at most `budgetMs` (all when undefined: then also those the native
   * core has not answered yet, whose answers are then only confirmations). Returns how many are still queued.
   */
  recoverQueued(budgetMs?: number): number {
    if (budgetMs === undefined) {
      // The native batches' senders, then the whole queue (recoverHeldSlice with no bound).
      this.recoverHeldSlice(Infinity);
      return this.queued.length;
    }
    const q = this.queued;
    if (q.length === 0) {
      this.notifyIfDrained();
      return 0;
    }
    const end = budgetMs === undefined ? Infinity : performance.now() + budgetMs;
    let i = 0;
    for (; i < q.length; i++) {
      const block = q.blocks[i]!;
      if (this.state.holds(block)) this.recoverOne(block, q.positions[i]!);
      if ((i & 7) === 7 && performance.now() >= end) {
        i++;
        break;
      }
    }
    if (i >= q.length) this.queued = new Queue();
    else {
      q.blocks = q.blocks.slice(i);
      q.positions = q.positions.slice(i);
    }
    if (this.queued.length === 0) this.notifyIfDrained();
    return this.queued.length;
  }

  /**
   * Sends the queue to `worker`: the inputs are prepared here, the public keys come back later and are applied on
   * this thread. One batch in flight; senders that arrive meanwhile go in the next one. A failed worker puts the
   * batch back and recovery continues on the event loop.
   */
  private recoverOn(worker: RecoveryThread): void {
    if (this.inWorker.length > 0 || this.queued.length === 0) return;
    const batch = this.queued.take();
    const inputs: RecoveryInput[] = [];
    const sent = new Queue();
    for (let i = 0; i < batch.length; i++) {
      const block = batch.blocks[i]!;
      const p = batch.positions[i]!;
      if (!this.state.holds(block) || block.senderKnown(p)) continue;
      const input = recoveryInput(block.txObject(p));
      if (input !== null) {
        inputs.push(input);
        sent.push(block, p);
      } else this.recoverOne(block, p); // nothing for the worker: settled here
    }
    if (inputs.length === 0) {
      this.notifyIfDrained();
      return;
    }
    this.inWorker = sent;
    this.inWorkerDone = worker.recover(inputs).then(
      (pubs) => {
        this.inWorker = new Queue();
        this.inWorkerDone = null;
        for (let i = 0; i < sent.length; i++) {
          const block = sent.blocks[i]!;
          const p = sent.positions[i]!;
          const pub = pubs[i];
          const from = pub == null || block.senderKnown(p) ? null : addressOfPublicKey(pub);
          if (from !== null) block.setSenderHex(p, from, true);
          // A block settled or replaced meanwhile no longer indexes its senders.
          if (this.state.holds(block) && block.senderKnown(p)) block.noteNonce(p);
        }
        if (this.queued.length > 0) this.recoverOn(worker);
        else this.notifyIfDrained();
      },
      () => {
        this.inWorker = new Queue();
        this.inWorkerDone = null;
        // Back to the queue (still held, still unknown), ahead of what arrived meanwhile.
        const later = this.queued.take();
        for (let i = 0; i < sent.length; i++) this.requeue(sent.blocks[i]!, sent.positions[i]!);
        for (let i = 0; i < later.length; i++) this.queued.push(later.blocks[i]!, later.positions[i]!);
        this.schedule();
      },
    );
  }

  /** SenderSource: recovers the unknown senders of `recs` now, on this thread. */
  recover(recs: Iterable<TxView>): void {
    for (const r of recs) {
      const block = r.block as PendingBlock;
      const p = r.position;
      // From the block's columns: `r.tx` would build the transaction's object first.
      if (p < block.txCount && !block.senderKnown(p) && block.txType(p) !== TX_DEPOSIT) this.recoverOne(block, p);
    }
  }

  /** SenderSource: recovers the unknown senders of the first `count` transactions of `block` now, on this thread. */
  recoverFirst(block: BlockView, count: number): void {
    const b = block as PendingBlock;
    for (let p = 0; p < count && p < b.txCount; p++) if (!b.senderKnown(p) && b.txType(p) !== TX_DEPOSIT) this.recoverOne(b, p);
  }

  /** SenderSource: see there. Recovers the queue on this thread when the worker does not hold a relevant batch. */
  settled(address: string): Promise<void> | null {
    this.flushToWorker();
    if ((this.inWorkerDone !== null || this.native.size > 0) && this.maySend(address)) {
      return (async () => {
        const deadline = performance.now() + NATIVE_WAIT_MS;
        // A batch that finishes may start the next (senders that arrived meanwhile): wait for those too.
        while (this.inWorkerDone !== null || this.native.size > 0) {
          if (this.inWorkerDone !== null) {
            await this.inWorkerDone;
            continue;
          }
          const left = deadline - performance.now();
          // The native batches are late (their threads get no core): what they hold is recovered here instead,
          // and their answers, when they come, only confirm it.
          if (left <= 0 || !(await settlesWithin(Promise.all([...this.native].map((b) => b.done)), left))) {
            await this.recoverLate();
            return;
          }
        }
        if (this.queued.length > 0 && this.maySend(address)) this.recoverQueued();
      })();
    }
    if (this.queued.length > 0 && this.maySend(address)) this.recoverQueued();
    return null;
  }

  /**
   * Recovers what the late native batches hold (and the queue) without holding the event loop: on the native core's
   * default-priority thread when there is one (a few rounds, for batches that arrive meanwhile), then what is left on
   * this thread in slices of `sliceMs` (default 2 ms) with a loop turn between them. Done at once on this thread, it
   * held the event loop for 15-90 ms each time the recovery threads got no core (bench/combined.ts quick: 424 times,
   * 5.7 s in 41 s). Queries that find it running wait for the same one. Resolves when nothing is left.
   */
  private recoverLate(): Promise<void> {
    this.lateRecovery ??= (async () => {
      try {
        const urgent = this.opts.nativeUrgent;
        if (urgent != null) for (let round = 0; round < URGENT_ROUNDS && (await this.recoverUrgently(urgent)); round++);
        while (this.recoverHeldSlice(this.opts.sliceMs ?? 2)) await nextTurn();
      } finally {
        this.lateRecovery = null;
      }
    })();
    return this.lateRecovery;
  }

  /** One round of {@link recoverLate} on the urgent thread: the unknown senders of every held native batch. */
  private async recoverUrgently(urgent: (txBytes: Buffer, signed: Uint32Array) => Promise<Buffer>): Promise<boolean> {
    const runs: Promise<void>[] = [];
    for (const b of this.native) {
      if (!this.state.holds(b.block)) continue;
      const sig = b.txs.signed;
      const left: number[] = [];
      for (let k = 0; k < sig.length; k += 3) if (!b.block.senderKnown(b.first + sig[k]!)) left.push(sig[k]!, sig[k + 1]!, sig[k + 2]!);
      if (left.length === 0) continue;
      const triples = Uint32Array.from(left);
      // A failure leaves them to the slices on this thread.
      runs.push(urgent(b.txs.txBytes(), triples).then((out) => this.applyRows(b.block, b.first, triples, out), () => undefined));
    }
    if (runs.length === 0) return false;
    await Promise.all(runs);
    return true;
  }

  /** One slice of {@link recoverLate} (all of it with an Infinity budget): true when something is left. */
  private recoverHeldSlice(budgetMs: number): boolean {
    const end = performance.now() + budgetMs;
    let n = 0;
    for (const b of this.native) {
      if (!this.state.holds(b.block)) continue;
      const sig = b.txs.signed;
      for (let k = 0; k < sig.length; k += 3) {
        const p = b.first + sig[k]!;
        if (b.block.senderKnown(p)) continue;
        this.recoverOne(b.block, p);
        if ((++n & 7) === 0 && performance.now() >= end) return true;
      }
    }
    const left = performance.now() < end ? this.recoverQueued(Math.max(0, end - performance.now())) : this.queued.length;
    return left > 0;
  }

  /**
   * Whether `address` may be the sender of a transaction whose sender is not recovered yet. A sender's account
   * changes (nonce, and balance through fees), so it is in its block's new_account_balances: an address absent from
   * every such block sent none of them, and a nonce query for it need not recover ~65 µs per pending transaction.
   */
  private maySend(address: string): boolean {
    let last: PendingBlock | null = null;
    const may = (b: PendingBlock): boolean => {
      if (b === last) return false;
      last = b;
      return this.state.holds(b) && (!b.balancesComplete || b.balanceOf(address) !== undefined);
    };
    for (const q of [this.queued, this.inWorker]) for (const b of q.blocks) if (may(b)) return true;
    // A native batch whose senders were all recovered here meanwhile (it was late) holds nothing to wait for.
    for (const b of this.native) if (!SenderRecovery.allKnown(b) && may(b.block)) return true;
    return false;
  }
}

/** The signed transactions of positions [from, to) of `block` whose sender is unknown, laid out for the native core. */
function signedOf(block: PendingBlock, from: number, to: number): NativeSignedTxs {
  const positions: number[] = [];
  for (let p = from; p < to; p++) if (!block.senderKnown(p) && block.txType(p) !== TX_DEPOSIT) positions.push(p);
  const { bytes, offsets } = packTxBytes(block, positions);
  const signed = new Uint32Array(3 * positions.length);
  for (let k = 0; k < positions.length; k++) signed.set([positions[k]! - from, offsets[k]!, offsets[k + 1]!], 3 * k);
  return { txBytes: () => bytes, signed };
}

/** Resolves after one event-loop turn (sockets polled in between). */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Whether `p` settles within `ms` (the timer is cleared when it does). */
function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    const done = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    p.then(done, done);
  });
}
