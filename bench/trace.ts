// Traces at pending (issue 41), suite `trace` of bench/run.ts: (1) callTracer of a pending swap-like transaction
// (the engine executes its flashblock again up to it), p50 / p99, next to applying that whole flashblock; (2) the
// struct logger of a 200-tx pending block (debug_traceBlockByNumber's engine call); (3) the event-loop delay of the
// RPC thread while traces run beside paced 200-tx flashblocks, next to the same replay without traces. Measures the
// engine as the daemon calls it (RevmEngine.trace: JSON over the addon, the engine's read threads); changes nothing.
import { performance } from 'node:perf_hooks';
import { keccak256, type Hex } from 'viem';
import { startAnvil } from '../scripts/devnet/anvil.js';
import { txHex, type FlashblockWork, type TraceRequest } from '../src/exec/engine.js';
import type { RevmEngine } from '../src/exec/revm.js';
import { KindBlockFactory, type KindBlock } from './engine-blocks.js';
import { engineAt, loopDelay } from './engine.js';
import { fmt, percentile, runStandalone, sleep, type BenchOptions, type BenchResult, type BenchRow } from './lib.js';

const ACCOUNTS = 40;
const PER_BLOCK = 10;
const FLASHBLOCK_MS = 200;
const MAX_BYTES = 100 * 1024 * 1024;
const progress = (what: string): void => void process.stderr.write(`bench trace: ${what}\n`);

const hashOf = (raw: string): Hex => keccak256(raw as Hex);

async function apply(e: RevmEngine, fb: FlashblockWork): Promise<number> {
  const t0 = performance.now();
  const r = await e.applyFlashblock(fb);
  if (!r.ok) throw new Error(`${fb.blockNumber}/${fb.index} not applied: ${r.reason}: ${r.message}`);
  return performance.now() - t0;
}

async function trace(e: RevmEngine, req: Omit<TraceRequest, 'timeoutMs' | 'maxBytes'>): Promise<{ ms: number; bytes: number }> {
  const t0 = performance.now();
  const out = await e.trace({ timeoutMs: 60_000, maxBytes: MAX_BYTES, ...req } as TraceRequest);
  const ms = performance.now() - t0;
  return { ms, bytes: JSON.stringify(out).length };
}

export async function run(o: BenchOptions): Promise<BenchResult> {
  const perFb = 200;
  const blocksN = o.quick ? 4 : 6;
  const node = await startAnvil({ accounts: ACCOUNTS, extraArgs: ['--gas-limit', '2000000000'] });
  const rows: BenchRow[] = [];
  const lines: string[] = [];
  try {
    const f = await KindBlockFactory.open(node, ACCOUNTS);
    const blocks: KindBlock[] = [];
    try {
      progress(`building ${blocksN} swap blocks of ${PER_BLOCK} × ${perFb} txs`);
      for (let k = 0; k < blocksN; k++) blocks.push(await f.buildBlock('swap', PER_BLOCK, perFb));
    } finally {
      f.close();
    }

    // (1) and (2): block 0 warms the engine's cache (untimed), block 1 is traced flashblock by flashblock.
    const e = await engineAt(node, blocks[0]!.number - 1);
    try {
      for (const fb of blocks[0]!.flashblocks) await apply(e, fb);
      e.noteCanonical(blocks[0]!.number);
      const b = blocks[1]!;
      const applyMs: number[] = [];
      const callMs: number[] = [];
      const structMs: number[] = [];
      let structBytes = 0;
      const samples = o.quick ? 10 : 25;
      for (const fb of b.flashblocks) {
        applyMs.push(await apply(e, fb));
        const at = { number: fb.blockNumber, index: fb.index };
        if (fb.index === 0) {
          // (2) the block so far is flashblock 0: 200 transactions (the L1-info deposit among them).
          progress('struct logger of the 200-tx pending block');
          for (let k = 0; k < (o.quick ? 2 : 4); k++) {
            const r = await trace(e, { method: 'traceBlock', at, options: {} });
            structMs.push(r.ms);
            structBytes = r.bytes;
          }
        }
        // (1) callTracer of swap transactions spread over the flashblock (position 1 … 199: each replays those before it).
        for (let k = 0; k < samples / PER_BLOCK + 2; k++) {
          const i = 1 + Math.floor(Math.random() * (fb.txs.bounds.length - 2));
          callMs.push((await trace(e, { method: 'traceTransaction', hash: hashOf(txHex(fb.txs, i)), at, options: { tracer: 'callTracer' } })).ms);
        }
      }
      e.noteCanonical(b.number);
      const applyP50 = percentile(applyMs, 50);
      rows.push({
        name: 'callTracer of a pending swap-like transaction (its 200-tx flashblock executed again up to it), p50',
        value: percentile(callMs, 50),
        unit: 'ms',
        display: `${fmt(percentile(callMs, 50))} ms (p99 ${fmt(percentile(callMs, 99))} ms, n=${callMs.length})`,
        baseline: { label: 'applying the whole 200-tx flashblock (same engine, same run), p50', value: applyP50 },
        verdict: `${fmt(percentile(callMs, 50) / applyP50)}× one flashblock's apply (the trace replays on average half of it)`,
      });
      rows.push({
        name: 'struct logger (default tracer) of a 200-tx pending block (debug_traceBlockByNumber), p50',
        value: percentile(structMs, 50),
        unit: 'ms',
        display: `${fmt(percentile(structMs, 50))} ms (max ${fmt(Math.max(...structMs))} ms, n=${structMs.length}; answer ${fmt(structBytes / 1024 / 1024)} MiB)`,
        baseline: { label: 'applying one 200-tx flashblock, p50', value: applyP50 },
        verdict: `${fmt(percentile(structMs, 50) / applyP50)}× the apply`,
      });
      lines.push(`apply of a 200-tx swap flashblock p50 ${fmt(applyP50)} ms; callTracer p50/p99 ${fmt(percentile(callMs, 50))}/${fmt(percentile(callMs, 99))} ms (n=${callMs.length}); struct logger of the 200-tx block ${structMs.map(fmt).join(', ')} ms, ${fmt(structBytes / 1024 / 1024)} MiB`);

      // (3) paced replay of the remaining blocks: half without traces, half with callTracer traces running beside it.
      const rest = blocks.slice(2);
      const half = Math.max(1, Math.floor(rest.length / 2));
      const paced = async (bs: KindBlock[], withTraces: boolean): Promise<{ p50: number; p99: number; max: number; traces: number }> => {
        let traces = 0;
        let stop = false;
        let newest: FlashblockWork | null = null;
        const tracer = async (): Promise<void> => {
          while (!stop) {
            const fb = newest;
            if (fb === null) {
              await sleep(5);
              continue;
            }
            const i = 1 + Math.floor(Math.random() * (fb.txs.bounds.length - 2));
            try {
              await trace(e, { method: 'traceTransaction', hash: hashOf(txHex(fb.txs, i)), at: { number: fb.blockNumber, index: fb.index }, options: { tracer: 'callTracer' } });
              traces++;
            } catch {
              // the flashblock left the engine's window meanwhile: take the next one
            }
          }
        };
        const d = await loopDelay(async () => {
          const workers = withTraces ? [tracer(), tracer()] : [];
          let due = performance.now();
          for (const blk of bs) {
            for (const fb of blk.flashblocks) {
              due += FLASHBLOCK_MS;
              await sleep(due - performance.now());
              await apply(e, fb);
              newest = fb;
            }
            e.noteCanonical(blk.number);
          }
          stop = true;
          await Promise.all(workers);
        });
        return { ...d, traces };
      };
      progress('paced 200-tx replay without traces, then with traces beside it');
      const off = await paced(rest.slice(0, half), false);
      const on = await paced(rest.slice(half), true);
      rows.push({
        name: 'event-loop delay of the RPC thread while 200-tx flashblocks execute every 200 ms and callTracer traces run beside them (2 at a time), p99',
        value: on.p99,
        unit: 'ms',
        display: `${fmt(on.p99)} ms (p50 ${fmt(on.p50)}, max ${fmt(on.max)} ms; ${on.traces} traces)`,
        baseline: { label: 'the same paced replay without traces', value: off.p99, display: `${fmt(off.p99)} ms (p50 ${fmt(off.p50)}, max ${fmt(off.max)} ms)` },
        verdict: `${on.p99 - off.p99 >= 0 ? '+' : '−'}${fmt(Math.abs(on.p99 - off.p99))} ms against no traces (target: unchanged within noise)`,
      });
      lines.push(`paced replay: without traces loop delay p50/p99/max ${fmt(off.p50)}/${fmt(off.p99)}/${fmt(off.max)} ms; with ${on.traces} traces beside it ${fmt(on.p50)}/${fmt(on.p99)}/${fmt(on.max)} ms`);
    } finally {
      await e.stop();
    }
  } finally {
    await node.stop();
  }
  return {
    title: 'Traces at pending: callTracer, struct logger, event-loop delay beside execution',
    rows,
    notes:
      `One anvil node (gas limit 2e9, ${ACCOUNTS} senders); ${blocksN} blocks of ${PER_BLOCK} flashblocks × ${perFb} swap-like transactions (bench/engine-blocks.ts: 4 SLOAD, 4 SSTORE, a log; index 0 starts with the devnet's L1-info deposit) mined first, then applied into a fresh RevmEngine (src/exec/revm.ts) with each parent settled as the daemon does. Block 0 warms the cache, untimed. ` +
      'Traces go through RevmEngine.trace, as src/rpc/methods/trace.ts calls it (the JSON-RPC hop itself is not in them): a transaction trace executes its flashblock again from the state before it, the transactions before it untraced (native/src/trace.rs), so its time grows with its position. ' +
      'The event-loop delay is perf_hooks.monitorEventLoopDelay of this thread (where the daemon serves RPC) during a paced replay (one flashblock every 200 ms), the first half of the remaining blocks without traces, the second half with two trace loops running beside the applies.\n\n```\n' +
      lines.join('\n') +
      '\n```',
  };
}

runStandalone(import.meta.url, run);
