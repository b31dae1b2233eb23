// Ingest decoding (lazy fields) against the full decoder: same verdict, reason, hash and fields on every vector and
// on systematic mutations of real transactions of every type; the WebAssembly keccak against the native one.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { decodeTransaction } from '../../src/chain/tx.js';
import { ingestTransaction, LazyTx } from '../../src/chain/lazy-tx.js';
import { keccak256Hex } from '../../src/chain/keccak.js';
import { transactionTestBytes } from '../helpers/fixtures.js';
import { keccakPool, keccakPoolHex } from '../../src/chain/keccak-wasm.js';
import { recoverSender } from '../../src/chain/sender.js';
import { encodeRlp } from '../../src/chain/rlp.js';
import { decodeRlp, type RlpItem } from '../helpers/rlp-oracle.js';
import type { DecodedTx } from '../../src/chain/types.js';
import { lcg } from '../helpers/rand.js';

const fixtures = fileURLToPath(new URL('../fixtures/', import.meta.url));
const json = (rel: string): any => JSON.parse(readFileSync(fixtures + rel, 'utf8'));

const FIELDS: (keyof DecodedTx)[] = ['type', 'hash', 'raw', 'chainId', 'nonce', 'gasPrice', 'maxPriorityFeePerGas',
  'maxFeePerGas', 'maxFeePerBlobGas', 'gas', 'to', 'value', 'input', 'accessList', 'blobVersionedHashes',
  'authorizationList', 'v', 'r', 's', 'signingHash', 'sourceHash', 'mint', 'isSystemTx', 'from'];

/** '' when both decoders agree on `raw`, else what differs. */
function disagreement(raw: string): string {
  const full = decodeTransaction(raw);
  const lazy = ingestTransaction(raw);
  if (full.ok !== lazy.ok) return `full ${full.ok ? 'accepts' : 'rejects'}, ingest ${lazy.ok ? 'accepts' : 'rejects'}`;
  if (!full.ok || !lazy.ok) return !full.ok && !lazy.ok && full.reason !== lazy.reason ? `reasons differ: ${full.reason} / ${lazy.reason}` : '';
  if (!(lazy.tx instanceof LazyTx)) return 'the ingest walk rejected a valid transaction (slow path taken)';
  for (const k of FIELDS) {
    const a = full.tx[k];
    const b = lazy.tx[k];
    if (JSON.stringify(a, (_k, v) => (typeof v === 'bigint' ? v.toString() : v)) !== JSON.stringify(b, (_k, v) => (typeof v === 'bigint' ? v.toString() : v))) {
      return `${k} differs`;
    }
  }
  return '';
}

const vectors = transactionTestBytes;

function realTransactions(): string[] {
  const chain = json('execution-apis-derived/chain-transactions.json');
  const deposits = json('op-deposit/deposit-vectors.json');
  const frames = json('flashblocks/unichain-sepolia-block-35535698.messages.json');
  return [
    ...chain.blocks.flatMap((b: any) => b.transactions.map((x: any) => x.raw as string)),
    ...deposits.rawTransactions.map((v: any) => v.raw as string),
    ...frames.flatMap((m: any) => m.diff.transactions as string[]),
  ];
}

t.test('every ethereum/tests TransactionTests vector gets the same verdict, reason and fields', async (t) => {
  const all = vectors();
  const failures = all.map((raw) => [raw.slice(0, 20), disagreement(raw)]).filter(([, d]) => d !== '');
  t.same(failures.slice(0, 5), []);
  t.ok(all.length > 200, `${all.length} vectors`);
});

t.test('real transactions of every type decode identically; fields are decoded on first access only', async (t) => {
  const raws = realTransactions();
  const types = new Set<number>();
  for (const raw of raws) {
    t.equal(disagreement(raw), '', raw.slice(0, 12));
    const r = ingestTransaction(raw);
    if (r.ok) types.add(r.tx.type);
  }
  t.ok([0, 1, 2, 3, 4, 0x7e].every((x) => types.has(x)), `types seen: ${[...types].join(',')}`);
  const r = ingestTransaction(raws[0] as string);
  t.ok(r.ok && r.tx instanceof LazyTx);
  t.ok(r.ok && recoverSender(r.tx) === recoverSender((decodeTransaction(raws[0] as string) as { tx: DecodedTx }).tx));
});

t.test('a nonce read first (before any other field) equals the full decoder\'s, from hex text and from bytes', async (t) => {
  let n = 0;
  for (const raw of [...realTransactions(), ...vectors()]) {
    const full = decodeTransaction(raw);
    const lazy = ingestTransaction(raw);
    if (!full.ok || !lazy.ok || !(lazy.tx instanceof LazyTx) || full.tx.type === 0x7e) continue;
    t.equal(lazy.tx.nonce, full.tx.nonce, raw.slice(0, 20));
    const bytes = Buffer.concat([Buffer.from([0xaa, 0xbb]), Buffer.from(raw.slice(2), 'hex'), Buffer.from([0xcc])]);
    const fromBytes = new LazyTx(full.tx.type, full.tx.hash, null, null, bytes, 2, bytes.length - 1);
    t.equal(fromBytes.nonce, full.tx.nonce, `${raw.slice(0, 20)} (bytes)`);
    t.equal(fromBytes.raw, full.tx.raw, 'the same transaction');
    n++;
  }
  t.ok(n > 100, `${n} transactions`);
});

t.test('single-byte changes, truncations and extensions of real transactions: the same verdict and reason', async (t) => {
  const raws = realTransactions();
  const byType = new Map<string, string>();
  for (const raw of raws) if (!byType.has(raw.slice(0, 4))) byType.set(raw.slice(0, 4), raw);
  const rand = lcg(7);
  const failures: string[] = [];
  let accepted = 0;
  let checked = 0;
  for (const raw of byType.values()) {
    const b = Buffer.from(raw.slice(2), 'hex');
    const variants: Buffer[] = [];
    for (let i = 0; i < b.length; i++) {
      for (const v of [0x00, 0x01, 0x7f, 0x80, 0x81, 0xb7, 0xb8, 0xc0, 0xf7, 0xf8, 0xff, (b[i]! + 1) & 255, (b[i]! - 1) & 255, rand(256)]) {
        const m = Buffer.from(b);
        m[i] = v;
        variants.push(m);
      }
      variants.push(b.subarray(0, i));
    }
    variants.push(Buffer.concat([b, Buffer.from([0])]), Buffer.concat([b, Buffer.from([0x80])]));
    for (const v of variants) {
      const hex = '0x' + v.toString('hex');
      const d = disagreement(hex);
      checked++;
      if (d !== '') failures.push(`${hex.slice(0, 16)}…: ${d}`);
      else if (decodeTransaction(hex).ok) accepted++;
    }
  }
  t.same(failures.slice(0, 5), [], `${checked} variants, ${accepted} still valid`);
  t.ok(checked > 10_000);
});

t.test('signature range edges (r = n-1, r = n, s = n/2, s = n/2 + 1) and legacy v edges', async (t) => {
  const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
  const word = (n: bigint): Buffer => (n === 0n ? Buffer.alloc(0) : Buffer.from(n.toString(16).padStart(64, '0').replace(/^(00)+/, ''), 'hex'));
  const chain = json('execution-apis-derived/chain-transactions.json');
  const all: any[] = chain.blocks.flatMap((b: any) => b.transactions);
  const typed = all.find((x) => x.type === '0x2');
  const legacy = all.find((x) => x.type === '0x0');
  const tf = decodeRlp(Buffer.from(typed.raw.slice(4), 'hex')) as RlpItem[];
  const lf = decodeRlp(Buffer.from(legacy.raw.slice(2), 'hex')) as RlpItem[];
  const typedWith = (r: bigint, s: bigint): string => '0x02' + encodeRlp([...tf.slice(0, -2), word(r), word(s)]).toString('hex');
  const legacyWith = (v: bigint): string => '0x' + encodeRlp([...lf.slice(0, 6), word(v), ...lf.slice(7)]).toString('hex');
  const cases = [typedWith(N - 1n, 1n), typedWith(N, 1n), typedWith(1n, N >> 1n), typedWith(1n, (N >> 1n) + 1n), typedWith(0n, 1n),
    typedWith(1n, 0n), typedWith(N + 1n, 1n), ...[0n, 26n, 27n, 28n, 29n, 34n, 35n, 36n, (1n << 48n), (1n << 65n) + 34n, (1n << 65n) + 35n,
      (1n << 65n) + 36n, (1n << 255n)].map(legacyWith)];
  for (const raw of cases) t.equal(disagreement(raw), '', raw.slice(-20));
});

t.test('the WebAssembly keccak equals the native one for every length across block boundaries', async (t) => {
  const bad: number[] = [];
  for (let n = 0; n <= 700; n++) {
    const d = Buffer.alloc(n);
    for (let i = 0; i < n; i++) d[i] = (i * 31 + n * 7) & 255;
    d.copy(keccakPool, 0);
    if (keccakPoolHex(n) !== keccak256Hex(d)) bad.push(n);
  }
  t.same(bad, []);
});

t.test('a transaction larger than the pool is checked and hashed the same way', async (t) => {
  const chain = json('execution-apis-derived/chain-transactions.json');
  const typed = chain.blocks.flatMap((b: any) => b.transactions).find((x: any) => x.type === '0x2');
  const f = decodeRlp(Buffer.from(typed.raw.slice(4), 'hex')) as RlpItem[];
  const big = '0x02' + encodeRlp([...f.slice(0, 7), Buffer.alloc(keccakPool.length + 10, 0xab), ...f.slice(8)]).toString('hex');
  t.equal(disagreement(big), '');
  const r = ingestTransaction(big);
  t.ok(r.ok && r.tx.hash === keccak256Hex(Buffer.from(big.slice(2), 'hex')));
});
