// The OP L1 fee calculator against published vectors: op-reth's receipt tests (real OP Mainnet and Base mainnet
// transactions with the fields their nodes reported), op-geth's FastLZ and cost-function tests, and the real L1-info
// deposits of the Unichain Sepolia and Base Sepolia captures (Isthmus layout). Sources: test/fixtures/SOURCES.md.
import t from 'tap';
import { decodeTransaction } from '../../src/chain/tx.js';
import {
  decodeL1Attributes,
  ecotoneL1Cost,
  fjordL1Cost,
  flzCompressLen,
  l1AttributesOf,
  operatorFee,
  txL1Fee,
  type L1Attributes,
} from '../../src/chain/l1fee.js';
import type { DecodedTx } from '../../src/chain/types.js';
import { baseSepoliaMessages, loadJson, unichainMessages } from '../helpers/fixtures.js';

interface Vectors {
  rethReceipts: { name: string; l1InfoDeposit: string; tx: string; expected: Record<string, string> }[];
  opGethFlzCompressLen: { contractCallTx: string; contractCallTxLen: number };
}
const vectors = loadJson<Vectors>('op-l1fee/vectors.json');

function decoded(raw: string): DecodedTx {
  const d = decodeTransaction(raw);
  if (!d.ok) throw new Error(d.reason);
  return d.tx;
}

function bytes(hex: string): Buffer {
  return Buffer.from(hex.slice(2), 'hex');
}

t.test('op-reth receipt vectors: the fields OP Mainnet and Base nodes reported (Ecotone layout, Fjord rules)', async (t) => {
  for (const v of vectors.rethReceipts) {
    const attrs = l1AttributesOf(decoded(v.l1InfoDeposit));
    t.ok(attrs, `${v.name}: the first transaction is an L1-info deposit`);
    t.equal(attrs!.layout, 'ecotone');
    const f = txL1Fee(bytes(v.tx), attrs!);
    const got: Record<string, string> = {};
    for (const k of Object.keys(v.expected)) got[k] = String(f[k as keyof typeof f]);
    t.same(got, v.expected, v.name);
    t.equal(f.l1FeeScalar, null, 'no pre-Ecotone scalar');
    t.equal(f.operatorFeeScalar, null, 'no operator fee fields before Isthmus');
    t.equal(f.daFootprintGasScalar, null);
    t.equal(f.blobGasUsed, null);
  }
});

t.test('FastLZ length: op-geth TestFlzCompressLen vectors', async (t) => {
  // emptyTx of op-geth's transaction_test.go: unsigned legacy {nonce 0, gasPrice 0, gas 0, to 0x095e…2d87, value 0}.
  const emptyTx = Buffer.from('dd808080940' + '95e7baea6a6c7c4c2dfeb977efac326af552d87' + '8080808080', 'hex');
  const rows: [string, Uint8Array, number][] = [
    ['empty input', new Uint8Array(0), 0],
    ['1000 × 0x01', Buffer.alloc(1000, 1), 21],
    ['1000 zero bytes', Buffer.alloc(1000), 21],
    ['empty legacy tx', emptyTx, 31],
    ['contract call (OP Mainnet 0x8eb9dd4e…)', bytes(vectors.opGethFlzCompressLen.contractCallTx), vectors.opGethFlzCompressLen.contractCallTxLen],
  ];
  for (const [name, input, want] of rows) t.equal(flzCompressLen(input), want, name);
  t.equal(flzCompressLen(Buffer.alloc(12, 7)), 13, 'shorter than 13 bytes: all literals (one control byte)');
  t.equal(flzCompressLen(Buffer.alloc(40, 7)), flzCompressLen(Buffer.alloc(40, 7)), 'the shared hash table is reset between calls');
});

t.test('cost functions: op-geth rollup_cost_test.go vectors', async (t) => {
  // baseFee 1000e6, blobBaseFee 10e6, scalars 2 and 3; emptyTx has 30 non-zero bytes.
  const p = { l1BaseFee: 1_000_000_000n, l1BlobBaseFee: 10_000_000n, baseFeeScalar: 2n, blobBaseFeeScalar: 3n };
  const emptyTx = Buffer.from('dd80808094095e7baea6a6c7c4c2dfeb977efac326af552d878080808080', 'hex');
  t.same(ecotoneL1Cost(emptyTx, p), { l1Fee: 960_900n, l1GasUsed: 480n }, 'Ecotone: calldata gas 480');
  for (const size of [100, 150, 170]) t.same(fjordL1Cost(size, p), { l1Fee: 3_203_000n, l1GasUsed: 1600n }, `Fjord minimum size at FastLZ ${size}`);
  for (const size of [171, 175, 200]) t.ok(fjordL1Cost(size, p).l1Fee > 3_203_000n, `above the minimum at FastLZ ${size}`);
  const solidity = { l1BaseFee: 2_000_000n, l1BlobBaseFee: 3_000_000n, baseFeeScalar: 20n, blobBaseFeeScalar: 15n };
  t.same(fjordL1Cost(235, solidity), { l1Fee: 105_484n, l1GasUsed: 2463n }, 'Fjord Solidity parity vector');
});

t.test('real L1-info deposits of the captures decode as Isthmus attributes', async (t) => {
  const rows: [string, Record<string, unknown>[], Partial<L1Attributes>][] = [
    ['Unichain Sepolia 35535698', unichainMessages(), {
      layout: 'isthmus', baseFeeScalar: 2000n, blobBaseFeeScalar: 900_000n, sequenceNumber: 8n,
      l1BlockTimestamp: 0x690be848n, l1BlockNumber: 0x92042en, l1BaseFee: 9n, l1BlobBaseFee: 1n,
      l1BlockHash: '0x0ffd7e2fb2c36e5f27c015872ce733a7b4f3fc0f4ee668d7469c557c48f8250f',
      batcherHash: '0x0000000000000000000000004ab3387810ef500bfe05a49dc53a44c222cbab3e',
      operatorFeeScalar: 0n, operatorFeeConstant: 0n, daFootprintGasScalar: null,
    }],
    ['Base Sepolia 33439826', baseSepoliaMessages(), {
      layout: 'isthmus', baseFeeScalar: 1101n, blobBaseFeeScalar: 659_851n, sequenceNumber: 4n, l1BaseFee: 10n,
      l1BlobBaseFee: 1n, operatorFeeScalar: 0n, operatorFeeConstant: 0n,
    }],
  ];
  for (const [name, msgs, want] of rows) {
    const first = (msgs[0]!.diff as { transactions: string[] }).transactions[0]!;
    const attrs = l1AttributesOf(decoded(first));
    t.match(attrs, want, name);
  }
  // The user transaction of the Unichain block: Fjord rules, operator fields omitted (both zero, as op-geth/op-reth do).
  const msgs = unichainMessages();
  const txs = (msgs[0]!.diff as { transactions: string[] }).transactions;
  const attrs = l1AttributesOf(decoded(txs[0]!))!;
  const f = txL1Fee(bytes(txs[1]!), attrs);
  const size = flzCompressLen(bytes(txs[1]!));
  t.same(f, { ...fjordL1Cost(size, attrs), l1GasPrice: 9n, l1FeeScalar: null, l1BaseFeeScalar: 2000n, l1BlobBaseFee: 1n, l1BlobBaseFeeScalar: 900_000n, operatorFeeScalar: null, operatorFeeConstant: null, daFootprintGasScalar: null, blobGasUsed: null });
  t.equal(f.l1GasUsed, 1600n, 'a 129-byte transaction is at the 100-byte Fjord minimum');
  t.equal(f.l1Fee, (100_000_000n * (9n * 16n * 2000n + 900_000n)) / 1_000_000_000_000n);
});

/** Isthmus/Jovian calldata with the given operator and DA fields over the Unichain capture's Ecotone part. */
function withLayout(selector: string, extra: string): Buffer {
  const uni = decoded((unichainMessages()[0]!.diff as { transactions: string[] }).transactions[0]!);
  return Buffer.concat([Buffer.from(selector, 'hex'), bytes(uni.input).subarray(4, 164), Buffer.from(extra, 'hex')]);
}

t.test('layouts: exact lengths, operator fee fields only when non-zero, Jovian DA footprint', async (t) => {
  const ecotone = decodeL1Attributes(withLayout('440a5e20', ''))!;
  t.equal(ecotone.layout, 'ecotone');
  t.equal(ecotone.operatorFeeScalar, null);
  t.equal(decodeL1Attributes(withLayout('440a5e20', '00')), null, 'Ecotone selector with 165 bytes');
  t.equal(decodeL1Attributes(withLayout('098999be', '')), null, 'Isthmus selector with the Ecotone length');
  t.equal(decodeL1Attributes(withLayout('015d8eb9', '')), null, 'Bedrock selector: not decoded, no fields');
  t.equal(decodeL1Attributes(Buffer.from('440a5e', 'hex')), null, 'shorter than a selector');

  const tx = Buffer.alloc(300, 0xab);
  const constantOnly = decodeL1Attributes(withLayout('098999be', '00000000' + '0000000000000002'))!;
  t.match(txL1Fee(tx, constantOnly), { operatorFeeScalar: 0n, operatorFeeConstant: 2n }, 'constant alone shows both (op-reth test)');
  const scalarOnly = decodeL1Attributes(withLayout('098999be', '000f4240' + '0000000000000000'))!;
  t.match(txL1Fee(tx, scalarOnly), { operatorFeeScalar: 1_000_000n, operatorFeeConstant: 0n });

  const jovian = decodeL1Attributes(withLayout('3db6be2b', '00000005' + '0000000000000007' + '0190'))!;
  t.match(jovian, { layout: 'jovian', operatorFeeScalar: 5n, operatorFeeConstant: 7n, daFootprintGasScalar: 400n });
  const f = txL1Fee(tx, jovian);
  const sizeScaled = -42_585_600n + 836_500n * BigInt(flzCompressLen(tx));
  t.equal(f.daFootprintGasScalar, 400n);
  t.equal(f.blobGasUsed, 400n * ((sizeScaled < 100_000_000n ? 100_000_000n : sizeScaled) / 1_000_000n), 'blobGasUsed = scalar × estimated DA size');
  t.equal(txL1Fee(tx, ecotone, false).l1GasUsed, 300n * 16n, 'Ecotone rules on request: calldata gas');
  t.equal(txL1Fee(tx, scalarOnly, false).l1GasUsed, fjordL1Cost(flzCompressLen(tx), scalarOnly).l1GasUsed, 'the Isthmus layout implies Fjord');
});

t.test('operator fee: Isthmus and Jovian formulas', async (t) => {
  const isthmus = decodeL1Attributes(withLayout('098999be', '000f4241' + '0000000000000003'))!;
  t.equal(operatorFee(21_000n, isthmus), (21_000n * 1_000_001n) / 1_000_000n + 3n);
  const jovian = decodeL1Attributes(withLayout('3db6be2b', '00000005' + '0000000000000007' + '0190'))!;
  t.equal(operatorFee(21_000n, jovian), 21_000n * 5n * 100n + 7n);
  t.equal(operatorFee(21_000n, decodeL1Attributes(withLayout('440a5e20', ''))!), 0n, 'none before Isthmus');
});

t.test('only an L1-info deposit yields attributes', async (t) => {
  const msgs = unichainMessages();
  const txs = (msgs[0]!.diff as { transactions: string[] }).transactions;
  t.equal(l1AttributesOf(decoded(txs[1]!)), null, 'a user transaction');
  const dep = decoded(txs[0]!);
  t.equal(l1AttributesOf({ ...dep, from: '0x' + '11'.repeat(20) }), null, 'a deposit from another account');
  t.equal(l1AttributesOf({ ...dep, to: '0x4200000000000000000000000000000000000016' }), null, 'a deposit to another contract');
});
