// RLP against ethereum/tests RLPTests: the encoder, the one reader (src/chain/rlp.ts readRlpItem, walked over whole
// inputs here) and the full decoder kept as a test oracle (test/helpers/rlp-oracle.ts) agree on every vector.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { encodeRlp, readRlpItem, RLP_OK, rlpItem, rlpProblem, type RlpInput } from '../../src/chain/rlp.js';
import { decodeRlp, RlpError, tryDecodeRlp, type RlpItem } from '../helpers/rlp-oracle.js';
import { bigIntToBytes } from '../../src/chain/hex.js';

const dir = fileURLToPath(new URL('../fixtures/ethereum-tests/RLPTests/', import.meta.url));
const load = (name: string): Record<string, { in: unknown; out: string }> => JSON.parse(readFileSync(dir + name, 'utf8'));
const bytes = (hex: string): Buffer => Buffer.from(hex.replace(/^0x/, ''), 'hex');

/** RLPTests "in" values: strings are bytes, numbers and "#decimal" strings are big-endian integers. */
function toInput(v: unknown): RlpInput {
  if (Array.isArray(v)) return v.map(toInput);
  if (typeof v === 'number') return bigIntToBytes(BigInt(v));
  if (typeof v === 'string' && v.startsWith('#')) return bigIntToBytes(BigInt(v.slice(1)));
  return Buffer.from(v as string, 'latin1');
}

function toPlain(item: RlpItem): unknown {
  return Array.isArray(item) ? item.map(toPlain) : item.toString('hex');
}

/** Walks all of `b` with the reader (lists recursively); null when every item is well-formed, else the problem. */
function walk(b: Buffer): string | null {
  const items = (pos: number, end: number): string | null => {
    while (pos < end) {
      const code = readRlpItem(b, pos, end);
      if (code !== RLP_OK) return `${rlpProblem(code)} at byte ${pos}`;
      const { start, end: itemEnd, isList } = rlpItem;
      if (isList) {
        const inner = items(start, itemEnd);
        if (inner !== null) return inner;
      }
      pos = itemEnd;
    }
    return null;
  };
  if (b.length === 0) return rlpProblem(readRlpItem(b, 0, 0));
  const code = readRlpItem(b, 0, b.length);
  if (code !== RLP_OK) return `${rlpProblem(code)} at byte 0`;
  if (rlpItem.end !== b.length) return `trailing bytes at ${rlpItem.end}`;
  return rlpItem.isList ? items(rlpItem.start, rlpItem.end) : null;
}

t.test('every valid RLPTests vector encodes to its bytes and decodes back to the same tree', async (t) => {
  const valid = load('rlptest.json');
  let passed = 0;
  for (const [name, v] of Object.entries(valid)) {
    const enc = encodeRlp(toInput(v.in));
    const ok = enc.equals(bytes(v.out)) && encodeRlp(decodeRlp(enc)).equals(enc) && walk(enc) === null;
    t.ok(ok, name);
    if (ok) passed++;
  }
  const random = load('RandomRLPTests/example.json');
  for (const [name, v] of Object.entries(random)) {
    const b = bytes(v.out);
    const ok = encodeRlp(decodeRlp(b)).equals(b) && walk(b) === null;
    t.ok(ok, `random ${name}`);
    if (ok) passed++;
  }
  t.comment(`RLPTests valid: ${passed}/${Object.keys(valid).length + Object.keys(random).length} passed`);
});

t.test('every invalid RLPTests vector is rejected by the reader and by the oracle', async (t) => {
  const invalid = load('invalidRLPTest.json');
  let rejected = 0;
  for (const [name, v] of Object.entries(invalid)) {
    const r = tryDecodeRlp(bytes(v.out));
    t.notOk(r.ok, `${name} rejected by the oracle${r.ok ? '' : ': ' + r.reason}`);
    const w = walk(bytes(v.out));
    t.not(w, null, `${name} rejected by the reader: ${w}`);
    if (!r.ok) rejected++;
  }
  t.comment(`RLPTests invalid: ${rejected}/${Object.keys(invalid).length} rejected`);
});

t.test('the reader names each problem and leaves the payload bounds in rlpItem', async (t) => {
  const problem = (hex: string): string => rlpProblem(readRlpItem(bytes(hex), 0, bytes(hex).length));
  t.equal(problem('8100'), 'single byte below 0x80 must not be wrapped');
  t.equal(problem('b9'), 'length bytes run past the end');
  t.equal(problem('b800'), 'length has leading zero bytes');
  t.equal(problem('b80100'), 'long-form length used for a short item');
  t.equal(problem('83aabb'), 'item runs past the end of its container');
  t.equal(rlpProblem(readRlpItem(bytes('c0'), 1, 1)), 'no item: the input ends here');
  const b = bytes('c3820102');
  t.equal(readRlpItem(b, 0, b.length), RLP_OK);
  t.same({ ...rlpItem }, { start: 1, end: 4, isList: true });
  t.equal(readRlpItem(b, 1, 4), RLP_OK);
  t.same({ ...rlpItem }, { start: 2, end: 4, isList: false });
  t.equal(readRlpItem(b, 2, 3), 0, 'a single byte below 0x80 is its own item');
  t.same({ ...rlpItem }, { start: 2, end: 3, isList: false });
});

t.test('decoding (oracle) yields views with the right structure', async (t) => {
  t.same(toPlain(decodeRlp(bytes('c7c0c1c0c3c0c1c0'))), [[], [[]], [[], [[]]]]);
  t.same(toPlain(decodeRlp(bytes('80'))), '');
  t.same(toPlain(decodeRlp(bytes('00'))), '00');
  t.same(toPlain(decodeRlp(bytes('8180'))), '80');
  const input = bytes('c3820102');
  const item = decodeRlp(input) as Buffer[];
  t.equal((item[0] as Buffer).buffer, input.buffer, 'strings are views of the input, not copies');
});

t.test('strictness: each non-canonical or out-of-bounds form is rejected', async (t) => {
  const cases: [string, string][] = [
    ['', 'empty input'],
    ['8100', 'single byte wrapped'],
    ['817f', 'single byte 0x7f wrapped'],
    ['b800', 'long string with leading-zero length'],
    ['b80100', 'long form for a short string'],
    ['f800', 'long list with leading-zero length'],
    ['f80180', 'long form for a short list'],
    ['83010203ff', 'trailing byte'],
    ['c3800102ff', 'list shorter than its items'],
    ['c2830102', 'item runs past the list'],
    ['bf0f000000000000021111', 'huge length'],
    ['ff0f000000000000021111', 'huge list length'],
  ];
  for (const [hex, why] of cases) {
    t.notOk(tryDecodeRlp(bytes(hex)).ok, `oracle: ${why}`);
    t.not(walk(bytes(hex)), null, `reader: ${why}`);
  }
  t.ok(tryDecodeRlp(bytes('c28001')).ok, 'a canonical two-item list is accepted');
  t.equal(walk(bytes('c28001')), null, 'by the reader too');
  t.throws(() => decodeRlp(bytes('8100')), RlpError);
});

t.test('deeply nested lists are rejected instead of overflowing the stack', async (t) => {
  let enc: RlpInput = [];
  for (let i = 0; i < 200; i++) enc = [enc];
  const r = tryDecodeRlp(encodeRlp(enc));
  t.notOk(r.ok, 'nesting deeper than the limit is an error value');
});

t.test('encoding covers the length boundaries', async (t) => {
  t.equal(encodeRlp(Buffer.alloc(55, 1)).subarray(0, 1).toString('hex'), 'b7');
  t.equal(encodeRlp(Buffer.alloc(56, 1)).subarray(0, 2).toString('hex'), 'b838');
  t.equal(encodeRlp(Buffer.alloc(256, 1)).subarray(0, 3).toString('hex'), 'b90100');
  t.equal(encodeRlp(new Array(56).fill(Buffer.from([1]))).subarray(0, 2).toString('hex'), 'f838');
  t.equal(encodeRlp([]).toString('hex'), 'c0');
  t.equal(encodeRlp(Buffer.alloc(0)).toString('hex'), '80');
  t.equal(encodeRlp(new Uint8Array([0x7f])).toString('hex'), '7f');
  t.equal(encodeRlp(new Uint8Array([0x80])).toString('hex'), '8180');
});
