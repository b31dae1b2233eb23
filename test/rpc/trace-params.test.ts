// Traces at pending, what is decided before the engine (src/rpc/methods/trace.ts), on the real RPC server without a
// stream or an engine: geth's `timeout` durations, parameter errors, JavaScript tracers, execution off, and canonical
// targets refused unless --forward-methods allows them (then forwarded to the node).
import t from 'tap';
import { goDurationMs } from '../../src/rpc/methods/trace.js';
import { startAnvil, startRpc } from '../helpers/rpc-harness.js';

t.test('geth timeouts are Go durations', async (t) => {
  t.equal(goDurationMs('5s'), 5000);
  t.equal(goDurationMs('300ms'), 300);
  t.equal(goDurationMs('1m30s'), 90_000);
  t.equal(goDurationMs('1.5s'), 1500);
  t.equal(goDurationMs('250us'), 0.25);
  for (const bad of ['', '5', 's', '5 s', '-1s', '1d']) t.equal(goDurationMs(bad), null, `${JSON.stringify(bad)} is not a duration`);
});

t.test('parameters are checked and the reasons are clear', async (t) => {
  const h = await startRpc();
  t.teardown(() => h.close());
  const hash = '0x' + '11'.repeat(32);
  const cases: [string, unknown[], number, RegExp][] = [
    ['debug_traceTransaction', ['0x1234'], -32602, /expected a transaction hash/],
    ['debug_traceTransaction', [hash, 'callTracer'], -32602, /expected a tracing options object/],
    ['debug_traceTransaction', [hash, { tracer: 'callTracer', timeout: 'soon' }], -32602, /invalid timeout "soon"/],
    ['debug_traceCall', [{ to: '0x' + '00'.repeat(20) }, 'pending', { tracer: 'function() {}' }], -32602, /JavaScript tracers are not run here/],
    ['debug_traceCall', ['0x00'], -32602, /expected a transaction call object/],
    ['trace_replayTransaction', [hash, []], -32602, /non-empty list of trace types/],
    ['trace_replayTransaction', [hash, ['trace', 'calls']], -32602, /non-empty list of trace types/],
    ['trace_callMany', [[[{}]]], -32602, /not a \[call, traceTypes\] pair/],
    ['trace_get', [hash, 'x'], -32602, /list of trace indices/],
    // No engine here (execution is off): `pending` cannot be traced, and says why.
    ['debug_traceCall', [{ to: '0x' + '00'.repeat(20) }, 'pending', {}], -32000, /execution engine, which is off/],
    ['debug_traceBlockByNumber', ['pending', {}], -32000, /execution engine, which is off/],
    // Not pending, and --forward-methods does not allow it: refused as any method off the allow-list.
    ['debug_traceTransaction', [hash, {}], -32601, /--forward-methods debug_traceTransaction/],
    ['trace_block', ['0x1'], -32601, /--forward-methods trace_block/],
  ];
  for (const [method, params, code, message] of cases) {
    const r = await h.call(method, params);
    t.equal(r.error?.code, code, `${method}(${JSON.stringify(params).slice(0, 60)}): ${code}`);
    t.match(r.error?.message, message);
  }
  t.equal(h.nodeRequests(), 0, 'nothing reached the node');
});

t.test('a canonical target goes to the node when --forward-methods allows the method', async (t) => {
  const anvil = await startAnvil();
  const h = await startRpc({ nodeUrl: anvil.url, config: { forwardMethods: ['debug_traceBlockByNumber', 'trace_block'] } });
  t.teardown(async () => {
    await h.close();
    await anvil.stop();
  });
  const viaDaemon = await h.call('debug_traceBlockByNumber', ['0x0', { tracer: 'callTracer' }]);
  t.same(viaDaemon.result, [], 'block 0 has no transactions: the node answers []');
  const r = await h.call('trace_block', ['0x0']);
  t.equal(r.error, undefined, 'trace_block of a canonical block: the node\'s answer');
});
