// Executed pending state as the RPC module sees it (the daemon's execution feed over src/exec): which flashblocks
// reads may answer from, the engine's reads, and the verdict of each block's receipts. Types only.
import type { ExecutionEngine } from '../exec/engine.js';
import type { BlockView } from '../state/view.js';

/** The engine reads the RPC handlers use (answers at the newest executed flashblock). */
export type ExecutionReads = Pick<
  ExecutionEngine,
  'call' | 'estimateGas' | 'createAccessList' | 'getCode' | 'getStorageAt' | 'getBalance' | 'getTransactionCount' | 'simulateV1' | 'trace' | 'readNow' | 'receipt' | 'blockReceipts' | 'chainDepositNonce'
>;

/** Executed pending state (the daemon's execution feed over src/exec), for `pending` state reads. */
export interface PendingExecution {
  /**
   * Whether reads may answer from executed state that includes flashblock `index` of block `number` (at once, or
   * after a bounded wait while the engine executes it); false = answer as latest.
   */
  readyFor(number: number, index: number): Promise<boolean> | boolean;
  /**
   * Why readyFor said no, for pending_fallbacks_total: `diverged` when execution disagrees with the builder or the
   * chain at that flashblock (or over the recent window), else `execution`.
   */
  fallbackReason?(number: number, index: number): 'diverged' | 'execution';
  readonly engine: ExecutionReads;
  /** False when an executed flashblock of pending block `n` disagreed with the builder (its executed receipts are withheld). */
  receiptsVerified(n: number): boolean;
  /** Called after each executed flashblock (its executed receipts are readable then); returns the unsubscribe. */
  onExecuted(fn: (block: BlockView, index: number) => void): () => void;
}
