// The read-only view of the pending chain that every reader (rpc/, stream/) is typed against, modelled on
// node-reth's PendingBlocksAPI. Types, and one pure reader over them (packTxBytes): nothing reached through it can
// change state, and no read recovers, caches into or otherwise mutates a record. A reader that needs senders asks
// SenderSource and awaits it explicitly.
import type { FlashReceipt, FlashblockBase, FlashblockDiff } from '../chain/flashblock.js';
import type { DecodedTx } from '../chain/types.js';
import type { AccountPost } from '../chain/access-list.js';

/** One upstream frame as received: rebroadcast byte for byte, replayed to late subscribers. */
export interface RawFrameView {
  readonly data: Buffer;
  readonly isBinary: boolean;
  readonly blockNumber: number;
  readonly index: number;
  readonly receivedAtMs: number;
}

/** A preconfirmed transaction: where it sits and what the stream said of its receipt. */
export interface TxView {
  readonly tx: Readonly<DecodedTx>;
  readonly block: BlockView;
  /** transactionIndex within the block. */
  readonly position: number;
  /** The flashblock that carried it. */
  readonly flashblockIndex: number;
  /** The receipt from metadata; null when the stream carried none (post-Azul) or it lacked cumulativeGasUsed. */
  readonly receipt: Readonly<FlashReceipt> | null;
  /** logIndex of this transaction's first log within the block; -1 when an earlier transaction's logs are unknown. */
  readonly firstLogIndex: number;
  /** Per-tx gas from the difference of cumulative gas; null when it or the previous receipt is unknown. */
  readonly gasUsed: bigint | null;
}

/** One pending block number, readable as of any of its flashblocks. */
export interface BlockView {
  readonly number: number;
  readonly payloadId: string;
  readonly base: Readonly<FlashblockBase>;
  /** Cumulative diff after flashblock i. */
  readonly diffs: readonly Readonly<FlashblockDiff>[];
  /** Number of transactions after flashblock i (the post-exec transaction, if any, not counted). */
  readonly txCountAt: readonly number[];
  /** The post-exec (0x7d) transaction as of flashblock i, after the txCountAt[i] others; null when none then. */
  readonly postExecAt: readonly (TxView | null)[];
  /** Transactions held (the post-exec one, if any, not counted). */
  readonly txCount: number;
  /**
   * The transaction at `position` (< txCount), or undefined: a view built on demand (a held block keeps no object
   * per transaction), so read what you need from it and let it go; two calls give two equal views.
   */
  txAt(position: number): TxView | undefined;
  /** The hash, type and EIP-2718 bytes of the transaction at `position` (< txCount), without a view. */
  txHash(position: number): string;
  txType(position: number): number;
  txRaw(position: number): string;
  /** A view over shared memory: read it, do not keep it. */
  txBytes(position: number): Uint8Array;
  txByteLength(position: number): number;
  readonly frames: readonly RawFrameView[];
  /** The balance of `address` after the latest flashblock (cumulative within the block), or undefined. */
  balanceOf(address: string): bigint | undefined;
  readonly balancesComplete: boolean;
  /** Post-values from the stream's access lists in this block so far (see PendingBlock.accountPost). */
  readonly accountPost: ReadonlyMap<string, Readonly<AccountPost>>;
  readonly accessListComplete: boolean;
  readonly receiptsComplete: boolean;
  readonly noMetadata: boolean;
  readonly broken: boolean;
  /** Bumped on every applied flashblock (and when marked broken); readers cache derived JSON by it. */
  readonly version: number;
  readonly lastIndex: number;
  readonly nextIndex: number;
  /** The block hash as of the latest flashblock. */
  readonly hash: string;
}

/** The pending chain as readers see it. */
export interface PendingView {
  /** Newest canonical block number settled, or -1. */
  readonly canonical: number;
  /** Transactions of the last settled canonical block when it was held here, else -1 (unknown). */
  readonly settledTxCount: number;
  /** performance.now() of the last applied flashblock (0 before the first). */
  readonly lastAppliedMs: number;
  /** Highest block number held (even if broken), or -1. */
  readonly highestNumber: number;
  /** The block `pending` means: the highest held block, or null when it is broken or none is held. */
  pendingBlock(): BlockView | null;
  /** The held block at a height, or undefined. */
  block(n: number): BlockView | undefined;
  /** All held blocks in ascending order. */
  heldBlocks(): BlockView[];
  /** A flashblock's block hash → the block as of that flashblock. */
  blockByFlashblockHash(hash: string): { block: BlockView; index: number } | undefined;
  /** A preconfirmed transaction by lower-case hash; those of broken blocks are not served. */
  tx(hash: string): TxView | undefined;
  /** The next nonce of `address` from the senders known so far, or null (see SenderSource.settled). */
  nextNonce(address: string): bigint | null;
  /** The balance of `address` after the pending state, or null when no held block reports it. */
  balance(address: string): bigint | null;
  /**
   * `address` after held block `blockNumber` as the stream's access lists give it (X Layer): fields undefined when
   * unchanged since the canonical head; null when the held blocks carry no complete access lists.
   */
  accountAfter(address: string, blockNumber: number): Readonly<AccountPost> | null;
}

/**
 * Senders of pending transactions, for readers that need them. Recovery writes them (sender.from, the nonce index);
 * a reader asks here first and then reads the view.
 */
export interface SenderSource {
  /** Recovers, now, the senders of these transactions that are still unknown (a failed recovery stays null). */
  recover(recs: Iterable<TxView>): void;
  /** Recovers, now, the unknown senders of the first `count` transactions of `block`. */
  recoverFirst(block: BlockView, count: number): void;
  /**
   * Null when `nextNonce(address)` is complete now (after recovering on this thread what it needs); otherwise a
   * Promise that settles once the recovery worker answered every batch that may hold a transaction of `address`.
   */
  settled(address: string): Promise<void> | null;
}

/**
 * The transactions at `positions` of `b` laid out for the native core: their EIP-2718 bytes copied back to back,
 * the k-th at `bytes[offsets[k], offsets[k + 1])`.
 */
export function packTxBytes(b: BlockView, positions: readonly number[]): { bytes: Buffer; offsets: Uint32Array } {
  const offsets = new Uint32Array(positions.length + 1);
  for (let k = 0; k < positions.length; k++) offsets[k + 1] = offsets[k]! + b.txByteLength(positions[k]!);
  const bytes = Buffer.allocUnsafe(offsets[positions.length]!);
  for (let k = 0; k < positions.length; k++) bytes.set(b.txBytes(positions[k]!), offsets[k]!);
  return { bytes, offsets };
}
