import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { UpstreamPool } from '../../src/ingest/upstream.js';
import { silentLogger } from '../../src/log.js';
import { startReplayServer } from '../helpers/replay-server.js';
import { makePipeline } from '../helpers/ingest.js';
import { baseSepoliaMessages } from '../helpers/fixtures.js';

const poolOpts = { pingIntervalMs: 100, stallTimeoutMs: 400, backoffInitialMs: 20, backoffMaxMs: 200, healthyResetMs: 1000, maxFrameBytes: 1 << 22, connectTimeoutMs: 1000 };

async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(10);
  }
}

t.test('two upstreams, one killed mid-block: no flashblock is missed and copies are counted per upstream', async (t) => {
  const a = await startReplayServer();
  const b = await startReplayServer();
  const { state, observer, pipeline } = makePipeline();
  const pool = new UpstreamPool({ urls: [a.url, b.url], ...poolOpts }, { onFrame: (f) => pipeline.handleFrame(f) }, silentLogger);
  t.teardown(async () => {
    await pool.stop();
    await a.close();
    await b.close();
  });
  pool.start();
  await a.waitForClients(1);
  await b.waitForClients(1);
  const msgs = baseSepoliaMessages().map((m) => JSON.stringify(m));
  for (let i = 0; i < 5; i++) {
    a.send(msgs[i]!);
    b.send(msgs[i]!);
  }
  await until(() => state.pendingBlock()?.nextIndex === 5);
  a.dropClients(0); // upstream A dies mid-block
  for (let i = 5; i < msgs.length; i++) b.send(msgs[i]!);
  await until(() => state.pendingBlock()?.nextIndex === msgs.length);
  t.equal(state.pendingBlock()!.nextIndex, msgs.length, 'every flashblock applied');
  t.equal(observer.appliedN, msgs.length);
  const first = (observer.firstCopies.get(0) ?? 0) + (observer.firstCopies.get(1) ?? 0);
  const later = (observer.laterCopies.get(0) ?? 0) + (observer.laterCopies.get(1) ?? 0);
  t.equal(first, msgs.length, 'one first copy per flashblock');
  t.equal(later, 5, 'the second copies of the first five were dropped');
  t.notOk(observer.verdicts.get('duplicate'), 'cross-upstream copies are not sequence duplicates');
  await until(() => pool.connectedCount() === 2, 5000);
  t.pass('the killed upstream reconnected');
});

t.test('an upstream that closes or goes silent is reconnected and ingest resumes', async (t) => {
  const a = await startReplayServer();
  const { state, pipeline } = makePipeline();
  const pool = new UpstreamPool({ urls: [a.url], ...poolOpts }, { onFrame: (f) => pipeline.handleFrame(f) }, silentLogger);
  t.teardown(async () => {
    await pool.stop();
    await a.close();
  });
  pool.start();
  await a.waitForClients(1);
  const msgs = baseSepoliaMessages().map((m) => JSON.stringify(m));
  a.send(msgs[0]!);
  a.send(msgs[1]!);
  await until(() => state.pendingBlock()?.nextIndex === 2);
  a.dropClients(1011);
  await until(() => a.clients() === 0);
  await a.waitForClients(1);
  a.send(msgs[2]!);
  await until(() => state.pendingBlock()?.nextIndex === 3);
  t.pass('resumed after close');
  a.silence(true);
  await until(() => a.clients() === 0 || pool.connectedCount() === 0, 5000);
  a.silence(false);
  await a.waitForClients(1);
  await until(() => pool.connectedCount() === 1);
  a.send(msgs[3]!);
  await until(() => state.pendingBlock()?.nextIndex === 4);
  t.pass('resumed after a stall');
});
