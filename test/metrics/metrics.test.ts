// Tests for src/metrics/metrics.ts: names, types, label sets, recorded values, promtool lint. Does not start servers
// (see server.test.ts); the Grafana dashboard's queries are checked in dashboard.test.ts.

import t from 'tap';
import { spawnSync } from 'node:child_process';
import {
  createMetrics, flashblockLatenessSeconds, methodLabel, subscriptionKindLabel, RPC_METHOD_LABELS, RPC_SOURCES,
} from '../../src/metrics/metrics.js';

/** Parses Prometheus text exposition into family types and `name{labels}` → value. */
function parseExposition(text: string): { types: Map<string, string>; samples: Map<string, number> } {
  const types = new Map<string, string>();
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      types.set(name!, type!);
    } else if (line !== '' && !line.startsWith('#')) {
      const sp = line.lastIndexOf(' ');
      samples.set(line.slice(0, sp), Number(line.slice(sp + 1)));
    }
  }
  return { types, samples };
}

const PROMTOOL = spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;
const NO_PROMTOOL = 'promtool not on PATH (apt-get install prometheus); CI installs it and runs this check';

const REQUIRED: Record<string, string> = {
  flashblocksd_upstream_frames_total: 'counter',
  flashblocksd_upstream_bytes_total: 'counter',
  flashblocksd_upstream_first_copies_total: 'counter',
  flashblocksd_upstream_duplicate_copies_total: 'counter',
  flashblocksd_upstream_reconnects_total: 'counter',
  flashblocksd_upstream_stalls_total: 'counter',
  flashblocksd_upstream_connected: 'gauge',
  flashblocksd_decode_errors_total: 'counter',
  flashblocksd_sequence_verdicts_total: 'counter',
  flashblocksd_flashblock_processing_seconds: 'histogram',
  flashblocksd_flashblock_interarrival_seconds: 'histogram',
  flashblocksd_flashblock_lateness_seconds: 'histogram',
  flashblocksd_flashblock_budget_misses_total: 'counter',
  flashblocksd_pending_block_number: 'gauge',
  flashblocksd_pending_flashblock_index: 'gauge',
  flashblocksd_canonical_block_number: 'gauge',
  flashblocksd_preconfirmation_reorgs_total: 'counter',
  flashblocksd_pending_fallbacks_total: 'counter',
  flashblocksd_rpc_requests_total: 'counter',
  flashblocksd_rpc_request_seconds: 'histogram',
  flashblocksd_node_request_seconds: 'histogram',
  flashblocksd_node_errors_total: 'counter',
  flashblocksd_stream_subscribers: 'gauge',
  flashblocksd_stream_frames_sent_total: 'counter',
  flashblocksd_stream_slow_closes_total: 'counter',
  flashblocksd_stream_refusals_total: 'counter',
  flashblocksd_ws_subscriptions: 'gauge',
  flashblocksd_build_info: 'gauge',
  flashblocksd_process_cpu_seconds_total: 'counter',
  flashblocksd_process_resident_memory_bytes: 'gauge',
  flashblocksd_nodejs_eventloop_lag_p99_seconds: 'gauge',
  flashblocksd_nodejs_heap_size_used_bytes: 'gauge',
};

t.test('every required family exists with its type, and only flashblocksd_ names are exposed', async (t) => {
  const m = createMetrics({ version: '1.2.3', commit: 'abc1234' });
  const { types } = parseExposition(await m.registry.metrics());
  for (const [name, type] of Object.entries(REQUIRED)) t.equal(types.get(name), type, name);
  for (const name of types.keys()) t.match(name, /^flashblocksd_[a-z0-9_]+$/, `${name} is prefixed snake_case`);
  for (const [name, type] of types) {
    if (type === 'counter') t.match(name, /_total$/, `counter ${name} ends in _total`);
    else t.notMatch(name, /_total$/, `${type} ${name} does not end in _total`);
  }
});

t.test('recorded values appear in the exposition', async (t) => {
  const m = createMetrics({ version: '1.2.3', commit: 'abc1234', upstreamCount: 2 });
  const u1 = m.forUpstream(1);
  u1.frames.binary.inc();
  u1.frames.binary.inc();
  u1.bytes.inc(1500);
  u1.connected.set(1);
  m.upstreamReconnects[0]!.inc();
  m.decodeErrors.brotli.inc();
  m.sequenceVerdicts.gap_buffered.inc(3);
  m.pendingBlock.set(35535698);
  m.pendingIndex.set(4);
  m.canonicalBlock.set(35535697);
  m.preconfReorgs.inc();
  m.pendingFallbacks.no_metadata.inc();
  m.nodeErrors.timeout.inc();
  m.nodeSeconds.observe(0.004);
  m.streamSubscribers.inc();
  m.streamSubscribers.inc();
  m.streamSubscribers.dec();
  m.streamFramesSent.inc(10);
  m.streamRefusals.ip_limit.inc();
  m.wsSubscriptions.newHeads.set(2);
  m.processingSeconds.observe(0.00004);
  m.processingSeconds.observe(0.003);

  const { samples } = parseExposition(await m.registry.metrics());
  const v = (k: string) => samples.get(k);
  t.equal(v('flashblocksd_upstream_frames_total{upstream="1",kind="binary"}'), 2);
  t.equal(v('flashblocksd_upstream_frames_total{upstream="0",kind="text"}'), 0, 'known series start at 0');
  t.equal(v('flashblocksd_upstream_bytes_total{upstream="1"}'), 1500);
  t.equal(v('flashblocksd_upstream_connected{upstream="1"}'), 1);
  t.equal(v('flashblocksd_upstream_reconnects_total{upstream="0"}'), 1);
  t.equal(v('flashblocksd_decode_errors_total{reason="brotli"}'), 1);
  t.equal(v('flashblocksd_sequence_verdicts_total{verdict="gap_buffered"}'), 3);
  t.equal(v('flashblocksd_pending_block_number'), 35535698);
  t.equal(v('flashblocksd_pending_flashblock_index'), 4);
  t.equal(v('flashblocksd_canonical_block_number'), 35535697);
  t.equal(v('flashblocksd_preconfirmation_reorgs_total'), 1);
  t.equal(v('flashblocksd_pending_fallbacks_total{reason="no_metadata"}'), 1);
  t.equal(v('flashblocksd_node_errors_total{reason="timeout"}'), 1);
  t.equal(v('flashblocksd_node_request_seconds_bucket{le="0.005"}'), 1);
  t.equal(v('flashblocksd_node_request_seconds_bucket{le="0.0025"}'), 0);
  t.equal(v('flashblocksd_stream_subscribers'), 1);
  t.equal(v('flashblocksd_stream_frames_sent_total'), 10);
  t.equal(v('flashblocksd_stream_refusals_total{reason="ip_limit"}'), 1);
  t.equal(v('flashblocksd_ws_subscriptions{kind="newHeads"}'), 2);
  t.equal(v(`flashblocksd_build_info{version="1.2.3",node="${process.version}",commit="abc1234"}`), 1);

  // Histogram buckets are cumulative and end with +Inf = count.
  t.equal(v('flashblocksd_flashblock_processing_seconds_bucket{le="0.00001"}'), 0);
  t.equal(v('flashblocksd_flashblock_processing_seconds_bucket{le="0.00005"}'), 1);
  t.equal(v('flashblocksd_flashblock_processing_seconds_bucket{le="0.005"}'), 2);
  t.equal(v('flashblocksd_flashblock_processing_seconds_bucket{le="+Inf"}'), 2);
  t.equal(v('flashblocksd_flashblock_processing_seconds_count'), 2);
  t.ok(Math.abs(v('flashblocksd_flashblock_processing_seconds_sum')! - 0.00304) < 1e-12);
});

t.test('an observation equal to a bucket bound lands in that bucket', async (t) => {
  const m = createMetrics({ version: 'x', commit: 'y' });
  m.processingSeconds.observe(0.001);
  m.processingSeconds.observe(NaN);
  const { samples } = parseExposition(await m.registry.metrics());
  t.equal(samples.get('flashblocksd_flashblock_processing_seconds_bucket{le="0.0005"}'), 0);
  t.equal(samples.get('flashblocksd_flashblock_processing_seconds_bucket{le="0.001"}'), 1);
  t.equal(samples.get('flashblocksd_flashblock_processing_seconds_count'), 1, 'NaN is ignored');
});

t.test('counters never go down', async (t) => {
  const m = createMetrics({ version: 'x', commit: 'y' });
  m.streamSlowCloses.inc(2);
  m.streamSlowCloses.inc(-1);
  m.streamSlowCloses.inc(NaN);
  t.equal(m.streamSlowCloses.value, 2);
});

t.test('RPC handles: method labels come from a closed list, lookups return start-up cells', async (t) => {
  const m = createMetrics({ version: 'x', commit: 'y' });
  t.equal(methodLabel('eth_call'), 'eth_call');
  t.equal(methodLabel('eth_getTransactionReceipt'), 'eth_getTransactionReceipt');
  t.equal(methodLabel('admin_peers'), 'other');
  t.equal(methodLabel('0xdeadbeef'), 'other');
  t.equal(methodLabel(''), 'other');
  for (const name of ['eth_chainId', 'eth_getLogs', 'eth_sendRawTransaction', 'eth_sendRawTransactionSync',
    'eth_subscribe', 'eth_unsubscribe', 'eth_call', 'eth_estimateGas', 'eth_getCode', 'eth_getStorageAt',
    'eth_gasPrice', 'eth_feeHistory', 'eth_maxPriorityFeePerGas', 'net_version', 'web3_clientVersion', 'eth_syncing',
    'eth_getRawTransactionByHash', 'eth_getBlockReceipts']) {
    t.ok((RPC_METHOD_LABELS as readonly string[]).includes(name), `${name} has its own label`);
  }
  t.equal(subscriptionKindLabel('logs'), 'logs');
  t.equal(subscriptionKindLabel('weird'), 'other');

  const h = m.rpcHandle('eth_getBalance', 'state');
  t.equal(h, m.rpcHandle('eth_getBalance', 'state'), 'the same handle object every time');
  t.equal(h.counter, m.rpcRequests.eth_getBalance.state);
  t.equal(h.histogram, m.rpcSeconds.eth_getBalance.state);
  t.equal(m.rpcHandle('nope_a', 'error'), m.rpcHandle('nope_b', 'error'), 'unknown methods share `other`');
  t.equal(m.rpcHandle('nope_a', 'error').counter, m.rpcRequests.other.error);

  h.counter.inc();
  h.histogram.observe(0.00003);
  m.rpcHandle('eth_call', 'node').counter.inc();
  m.rpcHandle('eth_call', 'node').histogram.observe(0.02);
  m.rpcHandle('bogus_method', 'error').counter.inc();

  const { samples } = parseExposition(await m.registry.metrics());
  t.equal(samples.get('flashblocksd_rpc_requests_total{method="eth_getBalance",source="state"}'), 1);
  t.equal(samples.get('flashblocksd_rpc_request_seconds_bucket{method="eth_getBalance",source="state",le="0.000025"}'), 0);
  t.equal(samples.get('flashblocksd_rpc_request_seconds_bucket{method="eth_getBalance",source="state",le="0.00005"}'), 1);
  t.equal(samples.get('flashblocksd_rpc_request_seconds_bucket{method="eth_call",source="node",le="0.025"}'), 1);
  t.equal(samples.get('flashblocksd_rpc_requests_total{method="other",source="error"}'), 1);
  const rpcSeries = [...samples.keys()].filter((k) => k.startsWith('flashblocksd_rpc_requests_total'));
  t.equal(rpcSeries.length, 3, `only used method × source series are exposed (${RPC_METHOD_LABELS.length + 1} × ${RPC_SOURCES.length} exist)`);
});

t.test('lateness: due time, clamping of early arrivals and budget misses', async (t) => {
  // Block with timestamp T (s), 2 s blocks: index 0 is due at T − 2 s, index 10 at T.
  const T = 1_762_643_998;
  t.equal(flashblockLatenessSeconds(T * 1000 - 2000, T, 0, 2000), 0);
  t.equal(flashblockLatenessSeconds(T * 1000, T, 10, 2000), 0);
  t.ok(Math.abs(flashblockLatenessSeconds(T * 1000 - 1000 + 35, T, 5, 2000) - 0.035) < 1e-9);
  t.ok(Math.abs(flashblockLatenessSeconds(T * 1000 - 500, T, 3, 1000) - (-0.1)) < 1e-9, '1 s blocks, early');

  const m = createMetrics({ version: 'x', commit: 'y' });
  m.observeLateness(-0.05);
  m.observeLateness(0.02);
  m.observeLateness(0.2);
  m.observeLateness(0.35);
  t.equal(m.earlyFlashblocks.value, 1);
  t.equal(m.latenessSeconds.count, 4);
  t.equal(m.latenessSeconds.counts[0], 1, 'the early one is observed as 0');
  t.equal(m.budgetMisses.timestamp.value, 1, 'exactly 200 ms late is on budget; 350 ms is a miss');

  m.observeInterarrival(0.2);
  m.observeInterarrival(0.249);
  m.observeInterarrival(0.251);
  t.equal(m.budgetMisses.interval.value, 1, 'default tolerance is 50 ms');
  const strict = createMetrics({ version: 'x', commit: 'y', intervalToleranceMs: 0 });
  strict.observeInterarrival(0.201);
  t.equal(strict.budgetMisses.interval.value, 1);
});

t.test('upstream handles are sized by upstreamCount', async (t) => {
  const m = createMetrics({ version: 'x', commit: 'y', upstreamCount: 3 });
  t.equal(m.upstreamBytes.length, 3);
  t.equal(m.forUpstream(2).bytes, m.upstreamBytes[2]);
  t.equal(m.forUpstream(0).frames, m.upstreamFrames[0]);
  t.throws(() => m.forUpstream(3), RangeError);
  t.throws(() => m.forUpstream(-1), RangeError);
  t.throws(() => createMetrics({ version: 'x', commit: 'y', upstreamCount: 0 }), RangeError);
  t.equal(createMetrics({ version: 'x', commit: 'y' }).upstreamCount, 1);
});

t.test('registries are independent', async (t) => {
  const a = createMetrics({ version: 'x', commit: 'y' });
  const b = createMetrics({ version: 'x', commit: 'y' });
  a.streamFramesSent.inc(5);
  t.not(a.registry, b.registry);
  t.match(await a.registry.metrics(), /^flashblocksd_stream_frames_sent_total 5$/m);
  t.match(await b.registry.metrics(), /^flashblocksd_stream_frames_sent_total 0$/m);
});

t.test('promtool check metrics finds no problems', { skip: PROMTOOL ? false : NO_PROMTOOL }, async (t) => {
  const m = createMetrics({ version: '1.2.3', commit: 'abc1234', upstreamCount: 2 });
  m.rpcHandle('eth_call', 'state').histogram.observe(0.001);
  m.rpcHandle('eth_call', 'state').counter.inc();
  m.observeLateness(0.1);
  const r = spawnSync('promtool', ['check', 'metrics'], { input: await m.registry.metrics(), encoding: 'utf8' });
  t.equal(r.status, 0, 'promtool exit status');
  t.equal(`${r.stdout}${r.stderr}`.trim(), '', 'no lint output');
});
