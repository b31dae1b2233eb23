// The in-process execution engine: op-revm in the native core (native/, loaded by addon.ts) keeps the pending block
// open and executes each flashblock's new transactions only (O(flashblock)), over a cache of the node's state that
// survives blocks. This file is the TypeScript side of ExecutionEngine: the order of applies and settles, the
// receipts the engine hands back (it checks them against diff.receipts_root and the canonical header itself), canonical
// settles, restarts after a panic. No EVM work here.
import { performance } from 'node:perf_hooks';
import { TX_DEPOSIT } from '../chain/types.js';
import { engineErrorOf, loadAddon, rpcCodeOf, type Addon, type AddonBlockChanges, type AddonEngine } from './addon.js';
import {
  EngineUnavailableError,
  RpcReplyError,
  type ApplyOutcome,
  type CallRequest,
  type CanonicalVerdict,
  type EngineStatus,
  type ExecutionEngine,
  type FlashblockAt,
  type FlashblockWork,
  type NowRead,
  type TraceRequest,
} from './engine.js';
import { ReadMemo, type ReadAnswer } from './memo.js';
import { nativeNode, type EngineNode, type NativeNode } from './endpoint.js';
import type { ExecutedLog, ExecutedReceipt } from './receipts.js';

export interface RevmEngineOptions {
  /** The node: the native engine reads it itself, off the event loop (native/src/node.rs). */
  node: EngineNode;
  /** The OP hardfork (op-revm spec name) in force at an L2 timestamp (seconds): the chain's schedule or a fixed one. */
  specAt: (timestampSec: number) => string;
  /** The state cache's bound, bytes; above it the cache is dropped and read again. */
  cacheCapBytes?: number;
  /** Threads answering state reads. */
  readThreads?: number;
  /**
   * A state read or eth_call that can be answered from memory within this many µs runs at once on the calling
   * thread (no thread hop); anything longer, or needing the node, goes to the read threads. 0: always the threads.
   */
  inlineReadUs?: number;
  /** The longest a read may take on the read threads, from its hand-over; past it the engine answers E_TIMEOUT. */
  readTimeoutMs?: number;
  /**
   * Answers of pending reads kept for the flashblock they were read at (src/exec/memo.ts), at most this many; 0: none.
   */
  readMemoEntries?: number;
  /** Per node call timeout, ms. */
  nodeTimeoutMs?: number;
  log?: (msg: string, fields: Record<string, unknown>, level: 'info' | 'warn' | 'error') => void;
}

/** A block the engine holds open (or executed, not yet canonical): its flashblocks and executed receipts. */
interface Held {
  /** Each applied flashblock as sent to the engine (its env JSON and the same buffers), for a replay after a restart. */
  works: NativeWork[];
  /** Each applied flashblock's receipts, in order. */
  receipts: FlashblockReceipts[];
  /** All of them, parsed, once asked for (blockReceipts); null after another flashblock. */
  all: ExecutedReceipt[] | null;
}

/**
 * One applied flashblock's receipts as the engine answered them: their hashes, and one string holding their JSON,
 * each parsed when first asked for. A flashblock nobody reads a receipt of leaves the heap one string and its hashes,
 * not ~20 objects a receipt kept for the block's life (what made the old generation grow and its collections pause
 * the event loop: bench/seam.ts, paced part).
 */
class FlashblockReceipts {
  private readonly parsed: (ExecutedReceipt | undefined)[];
  private list: ExecutedReceipt[] | null = null;
  constructor(
    readonly hashes: readonly string[],
    private readonly ends: readonly number[],
    private readonly body: string,
  ) {
    this.parsed = new Array<ExecutedReceipt | undefined>(hashes.length);
  }

  at(i: number): ExecutedReceipt {
    let r = this.parsed[i];
    if (r === undefined) {
      r = toReceipt(JSON.parse(this.body.slice(i === 0 ? 0 : this.ends[i - 1], this.ends[i])) as WireReceipt);
      this.parsed[i] = r;
    }
    return r;
  }

  all(): ExecutedReceipt[] {
    this.list ??= this.hashes.map((_, i) => this.at(i));
    return this.list;
  }

  /** The answer of a native apply: its head line (WireApply) and the receipts after it. */
  static of(answer: string): { head: WireApply; receipts: FlashblockReceipts } {
    const nl = answer.indexOf('\n');
    const head = JSON.parse(answer.slice(0, nl)) as WireApply;
    return { head, receipts: new FlashblockReceipts(head.hashes, head.ends, answer.slice(nl + 1)) };
  }
}

/** The arguments of one native apply. */
interface NativeWork {
  env: string;
  txs: Uint8Array;
  bounds: Uint32Array;
  senders: Uint8Array | null;
}

/** The fields of a canonical header a settle reads. */
interface CanonicalHeader {
  hash: string;
  receiptsRoot: string;
  transactions?: string[];
}

/** The first line of what a native apply resolves with (its receipts' JSON follows, back to back). */
interface WireApply {
  verified: boolean | null;
  /** The chain's deposit-nonce convention when this apply's root check decided it, else null. */
  depositNonce: 'pre' | 'reported' | null;
  /** The transactions' hashes, in order. */
  hashes: string[];
  /** Where each receipt's JSON ends in what follows the first line. */
  ends: number[];
}

interface WireReceipt {
  hash: string;
  type: number;
  status: boolean;
  cumulativeGasUsed: number;
  gasUsed: number;
  logs: ExecutedLog[];
  depositNonce: number | null;
  depositReceiptVersion: number | null;
  contractAddress: string | null;
  effectiveGasPrice: string;
  from: string;
  to: string | null;
}

/** See RevmEngineOptions.inlineReadUs. */
export const DEFAULT_INLINE_READ_US = 500;
/** See RevmEngineOptions.readTimeoutMs (geth's --rpc.evmtimeout default). */
const DEFAULT_READ_TIMEOUT_MS = 5000;
/** See RevmEngineOptions.readMemoEntries. */
export const DEFAULT_READ_MEMO_ENTRIES = 1024;
/** The memo's bound on keys + answers, bytes. */
const READ_MEMO_BYTES = 4 * 1024 * 1024;
/** Reads handed to the read threads in one batch at most (more in one turn of the event loop: several batches). */
const READ_BATCH = 8;
/** Reads longer than this (JSON) are not memoised. */
const READ_MEMO_MAX_KEY = 4096;
/** The reads the engine answers inline and the memo keeps (native/src/read.rs read_inline). */
const MEMO_METHODS = new Set(['call', 'getBalance', 'getTransactionCount', 'getCode', 'getStorageAt']);

function toReceipt(w: WireReceipt): ExecutedReceipt {
  return {
    transactionHash: w.hash,
    type: w.type,
    status: w.status,
    cumulativeGasUsed: BigInt(w.cumulativeGasUsed),
    gasUsed: BigInt(w.gasUsed),
    logs: w.logs,
    depositNonce: w.depositNonce === null ? null : BigInt(w.depositNonce),
    depositReceiptVersion: w.depositReceiptVersion === null ? null : BigInt(w.depositReceiptVersion),
    contractAddress: w.contractAddress,
    effectiveGasPrice: BigInt(w.effectiveGasPrice),
    from: w.from,
    to: w.to,
  };
}

/** Whether the executed transactions of `h` are the canonical block's (its header's hashes), in order. */
function sameTransactions(h: Held, canonical: readonly unknown[] | undefined): boolean {
  if (canonical === undefined) return false;
  let i = 0;
  for (const fb of h.receipts) {
    for (const hash of fb.hashes) {
      const c = canonical[i++];
      if (typeof c !== 'string' || c.toLowerCase() !== hash) return false;
    }
  }
  return i === canonical.length;
}

export class RevmEngine implements ExecutionEngine {
  private native: AddonEngine | null = null;
  /** The node as given to each native engine (its CA read once, at the first start). */
  private node: NativeNode | null = null;
  /** Node calls the current native engine's count leaves out: this side's own, and those of engines closed since. */
  private nodeReadsElsewhere = 0;
  /** Cache drops of the native engines closed since the start. */
  private cacheDropsBefore = 0;
  /** Applies and settles, in call order (the native side serialises too; this keeps the bookkeeping in step). */
  private queue: Promise<unknown> = Promise.resolve();
  private readonly held = new Map<number, Held>();
  /** The flashblock holding each held transaction's receipt. */
  private readonly byHash = new Map<string, FlashblockReceipts>();
  private canonical = 0;
  /** Settled through this height, with the blocks above a dropped one executed again (EngineStatus.settled). */
  private settledTo = 0;
  private readonly verdictListeners = new Set<(blockNumber: number, verdict: CanonicalVerdict) => void>();
  private stopped = false;
  private up = false;
  private readsInline = 0;
  /** A read ran inline in this turn of the event loop (cleared at the turn's end, see fromMemory). */
  private inlineTurn = false;
  /** endTurn is scheduled for this turn's check phase. */
  private turnEnds = false;
  /** The end of a turn in which reads ran: the next read may run inline again; the reads left waiting go over. */
  private readonly endTurn = (): void => {
    this.turnEnds = false;
    this.inlineTurn = false;
    this.sendReads();
  };
  private readsThreads = 0;
  /** Reads waiting to go to the read threads together (sendReads). */
  private toThreads: { body: string; resolve: (answer: string) => void; reject: (e: unknown) => void }[] = [];
  private readsMemo = 0;
  private readTimeouts = 0;
  /** Answers at the newest head, for the current native engine (a new one with each). */
  private memo: ReadMemo;
  private last: { number: number; index: number } | null = null;
  private restarts = 0;
  private divergences = 0;
  private verified = 0;
  private applied = 0;
  private lastError: string | null = null;
  /**
   * op-geth/op-reth commit a deposit's nonce before it; anvil (the devnet's node) the one after. The native engine
   * learns it from the roots and says so with every apply; receipts carry the nonce as executed (before).
   */
  private depositNonceMode: 'pre' | 'reported' = 'pre';
  private chainId = 0;
  private cacheBytes: number | null = null;

  constructor(private readonly o: RevmEngineOptions) {
    this.memo = this.newMemo();
  }

  private newMemo(): ReadMemo {
    return new ReadMemo(this.o.readMemoEntries ?? DEFAULT_READ_MEMO_ENTRIES, READ_MEMO_BYTES);
  }

  private log(msg: string, fields: Record<string, unknown>, level: 'info' | 'warn' | 'error' = 'warn'): void {
    if (!this.stopped) this.o.log?.(msg, fields, level);
  }

  /**
   * Starts at canonical head `canonical`. Called again (the node's chain was reset or changed), it starts over after
   * the work already queued: a fresh native engine, nothing held.
   */
  async start(canonical: number): Promise<void> {
    const addon = loadAddon();
    if (addon instanceof Error) throw new Error(`execution engine cannot run: ${addon.message}`);
    try {
      this.node ??= nativeNode(this.o.node, this.o.nodeTimeoutMs ?? 5000);
    } catch (e) {
      throw new Error(`execution engine cannot run: ${(e as Error).message}`, { cause: e });
    }
    await this.enqueue(async () => {
      this.up = false;
      this.closeNative();
      for (const n of [...this.held.keys()]) this.dropHeld(n);
      this.canonical = canonical;
      this.settledTo = canonical;
      this.chainId = Number(await this.nodeCall<string>('eth_chainId', []));
      this.native = this.newNative(addon, this.node!);
      this.memo = this.newMemo();
      await this.native.reset(canonical);
      this.up = true;
      this.lastError = null;
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.up = false;
    this.closeNative();
    this.node?.client.close();
  }

  private newNative(addon: Addon, node: NativeNode): AddonEngine {
    const cacheCapBytes = this.o.cacheCapBytes ?? 512 * 1024 * 1024;
    return new addon.Engine(node.url, node.headersJson, node.caPem, cacheCapBytes, this.o.readThreads ?? 2, this.o.nodeTimeoutMs ?? 5000);
  }

  /** Closes the native engine, its node calls kept in the count. */
  private closeNative(): void {
    if (this.native === null) return;
    this.nodeReadsElsewhere += this.native.nodeReads();
    this.cacheDropsBefore += this.native.cacheDrops();
    this.native.close();
    this.native = null;
  }

  private enqueue<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  applyFlashblock(fb: FlashblockWork): Promise<ApplyOutcome> {
    return this.enqueue(() => this.apply(fb));
  }

  private nativeWork(fb: FlashblockWork): NativeWork {
    const e = fb.env;
    const env = JSON.stringify({
      number: fb.blockNumber,
      index: fb.index,
      timestamp: e.timestamp,
      baseFee: '0x' + e.baseFeePerGas.toString(16),
      coinbase: e.feeRecipient,
      gasLimit: '0x' + e.gasLimit.toString(16),
      prevRandao: e.prevRandao,
      parentHash: e.parentHash,
      parentBeaconRoot: e.parentBeaconBlockRoot ?? null,
      spec: this.o.specAt(e.timestamp),
      chainId: this.chainId,
      receiptsRoot: fb.receiptsRoot,
    });
    // Senders ingest recovered (prepare() in native/src/tx.rs skips ecrecover for those); null: recover all there.
    return { env, txs: fb.txs.bytes, bounds: fb.txs.bounds, senders: fb.senders ?? null };
  }

  /** Runs `w` on the native engine: its receipts, the engine's verdict on the stream's root, and the deposit-nonce convention. */
  private async applyNative(native: AddonEngine, w: NativeWork): Promise<{ receipts: FlashblockReceipts; verified: boolean | null }> {
    const { head, receipts } = FlashblockReceipts.of(await native.apply(w.env, w.txs, w.bounds, w.senders));
    this.noteDepositNonce(head.depositNonce);
    return { receipts, verified: head.verified };
  }

  /** Holds flashblock receipts `fb` in block `h`. */
  private hold(h: Held, fb: FlashblockReceipts): void {
    h.receipts.push(fb);
    h.all = null;
    for (const hash of fb.hashes) this.byHash.set(hash, fb);
  }

  /**
   * The convention an engine's root check decided (null: it decided nothing). Kept across engines: a new one after a
   * panic starts from op-geth's and says so only once a root over a deposit tells it.
   */
  private noteDepositNonce(mode: 'pre' | 'reported' | null): void {
    if (mode === null || mode === this.depositNonceMode) return;
    this.depositNonceMode = mode;
    this.log('execution engine: the chain commits the deposit nonce ' + (mode === 'reported' ? 'after execution (as anvil does)' : 'before execution'), { mode }, 'info');
  }

  private async apply(fb: FlashblockWork): Promise<ApplyOutcome> {
    // Ingest's recovery of these senders started when the frame arrived: on 2 cores, recovering them here too would
    // compete with it for the same CPU (bench/engine-senders.ts measures both ways). It always settles.
    if (fb.sendersRecovered != null) await fb.sendersRecovered;
    const t0 = performance.now();
    const native = this.native;
    if (native === null || this.stopped) return { ok: false, reason: 'engine_down', message: this.stopped ? 'execution engine stopped' : 'execution engine not started' };
    if (fb.blockNumber <= this.canonical) return { ok: false, reason: 'not_next', message: `block ${fb.blockNumber} is canonical already` };
    let h = this.held.get(fb.blockNumber);
    if (fb.index === 0) {
      for (const n of [...this.held.keys()]) if (n >= fb.blockNumber) this.dropHeld(n);
      h = { works: [], receipts: [], all: null };
      this.held.set(fb.blockNumber, h);
    }
    // After a failed flashblock the engine refuses the block's later ones itself (E_NOT_NEXT).
    if (h === undefined) return { ok: false, reason: 'not_next', message: `block ${fb.blockNumber} is not open` };
    const work = this.nativeWork(fb);
    let out: { receipts: FlashblockReceipts; verified: boolean | null };
    try {
      out = await this.applyNative(native, work);
    } catch (e) {
      this.memo.clear();
      const { code, message } = engineErrorOf(e);
      this.lastError = message;
      if (code === 'E_PANIC' || code === 'E_POISONED') {
        this.log('execution engine panicked; restarting it (its state is rebuilt from the held flashblocks)', { block: fb.blockNumber, index: fb.index, error: message }, 'error');
        await this.restart(fb.blockNumber);
        return { ok: false, reason: 'panic', message: `engine panic: ${message}` };
      }
      if (code === 'E_NOT_NEXT') return { ok: false, reason: 'not_next', message };
      if (code === 'E_CLOSED') return { ok: false, reason: 'engine_down', message };
      if (code === 'E_NODE') return { ok: false, reason: 'node_error', message: `node read failed: ${message}` };
      return { ok: false, reason: code === 'E_TX' ? 'tx_rejected' : 'execution_error', message };
    }
    // Before anyone is told this flashblock is executed: no memoised answer is older than what readers may ask for.
    this.memo.clear();
    h.works.push(work);
    this.hold(h, out.receipts);
    this.applied++;
    this.last = { number: fb.blockNumber, index: fb.index };
    if (out.verified === true) this.verified++;
    else if (out.verified === false) this.divergences++;
    const receipts = out.receipts;
    return {
      ok: true,
      verified: out.verified,
      // Parsed when read (the feed reads them only to compare with receipts the stream carried).
      get receipts(): ExecutedReceipt[] {
        return receipts.all();
      },
      applyMs: performance.now() - t0,
    };
  }

  private dropHeld(n: number): void {
    const h = this.held.get(n);
    if (h === undefined) return;
    for (const fb of h.receipts) for (const hash of fb.hashes) if (this.byHash.get(hash) === fb) this.byHash.delete(hash);
    this.held.delete(n);
  }

  /** A new native engine after a panic: reset at the canonical head, the held blocks below `failedBlock` replayed. */
  private async restart(failedBlock: number): Promise<void> {
    this.restarts++;
    this.up = false;
    this.closeNative();
    const addon = loadAddon();
    if (addon instanceof Error || this.node === null || this.stopped) return;
    try {
      this.native = this.newNative(addon, this.node);
      this.memo = this.newMemo();
      await this.native.reset(this.canonical);
      for (const n of [...this.held.keys()].sort((a, b) => a - b)) {
        if (n >= failedBlock) continue;
        await this.replay(n);
      }
      this.settledTo = this.canonical;
      this.up = true;
    } catch (e) {
      this.lastError = (e as Error).message;
      this.log('execution engine restart failed', { error: this.lastError }, 'error');
    }
  }

  /** Re-executes held block `n` from its first flashblock on the current state; its receipts are replaced. */
  private async replay(n: number): Promise<void> {
    const h = this.held.get(n);
    if (h === undefined || this.native === null) return;
    const works = h.works;
    this.dropHeld(n);
    const fresh: Held = { works: [], receipts: [], all: null };
    this.held.set(n, fresh);
    for (const work of works) {
      try {
        const out = await this.applyNative(this.native, work);
        this.memo.clear();
        fresh.works.push(work);
        this.hold(fresh, out.receipts);
      } catch (e) {
        this.memo.clear();
        this.lastError = engineErrorOf(e).message;
        return;
      }
    }
  }

  noteCanonical(blockNumber: number): void {
    if (blockNumber <= this.canonical) return;
    void this.enqueue(() => this.settle(blockNumber));
  }

  /**
   * Settles every held block ≤ n against the node's canonical header (the native engine compares its receipts root
   * and keeps the block's state in its cache when equal), then n.
   */
  private async settle(n: number): Promise<void> {
    if (n <= this.canonical || this.native === null) return;
    const native = this.native;
    const nums = [...this.held.keys()].filter((k) => k <= n).sort((a, b) => a - b);
    if (nums[nums.length - 1] !== n) nums.push(n);
    let dropped: number[] = [];
    for (const k of nums) {
      if (k <= this.canonical) continue;
      const h = this.held.get(k);
      let header = null as CanonicalHeader | null;
      // Only a block executed right above the canonical state can be compared (and kept; the engine also requires
      // that none of its flashblocks failed).
      if (h !== undefined && k === this.canonical + 1) {
        try {
          header = await this.nodeCall<CanonicalHeader | null>('eth_getBlockByNumber', ['0x' + k.toString(16), false]);
        } catch (e) {
          this.lastError = (e as Error).message;
        }
      }
      let verdict: CanonicalVerdict = 'unchecked';
      try {
        const out = JSON.parse(await native.settle(k, header?.hash ?? '', header?.receiptsRoot ?? '')) as { matched: boolean | null; dropped: number[]; depositNonce: 'pre' | 'reported' | null };
        dropped = dropped.concat(out.dropped);
        this.noteDepositNonce(out.depositNonce);
        if (out.matched === true) verdict = 'match';
        else if (out.matched === false && h !== undefined) verdict = sameTransactions(h, header?.transactions) ? 'mismatch' : 'replaced';
      } catch (e) {
        this.lastError = engineErrorOf(e).message;
      }
      if (verdict === 'mismatch') void this.explainDivergence(k, h!);
      this.tellVerdict(k, verdict);
      this.canonical = k;
      this.dropHeld(k);
    }
    // Blocks built on a parent that turned out different from the chain's: executed again from their start.
    for (const d of [...new Set(dropped)].sort((a, b) => a - b)) await this.replay(d);
    this.settledTo = this.canonical;
  }

  onCanonicalVerdict(fn: (blockNumber: number, verdict: CanonicalVerdict) => void): () => void {
    this.verdictListeners.add(fn);
    return () => this.verdictListeners.delete(fn);
  }

  private tellVerdict(n: number, verdict: CanonicalVerdict): void {
    for (const fn of this.verdictListeners) {
      try {
        fn(n, verdict);
      } catch (e) {
        this.log('execution engine: a canonical-verdict listener failed', { block: n, error: (e as Error).message }, 'error');
      }
    }
  }

  /** Logs the first transaction and field where the executed block differs from the node's canonical receipts. */
  private async explainDivergence(n: number, h: Held): Promise<void> {
    try {
      const canon = await this.nodeCall<Record<string, string>[] | null>('eth_getBlockReceipts', ['0x' + n.toString(16)]);
      if (canon === null) return;
      const executed = this.receiptsOf(h);
      for (let i = 0; i < Math.max(canon.length, executed.length); i++) {
        const c = canon[i];
        const x = executed[i];
        if (c === undefined || x === undefined) {
          this.log('execution engine: canonical block differs from what was executed', { block: n, position: i, field: 'transaction count', executed: executed.length, canonical: canon.length });
          return;
        }
        const fields: [string, unknown, unknown][] = [
          ['transactionHash', x.transactionHash, String(c.transactionHash).toLowerCase()],
          ['status', x.status, c.status === '0x1'],
          ['gasUsed', x.gasUsed, BigInt(c.gasUsed!)],
          ['cumulativeGasUsed', x.cumulativeGasUsed, BigInt(c.cumulativeGasUsed!)],
          ['logs', x.logs.length, (c.logs as unknown as unknown[]).length],
        ];
        for (const [field, a, b] of fields) {
          if (a !== b) {
            this.log('execution engine: canonical block differs from what was executed', { block: n, position: i, tx: x.transactionHash, field, executed: String(a), canonical: String(b) });
            return;
          }
        }
      }
    } catch {
      // Best effort: the divergence itself is counted already.
    }
  }

  private nodeCall<T>(method: string, params: unknown[]): Promise<T> {
    if (this.node === null || this.stopped) return Promise.reject(new Error('execution engine stopped'));
    this.nodeReadsElsewhere++;
    return this.node.client.call<T>(method, params);
  }

  get ready(): boolean {
    return this.up && this.native !== null;
  }

  get settled(): number {
    return this.settledTo;
  }

  status(): EngineStatus {
    // The cache's size when the apply thread does not hold it (else the last one seen).
    this.cacheBytes = this.native?.cacheBytes() ?? this.cacheBytes;
    return {
      ready: this.ready,
      blockNumber: this.last?.number ?? null,
      index: this.last?.index ?? null,
      canonical: this.canonical,
      settled: this.settledTo,
      restarts: this.restarts,
      divergences: this.divergences,
      verified: this.verified,
      applied: this.applied,
      nodeReads: this.nodeReadsElsewhere + (this.native?.nodeReads() ?? 0),
      cacheBytes: this.native === null ? null : this.cacheBytes,
      cacheDrops: this.cacheDropsBefore + (this.native?.cacheDrops() ?? 0),
      reads: { inline: this.readsInline, threads: this.readsThreads, memo: this.readsMemo },
      readTimeouts: this.readTimeouts,
      lastError: this.lastError,
    };
  }

  /** Test hook: the next apply panics inside the native engine. */
  panicNextApply(): void {
    this.native?.panicNextApply();
  }

  private async read(method: string, req: Record<string, unknown>): Promise<unknown> {
    const native = this.native;
    if (native === null || !this.up) throw new EngineUnavailableError('execution engine not ready');
    const body = JSON.stringify({ method, ...req });
    const memoised = req.at === undefined && MEMO_METHODS.has(method) && body.length <= READ_MEMO_MAX_KEY;
    const now = this.fromMemory(native, body, memoised);
    if (now !== null) return this.outcome(`eth_${method}`, now);
    this.readsThreads++;
    const memo = this.memo;
    const epoch = memo.epoch;
    const text = await new Promise<string>((resolve, reject) => {
      if (this.toThreads.push({ body, resolve, reject }) === READ_BATCH) this.sendReads();
      else this.atTurnEnd();
    });
    const out = JSON.parse(text) as ReadAnswer;
    if (out.error?.code === 'E_TIMEOUT') this.readTimeouts++;
    // Kept when no flashblock was executed meanwhile and the answer is the state's (a result or a revert), not a
    // failed node read.
    if (memoised && memo.epoch === epoch && (out.result !== undefined || out.error?.code === 'E_REVERT')) memo.put(body, out, text.length);
    return this.outcome(`eth_${method}`, out);
  }

  /** Schedules endTurn once for this turn (its check phase, after the requests that arrived together). */
  private atTurnEnd(): void {
    if (this.turnEnds) return;
    this.turnEnds = true;
    setImmediate(this.endTurn);
  }

  /**
   * Hands the reads waiting for the read threads over as one batch (at READ_BATCH of them, and at the end of the
   * event-loop turn for the rest): one wake-up of a read thread and one answer for the batch, not one per read.
   */
  private readonly sendReads = (): void => {
    const batch = this.toThreads;
    if (batch.length === 0) return;
    this.toThreads = [];
    const native = this.native;
    // Stopped or restarting since these reads were asked: nothing executed to read yet.
    if (native === null || !this.up) {
      for (const r of batch) r.reject(new EngineUnavailableError('execution engine not ready'));
      return;
    }
    // A throw (the engine refusing the call) rejects the batch like a rejection: never out of this turn's callback.
    new Promise<string>((resolve) => resolve(native.read(batch.map((r) => r.body).join('\n'), this.o.readTimeoutMs ?? DEFAULT_READ_TIMEOUT_MS))).then(
      (text) => {
        const answers = text.split('\n');
        for (let i = 0; i < batch.length; i++) batch[i]!.resolve(answers[i]!);
      },
      (e: unknown) => {
        for (const r of batch) r.reject(e);
      },
    );
  };

  /**
   * The answer of read `key` without leaving this thread: the memo's (when `memoised`), else the engine's inline
   * answer (stored in the memo); null when it needs the read threads (the node, past the inline budget, or another
   * read already ran inline in this turn of the event loop).
   */
  private fromMemory(native: AddonEngine, key: string, memoised: boolean): ReadAnswer | null {
    const hit = memoised ? this.memo.get(key) : undefined;
    if (hit !== undefined) {
      this.readsMemo++;
      return hit;
    }
    const budget = this.o.inlineReadUs ?? DEFAULT_INLINE_READ_US;
    if (budget <= 0 || this.inlineTurn) return null;
    const text = native.readInline(key, budget);
    if (text === null) return null;
    // Requests handled in the same turn of the loop arrived together: the first read runs here at once, the others
    // waited behind it and go to the read threads, which run them on another core while this thread goes on (one
    // client at a time: every read inline, no thread hop).
    this.inlineTurn = true;
    this.atTurnEnd();
    this.readsInline++;
    const out = JSON.parse(text) as ReadAnswer;
    if (memoised) this.memo.put(key, out, text.length);
    return out;
  }

  /** A native read's answer: its result, or the JSON-RPC error it carries thrown as `rpcMethod`'s. */
  private outcome(rpcMethod: string, out: ReadAnswer, unavailable = 'nothing executed yet'): unknown {
    if (out.unavailable === true) throw new EngineUnavailableError(unavailable);
    if (out.error !== undefined) throw new RpcReplyError(rpcMethod, rpcCodeOf(out.error.code), out.error.message, out.error.data ?? undefined);
    return out.result;
  }

  readNow(read: NowRead): string | undefined {
    const native = this.native;
    if (native === null || !this.up || (this.o.inlineReadUs ?? DEFAULT_INLINE_READ_US) === 0) return undefined;
    const key = JSON.stringify(read);
    const out = this.fromMemory(native, key, key.length <= READ_MEMO_MAX_KEY);
    if (out === null) return undefined;
    try {
      return this.outcome(`eth_${read.method}`, out) as string;
    } catch (e) {
      if (e instanceof EngineUnavailableError) return undefined;
      throw e;
    }
  }

  /** A trace (see ExecutionEngine.trace): on the engine's trace thread, never the memo or the inline path. */
  async trace(req: TraceRequest): Promise<unknown> {
    const native = this.native;
    if (native === null || !this.up) throw new EngineUnavailableError('execution engine not ready');
    this.readsThreads++;
    const out = JSON.parse(await native.trace(JSON.stringify(req))) as ReadAnswer;
    return this.outcome(req.method, out, 'the flashblock is no longer held by the engine');
  }

  async call(tx: CallRequest, stateOverrides?: Record<string, unknown>, blockOverrides?: Record<string, unknown>): Promise<string> {
    return (await this.read('call', { tx, stateOverrides: stateOverrides ?? null, blockOverrides: blockOverrides ?? null })) as string;
  }

  simulateV1(payload: Record<string, unknown>): Promise<unknown> {
    return this.read('simulateV1', { payload });
  }

  async estimateGas(tx: CallRequest, stateOverrides?: Record<string, unknown>, blockOverrides?: Record<string, unknown>): Promise<bigint> {
    return BigInt((await this.read('estimateGas', { tx, stateOverrides: stateOverrides ?? null, blockOverrides: blockOverrides ?? null })) as string);
  }

  async createAccessList(tx: CallRequest): Promise<{ accessList: unknown[]; gasUsed: string }> {
    return (await this.read('createAccessList', { tx })) as { accessList: unknown[]; gasUsed: string };
  }

  async getCode(address: string, at?: FlashblockAt): Promise<string> {
    return (await this.read('getCode', { address, at })) as string;
  }

  async getStorageAt(address: string, slot: string, at?: FlashblockAt): Promise<string> {
    return (await this.read('getStorageAt', { address, slot, at })) as string;
  }

  async getBalance(address: string, at?: FlashblockAt): Promise<bigint> {
    return BigInt((await this.read('getBalance', { address, at })) as string);
  }

  async getTransactionCount(address: string, at?: FlashblockAt): Promise<bigint> {
    return BigInt((await this.read('getTransactionCount', { address, at })) as string);
  }

  receipt(hash: string): ExecutedReceipt | null {
    const fb = this.byHash.get(hash);
    return fb === undefined ? null : fb.at(fb.hashes.indexOf(hash));
  }

  /** `r`'s deposit nonce as the chain commits it (see depositNonceMode). */
  chainDepositNonce(r: ExecutedReceipt): bigint | null {
    if (r.type !== TX_DEPOSIT || r.depositNonce === null) return null;
    return this.depositNonceMode === 'pre' ? r.depositNonce : r.depositNonce + 1n;
  }

  blockReceipts(blockNumber: number): readonly ExecutedReceipt[] | null {
    const h = this.held.get(blockNumber);
    return h === undefined ? null : this.receiptsOf(h);
  }

  /** Every receipt of held block `h` so far, parsed. */
  private receiptsOf(h: Held): ExecutedReceipt[] {
    h.all ??= h.receipts.flatMap((fb) => fb.all());
    return h.all;
  }

  /**
   * Every account block `blockNumber`'s executed flashblocks changed so far (merged), for a state root over the
   * parent's trie; null when the engine does not hold the block (not executed, settled, or the engine is down).
   * Queued after the applies and settles asked for before it.
   */
  blockChanges(blockNumber: number): Promise<AddonBlockChanges | null> {
    return this.enqueue(async () => {
      const native = this.native;
      if (native === null || this.stopped) return null;
      return JSON.parse(await native.blockChanges(blockNumber)) as AddonBlockChanges | null;
    });
  }
}
