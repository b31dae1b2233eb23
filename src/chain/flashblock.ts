// The flashblock as the rest of the daemon sees it once decoded: block base, cumulative diff, and its body —
// transactions, receipts and balances read by position. Types only (a leaf): ingest produces them, state stores them,
// rpc reads them.
import type { DecodedTx } from './types.js';
import type { AccountChanges } from './access-list.js';

/** Block properties carried by index 0 (hex strings normalised to lower case). */
export interface FlashblockBase {
  parentBeaconBlockRoot: string;
  parentHash: string;
  feeRecipient: string;
  prevRandao: string;
  blockNumber: number;
  gasLimit: bigint;
  timestamp: number;
  extraData: string;
  baseFeePerGas: bigint;
}

/** Cumulative header fields of the block so far. */
export interface FlashblockDiff {
  stateRoot: string;
  receiptsRoot: string;
  logsBloom: string;
  gasUsed: bigint;
  blockHash: string;
  blobGasUsed: bigint | null;
  withdrawalsRoot: string | null;
  withdrawals: unknown[];
  /**
   * `diff.post_exec_tx` (Lagoon): the in-progress block's post-exec (0x7d) transaction, restated by every flashblock
   * and carried apart from `transactions`; the latest one is provisional until the block is sealed. null = none so far.
   */
  postExecTx: DecodedTx | null;
}

export interface FlashLog {
  address: string;
  topics: string[];
  data: string;
}

/** A receipt as the metadata gives it (either shape), normalised. Unknown fields are null. */
export interface FlashReceipt {
  /** EIP-2718 type from the tag, or null when the object gave none. */
  type: number | null;
  status: number | null;
  cumulativeGasUsed: bigint | null;
  logs: FlashLog[];
  /** `logs.length`, when the receipt can tell it without building its logs (the native decoder's receipts). */
  readonly logCount?: number;
  depositNonce: bigint | null;
  depositReceiptVersion: bigint | null;
}

/** Where a transaction view reads its sender when the transaction does not carry it (a held block's columns). */
export interface SenderLookup {
  /** The recovered sender of the transaction at `position` of its block (lower-case 0x-hex), or null while unknown. */
  senderAt(position: number): string | null;
}

/**
 * A flashblock's transactions (`diff.transactions`, in order), their receipts (`metadata.receipts`, joined by hash)
 * and its balances (`metadata.new_account_balances`), read by position `j` / entry `e`: the native decoder's layout
 * read in place (layout-body.ts) or the JS decoder's objects (object-body.ts). Pending state keeps the body and
 * columns of numbers; transaction and receipt objects are built on demand and die young.
 */
export interface FlashblockBody {
  readonly txCount: number;
  /**
   * Whether `tx()` returns objects this body keeps (the JS decoder's), whose `from` a recovered sender is written
   * into; false when it builds a view per call that reads senders from the block.
   */
  readonly keepsTxObjects: boolean;
  txType(j: number): number;
  /** hashKey (keys.ts) of the transaction's hash. */
  txHashKey(j: number): number;
  /** keccak256 of the transaction's bytes, lower-case 0x-hex. */
  txHash(j: number): string;
  /** Whether the transaction's hash is `hash` (lower-case 0x-hex, 66 characters), without building a string. */
  txHashIs(j: number, hash: string): boolean;
  /** The transaction's EIP-2718 bytes (a view over shared memory: read it, do not keep it). */
  txBytes(j: number): Uint8Array;
  txByteLength(j: number): number;
  /** The transaction's bytes as lower-case 0x-hex. */
  txRaw(j: number): string;
  /** The sender the transaction carries (deposit: its `from`; post-exec: zero), else null (recovered later). */
  txSender(j: number): string | null;
  /** False for a post-exec (0x7d) transaction, which no EVM runs. */
  txExecutes(j: number): boolean;
  /** A signed transaction's nonce when below 2^53; -1 when it has none (deposit, post-exec) or it is larger. */
  txNonce(j: number): number;
  /**
   * The transaction with every field (decoded on first access); its `from` is the carried sender, else read from
   * `senders` at `position` (the block's recovered senders) when given.
   */
  tx(j: number, senders?: SenderLookup | null, position?: number): DecodedTx;
  /** False when the metadata carried no receipts at all (post-Azul streams). */
  readonly hasReceipts: boolean;
  /**
   * The cumulative gas of the transaction's receipt: -1 when the metadata carried no receipt for it or one without
   * cumulativeGasUsed; NaN when it is 2^53 or more (read `receipt(j)`).
   */
  receiptCumulativeGas(j: number): number;
  /** The number of logs of the transaction's receipt (0 without one). */
  receiptLogCount(j: number): number;
  /** The depositNonce of the transaction's receipt: -1 when absent; NaN when 2^53 or more (read `receipt(j)`). */
  receiptDepositNonce(j: number): number;
  /** The transaction's receipt as the metadata gives it (built on demand), or null when it carried none. */
  receipt(j: number): FlashReceipt | null;
  /** Entries of new_account_balances; -1 when the metadata carried none. */
  readonly balanceCount: number;
  /** addressKey (keys.ts) of entry `e`'s address. */
  balanceKey(e: number): number;
  /** Whether entry `e` is `address` (lower-case 0x-hex, 42 characters), without building a string. */
  balanceAddressIs(e: number, address: string): boolean;
  /** Whether entry `e` and entry `oe` of `other` are the same address, without building strings where it can. */
  balanceAddressSame(e: number, other: FlashblockBody, oe: number): boolean;
  balanceAddress(e: number): string;
  balance(e: number): bigint;
  /** Lets go of the memory the body is read from (its block was dropped, or it never applied); reads may fail after. */
  release(): void;
}

/** A decoded, validated flashblock. */
export interface Flashblock {
  payloadId: string;
  index: number;
  blockNumber: number;
  base: FlashblockBase | null;
  diff: FlashblockDiff;
  /** Transactions, receipts and balances. */
  body: FlashblockBody;
  /**
   * `metadata.access_list` (X Layer): this flashblock's EIP-7928 access list, decoded; null when absent or when it
   * did not decode (then `accessListProblem` says why: the flashblock is kept without it, as X Layer's node does).
   */
  accessList: AccountChanges[] | null;
  accessListProblem: string | null;
  /** The flashblock this one follows per Base's `metadata.prev_flashblock_id` (`"<block>-<index>"`); -1 when absent or `"0-0"`. */
  prevBlockNumber: number;
  prevIndex: number;
}
