// The devnet's flashblocks sequencer: builds each block on anvil by snapshot → mine → read → revert every
// flashblock, seals it for real at the block boundary, and serves the flashblocks over WebSocket. Devnet only:
// must never be imported by src/ except through main.ts's dynamic import.
import { pbkdf2Sync, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { brotliCompressSync, constants as zlibConstants } from 'node:zlib';
import { HDKey, hdKeyToAccount } from 'viem/accounts';
import { keccak256, toHex, type Hex } from 'viem';
import { WebSocketServer, type WebSocket } from 'ws';
import { TX_DEPOSIT } from '../../src/chain/types.js';
import { encodeDepositFromRpc } from './deposit.js';
import { encodeRlp } from '../../src/chain/rlp.js';
import { bigIntToBytes } from '../../src/chain/hex.js';
import { describeExit, DEV_MNEMONIC, rpcBatch, rpcCall, startAnvil, type Anvil, type AnvilOptions } from './anvil.js';
import { devnetL1Attributes, installL1Block, l1InfoDeposit, type DevnetL1Layout } from './l1block.js';
import { installPreinstalls } from './preinstalls.js';
import { presetByName, type ChainPreset } from '../../src/chain/presets.js';

const DEVNET = presetByName('devnet') as ChainPreset;

/*
 * How a flashblock is made true to anvil's execution (anvil 1.7 behaviour, verified by test/devnet):
 * - anvil runs with mining off and FIFO pool order; users' transactions wait in its pool.
 * - flashblock k: evm_snapshot, evm_mine(timestamp of the block) mines every pooled tx (the earlier flashblocks'
 *   txs first, since they were re-submitted first), read block + receipts + balances, evm_revert. The revert does
 *   NOT give mined txs back to the pool (pooled-but-unmined ones stay), so the block's raw txs are re-submitted
 *   right after the revert, in block order.
 * - evm_revert does not restore anvil's base-fee tracker, so every mine of a block is given the block's base fee
 *   (read once, at block start, from eth_feeHistory) via anvil_setNextBlockBaseFeePerGas, and so is every revert:
 *   anvil's pool admits a tx only if its max fee covers the tracker's base fee, which a reverted mine above the gas
 *   target left higher than the block's. Without it, a tx priced between the two (the traffic's 2 gwei legacy txs
 *   once the base fee nears 2 gwei) was refused on re-submission and missing from the next re-mine: that flashblock
 *   and the sealed block then lacked a tx an earlier flashblock had emitted (issue 22's soak divergence).
 * - the canonical seal is one more evm_mine with the same timestamp: its hash equals the last flashblock's.
 * - every block starts with an L1-info deposit (Isthmus calldata, l1block.ts) to the L1Block code installed at start:
 *   the block's first entry in the FIFO pool, queued when the block opens while submissions wait (the gate below
 *   holds even eth_sendRawTransactionSync then). A tx still pooled at that moment is mined once to learn its bytes
 *   and order, reverted, and queued again behind the deposit (`l1InfoRequeued`). anvil's op-revm then charges every
 *   later tx the L1 fee and the operator fee from the L1Block storage the deposit wrote, as OP nodes do.
 * - timestamps are those of an OP-stack chain: a block with timestamp T is built during [T − blockTime, T], so its
 *   flashblock k is due at T − blockTime + k × flashblockMs (the daemon's lateness formula). Blocks start on the
 *   wall-clock grid where start + blockTime is a whole second, and T = start + blockTime.
 * - clients reach anvil through `nodeRpcUrl`, a pass-through proxy that holds every call while a flashblock is being
 *   built (a shared/exclusive lock: calls run side by side, the builder alone). So a tx can never slip in between
 *   the revert and the re-submission (which would reorder the block), and no read sees the simulated block that is
 *   about to be reverted: through the proxy anvil looks like a node that only ever shows sealed blocks. Talking to
 *   `anvilUrl` directly works too but may show those transient states, and may rarely reorder a block (counted).
 * - except reads pinned to a sealed block (by number or EIP-1898 hash: balance, nonce, code, storage, proof, call,
 *   header; see sealedPin), such as the daemon's engine's reads of accounts it has never seen, which must not wait a
 *   whole build. anvil 1.7 answers a read at block n from its stored state of n while n is below its best block,
 *   and from its live state while n IS its best block. So a read below the sealed head passes at once, and one at
 *   the sealed head waits only for the builder's evm_mine and evm_revert (a second lock): evm_mine executes into the
 *   live state before it moves the best block up, and evm_revert moves the best block back down before it restores
 *   the live state; a head read inside either sees the block being simulated. Measured with reads at the head
 *   hammered through the proxy during 2 s blocks at 100 tx/s (30 s, ≈ 190 builds each): holding them during no
 *   anvil call, 555 wrong answers; during evm_revert only, 613; during evm_mine only, 149; during both, 0 (as
 *   holding them the whole build). Reads by hash resolve to the number first (410 wrong with no hold); reads one
 *   block below the head, 0 wrong with no hold. evm_snapshot, anvil_setNextBlockBaseFeePerGas, the re-submissions
 *   and the builder's own reads do not touch the state those reads see. test/devnet/pinned.test.ts checks it.
 */

/** Receipt encoding inside metadata.receipts. */
export type ReceiptShape = 'external' | 'internal';

/**
 * The stream dialects the devnet can speak (a chain preset's `dialect`; docs/operating.md "Chains"):
 * - `op-rbuilder`: op-rbuilder ≥ v0.4.13 (Unichain): internally tagged receipts, `diff.blob_gas_used`.
 * - `op-subblocks`: OP Mainnet subblocks: as op-rbuilder, with `state_root`, `block_hash`, `withdrawals_root` zero
 *   and `withdrawals` [] (specs/protocol/subblocks.md).
 * - `xlayer`: X Layer: no receipts or balances, `metadata.access_list` (RLP EIP-7928) with the touched accounts'
 *   balance, nonce and code after the flashblock (storage is not listed: the devnet cannot see slot writes).
 * - `base`: Base's last (post-Azul) shape: `block_number` and an empty JSON `access_list` only.
 */
export const STREAM_DIALECTS = ['op-rbuilder', 'op-subblocks', 'xlayer', 'base'] as const;
export type StreamDialect = (typeof STREAM_DIALECTS)[number];

export interface DevnetOptions {
  /** Canonical block time; the seal happens every blockTimeMs. */
  blockTimeMs?: number;
  /** Flashblock interval; blockTimeMs / flashblockMs flashblocks per block (index 0 included). */
  flashblockMs?: number;
  /** Default receipt shape of the stream (a subscriber may override with ?receipts=internal|external). */
  receipts?: ReceiptShape;
  /** Default to brotli-compressed binary frames (override with ?brotli=1|0). */
  brotli?: boolean;
  /** Default to post-Azul metadata: block_number and an empty access_list only (override with ?azul=1|0). */
  azul?: boolean;
  /** Default stream dialect (override with ?dialect=…); unset: the shape the options above describe. */
  dialect?: StreamDialect | null;
  /** Options for the anvil child (its chain id, fork and port among them). */
  anvil?: AnvilOptions;
  /** Loopback port of the node RPC (`nodeRpcUrl`, anvil behind the ingress); 0 or unset: a free port. */
  nodePort?: number;
  /** Loopback port of the flashblocks stream (`flashblocksUrl`); 0 or unset: a free port. */
  streamPort?: number;
  /** Log sink; defaults to silence. */
  log?: (msg: string, fields?: Record<string, unknown>) => void;
}

/** A funded dev account of anvil's default mnemonic. */
export interface DevAccount {
  address: `0x${string}`;
  privateKey: `0x${string}`;
}

export interface DevnetStats {
  blocks: number;
  flashblocks: number;
  transactions: number;
  /** Emitted transactions by EIP-2718 type (0 legacy, 1, 2, 4, 0x7e). */
  txTypes: Record<string, number>;
  /** Sealed blocks whose canonical hash equals the last flashblock's block_hash / differs from it. */
  hashMatches: number;
  hashMismatches: number;
  /** A re-mined block that did not start with the already-emitted txs (see the note above). */
  prefixViolations: number;
  resendErrors: number;
  cycleErrors: number;
  /** Build cycle (snapshot → revert → re-submit) duration in ms. */
  cycleMsMax: number;
  cycleMsAvg: number;
  subscribers: number;
  lastBlockNumber: number;
  /**
   * The devnet's own view of the 200 ms budget, from its schedule (block start + index × flashblockMs), not from
   * timestamps: flashblocks published more than one interval after their slot, and gaps between two published
   * flashblocks longer than one interval + 50 ms (the daemon's default tolerance). A daemon's budget-miss counters
   * can only exceed these through its own (or the network's) delays.
   */
  lateFlashblocks: number;
  longGaps: number;
  /** Seals held by a {@link Devnet.holdSeals} holder, and those sealed anyway because the holder took too long. */
  heldSeals: number;
  sealHoldTimeouts: number;
  /** Build steps held by {@link Devnet.holdNext}, and those run anyway because the hold took too long. */
  heldBuilds: number;
  buildHoldTimeouts: number;
  /** Blocks whose opening found txs already pooled (queued again behind the L1-info deposit). */
  l1InfoRequeued: number;
  /** Blocks whose index 0 did not start with their L1-info deposit (must stay 0). */
  l1InfoMisplaced: number;
}

/** A flashblock in the sequencer's own terms, before encoding for a subscriber. */
export interface BuiltFlashblock {
  payloadId: string;
  index: number;
  blockNumber: number;
  base: Record<string, string> | null;
  diff: {
    state_root: string;
    receipts_root: string;
    logs_bloom: string;
    gas_used: string;
    block_hash: string;
    transactions: string[];
    withdrawals: [];
    withdrawals_root: string;
  };
  /** Receipts of the new txs in tx order: hash, EIP-2718 type, and the fields the wire carries. */
  receipts: { hash: string; type: number; status: string; cumulativeGasUsed: string; logs: WireLog[]; depositNonce?: string; depositReceiptVersion?: string }[];
  /** Cumulative balances of the block's touched accounts. */
  balances: Record<string, string>;
  /**
   * The touched accounts after this flashblock (for the `xlayer` access list), when a subscriber wants them; the
   * access index is the block's transaction count so far.
   */
  accounts?: { address: string; balance: string; nonce: string; code: string }[] | null;
  accessIndex?: number;
}

interface WireLog {
  address: string;
  topics: string[];
  data: string;
}

/** A running devnet. */
export interface Devnet {
  /** JSON-RPC URL to give the daemon as its node (and to send transactions to): anvil behind the ingress. */
  readonly nodeRpcUrl: string;
  /** anvil itself (HTTP and WebSocket on one port). */
  readonly anvilUrl: string;
  readonly anvilWsUrl: string;
  /** ws:// URL of the flashblocks stream (paths / and /flashblocks). */
  readonly flashblocksUrl: string;
  readonly chainId: number;
  /** The process id of its anvil. */
  readonly anvilPid: number;
  readonly accounts: DevAccount[];
  /**
   * Settles with one sentence if anvil exits while the devnet runs (killed, crashed, out of memory): the devnet then
   * stops itself (build loop, stream, ingress) and `stop()` resolves once it has. Never settles otherwise (a stop()
   * is no failure). The devnet does not restart anvil: its chain is gone with it.
   */
  readonly failed: Promise<string>;
  /** Calls fn with every flashblock as built (before encoding); returns the unsubscribe function. */
  onFlashblock(fn: (fb: BuiltFlashblock) => void): () => void;
  /**
   * Test hook: from the next seal on, each block's canonical seal (and with it the next block's index 0) waits until
   * `hold(last)` settles, `last` being the block's last flashblock, already published. Meanwhile the node answers reads
   * as usual and holds submissions back (they go to the next block), so `last` stays the block's last flashblock.
   * A hold that takes longer than `maxHoldMs` is logged and counted (`sealHoldTimeouts`), and the block is sealed
   * anyway; stop() ends a hold at once. One holder at a time; returns the function that removes it.
   */
  holdSeals(hold: (last: BuiltFlashblock) => Promise<void>, maxHoldMs?: number): () => void;
  /**
   * Test hook: the next build step (the next flashblock, or the seal and the next block's index 0) waits, once its
   * time has come, until `until` settles, so whatever a test sends meanwhile reaches its reader before the devnet's
   * next flashblock however slow the machine is. Called from an {@link onFlashblock} listener, it holds the flashblock
   * after that one. After `maxHoldMs` the step runs anyway (`buildHoldTimeouts`); stop() ends a hold at once. One hold
   * at a time: another set before the held step has run throws.
   */
  holdNext(until: Promise<unknown>, maxHoldMs?: number): void;
  stats(): DevnetStats;
  /** Stops the build loop, closes the stream and the ingress, kills anvil. Idempotent. */
  stop(): Promise<void>;
}

const RECEIPT_TAGS: Record<number, string> = { 0: 'Legacy', 1: 'Eip2930', 2: 'Eip1559', 4: 'Eip7702', 0x7e: 'Deposit' };
/** OP fee vaults whose balances change with every tx (sequencer, base fee, L1 fee, operator fee). */
const FEE_VAULTS = [
  '0x4200000000000000000000000000000000000011',
  '0x4200000000000000000000000000000000000019',
  '0x420000000000000000000000000000000000001a',
  '0x420000000000000000000000000000000000001b',
];
const ZERO_HASH = `0x${'00'.repeat(32)}`;

/** Re-submitted txs per JSON-RPC batch after a revert (see buildFlashblock). */
const RESUBMIT_BATCH = 32;

/**
 * Position of the block parameter of the calls that read one block's state or header and nothing else (no pool, no
 * "latest" unless given): a call of these pinned to a sealed block may pass the proxy while a flashblock is built.
 */
const PINNABLE_PARAM: Record<string, number> = {
  eth_getBalance: 1,
  eth_getTransactionCount: 1,
  eth_getCode: 1,
  eth_getStorageAt: 2,
  eth_getProof: 2,
  eth_call: 1,
  eth_estimateGas: 1,
  eth_createAccessList: 1,
  eth_getBlockByNumber: 0,
};

/** Sealed blocks the proxy recognises by hash (EIP-1898 `{ blockHash }`): the newest ones. */
const SEALED_HASHES_KEPT = 1024;

/** What the proxy knows of the sealed chain: its head number and the hashes of the newest sealed blocks. */
export interface SealedChain {
  head: number;
  hashes: Map<string, number>;
}

/** The block number a block parameter names, if it names a sealed block by number or hash; else null. */
function sealedNumber(p: unknown, sealed: SealedChain): number | null {
  let n: number | null = null;
  if (typeof p === 'string') {
    if (/^0x[0-9a-fA-F]{1,16}$/.test(p)) n = Number(p);
  } else if (p !== null && typeof p === 'object') {
    const o = p as { blockNumber?: unknown; blockHash?: unknown };
    if (typeof o.blockHash === 'string') n = sealed.hashes.get(o.blockHash.toLowerCase()) ?? null;
    else if (typeof o.blockNumber === 'string' && /^0x[0-9a-fA-F]{1,16}$/.test(o.blockNumber)) n = Number(o.blockNumber);
  }
  return n !== null && Number.isSafeInteger(n) && n <= sealed.head ? n : null;
}

/**
 * The newest block the calls of a JSON-RPC body (one call or a batch) read, when every one of them reads only a block
 * already sealed, named by number or hash; null when any call reads something else ("latest", "pending", no tag, the
 * block in build, the pool, a submission) or the body is not JSON-RPC. The proxy lets such a body pass builds (see
 * the header comment for which anvil calls it still waits for).
 */
export function sealedPin(body: Buffer, sealed: SealedChain): number | null {
  let v: unknown;
  try {
    v = JSON.parse(body.toString('utf8'));
  } catch {
    return null;
  }
  const calls = Array.isArray(v) ? v : [v];
  if (calls.length === 0) return null;
  let newest = -1;
  for (const c of calls) {
    if (c === null || typeof c !== 'object') return null;
    const { method, params } = c as { method?: unknown; params?: unknown };
    const at = typeof method === 'string' && Object.hasOwn(PINNABLE_PARAM, method) ? PINNABLE_PARAM[method]! : -1;
    const n = at >= 0 && Array.isArray(params) ? sealedNumber(params[at], sealed) : null;
    if (n === null) return null;
    newest = Math.max(newest, n);
  }
  return newest;
}

/** The build cycle runs alone (exclusive); calls through the ingress proxy run side by side (shared). */
class RwLock {
  private readers = 0;
  private writer = false;
  private readonly waiting: { exclusive: boolean; start: () => void }[] = [];

  /** Runs fn alongside other shared holders, never while an exclusive holder runs. */
  shared<T>(fn: () => Promise<T>): Promise<T> {
    return this.hold(false, fn);
  }

  /** Runs fn alone: after the shared holders before it finished, with none admitted until it ends. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.hold(true, fn);
  }

  private free(exclusive: boolean): boolean {
    return exclusive ? !this.writer && this.readers === 0 : !this.writer;
  }

  private async hold<T>(exclusive: boolean, fn: () => Promise<T>): Promise<T> {
    if (this.waiting.length > 0 || !this.free(exclusive)) {
      // admit() marks this caller as a holder before starting it.
      await new Promise<void>((start) => this.waiting.push({ exclusive, start }));
    } else this.mark(exclusive, true);
    try {
      return await fn();
    } finally {
      this.mark(exclusive, false);
      this.admit();
    }
  }

  private mark(exclusive: boolean, on: boolean): void {
    if (exclusive) this.writer = on;
    else this.readers += on ? 1 : -1;
  }

  /** Starts waiters in arrival order while they fit (a run of shared ones, or one exclusive). */
  private admit(): void {
    while (this.waiting.length > 0 && this.free(this.waiting[0]!.exclusive)) {
      const w = this.waiting.shift()!;
      this.mark(w.exclusive, true);
      w.start();
      if (w.exclusive) break;
    }
  }
}

/**
 * Derives anvil's funded dev accounts from its default mnemonic. The BIP-39 seed (PBKDF2-SHA512, 2,048 rounds, salt
 * "mnemonic") is computed once, by node:crypto: viem's mnemonicToAccount computes it again in JavaScript for every
 * account, a few hundred ms of CPU for each devnet start.
 */
export function devAccounts(count = 10): DevAccount[] {
  const root = HDKey.fromMasterSeed(pbkdf2Sync(DEV_MNEMONIC.normalize('NFKD'), 'mnemonic', 2048, 64, 'sha512'));
  const out: DevAccount[] = [];
  for (let i = 0; i < count; i++) {
    const a = hdKeyToAccount(root, { addressIndex: i });
    out.push({ address: a.address, privateKey: toHex(a.getHdKey().privateKey!) });
  }
  return out;
}

/** Stream variant a subscriber asked for. */
interface Variant {
  receipts: ReceiptShape;
  brotli: boolean;
  azul: boolean;
  dialect: StreamDialect | null;
}

const ZERO_ROOT = '0x' + '00'.repeat(32);
const rlpScalar = (hex: string): Uint8Array => bigIntToBytes(BigInt(hex));

/** The `xlayer` access list of `fb`: RLP of [address, [], [], [[i, balance]], [[i, nonce]], [[i, code]]] per account. */
function accessListOf(fb: BuiltFlashblock): string {
  const i = bigIntToBytes(BigInt(fb.accessIndex ?? 0));
  const list = (fb.accounts ?? []).map((a) => [
    Buffer.from(a.address.slice(2), 'hex'),
    [],
    [],
    [[i, rlpScalar(a.balance)]],
    [[i, rlpScalar(a.nonce)]],
    a.code === '0x' ? [] : [[i, Buffer.from(a.code.slice(2), 'hex')]],
  ]);
  return '0x' + encodeRlp(list).toString('hex');
}

/** Encodes a built flashblock as the wire JSON of one variant (key order as op-rbuilder writes it). */
export function encodeFlashblock(fb: BuiltFlashblock, v: { receipts: ReceiptShape; azul: boolean; dialect?: StreamDialect | null }): string {
  const dialect = v.dialect ?? null;
  if (dialect === 'base') v = { ...v, azul: true };
  else if (dialect !== null) v = { ...v, receipts: 'internal', azul: false };
  let metadata: Record<string, unknown>;
  if (dialect === 'xlayer') {
    metadata = { block_number: fb.blockNumber, access_list: accessListOf(fb) };
  } else if (v.azul) {
    metadata = { block_number: fb.blockNumber, access_list: [] };
  } else {
    const receipts: Record<string, unknown> = {};
    for (const r of fb.receipts) {
      const body: Record<string, unknown> = { status: r.status, cumulativeGasUsed: r.cumulativeGasUsed, logs: r.logs };
      if (r.depositNonce !== undefined) body.depositNonce = r.depositNonce;
      if (r.depositReceiptVersion !== undefined) body.depositReceiptVersion = r.depositReceiptVersion;
      receipts[r.hash] =
        v.receipts === 'internal' ? { type: toHex(r.type), ...body } : { [RECEIPT_TAGS[r.type] ?? 'Legacy']: body };
    }
    metadata = { block_number: fb.blockNumber, new_account_balances: fb.balances, receipts };
  }
  const msg: Record<string, unknown> = { payload_id: fb.payloadId, index: fb.index };
  if (fb.base) msg.base = fb.base;
  msg.diff = dialect === null || dialect === 'base' ? fb.diff : { ...fb.diff, blob_gas_used: '0x0' };
  if (dialect === 'op-subblocks') {
    msg.diff = { ...(msg.diff as object), state_root: ZERO_ROOT, block_hash: ZERO_ROOT, withdrawals_root: ZERO_ROOT, withdrawals: [] };
  }
  msg.metadata = metadata;
  return JSON.stringify(msg);
}

function parseVariant(url: string | undefined, defaults: Variant): Variant {
  const q = new URL(url ?? '/', 'http://x').searchParams;
  const flag = (name: string, d: boolean): boolean => {
    const s = q.get(name);
    return s === null ? d : s === '1' || s === 'true';
  };
  const r = q.get('receipts');
  const d = q.get('dialect');
  return {
    receipts: r === 'internal' || r === 'external' ? r : defaults.receipts,
    brotli: flag('brotli', defaults.brotli),
    azul: flag('azul', defaults.azul),
    dialect: (STREAM_DIALECTS as readonly string[]).includes(d ?? '') ? (d as StreamDialect) : defaults.dialect,
  };
}

/** A block that starts building up to this late on the grid still gets the grid's timestamp. */
const GRID_SLACK_MS = 50;

/**
 * The first moment at or after `nowMs` (performance clock) when a block can start on the wall-clock grid: start +
 * blockTime is a whole second, so the block's timestamp (the end of its build) is exact.
 */
export function alignedBlockStartMs(nowMs: number, blockTimeMs: number): number {
  const wallMs = performance.timeOrigin + nowMs;
  return Math.ceil((wallMs + blockTimeMs) / 1000) * 1000 - blockTimeMs - performance.timeOrigin;
}

/**
 * The timestamp (s) of a block whose build starts at `startMs` (performance clock): start + blockTime, rounded up to
 * a whole second (within GRID_SLACK_MS it rounds down) and above the parent's.
 */
export function blockTimestampS(startMs: number, blockTimeMs: number, parentTimestampS: number): number {
  const endWallMs = performance.timeOrigin + startMs + blockTimeMs;
  return Math.max(parentTimestampS + 1, Math.ceil((endWallMs - GRID_SLACK_MS) / 1000));
}

/**
 * How long a call anvil refused waits to learn whether anvil has exited (its exit is seen a moment after the refused
 * connection), so the answer and the log name the cause instead of a bare "fetch failed".
 */
const ANVIL_EXIT_GRACE_MS = 1000;

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** Whether `e` says the node could not be reached at all (refused, reset): what every call meets once anvil is gone. */
function unreachable(e: unknown): boolean {
  const cause = e instanceof Error && e.cause instanceof Error ? ` ${e.cause.message} ${(e.cause as NodeJS.ErrnoException).code ?? ''}` : '';
  return /fetch failed|ECONNREFUSED|ECONNRESET|socket hang up|other side closed/i.test((e instanceof Error ? e.message : String(e)) + cause);
}

/** Listens `server` on 127.0.0.1:`port` (0: a free port) and resolves with the port; a taken port is an error saying so. */
function listenOn(server: Server, port: number, what: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (e: NodeJS.ErrnoException): void => {
      reject(e.code === 'EADDRINUSE' ? new Error(`cannot listen on 127.0.0.1:${port} for the devnet's ${what}: the port is in use; choose another or leave it unset for a free one`) : e);
    };
    server.once('error', onError);
    server.listen(port, '127.0.0.1', () => {
      server.removeListener('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** What the current block's builder carries between flashblocks. */
interface BlockInBuild {
  number: number;
  timestamp: number;
  /** When its build started (performance clock): flashblock k is scheduled at startMs + k × flashblockMs. */
  startMs: number;
  baseFee: bigint;
  payloadId: string;
  nextIndex: number;
  hashes: string[];
  raws: string[];
  touched: Set<string>;
  last: BuiltFlashblock | null;
  /** Hash of the block's L1-info deposit, its first transaction. */
  l1InfoHash: string;
}

/**
 * Starts anvil, the flashblocks sequencer, the stream server and the submission ingress.
 * Resolves once index 0 of the first block has been built.
 */
export async function startDevnet(opts: DevnetOptions = {}): Promise<Devnet> {
  // The devnet chain's preset (src/chain/presets.ts) gives the defaults: the daemon picks the same by chain id 901.
  const blockTimeMs = opts.blockTimeMs ?? DEVNET.blockTimeMs;
  const flashblockMs = opts.flashblockMs ?? DEVNET.flashblockIntervalMs;
  if (flashblockMs <= 0 || blockTimeMs < flashblockMs) throw new Error('need 0 < flashblockMs <= blockTimeMs');
  const perBlock = Math.max(1, Math.round(blockTimeMs / flashblockMs));
  const log = opts.log ?? (() => undefined);
  const defaults: Variant = { receipts: opts.receipts ?? 'external', brotli: opts.brotli ?? false, azul: opts.azul ?? false, dialect: opts.dialect ?? null };

  const anvil: Anvil = await startAnvil(opts.anvil);
  const url = anvil.url;
  // Under jovian (the fork of a chain preset the devnet plays) blocks open with Jovian's L1-info calldata.
  const l1Layout: DevnetL1Layout = opts.anvil?.hardfork === 'jovian' ? 'jovian' : 'isthmus';
  // The stream's HTTP side answers 426 to anything but a WebSocket upgrade (on / and /flashblocks).
  const streamServer = createServer((_req, res) => {
    res.writeHead(426, { 'content-type': 'text/plain', connection: 'close' });
    res.end('the devnet streams flashblocks over WebSocket: ws://<host>:<port>/flashblocks\n');
  });
  try {
    await installL1Block(url);
    await installPreinstalls(url);
    await listenOn(streamServer, opts.streamPort ?? 0, 'flashblocks stream');
  } catch (e) {
    streamServer.close();
    await anvil.stop();
    throw e;
  }
  /** Set when anvil exited while the devnet ran: what happened, in one sentence (see `failed`). */
  let anvilGone: string | null = null;
  let stopped = false;
  let onStop: () => void = () => undefined;
  const stoppedSignal = new Promise<void>((r) => (onStop = r));
  const lock = new RwLock();
  // Reads pinned to the sealed head pass `lock` and wait only for anvil's evm_mine and evm_revert (exclusive here).
  const stateWrites = new RwLock();
  const sealed: SealedChain = { head: -1, hashes: new Map() };
  const listeners = new Set<(fb: BuiltFlashblock) => void>();
  const st: DevnetStats = {
    blocks: 0, flashblocks: 0, transactions: 0, txTypes: {}, hashMatches: 0, hashMismatches: 0, prefixViolations: 0,
    resendErrors: 0, cycleErrors: 0, cycleMsMax: 0, cycleMsAvg: 0, subscribers: 0, lastBlockNumber: 0,
    lateFlashblocks: 0, longGaps: 0, heldSeals: 0, sealHoldTimeouts: 0, heldBuilds: 0, buildHoldTimeouts: 0,
    l1InfoRequeued: 0, l1InfoMisplaced: 0,
  };
  let lastPublishMs = -1;
  let cycles = 0;
  let cycleMsTotal = 0;

  // --- stream server -------------------------------------------------------------------------------------------
  const variants = new WeakMap<WebSocket, Variant>();
  const wss = new WebSocketServer({
    server: streamServer,
    perMessageDeflate: false,
    verifyClient: (info: { req: { url?: string } }) => {
      const path = new URL(info.req.url ?? '/', 'http://x').pathname;
      return path === '/' || path === '/flashblocks';
    },
  });
  wss.on('connection', (ws, req) => {
    variants.set(ws, parseVariant(req.url, defaults));
    ws.on('error', () => undefined);
  });

  /** Whether a subscriber (or the default) reads the `xlayer` dialect, whose access list needs nonces and code. */
  function wantsAccessList(): boolean {
    if (defaults.dialect === 'xlayer') return true;
    for (const ws of wss.clients) if (variants.get(ws)?.dialect === 'xlayer') return true;
    return false;
  }

  /** Sends `fb` to every subscriber; `slotMs` is when it was scheduled (performance clock). */
  function publish(fb: BuiltFlashblock, slotMs: number): void {
    st.flashblocks++;
    const now = performance.now();
    if (now - slotMs > flashblockMs) st.lateFlashblocks++;
    if (lastPublishMs >= 0 && now - lastPublishMs > flashblockMs + 50) st.longGaps++;
    lastPublishMs = now;
    const frames = new Map<string, string | Buffer>();
    for (const ws of wss.clients) {
      if (ws.readyState !== ws.OPEN) continue;
      const v = variants.get(ws) ?? defaults;
      const key = `${v.receipts}|${v.azul}|${v.brotli}|${v.dialect}`;
      let frame = frames.get(key);
      if (frame === undefined) {
        const json = encodeFlashblock(fb, v);
        frame = v.brotli
          ? brotliCompressSync(Buffer.from(json), { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 5 } })
          : json;
        frames.set(key, frame);
      }
      ws.send(frame, { binary: typeof frame !== 'string' });
    }
    for (const fn of listeners) fn(fb);
  }

  // --- submission ingress: anvil behind a lock-aware pass-through ------------------------------------------------
  /**
   * Set while a seal is held (holdSeals), so the held block gets no more transactions, and from each seal until the
   * next block's L1-info deposit is queued, so none gets ahead of it: submissions wait for it.
   */
  let submissionGate: Promise<void> | null = null;
  let openSubmissionGate: () => void = () => undefined;

  /** Forwards a submission once no seal is held; checked under the lock, so none reaches the pool after the gate closed. */
  async function submit(sync: boolean, forward: () => Promise<[number, Buffer]>): Promise<[number, Buffer]> {
    for (;;) {
      while (submissionGate !== null) await submissionGate;
      if (sync) return forward();
      const out = await lock.shared(async () => (submissionGate === null ? forward() : null));
      if (out !== null) return out;
    }
  }

  const ingress: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const forward = async (): Promise<[number, Buffer]> => {
        const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        return [r.status, Buffer.from(await r.arrayBuffer())];
      };
      // Every call waits while a flashblock is being built, so no answer shows the simulated-then-reverted state
      // and no submission slips in between the revert and the re-submission. Sync submissions wait for mining:
      // holding the lock for them would deadlock the builder. Reads pinned to a sealed block wait at most for an
      // evm_mine or evm_revert, and below the sealed head not at all (the header comment says why that is exact).
      const sync = body.includes('eth_sendRawTransactionSync');
      const submits = sync || body.includes('eth_sendRawTransaction') || body.includes('eth_sendTransaction');
      const pin = submits ? null : sealedPin(body, sealed);
      const answer = submits
        ? submit(sync, forward)
        : pin === null
          ? lock.shared(forward)
          : pin < sealed.head
            ? forward()
            : stateWrites.shared(forward);
      answer.then(
        ([status, out]) => {
          res.writeHead(status, { 'content-type': 'application/json', 'content-length': out.length });
          res.end(out);
        },
        async (e: unknown) => {
          // A refused call may come just before anvil's exit is seen: wait a moment for it, to name the cause.
          if (!stopped && unreachable(e)) await Promise.race([anvil.exited, delay(ANVIL_EXIT_GRACE_MS)]);
          // A JSON-RPC error (clients parse the body): the devnet stopping, or anvil gone.
          const why =
            anvilGone !== null ? `the devnet's ${anvilGone}; the devnet is stopping` :
            stopped ? 'the devnet is stopping' :
            `the devnet's anvil is unreachable: ${e instanceof Error ? e.message : String(e)}`;
          const out = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: why } }));
          res.writeHead(503, { 'content-type': 'application/json', 'content-length': out.length });
          res.end(out);
        },
      );
    });
  });
  /** Closes what the start opened (stream, ingress, anvil) and rethrows: a start that fails leaves nothing running. */
  const abandon = async (e: unknown): Promise<never> => {
    stopped = true;
    onStop();
    for (const ws of wss.clients) ws.terminate();
    wss.close();
    streamServer.close();
    ingress.closeAllConnections();
    ingress.close();
    await anvil.stop();
    throw e;
  };
  const nodePort = await listenOn(ingress, opts.nodePort ?? 0, 'node RPC').catch(abandon);
  const nodeRpcUrl = `http://127.0.0.1:${nodePort}`;

  // --- builder -------------------------------------------------------------------------------------------------
  const genesis = await rpcCall(url, 'eth_getBlockByNumber', ['latest', false]).catch(abandon);
  noteSealed(Number(genesis.number), String(genesis.hash));
  let parent = { number: Number(genesis.number), timestamp: Number(genesis.timestamp) };
  let cur: BlockInBuild | null = null;

  /**
   * Opens the block whose build starts at `startMs` (performance clock): its timestamp is the end of its build. Queues
   * its L1-info deposit first in the pool (submissions wait meanwhile: the seal step closed the gate).
   */
  async function openBlock(startMs: number): Promise<BlockInBuild> {
    const fh = await rpcCall<{ baseFeePerGas: string[] }>(url, 'eth_feeHistory', ['0x1', 'latest', []]);
    const baseFee = BigInt(fh.baseFeePerGas[fh.baseFeePerGas.length - 1] ?? '0x0');
    const number = parent.number + 1;
    const l1Info = l1InfoDeposit(devnetL1Attributes(number, l1Layout));
    const b: BlockInBuild = {
      number,
      timestamp: blockTimestampS(startMs, blockTimeMs, parent.timestamp),
      baseFee,
      payloadId: `0x${randomBytes(8).toString('hex')}`,
      nextIndex: 0,
      hashes: [],
      raws: [],
      touched: new Set(FEE_VAULTS),
      startMs,
      last: null,
      l1InfoHash: keccak256(l1Info),
    };
    await queueFirst(b, l1Info);
    return b;
  }

  /**
   * Puts `first` at the head of the FIFO pool. Txs already pooled (a submission that reached anvil during the seal)
   * would come before it: they are mined once to learn their order and bytes, reverted, and queued again behind it.
   */
  async function queueFirst(b: BlockInBuild, first: Hex): Promise<void> {
    const pool = await rpcCall<{ pending: string }>(url, 'txpool_status');
    let behind: string[] = [];
    if (Number(pool.pending) > 0) {
      st.l1InfoRequeued++;
      const snap = await rpcCall<string>(url, 'evm_snapshot');
      try {
        behind = await rawsOf((await mine(b)).transactions);
      } finally {
        await stateWrites.exclusive(() => rpcCall(url, 'evm_revert', [snap]));
        await rpcCall(url, 'anvil_setNextBlockBaseFeePerGas', [toHex(b.baseFee)]);
      }
    }
    await rpcCall(url, 'eth_sendRawTransaction', [first]);
    await resubmit(behind);
  }

  /** EIP-2718 bytes of mined txs, in their order. Deposits are encoded from their fields: anvil 1.7.1 aborts on eth_getRawTransactionByHash of a 0x7e tx. */
  async function rawsOf(txs: any[]): Promise<string[]> {
    const signed = txs.filter((t) => Number(t.type) !== TX_DEPOSIT);
    const res = await rpcBatch(url, signed.map((t): [string, unknown[]] => ['eth_getRawTransactionByHash', [t.hash]]));
    const rawByHash = new Map<string, string>();
    signed.forEach((t, i) => {
      const r = res[i];
      if (!r?.ok || typeof r.value !== 'string') throw new Error(`no raw bytes for ${t.hash}`);
      rawByHash.set(String(t.hash), r.value);
    });
    return txs.map((t) => (Number(t.type) === TX_DEPOSIT ? encodeDepositFromRpc(t) : rawByHash.get(String(t.hash))!));
  }

  /**
   * Re-submits `raws` in order, in batches of at most RESUBMIT_BATCH one after another: anvil 1.7 does not keep the
   * order of a larger JSON-RPC batch, which reordered blocks of more than 64 txs (the canonical block then differed).
   */
  async function resubmit(raws: string[]): Promise<void> {
    for (let i = 0; i < raws.length; i += RESUBMIT_BATCH) {
      const part = raws.slice(i, i + RESUBMIT_BATCH);
      for (const r of await rpcBatch(url, part.map((raw): [string, unknown[]] => ['eth_sendRawTransaction', [raw]]))) {
        if (!r.ok) {
          st.resendErrors++;
          log('devnet: re-submission after revert failed', { error: r.error.message });
        }
      }
    }
  }

  /** Records a sealed block: reads pinned to it (by number or hash) may pass the proxy during builds from now on. */
  function noteSealed(number: number, hash: string): void {
    sealed.head = number;
    sealed.hashes.set(hash.toLowerCase(), number);
    if (sealed.hashes.size > SEALED_HASHES_KEPT) sealed.hashes.delete(sealed.hashes.keys().next().value!);
  }

  async function mine(b: BlockInBuild): Promise<any> {
    await rpcCall(url, 'anvil_setNextBlockBaseFeePerGas', [toHex(b.baseFee)]);
    await stateWrites.exclusive(() => rpcCall(url, 'evm_mine', [b.timestamp]));
    const block = await rpcCall(url, 'eth_getBlockByNumber', [toHex(b.number), true]);
    if (!block || Number(block.number) !== b.number) throw new Error(`mined block is not ${b.number}`);
    return block;
  }

  /** Simulates the block with everything pooled and emits the next flashblock (under the lock). */
  async function buildFlashblock(b: BlockInBuild): Promise<void> {
    const t0 = performance.now();
    const snap = await rpcCall<string>(url, 'evm_snapshot');
    let block: any;
    let receipts: any[];
    let newRaws: string[] = [];
    let balances: Record<string, string>;
    let accounts: BuiltFlashblock['accounts'] = null;
    let newTxs: any[];
    try {
      block = await mine(b);
      const txs: any[] = block.transactions;
      if (b.nextIndex === 0 && txs[0]?.hash !== b.l1InfoHash) {
        st.l1InfoMisplaced++;
        log('devnet: index 0 does not start with the L1-info deposit', { block: b.number, first: txs[0]?.hash ?? null });
      }
      for (let i = 0; i < b.hashes.length; i++) {
        if (txs[i]?.hash !== b.hashes[i]) {
          st.prefixViolations++;
          log('devnet: re-mined block does not start with the emitted txs', { block: b.number, at: i });
          break;
        }
      }
      const known = new Set(b.hashes);
      newTxs = txs.filter((t) => !known.has(t.hash));
      for (const t of newTxs) {
        b.touched.add(String(t.from).toLowerCase());
        if (t.to) b.touched.add(String(t.to).toLowerCase());
      }
      b.touched.add(String(block.miner).toLowerCase());
      receipts = await rpcCall<any[]>(url, 'eth_getBlockReceipts', [toHex(b.number)]);
      for (const r of receipts) if (r.contractAddress) b.touched.add(String(r.contractAddress).toLowerCase());
      const addrs = [...b.touched];
      // Deposits are encoded from their fields: anvil 1.7.1 aborts on eth_getRawTransactionByHash of a 0x7e tx.
      const signed = newTxs.filter((t) => Number(t.type) !== TX_DEPOSIT);
      // Nonce and code of the touched accounts only while a subscriber reads the `xlayer` access list.
      const listed = wantsAccessList() ? addrs : [];
      const res = await rpcBatch(url, [
        ...signed.map((t): [string, unknown[]] => ['eth_getRawTransactionByHash', [t.hash]]),
        ...addrs.map((a): [string, unknown[]] => ['eth_getBalance', [a, toHex(b.number)]]),
        ...listed.map((a): [string, unknown[]] => ['eth_getTransactionCount', [a, toHex(b.number)]]),
        ...listed.map((a): [string, unknown[]] => ['eth_getCode', [a, toHex(b.number)]]),
      ]);
      const rawByHash = new Map<string, string>();
      signed.forEach((t, i) => {
        const r = res[i];
        if (!r?.ok || typeof r.value !== 'string') throw new Error(`no raw bytes for ${t.hash}`);
        rawByHash.set(String(t.hash), r.value);
      });
      newRaws = newTxs.map((t) => (Number(t.type) === TX_DEPOSIT ? encodeDepositFromRpc(t) : rawByHash.get(String(t.hash))!));
      balances = {};
      addrs.forEach((a, i) => {
        const r = res[signed.length + i];
        if (r?.ok) balances[a] = r.value as string;
      });
      if (listed.length > 0) {
        const at = signed.length + addrs.length;
        accounts = [];
        listed.forEach((a, i) => {
          const nonce = res[at + i];
          const code = res[at + listed.length + i];
          if (balances[a] !== undefined && nonce?.ok && code?.ok) {
            accounts!.push({ address: a, balance: balances[a], nonce: nonce.value as string, code: String(code.value).toLowerCase() });
          }
        });
      }
    } finally {
      await stateWrites.exclusive(() => rpcCall(url, 'evm_revert', [snap]));
      // The pool checks fees against anvil's base-fee tracker, which the reverted mine moved: back to this block's.
      await rpcCall(url, 'anvil_setNextBlockBaseFeePerGas', [toHex(b.baseFee)]);
      // The mined txs left the pool with the revert: put the block's txs back, earlier ones first.
      await resubmit([...b.raws, ...newRaws]);
    }
    const byHash = new Map(receipts.map((r) => [String(r.transactionHash), r]));
    const fb: BuiltFlashblock = {
      payloadId: b.payloadId,
      index: b.nextIndex,
      blockNumber: b.number,
      base:
        b.nextIndex === 0
          ? {
              parent_beacon_block_root: block.parentBeaconBlockRoot ?? ZERO_HASH,
              parent_hash: block.parentHash,
              fee_recipient: block.miner,
              prev_randao: block.mixHash ?? ZERO_HASH,
              block_number: toHex(b.number),
              gas_limit: block.gasLimit,
              timestamp: block.timestamp,
              extra_data: block.extraData,
              base_fee_per_gas: block.baseFeePerGas,
            }
          : null,
      diff: {
        state_root: block.stateRoot,
        receipts_root: block.receiptsRoot,
        logs_bloom: block.logsBloom,
        gas_used: block.gasUsed,
        block_hash: block.hash,
        transactions: newRaws,
        withdrawals: [],
        withdrawals_root: block.withdrawalsRoot ?? ZERO_HASH,
      },
      receipts: newTxs.map((t) => {
        const r = byHash.get(String(t.hash));
        if (!r) throw new Error(`no receipt for ${t.hash}`);
        const out: BuiltFlashblock['receipts'][number] = {
          hash: String(t.hash),
          type: Number(r.type ?? t.type ?? 0),
          status: r.status,
          cumulativeGasUsed: r.cumulativeGasUsed,
          logs: (r.logs as WireLog[]).map((l) => ({ address: l.address, topics: l.topics, data: l.data })),
        };
        if (r.depositNonce !== undefined) out.depositNonce = r.depositNonce;
        if (r.depositReceiptVersion !== undefined) out.depositReceiptVersion = r.depositReceiptVersion;
        return out;
      }),
      balances,
      accounts,
      accessIndex: b.hashes.length + newTxs.length,
    };
    b.nextIndex++;
    b.hashes.push(...newTxs.map((t) => String(t.hash)));
    b.raws.push(...newRaws);
    b.last = fb;
    st.transactions += newTxs.length;
    for (const r of fb.receipts) st.txTypes[r.type] = (st.txTypes[r.type] ?? 0) + 1;
    const ms = performance.now() - t0;
    cycles++;
    cycleMsTotal += ms;
    st.cycleMsAvg = cycleMsTotal / cycles;
    if (ms > st.cycleMsMax) st.cycleMsMax = ms;
    publish(fb, b.startMs + fb.index * flashblockMs);
  }

  /** Emits the next flashblock: rebuilt when the pool holds txs not yet emitted, else the same state, no txs. */
  async function tick(b: BlockInBuild, force: boolean): Promise<boolean> {
    const pool = await rpcCall<{ pending: string }>(url, 'txpool_status');
    if (force || !b.last || Number(pool.pending) !== b.raws.length) {
      await buildFlashblock(b);
      return true;
    }
    return false;
  }

  function emitUnchanged(b: BlockInBuild): void {
    const last = b.last!;
    const fb: BuiltFlashblock = { ...last, index: b.nextIndex++, base: null, receipts: [], diff: { ...last.diff, transactions: [] } };
    b.last = fb;
    publish(fb, b.startMs + fb.index * flashblockMs);
  }

  /** Seals the block on anvil: one last flashblock if txs arrived since the previous one, then the real mine. */
  async function seal(b: BlockInBuild): Promise<void> {
    const pool = await rpcCall<{ pending: string }>(url, 'txpool_status');
    if (Number(pool.pending) !== b.raws.length) await buildFlashblock(b);
    const block = await mine(b);
    noteSealed(b.number, String(block.hash));
    st.blocks++;
    st.lastBlockNumber = b.number;
    if (block.hash === b.last?.diff.block_hash) st.hashMatches++;
    else {
      st.hashMismatches++;
      log('devnet: canonical block differs from the last flashblock', {
        block: b.number, canonical: block.hash, flashblock: b.last?.diff.block_hash, txs: block.transactions.length, emitted: b.hashes.length,
      });
    }
    parent = { number: b.number, timestamp: b.timestamp };
  }

  const sleep = delay;
  let holder: { hold: (last: BuiltFlashblock) => Promise<void>; maxHoldMs: number } | null = null;

  /**
   * Holds the seal of `b` for the holder: closes the submission gate, builds the block's last flashblock if
   * transactions arrived since the previous one, and waits for the holder outside the lock (the node keeps answering
   * reads). The gate opens again once the block is sealed and the next one's L1-info deposit queued.
   */
  async function holdSeal(b: BlockInBuild, h: NonNullable<typeof holder>): Promise<void> {
    submissionGate ??= new Promise<void>((r) => (openSubmissionGate = r));
    await step(async () => {
      const pool = await rpcCall<{ pending: string }>(url, 'txpool_status');
      if (Number(pool.pending) !== b.raws.length) await buildFlashblock(b);
    });
    if (stopped || b.last === null) return;
    st.heldSeals++;
    const last = b.last;
    const out = await awaitHold(() => h.hold(last), h.maxHoldMs);
    if (out === 'expired') {
      st.sealHoldTimeouts++;
      log('devnet: seal hold expired; sealing anyway', { block: b.number, maxHoldMs: h.maxHoldMs });
    } else if (out instanceof Error) log('devnet: seal holder failed; sealing', { block: b.number, error: out.message });
  }

  /** Waits for a test's hold: its settling, `maxHoldMs` ('expired'), or stop(); a throw or rejection is returned as an Error. */
  async function awaitHold(hold: () => Promise<unknown>, maxHoldMs: number): Promise<'done' | 'expired' | Error> {
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<'expired'>((r) => (timer = setTimeout(() => r('expired'), maxHoldMs)));
    try {
      return (await Promise.race([hold(), expired, stoppedSignal])) === 'expired' ? 'expired' : 'done';
    } catch (e) {
      return e instanceof Error ? e : new Error(String(e));
    } finally {
      clearTimeout(timer);
    }
  }

  let nextHold: { until: Promise<unknown>; maxHoldMs: number } | null = null;

  /** Waits for the hold set by holdNext, if any (bounded by its maxHoldMs and by stop()). */
  async function awaitNextHold(): Promise<void> {
    const h = nextHold;
    if (h === null) return;
    st.heldBuilds++;
    const out = await awaitHold(() => h.until, h.maxHoldMs);
    nextHold = null;
    if (out === 'expired') {
      st.buildHoldTimeouts++;
      log('devnet: build hold expired; building anyway', { maxHoldMs: h.maxHoldMs });
    } else if (out instanceof Error) log('devnet: build hold failed; building', { error: out.message });
  }

  function openGate(): void {
    submissionGate = null;
    openSubmissionGate();
  }

  async function step(fn: () => Promise<void>): Promise<void> {
    try {
      await lock.exclusive(fn);
    } catch (e) {
      if (stopped) return;
      // anvil gone: the devnet stops itself (see `failed`), a failed cycle is no news.
      if (unreachable(e)) await Promise.race([anvil.exited, delay(ANVIL_EXIT_GRACE_MS)]);
      if (stopped || anvilGone !== null) return;
      st.cycleErrors++;
      log('devnet: build cycle failed', { error: e instanceof Error ? e.message : String(e) });
    }
  }

  // The first block starts on the grid (at most a second from now); index 0 of it is built before returning, so
  // callers see a stream that is already flowing.
  const firstStart = alignedBlockStartMs(performance.now(), blockTimeMs);
  await sleep(firstStart - performance.now());
  await lock
    .exclusive(async () => {
      cur = await openBlock(firstStart);
      await tick(cur, true);
    })
    .catch(abandon);
  const loop = (async () => {
    let blockStart = firstStart;
    while (!stopped) {
      for (let k = 1; k < perBlock && !stopped; k++) {
        await sleep(blockStart + k * flashblockMs - performance.now());
        await awaitNextHold();
        if (stopped) break;
        await step(async () => {
          if (!(await tick(cur!, false))) emitUnchanged(cur!);
        });
      }
      await sleep(blockStart + blockTimeMs - performance.now());
      await awaitNextHold();
      if (stopped) break;
      const h = holder;
      if (h !== null) await holdSeal(cur!, h);
      if (stopped) break;
      // Block boundaries stay on the blockTimeMs grid unless a cycle overran by more than a flashblock (the next
      // timestamp is then rounded up, so that block's flashblocks count as early, never as late).
      blockStart += blockTimeMs;
      if (performance.now() - blockStart > flashblockMs) blockStart = performance.now();
      const start = blockStart;
      await step(async () => {
        // Submissions (sync ones too) wait from the seal until the next block's L1-info deposit is queued first.
        submissionGate ??= new Promise<void>((r) => (openSubmissionGate = r));
        try {
          await seal(cur!);
          cur = await openBlock(start);
        } finally {
          openGate();
        }
        await tick(cur, true);
      });
    }
  })();

  let stopping: Promise<void> | null = null;
  let onFailed: (why: string) => void = () => undefined;
  const failed = new Promise<string>((r) => (onFailed = r));
  const devnet: Devnet = {
    nodeRpcUrl,
    anvilUrl: anvil.url,
    anvilWsUrl: anvil.wsUrl,
    flashblocksUrl: `ws://127.0.0.1:${(streamServer.address() as AddressInfo).port}/flashblocks`,
    chainId: anvil.chainId,
    anvilPid: anvil.pid,
    accounts: devAccounts(opts.anvil?.accounts ?? 10),
    failed,
    onFlashblock(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    holdSeals(hold, maxHoldMs = 60_000) {
      if (holder !== null) throw new Error('a seal holder is already set');
      const h = { hold, maxHoldMs };
      holder = h;
      return () => {
        if (holder === h) holder = null;
      };
    },
    holdNext(until, maxHoldMs = 60_000) {
      if (nextHold !== null) throw new Error('a build hold is already set');
      nextHold = { until, maxHoldMs };
    },
    stats: () => ({ ...st, txTypes: { ...st.txTypes }, subscribers: wss.clients.size }),
    stop() {
      stopping ??= (async () => {
        stopped = true;
        onStop();
        openGate();
        await loop.catch(() => undefined);
        for (const ws of wss.clients) ws.terminate();
        await new Promise<void>((r) => wss.close(() => r()));
        ingress.closeAllConnections();
        await new Promise<void>((r) => ingress.close(() => r()));
        streamServer.closeAllConnections();
        await new Promise<void>((r) => streamServer.close(() => r()));
        await anvil.stop();
      })();
      return stopping;
    },
  };
  // anvil exiting on its own (killed, crashed): say so once and stop everything else; stop() ending it is no failure.
  void anvil.exited.then((how) => {
    if (stopping !== null) return;
    anvilGone = `anvil (pid ${anvil.pid}) exited (${describeExit(how)})`;
    void devnet.stop();
    onFailed(anvilGone);
  });
  return devnet;
}
