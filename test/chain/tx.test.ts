// Transaction decoding against ethereum/tests TransactionTests, execution-apis chain txs, ethers and OP deposit vectors.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { decodeTransaction, intrinsicGas, validateTransaction } from '../../src/chain/tx.js';
import { recoverSender } from '../../src/chain/sender.js';
import { keccak256Hex } from '../../src/chain/keccak.js';
import { encodeRlp } from '../../src/chain/rlp.js';
import { decodeRlp, type RlpItem } from '../helpers/rlp-oracle.js';
import type { DecodedTx } from '../../src/chain/types.js';
import { lcg } from '../helpers/rand.js';

const fixtures = fileURLToPath(new URL('../fixtures/', import.meta.url));
const json = (rel: string): any => JSON.parse(readFileSync(fixtures + rel, 'utf8'));

const FORKS = ['Frontier', 'Homestead', 'EIP150', 'EIP158', 'Byzantium', 'Constantinople', 'ConstantinopleFix',
  'Istanbul', 'Berlin', 'London', 'Paris', 'Shanghai', 'Cancun', 'Prague', 'Osaka'];

function decodeOk(raw: string, chainId?: bigint): DecodedTx {
  const r = decodeTransaction(raw, { chainId });
  if (!r.ok) throw new Error(`decode failed: ${r.reason}`);
  return r.tx;
}

t.test('ethereum/tests TransactionTests: valid vectors give hash and sender, invalid ones are rejected', async (t) => {
  const root = fixtures + 'ethereum-tests/TransactionTests/';
  const counts = { valid: 0, validPassed: 0, invalid: 0, byDecode: 0, byRules: 0, bySender: 0 };
  const failures: string[] = [];
  for (const folder of readdirSync(root).sort()) {
    for (const file of readdirSync(root + folder).sort()) {
      const suite = JSON.parse(readFileSync(`${root}${folder}/${file}`, 'utf8')) as Record<string, any>;
      for (const [name, vec] of Object.entries(suite)) {
        const fork = Object.keys(vec.result).sort((a, b) => FORKS.indexOf(b) - FORKS.indexOf(a))[0] as string;
        const want = vec.result[fork];
        // The vectors are for chain 1: an EIP-155 v naming another chain is INVALID_CHAINID.
        const r = decodeTransaction(vec.txbytes, { chainId: 1n });
        const rule = r.ok ? validateTransaction(r.tx) : null;
        const sender = r.ok && rule === null ? recoverSender(r.tx) : null;
        if (want.exception === undefined) {
          counts.valid++;
          const ok = r.ok && rule === null && sender === want.sender.toLowerCase() && r.tx.hash === want.hash;
          if (ok) counts.validPassed++;
          else failures.push(`${folder}/${name} (${fork}) valid: ${r.ok ? rule ?? `${sender} ${r.tx.hash}` : r.reason}`);
        } else {
          counts.invalid++;
          if (!r.ok) counts.byDecode++;
          else if (rule !== null) counts.byRules++;
          else if (sender === null) counts.bySender++;
          else failures.push(`${folder}/${name} (${fork}) expected ${want.exception}, accepted with sender ${sender}`);
        }
      }
    }
  }
  t.same(failures, [], 'no vector disagrees with its newest-fork result');
  t.equal(counts.validPassed, counts.valid);
  t.equal(counts.byDecode + counts.byRules + counts.bySender, counts.invalid);
  t.ok(counts.valid >= 50 && counts.invalid >= 160, 'the whole suite was read');
  t.comment(`TransactionTests: valid ${counts.validPassed}/${counts.valid} passed; invalid ${counts.invalid} rejected ` +
    `(decode ${counts.byDecode}, stateless rules ${counts.byRules}, sender recovery ${counts.bySender})`);
});

t.test('execution-apis chain transactions decode with the right type, hash and chain id', async (t) => {
  const chain = json('execution-apis-derived/chain-transactions.json');
  const byType: Record<string, number> = {};
  let passed = 0;
  let total = 0;
  for (const block of chain.blocks) {
    for (const v of block.transactions) {
      total++;
      const r = decodeTransaction(v.raw, { chainId: 0xc72dd9d5e883en });
      const ok = r.ok && r.tx.hash === v.hash && r.tx.type === Number(v.type) && validateTransaction(r.tx) === null &&
        r.tx.raw === v.raw && r.tx.signingHash !== null && r.tx.from === null;
      t.ok(ok, `block ${block.number} tx ${v.index} (${v.type})${r.ok ? '' : ': ' + r.reason}`);
      if (ok) passed++;
      byType[v.type] = (byType[v.type] ?? 0) + 1;
    }
  }
  t.comment(`chain-transactions decode: ${passed}/${total} passed; by type ${JSON.stringify(byType)}`);
});

t.test('ethers vectors: signingHash equals keccak of the unsigned serialisation for every type', async (t) => {
  const cases = JSON.parse(gunzipSync(readFileSync(fixtures + 'ethers-testcases/transactions.json.gz')).toString());
  const kinds = ['Legacy', 'Eip155', 'Berlin', 'London', 'Cancun'];
  const failures: string[] = [];
  let checked = 0;
  for (const c of cases) {
    for (const k of kinds) {
      if (c[`signed${k}`] === '') continue;
      checked++;
      const r = decodeTransaction(c[`signed${k}`]);
      const want = keccak256Hex(Buffer.from(c[`unsigned${k}`].slice(2), 'hex'));
      if (!r.ok || r.tx.signingHash === null || '0x' + r.tx.signingHash.toString('hex') !== want) {
        failures.push(`${c.name} ${k}: ${r.ok ? 'signing hash differs' : r.reason}`);
      }
    }
  }
  t.same(failures.slice(0, 10), [], 'no signing-hash mismatch');
  t.equal(failures.length, 0);
  t.comment(`ethers signing hashes: ${checked - failures.length}/${checked} passed`);
});

t.test('OP deposit raw vectors decode to their listed fields and hash', async (t) => {
  const vectors = json('op-deposit/deposit-vectors.json');
  let passed = 0;
  for (const v of vectors.rawTransactions) {
    const tx = decodeOk(v.raw);
    const d = v.decoded;
    t.same(
      { hash: tx.hash, type: tx.type, sourceHash: tx.sourceHash, from: tx.from, to: tx.to, mint: tx.mint, value: tx.value,
        gas: tx.gas, isSystemTx: tx.isSystemTx, input: tx.input, sig: [tx.v, tx.r, tx.s], signingHash: tx.signingHash },
      { hash: v.hash, type: 0x7e, sourceHash: d.sourceHash, from: d.from, to: d.to, mint: BigInt(d.mint),
        value: BigInt(d.value), gas: BigInt(d.gas), isSystemTx: d.isSystemTx, input: d.input, sig: [0n, 0n, 0n],
        signingHash: null },
      v.name,
    );
    t.equal(validateTransaction(tx), null, `${v.name} passes the stateless rules`);
    t.equal(recoverSender(tx), d.from, `${v.name} sender is known without recovery`);
    passed++;
  }
  for (const v of vectors.rpcTransactions) {
    const tx = decodeOk(v.derivedRaw);
    t.equal(tx.hash, v.rpc.hash, `${v.name} hash`);
    t.equal(tx.mint, BigInt(v.rpc.mint), `${v.name} mint`);
    t.equal(tx.sourceHash, v.rpc.sourceHash, `${v.name} sourceHash`);
    passed++;
  }
  t.comment(`deposit vectors: ${passed}/${vectors.rawTransactions.length + vectors.rpcTransactions.length} passed`);
});

t.test('malformed input is a reason value, never an exception', async (t) => {
  const cases: [string, string][] = [
    ['', 'empty string'],
    ['0x', 'no bytes'],
    ['1234', 'no 0x prefix'],
    ['0x123', 'odd length'],
    ['0xzz00', 'non-hex'],
    ['0x80', 'an RLP string'],
    ['0x05c0', 'unknown type 5'],
    ['0x7fc0', 'unknown type 0x7f'],
    ['0x02', 'type byte without payload'],
    ['0x02c0', 'typed tx with no fields'],
    ['0x7ec0', 'deposit with no fields'],
    ['0xc0', 'legacy with no fields'],
  ];
  for (const [raw, why] of cases) {
    const r = decodeTransaction(raw);
    t.equal(r.ok, false, `${why}: ${r.ok ? '' : r.reason}`);
  }
  t.equal(decodeTransaction(42 as unknown as string).ok, false, 'a non-string');
});

t.test('mutated and truncated real transactions never throw', async (t) => {
  const chain = json('execution-apis-derived/chain-transactions.json');
  const raws: string[] = chain.blocks.flatMap((b: any) => b.transactions.map((x: any) => x.raw as string));
  const rand = lcg(12345);
  let accepted = 0;
  let rejected = 0;
  for (let i = 0; i < 3000; i++) {
    const b = Buffer.from((raws[rand(raws.length)] as string).slice(2), 'hex');
    const m = rand(3);
    let out: Buffer;
    if (m === 0) out = b.subarray(0, rand(b.length));
    else if (m === 1) { out = Buffer.from(b); out[rand(out.length)] = rand(256); }
    else out = Buffer.concat([b, Buffer.from([rand(256)])]);
    const r = decodeTransaction('0x' + out.toString('hex'));
    if (r.ok) accepted++;
    else rejected++;
  }
  t.equal(accepted + rejected, 3000, 'every mutation returned a result');
  t.ok(rejected > 1500, `most mutations are rejected (${rejected})`);
});

t.test('a blob transaction in network form (with sidecar) is rejected with a clear reason', async (t) => {
  const chain = json('execution-apis-derived/chain-transactions.json');
  const blob = chain.blocks.flatMap((b: any) => b.transactions).find((x: any) => x.type === '0x3');
  const payload = decodeRlp(Buffer.from(blob.raw.slice(4), 'hex')) as RlpItem[];
  const network = Buffer.concat([Buffer.from([3]), encodeRlp([payload, [], [], []])]);
  const r = decodeTransaction('0x' + network.toString('hex'));
  t.notOk(r.ok);
  t.match(r.ok ? '' : r.reason, /network form/);
  t.ok(decodeTransaction(blob.raw).ok, 'the block form of the same transaction decodes');
});

t.test('upper-case input is normalised to lower case in raw; the hash is unchanged', async (t) => {
  const chain = json('execution-apis-derived/chain-transactions.json');
  const v = chain.blocks[0].transactions[0];
  const tx = decodeOk('0x' + v.raw.slice(2).toUpperCase());
  t.equal(tx.raw, v.raw);
  t.equal(tx.hash, v.hash);
});

t.test('every decoded transaction has the same own keys in the same order (stable shape)', async (t) => {
  const chain = json('execution-apis-derived/chain-transactions.json');
  const deposits = json('op-deposit/deposit-vectors.json');
  const raws = [...chain.blocks.flatMap((b: any) => b.transactions.map((x: any) => x.raw)), deposits.rawTransactions[0].raw];
  const shapes = new Set(raws.map((raw: string) => Object.keys(decodeOk(raw)).join(',')));
  t.equal(shapes.size, 1);
});

t.test('stateless rules: each broken rule is named', async (t) => {
  const chain = json('execution-apis-derived/chain-transactions.json');
  const all = chain.blocks.flatMap((b: any) => b.transactions);
  const base = (type: string): DecodedTx => decodeOk(all.find((x: any) => x.type === type).raw);
  const cases: [string, (tx: DecodedTx) => void, RegExp][] = [
    ['nonce 2^64-1', (tx) => { tx.nonce = 2n ** 64n - 1n; }, /EIP-2681/],
    ['tip above fee cap', (tx) => { tx.maxPriorityFeePerGas = (tx.maxFeePerGas ?? 0n) + 1n; }, /above maxFeePerGas/],
    ['gas × fee overflow', (tx) => { tx.maxFeePerGas = 2n ** 255n; tx.maxPriorityFeePerGas = 0n; }, /overflows/],
    ['gas below intrinsic', (tx) => { tx.gas = intrinsicGas(tx) - 1n; }, /intrinsic/],
    ['initcode too big', (tx) => { tx.to = null; tx.input = '0x' + '01'.repeat(49153); tx.gas = 10n ** 7n; }, /EIP-3860/],
  ];
  for (const [why, mutate, reason] of cases) {
    const tx = base('0x2');
    t.equal(validateTransaction(tx), null, `${why}: unmodified tx is valid`);
    mutate(tx);
    t.match(validateTransaction(tx) ?? '', reason, why);
  }
  const blob = base('0x3');
  blob.blobVersionedHashes = [];
  t.match(validateTransaction(blob) ?? '', /no blob hashes/);
  const setCode = base('0x4');
  setCode.authorizationList = [];
  t.match(validateTransaction(setCode) ?? '', /empty authorization list/);
  t.equal(intrinsicGas(base('0x0')) >= 21000n, true);
});
