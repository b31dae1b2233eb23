// The native frame decoder's TypeScript side: calls native/src/frame through the addon and reads the frame's own
// fields (payload id, header) from its layout; the transactions, receipts and balances stay in the layout behind a
// LayoutBody (src/chain/layout-body.ts). Never decides a verdict itself: a frame the native decoder declines goes to
// the JS decoder (frame.ts), which words the reason.
import { loadAddon, type AddonFrameLayout } from '../exec/addon.js';
import { LayoutBody } from '../chain/layout-body.js';
import { decodeAccessList, type AccountChanges } from '../chain/access-list.js';
import { decodeTransaction } from '../chain/tx.js';
import { TX_POST_EXEC } from '../chain/types.js';
import type { Flashblock, FlashblockBase } from '../chain/flashblock.js';
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

const TWO_32 = 4294967296;

/** Walks the frame's own fields in the order native/src/frame/parse.rs wrote them. */
class FieldReader {
  private i: number;
  constructor(private readonly b: LayoutBody) {
    this.i = b.fieldsAt;
  }

  next(): number {
    return this.b.u[this.i++] as number;
  }
  str(): string {
    const a = this.next();
    return this.b.s.substring(a, this.next());
  }
  /**
   * A string that does not keep the layout's text alive: V8 holds a substring of 13+ characters as a slice of its
   * parent, and the frame's own fields outlive its block in places (the hedge memory keeps payload ids for 4,096
   * frames).
   */
  own(): string {
    return (' ' + this.str()).slice(1);
  }
  num(): number {
    const hi = this.next();
    return hi * TWO_32 + this.next();
  }
  /** A quantity: 0 + its index in the u64 area, or 1 + its text. */
  qty(): bigint {
    if (this.next() === 0) return this.b.q[this.next()] as bigint;
    return BigInt(this.str());
  }
}

/**
 * The flashblock of an accepted layout (`declined` empty); null when this side declines it after all (a post-exec
 * transaction the full decoder rejects or that belongs to another block, or a layout of another build: the JS decoder
 * words that).
 */
export function flashblockOfLayout(l: AddonFrameLayout): { fb: Flashblock; senders: NativeSenders | null } | null {
  let body: LayoutBody;
  try {
    body = new LayoutBody(l.buf, l.s);
  } catch {
    return null;
  }
  const r = new FieldReader(body);
  const index = r.num();
  const payloadId = r.own();
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
  return { fb, senders: signed.length === 0 ? null : { txBytes: body.bytes, signed } };
}
