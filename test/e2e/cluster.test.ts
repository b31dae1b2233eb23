// Issue 16's acceptance on a real cluster (scripts/cluster.ts): redis-server, three flashblocksd instances on the
// embedded devnet and HAProxy round-robin in front. (a) a client pinning to the flashblock of its last answer never
// goes back across 10,000 requests spread over the instances; (b) per-key / per-IP stream limits hold across
// instances; (c) Redis killed → instances serve on with local limits, Redis back → shared limits again. A connection
// refused by the shared count is closed after its handshake (1008); one refused by local counts gets HTTP 429.
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { Pool } from 'undici';
import WebSocket from 'ws';
import { startCluster, type Cluster, type ClusterInstance } from '../../scripts/cluster.js';

const MAX_PER_IP = 3;
const KEY = 'cluster-test-key';
const REQUESTS = 10_000;
const CLIENTS = 8;
const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBlockTransactionCountByNumber', params: ['pending'] });

/** The sum of every series of metric family `name` on an instance's /metrics, or null when the family is absent. */
async function metric(i: ClusterInstance, name: string): Promise<number | null> {
  const text = await (await fetch(i.metricsUrl)).text();
  let sum: number | null = null;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + ' ') && !line.startsWith(name + '{')) continue;
    sum = (sum ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/** Waits until `name` equals `want` on every instance; false after `ms`, or at once when an instance lacks the metric. */
async function metricEverywhere(c: Cluster, name: string, want: number, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    const values = await Promise.all(c.instances.map((i) => metric(i, name)));
    if (values.some((v) => v === null)) return false;
    if (values.every((v) => v === want)) return true;
    if (Date.now() > end) return false;
    await sleep(100);
  }
}

/** "B-I" → [B, I]; null when malformed. */
function position(h: string | string[] | undefined): [number, number] | null {
  const m = typeof h === 'string' ? /^(\d+)-(\d+)$/.exec(h) : null;
  return m === null ? null : [Number(m[1]), Number(m[2])];
}
const older = (a: [number, number], b: [number, number]): boolean => a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);

/**
 * Stream connections decided so far, over every instance: open subscribers plus refusals. A connection waiting for
 * Redis's answer is neither.
 */
async function decided(c: Cluster): Promise<number> {
  const v = await Promise.all(c.instances.map(async (i) => ((await metric(i, 'flashblocksd_stream_subscribers')) ?? 0) + ((await metric(i, 'flashblocksd_stream_refusals_total')) ?? 0)));
  return v.reduce((a, x) => a + x, 0);
}

/** How a stream connection ended up: `open`, `HTTP <status>` (refused before the upgrade) or `close <code>` (after it). */
type Outcome = 'open' | `HTTP ${number}` | `close ${number}`;

/**
 * Opens a raw-stream connection through HAProxy, the `n`-th to be decided (counted by `decided`): once every instance
 * has decided it, a ping's pong comes after any close frame, so the outcome is known without timing.
 */
function connectStream(c: Cluster, n: number): Promise<{ ws: WebSocket | null; outcome: Outcome }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${c.wsUrl}flashblocks/${KEY}`);
    ws.on('error', () => resolve({ ws: null, outcome: 'HTTP 0' }));
    ws.once('close', (code) => resolve({ ws: null, outcome: `close ${code}` }));
    ws.once('unexpected-response', (_req, res) => {
      resolve({ ws: null, outcome: `HTTP ${res.statusCode ?? 0}` });
      ws.terminate();
    });
    ws.once('open', () => {
      void (async () => {
        const end = Date.now() + 10_000;
        while ((await decided(c)) < n && Date.now() < end) await sleep(20);
        ws.once('pong', () => {
          if (ws.readyState === WebSocket.OPEN) resolve({ ws, outcome: 'open' });
        });
        ws.ping();
      })();
    });
  });
}

/** Opens `n` connections one after the other (HAProxy's round-robin puts consecutive ones on different instances). */
async function connectMany(c: Cluster, n: number): Promise<{ open: WebSocket[]; outcomes: Outcome[]; dropped: () => number }> {
  const open: WebSocket[] = [];
  const outcomes: Outcome[] = [];
  let dropped = 0;
  const before = await decided(c);
  for (let k = 0; k < n; k++) {
    const r = await connectStream(c, before + k + 1);
    outcomes.push(r.outcome);
    if (r.ws !== null) {
      open.push(r.ws);
      r.ws.once('close', () => dropped++);
    }
  }
  // Closes seen before the caller closes them: the server's.
  return { open, outcomes, dropped: () => dropped };
}

/** Closes the sockets and waits until no instance counts a subscriber any more (limits released). */
async function closeAll(c: Cluster, sockets: WebSocket[]): Promise<void> {
  for (const ws of sockets) ws.close();
  await metricEverywhere(c, 'flashblocksd_stream_subscribers', 0, 10_000);
}

/** `n` JSON-RPC requests through HAProxy; resolves with how many were answered 200 with a result. */
async function requests(pool: Pool, n: number): Promise<number> {
  let ok = 0;
  for (let k = 0; k < n; k++) {
    const res = await pool.request({ method: 'POST', path: '/', headers: { 'content-type': 'application/json' }, body: BODY });
    const body = (await res.body.json()) as { result?: unknown };
    if (res.statusCode === 200 && body.result !== undefined) ok++;
  }
  return ok;
}

t.test('three instances behind HAProxy with Redis: pinned reads, shared limits, Redis outage', async (t) => {
  const c = await startCluster({
    daemonArgs: ['--execution', 'false', '--api-keys', KEY, '--stream-max-per-ip', String(MAX_PER_IP)],
    txPerSec: 5,
  });
  t.teardown(() => c.stop());
  const pool = new Pool(c.url, { connections: CLIENTS });
  t.teardown(() => pool.close());
  t.comment(`cluster up: HAProxy ${c.url}, instances ${c.instances.map((i) => i.rpcUrl).join(' ')}, shared limits in this build: ${c.sharedLimits}`);

  await t.test('(a) a client pinning to its last answer never sees an older flashblock across 10,000 spread requests', async (t) => {
    const before = await Promise.all(c.instances.map((i) => metric(i, 'flashblocksd_rpc_requests_total')));
    let answered = 0;
    let withHeader = 0;
    let older_ = 0;
    let notYet = 0;
    let otherErrors = 0;
    let maxPos: [number, number] = [0, 0];
    const client = async (n: number): Promise<void> => {
      let min: string | null = null;
      for (let k = 0; k < n; k++) {
        const headers: Record<string, string> = { 'content-type': 'application/json' };
        if (min !== null) headers['x-flashblock-min'] = min;
        const res = await pool.request({ method: 'POST', path: '/', headers, body: BODY });
        const body = (await res.body.json()) as { result?: unknown; error?: { code: number; message: string } };
        if (res.statusCode === 200) answered++;
        if (body.error !== undefined) {
          if (body.error.code === -32000 && body.error.message.startsWith('flashblock not yet applied')) notYet++;
          else otherErrors++;
          continue;
        }
        const got = res.headers['x-flashblock'];
        const pos = position(got);
        if (pos === null) continue;
        withHeader++;
        const pinned = position(min ?? undefined);
        if (pinned !== null && older(pos, pinned)) older_++;
        if (older(maxPos, pos)) maxPos = pos;
        min = got as string;
      }
    };
    await Promise.all(Array.from({ length: CLIENTS }, () => client(REQUESTS / CLIENTS)));
    const after = await Promise.all(c.instances.map((i) => metric(i, 'flashblocksd_rpc_requests_total')));
    const served = after.map((v, k) => (v ?? 0) - (before[k] ?? 0));
    t.comment(`per instance: ${served.join(' / ')}; answered ${answered}; with X-Flashblock ${withHeader}; not yet applied ${notYet}; newest ${maxPos.join('-')}`);

    t.equal(answered, REQUESTS, 'every request answered HTTP 200');
    t.equal(otherErrors, 0, 'no JSON-RPC error other than "flashblock not yet applied"');
    for (let k = 0; k < served.length; k++) t.ok(served[k]! >= REQUESTS * 0.2, `${c.instances[k]!.name} served ${served[k]} (≥ 20 % of the requests: they really spread)`);
    // Depends on flashblock pinning (X-Flashblock / X-Flashblock-Min, another branch):
    t.equal(withHeader + notYet, REQUESTS, 'every answer carries X-Flashblock (or is the pin timeout error)');
    t.ok(notYet <= REQUESTS / 100, `the pin timeout stays rare (${notYet})`);
    t.equal(older_, 0, 'no answer older than the flashblock the client pinned to');
  });

  await t.test('(b) the N+1-th raw-stream connection is refused (closed with 1008) wherever it lands', async (t) => {
    // A Redis command slower than its timeout (250 ms) is an outage by design: that instance counts locally for the
    // moment (flashblocksd_redis_fallbacks_total). A busy machine can stall one; the attempt is then not evidence
    // either way and is made again (at most 3 times) — the strict check below holds for an attempt without one.
    const fallbacks = async (): Promise<number> => (await Promise.all(c.instances.map((i) => metric(i, 'flashblocksd_redis_fallbacks_total')))).reduce<number>((a, v) => a + (v ?? 0), 0);
    for (let attempt = 1; ; attempt++) {
      const before = await fallbacks();
      const first = await connectMany(c, MAX_PER_IP);
      // One more on each instance in turn (round-robin): every one of them must be refused. Depends on --redis-url.
      const more = await connectMany(c, c.instances.length);
      const droppedEarly = first.dropped();
      await closeAll(c, [...first.open, ...more.open]);
      if ((await fallbacks()) > before && attempt < 3) {
        t.comment(`attempt ${attempt}: Redis answered late (a local fallback was counted); again`);
        continue;
      }
      t.same(first.outcomes, Array(MAX_PER_IP).fill('open'), `${MAX_PER_IP} connections through HAProxy succeed`);
      t.equal(droppedEarly, 0, 'and none of them is closed by its instance (the upgrade is made before Redis answers)');
      t.same(more.outcomes, Array(c.instances.length).fill('close 1008'), 'one more is refused on every instance (limits shared through Redis)');
      break;
    }
  });

  await t.test('(c) Redis killed: instances keep serving with local limits; Redis back: shared limits again', async (t) => {
    await c.killRedis();
    t.equal(await requests(pool, 300), 300, '300 requests answered while Redis is down');
    // Depends on --redis-url (another branch): the instances notice, count it and fall back.
    t.ok(await metricEverywhere(c, 'flashblocksd_redis_up', 0, 15_000), 'flashblocksd_redis_up is 0 on every instance');
    const fallbacks = await Promise.all(c.instances.map((i) => metric(i, 'flashblocksd_redis_fallbacks_total')));
    t.ok(fallbacks.every((v) => v !== null && v >= 1), `flashblocksd_redis_fallbacks_total ≥ 1 everywhere (${fallbacks.join(', ')})`);

    // Local limits: each instance takes MAX_PER_IP on its own, so the cluster takes three times that, and no more.
    const local = await connectMany(c, MAX_PER_IP * c.instances.length + 1);
    t.same(local.outcomes, [...Array(MAX_PER_IP * c.instances.length).fill('open'), 'HTTP 429'], `local limits: ${MAX_PER_IP} per instance, then HTTP 429 (decided before the upgrade)`);
    await closeAll(c, local.open);
    t.equal(await requests(pool, 100), 100, 'still serving');

    await c.startRedis();
    t.ok(await metricEverywhere(c, 'flashblocksd_redis_up', 1, 20_000), 'flashblocksd_redis_up is 1 again on every instance');
    const shared = await connectMany(c, MAX_PER_IP + c.instances.length);
    t.same(shared.outcomes, [...Array(MAX_PER_IP).fill('open'), ...Array(c.instances.length).fill('close 1008')], 'shared limits again once Redis is back');
    await closeAll(c, shared.open);
    t.equal(await requests(pool, 100), 100, 'serving throughout');
  });
});
