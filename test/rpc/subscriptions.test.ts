// eth_subscribe hub: notification shapes and sharing, filtered logs, params errors and caps at the sink level; then
// over a real socket (startDaemon) with viem's WebSocket transport, ethers' WebSocketProvider and raw eth_subscribe.
import http from 'node:http';
import t from 'tap';
import { createPublicClient, keccak256, webSocket } from 'viem';
import { WebSocketProvider } from 'ethers';
import WebSocket from 'ws';
import { loadConfig } from '../../src/config.js';
import { startDaemon } from '../../src/daemon.js';
import { RpcCode, RpcError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { NodeClient } from '../../src/node/client.js';
import { Shapes } from '../../src/rpc/shapes/json.js';
import { Subscriptions, type SubscriberSink } from '../../src/rpc/subscriptions.js';
import { flashblockPayload, notification, notificationPrefix } from '../../src/rpc/shapes/subscription.js';
import { executionReceiptSource } from '../../src/rpc/methods/executed.js';
import { captureExecution } from '../helpers/capture-execution.js';
import { feed, makePipeline } from '../helpers/ingest.js';
import { unichainMessages } from '../helpers/fixtures.js';

interface Note {
  jsonrpc: string;
  method: string;
  params: { subscription: string; result: unknown };
}

class Sink implements SubscriberSink {
  static next = 1;
  readonly id = Sink.next++;
  readonly texts: string[] = [];
  private waiter: { n: number; resolve: () => void } | null = null;
  send(text: string): boolean {
    this.texts.push(text);
    if (this.waiter !== null && this.texts.length >= this.waiter.n) this.waiter.resolve();
    return true;
  }
  /** Resolves once `n` messages arrived. */
  received(n: number): Promise<void> {
    if (this.texts.length >= n) return Promise.resolve();
    return new Promise((resolve) => (this.waiter = { n, resolve }));
  }
  notes(id?: string): Note[] {
    return this.texts.map((x) => JSON.parse(x) as Note).filter((n) => id === undefined || n.params.subscription === id);
  }
}

function hub(nodeUrl = 'http://127.0.0.1:9') {
  const { pipeline, senders } = makePipeline();
  const metrics = createMetrics({ version: 'test', commit: 'test' });
  const node = new NodeClient({ url: nodeUrl, timeoutMs: 2000, maxSockets: 2 });
  const subs = new Subscriptions({ events: pipeline.events, node, shapes: new Shapes(senders), metrics, log: silentLogger });
  return { pipeline, metrics, subs };
}

const uni = unichainMessages();
const LOG_ADDRESS = '0xf878f0340bf132c28f3211e8b46c569edf817495';
const firstTopic = (): string => {
  for (const m of uni) {
    const receipts = (m.metadata as { receipts: Record<string, Record<string, { logs: { topics: string[] }[] }>> }).receipts;
    for (const r of Object.values(receipts)) for (const v of Object.values(r)) if (v.logs?.[0]) return v.logs[0].topics[0]!;
  }
  throw new Error('fixture has no logs');
};

/** The code and message of the RpcError `fn` throws. */
function rpcErrorOf(fn: () => unknown): { code: number; message: string } {
  try {
    fn();
  } catch (e) {
    if (e instanceof RpcError) return { code: e.code, message: e.message };
    throw e;
  }
  return { code: 0, message: 'nothing thrown' };
}

t.test('bad params are -32602 naming the parameter; the per-connection cap is enforced', async (t) => {
  const { subs } = hub();
  const s = new Sink();
  t.match(rpcErrorOf(() => subs.subscribe(s, [])), { code: RpcCode.INVALID_PARAMS, message: /params\[0\]: unsupported subscription kind undefined/ });
  t.match(rpcErrorOf(() => subs.subscribe(s, ['bogus'])), { code: RpcCode.INVALID_PARAMS, message: /params\[0\].*"bogus"/ });
  t.match(rpcErrorOf(() => subs.subscribe(s, ['newFlashblockTransactions', 'yes'])), { code: RpcCode.INVALID_PARAMS, message: /params\[1\]: expected a boolean/ });
  t.match(rpcErrorOf(() => subs.subscribe(s, ['pendingLogs', { address: '0x12' }])), { code: RpcCode.INVALID_PARAMS, message: /params\[1\]\.address/ });
  t.match(rpcErrorOf(() => subs.subscribe(s, ['logs', { topics: [null, '0xzz'] }])), { code: RpcCode.INVALID_PARAMS, message: /params\[1\]\.topics\[1\]/ });
  t.match(rpcErrorOf(() => subs.subscribe(s, ['logs', { topics: [null, null, null, null, null] }])), { code: RpcCode.INVALID_PARAMS, message: /at most 4/ });
  t.match(rpcErrorOf(() => subs.subscribe(s, ['pendingLogs', 'x'])), { code: RpcCode.INVALID_PARAMS, message: /params\[1\]: expected a filter object/ });
  const node = new NodeClient({ url: 'http://127.0.0.1:9', timeoutMs: 10, maxSockets: 1 });
  const p = makePipeline();
  const small = new Subscriptions({ events: p.pipeline.events, node, shapes: new Shapes(p.senders), metrics: createMetrics({ version: 't', commit: 't' }), log: silentLogger }, 3);
  const c = new Sink();
  const ids = [small.subscribe(c, ['newFlashblocks']), small.subscribe(c, ['pendingLogs']), small.subscribe(c, ['newHeads'])];
  for (const id of ids) t.match(id, /^0x[0-9a-f]{32}$/, '16-byte random hex id');
  t.equal(new Set(ids).size, 3);
  t.match(rpcErrorOf(() => small.subscribe(c, ['logs'])), { code: RpcCode.LIMIT_EXCEEDED, message: /limit 3/ });
  t.ok(small.subscribe(new Sink(), ['logs']), 'the cap is per connection');
  t.notOk(small.unsubscribe(new Sink(), ids[0]!), "cannot cancel another connection's subscription");
  t.ok(small.unsubscribe(c, ids[0]!));
  t.notOk(small.unsubscribe(c, ids[0]!), 'second unsubscribe is false');
  t.ok(small.subscribe(c, ['logs']), 'room again after unsubscribe');
  small.disconnect(c);
  t.equal(small.size, 1, 'disconnect dropped all of that connection');
});

t.test('pending kinds: one shared payload per flashblock, tx hashes or full, filtered pendingLogs', async (t) => {
  const { pipeline, metrics, subs } = hub();
  const a = new Sink();
  const b = new Sink();
  const idA = subs.subscribe(a, ['newFlashblocks']);
  const idB = subs.subscribe(b, ['newFlashblocks']);
  const txHashes = subs.subscribe(a, ['newFlashblockTransactions']);
  const txFull = subs.subscribe(b, ['newFlashblockTransactions', true]);
  const logsAll = subs.subscribe(a, ['pendingLogs']);
  const logsAddr = subs.subscribe(a, ['pendingLogs', { address: LOG_ADDRESS, topics: [[firstTopic(), '0x' + '00'.repeat(32)]] }]);
  const logsOther = subs.subscribe(b, ['pendingLogs', { address: '0x' + '12'.repeat(20) }]);
  const logsTopic2 = subs.subscribe(b, ['pendingLogs', { topics: [null, firstTopic()] }]);
  t.equal(metrics.wsSubscriptions.newFlashblocks.value, 2);
  t.equal(metrics.wsSubscriptions.pendingLogs.value, 4);

  for (const m of uni) feed(pipeline, m);
  t.equal(a.texts.length, 0, 'notifications leave as fan-out tasks, after the apply has returned');
  await pipeline.events.fanout.idle();
  const blocksA = a.notes(idA);
  t.equal(blocksA.length, uni.length, 'one newFlashblocks notification per flashblock');
  t.equal(b.notes(idB).length, uni.length);
  t.equal(blocksA[0]!.method, 'eth_subscription');
  for (let i = 0; i < uni.length; i++) {
    const r = blocksA[i]!.params.result as { hash: string; number: string; flashblockIndex: string; transactions: string[] };
    t.equal(r.hash, (uni[i]!.diff as { block_hash: string }).block_hash, `flashblock ${i}: the pending block as of it`);
    t.equal(r.number, '0x21e3b52');
    t.equal(r.flashblockIndex, '0x' + i.toString(16), 'with the flashblock index (the position X-Flashblock names)');
    t.ok(r.transactions.every((x) => typeof x === 'string'), 'hashes, not objects');
  }
  const textA = a.texts.filter((x) => x.includes(idA));
  const textB = b.texts.filter((x) => x.includes(idB));
  t.same(textA.map((x) => x.replace(idA, '')), textB.map((x) => x.replace(idB, '')), 'identical payload bytes; only the id differs');

  const totalTxs = uni.reduce((n, m) => n + (m.diff as { transactions: unknown[] }).transactions.length, 0);
  const hashes = a.notes(txHashes).map((n) => n.params.result);
  t.equal(hashes.length, totalTxs, 'one notification per new transaction');
  t.ok(hashes.every((h) => typeof h === 'string' && /^0x[0-9a-f]{64}$/.test(h)));
  t.equal(new Set(hashes).size, totalTxs, 'no repeats across flashblocks');
  const full = b.notes(txFull).map((n) => n.params.result as { hash: string; from: string; receipt: { transactionHash: string; status: string } | null });
  t.same(full.map((x) => x.hash), hashes, 'full objects in the same order');
  t.ok(full.every((x) => x.receipt !== null && x.receipt.transactionHash === x.hash), 'each with its receipt');

  const all = a.notes(logsAll).map((n) => n.params.result as { address: string; logIndex: string; transactionHash: string });
  t.equal(all.length, 4, 'every log of the capture, one per message');
  t.ok(all.every((l) => l.address === LOG_ADDRESS));
  t.same(a.notes(logsAddr).map((n) => n.params.result), all.map((x) => x), 'address + OR-topic filter matches them all');
  t.equal(b.notes(logsOther).length, 0, 'other address: nothing');
  t.equal(b.notes(logsTopic2).length, 0, 'second topic position required but the logs have one topic');

  subs.disconnect(a);
  subs.disconnect(b);
  t.equal(subs.size, 0);
  t.equal(metrics.wsSubscriptions.pendingLogs.value, 0, 'gauges back to zero');
  subs.close();
});

t.test('canonical kinds: newHeads and logs fetched once from the node per canonical block', async (t) => {
  const calls: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const r = JSON.parse(body) as { id: number; method: string; params: unknown[] };
      calls.push(r.method);
      const result = r.method === 'eth_getBlockByNumber'
        ? { number: r.params[0], hash: '0x' + 'ab'.repeat(32), transactions: ['0x01'], uncles: [] }
        : [
          { address: '0x' + 'aa'.repeat(20), topics: ['0x' + '11'.repeat(32)], data: '0x', blockNumber: '0x10', logIndex: '0x0' },
          { address: '0x' + 'bb'.repeat(20), topics: ['0x' + '22'.repeat(32)], data: '0x', blockNumber: '0x10', logIndex: '0x1' },
        ];
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ jsonrpc: '2.0', id: r.id, result }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const port = (server.address() as { port: number }).port;
  const { pipeline, subs } = hub(`http://127.0.0.1:${port}`);
  const s = new Sink();
  const heads = subs.subscribe(s, ['newHeads']);
  subs.subscribe(new Sink(), ['newHeads']);
  const logsB = subs.subscribe(s, ['logs', { address: '0x' + 'bb'.repeat(20) }]);
  pipeline.settle(16, null);
  await s.received(2);
  const h = s.notes(heads);
  t.equal(h.length, 1);
  t.same(h[0]!.params.result, { number: '0x10', hash: '0x' + 'ab'.repeat(32) }, 'header without transactions/uncles');
  const l = s.notes(logsB);
  t.equal(l.length, 1, 'logs filtered locally');
  t.equal((l[0]!.params.result as { logIndex: string }).logIndex, '0x1');
  t.same(calls.sort(), ['eth_getBlockByNumber', 'eth_getLogs'], 'one node call per kind, not per subscriber');
  subs.close();
});

t.test('over a real socket: viem raw eth_subscribe gets newFlashblocks; eth_unsubscribe stops them', async (t) => {
  const config = { ...loadConfig([], {}), port: 0, metricsPort: 0, host: '127.0.0.1', flashblocksUrls: [], nodeRpcUrl: 'http://127.0.0.1:9' };
  const d = await startDaemon(config, { log: silentLogger });
  t.teardown(() => d.stop());
  const client = createPublicClient({ transport: webSocket(`ws://127.0.0.1:${d.rpcPort}/`, { keepAlive: false, reconnect: false }) });
  const got: { hash: string }[] = [];
  const logs: unknown[] = [];
  let allArrived: () => void = () => {};
  const arrived = new Promise<void>((resolve) => (allArrived = resolve));
  const check = (): void => {
    if (got.length >= uni.length && logs.length >= 4) allArrived();
  };
  const { transport } = client;
  const sub = await transport.subscribe({
    params: ['newFlashblocks'] as never,
    onData: (data: { result?: unknown }) => {
      got.push(data.result as { hash: string });
      check();
    },
  });
  t.match(sub.subscriptionId, /^0x[0-9a-f]{32}$/);
  const logSub = await transport.subscribe({
    params: ['pendingLogs', { address: LOG_ADDRESS }] as never,
    onData: (data: { result?: unknown }) => {
      logs.push(data.result);
      check();
    },
  });
  for (const m of uni) feed(d.pipeline, m);
  await arrived;
  t.same(got.map((b) => b.hash), uni.map((m) => (m.diff as { block_hash: string }).block_hash), 'one pending block per flashblock, in order');
  t.equal(logs.length, 4, 'pendingLogs over the socket');
  await sub.unsubscribe();
  await logSub.unsubscribe();
  t.equal(d.metrics.wsSubscriptions.newFlashblocks.value, 0);
  const socket = await transport.getRpcClient();
  socket.close();
});

t.test('newFlashblocks over a real socket: the shared payload sent as fragments around one encoded copy arrives as the exact message', async (t) => {
  const config = { ...loadConfig([], {}), port: 0, metricsPort: 0, host: '127.0.0.1', flashblocksUrls: [], nodeRpcUrl: 'http://127.0.0.1:9' };
  const d = await startDaemon(config, { log: silentLogger });
  t.teardown(() => d.stop());
  const ws = new WebSocket(`ws://127.0.0.1:${d.rpcPort}/`);
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  t.teardown(() => ws.close());
  const texts: string[] = [];
  let wake: (() => void) | null = null;
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    t.notOk(isBinary, 'a text message');
    texts.push(data.toString('utf8'));
    wake?.();
  });
  const until = async (n: number): Promise<void> => {
    while (texts.length < n) await new Promise<void>((r) => (wake = r));
  };
  ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['newFlashblocks'] }));
  await until(1);
  const id = (JSON.parse(texts[0]!) as { result: string }).result;
  const two = new WebSocket(`ws://127.0.0.1:${d.rpcPort}/`);
  await new Promise((resolve) => two.once('open', resolve));
  t.teardown(() => two.close());
  const twoTexts: string[] = [];
  two.on('message', (data: Buffer) => twoTexts.push(data.toString('utf8')));
  two.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['newFlashblocks'] }));
  while (twoTexts.length < 1) await new Promise((r) => setTimeout(r, 5));
  const idTwo = (JSON.parse(twoTexts[0]!) as { result: string }).result;

  const shapes = new Shapes(d.pipeline.senders);
  const expected: string[] = [];
  for (const [i, m] of uni.entries()) {
    feed(d.pipeline, m);
    const block = d.view.pendingBlock()!;
    expected.push(notification(notificationPrefix(id), JSON.stringify(flashblockPayload(shapes.blockObject(block, false, i), i))));
  }
  t.ok(expected.every((x) => x.length > 1024), 'every payload is large enough to go out as fragments');
  await until(1 + uni.length);
  t.same(texts.slice(1), expected, 'each notification is the exact message the string path builds');
  for (let i = 0; i < 100 && twoTexts.length < 1 + uni.length; i++) await new Promise((r) => setTimeout(r, 10));
  t.same(twoTexts.slice(1).map((x) => x.replace(idTwo, id)), expected, 'and a second subscriber gets the same bytes but its id');
  const after = (await new Promise<Record<string, unknown>>((resolve) => {
    ws.once('message', (data: Buffer) => resolve(JSON.parse(data.toString('utf8')) as Record<string, unknown>));
    ws.send(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'eth_chainId', params: [] }));
  }));
  t.equal(after.id, 7, 'the connection carries ordinary answers after fragmented messages');
});

t.test('newFlashblocks is published per topic: connections share a slot id, a second subscription has its own, order holds with sent kinds', async (t) => {
  const config = { ...loadConfig([], {}), port: 0, metricsPort: 0, host: '127.0.0.1', flashblocksUrls: [], nodeRpcUrl: 'http://127.0.0.1:9' };
  const d = await startDaemon(config, { log: silentLogger });
  t.teardown(() => d.stop());
  const open = async (): Promise<{ ws: WebSocket; inbox: Record<string, unknown>[]; call(method: string, params: unknown[]): Promise<unknown> }> => {
    const ws = new WebSocket(`ws://127.0.0.1:${d.rpcPort}/`);
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    t.teardown(() => ws.close());
    const inbox: Record<string, unknown>[] = [];
    const answers = new Map<number, (r: unknown) => void>();
    ws.on('message', (data: Buffer) => {
      const m = JSON.parse(data.toString('utf8')) as Record<string, unknown>;
      if (m.method === 'eth_subscription') inbox.push(m);
      else answers.get(m.id as number)?.(m.result);
    });
    let id = 0;
    const call = (method: string, params: unknown[]): Promise<unknown> => new Promise((resolve) => {
      answers.set(++id, resolve);
      ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
    return { ws, inbox, call };
  };
  const a = await open();
  const b = await open();
  const a1 = (await a.call('eth_subscribe', ['newFlashblocks'])) as string;
  const a2 = (await a.call('eth_subscribe', ['newFlashblocks'])) as string;
  const aTx = (await a.call('eth_subscribe', ['newFlashblockTransactions'])) as string;
  const b1 = (await b.call('eth_subscribe', ['newFlashblocks'])) as string;
  t.not(a1, a2, 'two subscriptions on one connection have two ids');
  t.equal(b1, a1, "another connection's first subscription shares the first one's id (one message for both)");
  t.equal(d.metrics.wsSubscriptions.newFlashblocks.value, 3);

  const half = Math.ceil(uni.length / 2);
  for (const m of uni.slice(0, half)) feed(d.pipeline, m);
  await d.pipeline.events.fanout.idle();
  t.equal(await a.call('eth_unsubscribe', [a2]), true, 'the second subscription is cancelled');
  t.equal(await b.call('eth_unsubscribe', [a2]), false, "b cannot cancel a slot it does not hold");
  for (const m of uni.slice(half)) feed(d.pipeline, m);
  await d.pipeline.events.fanout.idle();
  const ofSub = (inbox: Record<string, unknown>[], id: string) => inbox.map((m) => m.params as { subscription: string; result: unknown }).filter((p) => p.subscription === id);
  const hashes = uni.map((m) => (m.diff as { block_hash: string }).block_hash);
  for (let i = 0; i < 200 && (ofSub(a.inbox, a1).length < uni.length || ofSub(b.inbox, b1).length < uni.length); i++) await new Promise((r) => setTimeout(r, 10));
  t.same(ofSub(a.inbox, a1).map((p) => (p.result as { hash: string }).hash), hashes, 'a: every flashblock once, in order');
  t.same(ofSub(b.inbox, b1).map((p) => (p.result as { hash: string }).hash), hashes, 'b: the same');
  t.same(ofSub(a.inbox, a2).map((p) => (p.result as { hash: string }).hash), hashes.slice(0, half), 'the cancelled one: until its eth_unsubscribe');
  // On a, each flashblock's transaction hashes (sent to it alone) follow that flashblock's published block, before the next one.
  const txOf = new Map<string, number>();
  uni.forEach((m, i) => (m.diff as { transactions: string[] }).transactions.forEach((raw) => txOf.set(keccak256(raw as `0x${string}`), i)));
  let at = -1;
  let ordered = true;
  for (const p of a.inbox.map((m) => m.params as { subscription: string; result: unknown })) {
    if (p.subscription === a1) at++;
    else if (p.subscription === aTx) ordered &&= txOf.get(p.result as string) === at;
  }
  t.ok(ordered, 'published and sent notifications keep the order of the flashblocks on one connection');
  t.equal(ofSub(a.inbox, aTx).length, txOf.size, 'every transaction hash once');
});

t.test('newPendingTransactions: the hash of each transaction as it is preconfirmed (raw ws and ethers on "pending")', async (t) => {
  const config = { ...loadConfig([], {}), port: 0, metricsPort: 0, host: '127.0.0.1', flashblocksUrls: [], nodeRpcUrl: 'http://127.0.0.1:9' };
  const d = await startDaemon(config, { log: silentLogger });
  t.teardown(() => d.stop());
  const url = `ws://127.0.0.1:${d.rpcPort}/`;
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  t.teardown(() => ws.close());
  const inbox: Record<string, unknown>[] = [];
  let wake: (() => void) | null = null;
  ws.on('message', (data: Buffer) => {
    inbox.push(JSON.parse(data.toString('utf8')) as Record<string, unknown>);
    wake?.();
  });
  const next = async (pred: (m: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> => {
    for (;;) {
      const i = inbox.findIndex(pred);
      if (i >= 0) return inbox.splice(i, 1)[0]!;
      await new Promise<void>((r) => (wake = r));
    }
  };
  const call = (id: number, method: string, params: unknown[]): Promise<Record<string, unknown>> => {
    ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    return next((m) => m.id === id);
  };

  const bad = (await call(1, 'eth_subscribe', ['newPendingTransactionz'])) as { error?: { code: number; message: string } };
  t.equal(bad.error?.code, -32602, 'an unknown kind is a JSON-RPC error');
  t.match(bad.error?.message, /unsupported subscription kind "newPendingTransactionz"; expected one of .*newPendingTransactions/);
  t.equal(ws.readyState, WebSocket.OPEN, 'the connection stays open');
  const chain = (await call(2, 'eth_chainId', [])) as { error?: unknown };
  t.ok('result' in chain || 'error' in chain, 'and keeps answering');

  const hashesSub = (await call(3, 'eth_subscribe', ['newPendingTransactions'])) as { result: string };
  const fullSub = (await call(4, 'eth_subscribe', ['newPendingTransactions', true])) as { result: string };
  t.match(hashesSub.result, /^0x[0-9a-f]{32}$/);
  t.equal(d.metrics.wsSubscriptions.newPendingTransactions.value, 2);

  const provider = new WebSocketProvider(url, 31337, { staticNetwork: true });
  t.teardown(() => provider.destroy());
  const viaEthers: string[] = [];
  const ethersSaw = new Promise<void>((resolve) => {
    void provider.on('pending', (hash: string) => {
      viaEthers.push(hash);
      if (viaEthers.length === expected.length) resolve();
    });
  });
  // ethers subscribes asynchronously: wait until the hub holds its subscription too.
  for (let i = 0; i < 500 && d.metrics.wsSubscriptions.newPendingTransactions.value < 3; i++) await new Promise((r) => setTimeout(r, 10));
  t.equal(d.metrics.wsSubscriptions.newPendingTransactions.value, 3, "ethers' provider.on('pending') subscribed");

  const expected = uni.flatMap((m) => (m.diff as { transactions: string[] }).transactions).map((raw) => keccak256(raw as `0x${string}`));
  for (const m of uni) feed(d.pipeline, m);
  const hashes: string[] = [];
  const full: { hash: string; blockNumber: string }[] = [];
  while (hashes.length < expected.length || full.length < expected.length) {
    const n = (await next((m) => m.method === 'eth_subscription')) as unknown as Note;
    if (n.params.subscription === hashesSub.result) hashes.push(n.params.result as string);
    else if (n.params.subscription === fullSub.result) full.push(n.params.result as { hash: string; blockNumber: string });
  }
  t.same(hashes, expected, 'hashes in preconfirmation order');
  t.same(full.map((x) => x.hash), expected, 'with true: transaction objects');
  t.ok(full.every((x) => typeof x.blockNumber === 'string'));
  await ethersSaw;
  t.same(viaEthers, expected, "ethers' 'pending' event fires for each preconfirmed transaction");
});

t.test('newFlashblockTransactions with full objects on a post-Azul stream: receipts from execution, in stream order', async (t) => {
  // With metadata: receipts from the stream (the reference payloads).
  const ref = hub();
  const refSink = new Sink();
  const refId = ref.subs.subscribe(refSink, ['newFlashblockTransactions', true]);
  for (const m of uni) feed(ref.pipeline, m);
  await ref.pipeline.events.fanout.idle();
  const want = refSink.texts;

  // Post-Azul (metadata `{block_number}` only) with an engine that executes flashblocks when the test says so.
  const gates = new Map<number, (ok: boolean) => void>();
  const ex = captureExecution((_n, index) => new Promise<boolean>((resolve) => gates.set(index, resolve)));
  const { pipeline, senders } = makePipeline();
  const metrics = createMetrics({ version: 'test', commit: 'test' });
  const node = new NodeClient({ url: 'http://127.0.0.1:9', timeoutMs: 2000, maxSockets: 2 });
  const subs = new Subscriptions({ events: pipeline.events, node, shapes: new Shapes(senders, executionReceiptSource(ex)), metrics, log: silentLogger, execution: ex });
  t.teardown(() => subs.close());
  const full = new Sink();
  const hashes = new Sink();
  const fullId = subs.subscribe(full, ['newFlashblockTransactions', true]);
  subs.subscribe(hashes, ['newFlashblockTransactions']);
  for (const m of uni) {
    const c = structuredClone(m) as { metadata: Record<string, unknown> };
    c.metadata = { block_number: c.metadata.block_number };
    feed(pipeline, c as unknown as Record<string, unknown>);
  }
  await pipeline.events.fanout.idle();
  t.equal(hashes.texts.length, want.length, 'hashes are notified at once');
  await new Promise((r) => setImmediate(r));
  t.equal(full.texts.length, 0, 'full objects wait for the engine');

  const counts = uni.map((m) => (m.diff as { transactions: unknown[] }).transactions.length);
  // Flashblock 1 executes before 0 has answered: nothing leaves out of order.
  gates.get(1)!(true);
  await new Promise((r) => setImmediate(r));
  t.equal(full.texts.length, 0, 'flashblock 1 waits behind flashblock 0');
  gates.get(0)!(true);
  await full.received(counts[0]! + counts[1]!);
  for (let i = 2; i < uni.length; i++) {
    await new Promise((r) => setImmediate(r));
    gates.get(i)!(true);
  }
  await full.received(want.length);
  type Payload = { hash: string; type: string; nonce?: string; depositReceiptVersion?: string; receipt: Record<string, unknown> | null };
  const got = full.notes(fullId).map((n) => n.params.result as Payload);
  const ref2 = refSink.notes(refId).map((n) => n.params.result as Payload);
  t.same(got.map((x) => x.hash), ref2.map((x) => x.hash), 'the same transactions in the same order');
  t.same(got.map((x) => JSON.stringify(x.receipt)), ref2.map((x) => JSON.stringify(x.receipt)), 'receipts byte-identical to those of the stream with receipts');
  // The deposit's transaction object takes nonce/depositReceiptVersion from the stream's receipt only (context.ts).
  const plain = (x: Payload) => ({ ...x, receipt: null, ...(x.type === '0x7e' ? { nonce: null, depositReceiptVersion: null } : {}) });
  t.same(got.map(plain), ref2.map(plain), 'transaction objects identical (deposit nonce aside)');
  const receipts = got.map((x) => x.receipt);
  t.ok(receipts.every((r) => r !== null), 'every transaction with its receipt');
  t.ok(receipts.slice(1).every((r) => typeof r!.l1Fee === 'string'), 'user transactions carry the OP fee fields');
});

t.test('newFlashblockTransactions full: an engine that cannot answer (readyFor false) leaves the receipt null', async (t) => {
  const ex = captureExecution(() => false);
  const { pipeline, senders } = makePipeline();
  const node = new NodeClient({ url: 'http://127.0.0.1:9', timeoutMs: 2000, maxSockets: 2 });
  // The shapes' source sees no executed receipts (the engine is not there).
  const down = { ...ex, engine: { receipt: () => null, blockReceipts: () => null } as unknown as typeof ex.engine };
  const subs = new Subscriptions({ events: pipeline.events, node, shapes: new Shapes(senders, executionReceiptSource(down)), metrics: createMetrics({ version: 't', commit: 't' }), log: silentLogger, execution: down });
  t.teardown(() => subs.close());
  const full = new Sink();
  const id = subs.subscribe(full, ['newFlashblockTransactions', true]);
  const m = structuredClone(uni[0]!) as { metadata: Record<string, unknown> };
  m.metadata = { block_number: m.metadata.block_number };
  feed(pipeline, m as unknown as Record<string, unknown>);
  const n = (uni[0]!.diff as { transactions: unknown[] }).transactions.length;
  await full.received(n);
  t.ok(full.notes(id).every((x) => (x.params.result as { receipt: unknown }).receipt === null), 'sent without receipts, not held back');
});
