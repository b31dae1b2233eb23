// Sender recovery for pending transactions: the signed transactions whose sender is unknown, recovered by the native
// core off the JS thread when the frame was decoded natively, else on the worker thread beside this file
// (recover-worker.ts) or, without it, on the event loop in short slices. The only writer of `tx.from` and of the
// sender nonce index after apply; readers ask it (SenderSource) and then read. The execution engine takes the senders
// the native core or the worker recovered (recoveredSender, recovering) instead of recovering them a second time.
import { addressOfPublicKey, recoverSender, recoveryInput, type RecoveryInput } from '../chain/sender.js';
import { TX_DEPOSIT, type DecodedTx } from '../chain/types.js';
import { LazyTx } from '../chain/lazy-tx.js';
import type { PendingBlock, TxRecord } from './block.js';
import type { PendingState } from './pending.js';
import type { RecoveryThread } from './recover-worker.js';
import type { BlockView, SenderSource, TxView } from './view.js';

export interface SenderRecoveryOptions {
  /**
   * Recovers off the event loop when given and usable; else recovery runs on the event loop in slices. Only frames the
   * JS decoder handled need it (a lazily started thread, recover-worker.ts, starts at the first such batch).
   */
  worker?: RecoveryThread | null;
  /** Time slice for recovery on the event loop between frames. */
  sliceMs?: number;
  /**
   * The native core's recovery (native/src/frame.rs `recoverSenders`) for flashblocks the native decoder laid out:
   * resolves to 21 bytes per signed transaction (status 1 = recovered, 0 = does not recover, 2 = left to this side;
   * then the address). Runs on the native thread pool, so nothing waits for a socket poll first.
   */
  native?: ((txBytes: Buffer, signed: Uint32Array) => Promise<Buffer>) | null;
}

/** A flashblock's signed transactions as the native decoder laid them out (src/ingest/native-frame.ts). */
export interface NativeSignedTxs {
  txBytes: Buffer;
  /** Per signed transaction: [index in the flashblock, start, end) into `txBytes`. */
  signed: Uint32Array;
}

/** One flashblock's native recovery, waiting or in flight: its records in `signed` order, and its completion. */
interface NativeBatch {
  /** The flashblock (its block and index) whose signed transactions these are. */
  block: PendingBlock;
  index: number;
  recs: TxRecord[];
  txs: NativeSignedTxs;
  done: Promise<void>;
  resolve: () => void;
}

/** Recovers pending senders; see the file comment. */
export class SenderRecovery implements SenderSource {
  /** Signed transactions whose sender is not recovered yet. */
  private queued: TxRecord[] = [];
  /** The batch the worker holds; empty when none is in flight. */
  private inWorker: TxRecord[] = [];
  /** Settles when the worker's batch has been applied (or failed); null when none is in flight. */
  private inWorkerDone: Promise<void> | null = null;
  private sliceScheduled = false;
  /** A batch for the worker is due (prepared after the loop has polled sockets once; see schedule()). */
  private workerScheduled = false;
  /** Resolvers of drained(), called once nothing awaits recovery. */
  private drainWaiters: (() => void)[] = [];
  /**
   * Native recoveries, one per flashblock, in order: one in flight at a time (`nativeRunning`), so a burst of frames
   * (a replay) never floods the thread pool; a waiting one whose block is gone is dropped.
   */
  private readonly native = new Set<NativeBatch>();
  private nativeRunning: NativeBatch | null = null;
  /**
   * Transactions whose `from` was written from a recovery of their own bytes by the native core or the worker: the
   * only senders the engine is given (recoveredSender). Keyed by the tx object, so it goes with its block. Only for
   * transaction objects other than LazyTx (both decoders make LazyTx, which carries the mark itself).
   */
  private readonly offThread = new WeakSet<object>();

  private markOffThread(tx: DecodedTx): void {
    if (tx instanceof LazyTx) tx.senderRecoveredOffThread = true;
    else this.offThread.add(tx);
  }

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
    if (signed !== null && this.opts.native != null) {
      this.recoverNatively(block, index, from, signed);
      return;
    }
    for (let i = from; i < to; i++) {
      const rec = block.txs[i]!;
      if (rec.tx.from === null && rec.tx.type !== TX_DEPOSIT) this.queued.push(rec);
    }
    this.schedule();
  }

  /** Senders awaiting recovery (queued, in the worker's batch or in the native core). */
  get unrecoveredCount(): number {
    let n = this.queued.length + this.inWorker.length;
    for (const b of this.native) for (const r of b.recs) if (r.tx.from === null) n++;
    return n;
  }

  /**
   * Hands the signed transactions of one flashblock (its first at `first` in `block.txs`) to the native core; their
   * senders are written when it answers. What it leaves (status 2) or a failure goes to the queue.
   */
  private recoverNatively(block: PendingBlock, index: number, first: number, txs: NativeSignedTxs): void {
    const sig = txs.signed;
    const recs: TxRecord[] = new Array(sig.length / 3);
    if (recs.length === 0) return;
    for (let k = 0; k < recs.length; k++) recs[k] = block.txs[first + (sig[3 * k] as number)]!;
    let resolve: () => void = () => undefined;
    const done = new Promise<void>((r) => (resolve = r));
    for (const b of this.native) if (b !== this.nativeRunning && !this.state.holds(b.recs[0]!.block)) this.dropNative(b);
    this.native.add({ block, index, recs, txs, done, resolve });
    this.startNative();
  }

  private dropNative(b: NativeBatch): void {
    this.native.delete(b);
    if (this.nativeRunning === b) this.nativeRunning = null;
    b.resolve();
  }

  /** Starts the next waiting native batch when none is in flight. */
  private startNative(): void {
    const recover = this.opts.native;
    if (this.nativeRunning !== null || recover == null) return;
    for (const b of this.native) {
      if (!this.state.holds(b.recs[0]!.block) || b.recs.every((r) => r.tx.from !== null)) {
        this.dropNative(b); // settled meanwhile, or recovered here by recoverQueued()
        continue;
      }
      this.nativeRunning = b;
      recover(b.txs.txBytes, b.txs.signed).then(
        (out) => {
          for (let k = 0; k < b.recs.length; k++) {
            const rec = b.recs[k]!;
            const status = out[21 * k];
            if (status === 2) {
              if (rec.tx.from === null && this.state.holds(rec.block)) this.queued.push(rec);
              continue;
            }
            if (status === 1) {
              const sender = '0x' + out.toString('hex', 21 * k + 1, 21 * k + 21);
              rec.tx.from ??= sender;
              // Recovered on this thread meanwhile (recoverQueued): the same address, or it is not handed on.
              if (rec.tx.from === sender) this.markOffThread(rec.tx);
            }
            // A block settled or replaced meanwhile no longer indexes its senders (noteSender checks).
            this.state.noteSender(rec);
          }
          this.nativeDone(b);
        },
        () => {
          for (const rec of b.recs) if (rec.tx.from === null && this.state.holds(rec.block)) this.queued.push(rec);
          this.nativeDone(b);
        },
      );
      return;
    }
    this.notifyIfDrained();
  }

  private nativeDone(b: NativeBatch): void {
    this.dropNative(b);
    this.startNative();
    if (this.queued.length > 0) this.schedule();
    else this.notifyIfDrained();
  }

  /**
   * The sender of `tx` when the native core or the worker recovered it from the transaction's own bytes; null when it
   * is not recovered (yet), does not recover, is a deposit (its `from` is part of it), or was recovered on this thread.
   */
  recoveredSender(tx: TxView['tx']): string | null {
    return (tx instanceof LazyTx ? tx.senderRecoveredOffThread : this.offThread.has(tx)) ? tx.from : null;
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
    if (this.unrecoveredCount > 0 || this.drainWaiters.length === 0) return;
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

  /** Recovers one record on this thread and indexes its nonce; false when its signature does not recover. */
  private recoverOne(rec: TxRecord): boolean {
    if (recoverSender(rec.tx as DecodedTx) === null) return false;
    this.state.noteSender(rec);
    return true;
  }

  /**
   * Recovers queued senders on this thread for at most `budgetMs` (all when undefined: then also those the native
   * core has not answered yet, whose answers are then only confirmations). Returns how many are still queued.
   */
  recoverQueued(budgetMs?: number): number {
    if (budgetMs === undefined) {
      for (const b of this.native) for (const rec of b.recs) if (rec.tx.from === null && this.state.holds(rec.block)) this.recoverOne(rec);
    }
    const q = this.queued;
    if (q.length === 0) {
      this.notifyIfDrained();
      return 0;
    }
    const end = budgetMs === undefined ? Infinity : performance.now() + budgetMs;
    let i = 0;
    for (; i < q.length; i++) {
      const rec = q[i]!;
      if (this.state.holds(rec.block)) this.recoverOne(rec);
      if ((i & 7) === 7 && performance.now() >= end) {
        i++;
        break;
      }
    }
    this.queued = i >= q.length ? [] : q.slice(i);
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
    const batch = this.queued;
    const inputs: RecoveryInput[] = [];
    const sent: TxRecord[] = [];
    for (const rec of batch) {
      if (!this.state.holds(rec.block)) continue;
      const input = recoveryInput(rec.tx as DecodedTx);
      if (input !== null) {
        inputs.push(input);
        sent.push(rec);
      } else this.recoverOne(rec); // nothing for the worker: settled here
    }
    const taken = new Set(batch);
    this.queued = [];
    if (inputs.length === 0) {
      this.notifyIfDrained();
      return;
    }
    this.inWorker = sent;
    this.inWorkerDone = worker.recover(inputs).then(
      (pubs) => {
        this.inWorker = [];
        this.inWorkerDone = null;
        for (let i = 0; i < sent.length; i++) {
          const rec = sent[i]!;
          const tx = rec.tx as DecodedTx;
          const pub = pubs[i];
          if (tx.from === null && pub != null) {
            tx.from = addressOfPublicKey(pub);
            if (tx.from !== null) this.markOffThread(tx);
          }
          // A block settled or replaced meanwhile no longer indexes its senders (noteSender checks).
          this.state.noteSender(rec);
        }
        if (this.queued.length > 0) this.recoverOn(worker);
        else this.notifyIfDrained();
      },
      () => {
        this.inWorker = [];
        this.inWorkerDone = null;
        // Back to the queue (still held, still unknown), ahead of what arrived meanwhile.
        const back = sent.filter((r) => r.tx.from === null && this.state.holds(r.block));
        this.queued = [...back, ...this.queued.filter((r) => !taken.has(r))];
        this.schedule();
      },
    );
  }

  /** SenderSource: recovers the unknown senders of `recs` now, on this thread. */
  recover(recs: Iterable<TxView>): void {
    for (const r of recs) if (r.tx.from === null && r.tx.type !== TX_DEPOSIT) this.recoverOne(r as TxRecord);
  }

  /** SenderSource: see there. Recovers the queue on this thread when the worker does not hold a relevant batch. */
  settled(address: string): Promise<void> | null {
    this.flushToWorker();
    if ((this.inWorkerDone !== null || this.native.size > 0) && this.maySend(address)) {
      return (async () => {
        // A batch that finishes may start the next (senders that arrived meanwhile): wait for those too.
        while (this.inWorkerDone !== null || this.native.size > 0) {
          if (this.inWorkerDone !== null) await this.inWorkerDone;
          else for (const b of this.native) await b.done;
        }
        if (this.queued.length > 0 && this.maySend(address)) this.recoverQueued();
      })();
    }
    if (this.queued.length > 0 && this.maySend(address)) this.recoverQueued();
    return null;
  }

  /**
   * Whether `address` may be the sender of a transaction whose sender is not recovered yet. A sender's account
   * changes (nonce, and balance through fees), so it is in its block's new_account_balances: an address absent from
   * every such block sent none of them, and a nonce query for it need not recover ~65 µs per pending transaction.
   */
  private maySend(address: string): boolean {
    let last: PendingBlock | null = null;
    const lists = [this.queued, this.inWorker];
    for (const b of this.native) lists.push(b.recs);
    for (const list of lists) {
      for (const rec of list) {
        if (rec.block === last) continue;
        last = rec.block;
        if (!this.state.holds(last)) continue;
        if (!last.balancesComplete || last.balances.has(address)) return true;
      }
    }
    return false;
  }
}
