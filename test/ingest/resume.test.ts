// Upstream resume (--upstream-resume) against a real raw stream (uWS, src/stream/server.ts): the position is sent on
// connect, a position too old (close 4000) is dropped for the next connect, and frames a resume delivers again are
// dropped by the pipeline, never applied twice. Hedged upstreams keep working with resume on.
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { generateStream } from '../../bench/flashblock-gen.js';
import { loadConfig, type Config } from '../../src/config.js';
import { CLOSE_RESUME_TOO_OLD, resumeUrl, UpstreamPool, type ResumePosition, type UpstreamEvent } from '../../src/ingest/upstream.js';
import { silentLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { loadUws } from '../../src/binaries.js';
import { CLOSE_RESUME_TOO_OLD as STREAM_CLOSE_RESUME_TOO_OLD } from '../../src/stream/server.js';
import { mountLocalStream as mountStream } from '../../src/stream/local.js';
import { feed, makePipeline } from '../helpers/ingest.js';
import { startReplayServer } from '../helpers/replay-server.js';

const uWS = loadUws();
const poolOpts = { pingIntervalMs: 100, stallTimeoutMs: 1000, backoffInitialMs: 10, backoffMaxMs: 50, healthyResetMs: 1000, maxFrameBytes: 1 << 22, connectTimeoutMs: 1000 };

async function until(what: string, cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** A raw stream (the real one) over its own pipeline on 127.0.0.1; `feed` frames into it to fill its replay ring. */
async function startUpstreamDaemon(over: Partial<Config> = {}) {
  const config: Config = { ...loadConfig([], {}), ...over };
  const { pipeline } = makePipeline();
  const app: TemplatedApp = uWS.App();
  const stream = mountStream(app, { options: config, events: pipeline.events, metrics: createMetrics({ version: 't', commit: 't' }), log: silentLogger });
  const listen = await new Promise<us_listen_socket>((resolve, reject) => {
    app.listen('127.0.0.1', 0, (s) => (s === false ? reject(new Error('listen failed')) : resolve(s)));
  });
  return {
    url: `ws://127.0.0.1:${uWS.us_socket_local_port(listen)}/flashblocks`,
    pipeline,
    stream,
    async close() {
      await stream.drain(0);
      uWS.us_listen_socket_close(listen);
    },
  };
}

const messages = generateStream({ firstBlock: 900, blocks: 3, flashblocksPerBlock: 5, txs: () => 0 }).map((f) => f.message);

t.test("the upstream's too-old close code is the raw stream's", async (t) => {
  t.equal(CLOSE_RESUME_TOO_OLD, STREAM_CLOSE_RESUME_TOO_OLD);
});

t.test('resumeUrl sets block_number and index and keeps the path, the key and other parameters', async (t) => {
  t.equal(resumeUrl('ws://h:1/flashblocks/key1?encoding=identity', { blockNumber: 12, index: 3 }), 'ws://h:1/flashblocks/key1?encoding=identity&block_number=12&index=3');
  t.equal(resumeUrl('ws://h:1/flashblocks?block_number=1&index=0', { blockNumber: 12, index: 3 }), 'ws://h:1/flashblocks?block_number=12&index=3');
});

t.test('frames a resume delivers again are dropped as duplicates, and what follows is applied once', async (t) => {
  const up = await startUpstreamDaemon();
  t.teardown(() => up.close());
  for (const m of messages) feed(up.pipeline, m);
  const { state, observer, pipeline } = makePipeline();
  // This side already applied the first 8, as if from this upstream before the link dropped.
  for (let i = 0; i < 8; i++) feed(pipeline, messages[i]);
  const applied0 = observer.appliedN;
  // An older position than the last applied (the worst a resume can do): flashblocks 3…7 come again.
  const pos: ResumePosition = { blockNumber: 900, index: 2 };
  const pool = new UpstreamPool({ urls: [up.url], ...poolOpts, resumeFrom: () => pos }, { onFrame: (f) => pipeline.handleFrame(f) }, silentLogger);
  t.teardown(() => pool.stop());
  pool.start();
  await until('the replay', () => observer.appliedN === messages.length);
  await sleep(50);
  t.equal(applied0, 8);
  t.equal(observer.appliedN, messages.length, 'each flashblock applied once');
  t.equal(observer.verdicts.get('duplicate'), 5, 'the five re-sent ones were dropped');
  t.equal(state.pendingBlock()?.number, 902);
  t.equal(state.pendingBlock()?.nextIndex, 5);
});

t.test('a position too old for the replay ring (close 4000) is dropped: the next connect goes without it', async (t) => {
  const up = await startUpstreamDaemon({ replayRingFrames: 4 });
  t.teardown(() => up.close());
  for (const m of messages) feed(up.pipeline, m);
  const events: UpstreamEvent[] = [];
  const { pipeline } = makePipeline();
  let asked = 0;
  const pool = new UpstreamPool(
    { urls: [up.url], ...poolOpts, resumeFrom: () => (asked++, { blockNumber: 900, index: 0 }) },
    { onFrame: (f) => pipeline.handleFrame(f), onEvent: (e) => events.push(e) },
    silentLogger,
  );
  t.teardown(() => pool.stop());
  pool.start();
  await until('a connect without a position', () => events.some((e) => e.kind === 'connected' && e.resumedAfter === null));
  const kinds = events.map((e) => (e.kind === 'connected' ? `connected:${e.resumedAfter === null ? 'plain' : 'resume'}` : e.kind));
  t.same(kinds.slice(0, 4), ['connected:resume', 'resume_too_old', 'disconnected', 'connected:plain']);
  const closed = events.find((e) => e.kind === 'disconnected');
  t.equal(closed?.kind === 'disconnected' ? closed.code : 0, 4000);
  t.equal(asked, 1, 'the position was asked for once; the retry skipped it');
  t.equal(pool.connectedCount(), 1, 'connected and staying connected');
});

t.test('hedged upstreams with resume on: one upstream drops and comes back, nothing is missed or applied twice', async (t) => {
  const up = await startUpstreamDaemon();
  t.teardown(() => up.close());
  const plain = await startReplayServer();
  t.teardown(() => plain.close());
  const { state, observer, pipeline } = makePipeline();
  let last: ResumePosition | null = null;
  pipeline.events.onApplied((b, fb) => (last = { blockNumber: b.number, index: fb.index }));
  const urls: string[] = [];
  const pool = new UpstreamPool(
    { urls: [up.url, plain.url], ...poolOpts, resumeFrom: () => last },
    { onFrame: (f) => pipeline.handleFrame(f), onEvent: (e) => e.kind === 'connected' && urls.push(`${e.upstream}:${e.resumedAfter === null ? '-' : `${e.resumedAfter.blockNumber}-${e.resumedAfter.index}`}`) },
    silentLogger,
  );
  t.teardown(() => pool.stop());
  pool.start();
  await plain.waitForClients(1);
  await until('both connected', () => pool.connectedCount() === 2);
  for (let i = 0; i < messages.length; i++) {
    if (i === 6) plain.dropClients(1011);
    feed(up.pipeline, messages[i]); // upstream 0 (a flashblocksd) gets it and rebroadcasts
    plain.send(JSON.stringify(messages[i]));
    await sleep(5);
  }
  await until('all applied', () => observer.appliedN === messages.length);
  await until('the dropped one is back', () => pool.connectedCount() === 2);
  t.equal(observer.appliedN, messages.length, 'each flashblock applied once');
  t.equal(state.pendingBlock()?.nextIndex, 5);
  t.ok(urls.some((u) => u.startsWith('1:') && u !== '1:-'), `the plain upstream reconnected with a position (${urls.join(', ')})`);
});
