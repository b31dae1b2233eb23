// The malformed-request battery: every bad request gets the right JSON-RPC code (or HTTP status) and the server
// keeps serving. Real uWS, real anvil as the node.
import t, { type Test } from 'tap';
import { RpcCode } from '../../src/errors.js';
import { nestedDeeperThan } from '../../src/rpc/dispatch.js';
import { startAnvil, startRpc } from '../helpers/rpc-harness.js';

const anvil = await startAnvil();
const h = await startRpc({ nodeUrl: anvil.url, config: { maxBatchItems: 10, maxBodyBytes: 64 * 1024 } });
t.teardown(async () => {
  await h.close();
  await anvil.stop();
});

async function stillServes(tt: Test): Promise<void> {
  const r = await h.call('eth_chainId');
  tt.equal(r.result, '0x7a69', 'the server still answers afterwards');
}

type Envelope = { id?: unknown; error?: { code: number; message: string } };

async function expectCode(tt: Test, body: string, code: number, match?: RegExp): Promise<Envelope> {
  const r = await h.post(body);
  tt.equal(r.status, 200, 'HTTP 200');
  const j = JSON.parse(r.text) as Envelope;
  tt.equal(j.error?.code, code, `code ${code}: ${j.error?.message}`);
  if (match !== undefined) tt.match(j.error?.message, match);
  await stillServes(tt);
  return j;
}

t.test('invalid JSON → -32700 with id null', async (tt) => {
  const j = await expectCode(tt, '{"jsonrpc":"2.0","id":1,"method":', RpcCode.PARSE_ERROR, /parse error/);
  tt.equal(j.id, null);
});

t.test('non-object bodies → -32600', async (tt) => {
  await expectCode(tt, '42', RpcCode.INVALID_REQUEST);
  await expectCode(tt, '"eth_chainId"', RpcCode.INVALID_REQUEST);
  await expectCode(tt, 'null', RpcCode.INVALID_REQUEST);
});

t.test('wrong jsonrpc version → -32600 keeping the id', async (tt) => {
  const j = await expectCode(tt, '{"jsonrpc":"1.0","id":7,"method":"eth_chainId","params":[]}', RpcCode.INVALID_REQUEST, /jsonrpc/);
  tt.equal(j.id, 7);
  await expectCode(tt, '{"id":8,"method":"eth_chainId"}', RpcCode.INVALID_REQUEST);
});

t.test('missing or non-string method → -32600', async (tt) => {
  await expectCode(tt, '{"jsonrpc":"2.0","id":1,"params":[]}', RpcCode.INVALID_REQUEST, /method/);
  await expectCode(tt, '{"jsonrpc":"2.0","id":1,"method":5}', RpcCode.INVALID_REQUEST, /method/);
  await expectCode(tt, '{"jsonrpc":"2.0","id":{},"method":"eth_chainId"}', RpcCode.INVALID_REQUEST, /id/);
});

t.test('an id with no finite value (1e400, -1e400) → -32600 with id null; every reply, batches too, is valid JSON', async (tt) => {
  for (const id of ['1e400', '-1e400']) {
    const r = await h.post(`{"jsonrpc":"2.0","id":${id},"method":"eth_chainId","params":[]}`);
    tt.notMatch(r.text, /Infinity/);
    const j = JSON.parse(r.text) as Envelope;
    tt.equal(j.error?.code, RpcCode.INVALID_REQUEST, `id ${id}`);
    tt.match(j.error?.message, /id must be a finite number/);
    tt.equal(j.id, null);
  }
  const r = await h.post('[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":1e400,"method":"eth_chainId"},{"jsonrpc":"2.0","id":1.5e3,"method":"eth_chainId"}]');
  const j = JSON.parse(r.text) as (Envelope & { result?: unknown })[];
  tt.equal(j.length, 3, 'the batch parses and answers every item');
  tt.same(j[0], { jsonrpc: '2.0', id: 1, result: '0x7a69' });
  tt.equal(j[1]!.error?.code, RpcCode.INVALID_REQUEST);
  tt.equal(j[1]!.id, null);
  tt.same(j[2], { jsonrpc: '2.0', id: 1500, result: '0x7a69' }, 'a finite number id is echoed as its value');
  await stillServes(tt);
});

t.test('bad params: types, hex, counts → -32602 naming the argument', async (tt) => {
  const cases: [string, unknown[], RegExp][] = [
    ['eth_getTransactionByHash', ['1234'], /invalid argument 0: hex string without 0x prefix/],
    ['eth_getTransactionByHash', ['0x12'], /invalid argument 0: hex string has length 2, want 64/],
    ['eth_getTransactionByHash', ['0xzz' + '0'.repeat(62)], /invalid argument 0: invalid hex/],
    ['eth_getTransactionByHash', [5], /invalid argument 0: expected a 0x-prefixed hex string, got a number/],
    ['eth_getTransactionByHash', [], /missing value for required argument 0/],
    ['eth_getBlockByNumber', ['pending', 'yes'], /invalid argument 1: expected a boolean/],
    ['eth_getBlockByNumber', ['0x01', false], /invalid argument 0: hex number with leading zero/],
    ['eth_getBlockByNumber', ['pending', false, 3], /too many arguments/],
    ['eth_getBalance', ['0x1234', 'pending'], /invalid argument 0: hex string has length 4, want 40/],
    ['eth_getTransactionByBlockNumberAndIndex', ['pending', 'x'], /invalid argument 1/],
  ];
  for (const [method, params, re] of cases) {
    const j = await expectCode(tt, JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }), RpcCode.INVALID_PARAMS, re);
    tt.equal(j.id, 1);
  }
  await expectCode(tt, '{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":{"a":1}}', RpcCode.INVALID_PARAMS, /array/);
});

t.test('empty batch → -32600; oversized batch → -32600 "batch too large"', async (tt) => {
  await expectCode(tt, '[]', RpcCode.INVALID_REQUEST, /empty batch/);
  const big = JSON.stringify(Array.from({ length: 11 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'eth_chainId' })));
  await expectCode(tt, big, RpcCode.INVALID_REQUEST, /batch too large/);
});

t.test('a batch of invalid items answers each in order', async (tt) => {
  const r = await h.post('[1, {"jsonrpc":"2.0","id":"a","method":"eth_chainId"}, {"jsonrpc":"2.0","id":"b"}]');
  const j = JSON.parse(r.text) as Envelope[];
  tt.equal(j.length, 3);
  tt.equal(j[0]!.error?.code, RpcCode.INVALID_REQUEST);
  tt.same(j[1], { jsonrpc: '2.0', id: 'a', result: '0x7a69' });
  tt.equal(j[2]!.error?.code, RpcCode.INVALID_REQUEST);
  tt.equal(j[2]!.id, 'b');
});

t.test('oversized body → HTTP 413 before buffering it', async (tt) => {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_call', params: [{ data: '0x' + 'ab'.repeat(40 * 1024) }] });
  const r = await h.post(body);
  tt.equal(r.status, 413);
  tt.match(r.text, /exceeds the 65536-byte limit/);
  await stillServes(tt);
});

t.test('deeply nested JSON → -32700 without parsing', async (tt) => {
  const deep = '{"jsonrpc":"2.0","id":1,"method":"eth_call","params":' + '['.repeat(5000) + ']'.repeat(5000) + '}';
  await expectCode(tt, deep, RpcCode.PARSE_ERROR, /nested deeper than 64/);
  const strings = JSON.stringify({ jsonrpc: '2.0', id: '[[[{{"\\'.repeat(50), method: 'web3_sha3', params: ['0x' + '00'.repeat(4)] });
  const r = JSON.parse((await h.post(strings)).text) as { result?: string };
  tt.type(r.result, 'string', 'brackets inside strings do not count');
});

t.test('nestedDeeperThan: the depth exactly, however many brackets and wherever they are', async (tt) => {
  const nest = (n: number): string => '['.repeat(n) + ']'.repeat(n);
  tt.equal(nestedDeeperThan(nest(64), 64), false, '64 levels: not deeper than 64');
  tt.equal(nestedDeeperThan(nest(65), 64), true, '65 levels: deeper');
  tt.equal(nestedDeeperThan('[' + Array(200).fill('{"a":[1]}').join(',') + ']', 64), false, '600 brackets, 3 levels: not deeper');
  tt.equal(nestedDeeperThan('{"x":' + nest(64) + '}', 64), true, 'an object around 64 levels: 65');
  tt.equal(nestedDeeperThan(JSON.stringify({ s: '['.repeat(100) }), 64), false, 'brackets inside a string do not count');
  tt.equal(nestedDeeperThan(JSON.stringify({ s: '\\"' + '['.repeat(100) }) + nest(3), 64), false, 'nor after an escaped quote');
});

t.test('unknown method → -32601 from the node', async (tt) => {
  await expectCode(tt, '{"jsonrpc":"2.0","id":1,"method":"eth_noSuchMethod","params":[]}', RpcCode.METHOD_NOT_FOUND);
});

t.test('denied namespaces → -32601 without reaching the node', async (tt) => {
  for (const m of ['admin_nodeInfo', 'debug_getRawBlock', 'personal_sign', 'miner_start', 'engine_newPayloadV3', 'txpool_content']) {
    await expectCode(tt, JSON.stringify({ jsonrpc: '2.0', id: 1, method: m, params: [] }), RpcCode.METHOD_NOT_FOUND, /does not exist\/is not available/);
  }
});

t.test('notifications get no reply; an all-notification batch gets an empty 200', async (tt) => {
  const one = await h.post('{"jsonrpc":"2.0","method":"eth_chainId","params":[]}');
  tt.equal(one.status, 200);
  tt.equal(one.text, '');
  const batch = await h.post('[{"jsonrpc":"2.0","method":"eth_chainId"},{"jsonrpc":"2.0","method":"eth_blockNumber"}]');
  tt.equal(batch.status, 200);
  tt.equal(batch.text, '');
  const mixed = JSON.parse((await h.post('[{"jsonrpc":"2.0","method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]')).text) as Envelope[];
  tt.equal(mixed.length, 1);
  tt.equal(mixed[0]!.id, 2);
});

t.test('HTTP transport rules: content type, methods, any path', async (tt) => {
  const body = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}';
  tt.equal((await h.post(body, { 'content-type': 'text/plain' })).status, 415);
  tt.equal((await h.post(body, {})).status, 415, 'missing content type is refused like geth does');
  tt.equal((await h.post(body, { 'content-type': 'application/json; charset=utf-8' })).status, 200);
  const get = await fetch(h.url);
  tt.equal(get.status, 405);
  tt.equal(((await get.json()) as Envelope).error?.code, RpcCode.INVALID_REQUEST);
  const other = await fetch(h.url + 'some/path', { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  tt.same(await other.json(), { jsonrpc: '2.0', id: 1, result: '0x7a69' });
  await stillServes(tt);
});

t.test('response size cap → -32005', async (tt) => {
  const small = await startRpc({ nodeUrl: anvil.url, config: { maxResponseBytes: 1024 } });
  tt.teardown(() => small.close());
  const r = await small.call('web3_sha3', ['0x' + 'ab'.repeat(10)]);
  tt.type(r.result, 'string');
  const big = await small.call('eth_getBlockByNumber', ['0x0', true]);
  tt.equal(big.error?.code, RpcCode.LIMIT_EXCEEDED);
});
