// Raw stream over real sockets: uWS server, `ws` clients, frames fed through the real ingest pipeline. Checks
// byte-identical in-order fan-out, slow-consumer closes, replay/resume, limits, API keys and the trusted-proxy rule.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { brotliCompressSync } from 'node:zlib';
import t from 'tap';
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { loadConfig, type Config } from '../../src/config.js';
import { silentLogger } from '../../src/log.js';
import { createMetrics, type Metrics } from '../../src/metrics/metrics.js';
import { loadUws } from '../../src/binaries.js';
import type { RawFrame } from '../../src/state/block.js';
import { CidrList, clientIp, normalizeIp } from '../../src/stream/ip.js';
import { ReplayRing } from '../../src/stream/replay.js';
import { mountLocalStream as mountStream } from '../../src/stream/local.js';
import type { MountedStream } from '../../src/stream/server.js';
import { feed, makePipeline } from '../helpers/ingest.js';
import { Sub, asBlock, asText, closeAll, connect, digest, fence, refusal, subscribersDownTo, tick } from '../helpers/stream.js';
import { baseSepoliaMessages, unichainMessages } from '../helpers/fixtures.js';

const uWS = loadUws();

interface Harness {
  url: string;
  stream: MountedStream;
  metrics: Metrics;
  pipeline: ReturnType<typeof makePipeline>['pipeline'];
  observer: ReturnType<typeof makePipeline>['observer'];
  close(): Promise<void>;
}

async function startStream(over: Partial<Config> = {}): Promise<Harness> {
  const config: Config = { ...loadConfig([], {}), ...over };
  const { pipeline, observer } = makePipeline();
  const metrics = createMetrics({ version: 'test', commit: 'test' });
  const app: TemplatedApp = uWS.App();
  const stream = mountStream(app, { options: config, events: pipeline.events, metrics, log: silentLogger });
  const listen = await new Promise<us_listen_socket>((resolve, reject) => {
    app.listen('127.0.0.1', 0, (s) => (s === false ? reject(new Error('listen failed')) : resolve(s)));
  });
  const port = uWS.us_socket_local_port(listen);
  return {
    url: `ws://127.0.0.1:${port}`,
    stream,
    metrics,
    pipeline,
    observer,
    async close() {
      await stream.drain(0);
      uWS.us_listen_socket_close(listen);
    },
  };
}


t.test('client IP and CIDR matching', async (t) => {
  t.equal(normalizeIp('::ffff:10.1.2.3'), '10.1.2.3', 'IPv4-mapped IPv6 folds to IPv4');
  t.equal(normalizeIp('[::FFFF:a01:203]'), '10.1.2.3', 'in hex groups and brackets too');
  t.equal(normalizeIp('2001:DB8:0:0:0:0:0:1'), '2001:db8::1', 'IPv6 in its compressed lower-case form');
  t.equal(normalizeIp('fe80::1%eth0'), 'fe80::1', 'zone dropped');
  t.equal(normalizeIp(' 10.0.0.7 '), '10.0.0.7');
  t.equal(normalizeIp('nope'), null);
  t.equal(normalizeIp('999.1.1.1'), null);
  const list = new CidrList(['10.0.0.0/8', '192.168.1.128/25', 'fd00::/8', '::ffff:172.16.0.0/108', '203.0.113.9']);
  const has = (s: string): boolean => list.contains(normalizeIp(s)!);
  t.ok(has('10.255.0.1'));
  t.notOk(has('11.0.0.1'));
  t.ok(has('192.168.1.200'));
  t.notOk(has('192.168.1.127'), '/25 boundary');
  t.ok(has('fd12::1'));
  t.notOk(has('fe80::1'));
  t.ok(has('172.16.5.5'), 'mapped CIDR matches plain IPv4');
  t.notOk(has('172.32.0.1'), 'outside the mapped /108 (= /12)');
  t.ok(has('::ffff:10.9.9.9'), 'a mapped peer matches a plain IPv4 CIDR');
  t.ok(has('203.0.113.9'), 'a bare address is a /32');
  t.notOk(has('203.0.113.10'));
  for (const bad of ['10.0.0.0/33', 'fd00::/129', 'banana', '10.0.0.0/8x', '10.0.0.0/', '999.0.0.0/8']) {
    t.throws(() => new CidrList([bad]), { code: 'E_CONFIG', message: /--trusted-proxies: ".*" is not an IPv4\/IPv6 address or CIDR/ }, bad);
  }
  const trusted = new CidrList(['127.0.0.0/8', '10.0.0.0/8']);
  t.equal(clientIp('127.0.0.1', '1.2.3.4', new CidrList([])), '127.0.0.1', 'XFF ignored without trusted proxies');
  t.equal(clientIp('8.8.8.8', '1.2.3.4', trusted), '8.8.8.8', 'XFF ignored from an untrusted peer');
  t.equal(clientIp('127.0.0.1', '1.2.3.4', trusted), '1.2.3.4');
  t.equal(clientIp('::ffff:127.0.0.1', '1.2.3.4', trusted), '1.2.3.4', 'a mapped trusted peer is trusted');
  t.equal(clientIp('127.0.0.1', '9.9.9.9, 1.2.3.4, 10.0.0.7', trusted), '1.2.3.4', 'rightmost untrusted hop wins (left is spoofable)');
  t.equal(clientIp('127.0.0.1', '10.0.0.8, 10.0.0.7', trusted), '10.0.0.8', 'all hops trusted: the leftmost');
  t.equal(clientIp('127.0.0.1', 'garbage', trusted), '127.0.0.1');
});

t.test('replay ring: current block, resume positions, too old', async (t) => {
  const f = (blockNumber: number, index: number): RawFrame => ({ data: Buffer.from(`${blockNumber}/${index}`), isBinary: false, blockNumber, index, receivedAtMs: 0 });
  const names = (xs: RawFrame[]): string[] => xs.map((x) => x.data.toString());
  const ring = new ReplayRing(6);
  t.same(ring.currentBlock(), []);
  t.same(ring.resumeAfter(5, 0), { ok: true, frames: [] }, 'empty ring: nothing to send');
  for (const [b, i] of [[10, 0], [10, 1], [10, 2], [11, 0], [11, 1]] as const) ring.push(f(b, i));
  t.same(names(ring.currentBlock()), ['11/0', '11/1']);
  t.same(names((ring.resumeAfter(10, 1) as { frames: RawFrame[] }).frames), ['10/2', '11/0', '11/1']);
  t.same(names((ring.resumeAfter(11, 1) as { frames: RawFrame[] }).frames), [], 'up to date');
  t.same(names((ring.resumeAfter(12, 3) as { frames: RawFrame[] }).frames), [], 'ahead of us');
  t.same(names((ring.resumeAfter(9, 7) as { frames: RawFrame[] }).frames), ['10/0', '10/1', '10/2', '11/0', '11/1'], 'oldest is index 0 of the next block: nothing missing');
  ring.push(f(11, 2));
  ring.push(f(11, 3)); // evicts 10/0
  t.same(ring.resumeAfter(9, 7), { ok: false, reason: 'too_old' });
  t.same(names((ring.resumeAfter(10, 0) as { frames: RawFrame[] }).frames), ['10/1', '10/2', '11/0', '11/1', '11/2', '11/3'], 'oldest follows the position');
  t.same(names(ring.currentBlock()), ['11/0', '11/1', '11/2', '11/3']);
  for (let i = 4; i < 12; i++) ring.push(f(11, i));
  t.same(names(ring.currentBlock()), ['11/6', '11/7', '11/8', '11/9', '11/10', '11/11'], 'bounded by the ring');
  t.equal(ring.size, 6);
});

t.test('200 subscribers receive every applied frame byte-identical, in order, text and binary', async (t) => {
  const h = await startStream({ streamMaxPerIp: 1000 });
  t.teardown(() => h.close());
  const subs: Sub[] = [];
  for (let i = 0; i < 200; i++) subs.push(connect(`${h.url}/${i % 2 === 0 ? 'flashblocks' : 'ws'}`));
  await Promise.all(subs.map((s) => s.opened));
  t.equal(h.stream.subscriberCount(), 200);

  const uni = unichainMessages();
  const base = baseSepoliaMessages();
  const sent: { data: Buffer; isBinary: boolean }[] = [];
  const send = (data: Buffer, isBinary: boolean, valid: boolean): void => {
    feed(h.pipeline, data, 0, isBinary);
    if (valid) sent.push({ data, isBinary });
  };
  // Text frames (a Base Sepolia block, then a later Unichain block), garbage in between (never rebroadcast),
  // brotli binary frames as Base sends them, and a JSON frame that arrived as binary.
  for (const m of base) send(Buffer.from(JSON.stringify(m)), false, true);
  send(Buffer.from('{"not":"a flashblock"}'), false, false);
  send(Buffer.from([0x00, 0xff, 0x13, 0x37]), true, false);
  for (const m of uni) send(Buffer.from(JSON.stringify(m)), false, true);
  for (const m of asBlock(uni, 35535699)) send(brotliCompressSync(Buffer.from(JSON.stringify(m))), true, true);
  for (const m of asBlock(uni, 35535700)) send(Buffer.from(JSON.stringify(m)), true, true);
  t.equal(sent.length, base.length + uni.length * 3);
  t.ok((h.observer.decodeErrors.get('json') ?? 0) + (h.observer.decodeErrors.get('schema') ?? 0) + (h.observer.decodeErrors.get('brotli') ?? 0) >= 2, 'garbage counted by the pipeline');

  sent.push({ data: fence(h, uni, 35535701), isBinary: false }); // anything extra (a garbage frame) stands before it
  await Promise.all(subs.map((s) => s.waitFor(sent.length)));
  const want = digest(sent);
  let same = 0;
  for (const s of subs) if (s.frames.length === sent.length && digest(s.frames) === want) same++;
  t.equal(same, 200, 'every subscriber got exactly the sent frames (and the fence), byte for byte and of the same kind');
  t.equal(h.metrics.streamFramesSent.value, sent.length * 200, 'deliveries counted');
  await closeAll(subs);
  await subscribersDownTo(h.stream, 0);
  t.equal(h.stream.subscriberCount(), 0);
});

t.test('brotli subscribers get one compressed copy per frame; brotli upstream frames pass unchanged', async (t) => {
  const h = await startStream();
  t.teardown(() => h.close());
  const br = connect(`${h.url}/flashblocks?encoding=brotli`);
  const br2 = connect(`${h.url}/ws?encoding=brotli`);
  const plain = connect(`${h.url}/flashblocks`);
  await Promise.all([br.opened, br2.opened, plain.opened]);
  const uni = unichainMessages();
  const text = uni.map((m) => Buffer.from(JSON.stringify(m)));
  for (const b of text) feed(h.pipeline, b);
  const upstreamBrotli = asBlock(uni, 35535699).map((m) => brotliCompressSync(Buffer.from(JSON.stringify(m))));
  for (const b of upstreamBrotli) feed(h.pipeline, b, 0, true);
  await Promise.all([br.waitFor(10), br2.waitFor(10), plain.waitFor(10)]);
  const { brotliDecompressSync } = await import('node:zlib');
  for (let i = 0; i < 5; i++) {
    t.ok(br.frames[i]!.isBinary, 'compressed copy is binary');
    t.same(brotliDecompressSync(br.frames[i]!.data), text[i], 'decompresses to the original text frame');
    t.same(br2.frames[i]!.data, br.frames[i]!.data, 'same compressed bytes for every brotli subscriber');
    t.same(br.frames[5 + i]!.data, upstreamBrotli[i], 'upstream brotli frame forwarded unchanged');
  }
  t.equal(digest(plain.frames), digest([...text.map((data) => ({ data, isBinary: false })), ...upstreamBrotli.map((data) => ({ data, isBinary: true }))]));
  await closeAll([br, br2, plain]);
});

t.test('a subscriber that never reads is closed over its cap, its missed frames counted; the others get every frame', async (t) => {
  const capBytes = 512 * 1024;
  const h = await startStream({ streamMaxBackpressureBytes: capBytes });
  t.teardown(() => h.close());
  const fast: Sub[] = [];
  for (let i = 0; i < 5; i++) fast.push(connect(`${h.url}/flashblocks`));
  const slow = connect(`${h.url}/flashblocks`);
  await Promise.all([...fast, slow].map((s) => s.opened));
  slow.ws.pause(); // stops reading its TCP socket

  const uni = unichainMessages();
  let fed = 0;
  let frameBytes = 0;
  /** Frames published up to and including the one whose publish closed the slow subscriber (one fan-out task each). */
  let fedAtClose = 0;
  const fanout = h.pipeline.events.fanout;
  const closes = h.metrics.streamSlowCloses as { inc(by?: number): void };
  const inc = closes.inc.bind(closes);
  closes.inc = (by?: number) => {
    fedAtClose = fanout.finished + 1;
    inc(by);
  };
  for (let n = 0; n < 4000 && h.metrics.streamSlowCloses.value === 0; n++) {
    for (const m of asBlock(uni, 40_000_000 + n, 32 * 1024)) {
      const b = Buffer.from(JSON.stringify(m));
      frameBytes = Math.max(frameBytes, b.length);
      feed(h.pipeline, b);
      fed++;
    }
    await tick(1); // let the fast (in-process) readers read
  }
  slow.ws.resume(); // a late reader gets what the kernel already held, then the end of the connection
  t.equal(h.metrics.streamSlowCloses.value, 1, 'exactly one slow close');
  t.equal(h.stream.subscriberCount(), 5, 'the fast subscribers stay');
  t.ok(h.stream.peakBufferedBytes() > capBytes, 'the slow socket went over the cap');
  t.ok(h.stream.peakBufferedBytes() <= capBytes + frameBytes, `server-side buffer stayed bounded: peak ${h.stream.peakBufferedBytes()} ≤ cap ${capBytes} + one frame ${frameBytes}`);
  // One more block after the close: the fast ones keep receiving.
  for (const m of asBlock(uni, 50_000_000)) {
    feed(h.pipeline, Buffer.from(JSON.stringify(m)));
    fed++;
  }
  await Promise.all(fast.map((s) => s.waitFor(fed)));
  for (const s of fast) t.equal(s.frames.length, fed, 'fast subscriber got every frame');
  await slow.closed;
  t.equal(slow.closeCode, 1006, 'closed at once, without a close frame queued behind the backlog');
  t.ok(slow.frames.length < fed, 'the slow one was cut off');
  const dropped = h.metrics.streamFramesDropped.value;
  t.ok(dropped >= 1, `dropped frames counted (${dropped})`);
  t.ok(fedAtClose > 0, `it was closed at frame ${fedAtClose}`);
  t.equal(slow.frames.length + dropped, fedAtClose, `every frame up to its close either reached it or is counted as dropped (frames its discarded buffer held, and the one it was not sent), none twice: got ${slow.frames.length} + dropped ${dropped}`);
  for (let i = 0; i < slow.frames.length; i++) if (slow.frames[i]!.data.length !== fast[0]!.frames[i]!.data.length) t.fail('slow subscriber saw a gap before the close');
  await closeAll(fast);
});

/**
 * Sockets on 127.0.0.1:`port` (server side) still owned by this process: /proc/net/tcp lists the whole network
 * namespace (other test processes too), so only inodes this process holds an fd for are counted.
 */
function ownedServerSockets(port: number): number {
  const hexPort = ':' + port.toString(16).toUpperCase().padStart(4, '0');
  const mine = new Set<string>();
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
      if (m !== null) mine.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  // Counted by inode: /proc/net/tcp is read in chunks while sockets come and go, and may list one twice.
  const held = new Set<string>();
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || !f[1]!.endsWith(hexPort) || f[3] === '0A') continue; // 0A = LISTEN
    if (f[9] !== '0' && mine.has(f[9]!)) held.add(f[9]!);
  }
  return held.size;
}

t.test('100 laggards closed for backpressure release their sockets and send buffers at once', async (t) => {
  const capBytes = 256 * 1024;
  const h = await startStream({ streamMaxBackpressureBytes: capBytes, streamMaxPerIp: 1000 });
  t.teardown(() => h.close());
  const port = Number(new URL(h.url).port);
  const fast: Sub[] = [];
  for (let i = 0; i < 3; i++) fast.push(connect(`${h.url}/flashblocks`));
  const slow: Sub[] = [];
  for (let i = 0; i < 100; i++) slow.push(connect(`${h.url}/flashblocks`));
  await Promise.all([...fast, ...slow].map((s) => s.opened));
  for (const s of slow) s.ws.pause(); // never read again
  t.equal(ownedServerSockets(port), 103, 'the server holds 103 sockets');

  const uni = unichainMessages();
  let fed = 0;
  for (let n = 0; n < 2000 && h.metrics.streamSlowCloses.value < 100; n++) {
    for (const m of asBlock(uni, 60_000_000 + n, 64 * 1024)) {
      feed(h.pipeline, Buffer.from(JSON.stringify(m)));
      fed++;
    }
    await tick(1);
  }
  t.equal(h.metrics.streamSlowCloses.value, 100, 'every laggard was closed');
  t.equal(h.stream.subscriberCount(), 3, 'the readers stay');
  await tick(0); // uSockets frees closed sockets at the end of the loop iteration
  // The socket goes with its uWS send buffer; bench/laggards.ts measures the server's RSS around the same event.
  t.equal(ownedServerSockets(port), 3, 'no laggard socket is held open after its close (with end() all 100 stay for seconds)');
  for (const m of asBlock(uni, 70_000_000)) {
    feed(h.pipeline, Buffer.from(JSON.stringify(m)));
    fed++;
  }
  await Promise.all(fast.map((s) => s.waitFor(fed)));
  for (const s of fast) t.equal(s.frames.length, fed, 'readers got every frame');
  for (const s of slow) s.ws.terminate();
  await closeAll(fast);
});

t.test('replay=block sends the current block so far, then live frames, with no gap or duplicate', async (t) => {
  const h = await startStream();
  t.teardown(() => h.close());
  const base = baseSepoliaMessages().map((m) => Buffer.from(JSON.stringify(m)));
  const uni = unichainMessages().map((m) => Buffer.from(JSON.stringify(m)));
  for (const b of base) feed(h.pipeline, b); // an older block: not replayed
  for (const b of uni.slice(0, 3)) feed(h.pipeline, b);
  const r = connect(`${h.url}/flashblocks?replay=block`);
  const live = connect(`${h.url}/flashblocks`);
  await Promise.all([r.opened, live.opened]);
  for (const b of uni.slice(3)) feed(h.pipeline, b);
  const f = fence(h, unichainMessages(), 35535699);
  await Promise.all([r.waitFor(6), live.waitFor(3)]);
  t.equal(digest(r.frames), digest(asText([...uni, f])), 'block frames 0..4 exactly once each, then live');
  t.equal(live.frames.length, 3, 'a plain subscriber gets live frames only');
  await closeAll([r, live]);
});

t.test('subscribers that start between a frame\'s apply and its publish get every frame once: replay, resume, live, brotli', async (t) => {
  const h = await startStream();
  t.teardown(() => h.close());
  const uni = unichainMessages();
  const block = (n: number, pad = 0): Buffer[] => asBlock(uni, n, pad).map((m) => Buffer.from(JSON.stringify(m)));
  const [a, b] = [block(35535701), block(35535702, 20 * 1024)]; // small frames, then frames published synchronously
  for (const f of a.slice(0, 2)) feed(h.pipeline, f);
  const fanout = h.pipeline.events.fanout;
  await fanout.idle();
  // Hold the fan-out queue: frames applied now wait for their publish while subscribers connect and start.
  let release: () => void = () => undefined;
  const gate = new Promise<void>((r) => (release = r));
  let held = false;
  fanout.push(() => (held ? true : ((held = true), gate))); // a step's promise: the queue calls the step again after it
  for (const f of a.slice(2)) feed(h.pipeline, f);
  const replay = connect(`${h.url}/flashblocks?replay=block`);
  const resume = connect(`${h.url}/flashblocks?block_number=35535701&index=1`);
  const upToDate = connect(`${h.url}/flashblocks?block_number=35535701&index=${a.length - 1}`);
  const live = connect(`${h.url}/flashblocks`);
  const br = connect(`${h.url}/flashblocks?encoding=brotli&replay=block`);
  const subs = [replay, resume, upToDate, live, br];
  await Promise.all(subs.map((s) => s.opened));
  for (let i = 0; i < 1000 && h.stream.subscriberCount() < subs.length; i++) await tick(1); // all started
  t.equal(fanout.pending > 1, true, 'the applied frames are still waiting for their publish');
  feed(h.pipeline, b[0]!); // applied after they started: sent live
  release();
  for (const f of b.slice(1)) feed(h.pipeline, f);
  const f = fence(h, uni, 35535703);
  await Promise.all([replay.waitFor(a.length + b.length + 1), resume.waitFor(a.length - 2 + b.length + 1), upToDate.waitFor(b.length + 1), live.waitFor(b.length + 1), br.waitFor(a.length + b.length + 1)]);
  t.equal(digest(replay.frames), digest(asText([...a, ...b, f])), 'replay=block: the block so far (applied, not yet published) once, then live');
  t.equal(digest(resume.frames), digest(asText([...a.slice(2), ...b, f])), 'resume: the frames after the position once, then live');
  t.equal(digest(upToDate.frames), digest(asText([...b, f])), 'resume at the newest applied frame: live only');
  t.equal(digest(live.frames), digest(asText([...b, f])), 'no replay: frames applied after it started');
  const { brotliDecompressSync } = await import('node:zlib');
  t.equal(digest(br.frames.map((x) => ({ data: brotliDecompressSync(x.data), isBinary: false }))), digest(asText([...a, ...b, f])), 'brotli: the same frames once, compressed');
  await closeAll(subs);
});

t.test('sockets that leave free their shard slots; later subscribers fill them and every one gets each frame once', async (t) => {
  const h = await startStream({ streamMaxPerIp: 1000 });
  t.teardown(() => h.close());
  const first: Sub[] = [];
  for (let i = 0; i < 150; i++) first.push(connect(`${h.url}/flashblocks`));
  await Promise.all(first.map((s) => s.opened));
  const leaving = first.filter((_, i) => i % 3 === 0);
  await closeAll(leaving);
  await subscribersDownTo(h.stream, first.length - leaving.length);
  const later: Sub[] = [];
  for (let i = 0; i < 60; i++) later.push(connect(`${h.url}/flashblocks`));
  await Promise.all(later.map((s) => s.opened));
  const staying = [...first.filter((_, i) => i % 3 !== 0), ...later];
  const uni = unichainMessages();
  const sent = [...asBlock(uni, 35535710), ...asBlock(uni, 35535711, 20 * 1024)].map((m) => Buffer.from(JSON.stringify(m)));
  for (const b of sent) feed(h.pipeline, b);
  const f = fence(h, uni, 35535712);
  await Promise.all(staying.map((s) => s.waitFor(sent.length + 1)));
  const want = digest(asText([...sent, f]));
  t.equal(staying.filter((s) => digest(s.frames) === want).length, staying.length, `all ${staying.length} got each frame once, in order`);
  t.equal(h.metrics.streamFramesSent.value, (sent.length + 1) * staying.length, 'deliveries counted');
  await closeAll(staying);
});

t.test('resume after (block, index) returns exactly the missing frames; too old gets a close reason', async (t) => {
  const h = await startStream({ replayRingFrames: 8 });
  t.teardown(() => h.close());
  const base = baseSepoliaMessages().map((m) => Buffer.from(JSON.stringify(m)));
  for (const b of base.slice(0, 9)) feed(h.pipeline, b); // ring holds indexes 1..8 of block 33439826
  const r = connect(`${h.url}/ws?block_number=33439826&index=4`);
  const hex = connect(`${h.url}/flashblocks?block_number=0x1fe4052&index=0x8`);
  await Promise.all([r.opened, hex.opened]);
  for (const b of base.slice(9)) feed(h.pipeline, b);
  const f = fence(h, baseSepoliaMessages(), 33439827);
  await Promise.all([r.waitFor(7), hex.waitFor(3)]);
  t.equal(digest(r.frames), digest(asText([...base.slice(5), f])), 'indexes 5..10, each once');
  t.equal(digest(hex.frames), digest(asText([...base.slice(9), f])), 'hex position; up to date → live only');

  const old = connect(`${h.url}/flashblocks?block_number=33439826&index=0`); // index 1 was evicted
  await old.closed;
  t.equal(old.closeCode, 4000);
  t.equal(old.closeReason, 'resume point older than replay buffer');
  t.equal(h.metrics.streamRefusals.resume_too_old.value, 1);
  t.same(await refusal(`${h.url}/flashblocks?block_number=12`), { status: 400, body: 'resume needs both block_number and index as non-negative integers (decimal or 0x hex)\n' });
  await closeAll([r, hex]);
});

t.test('per-IP and global limits answer 429 and are counted', async (t) => {
  const h = await startStream({ streamMaxPerIp: 2, streamMaxSubscribers: 3 });
  t.teardown(() => h.close());
  const a = connect(`${h.url}/flashblocks`);
  const b = connect(`${h.url}/ws`);
  await Promise.all([a.opened, b.opened]);
  const r = await refusal(`${h.url}/flashblocks`);
  t.equal(r.status, 429);
  t.match(r.body, /too many connections from 127\.0\.0\.1 \(limit 2\)/);
  t.equal(h.metrics.streamRefusals.ip_limit.value, 1);
  a.ws.close();
  await a.closed;
  await subscribersDownTo(h.stream, 1);
  const c = connect(`${h.url}/flashblocks`);
  await c.opened;
  t.pass('a freed slot is reusable');
  await closeAll([b, c]);

  const g = await startStream({ streamMaxPerIp: 10, streamMaxSubscribers: 2 });
  t.teardown(() => g.close());
  const subs = [connect(`${g.url}/flashblocks`), connect(`${g.url}/flashblocks`)];
  await Promise.all(subs.map((s) => s.opened));
  const rg = await refusal(`${g.url}/flashblocks`);
  t.equal(rg.status, 429);
  t.match(rg.body, /subscriber limit \(2\)/);
  t.equal(g.metrics.streamRefusals.global_limit.value, 1);
  await closeAll(subs);
});

t.test('API keys: keyless and unknown keys get 401; per-key limit', async (t) => {
  const h = await startStream({ apiKeys: ['k1', 'k2'], streamMaxPerIp: 2 });
  t.teardown(() => h.close());
  t.same(await refusal(`${h.url}/flashblocks`), { status: 401, body: 'API key required: connect to /flashblocks/<key>\n' });
  t.same(await refusal(`${h.url}/ws/nope`), { status: 401, body: 'unknown API key\n' });
  t.equal(h.metrics.streamRefusals.bad_key.value, 2);
  // Different client IPs (through a trusted proxy would be needed for that), so use the per-key cap directly:
  const a = connect(`${h.url}/flashblocks/k1`);
  const b = connect(`${h.url}/ws/k2`);
  await Promise.all([a.opened, b.opened]);
  const r = await refusal(`${h.url}/ws/k1`);
  t.equal(r.status, 429, 'per-IP limit (2) reached first from one IP');
  await closeAll([a, b]);

  const k = await startStream({ apiKeys: ['k1'], streamMaxPerIp: 2, trustedProxies: ['127.0.0.0/8'] });
  t.teardown(() => k.close());
  const x = connect(`${k.url}/flashblocks/k1`, { 'x-forwarded-for': '1.1.1.1' });
  const y = connect(`${k.url}/flashblocks/k1`, { 'x-forwarded-for': '2.2.2.2' });
  await Promise.all([x.opened, y.opened]);
  const rk = await refusal(`${k.url}/flashblocks/k1`, { 'x-forwarded-for': '3.3.3.3' });
  t.equal(rk.status, 429);
  t.match(rk.body, /for this API key \(limit 2\)/);
  t.equal(k.metrics.streamRefusals.key_limit.value, 1);
  await closeAll([x, y]);
});

t.test('X-Forwarded-For counts only from a trusted proxy', async (t) => {
  const untrusted = await startStream({ streamMaxPerIp: 1 });
  t.teardown(() => untrusted.close());
  const a = connect(`${untrusted.url}/flashblocks`, { 'x-forwarded-for': '1.1.1.1' });
  await a.opened;
  const r = await refusal(`${untrusted.url}/flashblocks`, { 'x-forwarded-for': '2.2.2.2' });
  t.equal(r.status, 429, 'both are 127.0.0.1 when the peer is not trusted');
  t.match(r.body, /from 127\.0\.0\.1/);
  await closeAll([a]);

  const trusted = await startStream({ streamMaxPerIp: 1, trustedProxies: ['127.0.0.0/8'] });
  t.teardown(() => trusted.close());
  const b = connect(`${trusted.url}/flashblocks`, { 'x-forwarded-for': '1.1.1.1' });
  const c = connect(`${trusted.url}/flashblocks`, { 'x-forwarded-for': '2.2.2.2' });
  await Promise.all([b.opened, c.opened]);
  t.pass('different forwarded clients through a trusted proxy are counted apart');
  const d = await refusal(`${trusted.url}/flashblocks`, { 'x-forwarded-for': '1.1.1.1' });
  t.equal(d.status, 429);
  t.match(d.body, /from 1\.1\.1\.1/);
  await closeAll([b, c]);
});

t.test('every X-Forwarded-For line counts: a forged first line does not hide the one a proxy appended', async (t) => {
  const h = await startStream({ streamMaxPerIp: 1, trustedProxies: ['127.0.0.0/8'] });
  t.teardown(() => h.close());
  // A proxy that appends its own line (HAProxy's option forwardfor) after the client's forged one.
  const a = connect(`${h.url}/flashblocks`, { 'x-forwarded-for': ['9.9.9.9', '5.5.5.5'] });
  await a.opened;
  const r = await refusal(`${h.url}/flashblocks`, { 'x-forwarded-for': ['8.8.8.8', '5.5.5.5'] });
  t.equal(r.status, 429, 'both are 5.5.5.5, the address the trusted proxy saw');
  t.match(r.body, /from 5\.5\.5\.5/);
  await closeAll([a]);
});

t.test('drain closes subscribers with 1001 and refuses new ones', async (t) => {
  const h = await startStream();
  const a = connect(`${h.url}/flashblocks`);
  await a.opened;
  await h.stream.drain(100);
  await a.closed;
  t.equal(a.closeCode, 1001);
  t.equal(a.closeReason, 'server shutting down');
  t.equal((await refusal(`${h.url}/flashblocks`)).status, 503);
  await h.close();
});
