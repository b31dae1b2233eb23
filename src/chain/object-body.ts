// A flashblock body over the JS decoder's objects (src/ingest/frame.ts, the fallback): its transactions, its
// receipts joined to them by hash, its balances as entry lists. The same FlashblockBody the native layout gives, so
// pending state and its readers have one path. Pure.
import type { FlashReceipt, FlashblockBody, SenderLookup } from './flashblock.js';
import { hexToBytes } from './hex.js';
import { addressKey, hashKey } from './keys.js';
import type { DecodedTx } from './types.js';

const SAFE = Number.MAX_SAFE_INTEGER;

/** A bigint as a number when below 2^53, else NaN. */
function safe(n: bigint): number {
  return n <= BigInt(SAFE) ? Number(n) : NaN;
}

/** See the file comment. */
export class ObjectBody implements FlashblockBody {
  /** Each transaction's receipt (by hash; the last of duplicate keys), null where the metadata carried none. */
  private readonly receipts: (FlashReceipt | null)[];
  private readonly addresses: string[];
  private readonly balances: bigint[];
  private readonly bytesMemo: (Buffer | undefined)[] = [];
  readonly hasReceipts: boolean;
  readonly balanceCount: number;
  readonly keepsTxObjects = true;

  constructor(
    private readonly txs: readonly DecodedTx[],
    receipts: ReadonlyMap<string, FlashReceipt> | null,
    balances: ReadonlyMap<string, bigint> | null,
  ) {
    this.hasReceipts = receipts !== null;
    this.receipts = txs.map((tx) => receipts?.get(tx.hash) ?? null);
    this.addresses = balances === null ? [] : [...balances.keys()];
    this.balances = balances === null ? [] : [...balances.values()];
    this.balanceCount = balances === null ? -1 : balances.size;
  }

  get txCount(): number {
    return this.txs.length;
  }
  txType(j: number): number {
    return this.txs[j]!.type;
  }
  txHashKey(j: number): number {
    return hashKey(this.txs[j]!.hash);
  }
  txHash(j: number): string {
    return this.txs[j]!.hash;
  }
  txHashIs(j: number, hash: string): boolean {
    return this.txs[j]!.hash === hash;
  }
  txBytes(j: number): Uint8Array {
    return (this.bytesMemo[j] ??= hexToBytes(this.txs[j]!.raw));
  }
  txByteLength(j: number): number {
    return (this.txs[j]!.raw.length - 2) >>> 1;
  }
  txRaw(j: number): string {
    return this.txs[j]!.raw;
  }
  txSender(j: number): string | null {
    const tx = this.txs[j]!;
    return tx.type === 0x7e || !tx.executes ? tx.from : null;
  }
  txExecutes(j: number): boolean {
    return this.txs[j]!.executes;
  }
  txNonce(j: number): number {
    const tx = this.txs[j]!;
    if (tx.type === 0x7e || !tx.executes) return -1;
    const n = safe(tx.nonce);
    return Number.isNaN(n) ? -1 : n;
  }
  /** The decoder's own object: its `from` is written there when its sender is recovered (senders are ignored). */
  tx(j: number, _senders?: SenderLookup | null, _position?: number): DecodedTx {
    return this.txs[j]!;
  }

  receiptCumulativeGas(j: number): number {
    const r = this.receipts[j];
    return r == null || r.cumulativeGasUsed === null ? -1 : safe(r.cumulativeGasUsed);
  }
  receiptLogCount(j: number): number {
    const r = this.receipts[j];
    return r == null ? 0 : (r.logCount ?? r.logs.length);
  }
  receiptDepositNonce(j: number): number {
    const r = this.receipts[j];
    return r == null || r.depositNonce === null ? -1 : safe(r.depositNonce);
  }
  receipt(j: number): FlashReceipt | null {
    return this.receipts[j] ?? null;
  }

  balanceKey(e: number): number {
    return addressKey(this.addresses[e]!);
  }
  balanceAddressSame(e: number, other: FlashblockBody, oe: number): boolean {
    return other.balanceAddressIs(oe, this.addresses[e]!);
  }
  balanceAddressIs(e: number, address: string): boolean {
    return this.addresses[e] === address;
  }
  balanceAddress(e: number): string {
    return this.addresses[e]!;
  }
  balance(e: number): bigint {
    return this.balances[e]!;
  }
  /** Nothing to give back: the objects are the garbage collector's. */
  release(): void {}
}
