// The stream port (--stream-port) over real sockets: worker threads each running the raw stream on a shared port,
// fed by the main thread. Byte-identical in-order fan-out, replay/resume, slow-consumer closes counted on the main
// registry, limits counted across the main port and the stream port, API keys, graceful stop, --stream-threads 0,
// and an RPC request on the main port answered while the stream threads send a large frame to 600 subscribers.
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { brotliCompressSync, brotliDecompressSync } from 'node:zlib';
import t from 'tap';
import { keccak256 } from 'viem';
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { loadConfig, type Config } from '../../src/config.js';
import { startDaemon } from '../../src/daemon.js';
import { StartupError } from '../../src/errors.js';
import { createLogger, silentLogger } from '../../src/log.js';
import { createMetrics, type Metrics } from '../../src/metrics/metrics.js';
import { ConnectionLeases } from '../../src/limits/connections.js';
import { RedisLink } from '../../src/limits/redis.js';
import { loadUws } from '../../src/binaries.js';
import { mountLocalStream, type LocalStream } from '../../src/stream/local.js';
import { startStreamPort, type StreamPort } from '../../src/stream/threads.js';
import { baseSepoliaMessages, unichainMessages } from '../helpers/fixtures.js';
import { feed, makePipeline } from '../helpers/ingest.js';
import { startRedis } from '../helpers/redis.js';
import { freePort } from '../helpers/rpc-harness.js';
import { Sub, asBlock, asText, closeAll, connect, digest, fence, rawHttp, rawUpgrade, refusal } from '../helpers/stream.js';

const uWS = loadUws();

/** Polls `check` (metrics from threads arrive every 250 ms) until it holds or ~10 s passed. */
async function until(check: () => boolean): Promise<boolean> {
  for (let i = 0; i < 1000 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  return check();
}

interface PortHarness {
  /** The main port's stream URL (ws://127.0.0.1:<port>) and the stream port's. */
  mainUrl: string;
  url: string;
  main: LocalStream;
  port: StreamPort;
  metrics: Metrics;
  pipeline: ReturnType<typeof makePipeline>['pipeline'];
  logs: string[];
  close(): Promise<void>;
}

/** The main port's stream (main thread) and a stream port on `threads` threads, sharing counts and metrics. */
async function startPorts(over: Partial<Config> = {}, threads = 2, redisUrl = '', admissionWaitMs?: number): Promise<PortHarness> {
  const config: Config = { ...loadConfig([], {}), ...over };
  const { pipeline } = makePipeline();
  const metrics = createMetrics({ version: 'test', commit: 'test', streamThreads: threads });
  const logs: string[] = [];
  const log = createLogger({ level: 'info', write: (line) => logs.push(line) });
  const app: TemplatedApp = uWS.App();
  const link = redisUrl === '' ? null : new RedisLink(redisUrl, metrics, silentLogger, { probeMs: 50 });
  const leases = link === null ? null : new ConnectionLeases(link, { limit: config.streamMaxPerIp });
  if (link !== null) await until(() => link.up);
  const main = mountLocalStream(app, { options: config, events: pipeline.events, metrics, log, leases });
  const listen = await new Promise<us_listen_socket>((resolve, reject) => {
    app.listen('127.0.0.1', 0, (s) => (s === false ? reject(new Error('listen failed')) : resolve(s)));
  });
  const streamPort = await freePort();
  const port = await startStreamPort(
    { host: '127.0.0.1', port: streamPort, threads, logLevel: 'info', options: config, admissionWaitMs },
    { uWS, frames: main.frames, fanout: pipeline.events.fanout, admission: main.admission, hub: main.hub, crashes: metrics.streamThreadCrashes, log },
  );
  return {
    mainUrl: `ws://127.0.0.1:${uWS.us_socket_local_port(listen)}`,
    url: `ws://127.0.0.1:${streamPort}`,
    main,
    port,
    metrics,
    pipeline,
    logs,
    async close() {
      await port.stop(0);
      await main.drain(0);
      uWS.us_listen_socket_close(listen);
      leases?.close();
      await link?.close();
    },
  };
}

t.test('stream port on 2 threads: 100 subscribers get every frame byte-identical and in order; brotli copies; metrics on the main registry', async (t) => {
  const h = await startPorts({ streamMaxPerIp: 1000 });
  t.teardown(() => h.close());
  t.equal(h.port.threadCount(), 2);
  const subs: Sub[] = [];
  for (let i = 0; i < 100; i++) subs.push(connect(`${h.url}/${i % 2 === 0 ? 'flashblocks' : 'ws'}`));
  const br = connect(`${h.url}/flashblocks?encoding=brotli`);
  await Promise.all([...subs, br].map((s) => s.opened));
  t.ok(await until(() => h.metrics.streamSubscribers.value === 101), 'the subscriber gauge counts the threads\' connections');

  const uni = unichainMessages();
  const base = baseSepoliaMessages();
  const sent: { data: Buffer; isBinary: boolean }[] = [];
  const send = (data: Buffer, isBinary: boolean): void => {
    feed(h.pipeline, data, 0, isBinary);
    sent.push({ data, isBinary });
  };
  for (const m of base) send(Buffer.from(JSON.stringify(m)), false);
  feed(h.pipeline, Buffer.from('{"not":"a flashblock"}')); // never rebroadcast
  for (const m of uni) send(Buffer.from(JSON.stringify(m)), false);
  for (const m of asBlock(uni, 35535699)) send(brotliCompressSync(Buffer.from(JSON.stringify(m))), true);
  for (const m of asBlock(uni, 35535700)) send(Buffer.from(JSON.stringify(m)), true);
  sent.push({ data: fence(h, uni, 35535701), isBinary: false });

  await Promise.all([...subs, br].map((s) => s.waitFor(sent.length)));
  const want = digest(sent);
  t.equal(subs.filter((s) => s.frames.length === sent.length && digest(s.frames) === want).length, 100, 'every subscriber got exactly the sent frames, byte for byte, of the same kind');
  t.same(brotliDecompressSync(br.frames[0]!.data), sent[0]!.data, 'a brotli subscriber gets a compressed copy of a text frame');
  t.same(br.frames[base.length + uni.length]!.data, sent[base.length + uni.length]!.data, 'and a brotli upstream frame unchanged');
  t.ok(await until(() => h.metrics.streamFramesSent.value === sent.length * 101), `deliveries counted on the main registry (${h.metrics.streamFramesSent.value})`);
  t.ok(h.metrics.streamFanoutSeconds.count >= sent.length, 'fan-out times observed');
  await closeAll([...subs, br]);
  t.ok(await until(() => h.metrics.streamSubscribers.value === 0 && h.main.admission.count === 0), 'closes release their admissions');
});

t.test('replay=block and resume behave on the stream port as on the main port', async (t) => {
  const h = await startPorts({ replayRingFrames: 8 });
  t.teardown(() => h.close());
  const base = baseSepoliaMessages().map((m) => Buffer.from(JSON.stringify(m)));
  for (const b of base.slice(0, 9)) feed(h.pipeline, b); // rings hold indexes 1..8 of block 33439826
  // The threads receive frames by message: a first subscriber that sees the fence proves they have all 9.
  const probe = connect(`${h.url}/flashblocks?replay=block`);
  await probe.opened;
  t.ok(await probe.waitFor(8).then(() => true), 'replay=block sends the current block so far (what the ring holds)');
  t.equal(digest(probe.frames), digest(asText(base.slice(1, 9))));

  const r = connect(`${h.url}/ws?block_number=33439826&index=4`);
  const hex = connect(`${h.url}/flashblocks?block_number=0x1fe4052&index=0x8`);
  await Promise.all([r.opened, hex.opened]);
  for (const b of base.slice(9)) feed(h.pipeline, b);
  const f = fence(h, baseSepoliaMessages(), 33439827);
  await Promise.all([r.waitFor(7), hex.waitFor(3), probe.waitFor(8 + base.length - 9 + 1)]);
  t.equal(digest(r.frames), digest(asText([...base.slice(5), f])), 'resume: indexes 5..10, each once, then live');
  t.equal(digest(hex.frames), digest(asText([...base.slice(9), f])), 'hex position; up to date → live only');
  t.equal(digest(probe.frames), digest(asText([...base.slice(1), f])), 'replay then live: no gap, no duplicate');

  const old = connect(`${h.url}/flashblocks?block_number=33439826&index=0`); // index 1 was evicted
  await old.closed;
  t.equal(old.closeCode, 4000);
  t.equal(old.closeReason, 'resume point older than replay buffer');
  t.ok(await until(() => h.metrics.streamRefusals.resume_too_old.value === 1), 'counted on the main registry');
  t.same(await refusal(`${h.url}/flashblocks?block_number=12`), { status: 400, body: 'resume needs both block_number and index as non-negative integers (decimal or 0x hex)\n' });
  await closeAll([r, hex, probe]);
});

t.test('a subscriber on the stream port that never reads is closed over its cap; counted on the main registry', async (t) => {
  const capBytes = 512 * 1024;
  const h = await startPorts({ streamMaxBackpressureBytes: capBytes });
  t.teardown(() => h.close());
  const fast = connect(`${h.url}/flashblocks`);
  const slow = connect(`${h.url}/flashblocks`);
  await Promise.all([fast.opened, slow.opened]);
  slow.ws.pause();
  const uni = unichainMessages();
  let fed = 0;
  for (let n = 0; n < 400 && h.metrics.streamSlowCloses.value === 0; n++) {
    for (const m of asBlock(uni, 40_000_000 + n, 32 * 1024)) {
      feed(h.pipeline, Buffer.from(JSON.stringify(m)));
      fed++;
    }
    await fast.waitFor(fed); // the threads send as fast as the fast reader reads
    await new Promise((r) => setTimeout(r, 5));
  }
  t.ok(await until(() => h.metrics.streamSlowCloses.value === 1), 'one slow close, reported by its thread');
  t.ok(h.metrics.streamFramesDropped.value > 0, `its missed frames counted (${h.metrics.streamFramesDropped.value})`);
  t.ok(h.logs.some((l) => l.includes('stream subscriber closed: send buffer over the cap') && l.includes('"thread":"stream-')), 'the thread\'s log line reaches the main logger, with its thread');
  slow.ws.resume();
  await slow.closed;
  t.equal(fast.frames.length, fed, 'the reading subscriber got every frame');
  await closeAll([fast]);
});

t.test('per-IP and global limits count the main port and the stream port together', async (t) => {
  const h = await startPorts({ streamMaxPerIp: 2, streamMaxSubscribers: 1000 });
  t.teardown(() => h.close());
  const a = connect(`${h.mainUrl}/flashblocks`);
  const b = connect(`${h.url}/flashblocks`);
  await Promise.all([a.opened, b.opened]);
  const onStream = await refusal(`${h.url}/ws`);
  t.equal(onStream.status, 429, 'the third from one IP is refused on the stream port');
  t.match(onStream.body, /too many connections from 127\.0\.0\.1 \(limit 2\)/);
  const onMain = await refusal(`${h.mainUrl}/ws`);
  t.equal(onMain.status, 429, 'and on the main port');
  t.ok(await until(() => h.metrics.streamRefusals.ip_limit.value === 2), 'both refusals counted on the main registry');
  b.ws.close();
  await b.closed;
  t.ok(await until(() => h.main.admission.count === 1), 'a close on the stream port frees its slot');
  const c = connect(`${h.mainUrl}/flashblocks`);
  await c.opened;
  t.pass('the freed slot is usable from the main port');
  await closeAll([a, c]);

  const g = await startPorts({ streamMaxPerIp: 100, streamMaxSubscribers: 2 });
  t.teardown(() => g.close());
  const subs = [connect(`${g.url}/flashblocks`), connect(`${g.url}/flashblocks`)];
  await Promise.all(subs.map((s) => s.opened));
  const rg = await refusal(`${g.mainUrl}/flashblocks`);
  t.equal(rg.status, 429);
  t.match(rg.body, /subscriber limit \(2\)/);
  const rs = await refusal(`${g.url}/flashblocks`);
  t.match(rs.body, /subscriber limit \(2\)/);
  t.ok(await until(() => g.metrics.streamRefusals.global_limit.value === 2));
  await closeAll(subs);
});

t.test('an upgrade on a stream thread is not closed after its 101 (the async-upgrade close of this uWS build)', async (t) => {
  // With "Connection: close" the old HTTP state reads as close on every upgrade made later from res.cork: before the
  // thread waited for its admission, every one of these was closed right after its 101.
  const h = await startPorts({ streamMaxPerIp: 100 });
  t.teardown(() => h.close());
  const port = Number(new URL(h.url).port);
  const socks: Awaited<ReturnType<typeof rawUpgrade>>[] = [];
  for (let i = 0; i < 10; i++) socks.push(await rawUpgrade(port, 'close'));
  t.ok(socks.every((s) => s.head.startsWith('HTTP/1.1 101')), 'every handshake is answered 101');
  t.ok(await until(() => h.metrics.streamSubscribers.value === 10), 'all ten are counted as subscribers');
  const frame = Buffer.from(JSON.stringify(unichainMessages()[0]));
  feed(h.pipeline, frame);
  t.ok(await until(() => socks.every((s) => s.frames() > frame.length)), 'and each receives the next frame');
  t.ok(socks.every((s) => !s.closed()), 'none was closed');
  for (const s of socks) s.socket.destroy();
  t.ok(await until(() => h.main.admission.count === 0), 'their admissions are released when they go');
});

t.test('a stream thread whose admission gets no answer in time refuses with 503; the late answer is released', async (t) => {
  const h = await startPorts({ streamMaxPerIp: 1 }, 1, '', 200);
  t.teardown(() => h.close());
  const port = Number(new URL(h.url).port);
  // The handshake is written; then this (main) thread, which answers admissions, stays blocked far past the thread's
  // 200 ms wait (asleep in Atomics.wait, not spinning: the same 3 s in which it answers nothing, without a core).
  const refused = await rawUpgrade(port, 'Upgrade', () => {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 3000);
  });
  t.match(refused.head, /^HTTP\/1\.1 503/, 'refused with 503');
  refused.socket.destroy();
  t.ok(await until(() => h.main.admission.count === 0), 'the ticket the main thread granted too late went back');
  t.equal(h.metrics.streamSubscribers.value, 0, 'no subscriber was counted');
  const ok = connect(`${h.url}/flashblocks`);
  await ok.opened;
  t.pass('the one connection this IP may hold is admitted next');
  await closeAll([ok]);
});

t.test('with Redis, the per-IP limit holds across the main port, the stream threads and another instance', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const a = await startPorts({ streamMaxPerIp: 3 }, 2, redis.url);
  t.teardown(() => a.close());
  const b = await startPorts({ streamMaxPerIp: 3 }, 2, redis.url);
  t.teardown(() => b.close());
  const subs = [connect(`${a.mainUrl}/flashblocks`), connect(`${a.url}/flashblocks`), connect(`${b.url}/ws`)];
  await Promise.all(subs.map((s) => s.opened));
  const r = await refusal(`${b.url}/flashblocks`);
  t.equal(r.status, 429, 'the fourth from one IP is refused on the other instance\'s stream port');
  t.match(r.body, /too many connections from 127\.0\.0\.1 \(limit 3\)/);
  t.equal((await refusal(`${a.url}/flashblocks`)).status, 429, 'and on this instance\'s stream port');
  t.ok(await until(() => a.metrics.streamRefusals.ip_limit.value === 1 && b.metrics.streamRefusals.ip_limit.value === 1), 'each counted by its instance');
  subs[1]!.ws.close();
  await subs[1]!.closed;
  t.ok(await until(() => a.main.admission.count === 1), 'the close released its lease');
  const again = connect(`${b.url}/flashblocks`);
  await again.opened;
  t.pass('the freed slot is usable from the other instance');
  await closeAll([subs[0]!, subs[2]!, again]);
});

t.test('API keys on the stream port: keyless and unknown keys get 401; the per-key limit spans both ports', async (t) => {
  const h = await startPorts({ apiKeys: ['k1', 'k2'], streamMaxPerIp: 2, trustedProxies: ['127.0.0.0/8'] });
  t.teardown(() => h.close());
  t.same(await refusal(`${h.url}/flashblocks`), { status: 401, body: 'API key required: connect to /flashblocks/<key>\n' });
  t.same(await refusal(`${h.url}/ws/nope`), { status: 401, body: 'unknown API key\n' });
  t.ok(await until(() => h.metrics.streamRefusals.bad_key.value === 2));
  const x = connect(`${h.mainUrl}/flashblocks/k1`, { 'x-forwarded-for': '1.1.1.1' });
  const y = connect(`${h.url}/ws/k1`, { 'x-forwarded-for': '2.2.2.2' });
  const z = connect(`${h.url}/flashblocks/k2`, { 'x-forwarded-for': '3.3.3.3' });
  await Promise.all([x.opened, y.opened, z.opened]);
  const rk = await refusal(`${h.url}/flashblocks/k1`, { 'x-forwarded-for': '4.4.4.4' });
  t.equal(rk.status, 429);
  t.match(rk.body, /for this API key \(limit 2\)/);
  t.ok(await until(() => h.metrics.streamRefusals.key_limit.value === 1));
  await closeAll([x, y, z]);
});

t.test('a stream thread that fails is logged and counted; the other thread and the main port go on', async (t) => {
  // The threads are reached the way the main thread reaches them: their Worker objects (seen on the first frame).
  const workers = new Set<Worker>();
  const proto = Worker.prototype as unknown as { postMessage(this: Worker, ...args: unknown[]): void };
  const post = proto.postMessage;
  proto.postMessage = function (this: Worker, ...args: unknown[]) {
    workers.add(this);
    post.apply(this, args);
  };
  t.teardown(() => {
    proto.postMessage = post;
  });
  const h = await startPorts({ streamMaxPerIp: 100 });
  t.teardown(() => h.close());
  const uni = unichainMessages().map((m) => Buffer.from(JSON.stringify(m)));
  feed(h.pipeline, uni[0]!);
  t.ok(await until(() => workers.size === 2), 'both threads seen');
  // Subscribers on both threads (the kernel spreads them), so that the failing thread has open sockets.
  const early: Sub[] = [];
  for (let i = 0; i < 10; i++) early.push(connect(`${h.url}/flashblocks`));
  await Promise.all(early.map((s) => s.opened));
  const victim = [...workers][0]!;
  const exited = new Promise((resolve) => victim.once('exit', resolve));
  victim.postMessage({ t: 'frame', data: null }); // a frame without bytes: the thread throws
  await exited;
  t.equal(h.metrics.streamThreadCrashes.value, 1, 'counted');
  t.ok(h.logs.some((l) => l.includes('stream thread failed') && l.includes('"thread":"stream-')), 'logged with its thread');
  t.equal(h.port.threadCount(), 1, 'one thread left');
  await new Promise((r) => setTimeout(r, 50));
  const survivors = early.filter((s) => s.closeCode === 0);
  t.ok(early.every((s) => s.closeCode === 0 || s.closeCode === 1001 || s.closeCode === 1006), 'the failing thread\'s subscribers were closed');
  t.comment(`subscribers closed with the failing thread: ${early.length - survivors.length} of ${early.length}`);
  const subs: Sub[] = [...survivors];
  for (let i = 0; i < 10; i++) subs.push(connect(`${h.url}/flashblocks`));
  const onMain = connect(`${h.mainUrl}/flashblocks`);
  await Promise.all([...subs, onMain].map((s) => s.opened));
  const before = new Map(subs.map((s) => [s, s.frames.length]));
  for (const b of uni.slice(1)) feed(h.pipeline, b);
  await Promise.all([...subs, onMain].map((s) => s.waitFor((before.get(s) ?? 0) + uni.length - 1)));
  const want = digest(asText(uni.slice(1)));
  t.ok([...subs, onMain].every((s) => digest(s.frames.slice(before.get(s) ?? 0)) === want), 'the remaining thread and the main port serve every frame');
  await closeAll([...subs, onMain]);
});

/** A daemon with --stream-port (no upstream; frames are fed to its pipeline). */
async function daemonWithStreamPort(over: Partial<Config>) {
  const streamPort = await freePort();
  const config = {
    ...loadConfig([], {}),
    host: '127.0.0.1', port: 0, metricsPort: 0, flashblocksUrls: [], nodeRpcUrl: 'http://127.0.0.1:9',
    streamPort,
    ...over,
  };
  const d = await startDaemon(config, { log: silentLogger });
  const apply = (m: Record<string, unknown>, pad = 0): Buffer => {
    const data = Buffer.from(JSON.stringify(pad > 0 ? { ...m, _pad: 'x'.repeat(pad) } : m));
    d.pipeline.handleFrame({ data, isBinary: false, upstream: 0, receivedAtMs: performance.now() });
    return data;
  };
  return { d, url: `ws://127.0.0.1:${streamPort}`, streamPort, apply };
}

const workerCount = (): number => process.getActiveResourcesInfo().filter((r) => r === 'MessagePort' || r === 'Worker').length;

t.test('graceful stop closes stream-port subscribers with 1001 and leaves no thread', async (t) => {
  const before = workerCount();
  const { d, url, streamPort, apply } = await daemonWithStreamPort({ streamThreads: 2 });
  t.ok(workerCount() > before, 'the threads are running');
  t.ok(Object.keys(d.metrics.threads).includes('stream-2'), 'each stream thread has its thread label');
  const th = d.metrics.threads['stream-2']!;
  t.ok(await until(() => th.utilization.value > 0 && th.lagMaxSeconds.value > 0), `and its own load: utilisation ${th.utilization.value}, lag max ${th.lagMaxSeconds.value} s`);
  const subs = [connect(`${url}/flashblocks`), connect(`${url}/flashblocks`), connect(`${url}/flashblocks`)];
  await Promise.all(subs.map((s) => s.opened));
  apply(unichainMessages()[0]!);
  await Promise.all(subs.map((s) => s.waitFor(1)));
  await d.stop();
  await Promise.all(subs.map((s) => s.closed));
  t.same(subs.map((s) => s.closeCode), [1001, 1001, 1001], 'subscribers see 1001');
  t.equal(workerCount(), before, 'no thread (or its port) outlives stop()');
  t.equal(d.metrics.streamThreadCrashes.value, 0, 'a requested stop is not a crash');
  const refused = await new Promise<boolean>((resolve) => {
    const s = net.connect(streamPort, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(false)));
    s.once('error', () => resolve(true));
  });
  t.ok(refused, 'the stream port is closed');
});

t.test('--stream-threads 0: the main thread serves the stream port, limits counted with the main port', async (t) => {
  const { d, url, apply } = await daemonWithStreamPort({ streamThreads: 0, streamMaxPerIp: 2 });
  t.teardown(() => d.stop());
  t.notOk(Object.keys(d.metrics.threads).includes('stream-1'), 'no stream thread label');
  const a = connect(`${url}/flashblocks?replay=block`);
  const b = connect(`ws://127.0.0.1:${d.rpcPort}/flashblocks`);
  await Promise.all([a.opened, b.opened]);
  const uni = unichainMessages();
  const sent = uni.map((m) => apply(m));
  await Promise.all([a.waitFor(sent.length), b.waitFor(sent.length)]);
  t.equal(digest(a.frames), digest(asText(sent)));
  t.equal(digest(b.frames), digest(asText(sent)));
  t.equal((await refusal(`${url}/ws`)).status, 429, 'the third connection from one IP is refused');
  t.equal(d.metrics.streamSubscribers.value, 2);
  await closeAll([a, b]);
});

t.test('a port in use fails start-up with E_LISTEN', async (t) => {
  const holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  t.teardown(() => holder.close());
  const taken = (holder.address() as net.AddressInfo).port;
  const config = { ...loadConfig([], {}), host: '127.0.0.1', port: 0, metricsPort: 0, flashblocksUrls: [], nodeRpcUrl: 'http://127.0.0.1:9', streamPort: taken, streamThreads: 2 };
  const before = workerCount();
  const err = await startDaemon(config, { log: silentLogger }).then(
    async (d) => (await d.stop(), null),
    (e: unknown) => e,
  );
  t.ok(err instanceof StartupError, 'a StartupError');
  t.equal((err as StartupError).code, 'E_LISTEN');
  t.match((err as StartupError).message, /cannot listen on 127\.0\.0\.1:\d+ .*--stream-port/);
  t.equal(workerCount(), before, 'no thread was left behind');
});

t.test('an RPC request on the main port is answered while the stream threads send a large frame to 600 subscribers; the main thread sends none of it', async (t) => {
  const SUBSCRIBERS = 600;
  const { d, url, apply } = await daemonWithStreamPort({ streamThreads: 2, streamMaxPerIp: SUBSCRIBERS + 10, streamMaxSubscribers: SUBSCRIBERS + 10 });
  t.teardown(() => d.stop());
  const fanout = d.pipeline.events.fanout;
  const uni = unichainMessages();
  apply(uni[0]!);
  await fanout.idle();
  const subs: Sub[] = [];
  for (let i = 0; i < SUBSCRIBERS; i++) subs.push(connect(`${url}/flashblocks`));
  t.teardown(() => subs.forEach((s) => s.ws.terminate()));
  await Promise.all(subs.map((s) => s.opened));
  t.ok(await until(() => d.metrics.streamSubscribers.value === SUBSCRIBERS), '600 stream-port subscribers');

  const http = await rawHttp(d.rpcPort);
  t.teardown(() => http.close());
  const hash = keccak256((uni[1]!.diff as { transactions: `0x${string}`[] }).transactions[0]!);
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getTransactionReceipt', params: [hash] });
  t.match(JSON.parse(await http.post(body)), { result: null }, 'not preconfirmed before flashblock 1');

  const turnsBefore = fanout.turns;
  const finishedBefore = fanout.finished;
  const first = http.post(body);
  const big = apply(uni[1]!, 256 * 1024);
  const answer = JSON.parse(await first) as { result: { transactionHash: string } | null };
  const received = subs.filter((s) => s.frames.length > 0).length;
  t.equal(answer.result?.transactionHash, hash, 'the answer reads the new flashblock');
  await Promise.all(subs.map((s) => s.waitFor(1, 30_000)));
  t.ok(subs.every((s) => s.frames[0]!.data.equals(big)), 'every stream-port subscriber received the large frame, byte-identical');
  await fanout.idle();
  const tasks = fanout.finished - finishedBefore;
  t.equal(fanout.turns - turnsBefore, tasks, `each of the main thread's ${tasks} fan-out task(s) for it took one slice: it sends nothing to the stream port's subscribers`);
  t.comment(`stream-port subscribers holding the frame when the RPC answer was read: ${received} of ${SUBSCRIBERS}`);
  t.ok(await until(() => d.metrics.streamFramesSent.value >= SUBSCRIBERS), 'the threads\' sends are counted');
});
