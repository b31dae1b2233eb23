// Two whole daemons with --redis-url and --rate-limit-rps on one real redis-server: the stream's per-IP limit holds
// across them, quotas answer 429, /metrics shows flashblocksd_redis_up, and the Redis password never reaches a log line.
import t from 'tap';
import WebSocket from 'ws';
import { Redis } from 'ioredis';
import { loadConfig } from '../../src/config.js';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { createLogger } from '../../src/log.js';
import { startRedis, until } from '../helpers/redis.js';

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

t.test('two daemons share the per-IP stream limit and the rate quota through Redis', async (t) => {
  const redis = await startRedis();
  t.teardown(() => redis.stop());
  // redis-server has no password: ioredis sends AUTH, which Redis 7 refuses harmlessly; the URL stays a secret.
  const url = `redis://default:pw-hunter2@127.0.0.1:${redis.port}`;
  const lines: string[] = [];
  const log = createLogger({ level: 'debug', write: (l: string) => void lines.push(l) });
  const args = ['--flashblocks-enabled', 'false', '--node-rpc-url', 'http://127.0.0.1:9', '--port', '0', '--metrics-port', '0', '--execution', 'false', '--redis-url', url, '--stream-max-per-ip', '2', '--rate-limit-rps', '2'];
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
  t.equal(await dial(`ws://127.0.0.1:${a.rpcPort}/flashblocks`), 429, 'the third connection is refused: one per daemon is two in all');

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
