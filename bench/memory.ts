// Memory over 1 M flashblocks (100 k with --quick): small flashblocks (1–2 signed transactions, a receipt with a log,
// balances) fed straight into the real ingest pipeline and pending state as fast as they are taken, 10 flashblocks per
// block (a new payload every 10, so blocks are evicted past --max-pending-blocks 8) and the canonical head settled 3
// blocks behind, with the event loop yielded after every block so deferred sender recovery runs as in the daemon.
// RSS and heapUsed are sampled after a forced GC; growth after warm-up is the least-squares slope, MiB per 100 k
// flashblocks. Baseline, same run: the memory at the end of warm-up.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { IngestPipeline } from '../src/ingest/pipeline.js';
import { PendingState } from '../src/state/pending.js';
import { silentLogger } from '../src/log.js';
import { keccak256 } from '../src/chain/keccak.js';
import { signer, signTx } from './flashblock-gen.js';
import { fmt, writePlot, type BenchOptions, type BenchResult, type BenchRow, runStandalone } from './lib.js';
import { lineChart } from './svg.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const MiB = 2 ** 20;
const FLAT_MIB_PER_100K = 1;

/**
 * Unique signed-looking transactions without signing each: a template EIP-1559 tx whose 4-byte nonce is rewritten.
 * The signature then recovers to some other (random) sender — fine for memory: every tx has a new sender, which is
 * the worst case for the per-sender nonce index.
 */
function txFactory(): (n: number) => { raw: string; hash: string } {
  const t = signTx(signer(424242), 0x01000000, '0x' + 'c0ffee'.padEnd(40, '0'), Buffer.from('a9059cbb' + '00'.repeat(64), 'hex'));
  const at = t.raw.indexOf('8221058401000000');
  if (at < 0) throw new Error('memory bench: nonce not found in the template transaction');
  const head = t.raw.slice(0, at + 8);
  const tail = t.raw.slice(at + 16);
  return (n) => {
    const raw = head + (0x01000000 + n).toString(16).padStart(8, '0') + tail;
    return { raw, hash: '0x' + keccak256(Buffer.from(raw.slice(2), 'hex')).toString('hex') };
  };
}

const pad = (n: number, bytes: number): string => n.toString(16).padStart(bytes * 2, '0');

/** Frame `i` of the stream (block 50,000,000 + i / 10, index i % 10). */
function makeFrame(i: number, tx: (n: number) => { raw: string; hash: string }, txCounter: { n: number; gas: number }): Buffer {
  const block = 50_000_000 + Math.floor(i / 10);
  const index = i % 10;
  if (index === 0) txCounter.gas = 0;
  const count = 1 + (i % 2);
  const txs: string[] = [];
  const receipts: string[] = [];
  const balances: string[] = [];
  for (let t = 0; t < count; t++) {
    const { raw, hash } = tx(txCounter.n++);
    txCounter.gas += 21_000 + (txCounter.n % 1000);
    txs.push(`"${raw}"`);
    receipts.push(`"${hash}":{"Eip1559":{"status":"0x1","cumulativeGasUsed":"0x${txCounter.gas.toString(16)}","logs":[{"address":"0x${pad(txCounter.n, 20)}","topics":["0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"],"data":"0x${pad(txCounter.n, 32)}"}]}}`);
    balances.push(`"0x${pad(0xabc0000000 + txCounter.n, 20)}":"0x${txCounter.n.toString(16)}"`);
  }
  const base = index !== 0 ? '' :
    `"base":{"parent_beacon_block_root":"0x${pad(1, 32)}","parent_hash":"0x${pad(block - 1, 32)}","fee_recipient":"0x4200000000000000000000000000000000000011",` +
    `"prev_randao":"0x${pad(3, 32)}","block_number":"0x${block.toString(16)}","gas_limit":"0x8f0d180","timestamp":"0x${(0x690be89e + 2 * (block - 50_000_000)).toString(16)}",` +
    `"extra_data":"0x00","base_fee_per_gas":"0x33"},`;
  return Buffer.from(
    `{"payload_id":"0x${pad(block, 8)}","index":${index},${base}"diff":{"state_root":"0x${pad(index + 1, 32)}","receipts_root":"0x${pad(index + 2, 32)}",` +
    `"logs_bloom":"0x${'00'.repeat(256)}","gas_used":"0x${txCounter.gas.toString(16)}","block_hash":"0x${pad(block * 100 + index, 32)}",` +
    `"transactions":[${txs.join(',')}],"withdrawals":[],"withdrawals_root":"0x${pad(9, 32)}","blob_gas_used":"0x0"},` +
    `"metadata":{"block_number":${block},"new_account_balances":{${balances.join(',')}},"receipts":{${receipts.join(',')}}}}`,
  );
}

interface Sample {
  frames: number;
  seconds: number;
  rss: number;
  heap: number;
  external: number;
  sizes: Record<string, number>;
}

/** Least-squares slope of y over x. */
function slope(pts: [number, number][]): number {
  const n = pts.length;
  if (n < 2) return NaN;
  const mx = pts.reduce((a, p) => a + p[0], 0) / n;
  const my = pts.reduce((a, p) => a + p[1], 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of pts) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return num / den;
}

export async function run(opts: BenchOptions): Promise<BenchResult> {
  const total = opts.quick ? 100_000 : 1_000_000;
  const warmup = total / 10;
  const every = total / 200;
  const state = new PendingState({ maxPendingBlocks: 8 });
  // Replayed ~5,000x faster than a real stream: the frame pool's grace period (how long a dropped block's layouts stay
  // readable; 2 s in the daemon, ~10 of Base's flashblocks) is scaled to about as many frames, as in bench/ingest.ts.
  const pipeline = new IngestPipeline(state, { maxFrameBytes: 1 << 24, gapWindowFrames: 16, gapTimeoutMs: 1000, layoutGraceMs: 1 }, silentLogger, null);
  let applied = 0;
  pipeline.events.onApplied(() => applied++);
  const tx = txFactory();
  const counter = { n: 0, gas: 0 };
  const priv = state as unknown as Record<string, { size?: number; length?: number }>;
  const privPipe = pipeline as unknown as Record<string, { size?: number }>;
  const sizes = (): Record<string, number> => ({
    blocks: priv.blocks?.size ?? -1,
    heldTxs: state.txCount,
    byFlashblockHash: priv.byFlashblockHash?.size ?? -1,
    unrecovered: pipeline.senders.unrecoveredCount,
    hedgeKeys: privPipe.firstCopy?.size ?? -1,
  });
  const samples: Sample[] = [];
  const t0 = performance.now();
  const sample = (frames: number): void => {
    gc();
    const m = process.memoryUsage();
    samples.push({ frames, seconds: (performance.now() - t0) / 1000, rss: m.rss / MiB, heap: m.heapUsed / MiB, external: m.external / MiB, sizes: sizes() });
  };
  sample(0);
  for (let i = 0; i < total; i++) {
    const data = makeFrame(i, tx, counter);
    pipeline.handleFrame({ data, isBinary: false, upstream: 0, receivedAtMs: performance.now() });
    if (i % 10 === 9) pipeline.settle(50_000_000 + Math.floor(i / 10) - 3, null);
    if (i % 10 === 9) await new Promise<void>((r) => setImmediate(r));
    if ((i + 1) % every === 0) sample(i + 1);
  }
  const seconds = (performance.now() - t0) / 1000;
  if (applied !== total) throw new Error(`memory bench: ${applied} of ${total} flashblocks applied (the stream is invalid?)`);

  const after = samples.filter((s) => s.frames >= warmup);
  const w = after[0]!;
  const end = samples.at(-1)!;
  const per100k = (k: 'rss' | 'heap'): number => slope(after.map((s) => [s.frames / 100_000, s[k]]));
  const heapSlope = per100k('heap');
  const rssSlope = per100k('rss');
  const met = heapSlope <= FLAT_MIB_PER_100K && rssSlope <= FLAT_MIB_PER_100K * 4;
  const grown = Object.keys(end.sizes).filter((k) => (end.sizes[k] ?? 0) > 2 * (w.sizes[k] ?? 0) + 100);
  const rows: BenchRow[] = [
    {
      name: `heapUsed after GC, growth after warm-up (least-squares slope over ${fmt(total - warmup)} flashblocks)`,
      value: heapSlope,
      unit: 'MiB per 100 k flashblocks',
      baseline: { label: `heap at end of warm-up (${fmt(warmup)})`, value: w.heap, display: `${fmt(w.heap)} MiB → ${fmt(end.heap)} MiB at ${fmt(total)}` },
      verdict: `${fmt(end.heap / w.heap)}× the warm-up heap (flat = slope ≤ ${FLAT_MIB_PER_100K} MiB per 100 k for heap, ≤ ${FLAT_MIB_PER_100K * 4} for RSS)`,
      met,
      design: `memory flat over 1 M flashblocks replayed${opts.quick ? ' (quick: 100 k)' : ''}`,
      ...(met ? {} : { bottleneck: grown.length > 0 ? `growing structures: ${grown.map((k) => `${k} ${w.sizes[k]} → ${end.sizes[k]}`).join(', ')}` : `no pending-state index grew (${JSON.stringify(end.sizes)}); the growth is elsewhere (allocator/GC: compare heap and RSS slopes)` }),
    },
    { name: 'RSS, growth after warm-up', value: rssSlope, unit: 'MiB per 100 k flashblocks', baseline: { label: 'RSS at end of warm-up', value: w.rss, display: `${fmt(w.rss)} MiB → ${fmt(end.rss)} MiB` }, verdict: `${fmt(end.rss / w.rss)}× the warm-up RSS` },
    { name: 'ingest rate while replaying (decode + apply + sender recovery + sampling)', value: total / seconds, unit: 'flashblocks/s', verdict: `${fmt(seconds)} s for ${fmt(total)}` },
  ];
  const plots = [
    writePlot('memory-over-time', lineChart({
      title: `Memory over ${fmt(total)} flashblocks (after GC)`, xLabel: 'flashblocks applied (thousands)', yLabel: 'MiB',
      series: [
        { name: 'RSS', points: samples.map((s) => [s.frames / 1000, s.rss]) },
        { name: 'heapUsed', points: samples.map((s) => [s.frames / 1000, s.heap]) },
        { name: 'external', points: samples.map((s) => [s.frames / 1000, s.external]) },
      ],
      vLines: [{ x: warmup / 1000, label: 'end of warm-up' }],
    }), 'RSS, heapUsed and external memory over the replayed flashblocks'),
  ];
  return {
    title: `Memory over ${fmt(total)} flashblocks`,
    rows,
    plots,
    notes:
      `In-process IngestPipeline + PendingState (maxPendingBlocks 8, as the daemon's default), frames built on the fly: ${fmt(total)} flashblocks of 1–2 ` +
      `transactions (every transaction distinct: a template EIP-1559 tx with its nonce rewritten, so each recovers to a new sender), a receipt ` +
      `with a log and a balance each, 10 per block, canonical settled 3 blocks behind; the event loop yielded after every block (10 frames). ${samples.length} samples, ` +
      `each after a forced GC; warm-up ${fmt(warmup)} flashblocks. Index sizes at the end of warm-up → end: ` +
      Object.keys(end.sizes).map((k) => `${k} ${w.sizes[k]} → ${end.sizes[k]}`).join(', ') + '.',
  };
}

runStandalone(import.meta.url, run);
