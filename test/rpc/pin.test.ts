// Flashblock pinning's pure parts and its waiter set over real pending state: X-Flashblock-Min parsing (decimal and
// hex, malformed values), the (block, index) order, the X-Flashblock value, release on apply, refusals, and the
// dispatcher's refusal envelopes that echo request ids.
import t from 'tap';
import { createMetrics } from '../../src/metrics/metrics.js';
import { silentLogger } from '../../src/log.js';
import { Dispatcher } from '../../src/rpc/dispatch.js';
import { FlashblockPins, formatFlashblockPosition, parseFlashblockPosition, type PinSettle } from '../../src/rpc/pin.js';
import { unichainMessages } from '../helpers/fixtures.js';
import { feed, makePipeline } from '../helpers/ingest.js';
import { startRpc } from '../helpers/rpc-harness.js';

t.test('X-Flashblock-Min values: <block>-<index>, each decimal or 0x hex', async (t) => {
  const ok: [string, number, number][] = [
    ['30000012-7', 30000012, 7],
    ['0-0', 0, 0],
    ['0x1c9c38c-0x7', 0x1c9c38c, 7],
    ['0X1C9C38C-7', 0x1c9c38c, 7],
    ['30000012-0x0', 30000012, 0],
    [' 12-3 ', 12, 3],
    ['007-01', 7, 1],
    ['9007199254740991-0', Number.MAX_SAFE_INTEGER, 0],
  ];
  for (const [v, block, index] of ok) t.same(parseFlashblockPosition(v), { block, index }, JSON.stringify(v));
  const bad = [
    '', '-', '12', '12-', '-3', '12--3', '12-3-4', '+12-3', '12-+3', '-12-3', '12 - 3', '1.5-2', '1e3-2', '0x-1', '0xg-1',
    'abc', '12-3a', '9007199254740992-0', '1-99999999999999999999', '1'.repeat(70) + '-1', 'x12-3', '12_3',
  ];
  for (const v of bad) t.equal(parseFlashblockPosition(v), null, `${JSON.stringify(v)} is refused`);
  t.equal(formatFlashblockPosition({ block: 30000012, index: 7 }), '30000012-7');
});

function pinsOver(opts: { pinWaitMs?: number; pinMaxWaiters?: number } = {}) {
  const { state, pipeline } = makePipeline();
  const metrics = createMetrics({ version: 't', commit: 't' });
  const settled: [string, PinSettle][] = [];
  const pins = new FlashblockPins(state, pipeline.events, { pinWaitMs: opts.pinWaitMs ?? 60_000, pinMaxWaiters: opts.pinMaxWaiters ?? 10 }, metrics, (token, how) =>
    settled.push([token as string, how]),
  );
  return { state, pipeline, metrics, settled, pins };
}

const msgs = unichainMessages();
const N = (msgs[0]!.metadata as { block_number: number }).block_number;
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

t.test('the position: none before a flashblock, then the newest applied; (block, index) ordered, canonical counts as past', async (t) => {
  const { pipeline, pins } = pinsOver();
  t.teardown(() => pins.close());
  t.equal(pins.header(), '', 'no pending flashblock: no X-Flashblock');
  t.notOk(pins.reached({ block: 0, index: 0 }), 'nothing is reached before the first flashblock and canonical block');
  feed(pipeline, msgs[0]);
  t.equal(pins.header(), `${N}-0`);
  feed(pipeline, msgs[1]);
  feed(pipeline, msgs[2]);
  t.equal(pins.header(), `${N}-2`, 'the newest applied index');
  t.ok(pins.reached({ block: N, index: 2 }), 'at');
  t.ok(pins.reached({ block: N, index: 1 }), 'an older index of the same block');
  t.ok(pins.reached({ block: N - 1, index: 1000 }), 'any index of an older block');
  t.notOk(pins.reached({ block: N, index: 3 }), 'the next index');
  t.notOk(pins.reached({ block: N + 1, index: 0 }), 'the next block');
  pipeline.settle(N + 1, null);
  t.equal(pins.header(), '', 'settled: no pending block, no X-Flashblock');
  t.ok(pins.reached({ block: N + 1, index: 50 }), 'a settled canonical block is past whatever the index');
  t.notOk(pins.reached({ block: N + 2, index: 0 }));
});

t.test('a waiter is released by the apply it waits for, after the pipeline returns; earlier applies keep it waiting', async (t) => {
  const { pipeline, pins, settled, metrics } = pinsOver();
  t.teardown(() => pins.close());
  feed(pipeline, msgs[0]);
  t.equal(pins.admit({ block: N, index: 0 }, 'now'), 'now');
  t.equal(metrics.pinWaits.immediate.value, 1);
  const w = pins.admit({ block: N, index: 2 }, 'a');
  t.type(w, 'object', 'behind: it waits');
  t.equal(metrics.pinWaiters.value, 1);
  feed(pipeline, msgs[1]);
  await turn();
  t.same(settled, [], 'index 1 does not release a wait for index 2');
  feed(pipeline, msgs[2]);
  t.same(settled, [], 'not inside the apply');
  await turn();
  t.same(settled, [['a', 'ready']]);
  t.equal(metrics.pinWaits.waited.value, 1);
  t.equal(metrics.pinWaiters.value, 0);
  t.equal(pins.waiting, 0);
});

t.test('cancel forgets a waiter (no settle, no count); timeout, full and draining settle with their reason', async (t) => {
  const { pipeline, pins, settled, metrics } = pinsOver({ pinWaitMs: 20, pinMaxWaiters: 2 });
  feed(pipeline, msgs[0]);
  const a = pins.admit({ block: N, index: 1 }, 'a');
  if (typeof a === 'string') throw new Error('expected a waiter');
  pins.cancel(a);
  pins.cancel(a);
  t.equal(pins.waiting, 0);
  t.equal(metrics.pinWaiters.value, 0);
  pins.admit({ block: N + 5, index: 0 }, 'b');
  pins.admit({ block: N + 5, index: 0 }, 'c');
  t.equal(pins.admit({ block: N + 5, index: 0 }, 'd'), 'full', 'beyond --pin-max-waiters: refused at once');
  t.equal(metrics.pinWaits.refused.value, 1);
  t.match(pins.notYetMessage({ block: N + 5, index: 0 }, 'full'), new RegExp(`^flashblock not yet applied: asked ${N + 5}-0, at ${N}-0; 2 requests already waiting \\(at most --pin-max-waiters 2, 64 MiB of bodies\\)`));
  await new Promise((r) => setTimeout(r, 60));
  t.same(settled, [['b', 'timeout'], ['c', 'timeout']], 'the cancelled waiter never settles; the others time out');
  t.equal(metrics.pinWaits.timeout.value, 2);
  t.match(pins.notYetMessage({ block: N + 5, index: 0 }, 'timeout'), /after waiting 20 ms \(--pin-wait-ms\)/);
  pins.admit({ block: N + 5, index: 0 }, 'e');
  pins.close();
  t.same(settled.at(-1), ['e', 'draining'], 'close settles every waiter at once');
  t.equal(pins.admit({ block: N + 5, index: 0 }, 'f'), 'draining', 'after close nothing waits');
  t.equal(pins.admit({ block: N, index: 0 }, 'g'), 'now', 'what is reached still answers');
  t.equal(metrics.pinWaits.refused.value, 3);
  t.equal(metrics.pinWaiters.value, 0);
});

t.test('the bodies waiting requests hold are bounded too: beyond 64 MiB in all, refused at once', async (t) => {
  const { pins, metrics } = pinsOver({ pinMaxWaiters: 1000 });
  t.teardown(() => pins.close());
  const MiB = 1024 * 1024;
  t.type(pins.admit({ block: 5, index: 0 }, 'a', 40 * MiB), 'object');
  const b = pins.admit({ block: 5, index: 0 }, 'b', 24 * MiB);
  t.type(b, 'object', 'up to 64 MiB');
  t.equal(pins.admit({ block: 5, index: 0 }, 'c', 1), 'full', 'one byte more is refused');
  if (typeof b !== 'string') pins.cancel(b);
  t.type(pins.admit({ block: 5, index: 0 }, 'd', 24 * MiB), 'object', 'a cancelled waiter gives its bytes back');
  t.equal(metrics.pinWaits.refused.value, 1);
});

t.test('--pin-wait-ms 0: a request behind is answered at once', async (t) => {
  const { pins, metrics, settled } = pinsOver({ pinWaitMs: 0 });
  t.teardown(() => pins.close());
  t.equal(pins.admit({ block: 5, index: 0 }, 'a'), 'timeout');
  t.equal(metrics.pinWaits.timeout.value, 1);
  t.equal(pins.waiting, 0);
  t.same(settled, []);
  t.match(pins.notYetMessage({ block: 5, index: 0 }, 'timeout'), /^flashblock not yet applied: asked 5-0, no pending flashblock; not waiting \(--pin-wait-ms 0\)/);
});

t.test('a refused body: one error per request with an id, ids echoed, notifications unanswered', async (t) => {
  const h = await startRpc({ log: silentLogger });
  t.teardown(() => h.close());
  const d = new Dispatcher(h.ctx, h.deps.options);
  const r = (text: string): unknown => {
    const out = d.refuse(text, -32000, 'flashblock not yet applied: x', { asked: '1-2', current: null });
    return out === null ? null : JSON.parse(String(out));
  };
  const err = { code: -32000, message: 'flashblock not yet applied: x', data: { asked: '1-2', current: null } };
  t.same(r('{"jsonrpc":"2.0","id":7,"method":"eth_blockNumber"}'), { jsonrpc: '2.0', id: 7, error: err });
  t.same(r('{"jsonrpc":"2.0","id":"a","method":"eth_blockNumber"}'), { jsonrpc: '2.0', id: 'a', error: err });
  t.equal(r('{"jsonrpc":"2.0","method":"eth_blockNumber"}'), null, 'a notification gets no answer');
  t.same(r('[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"},{"jsonrpc":"2.0","id":null,"method":"c"}]'), [
    { jsonrpc: '2.0', id: 1, error: err },
    { jsonrpc: '2.0', id: null, error: err },
  ]);
  t.same(r('{not json'), { jsonrpc: '2.0', id: null, error: err }, 'an unparsable body: one error, null id');
  t.same(r('[]'), { jsonrpc: '2.0', id: null, error: err });
});
