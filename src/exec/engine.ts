// The execution engine's interface: apply flashblocks in stream order over the node's canonical state, answer state
// reads at the newest executed flashblock, hand out executed receipts. The implementation lives beside it (revm.ts);
// nothing here does I/O. Callers (src/execution.ts, the RPC wiring) depend on this file only.
/*
 * Design note (issue 22). The engine is op-revm inside the daemon (native/, a napi-rs addon; revm.ts wraps it).
 *  - An open block: index 0 opens block N with the env of its `base` (number, timestamp, base fee, coinbase, gas limit,
 *    prev_randao, parent hash, beacon root) and the spec in force at its timestamp, and runs the pre-execution system
 *    calls that spec requires (EIP-4788, EIP-2935) as op-reth does. Each flashblock then executes only its own new
 *    transactions on the open block: O(flashblock), receipts with cumulative gas and log index running across the block.
 *  - State: each flashblock's changes are an immutable layer; a block's layers sit on its parent's (a pending parent's
 *    layers, or nothing) over one cache of the node's canonical state at height C. Cold accounts and slots are read
 *    from the node in one batch before a flashblock executes (senders, recipients, coinbase, the L1Block contract and
 *    its fee slots, the fee vaults) by native/src/node.rs, which counts them. BLOCKHASH: the parent from base.parent_hash,
 *    settled blocks' hashes, older ancestors from the node (cached, last 512).
 *  - Settle (noteCanonical): when block C+1 turns canonical and the node's receipts root equals the executed one, its
 *    layers fold into the cache, which moves to C+1 and survives the block; otherwise the cache is dropped and open
 *    blocks built on it are executed again from their first flashblock. The cache is bounded (--execution-cache-mb,
 *    dropped whole above it) and its size is a metric.
 *  - Threads: one apply thread (applies and settles, in call order) and read threads; the event loop only hands over
 *    the flashblock's env, its transactions' bytes and bounds and the sender rows, and gets a Promise. A read takes the newest published snapshot (layer list), so it never waits for an apply
 *    and never sees half a flashblock.
 *  - Panics: caught at the thread boundary and returned as E_PANIC; the engine is then poisoned, and revm.ts starts a
 *    new one at the canonical head and executes the held blocks again. Never an abort of the daemon.
 *  - Verification, in the engine (native/src/receipt.rs, root.rs): every flashblock's executed receipts root against
 *    diff.receipts_root, and at settle against the canonical header's; a canonical block that differs is logged here
 *    with its first differing transaction and field.
 * (BENCHMARKS.md, "Pending execution", says why the former anvil sidecar engine was removed; anvil remains the
 * devnet's node and an independent executor in tests.)
 *
 * Wiring (src/execution.ts): the pipeline hands every applied flashblock to applyFlashblock (env from index 0's
 * base; diff.receipts_root) and every canonical head to noteCanonical; pending
 * call/estimateGas/createAccessList/getCode/getStorageAt/getBalance/getTransactionCount/simulateV1 answer from the
 * engine (EngineUnavailableError → answer as `latest` with source="node", never forward `pending`); eth_getProof at
 * pending is refused by the RPC layer (src/rpc/methods/state.ts: the engine keeps no state trie); receipts/logs on streams without them come from ApplyOutcome.receipts through rpc/shapes;
 * outcomes with verified=false are counted and not served as verified; status() feeds /readyz and the metrics.
 */
import type { ExecutedReceipt } from './receipts.js';

/** The pending block's execution env (from the flashblock's `base`). */
export interface BlockEnv {
  number: number;
  /** Seconds. */
  timestamp: number;
  baseFeePerGas: bigint;
  feeRecipient: string;
  gasLimit: bigint;
  prevRandao: string;
  parentHash: string;
  /** EIP-4788 parent beacon block root (from Ecotone); null when the stream gives none. */
  parentBeaconBlockRoot?: string | null;
}

/**
 * A flashblock's transactions as the engine takes them: their EIP-2718 bytes back to back, transaction i at
 * `bytes[bounds[i], bounds[i + 1])` (bounds: count + 1 offsets, the first 0, the last bytes.length).
 */
export interface TxBatch {
  readonly bytes: Uint8Array;
  readonly bounds: Uint32Array;
}

/** One flashblock to execute: its block's env, its new transactions and the builder's commitment. */
export interface FlashblockWork {
  blockNumber: number;
  index: number;
  env: BlockEnv;
  txs: TxBatch;
  /** The flashblock's cumulative `diff.receipts_root`; null when the stream gives none (then nothing is verified). */
  receiptsRoot: string | null;
  /**
   * Per transaction, 21 bytes: 1 and its sender as ingest's recovery found it from these same bytes (the native
   * core's, or the recovery worker's), or 0 and 20 zero bytes: the engine recovers that one itself. Never a guess and
   * never a deposit's (the engine reads a deposit's `from` from the transaction). Absent: the engine recovers every
   * sender. Read when the engine starts the flashblock, after `sendersRecovered` settled: rows may be filled in
   * meanwhile.
   */
  senders?: Uint8Array | null;
  /** Settles when ingest's recovery of this flashblock's senders (started at its arrival) has answered; the engine waits for it rather than recover them again. */
  sendersRecovered?: Promise<void> | null;
}

/** Bytes per sender row of FlashblockWork.senders. */
export const SENDER_ROW = 21;

/** `list` (0x-hex or bytes, EIP-2718) as a TxBatch. */
export function txBatch(list: readonly (string | Uint8Array)[]): TxBatch {
  const parts = list.map((t) => (typeof t === 'string' ? Buffer.from(t.startsWith('0x') ? t.slice(2) : t, 'hex') : t));
  const bounds = new Uint32Array(parts.length + 1);
  for (let i = 0; i < parts.length; i++) bounds[i + 1] = bounds[i]! + parts[i]!.length;
  return { bytes: Buffer.concat(parts), bounds };
}

/** Transaction `i` of `b` as 0x-hex. */
export function txHex(b: TxBatch, i: number): string {
  return '0x' + Buffer.from(b.bytes.buffer, b.bytes.byteOffset + b.bounds[i]!, b.bounds[i + 1]! - b.bounds[i]!).toString('hex');
}

/** Every transaction of `b` as 0x-hex. */
export function txHexes(b: TxBatch): string[] {
  return Array.from({ length: b.bounds.length - 1 }, (_, i) => txHex(b, i));
}

/** Row `i` of FlashblockWork.senders: its 0x address, or null (the engine recovers that one). */
export function senderOfRow(rows: Uint8Array, i: number): string | null {
  const o = SENDER_ROW * i;
  return rows[o] === 1 ? '0x' + Buffer.from(rows.buffer, rows.byteOffset + o + 1, 20).toString('hex') : null;
}

/** FlashblockWork.senders from a list of 0x addresses (null: the engine recovers that one). */
export function senderRows(list: readonly (string | null)[]): Uint8Array {
  const out = Buffer.alloc(SENDER_ROW * list.length);
  list.forEach((a, i) => {
    if (a === null) return;
    out[SENDER_ROW * i] = 1;
    out.write(a.slice(2), SENDER_ROW * i + 1, 20, 'hex');
  });
  return out;
}

/**
 * Why an apply did not produce executed state: the engine is down or stopped, the flashblock is not the next one
 * (canonical already, or its block is not open), a transaction was invalid, the EVM failed, a node read failed
 * (unreachable, or it lacks an ancestor's hash or state), or the engine panicked (then it restarts).
 */
export type ApplyFailure = 'engine_down' | 'not_next' | 'tx_rejected' | 'execution_error' | 'node_error' | 'panic';

/** What applying one flashblock did. Per-frame outcomes are values; `applyFlashblock` never throws. */
export type ApplyOutcome =
  | {
      ok: true;
      /** Executed receipts root equals diff.receipts_root (null: no root to check against). */
      verified: boolean | null;
      /** Receipts of this flashblock's transactions, in order, with block-cumulative gas. */
      receipts: ExecutedReceipt[];
      /** Wall time from call to visible state, ms. */
      applyMs: number;
    }
  | { ok: false; reason: ApplyFailure; message: string };

/** Counters and state for /readyz and metrics. */
export interface EngineStatus {
  ready: boolean;
  /** Newest executed (and visible) flashblock, or null. */
  blockNumber: number | null;
  index: number | null;
  canonical: number;
  restarts: number;
  divergences: number;
  verified: number;
  applied: number;
  /** JSON-RPC calls the engine made to the node. */
  nodeReads: number;
  /** Bytes held by the engine's state cache, or null when unknown. */
  cacheBytes: number | null;
  /** Times the state cache passed its bound and was dropped whole. */
  cacheDrops: number;
  /** Reads answered where they ran: at once on the calling thread, on the engine's read threads, or from the memo. */
  reads: { inline: number; threads: number; memo: number };
  /** Reads stopped past the read timeout (native E_TIMEOUT, answered -32000). */
  readTimeouts: number;
  lastError: string | null;
  /**
   * Canonical height through which settling is done, the blocks held above it re-executed on the node's state where
   * the settle dropped them.
   */
  settled: number;
}

/**
 * What settling a canonical block found, comparing the executed block with the node's header: `match` (receipts
 * root equal), `mismatch` (same transactions, another receipts root: execution disagrees with the chain),
 * `replaced` (the canonical block holds other transactions than those executed: another build, no verdict on
 * execution), `unchecked` (nothing executed to compare, or the header could not be read).
 */
export type CanonicalVerdict = 'match' | 'mismatch' | 'replaced' | 'unchecked';

/** One executed flashblock: block number and index. */
export interface FlashblockAt {
  number: number;
  index: number;
}

/** A call as eth_call takes it (JSON-RPC shapes, hex strings). */
export type CallRequest = Record<string, unknown>;

/** A JSON-RPC error an engine read answers with (a revert: code 3 with its data), passed through to the client. */
export class RpcReplyError extends Error {
  constructor(
    readonly method: string,
    readonly code: number,
    readonly rpcMessage: string,
    readonly data: unknown,
  ) {
    super(`${method}: ${rpcMessage} (${code})`);
  }
}

/** Reads refused because the engine has no usable state (down, restarting, or nothing applied). */
export class EngineUnavailableError extends Error {}

/** A read {@link ExecutionEngine.readNow} may answer synchronously (the Promise forms' arguments). */
export type NowRead =
  | { method: 'call'; tx: CallRequest; stateOverrides: Record<string, unknown> | null; blockOverrides: Record<string, unknown> | null }
  | { method: 'getCode'; address: string }
  | { method: 'getStorageAt'; address: string; slot: string };

/**
 * One trace for the engine. `at`: the flashblock that carried the transaction (transaction traces), the newest one of
 * the block so far (block traces), or absent (calls: the newest executed state). `timeoutMs` and `maxBytes` bound it.
 */
export type TraceRequest = {
  method:
    | 'traceTransaction' | 'traceBlock' | 'traceCall' | 'traceCallMany'
    | 'traceReplayTransaction' | 'traceReplayBlock' | 'traceTransactionParity' | 'traceBlockParity';
  at?: FlashblockAt;
  timeoutMs: number;
  maxBytes: number;
} & Record<string, unknown>;

/** The execution engine. Reads answer from the newest executed flashblock with the pending block's env. */
export interface ExecutionEngine {
  /** Starts the engine over the node's state at `canonical` (its head). Rejects with a clear message when it cannot. */
  start(canonical: number): Promise<void>;
  /** Stops the engine (its threads and its proxy to the node); idempotent. */
  stop(): Promise<void>;
  /** Executes one flashblock (index 0 starts its block). Calls are queued and applied strictly in call order. */
  applyFlashblock(fb: FlashblockWork): Promise<ApplyOutcome>;
  /** The node's canonical head moved to `blockNumber`: settle held blocks ≤ it (restarts start there). */
  noteCanonical(blockNumber: number): void;
  /**
   * Calls `fn` with each settled block's {@link CanonicalVerdict}, as soon as it is known (before the blocks above a
   * mismatch are executed again); returns the unsubscribe. Engines that do not compare leave it undefined.
   */
  onCanonicalVerdict?(fn: (blockNumber: number, verdict: CanonicalVerdict) => void): () => void;
  status(): EngineStatus;
  /** status().ready and status().settled without building the status (which asks the native core for its counters): asked on pending reads. */
  readonly ready: boolean;
  readonly settled: number;

  /** eth_call at the newest executed flashblock; geth-style state and block overrides pass through. */
  call(tx: CallRequest, stateOverrides?: Record<string, unknown>, blockOverrides?: Record<string, unknown>): Promise<string>;
  estimateGas(tx: CallRequest, stateOverrides?: Record<string, unknown>, blockOverrides?: Record<string, unknown>): Promise<bigint>;
  createAccessList(tx: CallRequest): Promise<{ accessList: unknown[]; gasUsed: string }>;
  /**
   * State reads; `at` pins one to an executed flashblock (while the engine still holds it: the last few dozen), else
   * the newest. A flashblock no longer held rejects with {@link EngineUnavailableError}.
   */
  getCode(address: string, at?: FlashblockAt): Promise<string>;
  getStorageAt(address: string, slot: string, at?: FlashblockAt): Promise<string>;
  getBalance(address: string, at?: FlashblockAt): Promise<bigint>;
  getTransactionCount(address: string, at?: FlashblockAt): Promise<bigint>;
  /**
   * eth_simulateV1 on the newest executed flashblock (its env as the first simulated block's), when the engine can;
   * engines without it leave it undefined (the call is then answered as latest by the node).
   */
  simulateV1?(payload: Record<string, unknown>): Promise<unknown>;
  /**
   * The same read answered synchronously when the engine can without waiting (from memory, within its inline
   * budget): its result, or undefined (then use the Promise form). A JSON-RPC error (a revert) throws
   * {@link RpcReplyError}, as the Promise form rejects with it.
   */
  readNow?(read: NowRead): string | undefined;
  /**
   * A trace at pending (src/rpc/methods/trace.ts; native/src/trace.rs answers it): geth's debug_trace* and parity's
   * trace_* shapes from the executed flashblocks, on the engine's read threads. A flashblock no longer held rejects
   * with {@link EngineUnavailableError}; the trace's own errors (timeout, too large, bad tracer) with RpcReplyError.
   * Engines without it leave it undefined (traces are then refused).
   */
  trace?(req: TraceRequest): Promise<unknown>;

  /** The executed receipt of a pending transaction (lower-case hash), or null. */
  receipt(hash: string): ExecutedReceipt | null;
  /**
   * The depositNonce the chain commits for an executed deposit receipt (null for other types): op-geth/op-reth commit
   * the sender's nonce before the deposit, anvil (the devnet's node) the one after; the engine learns which from
   * diff.receipts_root and answers accordingly (before anything is learned: op-geth's).
   */
  chainDepositNonce(r: ExecutedReceipt): bigint | null;
  /** Executed receipts of a pending block so far, or null when the engine holds no such block. */
  blockReceipts(blockNumber: number): readonly ExecutedReceipt[] | null;
}
