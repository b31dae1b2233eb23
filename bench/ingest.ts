// Benchmark: parse + apply of a realistic 200-transaction (~150 KB) flashblock through the real pipeline, side by
// side with bare JSON.parse of the same bytes (the DESIGN §9 budget: ≤ 1.5× at p50, p99 < 5 ms).
import { performance } from 'node:perf_hooks';
import { IngestPipeline } from '../src/ingest/pipeline.js';
import { decodeFrame } from '../src/ingest/frame.js';
import { PendingState } from '../src/state/pending.js';
import { silentLogger } from '../src/log.js';
import { generateFlashblocks } from './flashblock-gen.js';
import { fmt, percentile, sampleMicros, type BenchOptions, type BenchResult } from './lib.js';

/** Runs the ingest benchmark. */
export async function run(opts: BenchOptions): Promise<BenchResult> {
  const gen = await generateFlashblocks({ blockNumber: 1_000_000, flashblocks: 1, txsPerFlashblock: 200, calldataBytes: 100 });
  const msg = gen.messages[0]!;
  // Distinct block numbers so every frame is a real new block (index 0) for the state.
  const frames: Buffer[] = [];
  for (let i = 0; i < 64; i++) {
    const m = structuredClone(msg) as Record<string, any>;
    m.metadata.block_number = 1_000_000 + i;
    m.base.block_number = '0x' + (1_000_000 + i).toString(16);
    m.payload_id = '0x' + (1_000_000 + i).toString(16).padStart(16, '0');
    frames.push(Buffer.from(JSON.stringify(m)));
  }
  const bytes = frames[0]!.length;
  const ms = opts.quick ? 1500 : 6000;

  let k = 0;
  const parseUs = sampleMicros(() => {
    JSON.parse(frames[k++ & 63]!.toString('utf8'));
  }, ms);

  k = 0;
  const decodeUs = sampleMicros(() => {
    const r = decodeFrame(frames[k++ & 63]!, 1 << 26);
    if (!r.ok) throw new Error(r.detail);
  }, ms);

  const state = new PendingState({ maxPendingBlocks: 8 });
  const pipeline = new IngestPipeline(state, { maxFrameBytes: 1 << 26, gapWindowFrames: 16, gapTimeoutMs: 1000 }, silentLogger, null);
  k = 0;
  const applyUs = sampleMicros(() => {
    const i = k++;
    if ((i & 63) === 0 && i > 0) {
      // Wrap around (outside the timed frame's work): drop held blocks so the 64 block numbers can be reused.
      state.settleCanonical(1_000_063, null);
      state.canonical = -1;
    }
    pipeline.handleFrame({ data: frames[i & 63]!, isBinary: false, upstream: 0, receivedAtMs: performance.now() });
  }, ms);

  // Sender recovery happens after apply, in ≤ 2 ms slices: measure the total per flashblock separately.
  const recoverUs: number[] = [];
  for (let i = 0; i < (opts.quick ? 10 : 40); i++) {
    const st = new PendingState({ maxPendingBlocks: 8 });
    const p = new IngestPipeline(st, { maxFrameBytes: 1 << 26, gapWindowFrames: 16, gapTimeoutMs: 1000 }, silentLogger, null);
    p.handleFrame({ data: frames[i & 63]!, isBinary: false, upstream: 0, receivedAtMs: performance.now() });
    const t0 = performance.now();
    st.recoverSenders();
    recoverUs.push((performance.now() - t0) * 1000);
  }

  const p50Parse = percentile(parseUs, 50);
  const p50Apply = percentile(applyUs, 50);
  const p99Apply = percentile(applyUs, 99);
  const ratio = p50Apply / p50Parse;
  return {
    title: 'Ingest: parse + apply of a 200-transaction flashblock',
    rows: [
      { name: `JSON.parse of the frame (${fmt(bytes / 1024)} KiB) — baseline, p50`, value: p50Parse, unit: 'µs' },
      { name: 'decodeFrame (parse + validate + decode 200 txs + hash), p50', value: percentile(decodeUs, 50), unit: 'µs', baseline: { label: 'JSON.parse', value: p50Parse } },
      {
        name: 'parse + apply through the pipeline, p50',
        value: p50Apply,
        unit: 'µs',
        baseline: { label: 'JSON.parse', value: p50Parse },
        verdict: `${ratio.toFixed(2)}× JSON.parse (target ≤ 1.5×)`,
        met: ratio <= 1.5,
      },
      { name: 'parse + apply through the pipeline, p99', value: p99Apply, unit: 'µs', verdict: 'target < 5 ms', met: p99Apply < 5000 },
      { name: 'sender recovery of 200 txs (deferred, in ≤ 2 ms slices), p50', value: percentile(recoverUs, 50), unit: 'µs' },
    ],
    notes: `${frames.length} distinct frames of ${bytes} bytes (200 signed EIP-1559 txs, 100 B calldata, 1 log each, ~250 balances), cycled; ${parseUs.length} / ${applyUs.length} samples.`,
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  run({ quick: process.argv.includes('--quick') }).then((r) => console.log(JSON.stringify(r, null, 2)));
}
