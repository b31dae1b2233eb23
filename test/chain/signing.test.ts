// The recovery input cut from raw bytes (src/chain/signing.ts) equals the one a full decode gives — signing hash,
// r‖s and recovery id — for every ethers vector of every type and every execution-apis chain transaction; and bytes
// it cannot handle give null, never a wrong answer.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { signingInputOf } from '../../src/chain/signing.js';
import { decodeTransaction } from '../../src/chain/tx.js';
import { TX_LEGACY } from '../../src/chain/types.js';

const fixtures = fileURLToPath(new URL('../fixtures/', import.meta.url));

const word = (n: bigint): string => n.toString(16).padStart(64, '0');

/** The same three values through the full decoder. */
function viaDecode(raw: string): { hash: string; sig: string; recid: number } | null {
  const r = decodeTransaction(raw);
  if (!r.ok || r.tx.signingHash === null) return null;
  const tx = r.tx;
  const recid = tx.type !== TX_LEGACY ? Number(tx.v) : tx.v === 27n || tx.v === 28n ? Number(tx.v - 27n) : Number((tx.v - 35n) & 1n);
  return { hash: r.tx.signingHash.toString('hex'), sig: word(tx.r) + word(tx.s), recid };
}

function fromBytes(raw: string): { hash: string; sig: string; recid: number } | null {
  const x = signingInputOf(raw);
  return x === null ? null : { hash: x.hash.toString('hex'), sig: x.sig.toString('hex'), recid: x.recid };
}

t.test('ethers vectors and the execution-apis chain: identical to the full decode', async (t) => {
  const cases = JSON.parse(gunzipSync(readFileSync(fixtures + 'ethers-testcases/transactions.json.gz')).toString()) as Record<string, string>[];
  const raws: string[] = [];
  for (const c of cases) for (const k of ['Legacy', 'Eip155', 'Berlin', 'London', 'Cancun']) if (c[`signed${k}`]) raws.push(c[`signed${k}`]!);
  const chain = JSON.parse(readFileSync(fixtures + 'execution-apis-derived/chain-transactions.json', 'utf8')) as { blocks: { transactions: { raw: string }[] }[] };
  raws.push(...chain.blocks.flatMap((b) => b.transactions.map((x) => x.raw)));
  const diffs: string[] = [];
  let compared = 0;
  for (const raw of raws) {
    const want = viaDecode(raw);
    if (want === null) continue;
    compared++;
    const got = fromBytes(raw);
    if (JSON.stringify(got) !== JSON.stringify(want)) diffs.push(`${raw.slice(0, 12)}…: ${JSON.stringify(got)} vs ${JSON.stringify(want)}`);
  }
  t.ok(compared > 12_000, `${compared} transactions compared`);
  t.same(diffs.slice(0, 5), [], 'no difference');
});

t.test('what it does not handle gives null', async (t) => {
  t.equal(signingInputOf('0x7e' + 'c0'), null, 'deposit');
  t.equal(signingInputOf('0x05c0'), null, 'unknown type');
  t.equal(signingInputOf('0x02c3010203'), null, 'too few items');
  // A London tx with r = 0: out of range, left to the decoder's verdict.
  const cases = JSON.parse(gunzipSync(readFileSync(fixtures + 'ethers-testcases/transactions.json.gz')).toString()) as Record<string, string>[];
  const raw = cases.find((c) => c.signedLondon)!.signedLondon!;
  const x = decodeTransaction(raw);
  if (!x.ok) throw new Error('vector does not decode');
  const rHex = x.tx.r.toString(16).padStart(64, '0');
  const broken = raw.replace(`a0${rHex}`, `a0${'00'.repeat(32)}`);
  t.not(broken, raw, 'r was replaced');
  t.equal(signingInputOf(broken), null, 'r = 0');
});
