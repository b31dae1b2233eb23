// The flashblock as the rest of the daemon sees it once decoded: block base, cumulative diff, receipts and balances
// from the metadata. Types only (a leaf): ingest produces them, state stores them, rpc reads them.
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

/** A decoded, validated flashblock. */
export interface Flashblock {
  payloadId: string;
  index: number;
  blockNumber: number;
  base: FlashblockBase | null;
  diff: FlashblockDiff;
  txs: DecodedTx[];
  /** Receipts by lower-case tx hash; null when metadata carries none (post-Azul streams). */
  receipts: Map<string, FlashReceipt> | null;
  /** Balances by lower-case address (cumulative within the block); null when absent. */
  balances: Map<string, bigint> | null;
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
