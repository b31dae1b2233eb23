// Two whole daemons with --redis-url and --rate-limit-rps on one real redis-server: the stream's per-IP limit holds
// across them (over it, a connection is closed after its handshake with 1008), quotas answer 429, /metrics shows
// flashblocksd_redis_up, and the Redis password never reaches a log line. Handshakes sent with `Connection: close` to
// the main port stay open and receive frames (uNetworking/uWebSockets#1929 closed them when the upgrade came after
// Redis's answer).
import t from 'tap';
import WebSocket from 'ws';
import { Redis } from 'ioredis';
import { loadConfig } from '../../src/config.js';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { createLogger, silentLogger } from '../../src/log.js';
import { unichainMessages } from '../helpers/fixtures.js';
import { feed } from '../helpers/ingest.js';
import { startRedis, until } from '../helpers/redis.js';
import { rawUpgrade, type RawUpgrade } from '../helpers/stream.js';

function dial(url: string): Promise<WebSocket | number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    ws.on('open', () => resolve(ws));
    ws.on('error', (e) => {
      if (!/Unexpected server response/.test(String(e))) reject(e);
    });
    ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
  });
}

/** A connection expected to be refused: the HTTP status, or the close code and reason after its handshake. */
function refused(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    ws.on('error', (e) => {
      if (!/Unexpected server response/.test(String(e))) reject(e);
    });
    ws.on('unexpected-response', (_req, res) => resolve(`HTTP ${res.statusCode}`));
    ws.on('close', (code, reason) => resolve(`${code} ${reason.toString()}`));
  });
}

const daemonArgs = (redisUrl: string, maxPerIp: number): string[] =>
  ['--flashblocks-enabled', 'false', '--node-rpc-url', 'http://127.0.0.1:9', '--port', '0', '--metrics-port', '0', '--execution', 'false', '--redis-url', redisUrl, '--stream-max-per-ip', String(maxPerIp)];

t.test('two daemons share the per-IP stream limit and the rate quota through Redis', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  // redis-server has no password: ioredis sends AUTH, which Redis 7 refuses harmlessly; the URL stays a secret.
  const url = `redis://default:pw-hunter2@127.0.0.1:${redis.port}`;
  const lines: string[] = [];
  const log = createLogger({ level: 'debug', write: (l: string) => void lines.push(l) });
  const args = [...daemonArgs(url, 2), '--rate-limit-rps', '2'];
  const daemons: Daemon[] = [];
  t.teardown(async () => {
    for (const d of daemons) await d.stop();
  });
  for (let i = 0; i < 2; i++) daemons.push(await startDaemon(loadConfig(args, {}), { log }));
  const [a, b] = daemons as [Daemon, Daemon];
  await until(() => a.metrics.redisUp.value === 1 && b.metrics.redisUp.value === 1, 10_000, 'both daemons on Redis');
  const scrape = await (await fetch(`http://127.0.0.1:${a.metricsPort}/metrics`)).text();
  t.match(scrape, /^flashblocksd_redis_up 1$/m);
  t.match(scrape, /^flashblocksd_redis_fallbacks_total 0$/m);

  const socks: WebSocket[] = [];
  t.teardown(() => socks.forEach((s) => s.close()));
  for (const d of [a, b]) {
    const s = await dial(`ws://127.0.0.1:${d.rpcPort}/flashblocks`);
    t.type(s, WebSocket);
    socks.push(s as WebSocket);
  }
  t.equal(await refused(`ws://127.0.0.1:${a.rpcPort}/flashblocks`), '1008 too many connections from 127.0.0.1 (limit 2)', 'the third connection is refused: one per daemon is two in all');
  t.equal(a.metrics.streamRefusals.ip_limit.value, 1, 'counted');

  const post = (d: Daemon): Promise<number> =>
    fetch(`http://127.0.0.1:${d.rpcPort}/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' }).then((r) => r.status);
  const statuses = await Promise.all(Array.from({ length: 12 }, (_, i) => post(i % 2 === 0 ? a : b)));
  t.ok(statuses.includes(429), 'over 2 requests/s, requests are refused');
  t.notOk(lines.some((l) => l.includes('hunter2')), 'no log line carries the Redis password');
  t.ok(lines.some((l) => l.includes('redis connected')), 'the connection to Redis is logged (redacted)');

  // A graceful stop releases what the daemons held (the releases reach Redis before the client quits).
  const probe = new Redis(redis.url);
  t.teardown(() => probe.disconnect());
  t.equal(await probe.zcard('flashblocksd:conn:ip:127.0.0.1'), 2);
  for (const d of daemons.splice(0)) await d.stop();
  t.equal(await probe.zcard('flashblocksd:conn:ip:127.0.0.1'), 0, 'no lease left behind by a stopped daemon');
});

t.test('handshakes sent with "Connection: close" to two daemons\' main ports all stay open and receive frames', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  const N = 12;
  const daemons: Daemon[] = [];
  t.teardown(async () => {
    for (const d of daemons) await d.stop();
  });
  for (let i = 0; i < 2; i++) daemons.push(await startDaemon(loadConfig(daemonArgs(redis.url, N), {}), { log: silentLogger }));
  const [a, b] = daemons as [Daemon, Daemon];
  await until(() => a.metrics.redisUp.value === 1 && b.metrics.redisUp.value === 1, 10_000, 'both daemons on Redis');
  const socks: RawUpgrade[] = [];
  t.teardown(() => socks.forEach((s) => s.socket.destroy()));
  for (let i = 0; i < N; i++) socks.push(await rawUpgrade((i % 2 === 0 ? a : b).rpcPort, 'close'));
  t.ok(socks.every((s) => s.head.startsWith('HTTP/1.1 101')), `${N} handshakes answered 101`);
  await until(() => a.metrics.streamSubscribers.value + b.metrics.streamSubscribers.value === N, 10_000, 'all admitted');
  const frame = Buffer.from(JSON.stringify(unichainMessages()[0]));
  for (const d of daemons) feed(d.pipeline, frame);
  await until(() => socks.every((s) => s.frames() >= frame.length), 10_000, 'the frame reached every socket');
  t.pass('every one receives the frame');
  t.ok(socks.every((s) => !s.closed()), 'none was closed');
  t.equal(await refused(`ws://127.0.0.1:${b.rpcPort}/flashblocks`), `1008 too many connections from 127.0.0.1 (limit ${N})`, `the ${N + 1}th is refused with 1008 and the reason`);
  t.equal(b.metrics.streamRefusals.ip_limit.value, 1, 'counted in flashblocksd_stream_refusals_total');
  const scrape = await (await fetch(`http://127.0.0.1:${b.metricsPort}/metrics`)).text();
  t.match(scrape, /^flashblocksd_stream_refusals_total\{reason="ip_limit"\} 1$/m);
  for (const s of socks.splice(0)) s.socket.destroy();
  const probe = new Redis(redis.url);
  t.teardown(() => probe.disconnect());
  await until(async () => (await probe.zcard('flashblocksd:conn:ip:127.0.0.1')) === 0, 10_000, 'every lease released');
  t.equal(a.metrics.streamSubscribers.value + b.metrics.streamSubscribers.value, 0);
});
