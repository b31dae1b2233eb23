// A natively decoded flashblock's body read in place: the layout native/src/frame/layout.rs wrote (tables of u32
// words, u64 quantities, the transactions' bytes and the text of its hex strings) in a frame pool region (or memory
// of its own when the pool is full), behind FlashblockBody. Keeps no object per transaction: transactions, receipts
// and logs are built, as copies, when a reader asks. Pure; never loads the addon.
import type { FlashLog, FlashReceipt, FlashblockBody, SenderLookup } from './flashblock.js';
import type { FramePool, PoolTenant } from './frame-pool.js';
import { LazyTx } from './lazy-tx.js';
import type { DecodedTx } from './types.js';

/** The header words (native/src/frame/layout.rs `H_*`). */
const H_MAGIC = 0;
const H_Q_AT = 2;
const H_TX_BYTES_AT = 4;
const H_TX_COUNT = 6;
const H_TX_TABLE_AT = 7;
const H_HAS_RECEIPTS = 8;
const H_BALANCE_COUNT = 9;
const H_BALANCE_TABLE_AT = 10;
const H_RECEIPTS_AT = 11;
const H_SIGNED_AT = 12;
const H_SIGNED_COUNT = 13;
const H_FIELDS_AT = 14;
const H_TEXT_AT = 15;
const MAGIC = 0xfb1a0003;
/** Words per transaction row and per balance entry, and the receipt record's words before its logs. */
const TX_STRIDE = 9;
const BALANCE_STRIDE = 5;
const RECEIPT_LOGS_AT = 12;
const NONE = 0xffffffff;
const TWO_32 = 4294967296;
const HASH_CHARS = 66;
const ADDRESS_CHARS = 42;

/** Whether `mem[at, at + s.length)` holds the characters of `s` (ASCII). */
function bytesAre(mem: Buffer, at: number, s: string): boolean {
  for (let i = 0; i < s.length; i++) if (mem[at + i] !== s.charCodeAt(i)) return false;
  return true;
}

/** A receipt of a layout: its scalars read when built, its logs on first read. */
class LayoutReceipt implements FlashReceipt {
  readonly type: number | null;
  readonly status: number | null;
  readonly cumulativeGasUsed: bigint | null;
  readonly logCount: number;
  readonly depositNonce: bigint | null;
  readonly depositReceiptVersion: bigint | null;
  private built: FlashLog[] | null = null;
  /** The layout it is read from (an ES private field: deep comparisons and dumps never walk the frame pool). */
  readonly #body: LayoutBody;
  /** The receipt record's first word, from the layout's start (the layout may move: see LayoutBody.moveOut). */
  readonly #at: number;

  constructor(body: LayoutBody, at: number) {
    this.#body = body;
    this.#at = at - body.wordBase;
    const u = body.words;
    this.type = u[at] === NONE ? null : u[at]!;
    this.status = u[at + 1] === 2 ? null : u[at + 1]!;
    this.cumulativeGasUsed = u[at + 2] === 0 ? null : BigInt(u[at + 3]! * TWO_32 + u[at + 4]!);
    this.depositNonce = u[at + 5] === 0 ? null : BigInt(u[at + 6]! * TWO_32 + u[at + 7]!);
    this.depositReceiptVersion = u[at + 8] === 0 ? null : BigInt(u[at + 9]! * TWO_32 + u[at + 10]!);
    this.logCount = u[at + 11]!;
  }

  get logs(): FlashLog[] {
    if (this.built === null) {
      const b = this.#body;
      b.check();
      const u = b.words;
      let w = b.wordBase + this.#at + RECEIPT_LOGS_AT;
      const logs: FlashLog[] = new Array(this.logCount);
      for (let i = 0; i < logs.length; i++) {
        const address = b.text(u[w++]!, ADDRESS_CHARS);
        const k = u[w++]!;
        const topics: string[] = new Array(k);
        for (let j = 0; j < k; j++) topics[j] = b.text(u[w++]!, HASH_CHARS);
        const d = u[w++]!;
        logs[i] = { address, topics, data: b.text(d, u[w++]! - d) };
      }
      this.built = logs;
    }
    return this.built;
  }

  /** The same JSON as a plain receipt object. */
  toJSON(): FlashReceipt {
    return { type: this.type, status: this.status, cumulativeGasUsed: this.cumulativeGasUsed, logs: this.logs, depositNonce: this.depositNonce, depositReceiptVersion: this.depositReceiptVersion };
  }
}

/** A flashblock body over the native decoder's layout (see the file comment). */
export class LayoutBody implements FlashblockBody, PoolTenant {
  readonly txCount: number;
  readonly hasReceipts: boolean;
  readonly balanceCount: number;
  readonly keepsTxObjects = false;
  /** Word offsets (into `words`) of the frame's own fields and the tables; byte offsets of the tx bytes and the text. */
  private fieldsWord: number;
  private txAt: number;
  private receiptsAt: number;
  private balancesAt: number;
  private bytesAt: number;
  private textAt: number;
  // The memory (usually the whole frame pool) as ES private fields: deep comparisons and dumps never walk it. They
  // change once if the pool moves the layout out (moveOut); offsets into the layout do not.
  #mem: Buffer;
  #words: Uint32Array;
  #quads: BigUint64Array;
  #base: number;
  #pool: FramePool | null;
  readonly #seq: number;

  /** The memory the layout lies in, as bytes and as u32 words (word indexes of this body are into it). */
  get mem(): Buffer {
    return this.#mem;
  }
  get words(): Uint32Array {
    return this.#words;
  }
  /** The word where the layout starts in `words`. */
  get wordBase(): number {
    return this.#base >>> 2;
  }
  /** The word where the frame's own fields start (read in order by src/ingest/native-frame.ts). */
  get fieldsAt(): number {
    return this.fieldsWord;
  }

  /**
   * The layout at byte `base` (8-aligned) of `mem` (viewed as `words` and `quads` too): region `seq` of `pool`, or
   * memory of its own (pool null). Throws when it is not a layout of this format (an addon from another build).
   */
  constructor(mem: Buffer, words: Uint32Array, quads: BigUint64Array, base: number, pool: FramePool | null = null, seq = 0) {
    const w0 = base >>> 2;
    if (base % 8 !== 0 || w0 + 18 > words.length || words[w0 + H_MAGIC] !== MAGIC) throw new Error('not a frame layout of this build');
    this.#mem = mem;
    this.#words = words;
    this.#quads = quads;
    this.#base = base;
    this.#pool = pool;
    this.#seq = seq;
    const w = w0;
    this.txCount = words[w + H_TX_COUNT]!;
    this.txAt = w + words[w + H_TX_TABLE_AT]!;
    this.hasReceipts = words[w + H_HAS_RECEIPTS] === 1;
    this.balanceCount = words[w + H_BALANCE_COUNT] === NONE ? -1 : words[w + H_BALANCE_COUNT]!;
    this.balancesAt = w + words[w + H_BALANCE_TABLE_AT]!;
    this.receiptsAt = w + words[w + H_RECEIPTS_AT]!;
    this.fieldsWord = w + words[w + H_FIELDS_AT]!;
    this.bytesAt = base + words[w + H_TX_BYTES_AT]!;
    this.textAt = base + words[w + H_TEXT_AT]!;
  }

  /** Throws when this frame's pool region was given back and reused (a reader kept a dropped block's view too long). */
  check(): void {
    if (this.#pool !== null && !this.#pool.live(this.#seq)) throw new Error('flashblock no longer held: its memory was reused');
  }

  /** Gives the frame's memory back to its pool (its block was dropped, or it never applied). */
  release(): void {
    this.#pool?.release(this.#seq);
  }

  /** PoolTenant: the pool needs the region back while the frame may still be read; it copies the layout out. */
  moveOut(size: number): void {
    const base = this.#base;
    const mem = Buffer.allocUnsafeSlow(size);
    this.#mem.copy(mem, 0, base, base + size);
    this.#mem = mem;
    this.#words = new Uint32Array(mem.buffer, mem.byteOffset, size >>> 2);
    this.#quads = new BigUint64Array(mem.buffer, mem.byteOffset, size >>> 3);
    this.#base = 0;
    this.#pool = null;
    const w = base >>> 2;
    this.fieldsWord -= w;
    this.txAt -= w;
    this.receiptsAt -= w;
    this.balancesAt -= w;
    this.bytesAt -= base;
    this.textAt -= base;
  }

  /** `chars` characters of the text from offset `at`. */
  text(at: number, chars: number): string {
    return this.mem.toString('latin1', this.textAt + at, this.textAt + at + chars);
  }
  /** A u64 quantity of the layout by its index. */
  quantity(i: number): bigint {
    return this.#quads[(this.#base >>> 3) + (this.#words[(this.#base >>> 2) + H_Q_AT]! >>> 3) + i]!;
  }

  /** The signed transactions for native sender recovery: triples [position, start, end) into `txBytesArea()`. */
  signed(): Uint32Array {
    const w = this.#base >>> 2;
    const at = w + this.words[w + H_SIGNED_AT]!;
    return this.words.subarray(at, at + 3 * this.words[w + H_SIGNED_COUNT]!);
  }
  /** The transactions' bytes back to back (a view: for the native recovery call, which copies it). */
  txBytesArea(): Buffer {
    return this.mem.subarray(this.bytesAt, this.textAt);
  }

  /** Transaction j's row (checking the memory is still this frame's). */
  private row(j: number): number {
    this.check();
    return this.txAt + j * TX_STRIDE;
  }
  txType(j: number): number {
    return this.words[this.row(j)]!;
  }
  txHashKey(j: number): number {
    return this.words[this.row(j) + 4]!;
  }
  txHash(j: number): string {
    return this.text(this.words[this.row(j) + 3]!, HASH_CHARS);
  }
  txHashIs(j: number, hash: string): boolean {
    return hash.length === HASH_CHARS && bytesAre(this.mem, this.textAt + this.words[this.row(j) + 3]!, hash);
  }
  txBytes(j: number): Uint8Array {
    const w = this.row(j);
    return this.mem.subarray(this.bytesAt + this.words[w + 1]!, this.bytesAt + this.words[w + 2]!);
  }
  txByteLength(j: number): number {
    const w = this.row(j);
    return this.words[w + 2]! - this.words[w + 1]!;
  }
  txRaw(j: number): string {
    const w = this.row(j);
    return '0x' + this.mem.toString('hex', this.bytesAt + this.words[w + 1]!, this.bytesAt + this.words[w + 2]!);
  }
  txSender(j: number): string | null {
    const a = this.words[this.row(j) + 5]!;
    return a === NONE ? null : this.text(a, ADDRESS_CHARS);
  }
  txExecutes(): boolean {
    return true; // the native decoder declines post-exec (0x7d) transactions in diff.transactions
  }
  txNonce(j: number): number {
    const w = this.row(j) + 7;
    return this.words[w] === NONE ? -1 : this.words[w]! * TWO_32 + this.words[w + 1]!;
  }
  /** Transaction j as a copy of its hex (it outlives nothing of the layout's memory). */
  tx(j: number, senders: SenderLookup | null = null, position = 0): DecodedTx {
    return new LazyTx(this.txType(j), this.txHash(j), this.txRaw(j), this.txSender(j), null, 0, 0, senders, position);
  }

  /** The first word of transaction j's receipt record, or -1. */
  private receiptAt(j: number): number {
    const r = this.words[this.row(j) + 6]!;
    return r === NONE ? -1 : this.receiptsAt + r;
  }
  receiptCumulativeGas(j: number): number {
    const r = this.receiptAt(j);
    return r < 0 || this.words[r + 2] === 0 ? -1 : this.words[r + 3]! * TWO_32 + this.words[r + 4]!;
  }
  receiptLogCount(j: number): number {
    const r = this.receiptAt(j);
    return r < 0 ? 0 : this.words[r + 11]!;
  }
  receiptDepositNonce(j: number): number {
    const r = this.receiptAt(j);
    return r < 0 || this.words[r + 5] === 0 ? -1 : this.words[r + 6]! * TWO_32 + this.words[r + 7]!;
  }
  receipt(j: number): FlashReceipt | null {
    const r = this.receiptAt(j);
    return r < 0 ? null : new LayoutReceipt(this, r);
  }

  /** Entry e's row (checking the memory is still this frame's). */
  private balanceRow(e: number): number {
    this.check();
    return this.balancesAt + e * BALANCE_STRIDE;
  }
  balanceKey(e: number): number {
    return this.words[this.balanceRow(e) + 1]!;
  }
  balanceAddressIs(e: number, address: string): boolean {
    return address.length === ADDRESS_CHARS && bytesAre(this.mem, this.textAt + this.words[this.balanceRow(e)]!, address);
  }
  balanceAddressSame(e: number, other: FlashblockBody, oe: number): boolean {
    if (!(other instanceof LayoutBody)) return other.balanceAddressIs(oe, this.balanceAddress(e));
    const a = this.textAt + this.words[this.balanceRow(e)]!;
    const b = other.textAt + other.words[other.balanceRow(oe)]!;
    return this.mem.compare(other.mem, b, b + ADDRESS_CHARS, a, a + ADDRESS_CHARS) === 0;
  }
  balanceAddress(e: number): string {
    return this.text(this.words[this.balanceRow(e)]!, ADDRESS_CHARS);
  }
  balance(e: number): bigint {
    const w = this.balanceRow(e);
    const u = this.words;
    return u[w + 2] === 0 ? this.quantity(u[w + 3]!) : BigInt(this.text(u[w + 3]!, u[w + 4]! - u[w + 3]!));
  }
}
