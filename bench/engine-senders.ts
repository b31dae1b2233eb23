// One sender recovery for ingest and the engine (issue 24 item 1), part of suite `engine` (bench/engine.ts) and
// runnable alone (`npx tsx bench/engine-senders.ts [--quick]`). Side by side in one run, on the same 200-tx flashblocks
// (plain transfers, mined on anvil first: the truth every receipts root is checked against):
//  (a) the engine's apply with the senders given vs recovered in the engine;
//  (b) a frame's arrival → executed when ingest's native recovery runs at arrival (as in the daemon): the engine
//      recovering the senders again at the same time (before) vs waiting for ingest's recovery and taking its senders;
//  (c) the same through ingest and the execution feed (src/ingest/pipeline.ts → src/execution.ts → RevmEngine): frame
//      handed to the pipeline → the feed says executed, with senderRecovery 'engine' vs 'ingest' (the default).
// Modes run interleaved flashblock by flashblock, each on its own engine. Measures; changes nothing in src/.
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import { startAnvil, type Anvil } from '../scripts/devnet/anvil.js';
import { txHexes, type ApplyOutcome, type FlashblockWork } from '../src/exec/engine.js';
import { RevmEngine } from '../src/exec/revm.js';
import { ExecutionFeed } from '../src/execution.js';
import { nativeDecoder, type NativeDecoder } from '../src/ingest/native-frame.js';
import { IngestPipeline } from '../src/ingest/pipeline.js';
import { silentLogger } from '../src/log.js';
import { createMetrics } from '../src/metrics/metrics.js';
import { PendingState } from '../src/state/pending.js';
import { KindBlockFactory, type KindBlock } from './engine-blocks.js';
import { fmt, percentile, runStandalone, sleep, type BenchOptions, type BenchResult, type BenchRow } from './lib.js';

const ACCOUNTS = 40;
const ZERO32 = '0x' + '00'.repeat(32);
const progress = (what: string): void => void process.stderr.write(`bench engine-senders: ${what}\n`);

function engineFor(node: Anvil): RevmEngine {
  return new RevmEngine({ node: { url: node.url }, specAt: () => 'isthmus' });
}

/** A flashblock's signed transactions as the native decoder lays them out: bytes back to back, [index, start, end). */
export function layout(fb: FlashblockWork): { txBytes: Buffer; signed: Uint32Array } {
  const { bytes, bounds } = fb.txs;
  const tri: number[] = [];
  for (let i = 0; i + 1 < bounds.length; i++) if (bytes[bounds[i]!] !== 0x7e) tri.push(i, bounds[i]!, bounds[i + 1]!);
  return { txBytes: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), signed: Uint32Array.from(tri) };
}

/** The senders `recoverSenders` answered as FlashblockWork.senders rows (zeros: a deposit, or not recovered there), into `rows`. */
export function sendersFrom(signed: Uint32Array, out: Buffer, rows: Uint8Array): Uint8Array {
  for (let k = 0; k < signed.length / 3; k++) if (out[21 * k] === 1) rows.set(out.subarray(21 * k, 21 * k + 21), 21 * signed[3 * k]!);
  return rows;
}

interface Samples {
  [mode: string]: number[];
}

/** Parts (a) and (b): four engines over the same blocks, interleaved per flashblock; ms per warm flashblock. */
async function engineModes(node: Anvil, blocks: KindBlock[], native: NativeDecoder): Promise<{ ms: Samples; failed: string[] }> {
  const modes = ['recovered', 'given', 'both', 'wait'] as const;
  const engines = modes.map(() => engineFor(node));
  const ms: Samples = Object.fromEntries(modes.map((m) => [m, []]));
  const failed: string[] = [];
  try {
    for (const e of engines) {
      await e.start(blocks[0]!.number - 1);
      e.noteCanonical(blocks[0]!.number - 1);
    }
    for (let k = 0; k < blocks.length; k++) {
      const b = blocks[k]!;
      if (k > 0) for (const e of engines) e.noteCanonical(b.number - 1);
      for (const fb of b.flashblocks) {
        const { txBytes, signed } = layout(fb);
        const known = sendersFrom(signed, await native.recoverSenders(txBytes, signed), new Uint8Array(21 * (fb.txs.bounds.length - 1)));
        for (let m = 0; m < modes.length; m++) {
          const e = engines[m]!;
          await sleep(5); // idle cores before each sample
          const t0 = performance.now();
          let out: ApplyOutcome;
          switch (modes[m]) {
            case 'recovered':
              out = await e.applyFlashblock(fb);
              break;
            case 'given':
              out = await e.applyFlashblock({ ...fb, senders: known });
              break;
            case 'both': {
              // Before this change: ingest's recovery (started at arrival) and the engine's, on the same cores.
              const ingest = native.recoverSenders(txBytes, signed);
              out = await e.applyFlashblock(fb);
              await ingest;
              break;
            }
            default: {
              // Now: the engine waits for ingest's recovery and takes its senders.
              const senders = new Uint8Array(21 * (fb.txs.bounds.length - 1));
              const recovered = native.recoverSenders(txBytes, signed).then((o) => void sendersFrom(signed, o, senders));
              out = await e.applyFlashblock({ ...fb, senders, sendersRecovered: recovered });
              break;
            }
          }
          const dt = performance.now() - t0;
          if (!out.ok) failed.push(`${modes[m]} ${fb.blockNumber}/${fb.index}: ${out.message}`);
          else if (out.verified !== true) failed.push(`${modes[m]} ${fb.blockNumber}/${fb.index}: root differs`);
          else if (k > 0) ms[modes[m]!]!.push(dt);
        }
      }
    }
  } finally {
    for (const e of engines) await e.stop();
  }
  return { ms, failed };
}

/** The flashblock frame of `fb` (post-Azul shape: no receipts or balances, which execution supplies). */
function frameOf(fb: FlashblockWork): Buffer {
  const e = fb.env;
  const msg: Record<string, unknown> = { payload_id: '0x' + fb.blockNumber.toString(16).padStart(16, '0'), index: fb.index };
  if (fb.index === 0) {
    msg.base = {
      parent_beacon_block_root: ZERO32,
      parent_hash: e.parentHash,
      fee_recipient: e.feeRecipient,
      prev_randao: e.prevRandao,
      block_number: '0x' + fb.blockNumber.toString(16),
      gas_limit: '0x' + e.gasLimit.toString(16),
      timestamp: '0x' + e.timestamp.toString(16),
      extra_data: '0x',
      base_fee_per_gas: '0x' + e.baseFeePerGas.toString(16),
    };
  }
  msg.diff = {
    state_root: ZERO32,
    receipts_root: fb.receiptsRoot,
    logs_bloom: '0x' + '00'.repeat(256),
    gas_used: '0x0',
    block_hash: '0x' + (fb.blockNumber * 100 + fb.index + 1).toString(16).padStart(64, '0'),
    transactions: txHexes(fb.txs),
    withdrawals: [],
    withdrawals_root: ZERO32,
  };
  msg.metadata = { block_number: fb.blockNumber, access_list: [] };
  return Buffer.from(JSON.stringify(msg));
}

/** Part (c): pipeline + execution feed + engine per mode, interleaved per frame; ms from frame to executed. */
async function feedModes(node: Anvil, blocks: KindBlock[]): Promise<{ ms: Samples; failed: string[] }> {
  const modes = ['engine', 'ingest'] as const;
  const metrics = createMetrics({ version: 'bench', commit: 'bench', upstreamCount: 1, streamThreads: 0, flashblockIntervalMs: 200 });
  const first = blocks[0]!.number;
  const rigs = modes.map((mode) => {
    const state = new PendingState({ maxPendingBlocks: 8 });
    const pipeline = new IngestPipeline(state, { maxFrameBytes: 1 << 24, gapWindowFrames: 16, gapTimeoutMs: 1000 }, silentLogger, null);
    const feed = new ExecutionFeed(
      { engine: engineFor(node), view: state, events: pipeline.events, senders: pipeline.senders, metrics, log: silentLogger, canonicalHead: async () => first - 1 },
      { waitMs: 1000, senderRecovery: mode },
    );
    let executed: (() => void) | null = null;
    feed.onExecuted(() => executed?.());
    return { mode, pipeline, feed, wait: () => new Promise<void>((r) => (executed = r)) };
  });
  const ms: Samples = Object.fromEntries(modes.map((m) => [m, []]));
  const failed: string[] = [];
  try {
    for (const r of rigs) {
      r.pipeline.settle(first - 1, null);
      r.feed.start();
    }
    while (rigs.some((r) => r.feed.state !== 'up')) await sleep(10);
    let clock = 0;
    for (let k = 0; k < blocks.length; k++) {
      const b = blocks[k]!;
      for (const fb of b.flashblocks) {
        const data = frameOf(fb);
        for (const r of rigs) {
          if (fb.index === 0 && k > 0) r.pipeline.settle(b.number - 1, null);
          await sleep(5);
          const done = r.wait();
          const t0 = performance.now();
          r.pipeline.handleFrame({ data, isBinary: false, upstream: 0, receivedAtMs: ++clock });
          const ok = await Promise.race([done.then(() => true), sleep(5000).then(() => false)]);
          const dt = performance.now() - t0;
          await r.pipeline.senders.drained();
          if (!ok) failed.push(`${r.mode} ${fb.blockNumber}/${fb.index}: not executed within 5 s (${r.feed.health().detail})`);
          else if (k > 0) ms[r.mode]!.push(dt);
        }
      }
    }
  } finally {
    for (const r of rigs) await r.feed.stop();
  }
  return { ms, failed };
}

const triple = (xs: number[]): string => `${fmt(percentile(xs, 50))} / ${fmt(percentile(xs, 99))} ms (n=${xs.length})`;

/** Parts (a)–(c) as rows and a note. */
export async function measureSenders(o: BenchOptions): Promise<{ rows: BenchRow[]; notes: string }> {
  const native = nativeDecoder();
  if (native === null) throw new Error('the native core is not built: npm ci (or node scripts/build-native.mjs)');
  const perFb = 200;
  const count = o.quick ? 3 : 6;
  const fbs = 5;
  const node = await startAnvil({ accounts: ACCOUNTS, extraArgs: ['--gas-limit', '2000000000'] });
  try {
    const f = await KindBlockFactory.open(node, ACCOUNTS);
    const blocks: KindBlock[] = [];
    try {
      progress(`building ${count} blocks of ${fbs} × ${perFb} transfers`);
      for (let k = 0; k < count; k++) blocks.push(await f.buildBlock('transfer', fbs, perFb));
    } finally {
      f.close();
    }
    progress('engine: senders given vs recovered; wait for ingest vs recover again');
    const a = await engineModes(node, blocks, native);
    progress('pipeline + execution feed: senderRecovery engine vs ingest');
    const c = await feedModes(node, blocks);
    const p50 = (s: Samples, m: string): number => percentile(s[m]!, 50);
    const rows: BenchRow[] = [
      {
        name: `engine apply of a ${perFb}-tx flashblock, senders given (recovered at ingest), p50`,
        value: p50(a.ms, 'given'),
        unit: 'ms',
        baseline: { label: 'senders recovered in the engine', value: p50(a.ms, 'recovered') },
        verdict: `${fmt(p50(a.ms, 'recovered') / p50(a.ms, 'given'))}× faster than recovering in the engine`,
      },
      {
        name: `arrival → executed, ${perFb}-tx flashblock, engine waits for ingest's recovery and takes its senders, p50`,
        value: p50(a.ms, 'wait'),
        unit: 'ms',
        baseline: { label: 'engine recovers again while ingest recovers', value: p50(a.ms, 'both') },
        verdict: `${fmt(p50(a.ms, 'both') / p50(a.ms, 'wait'))}× (p99 ${fmt(percentile(a.ms.wait!, 99))} vs ${fmt(percentile(a.ms.both!, 99))} ms)`,
      },
      {
        name: `frame → executed through ingest and the execution feed, ${perFb}-tx flashblock, senderRecovery 'ingest', p50`,
        value: p50(c.ms, 'ingest'),
        unit: 'ms',
        baseline: { label: "senderRecovery 'engine' (recovered twice)", value: p50(c.ms, 'engine') },
        verdict: `${fmt(p50(c.ms, 'engine') / p50(c.ms, 'ingest'))}× (p99 ${fmt(percentile(c.ms.ingest!, 99))} vs ${fmt(percentile(c.ms.engine!, 99))} ms)`,
      },
    ];
    const failed = [...a.failed, ...c.failed];
    const notes =
      `**Senders recovered once (issue 24 item 1).** ${count} blocks × ${fbs} flashblocks × ${perFb} plain transfers (40 senders) mined on anvil ` +
      `first (each flashblock's receipts root is the truth), the first block untimed. (a) RevmEngine.applyFlashblock with FlashblockWork.senders ` +
      `(what native recoverSenders answered) vs without; (b) with ingest's native recovery (recoverSenders, the call the pipeline makes at ` +
      `arrival) started at t0: the engine applying at once and recovering the senders itself ("both", as before) vs awaiting that recovery ` +
      `(sendersRecovered) and taking its senders ("wait", now); (c) IngestPipeline (native decoder) → ExecutionFeed → RevmEngine, frame handed ` +
      `to handleFrame → the feed's onExecuted, senderRecovery 'engine' vs 'ingest'. Four (two) engines interleaved flashblock by flashblock, ` +
      `5 ms idle before each sample, on ${availableParallelism()} shared cores.\n\n` +
      '```\n' +
      `(a) engine apply:      senders given ${triple(a.ms.given!)}; recovered in the engine ${triple(a.ms.recovered!)}  (p50 / p99)\n` +
      `(b) arrival→executed:  wait for ingest ${triple(a.ms.wait!)}; recover again beside ingest ${triple(a.ms.both!)}\n` +
      `(c) through the feed:  'ingest' ${triple(c.ms.ingest!)}; 'engine' ${triple(c.ms.engine!)}\n` +
      (failed.length > 0 ? `not verified/executed: ${failed.length} (first: ${failed[0]})\n` : 'every flashblock executed and its receipts root verified in every mode\n') +
      '```\n';
    return { rows, notes };
  } finally {
    await node.stop();
  }
}

runStandalone(import.meta.url, async (o): Promise<BenchResult> => {
  const r = await measureSenders(o);
  return { title: 'Senders recovered once: engine apply and arrival → executed', rows: r.rows, notes: r.notes };
});
