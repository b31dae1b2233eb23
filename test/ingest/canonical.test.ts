import t, { type Test } from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { CanonicalTracker } from '../../src/ingest/canonical.js';
import { loadConfig } from '../../src/config.js';
import { NodeClient } from '../../src/node/client.js';
import { silentLogger } from '../../src/log.js';
import { startAnvil, rpcCall } from '../../scripts/devnet/anvil.js';
import { makePipeline, feed } from '../helpers/ingest.js';
import { unichainAtHeight as atHeight } from '../helpers/fixtures.js';
import { startReplayServer } from '../helpers/replay-server.js';

async function until(cond: () => boolean, ms = 8000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(10);
  }
}


/** The newHeads WebSocket timings from the defaults table. */
const defaults = loadConfig([], {});
const wsTimings = { wsConnectTimeoutMs: defaults.canonicalWsConnectTimeoutMs, wsRetryInitialMs: defaults.canonicalWsRetryInitialMs, wsRetryMaxMs: defaults.canonicalWsRetryMaxMs };

for (const mode of ['polling', 'newHeads'] as const) {
  t.test(`canonical head (${mode}) settles pending blocks and counts preconfirmation reorgs`, async (t) => {
    const anvil = await startAnvil({});
    const node = new NodeClient({ url: anvil.url, timeoutMs: 2000, maxSockets: 4 });
    const { state, observer, pipeline } = makePipeline();
    const tracker = new CanonicalTracker(
      node,
      { settle: (n, h) => pipeline.settle(n, h), holds: (n) => state.block(n) !== undefined, canonical: () => state.canonical },
      { pollMs: mode === 'polling' ? 50 : 60_000, wsUrl: mode === 'newHeads' ? anvil.wsUrl : '', maxCatchUpBlocks: 8, ...wsTimings },
      silentLogger,
    );
    t.teardown(async () => {
      tracker.stop();
      node.close();
      await anvil.stop();
    });
    tracker.start();
    await until(() => state.canonical === 0);
    t.equal(state.canonical, 0, 'starts at the node head');
    for (const m of atHeight(1)) feed(pipeline, m);
    for (const m of atHeight(2)) feed(pipeline, m);
    t.same(state.heldBlocks().map((b) => b.number), [1, 2]);
    await rpcCall(anvil.url, 'anvil_mine', ['0x1']);
    await until(() => state.canonical === 1);
    t.same(state.heldBlocks().map((b) => b.number), [2], 'block 1 pruned once canonical');
    t.equal(observer.reorgs.length, 6, 'the six preconfirmed txs of block 1 are missing from canonical block 1');
    await rpcCall(anvil.url, 'anvil_mine', ['0x3']);
    await until(() => state.canonical === 4);
    t.same(state.heldBlocks(), [], 'everything at or below the head is pruned');
    t.equal(observer.reorgs.length, 12);
  });
}

t.test('an unreachable node never throws; pending keeps serving', async (t) => {
  const node = new NodeClient({ url: 'http://127.0.0.1:1/', timeoutMs: 200, maxSockets: 1 });
  const { state, pipeline } = makePipeline();
  const tracker = new CanonicalTracker(node, { settle: (n, h) => pipeline.settle(n, h), holds: () => false, canonical: () => state.canonical }, { pollMs: 20, wsUrl: '', maxCatchUpBlocks: 8, ...wsTimings }, silentLogger);
  tracker.start();
  for (const m of atHeight(5)) feed(pipeline, m);
  await sleep(200);
  tracker.stop();
  node.close();
  t.equal(state.pendingBlock()?.number, 5);
  t.equal(tracker.lastOkMs, 0);
});

/** A tracker of the node at `nodeUrl` that learns heads from the WebSocket at `wsUrl` only (its polls a minute apart). */
function wsOnlyTracker(t: Test, nodeUrl: string, wsUrl: string, nodeTimeoutMs: number): { state: ReturnType<typeof makePipeline>['state']; tracker: CanonicalTracker } {
  const node = new NodeClient({ url: nodeUrl, timeoutMs: nodeTimeoutMs, maxSockets: 2 });
  const { state, pipeline } = makePipeline();
  const tracker = new CanonicalTracker(node, { settle: (n, h) => pipeline.settle(n, h), holds: () => false, canonical: () => state.canonical }, { pollMs: 60_000, wsUrl, maxCatchUpBlocks: 8, ...wsTimings }, silentLogger);
  t.teardown(() => {
    tracker.stop();
    node.close();
  });
  return { state, tracker };
}

t.test('the newHeads socket is reconnected (shared backoff) after the node drops it, and heads flow again', async (t) => {
  const fakeNode = await startReplayServer();
  t.teardown(() => fakeNode.close());
  const { state, tracker } = wsOnlyTracker(t, 'http://127.0.0.1:1/', fakeNode.url, 200);
  tracker.start();
  const head = (n: number): string => JSON.stringify({ jsonrpc: '2.0', method: 'eth_subscription', params: { subscription: '0x1', result: { number: '0x' + n.toString(16) } } });
  for (let n = 16; n < 20; n++) {
    await fakeNode.waitForClients(1, 15_000);
    fakeNode.send(head(n));
    await until(() => tracker.head === n);
    fakeNode.dropClients(n % 2 === 0 ? 1011 : 0);
  }
  await fakeNode.waitForClients(1, 15_000);
  fakeNode.send(head(20));
  await until(() => tracker.head === 20);
  t.equal(state.canonical, 20, 'heads received over the reconnected socket settle');
});

t.test('newHeads: a head made before the subscription was answered is picked up once it is (one poll then, not at the next poll)', async (t) => {
  const anvil = await startAnvil({});
  t.teardown(() => anvil.stop());
  const fakeWs = await startReplayServer();
  t.teardown(() => fakeWs.close());
  const { state, tracker } = wsOnlyTracker(t, anvil.url, fakeWs.url, 2000);
  tracker.start();
  await until(() => state.canonical === 0);
  await fakeWs.waitForClients(1, 15_000);
  // The node makes block 1 while the subscription is not answered yet: no notification will come for it.
  await rpcCall(anvil.url, 'anvil_mine', ['0x1']);
  await sleep(300);
  t.equal(state.canonical, 0, 'nothing told the tracker yet (polling is a minute away)');
  fakeWs.send(JSON.stringify({ jsonrpc: '2.0', id: 1, result: '0x9' }));
  await until(() => state.canonical === 1);
  t.equal(state.canonical, 1, 'the subscription answer brought a poll: block 1 settled');
});
