// A natively decoded flashblock's body read in place: the byte buffer and text native/src/frame/layout.rs wrote
// (tables of u32 words, u64 quantities, the transactions' bytes) behind FlashblockBody. Keeps no object per
// transaction: transactions, receipts and logs are built when a reader asks. Pure; never loads the addon.
import type { FlashLog, FlashReceipt, FlashblockBody, SenderLookup } from './flashblock.js';
import { LazyTx } from './lazy-tx.js';
import type { DecodedTx } from './types.js';

/** The header words (native/src/frame/layout.rs `H_*`). */
const H_MAGIC = 0;
const H_Q_AT = 2;
const H_Q_COUNT = 3;
const H_TX_BYTES_AT = 4;
const H_TX_BYTES_LEN = 5;
const H_TX_COUNT = 6;
const H_TX_TABLE_AT = 7;
const H_HAS_RECEIPTS = 8;
const H_BALANCE_COUNT = 9;
const H_BALANCE_TABLE_AT = 10;
const H_RECEIPTS_AT = 11;
const H_SIGNED_AT = 12;
const H_SIGNED_COUNT = 13;
const H_FIELDS_AT = 14;
const MAGIC = 0xfb1a0002;
/** Words per transaction row and per balance entry, and the receipt record's words before its logs. */
const TX_STRIDE = 9;
const BALANCE_STRIDE = 5;
const RECEIPT_LOGS_AT = 12;
const NONE = 0xffffffff;
const TWO_32 = 4294967296;
const HASH_CHARS = 66;
const ADDRESS_CHARS = 42;

/** A receipt of a layout: its scalars read when built, its logs on first read. */
class LayoutReceipt implements FlashReceipt {
  readonly type: number | null;
  readonly status: number | null;
  readonly cumulativeGasUsed: bigint | null;
  readonly logCount: number;
  readonly depositNonce: bigint | null;
  readonly depositReceiptVersion: bigint | null;
  private built: FlashLog[] | null = null;

  constructor(
    private readonly body: LayoutBody,
    /** The receipt record's first word. */
    private readonly at: number,
  ) {
    const u = body.u;
    this.type = u[at] === NONE ? null : u[at]!;
    this.status = u[at + 1] === 2 ? null : u[at + 1]!;
    this.cumulativeGasUsed = u[at + 2] === 0 ? null : BigInt(u[at + 3]! * TWO_32 + u[at + 4]!);
    this.depositNonce = u[at + 5] === 0 ? null : BigInt(u[at + 6]! * TWO_32 + u[at + 7]!);
    this.depositReceiptVersion = u[at + 8] === 0 ? null : BigInt(u[at + 9]! * TWO_32 + u[at + 10]!);
    this.logCount = u[at + 11]!;
  }

  get logs(): FlashLog[] {
    if (this.built === null) {
      const { u, s } = this.body;
      let w = this.at + RECEIPT_LOGS_AT;
      const logs: FlashLog[] = new Array(this.logCount);
      for (let i = 0; i < logs.length; i++) {
        const a = u[w++]!;
        const address = s.substring(a, a + ADDRESS_CHARS);
        const k = u[w++]!;
        const topics: string[] = new Array(k);
        for (let j = 0; j < k; j++) {
          const t = u[w++]!;
          topics[j] = s.substring(t, t + HASH_CHARS);
        }
        const d = u[w++]!;
        logs[i] = { address, topics, data: s.substring(d, u[w++]!) };
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
export class LayoutBody implements FlashblockBody {
  /** The buffer as u32 words (header, frame fields, tables). */
  readonly u: Uint32Array;
  /** The u64 quantities. */
  readonly q: BigUint64Array;
  /** The transactions' bytes, back to back. */
  readonly bytes: Buffer;
  readonly txCount: number;
  readonly hasReceipts: boolean;
  readonly balanceCount: number;
  /** The word where the frame's own fields start (read in order by src/ingest/native-frame.ts). */
  readonly fieldsAt: number;
  private readonly txAt: number;
  private readonly receiptsAt: number;
  private readonly balancesAt: number;

  /** Throws when `buf` is not a layout of this format (an addon from another build). */
  constructor(
    buf: Buffer,
    /** Every string the tables point into (an external one-byte string of the native core). */
    readonly s: string,
  ) {
    const u = new Uint32Array(buf.buffer, buf.byteOffset, buf.byteLength >>> 2);
    if (u.length < 16 || u[H_MAGIC] !== MAGIC) throw new Error('not a frame layout of this build');
    this.u = u;
    this.q = new BigUint64Array(buf.buffer, buf.byteOffset + u[H_Q_AT]!, u[H_Q_COUNT]!);
    this.bytes = Buffer.from(buf.buffer, buf.byteOffset + u[H_TX_BYTES_AT]!, u[H_TX_BYTES_LEN]!);
    this.txCount = u[H_TX_COUNT]!;
    this.txAt = u[H_TX_TABLE_AT]!;
    this.hasReceipts = u[H_HAS_RECEIPTS] === 1;
    this.balanceCount = u[H_BALANCE_COUNT] === NONE ? -1 : u[H_BALANCE_COUNT]!;
    this.balancesAt = u[H_BALANCE_TABLE_AT]!;
    this.receiptsAt = u[H_RECEIPTS_AT]!;
    this.fieldsAt = u[H_FIELDS_AT]!;
  }

  /** The signed transactions for native sender recovery: triples [position, start, end) into `bytes`. */
  signed(): Uint32Array {
    const u = this.u;
    return u.subarray(u[H_SIGNED_AT]!, u[H_SIGNED_AT]! + 3 * u[H_SIGNED_COUNT]!);
  }

  txType(j: number): number {
    return this.u[this.txAt + j * TX_STRIDE]!;
  }
  txHashKey(j: number): number {
    return this.u[this.txAt + j * TX_STRIDE + 4]!;
  }
  txHash(j: number): string {
    const a = this.u[this.txAt + j * TX_STRIDE + 3]!;
    return this.s.substring(a, a + HASH_CHARS);
  }
  txHashIs(j: number, hash: string): boolean {
    return hash.length === HASH_CHARS && this.s.startsWith(hash, this.u[this.txAt + j * TX_STRIDE + 3]!);
  }
  txBytes(j: number): Uint8Array {
    const w = this.txAt + j * TX_STRIDE;
    return this.bytes.subarray(this.u[w + 1]!, this.u[w + 2]!);
  }
  txByteLength(j: number): number {
    const w = this.txAt + j * TX_STRIDE;
    return this.u[w + 2]! - this.u[w + 1]!;
  }
  txRaw(j: number): string {
    const w = this.txAt + j * TX_STRIDE;
    return '0x' + this.bytes.toString('hex', this.u[w + 1]!, this.u[w + 2]!);
  }
  txSender(j: number): string | null {
    const a = this.u[this.txAt + j * TX_STRIDE + 5]!;
    return a === NONE ? null : this.s.substring(a, a + ADDRESS_CHARS);
  }
  txExecutes(): boolean {
    return true; // the native decoder declines post-exec (0x7d) transactions in diff.transactions
  }
  txNonce(j: number): number {
    const w = this.txAt + j * TX_STRIDE + 7;
    return this.u[w] === NONE ? -1 : this.u[w]! * TWO_32 + this.u[w + 1]!;
  }
  tx(j: number, senders: SenderLookup | null = null, position = 0): DecodedTx {
    const w = this.txAt + j * TX_STRIDE;
    const u = this.u;
    return new LazyTx(u[w]!, this.txHash(j), null, this.txSender(j), this.bytes, u[w + 1]!, u[w + 2]!, senders, position);
  }

  /** The first word of transaction j's receipt record, or -1. */
  private receiptAt(j: number): number {
    const r = this.u[this.txAt + j * TX_STRIDE + 6]!;
    return r === NONE ? -1 : this.receiptsAt + r;
  }
  receiptCumulativeGas(j: number): number {
    const r = this.receiptAt(j);
    return r < 0 || this.u[r + 2] === 0 ? -1 : this.u[r + 3]! * TWO_32 + this.u[r + 4]!;
  }
  receiptLogCount(j: number): number {
    const r = this.receiptAt(j);
    return r < 0 ? 0 : this.u[r + 11]!;
  }
  receiptDepositNonce(j: number): number {
    const r = this.receiptAt(j);
    return r < 0 || this.u[r + 5] === 0 ? -1 : this.u[r + 6]! * TWO_32 + this.u[r + 7]!;
  }
  receipt(j: number): FlashReceipt | null {
    const r = this.receiptAt(j);
    return r < 0 ? null : new LayoutReceipt(this, r);
  }

  get text(): string {
    return this.s;
  }
  balanceKey(e: number): number {
    return this.u[this.balancesAt + e * BALANCE_STRIDE + 1]!;
  }
  balanceAddressAt(e: number): number {
    return this.u[this.balancesAt + e * BALANCE_STRIDE]!;
  }
  balanceAddressIs(e: number, address: string): boolean {
    return address.length === ADDRESS_CHARS && this.s.startsWith(address, this.u[this.balancesAt + e * BALANCE_STRIDE]!);
  }
  balanceAddress(e: number): string {
    const a = this.u[this.balancesAt + e * BALANCE_STRIDE]!;
    return this.s.substring(a, a + ADDRESS_CHARS);
  }
  balance(e: number): bigint {
    const w = this.balancesAt + e * BALANCE_STRIDE;
    const u = this.u;
    return u[w + 2] === 0 ? this.q[u[w + 3]!]! : BigInt(this.s.substring(u[w + 3]!, u[w + 4]!));
  }
}
