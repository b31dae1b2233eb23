// The native engine (issue 22), suite `engine` of bench/run.ts: (1) execution cost per transaction, warm state, for
// plain transfers, ERC-20 transfers and a swap-like contract next to Base's published 0.035 ms; (2) node reads per
// block with the cache warm next to the old per-block fork; (3) event-loop lag of the RPC thread while 200-tx
// flashblocks execute next to the same replay with execution off; (4, 5) the daemon on the devnet (bench/engine-devnet.ts):
// send → preconfirmed receipt with execution on vs off, and a soak; (6) senders recovered once: the engine given
// ingest's senders vs recovering them itself (bench/engine-senders.ts). Measures; changes nothing in src/.
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { startAnvil, type Anvil } from '../scripts/devnet/anvil.js';
import { BlockFactory, type BuiltBlock } from '../scripts/devnet/exec-blocks.js';
import type { FlashblockWork } from '../src/exec/engine.js';
import { RevmEngine } from '../src/exec/revm.js';
import { COST_KINDS, KindBlockFactory, type CostKind, type KindBlock } from './engine-blocks.js';
import { measureDevnet } from './engine-devnet.js';
import { measureSenders } from './engine-senders.js';
import { fmt, percentile, runStandalone, sleep, type BenchOptions, type BenchResult, type BenchRow } from './lib.js';

const PER_BLOCK = 10;
const FLASHBLOCK_MS = 200;
const ACCOUNTS = 40;
/** Base's published pending-build cost (../shared/research/pending-execution.md): 17.6 ms for a 500-tx pending block. */
const BASE_US_PER_TX = 35;
const BASE_CITE = "Base's published figure, 0.035 ms/tx (17.6 ms for a 500-tx pending build; ../shared/research/pending-execution.md), not run here";
/** The old engine's per-block fork (anvil sidecar, being removed), as measured in issue 22's text. */
const OLD_READS = { block20: 460, block140: 2200 };

/** A fresh native engine reading `node`, started at `canonical` (bench/trace.ts uses it too). */
export async function engineAt(node: Anvil, canonical: number): Promise<RevmEngine> {
  const e = new RevmEngine({ node: { url: node.url }, specAt: () => 'isthmus' });
  await e.start(canonical);
  e.noteCanonical(canonical);
  return e;
}

const progress = (what: string): void => void process.stderr.write(`bench engine: ${what}\n`);
const reads = (e: RevmEngine): number => e.status().nodeReads;

/** What replaying blocks into one engine gave: apply ms per flashblock (warm blocks only), node reads per block. */
interface Replay {
  /** Per warm flashblock: [apply ms, txs]. */
  applies: [number, number][];
  /** Node reads of each block (its first flashblock to the next block's), the cold first one included. */
  readsPerBlock: number[];
  verified: number;
  total: number;
  failed: string[];
}

/**
 * Replays `blocks` into a fresh engine, each flashblock awaited (back to back, or paced every FLASHBLOCK_MS with
 * `paced`); each block's parent is settled by noteCanonical before its index 0, as the daemon does. The first
 * `warmBlocks` blocks warm the cache and are not timed.
 */
async function replay(node: Anvil, blocks: { number: number; flashblocks: FlashblockWork[] }[], warmBlocks: number, paced: boolean): Promise<Replay> {
  const e = await engineAt(node, blocks[0]!.number - 1);
  const out: Replay = { applies: [], readsPerBlock: [], verified: 0, total: 0, failed: [] };
  try {
    let due = performance.now();
    let startReads = reads(e);
    for (let k = 0; k < blocks.length; k++) {
      const b = blocks[k]!;
      if (k > 0) {
        e.noteCanonical(b.number - 1);
        const now = reads(e);
        out.readsPerBlock.push(now - startReads);
        startReads = now;
      }
      for (const fb of b.flashblocks) {
        if (paced) {
          due += FLASHBLOCK_MS;
          await sleep(due - performance.now());
        }
        const r = await e.applyFlashblock(fb);
        out.total++;
        if (!r.ok) {
          out.failed.push(`${fb.blockNumber}/${fb.index}: ${r.reason}: ${r.message}`);
          continue;
        }
        if (r.verified === true) out.verified++;
        if (k >= warmBlocks) out.applies.push([r.applyMs, fb.txs.bounds.length - 1]);
      }
    }
    // The last block's reads: its settle included (a read through the engine waits for nothing, so poll the count).
    e.noteCanonical(blocks.at(-1)!.number);
    await sleep(100);
    out.readsPerBlock.push(reads(e) - startReads);
  } finally {
    await e.stop();
  }
  return out;
}

/** Part 1: per-transaction cost by kind, and the warm reads per block of those replays. */
async function measureCost(o: BenchOptions): Promise<{ rows: BenchRow[]; lines: string[]; warmReads: Map<CostKind, number[]> }> {
  const perFb = o.quick ? 100 : 200;
  const blocksPer = o.quick ? 2 : 4;
  const node = await startAnvil({ accounts: ACCOUNTS, extraArgs: ['--gas-limit', '2000000000'] });
  const rows: BenchRow[] = [];
  const lines: string[] = [];
  const warmReads = new Map<CostKind, number[]>();
  try {
    const f = await KindBlockFactory.open(node, ACCOUNTS);
    const byKind = new Map<CostKind, KindBlock[]>();
    try {
      for (const kind of COST_KINDS) {
        progress(`building ${blocksPer} ${kind} blocks`);
        const bs: KindBlock[] = [];
        for (let k = 0; k < blocksPer; k++) bs.push(await f.buildBlock(kind, PER_BLOCK, perFb));
        byKind.set(kind, bs);
      }
    } finally {
      f.close();
    }
    // One untimed replay first: the JS side (receipts, root check) is JIT-compiled before the first kind is timed.
    await replay(node, byKind.get(COST_KINDS[0]!)!, 1, false);
    for (const kind of COST_KINDS) {
      progress(`replaying ${kind} blocks`);
      const r = await replay(node, byKind.get(kind)!, 1, false);
      const usPerTx = r.applies.map(([ms, n]) => (ms * 1000) / n);
      const p50 = percentile(usPerTx, 50);
      const p99 = percentile(usPerTx, 99);
      warmReads.set(kind, r.readsPerBlock.slice(1));
      const failed = r.failed.length > 0 ? `; ${r.failed.length} not applied (first: ${r.failed[0]})` : '';
      lines.push(`${kind.padEnd(9)} ${perFb} tx/flashblock: apply per tx p50 ${fmt(p50)} µs p99 ${fmt(p99)} µs over ${usPerTx.length} warm flashblocks; ` +
        `flashblock apply p50 ${fmt(percentile(r.applies.map((a) => a[0]), 50))} ms; roots ${r.verified}/${r.total}; node reads per block ${r.readsPerBlock.join(', ')}${failed}`);
      rows.push({
        name: `execution cost per transaction, ${kindLabel(kind)}, warm state (apply time of a ${perFb}-tx flashblock / its txs), p50`,
        value: p50,
        unit: 'µs',
        display: `${fmt(p50)} µs (p99 ${fmt(p99)} µs)`,
        baseline: { label: BASE_CITE, value: BASE_US_PER_TX },
        verdict: `${fmt(p50 / BASE_US_PER_TX)}× Base's; receipts roots verified ${r.verified}/${r.total}${failed}`,
      });
    }
  } finally {
    await node.stop();
  }
  return { rows, lines, warmReads };
}

const signed = (x: number): string => (x >= 0 ? `+${fmt(x)}` : `−${fmt(-x)}`);
const kindLabel = (k: CostKind): string => (k === 'transfer' ? 'plain ETH transfers' : k === 'erc20' ? 'ERC-20 transfers' : 'swap-like contract (4 SLOAD + 4 SSTORE + log)');

/** Event-loop delay (ms) of this thread while `fn` runs: p50, p99, max (bench/trace.ts uses it too). */
export async function loopDelay(fn: () => Promise<unknown>): Promise<{ p50: number; p99: number; max: number }> {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  try {
    await fn();
  } finally {
    h.disable();
  }
  return { p50: h.percentile(50) / 1e6, p99: h.percentile(99) / 1e6, max: h.max / 1e6 };
}

/** Parts 2 and 3: paced replay of mixed 200-tx flashblocks; loop lag with execution on and off; warm node reads. */
async function measureLoop(o: BenchOptions, warmCost: Map<CostKind, number[]>): Promise<{ rows: BenchRow[]; lines: string[] }> {
  const blocksN = o.quick ? 3 : 8;
  const node = await startAnvil({ accounts: ACCOUNTS, extraArgs: ['--gas-limit', '2000000000'] });
  try {
    const f = await BlockFactory.open(node, ACCOUNTS);
    const blocks: BuiltBlock[] = [];
    try {
      await f.setupContracts();
      for (let k = 0; k < blocksN; k++) blocks.push(await f.buildBlock(PER_BLOCK, 200, true));
    } finally {
      f.close();
    }
    progress('paced 200-tx replay, execution off then on');
    // Execution off: the same pacing, nothing applied (the loop's own timer noise on this machine).
    const off = await loopDelay(async () => {
      let due = performance.now();
      for (let i = 0; i < blocks.length * PER_BLOCK; i++) {
        due += FLASHBLOCK_MS;
        await sleep(due - performance.now());
      }
    });
    let r: Replay | null = null;
    const on = await loopDelay(async () => {
      r = await replay(node, blocks, 1, true);
    });
    const run = r as unknown as Replay;
    const warm = run.readsPerBlock.slice(1);
    const warmMean = warm.reduce((a, b) => a + b, 0) / Math.max(1, warm.length);
    const applyP50 = percentile(run.applies.map((a) => a[0]), 50);
    const failed = run.failed.length > 0 ? `; ${run.failed.length} not applied (first: ${run.failed[0]})` : '';
    const perKind = [...warmCost.entries()].map(([k, v]) => `${k} ${v.join('/')}`).join(', ');
    const rows: BenchRow[] = [
      {
        name: 'node reads per block, cache warm (mixed 2,000-tx blocks: deposits, env probe, refund, transfers; 40 senders), native engine',
        value: warmMean,
        unit: 'reads',
        display: `${fmt(warmMean)} reads (blocks after the first: ${warm.join(', ')}; cold first block ${run.readsPerBlock[0]})`,
        baseline: { label: "old per-block anvil fork, from issue 22's text (sidecar being removed, not run here)", value: OLD_READS.block20, display: `≈ ${OLD_READS.block20} at block 20, ≈ ${fmt(OLD_READS.block140)} at block 140 (growing with the chain)` },
        verdict: `${fmt(OLD_READS.block20 / Math.max(1, warmMean))}× fewer than the old fork at block 20; per kind (warm blocks): ${perKind}`,
      },
      {
        name: 'event-loop delay of the RPC thread while 200-tx flashblocks execute (every 200 ms), p99',
        value: on.p99,
        unit: 'ms',
        display: `${fmt(on.p99)} ms (p50 ${fmt(on.p50)} ms)`,
        baseline: { label: 'same pacing, execution off', value: off.p99, display: `${fmt(off.p99)} ms (p50 ${fmt(off.p50)} ms)` },
        verdict: `${signed(on.p99 - off.p99)} ms against off; flashblock apply p50 ${fmt(applyP50)} ms; roots ${run.verified}/${run.total}${failed}`,
      },
      {
        name: 'event-loop delay of the RPC thread while 200-tx flashblocks execute, max',
        value: on.max,
        unit: 'ms',
        baseline: { label: 'same pacing, execution off', value: off.max },
        verdict: `${signed(on.max - off.max)} ms against off (one sample each: noisy)`,
      },
    ];
    const lines = [
      `paced replay, ${blocksN} blocks × ${PER_BLOCK} × 200 tx: loop delay on p50/p99/max ${fmt(on.p50)}/${fmt(on.p99)}/${fmt(on.max)} ms, off ${fmt(off.p50)}/${fmt(off.p99)}/${fmt(off.max)} ms; ` +
        `node reads per block ${run.readsPerBlock.join(', ')}; roots ${run.verified}/${run.total}${failed}`,
    ];
    return { rows, lines };
  } finally {
    await node.stop();
  }
}

/** Runs parts 1–5; `quick` keeps the suite near 5 minutes (2 of them the soak). */
export async function run(o: BenchOptions): Promise<BenchResult> {
  const cost = await measureCost(o);
  const loop = await measureLoop(o, cost.warmReads);
  const dev = await measureDevnet(o);
  const senders = await measureSenders(o);
  const notes =
    `**(1) Cost per transaction.** One anvil node (gas limit 2e9, ${ACCOUNTS} senders); per kind, ${o.quick ? 2 : 4} blocks of ${PER_BLOCK} flashblocks × ${o.quick ? 100 : 200} txs ` +
    `of that kind only (index 0 also carries one L1-info-style system deposit) mined first (the truth), then replayed back to back into a fresh ` +
    `RevmEngine (src/exec/revm.ts), each parent settled by noteCanonical before the next block's index 0 as the daemon does. The first block ` +
    `warms the cache and is not timed (and one whole untimed replay runs before the first kind, for the JIT); cost = ApplyOutcome.applyMs (call → visible state: the env as JSON and the transactions' bytes out, op-revm, ` +
    `the receipts-root check in the engine, the receipts back as text, parsed only when read) / the flashblock's txs, p50 over the warm flashblocks. The ERC-20 is the devnet token (scripts/devnet/traffic.ts: 2 SLOAD, 2 SSTORE, ` +
    `a Transfer log); the swap contract (bench/engine-blocks.ts) reads two reserves, computes a constant-product output, writes both back and ` +
    `one balance slot per side, logs. Base's 0.035 ms/tx is a published figure for its whole pending build on production hardware, cited ` +
    `(../shared/research/pending-execution.md), not measured here.\n\n` +
    `**(2) Node reads per block** = EngineStatus.nodeReads (every JSON-RPC call the engine made to the node) between one ` +
    `block's index 0 and the next's, settles included; the old engine's per-block fork read ≈ ${OLD_READS.block20} at block 20 and ` +
    `≈ ${fmt(OLD_READS.block140)} at block 140 of the devnet (issue 22's text; the sidecar is being removed and is not run here).\n\n` +
    `**(3) Event-loop delay** = perf_hooks.monitorEventLoopDelay (1 ms resolution) of the bench's thread (where the daemon's RPC runs) during ` +
    `a replay of mixed 200-tx flashblocks (BlockFactory: deposits with mint, env probe, refund, SINK payment, transfers) at one per ` +
    `${FLASHBLOCK_MS} ms, next to the same pacing loop with nothing applied.\n\n` +
    '```\n' + [...cost.lines, ...loop.lines].join('\n') + '\n```\n\n' + dev.notes + '\n\n' + senders.notes;
  return { title: 'Native engine: cost per transaction, node reads, event-loop lag, execution on vs off, soak', rows: [...cost.rows, ...loop.rows, ...dev.rows, ...senders.rows], notes };
}

runStandalone(import.meta.url, run);
