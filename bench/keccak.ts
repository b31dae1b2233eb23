// Benchmark: keccak-256 of transaction-sized inputs (100 B, 200 B, 1 KiB, 2 KiB), the hand-written WebAssembly keccak
// (src/chain/keccak-wasm.ts, what src/chain/keccak.ts uses up to 2 KiB) side by side with hash-wasm's keccak in the
// same run, both as 32 bytes and as 0x-hex (the ingest path hashes to hex). Same inputs, same loop, interleaved.
import { createKeccak } from 'hash-wasm';
import { keccakPool, keccakPoolDigest, keccakPoolHex } from '../src/chain/keccak-wasm.js';
import { fmt, percentile, sampleMicros, type BenchOptions, type BenchResult, type BenchRow, runStandalone } from './lib.js';

/** Nanoseconds per call: the loop runs `batch` hashes per sample so the timer's own cost stays out of the number. */
function nsPerCall(fn: () => void, ms: number, batch: number): number {
  const us = sampleMicros(() => {
    for (let i = 0; i < batch; i++) fn();
  }, ms);
  return (percentile(us, 50) * 1000) / batch;
}

/** Runs the keccak benchmark. */
export async function run(opts: BenchOptions): Promise<BenchResult> {
  const hasher = await createKeccak(256);
  const ms = opts.quick ? 300 : 1500;
  const rounds = opts.quick ? 2 : 4;
  const rows: BenchRow[] = [];
  /** Keeps the hex results observable (no dead-code elimination of the string building). */
  let sink = '';
  const wins: string[] = [];
  for (const size of [100, 200, 1024, 2048]) {
    const data = Buffer.alloc(size);
    for (let i = 0; i < size; i++) data[i] = (i * 131 + 7) & 0xff;
    // Same digest from both, or the comparison means nothing.
    keccakPool.set(data);
    const ours = keccakPoolDigest(size).toString('hex');
    hasher.init();
    hasher.update(data);
    if (hasher.digest('hex') !== ours) throw new Error(`keccak mismatch at ${size} B`);

    const handBytes = (): void => {
      keccakPool.set(data);
      keccakPoolDigest(size);
    };
    const handHex = (): void => {
      keccakPool.set(data);
      keccakPoolHex(size);
    };
    const libBytes = (): void => {
      hasher.init();
      hasher.update(data);
      hasher.digest('binary');
    };
    const libHex = (): void => {
      hasher.init();
      hasher.update(data);
      sink = '0x' + hasher.digest('hex');
    };
    const batch = 64;
    const acc = { handBytes: [] as number[], handHex: [] as number[], libBytes: [] as number[], libHex: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      acc.handBytes.push(nsPerCall(handBytes, ms, batch));
      acc.libBytes.push(nsPerCall(libBytes, ms, batch));
      acc.handHex.push(nsPerCall(handHex, ms, batch));
      acc.libHex.push(nsPerCall(libHex, ms, batch));
    }
    const med = (xs: number[]): number => percentile(xs, 50);
    const hb = med(acc.handBytes);
    const lb = med(acc.libBytes);
    const hh = med(acc.handHex);
    const lh = med(acc.libHex);
    rows.push({ name: `keccak-256 of ${size} B → 32 bytes, hand-written WebAssembly`, value: hb / 1000, unit: 'µs', baseline: { label: 'hash-wasm', value: lb / 1000 }, verdict: `${fmt(lb / hb)}× faster than hash-wasm` });
    rows.push({ name: `keccak-256 of ${size} B → 0x-hex, hand-written WebAssembly`, value: hh / 1000, unit: 'µs', baseline: { label: 'hash-wasm', value: lh / 1000 }, verdict: `${fmt(lh / hh)}× faster than hash-wasm` });
    wins.push(`${size} B ${fmt(lb / hb)}× / ${fmt(lh / hh)}×`);
  }
  if (sink.length !== 66) throw new Error('hash-wasm hex digest has the wrong length');
  return {
    title: 'keccak-256: hand-written WebAssembly vs hash-wasm',
    rows,
    notes:
      `Median over ${rounds} interleaved rounds of the p50 of ${ms} ms sampling, 64 hashes per sample; input copied into the pool ` +
      `for the hand-written one (as src/chain/keccak.ts does), hasher.init/update/digest reused for hash-wasm (its fastest ` +
      `synchronous form). Hand-written speed-up (bytes / hex): ${wins.join('; ')}.`,
  };
}

runStandalone(import.meta.url, run);
