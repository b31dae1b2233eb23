// Tests for src/metrics/server.ts over real HTTP on port 0: /metrics exposition (and promtool on it), /healthz,
// /readyz 200 vs 503 with its JSON detail, 404/405/HEAD, start-up failure on a taken port, close().

import t from 'tap';
import { spawnSync } from 'node:child_process';
import { request } from 'node:http';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { startMetricsServer, type HealthReport } from '../../src/metrics/server.js';

const HOST = '127.0.0.1';
const PROMTOOL = spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;
const NO_PROMTOOL = 'promtool not on PATH (apt-get install prometheus); CI installs it and runs this check';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request with node:http (fetch would hide HEAD bodies and keep-alive details). */
function call(port: number, path: string, method = 'GET'): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: HOST, port, path, method, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

function report(ready: boolean): HealthReport {
  return {
    ready,
    upstreamConnected: ready ? 1 : 0,
    pendingAgeMs: ready ? 180 : null,
    nodeReachable: true,
    checks: {
      upstream: { ok: ready, detail: ready ? '1 of 1 upstreams connected' : '0 of 1 upstreams connected' },
      node: { ok: true, detail: 'eth_blockNumber answered in 2 ms' },
    },
  };
}

type Health = () => HealthReport | Promise<HealthReport>;

async function start(t: { teardown(fn: () => unknown): void }, health: Health, healthTimeoutMs?: number) {
  const lines: string[] = [];
  const log = createLogger({ level: 'debug', write: (l) => lines.push(l) });
  const metrics = createMetrics({ version: '9.9.9', commit: 'feedbee' });
  const server = await startMetricsServer({ host: HOST, port: 0, metrics, health, healthTimeoutMs }, log);
  t.teardown(() => server.close());
  return { server, metrics, lines };
}

t.test('GET /metrics serves the registry in Prometheus text format', async (t) => {
  const { server, metrics, lines } = await start(t, () => report(true));
  t.ok(server.port > 0, `bound port ${server.port}`);
  t.ok(lines.some((l) => l.includes('metrics server listening') && l.includes(`"port":${server.port}`)), 'logged');

  metrics.decodeErrors.json.inc(2);
  metrics.pendingBlock.set(33439826);
  metrics.rpcHandle('eth_getTransactionReceipt', 'state').counter.inc();
  metrics.rpcHandle('eth_getTransactionReceipt', 'state').histogram.observe(0.00004);

  const r = await call(server.port, '/metrics');
  t.equal(r.status, 200);
  t.equal(r.headers['content-type'], metrics.registry.contentType);
  t.match(r.body, /^# TYPE flashblocksd_decode_errors_total counter$/m);
  t.match(r.body, /^flashblocksd_decode_errors_total\{reason="json"\} 2$/m);
  t.match(r.body, /^flashblocksd_pending_block_number 33439826$/m);
  t.match(r.body, /^flashblocksd_rpc_requests_total\{method="eth_getTransactionReceipt",source="state"\} 1$/m);
  t.match(r.body,
    /^flashblocksd_rpc_request_seconds_bucket\{method="eth_getTransactionReceipt",source="state",le="0.00005"\} 1$/m);
  t.match(r.body, /^flashblocksd_build_info\{version="9.9.9",node="v\d+\.\d+\.\d+",commit="feedbee"\} 1$/m);
  t.match(r.body, /^# TYPE flashblocksd_nodejs_eventloop_lag_seconds gauge$/m);
  t.match(r.body, /^# TYPE flashblocksd_process_resident_memory_bytes gauge$/m);

  const q = await call(server.port, '/metrics?name[]=x');
  t.equal(q.status, 200, 'a query string is ignored');

  await t.test('promtool check metrics finds no problems in the served text', { skip: PROMTOOL ? false : NO_PROMTOOL },
    async (t) => {
      const p = spawnSync('promtool', ['check', 'metrics'], { input: r.body, encoding: 'utf8' });
      t.equal(p.status, 0, 'promtool check metrics exit status');
      t.equal(`${p.stdout}${p.stderr}`.trim(), '', 'promtool reports no problems');
    });
});

t.test('GET /healthz is 200 while the process lives, whatever readiness says', async (t) => {
  const { server } = await start(t, () => report(false));
  const r = await call(server.port, '/healthz');
  t.equal(r.status, 200);
  t.same(JSON.parse(r.body), { status: 'ok' });
  t.match(r.headers['content-type'], /^application\/json/);
  t.equal(r.headers['cache-control'], 'no-store');
});

t.test('GET /readyz is 200 when ready and 503 when not, with the report as JSON', async (t) => {
  let ready = false;
  const { server } = await start(t, () => report(ready));

  const down = await call(server.port, '/readyz');
  t.equal(down.status, 503);
  t.same(JSON.parse(down.body), report(false));

  ready = true;
  const up = await call(server.port, '/readyz');
  t.equal(up.status, 200);
  const body = JSON.parse(up.body) as HealthReport;
  t.equal(body.ready, true);
  t.equal(body.upstreamConnected, 1);
  t.equal(body.pendingAgeMs, 180);
  t.equal(body.nodeReachable, true);
  t.same(body.checks.upstream, { ok: true, detail: '1 of 1 upstreams connected' });
});

t.test('an async health() is awaited', async (t) => {
  const { server } = await start(t, async () => {
    await new Promise((r) => setTimeout(r, 5));
    return report(true);
  });
  t.equal((await call(server.port, '/readyz')).status, 200);
});

t.test('a health() that throws or hangs answers 503 with the reason', async (t) => {
  const { server: throwing, lines } = await start(t, () => {
    throw new Error('state not wired yet');
  });
  const r = await call(throwing.port, '/readyz');
  t.equal(r.status, 503);
  t.same(JSON.parse(r.body), { ready: false, error: 'state not wired yet' });
  t.ok(lines.some((l) => l.includes('readiness check failed')), 'logged');

  const { server: hanging } = await start(t, () => new Promise<HealthReport>(() => {}), 50);
  const h = await call(hanging.port, '/readyz');
  t.equal(h.status, 503);
  t.match(JSON.parse(h.body), { ready: false, error: /longer than 50 ms/ });
});

t.test('unknown paths are 404, other methods 405, HEAD has headers only', async (t) => {
  const { server } = await start(t, () => report(true));
  t.equal((await call(server.port, '/')).status, 404);
  t.equal((await call(server.port, '/metricsx')).status, 404);
  t.equal((await call(server.port, '/flashblocks', 'POST')).status, 404);

  const post = await call(server.port, '/metrics', 'POST');
  t.equal(post.status, 405);
  t.equal(post.headers.allow, 'GET, HEAD');
  t.equal((await call(server.port, '/readyz', 'DELETE')).status, 405);

  const head = await call(server.port, '/metrics', 'HEAD');
  t.equal(head.status, 200);
  t.equal(head.body, '');
  t.ok(Number(head.headers['content-length']) > 1000, 'content-length of the GET body');
});

t.test('a taken port rejects start-up with a message naming the address', async (t) => {
  const { server } = await start(t, () => report(true));
  const metrics = createMetrics({ version: 'x', commit: 'y' });
  const log = createLogger({ level: 'error', write: () => {} });
  await t.rejects(
    startMetricsServer({ host: HOST, port: server.port, metrics, health: () => report(true) }, log),
    { message: new RegExp(`${HOST}:${server.port} \\(EADDRINUSE\\)`) },
  );
});

t.test('close() stops listening and can be called twice', async (t) => {
  const log = createLogger({ level: 'error', write: () => {} });
  const server = await startMetricsServer(
    { host: HOST, port: 0, metrics: createMetrics({ version: 'x', commit: 'y' }), health: () => report(true) }, log);
  t.equal((await call(server.port, '/healthz')).status, 200);
  await Promise.all([server.close(), server.close()]);
  await server.close();
  await t.rejects(call(server.port, '/healthz'), { code: 'ECONNREFUSED' });
});
