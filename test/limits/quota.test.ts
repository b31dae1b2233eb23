// Request-rate quotas (--rate-limit-rps) on the real JSON-RPC server: local (RateLimiterMemory) and shared through a
// real redis-server by two servers; HTTP 429 with -32005, the WebSocket answer, and Redis killed → local quotas.
import t from 'tap';
import WebSocket from 'ws';
import { Redis } from 'ioredis';
import { RequestQuota } from '../../src/limits/quota.js';
import { RedisLink } from '../../src/limits/redis.js';
import { silentLogger } from '../../src/log.js';
import { startRpc, type RpcHarness } from '../helpers/rpc-harness.js';
import { startRedis, until, type RedisServer } from '../helpers/redis.js';

const CHAIN_ID = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'eth_chainId', params: [] });

async function post(h: RpcHarness, path = ''): Promise<{ status: number; body: { error?: { code: number; message: string } }; retryAfter: string | null }> {
  const r = await fetch(h.url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: CHAIN_ID });
  return { status: r.status, body: (await r.json()) as { error?: { code: number; message: string } }, retryAfter: r.headers.get('retry-after') };
}

/** A JSON-RPC server whose quota is shared through `redisUrl` (or local when null). */
async function server(rps: number, redisUrl: string | null, apiKeys: string[] = []): Promise<{ h: RpcHarness; link: RedisLink | null; close(): Promise<void> }> {
  let link: RedisLink | null = null;
  const h = await startRpc({
    config: { apiKeys },
    quota: (metrics) => {
      link = redisUrl === null ? null : new RedisLink(redisUrl, metrics, silentLogger, { probeMs: 50 });
      return new RequestQuota({ rps }, link);
    },
  });
  return { h, link: link as RedisLink | null, close: async () => (await h.close(), await link?.close()) };
}

let redis: RedisServer;
let probe: Redis;
t.before(async () => {
  redis = await startRedis();
  probe = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  probe.on('error', () => {});
});
t.teardown(async () => {
  probe.disconnect();
  await redis.stop();
});

t.test('local quota: over --rate-limit-rps a request gets HTTP 429 with -32005, and is counted', async (t) => {
  const s = await server(3, null);
  t.teardown(() => s.close());
  const answers = await Promise.all(Array.from({ length: 30 }, () => post(s.h)));
  const refused = answers.filter((a) => a.status === 429);
  const served = answers.filter((a) => a.status === 200);
  t.ok(served.length >= 3, `the first requests are served (${served.length})`);
  t.ok(refused.length > 0, `requests over the quota are refused (${refused.length} of 30)`);
  t.same(refused[0]!.body.error, { code: -32005, message: 'rate limit exceeded' });
  t.equal(refused[0]!.retryAfter, '1');
  t.equal(s.h.ctx.metrics.rateLimited.ip.value, refused.length);
});

t.test('shared quota: what one instance (or another client of the Redis) spent refuses on the other', async (t) => {
  const a = await server(5, redis.url, ['key-a']);
  const b = await server(5, redis.url, ['key-a']);
  const alone = await server(5, null);
  t.teardown(() => Promise.all([a.close(), b.close(), alone.close()]).then(() => undefined));
  await until(() => a.link!.up && b.link!.up, 10_000, 'links up');
  t.equal((await post(a.h)).status, 200, 'served while under quota');
  t.ok((await probe.exists('flashblocksd:rate:i:127.0.0.1')) === 1, 'the IP quota lives in Redis');

  // The IP's window is spent elsewhere: both instances refuse at once, an instance with local quotas does not.
  await probe.set('flashblocksd:rate:i:127.0.0.1', '1000', 'PX', 1500);
  const rb = await post(b.h);
  t.equal(rb.status, 429, 'B refuses: the quota is shared');
  t.same(rb.body.error, { code: -32005, message: 'rate limit exceeded' });
  t.equal((await post(alone.h)).status, 200, 'an instance without Redis still serves');
  await until(async () => (await post(a.h)).status === 429, 5000, 'A refuses too');
  await until(async () => (await post(b.h)).status === 200, 10_000, 'served again once the window ended');

  // The API key's quota, on POST /<key>: the key is spent, the IP is not.
  const keyId = RequestQuota.apiKeyId('key-a');
  await probe.set(`flashblocksd:rate:${keyId}`, '1000', 'PX', 1500);
  const rk = await post(a.h, 'key-a');
  t.equal(rk.status, 429, 'a spent API key is refused');
  t.equal(a.h.ctx.metrics.rateLimited.key.value, 1);
  t.notOk((await probe.keys('flashblocksd:rate:*')).some((k) => k.includes('key-a')), 'Redis never stores the API key itself');
});

t.test('WebSocket JSON-RPC: a message over quota is answered with the -32005 error and its id', async (t) => {
  const a = await server(5, redis.url);
  t.teardown(() => a.close());
  await until(() => a.link!.up, 10_000, 'link up');
  await probe.set('flashblocksd:rate:i:127.0.0.1', '1000', 'PX', 3000);
  const ws = new WebSocket(a.h.wsUrl);
  t.teardown(() => ws.close());
  await new Promise((r, j) => (ws.once('open', r), ws.once('error', j)));
  const answer = new Promise<string>((r) => ws.once('message', (d: Buffer) => r(d.toString())));
  ws.send(JSON.stringify({ jsonrpc: '2.0', id: 42, method: 'eth_chainId', params: [] }));
  t.same(JSON.parse(await answer), { jsonrpc: '2.0', id: 42, error: { code: -32005, message: 'rate limit exceeded' } });
  t.equal(a.h.ctx.metrics.rateLimited.ip.value, 1);
});

t.test('Redis killed: requests are decided by local quotas, counted, and shared again once it is back', async (t) => {
  const own = await startRedis();
  t.teardown(() => own.stop());
  const a = await server(1000, own.url);
  t.teardown(() => a.close());
  await until(() => a.link!.up, 10_000, 'link up');
  const m = a.h.ctx.metrics;
  t.equal(m.redisUp.value, 1);
  await own.kill();
  await until(() => !a.link!.up, 10_000, 'link down');
  t.equal(m.redisUp.value, 0);
  t.ok(m.redisFallbacks.value >= 1);
  // Well past one lease: these ask a limiter, the local one.
  const answers = await Promise.all(Array.from({ length: 200 }, () => post(a.h)));
  t.ok(answers.every((x) => x.status === 200), 'all served under the local quota (1000/s)');
  await own.restart();
  await until(() => a.link!.up, 15_000, 'link up again');
  t.equal(m.redisUp.value, 1);
  const fresh = new Redis(own.url);
  t.teardown(() => fresh.disconnect());
  await until(async () => (await post(a.h), (await fresh.exists('flashblocksd:rate:i:127.0.0.1')) === 1), 10_000, 'the quota is in Redis again');
  t.pass();
});

t.test('points are leased in chunks: after one limiter call, the next requests of the chunk are decided synchronously', async (t) => {
  const q = new RequestQuota({ rps: 100 }, null); // chunk ⌈100/20⌉ = 5
  const first = q.check('192.0.2.1', null);
  t.ok(first instanceof Promise, 'the first request asks the limiter');
  t.equal(await first, 'ok');
  for (let i = 0; i < 4; i++) t.equal(q.check('192.0.2.1', null), 'ok', 'served from the lease, no limiter call');
  t.ok(q.check('192.0.2.1', null) instanceof Promise, 'the chunk is spent: the limiter is asked again');
  t.ok(q.check('192.0.2.2', null) instanceof Promise, 'another IP has its own lease');
});
