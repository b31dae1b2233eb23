// The native frame decoder's TypeScript side: calls native/src/frame through the addon, which writes the frame's
// layout into the process's frame pool (src/chain/frame-pool.ts), and reads the frame's own fields (payload id,
// header) from it; the transactions, receipts and balances stay in the layout behind a LayoutBody
// (src/chain/layout-body.ts). Never decides a verdict itself: a frame the native decoder declines goes to the JS
// decoder (frame.ts), which words the reason.
import { loadAddon, type AddonDecodeOutcome } from '../exec/addon.js';
import { FramePool } from '../chain/frame-pool.js';
import { LayoutBody } from '../chain/layout-body.js';
import { decodeAccessList, type AccountChanges } from '../chain/access-list.js';
import { decodeTransaction } from '../chain/tx.js';
import { TX_POST_EXEC } from '../chain/types.js';
import type { Flashblock, FlashblockBase } from '../chain/flashblock.js';
import type { DecodedTx } from '../chain/types.js';

/** The signed transactions of a natively decoded flashblock, ready for `recoverSenders` (off the JS thread). */
export interface NativeSenders {
  /** Every transaction's bytes back to back, read when the recovery starts (the layout may have moved by then). */
  txBytes(): Buffer;
  /** Per signed transaction: [index in the flashblock, start, end) into `txBytes()` (a copy). */
  signed: Uint32Array;
}

export interface NativeDecoder {
  decodeFlashblock(json: Buffer, mem: Buffer, at: number, room: number): AddonDecodeOutcome;
  takeLayout(mem: Buffer, at: number): boolean;
  /** Resolves to 21 bytes per signed transaction: status (1 recovered, 0 unrecoverable, 2 not decoded natively) + address. */
  recoverSenders(txBytes: Buffer, signed: Uint32Array): Promise<Buffer>;
  /** The same recovery on the calling thread. */
  recoverNow: (txBytes: Buffer, signed: Uint32Array) => Buffer;
  /** The same recovery on one thread at the default priority, for a batch that is late because the idle-priority threads get no core. */
  recoverUrgent: (txBytes: Buffer, signed: Uint32Array) => Promise<Buffer>;
}

type RecoverStart = (id: number, txBytes: Buffer, signed: Uint32Array) => void;

/**
 * Recoveries in flight on the native recovery threads, by id. The addon's completion callback does not hold the event
 * loop (a weak threadsafe function), so a ref'd timer does while any is in flight: a caller awaiting one is not left
 * by a loop that ran dry.
 */
class Recoveries {
  private readonly waiting = new Map<number, (rows: Buffer) => void>();
  private nextId = 0;
  /** Ref'd while a recovery is in flight (one timer for the process's life: ref() and unref() cost next to nothing). */
  private readonly hold = setInterval(() => undefined, 1 << 30).unref();

  constructor(private readonly start: RecoverStart) {}

  readonly done = (id: number, rows: Buffer): void => {
    const resolve = this.waiting.get(id);
    if (resolve === undefined) return;
    this.waiting.delete(id);
    if (this.waiting.size === 0) this.hold.unref();
    resolve(rows);
  };

  recover(txBytes: Buffer, signed: Uint32Array, start: RecoverStart = this.start): Promise<Buffer> {
    const id = this.nextId;
    this.nextId = (this.nextId + 1) >>> 0;
    return new Promise<Buffer>((resolve) => {
      start(id, txBytes, signed);
      this.waiting.set(id, resolve);
      this.hold.ref();
    });
  }
}

let decoder: NativeDecoder | null | undefined;

/** The native decoder, or null when the addon is not built (or not this version's): the JS decoder is used then. */
export function nativeDecoder(): NativeDecoder | null {
  if (decoder !== undefined) return decoder;
  const a = loadAddon();
  if (a instanceof Error) {
    decoder = null;
    return decoder;
  }
  const recoveries = new Recoveries(a.recoverStart.bind(a));
  const urgent: RecoverStart = a.recoverStartUrgent.bind(a);
  a.recoverInit(recoveries.done);
  decoder = {
    decodeFlashblock: a.decodeFlashblock.bind(a),
    takeLayout: a.takeLayout.bind(a),
    recoverSenders: (txBytes, signed) => recoveries.recover(txBytes, signed),
    recoverNow: a.recoverNow.bind(a),
    recoverUrgent: (txBytes, signed) => recoveries.recover(txBytes, signed, urgent),
  };
  return decoder;
}

let pool: FramePool | null = null;

/** The process's frame pool, allocated (and its pages touched) on first use. */
export function framePool(): FramePool {
  if (pool === null) {
    pool = new FramePool();
    pool.prefault();
  }
  return pool;
}

/**
 * Decodes a frame's JSON bytes natively: its layout in the frame pool (or, when the pool is full, in memory of its
 * own), or why the native decoder declined it.
 */
export function decodeLayout(native: NativeDecoder, json: Buffer, p: FramePool = framePool()): LayoutBody | string {
  p.offer();
  const r = native.decodeFlashblock(json, p.mem, p.offerAt, p.offerRoom);
  if (r.declined !== '') return r.declined;
  // Written where it fit (unless the pool tracks as many regions as it can: then it is written again after reserve).
  const written = r.written && p.canCommit;
  const at = written ? p.offerAt : p.reserve(r.size);
  if (at < 0 || (!written && !native.takeLayout(p.mem, at))) return ownLayout(native, r.size);
  let body: LayoutBody;
  try {
    body = new LayoutBody(p.mem, p.words, p.quads, at, p, p.nextSeq);
  } catch (e) {
    return (e as Error).message; // nothing recorded: the bytes are free space again
  }
  p.commit(at, r.size, body);
  return body;
}

/** The last decoded layout in memory of its own (the pool is full: a reader held blocks, or frames came too fast). */
function ownLayout(native: NativeDecoder, size: number): LayoutBody | string {
  // Not zero-filled: every byte of it is written by takeLayout.
  const mem = Buffer.allocUnsafeSlow(size);
  if (!native.takeLayout(mem, 0)) return 'layout not taken';
  try {
    return new LayoutBody(mem, new Uint32Array(mem.buffer, mem.byteOffset, size >>> 2), new BigUint64Array(mem.buffer, mem.byteOffset, size >>> 3), 0);
  } catch (e) {
    return (e as Error).message;
  }
}

const TWO_32 = 4294967296;

/** Walks the frame's own fields in the order native/src/frame/parse.rs wrote them (strings are copies). */
class FieldReader {
  private i: number;
  constructor(private readonly b: LayoutBody) {
    this.i = b.fieldsAt;
  }

  next(): number {
    return this.b.words[this.i++] as number;
  }
  str(): string {
    const a = this.next();
    return this.b.text(a, this.next() - a);
  }
  num(): number {
    const hi = this.next();
    return hi * TWO_32 + this.next();
  }
  /** A quantity: 0 + its index in the u64 area, or 1 + its text. */
  qty(): bigint {
    if (this.next() === 0) return this.b.quantity(this.next());
    return BigInt(this.str());
  }
}

/**
 * The flashblock of a decoded layout; null when this side declines it after all (a post-exec transaction the full
 * decoder rejects or that belongs to another block: the JS decoder words that). The caller releases the layout then.
 */
export function flashblockOfLayout(body: LayoutBody): { fb: Flashblock; senders: NativeSenders | null } | null {
  const r = new FieldReader(body);
  const index = r.num();
  const payloadId = r.str();
  const blockNumber = r.num();
  const prevBlockNumber = r.num() - 1;
  const prevIndex = r.num() - 1;
  let accessList: AccountChanges[] | null = null;
  let accessListProblem: string | null = null;
  const al = r.next();
  if (al === 1) {
    const d = decodeAccessList(r.str());
    if (d.ok) accessList = d.accounts;
    else accessListProblem = d.reason;
  } else if (al === 2) accessListProblem = 'not hex bytes';
  let base: FlashblockBase | null = null;
  if (r.next() === 1) {
    base = {
      parentBeaconBlockRoot: r.str(),
      parentHash: r.str(),
      feeRecipient: r.str(),
      prevRandao: r.str(),
      blockNumber: r.num(),
      gasLimit: r.qty(),
      timestamp: r.num(),
      extraData: r.str(),
      baseFeePerGas: r.qty(),
    };
  }
  const stateRoot = r.str();
  const receiptsRoot = r.str();
  const logsBloom = r.str();
  const gasUsed = r.qty();
  const blockHash = r.str();
  const blobGasUsed = r.next() === 1 ? r.qty() : null;
  const withdrawalsRoot = r.next() === 1 ? r.str() : null;
  let postExecTx: DecodedTx | null = null;
  if (r.next() === 1) {
    const d = decodeTransaction(r.str());
    if (!d.ok || d.tx.type !== TX_POST_EXEC || (d.tx.postExec != null && d.tx.postExec.blockNumber !== BigInt(blockNumber))) return null;
    postExecTx = d.tx;
  }
  const fb: Flashblock = {
    payloadId,
    index,
    blockNumber,
    base,
    diff: { stateRoot, receiptsRoot, logsBloom, gasUsed, blockHash, blobGasUsed, withdrawalsRoot, withdrawals: [], postExecTx },
    body,
    accessList,
    accessListProblem,
    prevBlockNumber,
    prevIndex,
  };
  const signed = body.signed();
  return { fb, senders: signed.length === 0 ? null : { txBytes: () => body.txBytesArea(), signed: signed.slice() } };
}
