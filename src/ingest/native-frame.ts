// The native frame decoder's TypeScript side: calls native/src/frame.rs through the addon and turns its compact layout
// into the Flashblock the rest of the daemon reads. Never decides a verdict itself: a frame the native decoder
// declines goes to the JS decoder (frame.ts), which words the reason.
import { loadAddon, type AddonFrameLayout } from '../exec/addon.js';
import { LazyTx } from '../chain/lazy-tx.js';
import { decodeAccessList, type AccountChanges } from '../chain/access-list.js';
import { decodeTransaction } from '../chain/tx.js';
import { TX_DEPOSIT, TX_POST_EXEC } from '../chain/types.js';
import type { FlashLog, FlashReceipt, Flashblock, FlashblockBase } from '../chain/flashblock.js';
import type { DecodedTx } from '../chain/types.js';

/** The signed transactions of a natively decoded flashblock, ready for `recoverSenders` (off the JS thread). */
export interface NativeSenders {
  /** Every transaction's bytes back to back. */
  txBytes: Buffer;
  /** Per signed transaction: [index in the flashblock, start, end) into `txBytes`. */
  signed: Uint32Array;
}

export interface NativeDecoder {
  decodeFlashblock(json: Buffer): AddonFrameLayout;
  /** Resolves to 21 bytes per signed transaction: status (1 recovered, 0 unrecoverable, 2 not decoded natively) + address. */
  recoverSenders(txBytes: Buffer, signed: Uint32Array): Promise<Buffer>;
}

let decoder: NativeDecoder | null | undefined;

/** The native decoder, or null when the addon is not built (or predates it): the JS decoder is used then. */
export function nativeDecoder(): NativeDecoder | null {
  if (decoder !== undefined) return decoder;
  const a = loadAddon();
  decoder = a instanceof Error || typeof a.decodeFlashblock !== 'function' || typeof a.recoverSenders !== 'function' ? null : (a as NativeDecoder);
  return decoder;
}

const NONE = 0xffffffff;
const TWO_32 = 4294967296;

/** Walks the layout in the order native/src/frame.rs wrote it. */
class LayoutReader {
  i = 0;
  qi = 0;
  constructor(
    readonly u: Uint32Array,
    readonly s: string,
    readonly q: BigUint64Array,
  ) {}

  next(): number {
    return this.u[this.i++] as number;
  }
  str(): string {
    const a = this.u[this.i++] as number;
    return this.s.substring(a, this.u[this.i++] as number);
  }
  /**
   * A string that does not keep the layout's text alive: V8 holds a substring of 13+ characters as a slice of its
   * parent, so a payload id kept in the hedge memory (4,096 frames) kept each frame's whole text (~90 KB for 200 txs)
   * that long. For the frame's own fields, which outlive its transactions' block in places; per-transaction strings
   * (hashes, balance keys, logs) live as long as the block and stay slices.
   */
  own(): string {
    return (' ' + this.str()).slice(1);
  }
  num(): number {
    const hi = this.u[this.i++] as number;
    return hi * TWO_32 + (this.u[this.i++] as number);
  }
  qty(): bigint {
    return this.u[this.i++] === 0 ? (this.q[this.qi++] as bigint) : BigInt(this.str());
  }
  optQty(): bigint | null {
    return this.u[this.i++] === 0 ? null : this.qty();
  }
}

/**
 * A receipt of a natively decoded flashblock: its scalars read at decode, its logs left in the layout and built on
 * first read. A held block keeps one object per receipt instead of a graph of log objects, topic arrays and strings
 * that is promoted and freed per block (bench/combined.ts GC counts); the logs read are those `readReceipt` built.
 */
class LayoutReceipt implements FlashReceipt {
  private built: FlashLog[] | null = null;
  constructor(
    readonly type: number | null,
    readonly status: number | null,
    readonly cumulativeGasUsed: bigint | null,
    readonly logCount: number,
    readonly depositNonce: bigint | null,
    readonly depositReceiptVersion: bigint | null,
    /** The layout's u32 words and strings, and the word where the logs start (after their count). */
    private readonly u: Uint32Array,
    private readonly s: string,
    private readonly logsAt: number,
  ) {}

  get logs(): FlashLog[] {
    if (this.built === null) {
      const r = new LayoutReader(this.u, this.s, EMPTY_Q);
      r.i = this.logsAt;
      const logs: FlashLog[] = new Array(this.logCount);
      for (let i = 0; i < logs.length; i++) {
        const address = r.str();
        const k = r.next();
        const topics: string[] = new Array(k);
        for (let j = 0; j < k; j++) topics[j] = r.str();
        logs[i] = { address, topics, data: r.str() };
      }
      this.built = logs;
    }
    return this.built;
  }

  /** The same JSON as a plain receipt object (field order of `readReceipt`'s former literal). */
  toJSON(): FlashReceipt {
    return { type: this.type, status: this.status, cumulativeGasUsed: this.cumulativeGasUsed, logs: this.logs, depositNonce: this.depositNonce, depositReceiptVersion: this.depositReceiptVersion };
  }
}

const EMPTY_Q = new BigUint64Array(0);

function readReceipt(r: LayoutReader): FlashReceipt {
  const t = r.next();
  const st = r.next();
  const cumulativeGasUsed = r.optQty();
  const n = r.next();
  const logsAt = r.i;
  // Skip the logs: per log an address (2 words), a topic count and 2 words per topic, the data (2 words).
  for (let i = 0; i < n; i++) r.i += 5 + 2 * (r.u[r.i + 2] as number);
  const depositNonce = r.optQty();
  return new LayoutReceipt(t === NONE ? null : t, st === 2 ? null : st, cumulativeGasUsed, n, depositNonce, r.optQty(), r.u, r.s, logsAt);
}

/**
 * The flashblock of an accepted layout (`declined` empty); null when this side declines it after all (a post-exec
 * transaction the full decoder rejects or that belongs to another block: the JS decoder words that).
 */
export function flashblockOfLayout(l: AddonFrameLayout): { fb: Flashblock; senders: NativeSenders | null } | null {
  const r = new LayoutReader(l.u, l.s, l.q);
  const index = r.num();
  const payloadId = r.own();
  const blockNumber = r.num();
  const prevBlockNumber = r.num() - 1;
  const prevIndex = r.num() - 1;
  let receipts: Map<string, FlashReceipt> | null = null;
  if (r.next() === 1) {
    receipts = new Map();
    for (let n = r.next(); n > 0; n--) {
      const k = r.str();
      receipts.set(k, readReceipt(r));
    }
  }
  let balances: Map<string, bigint> | null = null;
  if (r.next() === 1) {
    balances = new Map();
    for (let n = r.next(); n > 0; n--) {
      const k = r.str();
      balances.set(k, r.qty());
    }
  }
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
      parentBeaconBlockRoot: r.own(),
      parentHash: r.own(),
      feeRecipient: r.own(),
      prevRandao: r.own(),
      blockNumber: r.num(),
      gasLimit: r.qty(),
      timestamp: r.num(),
      extraData: r.own(),
      baseFeePerGas: r.qty(),
    };
  }
  const stateRoot = r.own();
  const receiptsRoot = r.own();
  const logsBloom = r.own();
  const gasUsed = r.qty();
  const blockHash = r.own();
  const blobGasUsed = r.next() === 1 ? r.qty() : null;
  const withdrawalsRoot = r.next() === 1 ? r.own() : null;
  let postExecTx: DecodedTx | null = null;
  if (r.next() === 1) {
    const d = decodeTransaction(r.str());
    if (!d.ok || d.tx.type !== TX_POST_EXEC || (d.tx.postExec != null && d.tx.postExec.blockNumber !== BigInt(blockNumber))) return null;
    postExecTx = d.tx;
  }
  const n = r.next();
  const txs: DecodedTx[] = new Array(n);
  const bytes = l.txBytes;
  for (let i = 0; i < n; i++) {
    const type = r.next();
    const start = r.next();
    const end = r.next();
    const hash = r.str();
    txs[i] = new LazyTx(type, hash, null, type === TX_DEPOSIT ? r.str() : null, bytes, start, end);
  }
  const fb: Flashblock = {
    payloadId,
    index,
    blockNumber,
    base,
    diff: { stateRoot, receiptsRoot, logsBloom, gasUsed, blockHash, blobGasUsed, withdrawalsRoot, withdrawals: [], postExecTx },
    txs,
    receipts,
    balances,
    accessList,
    accessListProblem,
    prevBlockNumber,
    prevIndex,
  };
  return { fb, senders: l.signed.length === 0 ? null : { txBytes: bytes, signed: l.signed } };
}
