// The main port's raw stream with shared limits (--redis-url), over a real redis-server and real uWS sockets: the
// upgrade happens in the handler and the Redis answer comes after it. Handshakes sent with `Connection: close` stay
// open (uNetworking/uWebSockets#1929 closed them when upgraded after the answer); a waiting socket gets nothing, then
// replay and live frames in order; a shared-limit refusal closes it with 1008 and the HTTP refusal's text; a client
// gone while Redis is slow or hung, or a drain, leaves no ticket and no lease behind.
import t from 'tap';
import type { us_listen_socket } from 'uWebSockets.js';
import { loadConfig, type Config } from '../../src/config.js';
import { ConnectionLeases } from '../../src/limits/connections.js';
import { RedisLink } from '../../src/limits/redis.js';
import { silentLogger } from '../../src/log.js';
import { createMetrics, type Metrics } from '../../src/metrics/metrics.js';
import { loadUws } from '../../src/binaries.js';
import { mountLocalStream, type LocalStream } from '../../src/stream/local.js';
import { unichainMessages } from '../helpers/fixtures.js';
import { feed, makePipeline } from '../helpers/ingest.js';
import { redisForFile, until } from '../helpers/redis.js';
import { asBlock, asText, closeAll, closeOnce, connect, digest, rawUpgrade, type RawUpgrade } from '../helpers/stream.js';

const uWS = loadUws();
const IP_KEY = 'flashblocksd:conn:ip:127.0.0.1';

interface Instance {
  port: number;
  url: string;
  stream: LocalStream;
  metrics: Metrics;
  link: RedisLink;
  leases: ConnectionLeases;
  pipeline: ReturnType<typeof makePipeline>['pipeline'];
  close(): Promise<void>;
}

/** One instance's main-port stream on its own uWS app, Redis link and leases. */
async function instance(redisUrl: string, over: Partial<Config> = {}, commandTimeoutMs?: number): Promise<Instance> {
  const config: Config = { ...loadConfig([], {}), ...over };
  const metrics = createMetrics({ version: 'test', commit: 'test' });
  const link = new RedisLink(redisUrl, metrics, silentLogger, { probeMs: 50, ...(commandTimeoutMs === undefined ? {} : { commandTimeoutMs }) });
  const leases = new ConnectionLeases(link, { limit: config.streamMaxPerIp });
  const { pipeline } = makePipeline();
  const app = uWS.App();
  const stream = mountLocalStream(app, { options: config, events: pipeline.events, metrics, log: silentLogger, leases });
  const listen = await new Promise<us_listen_socket>((resolve, reject) => app.listen('127.0.0.1', 0, (s) => (s === false ? reject(new Error('listen')) : resolve(s))));
  await until(() => link.up, 10_000, 'link up');
  const port = uWS.us_socket_local_port(listen);
  return {
    port,
    url: `ws://127.0.0.1:${port}`,
    stream,
    metrics,
    link,
    leases,
    pipeline,
    close: closeOnce({ stream, listen, closeListen: (l) => uWS.us_listen_socket_close(l as us_listen_socket), leases, link }),
  };
}

const fx = redisForFile(t);

/** Leases for 127.0.0.1 in Redis (-1 when it does not answer). */
const leased = async (): Promise<number> => {
  try {
    return await fx.probe.zcard(IP_KEY);
  } catch {
    return -1;
  }
};

const frameOf = (i: number): Buffer => Buffer.from(JSON.stringify(unichainMessages()[i]));

t.test('20 handshakes sent with "Connection: close" stay open, are counted in Redis and receive frames', async (t) => {
  const a = await instance(fx.server.url, { streamMaxPerIp: 100 });
  t.teardown(() => a.close());
  const socks: RawUpgrade[] = [];
  for (let i = 0; i < 20; i++) socks.push(await rawUpgrade(a.port, 'close'));
  t.ok(socks.every((s) => s.head.startsWith('HTTP/1.1 101')), 'every handshake is answered 101');
  await until(() => a.stream.subscriberCount() === 20, 10_000, 'all admitted');
  t.equal(await leased(), 20, 'twenty leases in Redis');
  const frame = frameOf(0);
  feed(a.pipeline, frame);
  await until(() => socks.every((s) => s.frames() >= frame.length), 10_000, 'the frame reached every socket');
  t.pass('each receives the next frame');
  t.ok(socks.every((s) => !s.closed()), 'none was closed');
  t.equal(a.metrics.streamSubscribers.value, 20);
  for (const s of socks) s.socket.destroy();
  await until(() => a.stream.admission.count === 0, 10_000, 'admissions released');
  await until(async () => (await leased()) === 0, 10_000, 'leases released');
  t.equal(a.leases.heldCount(), 0);
});

t.test('over the shared limit the connection is closed after its handshake with 1008 and the reason, and counted', async (t) => {
  const a = await instance(fx.server.url, { streamMaxPerIp: 2 });
  const b = await instance(fx.server.url, { streamMaxPerIp: 2 });
  t.teardown(() => Promise.all([a.close(), b.close()]).then(() => undefined));
  const first = await rawUpgrade(a.port, 'close');
  const second = await rawUpgrade(b.port, 'close');
  await until(() => a.stream.subscriberCount() === 1 && b.stream.subscriberCount() === 1, 10_000, 'one admitted on each');
  for (const inst of [a, b]) {
    const over = connect(`${inst.url}/flashblocks`);
    await over.opened;
    await over.closed;
    t.equal(over.closeCode, 1008, 'closed with 1008 (policy)');
    t.equal(over.closeReason, 'too many connections from 127.0.0.1 (limit 2)', 'with the text of the HTTP refusal');
    t.equal(over.frames.length, 0, 'sent nothing before');
    t.equal(inst.metrics.streamRefusals.ip_limit.value, 1, 'counted as ip_limit');
  }
  t.equal(await leased(), 2, 'the refused connections hold no lease');
  t.equal(a.stream.admission.count + b.stream.admission.count, 2, 'nor a ticket');
  t.equal(a.stream.admissionWaits() + b.stream.admissionWaits(), 0);
  t.ok(!first.closed() && !second.closed(), 'the admitted ones stay open');
  first.socket.destroy();
  await until(async () => (await leased()) === 1, 10_000, 'one lease released');
  const again = connect(`${b.url}/flashblocks`);
  await again.opened;
  await until(() => b.stream.subscriberCount() === 2, 10_000, 'the freed slot is taken on the other instance');
  t.pass('the freed slot is usable from the other instance');
  second.socket.destroy();
  await closeAll([again]);
  await until(async () => (await leased()) === 0, 10_000, 'all released');
});

t.test('the per-key limit closes with 1008 and its text; the subscriber cap is still refused before the upgrade', async (t) => {
  const a = await instance(fx.server.url, { apiKeys: ['k1'], streamMaxPerIp: 1, streamMaxSubscribers: 2, trustedProxies: ['127.0.0.1'] });
  t.teardown(() => a.close());
  const x = connect(`${a.url}/flashblocks/k1`, { 'x-forwarded-for': '10.1.0.1' });
  await x.opened;
  await until(() => a.stream.subscriberCount() === 1, 10_000, 'admitted');
  const y = connect(`${a.url}/flashblocks/k1`, { 'x-forwarded-for': '10.1.0.2' });
  await y.closed;
  t.equal(y.closeCode, 1008);
  t.equal(y.closeReason, 'too many connections for this API key (limit 1)');
  t.equal(a.metrics.streamRefusals.key_limit.value, 1);
  await closeAll([x]);
  await until(() => a.stream.admission.count === 0, 10_000, 'released');
});

t.test('a socket waiting for Redis gets nothing; once admitted, replay then live frames, no gap, no duplicate', async (t) => {
  // A command timeout far above the pause: the answer comes from Redis, after SIGCONT.
  const a = await instance(fx.server.url, { streamMaxPerIp: 10 }, 10_000);
  t.teardown(() => a.close());
  const uni = unichainMessages();
  const block = asBlock(uni, 50_000_000).map((m) => Buffer.from(JSON.stringify(m)));
  feed(a.pipeline, block[0]!);
  fx.server.pause();
  t.teardown(() => fx.server.resume());
  const replay = connect(`${a.url}/flashblocks?replay=block`);
  const live = connect(`${a.url}/ws`);
  const raw = await rawUpgrade(a.port, 'close');
  await Promise.all([replay.opened, live.opened]);
  await until(() => a.stream.admissionWaits() === 3, 10_000, 'three waiting');
  feed(a.pipeline, block[1]!);
  feed(a.pipeline, block[2]!);
  await new Promise((r) => setTimeout(r, 100));
  t.equal(replay.frames.length + live.frames.length + raw.frames(), 0, 'nothing is sent while waiting');
  t.equal(a.stream.subscriberCount(), 0, 'and they are not counted as subscribers');
  fx.server.resume();
  await until(() => a.stream.subscriberCount() === 3, 10_000, 'admitted once Redis answers');
  t.equal(a.metrics.redisFallbacks.value, 0, 'decided by Redis, not by a fallback');
  feed(a.pipeline, block[3]!);
  await replay.waitFor(4);
  await live.waitFor(1);
  t.equal(digest(replay.frames), digest(asText(block.slice(0, 4))), 'replay=block: the block so far, then live');
  t.equal(digest(live.frames), digest(asText(block.slice(3, 4))), 'no replay: live frames from its admission on');
  await until(() => raw.frames() >= block[3]!.length, 10_000, 'the raw socket gets the live frame');
  t.notOk(raw.closed(), 'the "Connection: close" handshake stays open');
  raw.socket.destroy();
  await closeAll([replay, live]);
  await until(async () => (await leased()) === 0, 10_000, 'released');
});

t.test('a client gone while Redis is slow leaves no ticket and no lease (Redis admits it after it left)', async (t) => {
  const a = await instance(fx.server.url, { streamMaxPerIp: 2, streamMaxSubscribers: 2 }, 10_000);
  t.teardown(() => a.close());
  fx.server.pause();
  t.teardown(() => fx.server.resume());
  const gone = await rawUpgrade(a.port, 'close');
  await until(() => a.stream.admissionWaits() === 1, 10_000, 'waiting');
  gone.socket.destroy();
  await until(() => a.stream.admissionWaits() === 0, 10_000, 'its close seen');
  fx.server.resume();
  await until(() => a.stream.admission.asked === 0, 10_000, 'Redis answered');
  t.equal(a.metrics.redisFallbacks.value, 0, 'Redis answered (no fallback)');
  t.equal(a.stream.admission.count, 0, 'the ticket went back');
  await until(async () => (await leased()) === 0, 10_000, 'the lease Redis granted is removed');
  t.equal(a.leases.heldCount(), 0);
  // Both slots of the cap (local count) and of the per-IP limit (Redis) are free.
  const s = [connect(`${a.url}/flashblocks`), connect(`${a.url}/flashblocks`)];
  await Promise.all(s.map((x) => x.opened));
  await until(() => a.stream.subscriberCount() === 2, 10_000, 'both admitted');
  t.equal(await leased(), 2);
  await closeAll(s);
  await until(async () => (await leased()) === 0, 10_000, 'released');
});

t.test('a client gone while Redis is hung past the command timeout leaves no lease once Redis is back', async (t) => {
  const a = await instance(fx.server.url, { streamMaxPerIp: 2 });
  t.teardown(() => a.close());
  const kept = await rawUpgrade(a.port, 'close');
  await until(() => a.stream.subscriberCount() === 1, 10_000, 'one admitted by Redis');
  fx.server.pause();
  t.teardown(() => fx.server.resume());
  const gone = await rawUpgrade(a.port, 'close');
  gone.socket.destroy();
  // The command times out (250 ms): local limits admit it, and its ticket goes back at once since it is gone.
  await until(() => a.metrics.redisFallbacks.value === 1 && a.stream.admission.asked === 0, 10_000, 'the fallback');
  t.equal(a.stream.admission.count, 1, 'only the open connection holds a ticket');
  // Redis runs the timed-out MULTI when it wakes up (a lease for the gone client); it is removed once Redis answers.
  fx.server.resume();
  await until(() => a.link.up, 10_000, 'shared again');
  await until(async () => (await leased()) === 1 && a.leases.staleCount() === 0, 10_000, 'only the open connection leased');
  t.equal(a.leases.heldCount(), 1);
  t.notOk(kept.closed(), 'the open connection is untouched');
  kept.socket.destroy();
  await until(async () => (await leased()) === 0, 10_000, 'released');
});

t.test('a drain closes the connections waiting for Redis with 1001; their late answer is handed back', async (t) => {
  const a = await instance(fx.server.url, { streamMaxPerIp: 5 }, 10_000);
  t.teardown(() => a.close());
  fx.server.pause();
  t.teardown(() => fx.server.resume());
  const w = connect(`${a.url}/flashblocks`);
  await w.opened;
  await until(() => a.stream.admissionWaits() === 1, 10_000, 'waiting');
  await a.stream.drain(0);
  await w.closed;
  t.equal(w.closeCode, 1001);
  t.equal(w.closeReason, 'server shutting down');
  fx.server.resume();
  await until(() => a.stream.admission.asked === 0, 10_000, 'Redis answered');
  t.equal(a.stream.admission.count, 0, 'no ticket kept');
  await until(async () => (await leased()) === 0, 10_000, 'no lease kept');
});
