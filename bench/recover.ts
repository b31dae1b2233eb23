// Benchmark: sender recovery (native secp256k1 vs @noble/curves), keccak-256 (ours vs @noble/hashes) and
// decodeTransaction of an EIP-1559 tx (vs viem parseTransaction), side by side on real vectors in one run.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { keccak_256 } from '@noble/hashes/sha3.js';
import { parseTransaction, type Hex } from 'viem';
import { decodeTransaction } from '../src/chain/tx.js';
import { recoverSender, secp256k1IsNative, type RecoveryEngine } from '../src/chain/sender.js';
import { keccak256, keccakIsNative } from '../src/chain/keccak.js';
import type { DecodedTx } from '../src/chain/types.js';
import { fmt, percentile, sampleMicros, type BenchOptions, type BenchResult, type BenchRow, runStandalone } from './lib.js';

const VECTORS = fileURLToPath(new URL('../test/fixtures/execution-apis-derived/chain-transactions.json', import.meta.url));

interface ChainTx {
  type: string;
  raw: string;
}

function loadVectors(): ChainTx[] {
  const j = JSON.parse(readFileSync(VECTORS, 'utf8')) as { blocks: { transactions: ChainTx[] }[] };
  return j.blocks.flatMap((b) => b.transactions);
}

function decodeAll(raws: string[]): DecodedTx[] {
  const out: DecodedTx[] = [];
  for (const raw of raws) {
    const r = decodeTransaction(raw);
    if (r.ok) out.push(r.tx);
  }
  return out;
}

/** Median µs per call of a recovery engine, cycling through the signed vectors (cache cleared each time). */
function timeRecovery(txs: DecodedTx[], engine: RecoveryEngine, ms: number): number {
  let i = 0;
  const samples = sampleMicros(() => {
    const tx = txs[i++ % txs.length] as DecodedTx;
    tx.from = null;
    if (recoverSender(tx, engine) === null) throw new Error('recovery failed on a valid vector');
  }, ms);
  return percentile(samples, 50);
}

function row(name: string, value: number, baselineLabel: string, baseline: number, target?: string): BenchRow {
  const ratio = baseline / value;
  const speed = ratio >= 1 ? `${fmt(ratio)}× faster than` : `${fmt(1 / ratio)}× slower than`;
  return {
    name,
    value,
    unit: 'µs',
    baseline: { label: baselineLabel, value: baseline },
    verdict: `${speed} ${baselineLabel}${target === undefined ? '' : ` (${target})`}`,
  };
}

/** Runs the recovery / keccak / decode comparison; `opts.quick` keeps the whole run to a few seconds. */
export async function run(opts: BenchOptions): Promise<BenchResult> {
  const ms = opts.quick ? 300 : 2000;
  const vectors = loadVectors();
  const signed = decodeAll(vectors.map((v) => v.raw));
  const eip1559 = vectors.find((v) => v.type === '0x2');
  if (eip1559 === undefined || signed.length === 0) throw new Error(`no vectors in ${VECTORS}`);

  const nativeRecover = timeRecovery(signed, 'native', ms);
  const nobleRecover = timeRecovery(signed, 'noble', ms);

  const input = Buffer.alloc(200);
  for (let i = 0; i < input.length; i++) input[i] = (i * 31 + 7) & 0xff;
  const nativeKeccak = percentile(sampleMicros(() => keccak256(input), ms), 50);
  const nobleKeccak = percentile(sampleMicros(() => keccak_256(input), ms), 50);

  const raw = eip1559.raw;
  const ours = percentile(sampleMicros(() => {
    if (!decodeTransaction(raw).ok) throw new Error('decode failed');
  }, ms), 50);
  const viem = percentile(sampleMicros(() => parseTransaction(raw as Hex), ms), 50);

  const perFlashblockMs = (200 * nativeRecover) / 1000;
  const rows: BenchRow[] = [
    row('sender recovery (native secp256k1)', nativeRecover, '@noble/curves', nobleRecover,
      `200 recoveries ≈ ${fmt(perFlashblockMs)} ms per 200-tx flashblock`),
    row('keccak-256 of 200 B (src/chain/keccak: WebAssembly pool below 2 KiB, native addon above)', nativeKeccak, '@noble/hashes', nobleKeccak),
    row(`decodeTransaction, EIP-1559 tx of ${(raw.length - 2) / 2} B (incl. hash + signing hash)`, ours,
      'viem parseTransaction', viem, 'viem computes neither hash; the two keccak-256 calls are ~2 × the keccak row'),
  ];
  const notes = [
    `Median µs per call over ${ms} ms each after warm-up; ${signed.length} signed transactions from ` +
      'test/fixtures/execution-apis-derived/chain-transactions.json (all types 0-4), cycled, sender cache cleared per call.',
    `Native bindings loaded: secp256k1 ${secp256k1IsNative}, keccak ${keccakIsNative}.`,
    `Machine: ${os.cpus()[0]?.model ?? 'unknown CPU'} × ${os.cpus().length}, Node ${process.version}.`,
  ].join(' ');
  return { title: 'Sender recovery, keccak-256 and transaction decoding', rows, notes };
}

runStandalone(import.meta.url, run);
