// The one log filter (rpc/filter.ts) with go-ethereum's semantics, as a table; then the same cases through
// eth_getLogs over pending blocks and the pendingLogs subscription, which must agree with it.
import t from 'tap';
import { RpcCode, RpcError } from '../../src/errors.js';
import { GETLOGS_FILTER, logMatches, parseLogFilter, SUBSCRIPTION_FILTER } from '../../src/rpc/filter.js';
import { Shapes } from '../../src/rpc/shapes/json.js';
import { Subscriptions, type SubscriberSink } from '../../src/rpc/subscriptions.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { NodeClient } from '../../src/node/client.js';
import { silentLogger } from '../../src/log.js';
import { unichainMessages } from '../helpers/fixtures.js';
import { feed, makePipeline } from '../helpers/ingest.js';
import { startRpc } from '../helpers/rpc-harness.js';

const A = '0x' + 'aa'.repeat(20);
const B = '0x' + 'bb'.repeat(20);
const t1 = '0x' + '11'.repeat(32);
const t2 = '0x' + '22'.repeat(32);
const t3 = '0x' + '33'.repeat(32);

t.test('log filter table (geth eth/filters semantics)', async (t) => {
  // [filter, log address, log topics, matches]
  const cases: [unknown, string, string[], boolean][] = [
    [undefined, A, [], true],
    [{}, A, [t1, t2], true],
    [{ topics: [] }, A, [], true],
    [{ address: A }, A, [t1], true],
    [{ address: A.toUpperCase().replace('0X', '0x') }, A, [t1], true],
    [{ address: [A, B] }, B, [], true],
    [{ address: [] }, B, [], true],
    [{ address: B }, A, [t1], false],
    [{ topics: [t1] }, A, [t1, t2], true],
    [{ topics: [t1.toUpperCase().replace('0X', '0x')] }, A, [t1], true],
    [{ topics: [t2] }, A, [t1, t2], false],
    [{ topics: [t1] }, A, [], false],
    [{ topics: [null, t2] }, A, [t1, t2], true],
    [{ topics: [null, t2] }, A, [t1], false],
    // A trailing wildcard still needs the topic to exist (the eth_getLogs bug this module fixed).
    [{ topics: [t1, null] }, A, [t1], false],
    [{ topics: [t1, null] }, A, [t1, t3], true],
    [{ topics: [null] }, A, [], false],
    [{ topics: [[]] }, A, [], false],
    [{ topics: [[]] }, A, [t3], true],
    // null inside an OR-list makes the position a wildcard (the other eth_getLogs bug: it was refused).
    [{ topics: [[t1, null]] }, A, [t3], true],
    [{ topics: [[null, t1], t2] }, A, [t3, t2], true],
    [{ topics: [[null, t1], t2] }, A, [t3, t1], false],
    [{ topics: [[t1, t3], [t2, t3]] }, A, [t3, t2], true],
    [{ topics: [[t1, t3], [t1]] }, A, [t3, t2], false],
    [{ topics: [[], null] }, A, [t3, t1], true],
    [{ topics: [[], null] }, A, [t3], false],
    [{ address: A, topics: [null, null, null] }, A, [t1, t2, t3], true],
    [{ address: A, topics: [null, null, null] }, A, [t1, t2], false],
    [{ address: B, topics: [t1] }, A, [t1], false],
    [{ topics: [t1, t2, t3, t1] }, A, [t1, t2, t3, t1], true],
  ];
  for (const [f, address, topics, want] of cases) {
    t.equal(logMatches(parseLogFilter(f, SUBSCRIPTION_FILTER), { address, topics }), want, JSON.stringify({ f, address, topics }));
  }
});

function errorOf(f: unknown): { code: number; message: string } | null {
  try {
    parseLogFilter(f, GETLOGS_FILTER);
    return null;
  } catch (e) {
    if (e instanceof RpcError) return { code: e.code, message: e.message };
    throw e;
  }
}

t.test('bad filters are -32602 naming the member; what geth accepts is accepted', async (t) => {
  t.match(errorOf('x'), { code: RpcCode.INVALID_PARAMS, message: /^invalid argument 0: expected a filter object/ });
  t.match(errorOf({ address: '0x12' }), { code: RpcCode.INVALID_PARAMS, message: /^invalid argument 0: address: expected a 20-byte hex address, got "0x12"/ });
  t.match(errorOf({ address: [A, 7] }), { message: /address: expected a 20-byte hex address, got 7/ });
  t.match(errorOf({ address: Array.from({ length: 1001 }, () => A) }), { message: /address: 1001 values, at most 1000 allowed/ });
  t.match(errorOf({ topics: 'x' }), { message: /topics: expected an array of at most 4 topic positions/ });
  t.match(errorOf({ topics: [null, null, null, null, null] }), { message: /at most 4 topic positions, got 5/ });
  t.match(errorOf({ topics: [null, '0x12'] }), { message: /topics\[1\]: expected null or a 32-byte hex topic, got "0x12"/ });
  t.match(errorOf({ topics: [[t1, 5]] }), { message: /topics\[0\]/ });
  t.match(errorOf({ topics: [null, Array.from({ length: 1001 }, () => t1)] }), { message: /topics\[1\]: 1001 values, at most 1000 allowed/ });
  t.equal(errorOf({ topics: [[null, '0xzz']] }), null, 'geth stops reading an OR-list at its null (a wildcard)');
  t.equal(errorOf({ topics: [null, [], [t1, null], t2] }), null);
});

class Sink implements SubscriberSink {
  readonly id = 1;
  readonly texts: string[] = [];
  send(text: string): boolean {
    this.texts.push(text);
    return true;
  }
}

t.test('eth_getLogs(pending) and pendingLogs agree with the table on the captured logs', async (t) => {
  const h = await startRpc();
  t.teardown(() => h.close());
  const p = makePipeline();
  const subs = new Subscriptions({
    events: h.pipeline.events,
    node: new NodeClient({ url: 'http://127.0.0.1:9', timeoutMs: 100, maxSockets: 1 }),
    shapes: new Shapes(p.senders),
    metrics: createMetrics({ version: 't', commit: 't' }),
    log: silentLogger,
  });
  t.teardown(() => subs.close());
  // The capture's logs all have exactly one topic.
  const uni = unichainMessages();
  let topic = '';
  for (const m of uni) {
    for (const r of Object.values((m.metadata as { receipts: Record<string, Record<string, { logs?: { topics: string[] }[] }>> }).receipts)) {
      for (const v of Object.values(r)) if (v.logs?.[0] && topic === '') topic = v.logs[0].topics[0]!;
    }
  }
  const filters: [string, unknown[]][] = [
    ['[T]', [topic]],
    ['[T, null]', [topic, null]],
    ['[[T, null]]', [[topic, null]]],
    ['[[null]]', [[null]]],
    ['[null, null]', [null, null]],
  ];
  const sink = new Sink();
  const ids = filters.map(([, topics]) => subs.subscribe(sink, ['pendingLogs', { topics }]));
  for (const m of uni) feed(h.pipeline, m);
  await h.pipeline.events.fanout.idle(); // notifications leave as fan-out tasks
  for (let i = 0; i < filters.length; i++) {
    const [name, topics] = filters[i]!;
    const r = await h.call('eth_getLogs', [{ fromBlock: 'pending', toBlock: 'pending', topics }]);
    t.notOk(r.error, `${name}: accepted`);
    const got = r.result as { topics: string[] }[];
    const want = logMatches(parseLogFilter({ topics }, GETLOGS_FILTER), { address: '', topics: [topic] });
    t.equal(got.length, want ? 4 : 0, `${name}: eth_getLogs ${want ? 'matches all four' : 'matches none'}`);
    const notes = sink.texts.filter((x) => x.includes(ids[i]!)).length;
    t.equal(notes, got.length, `${name}: pendingLogs notified the same logs`);
  }
});
