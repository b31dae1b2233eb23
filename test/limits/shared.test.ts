// Shared connection limits over a real redis-server: two raw-stream servers (each its own uWS app, Redis link and
// leases, as two instances would have) share one Redis; per-IP and per-API-key limits hold across them, a dead
// instance's leases expire, and Redis killed/restarted moves both to local limits and back. A connection the shared
// count refuses is closed after its handshake (1008 and the reason); one refused by local counts gets HTTP 429.
import t from 'tap';
import WebSocket from 'ws';
import type { us_listen_socket } from 'uWebSockets.js';
import { loadConfig, type Config } from '../../src/config.js';
import { ConnectionLeases } from '../../src/limits/connections.js';
import { RedisLink } from '../../src/limits/redis.js';
import { createLogger, silentLogger } from '../../src/log.js';
import { createMetrics, type Metrics } from '../../src/metrics/metrics.js';
import { loadUws } from '../../src/binaries.js';
import { mountLocalStream as mountStream } from '../../src/stream/local.js';
import { makePipeline } from '../helpers/ingest.js';
import { redisForFile, until } from '../helpers/redis.js';
import { closeOnce } from '../helpers/stream.js';

const uWS = loadUws();
const LIMIT = 3;

interface Instance {
  url: string;
  metrics: Metrics;
  link: RedisLink;
  leases: ConnectionLeases;
  subscribers(): number;
  /** Connections upgraded and waiting for Redis's answer. */
  waits(): number;
  close(): Promise<void>;
}

async function instance(redisUrl: string, over: Partial<Config> = {}, lease = { leaseMs: 30_000, heartbeatMs: 10_000 }): Promise<Instance> {
  const config: Config = { ...loadConfig([], {}), streamMaxPerIp: LIMIT, ...over };
  const metrics = createMetrics({ version: 'test', commit: 'test' });
  const link = new RedisLink(redisUrl, metrics, silentLogger, { probeMs: 50 });
  const leases = new ConnectionLeases(link, { limit: LIMIT, ...lease });
  const app = uWS.App();
  const stream = mountStream(app, { options: config, events: makePipeline().pipeline.events, metrics, log: silentLogger, leases });
  const listen = await new Promise<us_listen_socket>((resolve, reject) => app.listen('127.0.0.1', 0, (s) => (s === false ? reject(new Error('listen')) : resolve(s))));
  return {
    url: `ws://127.0.0.1:${uWS.us_socket_local_port(listen)}`,
    metrics,
    link,
    leases,
    subscribers: () => stream.subscriberCount(),
    waits: () => stream.admissionWaits(),
    close: closeOnce({ stream, listen, closeListen: (l) => uWS.us_listen_socket_close(l as us_listen_socket), leases, link }),
  };
}

type Dialled = { ws: WebSocket } | { status: number; body: string } | { code: number; reason: string };

/**
 * Opens a stream connection on `inst`; resolves with the socket once admitted, with the HTTP refusal's status and body,
 * or with the close code and reason of a connection refused after its handshake (by the shared count). Admitted is
 * known without timing: once `inst` has answered every waiting connection, a ping's pong comes after any close frame.
 */
function dial(inst: Instance, path: string, headers: Record<string, string> = {}): Promise<Dialled> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${inst.url}${path}`, { headers, perMessageDeflate: false });
    ws.on('error', (e) => {
      if (!/Unexpected server response/.test(String(e))) reject(e);
    });
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() }));
    ws.once('open', () => {
      void until(() => inst.waits() === 0, 10_000, 'admission decided').then(() => {
        ws.once('pong', () => {
          if (ws.readyState === WebSocket.OPEN) resolve({ ws });
        });
        ws.ping();
      }, reject);
    });
  });
}

/** The close code and reason of a connection refused after its handshake (undefined for any other outcome). */
const closedWith = (r: Dialled): string | undefined => ('code' in r ? `${r.code} ${r.reason}` : undefined);
const httpStatus = (r: Dialled): number | undefined => ('status' in r ? r.status : undefined);

async function open(inst: Instance, path: string, headers: Record<string, string> = {}): Promise<WebSocket> {
  const r = await dial(inst, path, headers);
  if ('ws' in r) return r.ws;
  throw new Error(`expected ${inst.url}${path} to accept, got ${JSON.stringify(r)}`);
}

async function closeAll(socks: WebSocket[], insts: Instance[]): Promise<void> {
  for (const s of socks.splice(0)) s.close();
  await until(() => insts.every((i) => i.subscribers() === 0), 10_000, 'subscribers closed');
}


const fx = redisForFile(t);

const ipKey = 'flashblocksd:conn:ip:127.0.0.1';
const held = async (key: string): Promise<number> => {
  try {
    return await fx.probe.zcard(key);
  } catch {
    return -1;
  }
};

t.test('per-IP limit holds across two instances; killing Redis falls back to local limits; restarting it shares them again', async (t) => {
  const a = await instance(fx.server.url);
  const b = await instance(fx.server.url);
  t.teardown(() => Promise.all([a.close(), b.close()]).then(() => undefined));
  await until(() => a.link.up && b.link.up, 10_000, 'both links up');
  t.equal(a.metrics.redisUp.value, 1);
  const socks: WebSocket[] = [];
  socks.push(await open(a, '/flashblocks'), await open(b, '/flashblocks'), await open(a, '/ws'));
  t.equal(await held(ipKey), LIMIT, 'three leases for 127.0.0.1 in Redis');
  for (const inst of [a, b]) {
    const r = await dial(inst, '/flashblocks');
    t.equal(closedWith(r), `1008 too many connections from 127.0.0.1 (limit ${LIMIT})`, 'the 4th connection is closed after its handshake on either instance, with the reason');
    t.equal(inst.metrics.streamRefusals.ip_limit.value, 1);
  }
  t.equal(a.subscribers() + b.subscribers(), LIMIT);

  // One closes on A: a slot frees on B.
  socks.shift()!.close();
  await until(async () => (await held(ipKey)) === LIMIT - 1, 10_000, 'lease released');
  socks.push(await open(b, '/flashblocks'));
  t.equal(b.subscribers(), 2);
  await closeAll(socks, [a, b]);
  await until(async () => (await held(ipKey)) === 0, 10_000, 'all leases released');

  // Redis dies: each instance counts on its own and keeps serving.
  await fx.server.kill();
  await until(() => !a.link.up && !b.link.up, 10_000, 'both links down');
  t.equal(a.metrics.redisUp.value, 0);
  t.equal(b.metrics.redisUp.value, 0);
  t.ok(a.metrics.redisFallbacks.value >= 1 && b.metrics.redisFallbacks.value >= 1, 'fallbacks counted');
  for (const inst of [a, b]) for (let i = 0; i < LIMIT; i++) socks.push(await open(inst, '/flashblocks'));
  t.equal(a.subscribers() + b.subscribers(), 2 * LIMIT, 'local limits: each instance admits its own three');
  const local = await dial(a, '/flashblocks');
  t.equal(httpStatus(local), 429, 'the local limit still refuses the 4th on one instance, before the upgrade');

  // Redis returns (empty): both go back to shared limits and re-register the six they hold.
  await fx.server.restart();
  await until(() => a.link.up && b.link.up, 15_000, 'both links up again');
  t.equal(a.metrics.redisUp.value, 1);
  await until(async () => (await held(ipKey)) === 2 * LIMIT, 15_000, 'held connections re-registered');
  const shared = await dial(b, '/flashblocks');
  t.equal(closedWith(shared), `1008 too many connections from 127.0.0.1 (limit ${LIMIT})`, 'shared again: six held, the next one is refused');
  await closeAll(socks, [a, b]);
  await until(async () => (await held(ipKey)) === 0, 10_000, 'released after the restart');
  socks.push(await open(a, '/flashblocks'), await open(a, '/flashblocks'), await open(b, '/flashblocks'));
  const again = await dial(b, '/flashblocks');
  t.equal(closedWith(again), `1008 too many connections from 127.0.0.1 (limit ${LIMIT})`, 'the N+1-th is refused across instances after recovery');
  await closeAll(socks, [a, b]);
});

t.test('per-API-key limit holds across instances, whatever the client IP', async (t) => {
  const over = { apiKeys: ['k-one', 'k-two'], trustedProxies: ['127.0.0.1'], streamMaxPerIp: LIMIT };
  const a = await instance(fx.server.url, over);
  const b = await instance(fx.server.url, over);
  t.teardown(() => Promise.all([a.close(), b.close()]).then(() => undefined));
  await until(() => a.link.up && b.link.up, 10_000, 'both links up');
  const socks: WebSocket[] = [];
  for (let i = 0; i < LIMIT; i++) socks.push(await open(i % 2 === 0 ? a : b, '/flashblocks/k-one', { 'x-forwarded-for': `10.0.0.${i + 1}` }));
  for (const inst of [a, b]) {
    const r = await dial(inst, '/flashblocks/k-one', { 'x-forwarded-for': '10.0.0.99' });
    t.equal(closedWith(r), `1008 too many connections for this API key (limit ${LIMIT})`, 'a 4th connection with the same key is refused on either instance');
    t.equal(inst.metrics.streamRefusals.key_limit.value, 1);
  }
  socks.push(await open(b, '/flashblocks/k-two', { 'x-forwarded-for': '10.0.0.99' }));
  t.pass('another key is not affected');
  const keys = await fx.probe.keys('flashblocksd:conn:key:*');
  t.equal(keys.length, 2);
  t.notOk(keys.some((k) => k.includes('k-one') || k.includes('k-two')), 'Redis holds hashes of the keys, never the keys');
  await closeAll(socks, [a, b]);
});

t.test("a dead instance's connections stop counting once its leases expire", async (t) => {
  const lease = { leaseMs: 400, heartbeatMs: 100 };
  const a = await instance(fx.server.url, {}, lease);
  const b = await instance(fx.server.url, {}, lease);
  t.teardown(() => Promise.all([a.close(), b.close()]).then(() => undefined));
  await until(() => a.link.up && b.link.up, 10_000, 'both links up');
  const socks: WebSocket[] = [];
  for (let i = 0; i < LIMIT; i++) socks.push(await open(a, '/flashblocks'));
  // Renewals keep them counted over several lease periods.
  await new Promise((r) => setTimeout(r, 1000));
  const r = await dial(b, '/flashblocks');
  t.equal(closedWith(r), `1008 too many connections from 127.0.0.1 (limit ${LIMIT})`, 'renewed leases still count');
  // A "dies": no more renewals, no releases (its sockets stay open, as if its host vanished).
  a.leases.close();
  await a.link.close();
  await until(async () => 'ws' in (await dial(b, '/flashblocks').then((x) => ('ws' in x ? (socks.push(x.ws), x) : x))), 10_000, "B admits once A's leases expired");
  t.pass();
  await closeAll(socks, [a, b]);
});

t.test('a hung Redis (stopped, connection open) costs a connection at most the command timeout, then local limits', async (t) => {
  const a = await instance(fx.server.url);
  t.teardown(() => a.close());
  await until(() => a.link.up, 10_000, 'link up');
  fx.server.pause();
  t.teardown(() => fx.server.resume());
  const socks: WebSocket[] = [];
  // The first connection waits for Redis (upgraded, sent nothing) until the command timeout, then is decided locally
  // and admitted.
  socks.push(await open(a, '/flashblocks'));
  t.notOk(a.link.up, 'the failed command moved the instance to local limits');
  t.equal(a.metrics.redisUp.value, 0);
  t.equal(a.metrics.redisFallbacks.value, 1);
  for (let i = 1; i < LIMIT; i++) socks.push(await open(a, '/flashblocks'));
  const r = await dial(a, '/flashblocks');
  t.equal(httpStatus(r), 429, 'local limits refuse the 4th');
  fx.server.resume();
  await until(() => a.link.up, 10_000, 'a PING answered: shared again');
  t.equal(a.metrics.redisUp.value, 1);
  await until(async () => (await held(ipKey)) === LIMIT, 10_000, 'the locally admitted connections registered in Redis');
  await closeAll(socks, [a]);
  await until(async () => (await held(ipKey)) === 0, 10_000, 'released');
});

t.test('the redis URL password never reaches the log', async (t) => {
  const lines: string[] = [];
  const log = createLogger({ level: 'debug', write: (l: string) => void lines.push(l) });
  const metrics = createMetrics({ version: 'test', commit: 'test' });
  const link = new RedisLink('redis://user:hunter2-secret@127.0.0.1:1', metrics, log, { probeMs: 50 });
  await until(() => metrics.redisFallbacks.value === 1, 10_000, 'the unreachable Redis counted');
  await link.close();
  t.equal(metrics.redisUp.value, 0);
  const warns = lines.filter((l) => l.includes('redis unreachable'));
  t.equal(warns.length, 1, 'one warning, not one per reconnect attempt');
  t.notOk(lines.join('\n').includes('hunter2'), 'no password in any line');
});

