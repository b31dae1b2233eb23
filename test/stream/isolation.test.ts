// Latency isolation (issue 15): a JSON-RPC request is answered from a new flashblock's state while that flashblock
// is still being sent to 1,000 raw-stream subscribers — the fan-out runs in slices after the loop has read pending
// requests, never in front of them. Real daemon (uWS), real `ws` subscribers, a raw keep-alive HTTP connection.
import { performance } from 'node:perf_hooks';
import t from 'tap';
import { keccak256 } from 'viem';
import WebSocket from 'ws';
import { loadConfig } from '../../src/config.js';
import { startDaemon } from '../../src/daemon.js';
import { silentLogger } from '../../src/log.js';
import { unichainMessages } from '../helpers/fixtures.js';
import { rawHttp } from '../helpers/stream.js';

const SUBSCRIBERS = 1000;
/** Padding that makes the published frame Base-sized and larger (so 1,000 sends take many slices). */
const PAD_BYTES = 256 * 1024;

t.test('an RPC request is answered from the new state while a 1,000-subscriber publish of a large frame is in progress', async (t) => {
  const config = {
    ...loadConfig([], {}),
    host: '127.0.0.1', port: 0, metricsPort: 0, flashblocksUrls: [], nodeRpcUrl: 'http://127.0.0.1:9',
    streamMaxPerIp: SUBSCRIBERS + 10, streamMaxSubscribers: SUBSCRIBERS + 10,
  };
  const d = await startDaemon(config, { log: silentLogger });
  t.teardown(() => d.stop());
  const fanout = d.pipeline.events.fanout;
  const uni = unichainMessages();
  const apply = (m: Record<string, unknown>, pad = 0): void => {
    const data = Buffer.from(JSON.stringify(pad > 0 ? { ...m, _pad: 'x'.repeat(pad) } : m));
    d.pipeline.handleFrame({ data, isBinary: false, upstream: 0, receivedAtMs: performance.now() });
  };
  apply(uni[0]!);
  await fanout.idle();

  const subs: WebSocket[] = [];
  for (let i = 0; i < SUBSCRIBERS; i++) subs.push(new WebSocket(`ws://127.0.0.1:${d.rpcPort}/flashblocks`));
  t.teardown(() => subs.forEach((s) => s.terminate()));
  let frames = 0;
  await Promise.all(subs.map((s) => new Promise((resolve, reject) => {
    s.once('open', resolve);
    s.once('error', reject);
    s.on('message', () => frames++);
  })));
  for (let i = 0; i < 200 && d.metrics.streamSubscribers.value < SUBSCRIBERS; i++) await new Promise((r) => setTimeout(r, 10));
  t.equal(d.metrics.streamSubscribers.value, SUBSCRIBERS, '1,000 raw-stream subscribers');

  const http = await rawHttp(d.rpcPort);
  t.teardown(() => http.close());
  const hash = keccak256((uni[1]!.diff as { transactions: `0x${string}`[] }).transactions[0]!);
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getTransactionReceipt', params: [hash] });
  t.match(JSON.parse(await http.post(body)), { result: null }, 'not preconfirmed before flashblock 1');

  // What the daemon's fan-out had done at the moment each receipt request was answered from state.
  const seen: { pending: number; sentCounted: number }[] = [];
  const cell = d.metrics.rpcRequests.eth_getTransactionReceipt.state as { inc(by?: number): void };
  const inc = cell.inc.bind(cell);
  cell.inc = (by?: number) => {
    seen.push({ pending: fanout.pending, sentCounted: d.metrics.streamFramesSent.value });
    inc(by);
  };
  const sentBefore = d.metrics.streamFramesSent.value;
  const finishedBefore = fanout.finished;
  const visibleBefore = d.metrics.flashblockVisibleSeconds.count;

  // The request is on the wire (in the daemon's socket buffer) before the large frame is applied.
  const first = http.post(body);
  apply(uni[1]!, PAD_BYTES);
  const answers = [JSON.parse(await first) as { result: { transactionHash: string } | null }];
  // More requests while the publish goes on: each is answered between two slices.
  while (fanout.pending > 0 && answers.length < 50) answers.push(JSON.parse(await http.post(body)) as { result: { transactionHash: string } | null });
  await fanout.idle();
  for (let i = 0; i < 500 && frames < SUBSCRIBERS; i++) await new Promise((r) => setTimeout(r, 10));

  t.equal(answers[0]!.result?.transactionHash, hash, 'the first answer already reads the new flashblock');
  t.ok(answers.every((a) => a.result?.transactionHash === hash), 'and so does every later one');
  t.equal(seen[0]!.pending > 0, true, 'when the first was answered, the fan-out of that flashblock was still queued or running');
  t.equal(seen[0]!.sentCounted, sentBefore, 'and had not finished sending to the 1,000 subscribers');
  const during = seen.filter((s) => s.pending > 0).length;
  t.ok(during >= 2, `requests answered during the publish: ${during} (between slices, not after the whole publish)`);
  t.ok(fanout.finished > finishedBefore, 'the fan-out finished');
  t.equal(d.metrics.streamFramesSent.value - sentBefore, SUBSCRIBERS, 'and sent the frame to every subscriber');
  t.equal(frames, SUBSCRIBERS, 'every subscriber received it');
  t.equal(d.metrics.flashblockVisibleSeconds.count - visibleBefore, 1, 'the first request reading it timed its visibility once');
  t.equal(d.metrics.streamFanoutSeconds.count > 0, true, 'the fan-out time was observed');
});
