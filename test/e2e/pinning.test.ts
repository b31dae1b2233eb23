// Flashblock pinning against the real daemon: anvil as the node, a replaying upstream sending the Unichain capture
// (moved to small heights) frame by frame, answers read over HTTP. X-Flashblock follows every apply; a request whose
// X-Flashblock-Min is ahead is answered once the frame arrives, or with the -32000 error when it does not; malformed
// values are 400; an aborted wait leaves nothing behind; a stop answers the waiting requests at once.
import t from 'tap';
import WebSocket from 'ws';
import { rpcCall, startAnvil } from '../../scripts/devnet/anvil.js';
import { loadConfig, type Config } from '../../src/config.js';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { silentLogger } from '../../src/log.js';
import { unichainAtHeight } from '../helpers/fixtures.js';
import { startReplayServer, type ReplayServer } from '../helpers/replay-server.js';

const atHeight = unichainAtHeight;

interface Answer {
  status: number;
  flashblock: string | null;
  body: any;
}

const BLOCK = { jsonrpc: '2.0', id: 1, method: 'eth_getBlockByNumber', params: ['pending', false] };

async function post(url: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Answer> {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body), ...(signal ? { signal } : {}) });
  const text = await r.text();
  return { status: r.status, flashblock: r.headers.get('x-flashblock'), body: text === '' ? null : JSON.parse(text) };
}

/** Resolves once `d` has applied flashblock `index` of block `n`. */
function applied(d: Daemon, n: number, index: number): Promise<void> {
  return new Promise((resolve) => {
    const off = d.pipeline.events.onApplied((block, fb) => {
      if (block.number === n && fb.index === index) {
        off();
        resolve();
      }
    });
  });
}

/** Sends flashblock `index` of block `n` and waits until `d` applied it. */
async function apply(d: Daemon, up: ReplayServer, n: number, index: number): Promise<Record<string, any>> {
  const m = atHeight(n)[index]!;
  const done = applied(d, n, index);
  up.send(JSON.stringify(m));
  await done;
  return m;
}

/** Waits until `cond` holds (a state the daemon reaches on its own: a request parked, an abort noticed). */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`never happened: ${what}`);
}

async function daemonOver(t: { teardown(fn: () => unknown): void }, nodeUrl: string, over: Partial<Config>): Promise<{ d: Daemon; up: ReplayServer; url: string }> {
  const up = await startReplayServer();
  t.teardown(() => up.close());
  const config = { ...loadConfig([], {}), port: 0, metricsPort: 0, host: '127.0.0.1', flashblocksUrls: [up.url], nodeRpcUrl: nodeUrl, execution: false, canonicalPollMs: 50, ...over };
  const d = await startDaemon(config, { log: silentLogger });
  t.teardown(() => d.stop());
  await up.waitForClients(1);
  return { d, up, url: `http://127.0.0.1:${d.rpcPort}/` };
}

const anvil = await startAnvil({ chainId: 31337, automine: true });
t.teardown(() => anvil.stop());
const chainId = await rpcCall<string>(anvil.url, 'eth_chainId');

t.test('one daemon, waits up to 60 s: header across applies, release by the frame, malformed, abort, drain', async (t) => {
  const { d, up, url } = await daemonOver(t, anvil.url, { pinWaitMs: 60_000 });
  const waits = d.metrics.pinWaits;

  await t.test('X-Flashblock is absent before any flashblock and follows every apply, on state and forwarded answers', async (t) => {
    const none = await post(url, { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] });
    t.equal(none.body.result, chainId);
    t.equal(none.flashblock, null, 'no pending flashblock: no header');
    for (let i = 0; i < 5; i++) {
      const m = await apply(d, up, 1, i);
      const a = await post(url, BLOCK);
      t.equal(a.flashblock, `1-${i}`, `after flashblock ${i}`);
      t.equal(a.body.result.hash, m.diff.block_hash, 'the answer is that flashblock\'s block');
      const fwd = await post(url, { jsonrpc: '2.0', id: 2, method: 'eth_chainId', params: [] });
      t.equal(fwd.flashblock, `1-${i}`, 'a forwarded answer carries it too');
    }
    await apply(d, up, 2, 0);
    const batch = await post(url, [BLOCK, { ...BLOCK, id: 2, method: 'eth_blockNumber', params: ['pending'] }]);
    t.equal(batch.flashblock, '2-0', 'a batch, after a new block');
    t.equal(batch.body[1].result, '0x2');
  });

  await t.test('a request ahead of the state waits and is answered by the frame sent after it', async (t) => {
    const before = { immediate: waits.immediate.value, waited: waits.waited.value };
    const now = await post(url, BLOCK, { 'x-flashblock-min': '1-4' });
    t.equal(now.flashblock, '2-0', 'an older block: answered at once');
    t.equal(now.body.result.number, '0x2');
    t.equal(waits.immediate.value, before.immediate + 1);

    let answered = false;
    const pending = post(url, BLOCK, { 'x-flashblock-min': '0x2-0x2' }).then((a) => ((answered = true), a));
    await until(() => d.metrics.pinWaiters.value === 1, 'the request waits');
    const m1 = await apply(d, up, 2, 1);
    await new Promise((r) => setImmediate(r));
    t.notOk(answered, 'index 1 does not release a request for index 2');
    t.equal(d.metrics.pinWaiters.value, 1);
    const m2 = await apply(d, up, 2, 2);
    const a = await pending;
    t.equal(a.status, 200);
    t.equal(a.flashblock, '2-2', 'answered as of the flashblock it asked for');
    t.equal(a.body.result.hash, m2.diff.block_hash);
    t.not(a.body.result.hash, m1.diff.block_hash);
    t.equal(waits.waited.value, before.waited + 1, 'counted as waited');
    t.equal(d.metrics.pinWaiters.value, 0);
  });

  await t.test('a malformed X-Flashblock-Min is HTTP 400 with -32602', async (t) => {
    for (const v of ['abc', '2', '2-', '-2', '2-1-0', '0xZZ-1', '99999999999999999999-0', '2.0-1']) {
      const a = await post(url, BLOCK, { 'x-flashblock-min': v });
      t.equal(a.status, 400, `${JSON.stringify(v)}: 400`);
      t.equal(a.body.error.code, -32602);
      t.match(a.body.error.message, /^invalid X-Flashblock-Min/);
    }
    const ok = await post(url, BLOCK);
    t.equal(ok.status, 200, 'the next request is served');
  });

  await t.test('an aborted wait leaves no waiter, no timer and no count behind', async (t) => {
    const counts = () => [waits.immediate.value, waits.waited.value, waits.timeout.value, waits.refused.value];
    const before = counts();
    const ac = new AbortController();
    const gone = post(url, BLOCK, { 'x-flashblock-min': '3-0' }, ac.signal).catch((e: Error) => e.name);
    await until(() => d.metrics.pinWaiters.value === 1, 'the request waits');
    ac.abort();
    t.equal(await gone, 'AbortError');
    await until(() => d.metrics.pinWaiters.value === 0, 'the abort is noticed');
    await apply(d, up, 3, 0);
    await new Promise((r) => setImmediate(r));
    t.same(counts(), before, 'the frame it waited for releases nothing; nothing timed out');
    const a = await post(url, BLOCK, { 'x-flashblock-min': '3-0' });
    t.equal(a.flashblock, '3-0', 'later pinned requests are served');
  });

  await t.test('a newFlashblocks notification names its flashblock; pinning HTTP to it answers as of it or later', async (t) => {
    const ws = new WebSocket(url.replace('http', 'ws'));
    t.teardown(() => ws.close());
    await new Promise((r, j) => (ws.once('open', r), ws.once('error', j)));
    const notes: any[] = [];
    ws.on('message', (m) => notes.push(JSON.parse(m.toString())));
    ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['newFlashblocks'] }));
    await until(() => notes.length === 1, 'the subscription id');
    const m = await apply(d, up, 3, 1);
    await until(() => notes.length === 2, 'the notification');
    const block = notes[1].params.result;
    t.equal(block.hash, m.diff.block_hash);
    t.same([block.number, block.flashblockIndex], ['0x3', '0x1'], 'number and flashblockIndex, hex quantities');
    const a = await post(url, BLOCK, { 'x-flashblock-min': `${block.number}-${block.flashblockIndex}` });
    t.equal(a.flashblock, '3-1', 'the same position as X-Flashblock');
    t.equal(a.body.result.hash, block.hash);
  });

  await t.test('stopping answers every waiting request at once with the -32000 error', async (t) => {
    const waiting = [post(url, BLOCK, { 'x-flashblock-min': '9-0' }), post(url, { ...BLOCK, id: 'x' }, { 'x-flashblock-min': '9-1' })];
    await until(() => d.metrics.pinWaiters.value === 2, 'both requests wait');
    const refusedBefore = waits.refused.value;
    await d.stop();
    const answers = await Promise.all(waiting);
    for (const a of answers) {
      t.equal(a.status, 200);
      t.equal(a.body.error.code, -32000);
      t.match(a.body.error.message, /^flashblock not yet applied: asked 9-[01], at 3-1; server is shutting down/);
      t.equal(a.flashblock, '3-1');
    }
    t.equal(answers[1]!.body.id, 'x', 'the request id is echoed');
    t.equal(waits.refused.value, refusedBefore + 2);
    t.equal(d.metrics.pinWaiters.value, 0);
  });
});

t.test('a flashblock that does not come: the -32000 error after --pin-wait-ms; beyond --pin-max-waiters at once', async (t) => {
  const { d, up, url } = await daemonOver(t, anvil.url, { pinWaitMs: 1500, pinMaxWaiters: 1 });
  await apply(d, up, 1, 0);
  await apply(d, up, 1, 1);
  const late = post(url, [BLOCK, { ...BLOCK, id: 'b' }], { 'x-flashblock-min': '1-3' });
  await until(() => d.metrics.pinWaiters.value === 1, 'the request waits');
  const full = await post(url, BLOCK, { 'x-flashblock-min': '5-0' });
  t.equal(full.status, 200);
  t.equal(full.body.error.code, -32000);
  t.match(full.body.error.message, /^flashblock not yet applied: asked 5-0, at 1-1; 1 requests already waiting \(at most --pin-max-waiters 1, 64 MiB of bodies\)/);
  t.equal(d.metrics.pinWaits.refused.value, 1);

  await apply(d, up, 1, 2);
  const a = await late;
  t.equal(a.status, 200, 'HTTP 200');
  t.equal(a.flashblock, '1-2', 'the position at the time of the answer');
  t.equal(a.body.length, 2, 'a batch: one error per request');
  for (const [i, e] of a.body.entries()) {
    t.equal(e.id, [1, 'b'][i]);
    t.equal(e.error.code, -32000);
    t.match(e.error.message, /^flashblock not yet applied: asked 1-3, at 1-2 after waiting 1500 ms \(--pin-wait-ms\)/);
    t.same(e.error.data, { asked: '1-3', current: '1-2' });
  }
  t.equal(d.metrics.pinWaits.timeout.value, 1);
  t.equal(d.metrics.pinWaiters.value, 0);
});
