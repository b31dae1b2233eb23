// Polling filters driven by real state events: the Unichain capture fed through the ingest pipeline (its flashblocks
// applied, its block settled), a node over HTTP that answers with the canonical block this test decides (so a block
// can land without a log that was preconfirmed), and a clock the test moves. Then the RPC server over HTTP: the
// filter methods are the daemon's own (never forwarded), their errors and the per-client cap.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { loadConfig, type Config } from '../../src/config.js';
import { RpcCode, RpcError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { NodeClient } from '../../src/node/client.js';
import type { PendingExecution } from '../../src/rpc/execution.js';
import { Filters, type FilterOptions } from '../../src/rpc/filters.js';
import { methodContext } from '../../src/rpc/server.js';
import type { SubscriberSink } from '../../src/rpc/subscriptions.js';
import type { BlockView } from '../../src/state/view.js';
import { captureExecution } from '../helpers/capture-execution.js';
import { unichainMessages } from '../helpers/fixtures.js';
import { feed, makePipeline } from '../helpers/ingest.js';
import { startRpc } from '../helpers/rpc-harness.js';

type Log = Record<string, unknown> & { transactionHash: string; logIndex: string; address: string; blockNumber: string; removed: boolean };

const uni = unichainMessages();
const HEIGHT = 0x21e3b52;
const LOG_ADDRESS = '0xf878f0340bf132c28f3211e8b46c569edf817495';
const HEX = (n: number): string => '0x' + n.toString(16);
const blockHashOf = (n: number): string => '0x' + n.toString(16).padStart(64, 'b');

/**
 * A node over HTTP: eth_getLogs answers `canonicalLogs` (by block number), eth_getBlockByNumber a block whose hash is
 * blockHashOf(n), anything else 0x1. Records the methods called.
 */
async function startNode(): Promise<{ url: string; canonicalLogs: Map<number, Log[]>; calls: string[]; close(): Promise<void> }> {
  const canonicalLogs = new Map<number, Log[]>();
  const calls: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const answer = (m: { id: number; method: string; params: unknown[] }): unknown => {
        calls.push(m.method);
        let result: unknown = '0x1';
        if (m.method === 'eth_getLogs') {
          const q = m.params[0] as { fromBlock: string; toBlock: string };
          const out: Log[] = [];
          for (let n = Number(q.fromBlock); n <= Number(q.toBlock); n++) out.push(...(canonicalLogs.get(n) ?? []));
          result = out;
        } else if (m.method === 'eth_getBlockByNumber') {
          const n = Number(m.params[0]);
          result = { number: HEX(n), hash: blockHashOf(n) };
        }
        return { jsonrpc: '2.0', id: m.id, result };
      };
      const msg = JSON.parse(body) as Parameters<typeof answer>[0] | Parameters<typeof answer>[0][];
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(Array.isArray(msg) ? msg.map(answer) : answer(msg)));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    canonicalLogs,
    calls,
    // Kept-alive sockets of the daemon's node client would hold close() for the server's keep-alive timeout (5 s).
    close: () => new Promise<void>((r) => {
      server.close(() => r());
      server.closeAllConnections();
    }),
  };
}

class Sink implements SubscriberSink {
  static next = 1;
  readonly id = Sink.next++;
  send(): boolean {
    return true;
  }
}

/** A registry over a fresh pipeline, the node at `nodeUrl`, a clock the test sets, and `opts`. */
function registry(nodeUrl: string, opts: FilterOptions = {}, execution: PendingExecution | null = null) {
  const { pipeline, state, senders } = makePipeline();
  const metrics = createMetrics({ version: 'test', commit: 'test' });
  const node = new NodeClient({ url: nodeUrl, timeoutMs: 2000, maxSockets: 2 });
  const ctx = methodContext({
    options: loadConfig([], {}), view: state, senders, events: pipeline.events, node, metrics, log: silentLogger,
    pendingUsable: () => state.pendingBlock() !== null, execution,
  });
  const clock = { ms: 1_000 };
  const filters = new Filters(ctx, opts, () => clock.ms);
  const http = { clientIp: () => '10.0.0.1' };
  const call = (method: string, params: unknown[] = [], sink: SubscriberSink | null = null) => filters.call(method, params, sink, sink === null ? http : null);
  return { pipeline, state, metrics, filters, clock, call, close: () => (filters.close(), ctx.subscriptions.close()) };
}

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

/** Polls a filter until it has changes (a canonical block's reconciliation waits for the node), within `ms`. */
async function changesOf(call: (m: string, p: unknown[]) => unknown, id: string, ms = 5000): Promise<unknown[]> {
  const end = Date.now() + ms;
  for (;;) {
    const c = call('eth_getFilterChanges', [id]) as unknown[];
    if (c.length > 0 || Date.now() > end) return c;
    await new Promise((r) => setTimeout(r, 5));
  }
}

const node = await startNode();
t.teardown(() => node.close());

t.test('a log filter gets each preconfirmed log once, as its flashblock is applied; address, topics and range apply', async (t) => {
  const r = registry(node.url);
  t.teardown(r.close);
  const all = r.call('eth_newFilter', [{}]) as string;
  const byAddress = r.call('eth_newFilter', [{ address: LOG_ADDRESS.toUpperCase().replace('0X', '0x') }]) as string;
  const other = r.call('eth_newFilter', [{ address: '0x' + '12'.repeat(20) }]) as string;
  const firstTopicOnly = r.call('eth_newFilter', [{ topics: [null, null, null, null] }]) as string;
  const past = r.call('eth_newFilter', [{ toBlock: HEX(HEIGHT - 1) }]) as string;
  const future = r.call('eth_newFilter', [{ fromBlock: HEX(HEIGHT + 1), toBlock: 'latest' }]) as string;
  const exact = r.call('eth_newFilter', [{ fromBlock: HEX(HEIGHT), toBlock: HEX(HEIGHT) }]) as string;
  t.match(all, /^0x[0-9a-f]{32}$/, "a 16-byte random hex id, like geth's");
  t.equal(r.metrics.rpcFilters.logs.value, 7, 'the gauge counts log filters');

  for (const m of uni.slice(0, 3)) feed(r.pipeline, m);
  const first = r.call('eth_getFilterChanges', [all]) as Log[];
  t.equal(first.length, 2, 'flashblocks 1 and 2 carried one log each: both delivered as they were applied');
  t.ok(first.every((l) => l.blockNumber === HEX(HEIGHT) && l.removed === false));
  t.same(r.call('eth_getFilterChanges', [all]), [], 'a poll consumes');
  for (const m of uni.slice(3)) feed(r.pipeline, m);
  feed(r.pipeline, uni[4]!);
  const rest = r.call('eth_getFilterChanges', [all]) as Log[];
  t.equal(rest.length, 2, 'the other two logs, once (a repeated frame adds nothing)');
  const got = [...first, ...rest];
  t.ok(got.every((l, i) => i === 0 || Number(l.logIndex) > Number(got[i - 1]!.logIndex)), 'in block order');
  t.equal(new Set(got.map((l) => `${l.transactionHash}:${l.logIndex}`)).size, 4, 'four distinct logs');
  t.same((r.call('eth_getFilterChanges', [byAddress]) as Log[]).map((l) => l.transactionHash), got.map((l) => l.transactionHash), 'an address filter (any case) matches them all');
  t.same(r.call('eth_getFilterChanges', [other]), [], 'another address: none');
  t.same(r.call('eth_getFilterChanges', [firstTopicOnly]), [], 'four topic positions need four topics');
  t.same(r.call('eth_getFilterChanges', [past]), [], 'a toBlock in the past delivers nothing new');
  t.same(r.call('eth_getFilterChanges', [future]), [], 'a fromBlock above the block: nothing from it');
  t.equal((r.call('eth_getFilterChanges', [exact]) as Log[]).length, 4, 'a range holding the block: all four');
});

t.test('when the block lands: a delivered log the canonical block lacks comes again removed, a canonical log never delivered comes', async (t) => {
  const r = registry(node.url);
  t.teardown(r.close);
  const id = r.call('eth_newFilter', [{ address: LOG_ADDRESS }]) as string;
  const blocks = r.call('eth_newBlockFilter') as string;
  for (const m of uni) feed(r.pipeline, m);
  const preconfirmed = r.call('eth_getFilterChanges', [id]) as Log[];
  t.equal(preconfirmed.length, 4);

  // The block that landed holds the last three of those logs (another block hash) but not the first, and one more.
  const replacement: Log = { ...preconfirmed[0]!, transactionHash: '0x' + 'ee'.repeat(32), logIndex: '0x9', blockHash: blockHashOf(HEIGHT) };
  const landed: Log[] = [...preconfirmed.slice(1).map((l) => ({ ...l, blockHash: blockHashOf(HEIGHT) })), replacement, { ...replacement, address: '0x' + '12'.repeat(20), logIndex: '0xa' }];
  node.canonicalLogs.set(HEIGHT, landed);
  r.pipeline.settle(HEIGHT, null);
  const after = (await changesOf(r.call, id)) as Log[];
  t.same(after.map((l) => [l.transactionHash, l.logIndex, l.removed]), [
    [replacement.transactionHash, '0x9', false],
    [preconfirmed[0]!.transactionHash, preconfirmed[0]!.logIndex, true],
  ], 'the canonical log never preconfirmed, then the preconfirmed one the block lacks with removed: true; nothing else again');
  t.same({ ...after[1], removed: false }, preconfirmed[0], 'the removed log is the delivered one');
  t.same(r.call('eth_getFilterChanges', [blocks]), [blockHashOf(HEIGHT)], "the block filter: the landed block's hash");

  // Two more blocks land at once (no flashblocks of theirs seen): their hashes in order, their logs delivered.
  node.canonicalLogs.set(HEIGHT + 2, [{ ...replacement, blockNumber: HEX(HEIGHT + 2), transactionHash: '0x' + 'dd'.repeat(32) }]);
  r.pipeline.settle(HEIGHT + 2, null);
  t.same(await changesOf(r.call, blocks), [blockHashOf(HEIGHT + 1), blockHashOf(HEIGHT + 2)], 'each block hash once, in order');
  t.same(((await changesOf(r.call, id)) as Log[]).map((l) => l.transactionHash), ['0x' + 'dd'.repeat(32)], 'a canonical log of a block never preconfirmed');
  t.equal(r.metrics.rpcFilterDrops.node_error.value, 0);
});

t.test('pending-transaction filters: each preconfirmed hash once, in order; with true the transaction objects', async (t) => {
  const r = registry(node.url);
  t.teardown(r.close);
  const hashes = r.call('eth_newPendingTransactionFilter') as string;
  const full = r.call('eth_newPendingTransactionFilter', [true]) as string;
  const late = uni.slice(2);
  for (const m of uni.slice(0, 2)) feed(r.pipeline, m);
  const want = uni.flatMap((m) => (m.diff as { transactions: string[] }).transactions);
  const a = r.call('eth_getFilterChanges', [hashes]) as string[];
  for (const m of late) feed(r.pipeline, m);
  const b = r.call('eth_getFilterChanges', [hashes]) as string[];
  t.equal(a.length + b.length, want.length, 'one per transaction');
  const block = r.state.heldBlocks()[0]!;
  t.same([...a, ...b], [...Array(block.txCount).keys()].map((i) => block.txHash(i)), 'in block order');
  const objects = r.call('eth_getFilterChanges', [full]) as { hash: string; blockNumber: string }[];
  t.same(objects.map((o) => o.hash), [...a, ...b], 'objects of the same transactions');
  t.ok(objects.every((o) => o.blockNumber === HEX(HEIGHT)));
  t.equal(r.metrics.rpcFilters.pending_transactions.value, 2);
});

t.test('a stream without receipts: logs come once the engine has executed their flashblock, once', async (t) => {
  // The capture's receipts, readable only for flashblocks the test says were executed.
  const base = captureExecution();
  const executed = new Set<string>();
  const listeners = new Set<(b: BlockView, i: number) => void>();
  const engine = { ...base.engine, receipt: (h: string) => (executed.has(h) ? base.engine.receipt(h) : null) } as typeof base.engine;
  const ex: PendingExecution = { ...base, engine, onExecuted: (fn) => (listeners.add(fn), () => listeners.delete(fn)) };
  const r = registry(node.url, {}, ex);
  t.teardown(r.close);
  const id = r.call('eth_newFilter', [{}]) as string;
  for (const m of uni) {
    const c = structuredClone(m) as { metadata: Record<string, unknown> };
    c.metadata = { block_number: c.metadata.block_number };
    feed(r.pipeline, c as unknown as Record<string, unknown>);
  }
  t.same(r.call('eth_getFilterChanges', [id]), [], 'no log before execution');
  const block = r.state.heldBlocks()[0]!;
  const execute = (index: number): void => {
    for (let i = index === 0 ? 0 : block.txCountAt[index - 1]!; i < block.txCountAt[index]!; i++) executed.add(block.txHash(i));
    for (const fn of listeners) fn(block, index);
  };
  execute(0);
  execute(1);
  const one = r.call('eth_getFilterChanges', [id]) as Log[];
  t.equal(one.length, 1, "flashblock 1's log once it was executed");
  execute(1);
  for (let i = 2; i < uni.length; i++) execute(i);
  const rest = r.call('eth_getFilterChanges', [id]) as Log[];
  t.equal(rest.length, 3, 'the other three, and flashblock 1 not again');
  t.same([...one, ...rest].map((l) => Number(l.logIndex)), [0, 1, 2, 3].map((i) => Number(one[0]!.logIndex) + i), 'log indexes from execution, in order');
});

t.test('ids, uninstall, unknown ids, bad params, caps per client and in all, the buffer bound, the idle timeout', async (t) => {
  const r = registry(node.url, { maxFiltersPerClient: 2, maxFilters: 4, maxChangesPerFilter: 3, idleTimeoutMs: 60_000 });
  t.teardown(r.close);
  const a = r.call('eth_newPendingTransactionFilter') as string;
  const b = r.call('eth_newBlockFilter') as string;
  t.match(rpcErrorOf(() => r.call('eth_newBlockFilter')), { code: RpcCode.LIMIT_EXCEEDED, message: /too many filters for this client \(limit 2\)/ });
  const ws = new Sink();
  const c = r.call('eth_newFilter', [{}], ws) as string;
  r.call('eth_newBlockFilter', [], ws);
  t.match(rpcErrorOf(() => r.call('eth_newBlockFilter', [], new Sink())), { code: RpcCode.LIMIT_EXCEEDED, message: /limit 4 in all/ });
  t.equal(r.metrics.rpcFilterDrops.limit.value, 2, 'refusals counted');
  r.filters.disconnect(ws);
  t.equal(r.filters.size, 2, "a closed connection's filters go with it");
  t.match(rpcErrorOf(() => r.call('eth_getFilterChanges', [c])), { code: RpcCode.SERVER_ERROR, message: 'filter not found' });

  for (const m of uni) feed(r.pipeline, m);
  const hashes = r.call('eth_getFilterChanges', [a.toUpperCase().replace('0X', '0x')]) as string[];
  t.equal(hashes.length, 3, 'the buffer keeps the newest 3 (ids are case-insensitive)');
  const held = r.state.heldBlocks()[0]!;
  t.same(hashes, [held.txHash(held.txCount - 3), held.txHash(held.txCount - 2), held.txHash(held.txCount - 1)]);
  t.equal(r.metrics.rpcFilterDrops.buffer_full.value, held.txCount - 3, 'each dropped change counted');

  t.match(rpcErrorOf(() => r.call('eth_getFilterLogs', [b])), { code: RpcCode.SERVER_ERROR, message: 'filter not found' }, 'getFilterLogs of a block filter (geth)');
  t.match(rpcErrorOf(() => r.call('eth_getFilterChanges', ['0x' + '00'.repeat(16)])), { code: RpcCode.SERVER_ERROR, message: 'filter not found' });
  t.match(rpcErrorOf(() => r.call('eth_getFilterChanges', [])), { code: RpcCode.INVALID_PARAMS, message: /missing value/ });
  t.match(rpcErrorOf(() => r.call('eth_getFilterChanges', [7])), { code: RpcCode.INVALID_PARAMS, message: /filter id string/ });
  t.match(rpcErrorOf(() => r.call('eth_newFilter', [])), { code: RpcCode.INVALID_PARAMS, message: /missing value/ });
  t.match(rpcErrorOf(() => r.call('eth_newFilter', ['x'])), { code: RpcCode.INVALID_PARAMS, message: /expected a filter object/ });
  t.match(rpcErrorOf(() => r.call('eth_newFilter', [{ address: '0x12' }])), { code: RpcCode.INVALID_PARAMS, message: /address/ });
  t.match(rpcErrorOf(() => r.call('eth_newFilter', [{ fromBlock: 'soon' }])), { code: RpcCode.INVALID_PARAMS, message: /fromBlock/ });
  t.match(rpcErrorOf(() => r.call('eth_newFilter', [{ fromBlock: '0x5', toBlock: '0x4' }])), { code: RpcCode.INVALID_PARAMS, message: /after toBlock/ });
  t.match(rpcErrorOf(() => r.call('eth_newFilter', [{ blockHash: '0x' + '11'.repeat(32) }])), { code: RpcCode.INVALID_PARAMS, message: /use eth_getLogs/ });
  t.match(rpcErrorOf(() => r.call('eth_newBlockFilter', [1])), { code: RpcCode.INVALID_PARAMS, message: /at most 0/ });
  t.match(rpcErrorOf(() => r.call('eth_newPendingTransactionFilter', ['yes'])), { code: RpcCode.INVALID_PARAMS, message: /boolean/ });

  t.equal(r.call('eth_uninstallFilter', [b]), true);
  t.equal(r.call('eth_uninstallFilter', [b]), false, 'a second uninstall is false');
  t.equal(r.metrics.rpcFilters.blocks.value, 0);

  // Idle: `a` was polled at 1 s. At 59 s after that it stays; past 60 s it is removed.
  r.clock.ms = 1_000 + 59_000;
  r.filters.sweep();
  t.equal(r.filters.size, 1, 'polled within the timeout: kept');
  r.call('eth_getFilterChanges', [a]);
  r.clock.ms += 60_001;
  r.filters.sweep();
  t.equal(r.filters.size, 0, 'not polled for longer than the timeout: removed');
  t.equal(r.metrics.rpcFilterDrops.expired.value, 1);
  t.match(rpcErrorOf(() => r.call('eth_getFilterChanges', [a])), { message: 'filter not found' });
  t.equal(r.metrics.rpcFilters.pending_transactions.value, 0);
});

t.test('over HTTP the filter methods are answered by the daemon, never forwarded; the cap counts per client IP', async (t) => {
  const rpc = await startRpc({ nodeUrl: node.url, config: { maxFiltersPerClient: 1 } as unknown as Partial<Config> });
  t.teardown(() => rpc.close());
  const before = node.calls.length;
  const id = (await rpc.call('eth_newBlockFilter')).result as string;
  t.match(id, /^0x[0-9a-f]{32}$/);
  t.match(await rpc.call('eth_newFilter', [{}]), { error: { code: RpcCode.LIMIT_EXCEEDED, message: /limit 1/ } }, 'the same IP (127.0.0.1) holds one');
  t.same((await rpc.call('eth_getFilterChanges', [id])).result, []);
  t.match(await rpc.call('eth_getFilterChanges', ['0x' + 'ab'.repeat(16)]), { error: { code: -32000, message: 'filter not found' } });
  t.match(await rpc.call('eth_uninstallFilter', [id]), { result: true });
  t.match(await rpc.call('eth_uninstallFilter', [id]), { result: false });
  const batch = await rpc.post(JSON.stringify([{ jsonrpc: '2.0', id: 1, method: 'eth_newPendingTransactionFilter', params: [] }, { jsonrpc: '2.0', id: 2, method: 'eth_chainId', params: [] }]));
  t.match(JSON.parse(batch.text) as unknown[], [{ id: 1, result: /^0x[0-9a-f]{32}$/ }, { id: 2 }], 'in a batch too');
  t.same(node.calls.slice(before).filter((m) => m !== 'eth_chainId'), [], 'nothing but eth_chainId reached the node');
});
