// A pending block: its flashblocks (bodies read in place, cumulative diffs, raw frames) and, per transaction, columns
// of numbers and typed-array indexes (by hash, balances, sender nonces) instead of an object each; readers get
// transaction views built on demand (held-tx.ts). Mutated only by PendingState and SenderRecovery (the single
// writer); everything else reads through BlockView.
import type { FlashReceipt, Flashblock, FlashblockBase, FlashblockBody, FlashblockDiff, SenderLookup } from '../chain/flashblock.js';
import type { AccountPost } from '../chain/access-list.js';
import { hashKey, writeAddress } from '../chain/keys.js';
import { TX_DEPOSIT, TX_POST_EXEC, type DecodedTx } from '../chain/types.js';
import { BalanceIndex } from './balances.js';
import { F_OFF_THREAD, F_RECEIPT, F_SENDER, F_SYNTHESISED, GAS_UNKNOWN, SENDER_BYTES, TxColumns } from './columns.js';
import { HeldTx } from './held-tx.js';
import { LocalBlockHasher } from './local-hash.js';
import { NonceIndex, type NonceSource } from './nonces.js';
import { KeyTable } from '../chain/key-table.js';
import type { BlockView, RawFrameView, TxView } from './view.js';

/** One upstream frame as received: rebroadcast byte for byte, replayed to late subscribers. */
export interface RawFrame extends RawFrameView {
  data: Buffer;
  isBinary: boolean;
  blockNumber: number;
  index: number;
  receivedAtMs: number;
}

/** The block's post-exec (0x7d) transaction as a flashblock restated it (`diff.post_exec_tx`): at most one a flashblock. */
export class TxRecord implements TxView {
  constructor(
    readonly tx: DecodedTx,
    readonly block: PendingBlock,
    /** transactionIndex within the block. */
    readonly position: number,
    readonly flashblockIndex: number,
    /** The receipt op-reth gives it; null while the previous cumulative gas is unknown. */
    readonly receipt: FlashReceipt | null,
    readonly firstLogIndex: number,
    readonly gasUsed: bigint | null,
  ) {}
}

/** The receipt op-reth gives a post-exec transaction: status 1, no logs, the previous receipt's cumulative gas. */
export function postExecReceipt(cumulativeGasUsed: bigint): FlashReceipt {
  return { type: TX_POST_EXEC, status: 1, cumulativeGasUsed, logs: [], depositNonce: null, depositReceiptVersion: null };
}

const SAFE = Number.MAX_SAFE_INTEGER;
/** Columns for this many transactions at first (a Base block holds ~2,000; they double as needed). */
const FIRST_CAPACITY = 256;

/** The state of one block number while it is pending. */
export class PendingBlock implements BlockView, SenderLookup, NonceSource {
  readonly diffs: FlashblockDiff[] = [];
  /** Number of transactions after flashblock i was applied. */
  readonly txCountAt: number[] = [];
  /** Flashblock i's transactions, receipts and balances. */
  readonly bodies: FlashblockBody[] = [];
  readonly frames: RawFrame[] = [];
  readonly cols: TxColumns;
  private count = 0;
  private readonly byHash: KeyTable;
  private readonly balanceIndex: BalanceIndex;
  private readonly nonceIndex: NonceIndex;
  /** Rare values kept aside: gasUsed of 2^53 or more, synthesised post-exec receipts, by position. */
  private bigGas: Map<number, bigint> | null = null;
  private synthesisedReceipts: Map<number, FlashReceipt> | null = null;
  /** False once a flashblock with transactions came without new_account_balances (post-Azul metadata). */
  balancesComplete = true;
  /**
   * Post-values of the accounts the stream's access lists (X Layer `metadata.access_list`, EIP-7928) changed in this
   * block so far: exact pending balances, nonces, code and storage the moment a flashblock is applied.
   */
  readonly accountPost = new Map<string, AccountPost>();
  /** True while every flashblock with transactions carried an access list (absent accounts are then unchanged). */
  accessListComplete = true;
  /** Logs of the transactions with a known receipt (the block's log count while `logsKnown`). */
  logCount = 0;
  /** False once a transaction came without a usable receipt: later logIndexes are unknown to the stream. */
  logsKnown = true;
  /** Cumulative gas of the last transaction with a known receipt; -1 unknown; NaN when 2^53 or more (kept aside). */
  private lastCumulative = 0;
  private lastCumulativeBig = 0n;
  /** True while every transaction so far has a usable receipt. */
  receiptsComplete = true;
  /** True once a flashblock arrived without metadata receipts (post-Azul shape). */
  noMetadata = false;
  /**
   * The post-exec (0x7d) transaction as of the latest flashblock (`diff.post_exec_tx`, restated by each one, so
   * replaced or cleared on every apply), at the position after the block's transactions; null when none so far.
   */
  postExec: TxRecord | null = null;
  /** The post-exec transaction as of flashblock i (null: none then); it follows the txCountAt[i] transactions. */
  readonly postExecAt: (TxRecord | null)[] = [];
  /** True once a flashblock's block_hash was zero and the daemon computed it (see local-hash.ts): not canonical. */
  localHash = false;
  /** Builds local hashes for zero block_hash flashblocks (created on first need). */
  hasher: LocalBlockHasher | null = null;
  broken = false;
  brokenReason = '';
  /** Bumped on every applied flashblock; readers cache derived JSON by it. */
  version = 0;
  lastAppliedMs = 0;

  constructor(
    readonly number: number,
    readonly payloadId: string,
    readonly base: FlashblockBase,
    /** Transactions expected (sizes the columns and indexes; they grow past it). */
    expectedTxs = FIRST_CAPACITY,
  ) {
    const n = Math.max(FIRST_CAPACITY, expectedTxs);
    this.cols = new TxColumns(n);
    this.byHash = new KeyTable(n);
    this.balanceIndex = new BalanceIndex(n);
    this.nonceIndex = new NonceIndex(n);
  }

  /** The index the next flashblock must have. */
  get nextIndex(): number {
    return this.diffs.length;
  }
  /** Index of the latest applied flashblock. */
  get lastIndex(): number {
    return this.diffs.length - 1;
  }
  /** The latest cumulative diff. */
  get diff(): FlashblockDiff {
    return this.diffs[this.diffs.length - 1] as FlashblockDiff;
  }
  /** The block hash as of the latest flashblock. */
  get hash(): string {
    return this.diff.blockHash;
  }
  get txCount(): number {
    return this.count;
  }
  /** Cumulative gas of the last transaction with a known receipt, or null when unknown. */
  get lastCumulativeGas(): bigint | null {
    const c = this.lastCumulative;
    return c === -1 ? null : Number.isNaN(c) ? this.lastCumulativeBig : BigInt(c);
  }

  // ---- reads ----

  /** The flashblock that carried the transaction at `position` (< txCount). */
  flashblockOf(position: number): number {
    const at = this.txCountAt;
    let lo = 0;
    let hi = at.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (at[mid]! > position) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
  private slotOf(position: number, f: number): number {
    return f === 0 ? position : position - this.txCountAt[f - 1]!;
  }
  /** The body holding the transaction at `position`; its index there is left in `slot` (no pair allocated). */
  private bodyAt(position: number): FlashblockBody {
    const f = this.flashblockOf(position);
    this.slot = this.slotOf(position, f);
    return this.bodies[f]!;
  }
  private slot = 0;

  /** The transaction at `position` (< txCount) with every field, its sender read from this block. */
  txObject(position: number): DecodedTx {
    return this.bodyAt(position).tx(this.slot, this, position);
  }

  txAt(position: number): TxView | undefined {
    if (!(position >= 0 && position < this.count) || Math.floor(position) !== position) return undefined;
    const f = this.flashblockOf(position);
    return new HeldTx(this, position, f, this.slotOf(position, f));
  }
  txHash(position: number): string {
    return this.bodyAt(position).txHash(this.slot);
  }
  txType(position: number): number {
    return this.bodyAt(position).txType(this.slot);
  }
  txRaw(position: number): string {
    return this.bodyAt(position).txRaw(this.slot);
  }
  txBytes(position: number): Uint8Array {
    return this.bodyAt(position).txBytes(this.slot);
  }
  txByteLength(position: number): number {
    return this.bodyAt(position).txByteLength(this.slot);
  }

  /** The position of the transaction with hash `hash` (lower-case 0x-hex), or -1. */
  findTx(hash: string): number {
    if (hash.length !== 66) return -1;
    const t = this.byHash;
    t.seek(hashKey(hash));
    for (let p = t.next(); p >= 0; p = t.next()) if (this.bodyAt(p).txHashIs(this.slot, hash)) return p;
    return -1;
  }

  /** The newest balance the block's flashblocks report for `address`, or undefined. */
  balanceOf(address: string): bigint | undefined {
    return this.balanceIndex.lookup(address, this.bodies, this.accountPost);
  }

  /** One past the highest nonce `address` uses in this block (senders known so far), or null. */
  nextNonceOf(address: string): bigint | null {
    return this.nonceIndex.next(this, address);
  }

  /** SenderLookup: the sender of the transaction at `position` when known (carried or recovered). */
  senderAt(position: number): string | null {
    if ((this.cols.flags[position]! & F_SENDER) === 0) return null;
    return '0x' + this.cols.senders.toString('hex', position * SENDER_BYTES, (position + 1) * SENDER_BYTES);
  }
  senderKnown(position: number): boolean {
    return (this.cols.flags[position]! & F_SENDER) !== 0;
  }
  /** The sender when recovered off the JS thread from the transaction's own bytes; else null. */
  recoveredSender(position: number): string | null {
    return (this.cols.flags[position]! & F_OFF_THREAD) === 0 ? null : this.senderAt(position);
  }

  /**
   * Rows of 21 bytes into `out`, one per position in [from, to): 1 and the sender when it was recovered off
   * the JS thread from the transaction's own bytes (see recoveredSender), else 0 and zeros.
   */
  recoveredSenderRows(from: number, to: number, out: Uint8Array): void {
    const flags = this.cols.flags;
    const senders = this.cols.senders;
    for (let p = from, o = 0; p < to; p++, o += SENDER_BYTES + 1) {
      if ((flags[p]! & F_OFF_THREAD) === 0) {
        out.fill(0, o, o + SENDER_BYTES + 1);
        continue;
      }
      out[o] = 1;
      out.set(senders.subarray(p * SENDER_BYTES, (p + 1) * SENDER_BYTES), o + 1);
    }
  }

  get senderBytes(): Uint8Array {
    return this.cols.senders;
  }
  nonceAt(position: number): number {
    const body = this.bodyAt(position);
    const j = this.slot;
    if (body.txType(j) === TX_DEPOSIT) {
      // A deposit's nonce is in its receipt (depositNonce), if the stream gave a usable one.
      const flags = this.cols.flags[position]!;
      return (flags & F_RECEIPT) === 0 || (flags & F_SYNTHESISED) !== 0 ? -1 : body.receiptDepositNonce(j);
    }
    if (!body.txExecutes(j)) return -1;
    const n = body.txNonce(j);
    return n >= 0 ? n : NaN;
  }
  nonceBigAt(position: number): bigint | null {
    const body = this.bodyAt(position);
    const j = this.slot;
    return body.txType(j) === TX_DEPOSIT ? (body.receipt(j)?.depositNonce ?? null) : body.tx(j).nonce;
  }

  /** The synthesised post-exec receipt at `position` (F_SYNTHESISED). */
  synthesised(position: number): FlashReceipt | null {
    return this.synthesisedReceipts?.get(position) ?? null;
  }
  /** gasUsed of 2^53 or more at `position`. */
  bigGasUsed(position: number): bigint | null {
    return this.bigGas?.get(position) ?? null;
  }

  // ---- writes (PendingState, SenderRecovery) ----

  /**
   * Appends flashblock `fb`'s transactions (receipts joined, gas used and log indexes derived, indexed by hash) and
   * balances. The caller appends its diff, frame and post-exec transaction.
   */
  append(fb: Flashblock): void {
    const body = fb.body;
    const f = this.bodies.length;
    const first = this.count;
    const n = body.txCount;
    this.bodies.push(body);
    this.txCountAt.push(first + n);
    this.cols.ensure(first + n, first);
    for (let j = 0; j < n; j++) this.appendTx(body, first + j, j);
    if (body.balanceCount >= 0) this.balanceIndex.addFlashblock(f, this.bodies);
  }

  private appendTx(body: FlashblockBody, p: number, j: number): void {
    const cols = this.cols;
    let flags = 0;
    let cum = body.receiptCumulativeGas(j);
    let logs = body.receiptLogCount(j);
    if (cum === -1 && !body.txExecutes(j) && this.lastCumulative !== -1) {
      // A post-exec transaction in diff.transactions (JS decoder only): the receipt op-reth gives it.
      (this.synthesisedReceipts ??= new Map()).set(p, postExecReceipt(this.lastCumulativeGas!));
      flags |= F_SYNTHESISED;
      cum = this.lastCumulative;
      logs = 0;
    }
    // A receipt is kept even when an earlier one is missing (a stream may carry only some): what it cannot give
    // alone (gasUsed without the previous cumulative gas, logIndex without the earlier logs) comes from execution.
    let gas = GAS_UNKNOWN;
    if (cum !== -1) {
      flags |= F_RECEIPT;
      gas = this.gasOf(cum, body, j, p);
    } else {
      this.lastCumulative = -1;
    }
    if (gas === GAS_UNKNOWN) this.receiptsComplete = false;
    cols.gasUsed[p] = gas;
    cols.firstLogIndex[p] = this.logsKnown ? this.logCount : -1;
    if (cum === -1) this.logsKnown = false;
    else this.logCount += logs;
    const sender = body.txSender(j);
    if (sender !== null) {
      writeAddress(cols.senders, p * SENDER_BYTES, sender);
      flags |= F_SENDER;
    }
    cols.flags[p] = flags;
    this.index(body, j, p);
    this.count = p + 1;
    // Signed transactions get their sender (and their nonce indexed) from SenderRecovery.
    if (sender !== null && body.txType(j) === TX_DEPOSIT) this.nonceIndex.note(this, p);
  }

  /** gasUsed from cumulative gas `cum` (NaN: read the receipt's bigint) and the previous one; updates the latter. */
  private gasOf(cum: number, body: FlashblockBody, j: number, p: number): number {
    const last = this.lastCumulative;
    if (!Number.isNaN(cum) && !Number.isNaN(last)) {
      this.lastCumulative = cum;
      // A cumulative gas below the previous one is a stream fault: no gasUsed from it (never a negative one).
      return last !== -1 && cum >= last ? cum - last : GAS_UNKNOWN;
    }
    const c = Number.isNaN(cum) ? (this.synthesised(p)?.cumulativeGasUsed ?? body.receipt(j)!.cumulativeGasUsed!) : BigInt(cum);
    const l = last === -1 ? null : Number.isNaN(last) ? this.lastCumulativeBig : BigInt(last);
    this.lastCumulative = c <= BigInt(SAFE) ? Number(c) : NaN;
    this.lastCumulativeBig = c;
    if (l === null || c < l) return GAS_UNKNOWN;
    const g = c - l;
    if (g <= BigInt(SAFE)) return Number(g);
    (this.bigGas ??= new Map()).set(p, g);
    return NaN;
  }

  /** Indexes position `p` by hash; a later transaction with the same hash is the one found. */
  private index(body: FlashblockBody, j: number, p: number): void {
    const key = body.txHashKey(j);
    const t = this.byHash;
    t.seek(key);
    for (let q = t.next(); q >= 0; q = t.next()) {
      if (this.txHash(q) !== body.txHash(j)) continue; // same key: rare
      t.replace(p);
      return;
    }
    t.add(key, p);
  }

  /** Records that flashblock `f`'s access list set `address`'s balance (in accountPost). */
  noteAccessListBalance(f: number, address: string): void {
    this.balanceIndex.addAccessList(f, address);
  }

  /**
   * The sender of `position` recovered off the JS thread, at `src[at, at + 20)`: written when unknown; when it was
   * recovered on this thread meanwhile, marked off-thread only if it is the same address.
   */
  setSenderOffThread(position: number, src: Uint8Array, at: number): void {
    const d = this.cols.senders;
    const o = position * SENDER_BYTES;
    const flags = this.cols.flags;
    if ((flags[position]! & F_SENDER) !== 0) {
      for (let i = 0; i < SENDER_BYTES; i++) if (d[o + i] !== src[at + i]) return;
    } else {
      for (let i = 0; i < SENDER_BYTES; i++) d[o + i] = src[at + i]!;
    }
    flags[position]! |= F_SENDER | F_OFF_THREAD;
  }

  /**
   * The sender of `position` recovered by the native core from the transaction's own bytes (on any thread), at
   * `src[at, at + 20)`: as setSenderOffThread (the engine may take it), and into a kept transaction object.
   */
  setSenderRecovered(position: number, src: Uint8Array, at: number): void {
    this.setSenderOffThread(position, src, at);
    if (this.bodyAt(position).keepsTxObjects) {
      const tx = this.txObject(position);
      if (tx.from === null) tx.from = this.senderAt(position);
    }
  }

  /** Writes the sender of `position` from its 0x-hex, and into the transaction object the JS decoder keeps. */
  setSenderHex(position: number, hex: string, offThread: boolean): void {
    writeAddress(this.cols.senders, position * SENDER_BYTES, hex);
    this.cols.flags[position]! |= F_SENDER | (offThread ? F_OFF_THREAD : 0);
    const tx = this.txObject(position);
    if (tx.from !== hex) tx.from = hex;
  }

  /** Indexes the nonce of `position`, whose sender is now known. */
  noteNonce(position: number): void {
    this.nonceIndex.note(this, position);
  }
}
