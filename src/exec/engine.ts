// The execution engine's interface: apply flashblocks in stream order over the node's canonical state, answer state
// reads at the newest executed flashblock, hand out executed receipts. Implementations live beside it (anvil.ts);
// nothing here does I/O. Callers (the RPC wiring, later) depend on this file only.
/*
 * Design note (issue 13; numbers from `npx tsx bench/exec.ts`, see the final report of that session)
 *
 * Engine: anvil 1.7.1 (revm) as a sidecar process per fork, `--fork-url <node> --fork-block-number <canonical>
 * --optimism --no-mining --order fifo --accounts 0 --hardfork <chain's>`, spawned with spawnTied (dies with the
 * daemon, kill -9 included), talked to over HTTP/1.1 pipelining on keep-alive connections (order kept; batches and
 * WebSocket lose it). Supervised: a crash marks the engine down (reads refuse with EngineUnavailableError, never a
 * stale or half-applied answer), a new process is forked at the canonical head after a backoff and every held
 * pending block is replayed before reads resume.
 *
 * Exactness. anvil executes a transaction in a block env only when it mines (height = head + 1) or re-mines
 * (anvil_reorg, which keeps the height). So a flashblock i > 0 executed as "one mined block" sees NUMBER = N+i and
 * wrong BLOCKHASHes; the exact way is to re-mine block N with every transaction so far (anvil_reorg depth 1), which
 * costs O(block) per flashblock. Three strategies (option `strategy`):
 *  - 'per-flashblock' (inexact baseline): one mined block per flashblock, timestamp/base fee/coinbase/gas limit pinned.
 *  - 'reorg': block N is always one anvil block; flashblock i > 0 re-mines it with all txs (anvil_reorg depth 1).
 *  - 'hybrid': flashblock 0 mines block N (exact); flashblock i > 0 is mined fast as its own block, then checked:
 *    the receipts root of the block so far must equal diff.receipts_root, and no frame of the block's call trace
 *    (trace_block, ~1 ms per 100 txs) may run code containing NUMBER or BLOCKHASH (static scan, cached per address).
 *    If either fails, block N is re-mined exactly (anvil_reorg over every anvil block of N, all txs at offset 0;
 *    the trailing blocks stay empty). Reads answer at the last *checked* anvil block, so the unchecked fast state is
 *    never served.
 *  Each pending block N starts on a process forked at canonical N-1 (a spare is forked as soon as the node reports
 *  N-1), so BLOCKHASH of every ancestor is the node's; when the node lags, blocks above its head are replayed.
 *
 * Not exact: PREVRANDAO (anvil cannot set it; calls and txs see anvil's value), BLOCKHASH(n) for a pending block n
 * that the node does not have yet, eth_getProof (anvil's state trie is not the chain's: refused), OP receipt fee
 * fields (anvil emits none; l1Fee etc. must be computed via the GasPriceOracle by call), the operator fee under
 * --hardfork jovian (anvil 1.7.1 charges the pre-Jovian formula). anvil reports the post-execution depositNonce; the
 * engine detects which convention the stream's receipts_root uses and encodes accordingly.
 *
 * Shipping: the anvil binary comes from the platform package @foundry-rs/anvil-linux-amd64 (an optional runtime
 * dependency, like esbuild's platform binaries); a single-binary build must place it beside the executable and pass
 * its path as `anvilBinary`.
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
}

/** One flashblock to execute: its block's env, its new transactions (EIP-2718 0x-hex) and the builder's commitment. */
export interface FlashblockWork {
  blockNumber: number;
  index: number;
  env: BlockEnv;
  txs: readonly string[];
  /** The flashblock's cumulative `diff.receipts_root`; null when the stream gives none (then nothing is verified). */
  receiptsRoot: string | null;
}

/** Why an apply did not produce executed state. */
export type ApplyFailure = 'engine_down' | 'not_next' | 'tx_rejected' | 'execution_error';

/** What applying one flashblock did. Per-frame outcomes are values; `applyFlashblock` never throws. */
export type ApplyOutcome =
  | {
      ok: true;
      /** Executed receipts root equals diff.receipts_root (null: no root to check against). */
      verified: boolean | null;
      /** An exact re-mine of the block ran for this flashblock. */
      rebuilt: boolean;
      /** Receipts of this flashblock's transactions, in order, with block-cumulative gas. */
      receipts: ExecutedReceipt[];
      /** Wall time from call to visible state, ms. */
      applyMs: number;
    }
  | { ok: false; reason: ApplyFailure; message: string };

/** Counters and state for /readyz and metrics. */
export interface EngineStatus {
  ready: boolean;
  /** pid of the engine process serving reads, or null. */
  pid: number | null;
  /** Newest executed (and visible) flashblock, or null. */
  blockNumber: number | null;
  index: number | null;
  canonical: number;
  restarts: number;
  rebuilds: number;
  divergences: number;
  verified: number;
  applied: number;
  lastError: string | null;
}

/** A call as eth_call takes it (JSON-RPC shapes, hex strings). */
export type CallRequest = Record<string, unknown>;

/** Reads refused because the engine has no usable state (down, restarting, or nothing applied). */
export class EngineUnavailableError extends Error {}

/** A read the engine refuses by design (e.g. eth_getProof at pending). */
export class EngineUnsupportedError extends Error {}

/** The execution engine. Reads answer from the newest executed flashblock with the pending block's env. */
export interface ExecutionEngine {
  /** Starts the engine forked at `canonical` (the node's head). Rejects with a clear message when it cannot. */
  start(canonical: number): Promise<void>;
  /** Kills the engine's processes; idempotent. */
  stop(): Promise<void>;
  /** Executes one flashblock (index 0 starts its block). Calls are queued and applied strictly in call order. */
  applyFlashblock(fb: FlashblockWork): Promise<ApplyOutcome>;
  /** The node's canonical head moved to `blockNumber`: drop blocks ≤ it and prepare a fork there. */
  noteCanonical(blockNumber: number): void;
  status(): EngineStatus;

  /** eth_call at the newest executed flashblock; geth-style state and block overrides pass through. */
  call(tx: CallRequest, stateOverrides?: Record<string, unknown>, blockOverrides?: Record<string, unknown>): Promise<string>;
  estimateGas(tx: CallRequest, stateOverrides?: Record<string, unknown>, blockOverrides?: Record<string, unknown>): Promise<bigint>;
  createAccessList(tx: CallRequest): Promise<{ accessList: unknown[]; gasUsed: string }>;
  getCode(address: string): Promise<string>;
  getStorageAt(address: string, slot: string): Promise<string>;
  getBalance(address: string): Promise<bigint>;
  getTransactionCount(address: string): Promise<bigint>;
  /** Refused with {@link EngineUnsupportedError}: the engine's state trie is not the chain's. */
  getProof(address: string, slots: string[]): Promise<never>;

  /** The executed receipt of a pending transaction (lower-case hash), or null. */
  receipt(hash: string): ExecutedReceipt | null;
  /** Executed receipts of a pending block so far, or null when the engine holds no such block. */
  blockReceipts(blockNumber: number): readonly ExecutedReceipt[] | null;
}
