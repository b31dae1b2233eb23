// Every pending-state method over real uWS, with state fed the Unichain Sepolia capture: answers match the capture
// (and the canonical block beside it) and validate against the execution-apis result schemas.
import t, { type Test } from 'tap';
import { Ajv, type ValidateFunction } from 'ajv';
import WebSocket from 'ws';
import { feed } from '../helpers/ingest.js';
import { loadJson, unichainMessages, unichainRpcBlock } from '../helpers/fixtures.js';
import { startRpcOverAnvil } from '../helpers/rpc-harness.js';

interface OpenRpc {
  methods: { name: string; result: { schema: unknown } }[];
}
const doc = loadJson<OpenRpc>('execution-apis-derived/result-schemas.json');
const ajv = new Ajv({ strict: false, allErrors: true });
const validators = new Map<string, ValidateFunction>();
for (const m of doc.methods) validators.set(m.name, ajv.compile(m.result.schema as object));

/**
 * Fields the schemas do not list (they say additionalProperties: false), removed before validation: the OP-stack
 * deposit and fee fields, and the receipt `blockTimestamp` that geth and anvil return.
 */
const OP_ONLY = [
  'depositNonce', 'depositReceiptVersion', 'sourceHash', 'mint', 'isSystemTx', 'l1GasPrice', 'l1GasUsed', 'l1Fee',
  'l1BaseFeeScalar', 'l1BlobBaseFee', 'l1BlobBaseFeeScalar', 'operatorFeeScalar', 'operatorFeeConstant',
];
const RECEIPT_EXTRAS = ['blockTimestamp'];
function stripOp(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(stripOp);
  if (v === null || typeof v !== 'object') return v;
  const o: Record<string, unknown> = {};
  const isReceipt = 'cumulativeGasUsed' in v;
  for (const [k, x] of Object.entries(v)) if (!OP_ONLY.includes(k) && !(isReceipt && RECEIPT_EXTRAS.includes(k))) o[k] = stripOp(x);
  return o;
}
/** Deposit transactions (type 0x7e) have no schema upstream; they are checked against the canonical block instead. */
function withoutDeposits(v: unknown): unknown {
  if (Array.isArray(v)) return v.filter((x) => !(x !== null && typeof x === 'object' && (x as { type?: string }).type === '0x7e')).map(withoutDeposits);
  if (v === null || typeof v !== 'object') return v;
  const o = { ...(v as Record<string, unknown>) };
  if (Array.isArray(o.transactions)) o.transactions = withoutDeposits(o.transactions);
  return o;
}

function valid(tt: Test, method: string, result: unknown): void {
  const v = validators.get(method)!;
  const ok = v(stripOp(withoutDeposits(result)));
  tt.ok(ok, `${method} result matches the execution-apis schema` + (ok ? '' : ': ' + ajv.errorsText(v.errors).slice(0, 600)));
}

const msgs = unichainMessages();
const canonical = unichainRpcBlock() as { transactions: Record<string, unknown>[]; number: string };
const hashes = msgs.map((m) => (m.diff as { block_hash: string }).block_hash);
const { h } = await startRpcOverAnvil(t);
for (const m of msgs) feed(h.pipeline, m);
const NUM = canonical.number;
const txHashes = canonical.transactions.map((x) => x.hash as string);
const userTx = canonical.transactions[1]!;

async function ok(method: string, params: unknown[]): Promise<unknown> {
  const r = await h.call(method, params);
  if (r.error !== undefined) throw new Error(`${method}: ${r.error.message}`);
  return r.result;
}

t.test('eth_blockNumber("pending") is the pending height; without a tag it is latest (the node\'s head)', async (tt) => {
  tt.equal(await ok('eth_blockNumber', ['pending']), NUM);
  tt.equal(await ok('eth_blockNumber', []), '0x0', "anvil's head: a preconfirmed transaction has 0 confirmations");
  tt.equal(await ok('eth_blockNumber', ['latest']), '0x0');
});

t.test('eth_getBlockByNumber pending, with hashes and full objects', async (tt) => {
  const b = (await ok('eth_getBlockByNumber', ['pending', false])) as Record<string, unknown>;
  valid(tt, 'eth_getBlockByNumber', b);
  tt.equal(b.number, NUM);
  tt.equal(b.hash, hashes[4]);
  tt.same(b.transactions, txHashes);
  const full = (await ok('eth_getBlockByNumber', ['pending', true])) as { transactions: Record<string, unknown>[] };
  valid(tt, 'eth_getBlockByNumber', full);
  tt.equal(full.transactions.length, 6);
  for (let i = 0; i < 6; i++) {
    const ours = full.transactions[i]!;
    const theirs = canonical.transactions[i]!;
    for (const k of ['hash', 'from', 'to', 'nonce', 'input', 'value', 'gas', 'type', 'transactionIndex']) tt.equal(ours[k], theirs[k], `tx ${i} ${k} matches the canonical block`);
  }
  tt.same(await ok('eth_getBlockByNumber', [NUM, false]), b, 'the numeric tag of a held pending height is served from state');
});

t.test('eth_getBlockByHash resolves a flashblock hash to the block as of that flashblock', async (tt) => {
  const b = (await ok('eth_getBlockByHash', [hashes[1], false])) as Record<string, unknown>;
  valid(tt, 'eth_getBlockByHash', b);
  tt.equal(b.hash, hashes[1]);
  tt.same(b.transactions, txHashes.slice(0, 3));
  const full = (await ok('eth_getBlockByHash', [hashes[4], true])) as { transactions: unknown[] };
  valid(tt, 'eth_getBlockByHash', full);
  tt.equal(full.transactions.length, 6);
  tt.equal(await ok('eth_getBlockByHash', ['0x' + '11'.repeat(32), false]), null, 'unknown hashes are forwarded (anvil: null)');
});

t.test('eth_getBlockReceipts pending and by flashblock hash', async (tt) => {
  const rs = (await ok('eth_getBlockReceipts', ['pending'])) as Record<string, unknown>[];
  valid(tt, 'eth_getBlockReceipts', rs);
  tt.equal(rs.length, 6);
  tt.same(rs.map((r) => r.transactionHash), txHashes);
  const early = (await ok('eth_getBlockReceipts', [hashes[0]])) as Record<string, unknown>[];
  valid(tt, 'eth_getBlockReceipts', early);
  tt.equal(early.length, 2);
  tt.equal(early[1]!.blockHash, hashes[0]);
});

t.test('transaction counts', async (tt) => {
  const c = await ok('eth_getBlockTransactionCountByNumber', ['pending']);
  valid(tt, 'eth_getBlockTransactionCountByNumber', c);
  tt.equal(c, '0x6');
  const byHash = await ok('eth_getBlockTransactionCountByHash', [hashes[2]]);
  valid(tt, 'eth_getBlockTransactionCountByHash', byHash);
  tt.equal(byHash, '0x4');
});

t.test('transactions by hash, raw, and by position', async (tt) => {
  const tx = (await ok('eth_getTransactionByHash', [userTx.hash])) as Record<string, unknown>;
  valid(tt, 'eth_getTransactionByHash', tx);
  tt.equal(tx.blockHash, hashes[4]);
  tt.equal(tx.from, userTx.from);
  const raw = (await ok('eth_getRawTransactionByHash', [userTx.hash])) as string;
  valid(tt, 'debug_getRawTransaction', raw); // same result shape; eth_getRawTransactionByHash is not in the document
  tt.equal(raw, (msgs[0]!.diff as { transactions: string[] }).transactions[1]);
  const byNum = await ok('eth_getTransactionByBlockNumberAndIndex', ['pending', '0x1']);
  valid(tt, 'eth_getTransactionByBlockNumberAndIndex', byNum);
  tt.same(byNum, tx);
  tt.equal(await ok('eth_getTransactionByBlockNumberAndIndex', ['pending', '0x6']), null);
  const byHash = (await ok('eth_getTransactionByBlockHashAndIndex', [hashes[0], '0x1'])) as Record<string, unknown>;
  valid(tt, 'eth_getTransactionByBlockHashAndIndex', byHash);
  tt.equal(byHash.hash, userTx.hash);
  tt.equal(byHash.blockHash, hashes[0]);
  tt.equal(await ok('eth_getTransactionByBlockHashAndIndex', [hashes[0], '0x2']), null);
});

t.test('eth_getTransactionReceipt from the flashblock metadata', async (tt) => {
  for (const hash of txHashes) {
    const r = (await ok('eth_getTransactionReceipt', [hash])) as Record<string, unknown>;
    valid(tt, 'eth_getTransactionReceipt', r);
    tt.equal(r.transactionHash, hash);
    tt.equal(r.blockNumber, NUM);
    tt.equal(r.blockHash, hashes[4]);
  }
  const dep = (await ok('eth_getTransactionReceipt', [txHashes[0]])) as Record<string, unknown>;
  tt.equal(dep.type, '0x7e');
  tt.type(dep.depositNonce, 'string', 'deposit receipts keep their OP fields');
  const user = (await ok('eth_getTransactionReceipt', [userTx.hash])) as Record<string, unknown>;
  tt.match(user, { l1GasPrice: '0x9', l1GasUsed: '0x640', l1BaseFeeScalar: '0x7d0', l1BlobBaseFee: '0x1', l1BlobBaseFeeScalar: '0xdbba0' }, 'OP fee fields from the block\'s L1-info deposit');
  tt.type(user.l1Fee, 'string');
});

t.test('pending balance and nonce', async (tt) => {
  const balances = (msgs[4]!.metadata as { new_account_balances: Record<string, string> }).new_account_balances;
  const [addr, bal] = Object.entries(balances).find(([, v]) => v !== '0x0')!;
  const b = await ok('eth_getBalance', [addr, 'pending']);
  valid(tt, 'eth_getBalance', b);
  tt.equal(b, bal);
  const n = await ok('eth_getTransactionCount', [userTx.from, 'pending']);
  valid(tt, 'eth_getTransactionCount', n);
  const mine = canonical.transactions.filter((x) => x.from === userTx.from).map((x) => BigInt(x.nonce as string));
  tt.equal(BigInt(n as string), mine.reduce((a, b) => (b > a ? b : a)) + 1n, 'highest pending nonce of the sender + 1');
  tt.equal(await ok('eth_getBalance', ['0x' + '77'.repeat(20), 'pending']), '0x0', 'unknown to state → the node (latest)');
});

t.test('eth_getLogs ending at pending', async (tt) => {
  const logs = (await ok('eth_getLogs', [{ fromBlock: 'pending', toBlock: 'pending' }])) as Record<string, unknown>[];
  valid(tt, 'eth_getLogs', logs);
  tt.ok(logs.length > 0);
  const idx = logs.map((l) => Number.parseInt(l.logIndex as string, 16));
  tt.same(idx, idx.map((_, i) => i), 'log indexes are positions in the block');
  const addr = logs[0]!.address as string;
  const filtered = (await ok('eth_getLogs', [{ fromBlock: 'pending', toBlock: 'pending', address: addr.toUpperCase().replace('0X', '0x') }])) as Record<string, unknown>[];
  tt.ok(filtered.length > 0 && filtered.every((l) => l.address === addr));
  const topic = (logs[0]!.topics as string[])[0]!;
  const byTopic = (await ok('eth_getLogs', [{ fromBlock: 'pending', toBlock: 'pending', topics: [[topic]] }])) as Record<string, unknown>[];
  tt.ok(byTopic.every((l) => (l.topics as string[])[0] === topic));
  const none = await ok('eth_getLogs', [{ fromBlock: 'pending', toBlock: 'pending', topics: ['0x' + '00'.repeat(32)] }]);
  tt.same(none, []);
  const withCanonical = (await ok('eth_getLogs', [{ fromBlock: '0x0', toBlock: 'pending' }])) as unknown[];
  tt.equal(withCanonical.length, logs.length, 'canonical part from anvil (no logs) + pending part, no duplicates');
  const toNumber = (await ok('eth_getLogs', [{ fromBlock: '0x0', toBlock: NUM }])) as unknown[];
  tt.same(toNumber, logs, 'a numeric toBlock at a held pending height is the same range');
  const byHash = (await ok('eth_getLogs', [{ blockHash: hashes[1] }])) as Record<string, unknown>[];
  valid(tt, 'eth_getLogs', byHash);
  tt.ok(byHash.every((l) => l.blockHash === hashes[1]));
});

t.test('eth_getLogs: addresses and topics are checked, at most 1,000 per position, whichever part answers (table)', async (tt) => {
  const addr = (i: number): string => '0x' + i.toString(16).padStart(40, '0');
  const topic = (i: number): string => '0x' + i.toString(16).padStart(64, '0');
  const ranges = [{ fromBlock: 'pending', toBlock: 'pending' }, { fromBlock: '0x0', toBlock: 'latest' }];
  const cases: [string, Record<string, unknown>, RegExp | null][] = [
    ['1,000 addresses', { address: Array.from({ length: 1000 }, (_, i) => addr(i)) }, null],
    ['1,001 addresses', { address: Array.from({ length: 1001 }, (_, i) => addr(i)) }, /address: 1001 values, at most 1000/],
    ['1,000 topics at a position', { topics: [null, Array.from({ length: 1000 }, (_, i) => topic(i))] }, null],
    ['1,001 topics at a position', { topics: [null, Array.from({ length: 1001 }, (_, i) => topic(i))] }, /topics\[1\]: 1001 values, at most 1000/],
    ['a short address', { address: '0x1234' }, /address: expected a 20-byte hex address, got "0x1234"/],
    ['a short address in a list', { address: [addr(1), '0x' + '11'.repeat(21)] }, /address: expected a 20-byte hex address/],
    ['an address without 0x', { address: '11'.repeat(20) }, /address: expected a 20-byte hex address/],
    ['a short topic', { topics: ['0x12'] }, /topics\[0\]: expected null or a 32-byte hex topic/],
    ['a null alternative is a wildcard', { topics: [[null, topic(1)]] }, null],
    ['five topic positions', { topics: [null, null, null, null, null] }, /at most 4 topic positions/],
  ];
  for (const range of ranges) {
    for (const [name, filter, err] of cases) {
      const r = await h.call('eth_getLogs', [{ ...range, ...filter }]);
      if (err === null) tt.ok(Array.isArray(r.result), `${name} (${range.fromBlock}..${range.toBlock}): answered`);
      else {
        tt.equal(r.error?.code, -32602, `${name} (${range.fromBlock}..${range.toBlock}): -32602`);
        tt.match(r.error?.message, err);
      }
    }
  }
  const tag = await h.call('eth_getLogs', [{ fromBlock: 'Pending', toBlock: 'pending' }]);
  tt.equal(tag.error?.code, -32602);
  tt.match(tag.error?.message, /fromBlock: unknown block tag "Pending"; valid: latest, pending, earliest, safe, finalized/);
});

t.test('a wrong block tag is -32602 naming the argument and listing the valid tags (table)', async (tt) => {
  const A = '0x' + '77'.repeat(20);
  const cases: [string, unknown[], number, boolean][] = [
    ['eth_getBlockByNumber', ['Pending', false], 0, false],
    ['eth_getBlockByNumber', ['constructor', false], 0, false],
    ['eth_blockNumber', ['PENDING'], 0, false],
    ['eth_getBlockReceipts', ['Latest'], 0, true],
    ['eth_getBlockTransactionCountByNumber', ['pending '], 0, false],
    ['eth_getTransactionByBlockNumberAndIndex', ['Pending', '0x0'], 0, false],
    ['eth_getBalance', [A, 'Pending'], 1, true],
    ['eth_getTransactionCount', [A, 'Pending'], 1, true],
    ['eth_call', [{ to: A, data: '0x' }, 'Pending'], 1, true],
    ['eth_getCode', [A, 'Pending'], 1, true],
    ['eth_getStorageAt', [A, '0x0', 'Pending'], 2, true],
  ];
  for (const [method, params, i, hashOk] of cases) {
    const r = await h.call(method, params);
    tt.equal(r.error?.code, -32602, `${method}(${JSON.stringify(params)}): -32602`);
    tt.match(r.error?.message, new RegExp(`^invalid argument ${i}: unknown block tag ".*"; valid: latest, pending, earliest, safe, finalized, or a hex block number`), method);
    tt.equal(/block hash/.test(r.error?.message ?? ''), hashOk, `${method}: a block hash is ${hashOk ? '' : 'not '}listed`);
  }
});

t.test('the same answers over WebSocket JSON-RPC on /', async (tt) => {
  const ws = new WebSocket(h.wsUrl);
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  tt.teardown(() => ws.close());
  const next = (): Promise<unknown> => new Promise((resolve) => ws.once('message', (d: Buffer) => resolve(JSON.parse(d.toString()))));
  ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getTransactionReceipt', params: [userTx.hash] }));
  const r = (await next()) as { id: number; result: Record<string, unknown> };
  tt.equal(r.id, 1);
  valid(tt, 'eth_getTransactionReceipt', r.result);
  ws.send(JSON.stringify([{ jsonrpc: '2.0', id: 2, method: 'eth_chainId' }, { jsonrpc: '2.0', id: 3, method: 'eth_blockNumber', params: ['pending'] }]));
  tt.same(await next(), [{ jsonrpc: '2.0', id: 2, result: '0x7a69' }, { jsonrpc: '2.0', id: 3, result: NUM }]);
  ws.send(JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'eth_subscribe', params: ['newHeads'] }));
  const id = ((await next()) as { result: string }).result;
  tt.match(id, /^0x[0-9a-f]{32}$/, 'eth_subscribe is served by the RPC module itself');
  ws.send(JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'eth_unsubscribe', params: [id] }));
  tt.same(await next(), { jsonrpc: '2.0', id: 5, result: true });
});

t.test('without usable pending state, pending answers as latest (from the node) and is counted', async (tt) => {
  h.setUsable(false);
  tt.teardown(() => h.setUsable(true));
  const before = h.ctx.metrics.pendingFallbacks.stale.value;
  const b = (await ok('eth_getBlockByNumber', ['pending', false])) as Record<string, unknown>;
  tt.equal(b.number, '0x0', "anvil's latest");
  tt.equal(await ok('eth_blockNumber', ['pending']), '0x0');
  tt.ok(h.ctx.metrics.pendingFallbacks.stale.value > before);
  const r = (await ok('eth_getTransactionReceipt', [userTx.hash])) as Record<string, unknown>;
  tt.equal(r.transactionHash, userTx.hash, 'by-hash lookups still come from state');
});

t.test('metrics record the source of each answer', async (tt) => {
  tt.ok(h.ctx.metrics.rpcHandle('eth_getTransactionReceipt', 'state').counter.value >= 6);
  tt.ok(h.ctx.metrics.rpcHandle('eth_getBlockByHash', 'node').counter.value >= 1);
  tt.ok(h.ctx.metrics.rpcHandle('eth_getTransactionReceipt', 'state').histogram.count >= 6);
});

t.test('a broken pending block: pending answers exactly as latest, counted as broken', async (tt) => {
  const before = h.ctx.metrics.pendingFallbacks.broken.value;
  tt.ok(h.state.markBroken(Number(NUM), 'test: a gap that never filled'));
  const A = '0x' + '77'.repeat(20);
  const pairs: [string, unknown[], unknown[]][] = [
    ['eth_getBlockByNumber', ['pending', false], ['latest', false]],
    ['eth_getBlockReceipts', ['pending'], ['latest']],
    ['eth_getBlockTransactionCountByNumber', ['pending'], ['latest']],
    ['eth_blockNumber', ['pending'], []],
    ['eth_getBalance', [userTx.from, 'pending'], [userTx.from, 'latest']],
    ['eth_getTransactionCount', [A, 'pending'], [A, 'latest']],
    ['eth_getLogs', [{ fromBlock: 'pending', toBlock: 'pending' }], [{ fromBlock: 'latest', toBlock: 'latest' }]],
  ];
  for (const [method, pending, latest] of pairs) tt.same(await ok(method, pending), await ok(method, latest), `${method}: pending = latest`);
  tt.equal(await ok('eth_getTransactionReceipt', [userTx.hash]), null, 'transactions of a broken block are not served');
  tt.ok(h.ctx.metrics.pendingFallbacks.broken.value > before);
});
