// RLP codec against ethereum/tests RLPTests (valid encodings round-trip, invalid ones are rejected) plus edge cases.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { decodeRlp, encodeRlp, RlpError, tryDecodeRlp, type RlpInput, type RlpItem } from '../../src/chain/rlp.js';
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

t.test('every valid RLPTests vector encodes to its bytes and decodes back to the same tree', async (t) => {
  const valid = load('rlptest.json');
  let passed = 0;
  for (const [name, v] of Object.entries(valid)) {
    const enc = encodeRlp(toInput(v.in));
    const ok = enc.equals(bytes(v.out)) && encodeRlp(decodeRlp(enc)).equals(enc);
    t.ok(ok, name);
    if (ok) passed++;
  }
  const random = load('RandomRLPTests/example.json');
  for (const [name, v] of Object.entries(random)) {
    const b = bytes(v.out);
    const ok = encodeRlp(decodeRlp(b)).equals(b);
    t.ok(ok, `random ${name}`);
    if (ok) passed++;
  }
  t.comment(`RLPTests valid: ${passed}/${Object.keys(valid).length + Object.keys(random).length} passed`);
});

t.test('every invalid RLPTests vector is rejected with an RlpError', async (t) => {
  const invalid = load('invalidRLPTest.json');
  let rejected = 0;
  for (const [name, v] of Object.entries(invalid)) {
    const r = tryDecodeRlp(bytes(v.out));
    t.notOk(r.ok, `${name} rejected${r.ok ? '' : ': ' + r.reason}`);
    if (!r.ok) rejected++;
  }
  t.comment(`RLPTests invalid: ${rejected}/${Object.keys(invalid).length} rejected`);
});

t.test('decoding yields views with the right structure', async (t) => {
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
    t.notOk(tryDecodeRlp(bytes(hex)).ok, why);
  }
  t.ok(tryDecodeRlp(bytes('c28001')).ok, 'a canonical two-item list is accepted');
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
