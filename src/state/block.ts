// A pending block: its flashblocks' cumulative diffs, transactions in order with their receipts, balances, raw
// frames. Mutated only by PendingState (the single writer); everything else reads.
import type { FlashReceipt, FlashblockBase, FlashblockDiff } from '../chain/flashblock.js';
import type { AccountPost } from '../chain/access-list.js';
import type { DecodedTx } from '../chain/types.js';
import type { BlockView, RawFrameView, TxView } from './view.js';
import { LocalBlockHasher } from './local-hash.js';

/** One upstream frame as received: rebroadcast byte for byte, replayed to late subscribers. */
export interface RawFrame extends RawFrameView {
  data: Buffer;
  isBinary: boolean;
  blockNumber: number;
  index: number;
  receivedAtMs: number;
}

/** A transaction in the pending chain, with what is known of its receipt. */
export class TxRecord implements TxView {
  /** Per-tx gas, derived from the difference of cumulative gas; null when it or the previous receipt is unknown. */
  gasUsed: bigint | null;
  constructor(
    readonly tx: DecodedTx,
    readonly block: PendingBlock,
    /** transactionIndex within the block. */
    readonly position: number,
    readonly flashblockIndex: number,
    /** The receipt from metadata; null when the stream carried none (post-Azul) or it lacked cumulativeGasUsed. */
    readonly receipt: FlashReceipt | null,
    /** logIndex of this transaction's first log within the block; -1 when an earlier transaction's logs are unknown. */
    readonly firstLogIndex: number,
    gasUsed: bigint | null,
  ) {
    this.gasUsed = gasUsed;
  }
}

/** The state of one block number while it is pending. */
export class PendingBlock implements BlockView {
  readonly diffs: FlashblockDiff[] = [];
  /** Number of transactions after flashblock i was applied. */
  readonly txCountAt: number[] = [];
  readonly txs: TxRecord[] = [];
  readonly frames: RawFrame[] = [];
  /** Balances after the latest flashblock (cumulative within the block). */
  readonly balances = new Map<string, bigint>();
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
  /** Cumulative gas of the last transaction with a known receipt. */
  lastCumulativeGas: bigint | null = 0n;
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
  ) {}

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
}
