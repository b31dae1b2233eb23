// Test helper: a real block of ../shared/conformance/op-blocks (as scripts/witness/fixture.ts loads it) as flashblocks —
// index 0 the deposits, the rest in slices — for the engine (FlashblockWork) and in each stream dialect the daemon
// decodes (frames as a builder sends them), plus the block's reference execution by the engine over the witness node.
// The header rebuild and state root are the daemon's own (src/chain/header-build.ts, src/chain/state-root.ts).
// Knows no test framework; the witness node and the daemon are started by the tests.
import { presetByChainId, forkAt } from '../../src/chain/presets.js';
import { hexToBytes } from '../../src/chain/hex.js';
import { keccak256Hex } from '../../src/chain/keccak.js';
import type { HeaderFields } from '../../src/chain/header.js';
import { blockHashOf, buildHeader } from '../../src/chain/header-build.js';
import { EMPTY_TRIE_ROOT } from '../../src/chain/trie.js';
import { TX_DEPOSIT } from '../../src/chain/types.js';
import type { AddonAccountChange } from '../../src/exec/addon.js';
import { txBatch, type BlockEnv, type FlashblockWork } from '../../src/exec/engine.js';
import { receiptBloom, receiptsRoot, type ExecutedReceipt } from '../../src/exec/receipts.js';
import { RevmEngine } from '../../src/exec/revm.js';
import { splitBlock } from '../../src/cli/split-block.js';
import { asOpRbuilder, asSubblocks, asXLayer } from './dialects.js';
import { postState } from './state-root.js';

/** The stream dialects the daemon decodes (src/chain/presets.ts StreamDialect), each a frame shape below. */
export const DIALECTS = ['base', 'op-rbuilder', 'op-subblocks', 'xlayer'] as const;
export type Dialect = (typeof DIALECTS)[number];

/** What these helpers read of a WitnessFixture (scripts/witness/fixture.ts): the block to build and its parent. */
export interface RealBlock {
  name: string;
  chainId: number;
  parent: { hash: string; number: number | bigint | string; stateRoot: string };
  /** The witness: keccak256 (0x-hex) → preimage (trie nodes, code). */
  preimages: ReadonlyMap<string, Uint8Array>;
  header: { hash: string; receiptsRoot: string; logsBloom: string; gasUsed: bigint | number | string } | null;
  expectedBlockHash: string | null;
  block: {
    number: number | bigint | string;
    timestamp: number | bigint | string;
    prevRandao: string;
    feeRecipient: string;
    parentBeaconBlockRoot: string | null;
    gasLimit: number | bigint | string;
    baseFeePerGas: number | bigint | string;
    extraData: string;
    transactions: string[];
  };
}

const ZERO32 = '0x' + '00'.repeat(32);

/** The block's env as the engine takes it (its parent hash from the witness's parent header). */
export function envOf(b: RealBlock): BlockEnv {
  const k = b.block;
  return {
    number: Number(k.number),
    timestamp: Number(k.timestamp),
    baseFeePerGas: BigInt(k.baseFeePerGas),
    feeRecipient: k.feeRecipient.toLowerCase(),
    gasLimit: BigInt(k.gasLimit),
    prevRandao: k.prevRandao.toLowerCase(),
    parentHash: b.parent.hash.toLowerCase(),
    parentBeaconBlockRoot: k.parentBeaconBlockRoot,
  };
}

/** The OP spec the daemon runs the block under (its chain preset's schedule at the block's timestamp). */
export function specOf(b: RealBlock): string {
  const preset = presetByChainId(b.chainId);
  if (preset === null) throw new Error(`${b.name}: chain ${b.chainId} has no preset`);
  return forkAt(preset, Number(b.block.timestamp));
}

/**
 * Where the flashblocks end: cumulative transaction counts, index 0 = the leading deposits, then the rest in up to
 * `slices` slices as `flashblocksd check-execution` splits a block (src/cli/split-block.ts).
 */
export function flashblockCuts(txs: string[], slices = 3): number[] {
  let at = 0;
  return splitBlock(txs, slices).map((part) => (at += part.length));
}

/** The block as engine work, one FlashblockWork per flashblock (no receipts root to verify). */
export function worksOf(b: RealBlock, slices = 3): FlashblockWork[] {
  const env = envOf(b);
  const txs = b.block.transactions;
  const cuts = flashblockCuts(txs, slices);
  return cuts.map((to, index) => ({
    blockNumber: env.number,
    index,
    env,
    txs: txBatch(txs.slice(index === 0 ? 0 : cuts[index - 1], to)),
    receiptsRoot: null,
  }));
}

/** An engine over the node at `url` (the witness node), started at the block's parent, running the block's spec. */
export async function engineFor(b: RealBlock, url: string): Promise<RevmEngine> {
  const spec = specOf(b);
  const e = new RevmEngine({ node: { url }, specAt: () => spec, nodeTimeoutMs: 10_000 });
  await e.start(Number(b.parent.number));
  return e;
}

/** What the engine made of the block: every receipt in order, or the first flashblock it failed with its reason. */
export interface Executed {
  receipts: ExecutedReceipt[];
  failure: string | null;
}

/** Applies the block's flashblocks to `e` in order (nothing verified); stops at the first failure. */
export async function executeBlock(e: RevmEngine, b: RealBlock, slices = 3): Promise<Executed> {
  const receipts: ExecutedReceipt[] = [];
  for (const w of worksOf(b, slices)) {
    const out = await e.applyFlashblock(w);
    if (!out.ok) return { receipts, failure: `flashblock ${w.index}: ${out.reason}: ${out.message}` };
    receipts.push(...out.receipts);
  }
  return { receipts, failure: null };
}

/** The logs bloom over receipts (0x-hex, 256 bytes). */
export function bloomOf(receipts: readonly ExecutedReceipt[]): string {
  const out = new Uint8Array(256);
  for (const r of receipts) {
    const b = receiptBloom(r.logs);
    for (let i = 0; i < 256; i++) out[i]! |= b[i]!;
  }
  return '0x' + Buffer.from(out).toString('hex');
}

const q = (n: bigint | number): string => '0x' + BigInt(n).toString(16);

/** A receipt as a builder's metadata carries it (externally tagged, as the base shape; dialects re-shape it). */
function wireReceipt(r: ExecutedReceipt): Record<string, unknown> {
  const body: Record<string, unknown> = {
    status: r.status ? '0x1' : '0x0',
    cumulativeGasUsed: q(r.cumulativeGasUsed),
    logs: r.logs.map((l) => ({ address: l.address, topics: l.topics, data: l.data })),
  };
  if (r.type === TX_DEPOSIT) {
    if (r.depositNonce !== null) body.depositNonce = q(r.depositNonce);
    if (r.depositReceiptVersion !== null) body.depositReceiptVersion = q(r.depositReceiptVersion);
  }
  const tag = ({ 0: 'Legacy', 1: 'Eip2930', 2: 'Eip1559', 3: 'Eip4844', 4: 'Eip7702', [TX_DEPOSIT]: 'Deposit' } as Record<number, string>)[r.type];
  if (tag === undefined) throw new Error(`receipt ${r.transactionHash}: no wire tag for type ${r.type}`);
  return { [tag]: body };
}

export interface FrameOptions {
  /** The last flashblock's receipts root (the real block's); earlier ones carry the builder's own (from `receipts`). */
  finalReceiptsRoot: string;
  /** The last flashblock's logs bloom and state root (else the builder's bloom and a zero root). */
  finalLogsBloom?: string;
  finalStateRoot?: string;
  payloadId: string;
  slices?: number;
}

/**
 * The block as the frames (JSON text) a builder of `dialect` streams: per flashblock its cumulative receipts root,
 * logs bloom and gas used (from `receipts`, the builder's execution, except the final root given), its new
 * transactions, and in metadata the receipts of those transactions. The last frame's block_hash is the real block's.
 */
export function framesOf(b: RealBlock, receipts: readonly ExecutedReceipt[], dialect: Dialect, o: FrameOptions): string[] {
  const env = envOf(b);
  const txs = b.block.transactions;
  const cuts = flashblockCuts(txs, o.slices ?? 3);
  if (receipts.length !== txs.length) throw new Error(`${b.name}: ${receipts.length} receipts for ${txs.length} transactions`);
  const msgs = cuts.map((to, index) => {
    const from = index === 0 ? 0 : cuts[index - 1]!;
    const last = index === cuts.length - 1;
    const meta: Record<string, unknown> = {};
    for (let i = from; i < to; i++) {
      const hash = keccak256Hex(hexToBytes(txs[i]!));
      if (hash !== receipts[i]!.transactionHash) throw new Error(`${b.name}: receipt ${i} is of ${receipts[i]!.transactionHash}, not ${hash}`);
      meta[hash] = wireReceipt(receipts[i]!);
    }
    const soFar = receipts.slice(0, to);
    return {
      payload_id: o.payloadId,
      index,
      base: index !== 0 ? null : {
        parent_beacon_block_root: env.parentBeaconBlockRoot ?? ZERO32,
        parent_hash: env.parentHash,
        fee_recipient: env.feeRecipient,
        prev_randao: env.prevRandao,
        block_number: q(env.number),
        gas_limit: q(env.gasLimit),
        timestamp: q(env.timestamp),
        extra_data: b.block.extraData,
        base_fee_per_gas: q(env.baseFeePerGas),
      },
      diff: {
        state_root: last && o.finalStateRoot !== undefined ? o.finalStateRoot : ZERO32,
        receipts_root: last ? o.finalReceiptsRoot : receiptsRoot(soFar),
        logs_bloom: last && o.finalLogsBloom !== undefined ? o.finalLogsBloom : bloomOf(soFar),
        gas_used: q(to === 0 ? 0n : receipts[to - 1]!.cumulativeGasUsed),
        block_hash: last && b.expectedBlockHash !== null ? b.expectedBlockHash : '0x' + 'fb'.repeat(31) + index.toString(16).padStart(2, '0'),
        transactions: txs.slice(from, to),
        withdrawals: [],
        withdrawals_root: EMPTY_TRIE_ROOT,
      },
      metadata: { block_number: env.number, new_account_balances: {}, receipts: meta },
    };
  });
  const shaped =
    dialect === 'base' ? msgs
    : dialect === 'op-rbuilder' ? asOpRbuilder(msgs)
    : dialect === 'op-subblocks' ? asSubblocks(msgs)
    : asXLayer(msgs, []);
  return shaped.map((m) => JSON.stringify(m));
}

/**
 * The header of the block as executed (src/chain/header-build.ts): the witness's payload attributes and parent, the
 * executed receipts, the recomputed `stateRoot`; pre-Isthmus withdrawals root (the empty trie) unless one is given.
 */
export function headerOf(b: RealBlock, receipts: readonly ExecutedReceipt[], stateRoot: string, withdrawalsRoot: string = EMPTY_TRIE_ROOT): HeaderFields {
  const env = envOf(b);
  return buildHeader({
    ...env,
    parentBeaconBlockRoot: env.parentBeaconBlockRoot ?? ZERO32,
    extraData: b.block.extraData,
    transactions: b.block.transactions,
    receiptsRoot: receiptsRoot(receipts),
    logsBloom: bloomOf(receipts),
    gasUsed: receipts.length === 0 ? 0n : receipts[receipts.length - 1]!.cumulativeGasUsed,
    stateRoot,
    withdrawalsRoot,
  });
}

export { blockHashOf };

/** The block's header rebuilt from execution (its state root recomputed over the witness) and its hash. */
export interface Rebuilt {
  header: HeaderFields;
  hash: string;
  /** The engine's post-state diff the state root was computed from. */
  changes: AddonAccountChange[];
}

/**
 * Rebuilds the header of the block `e` executed (`receipts`): the engine's post-state diff applied to the parent's
 * tries over the witness gives the state root. Call before anything settles the block in `e`. Pre-Isthmus only (every
 * fixture is): an Isthmus header's withdrawals root would be L2ToL1MessagePasser's storage root (PostState has it).
 */
export async function rebuildHeader(e: RevmEngine, b: RealBlock, receipts: readonly ExecutedReceipt[]): Promise<Rebuilt> {
  const n = Number(b.block.number);
  const changes = await e.blockChanges(n);
  if (changes === null) throw new Error(`${b.name}: the engine holds no post-state of block ${n}`);
  const post = await postState(b.parent.stateRoot, b.preimages, changes.accounts);
  const header = headerOf(b, receipts, post.stateRoot);
  return { header, hash: blockHashOf(header), changes: changes.accounts };
}
