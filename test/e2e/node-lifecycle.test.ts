// The node comes and goes under a running daemon (a real process, its log read line by line): the node down at
// start-up, then up (the chain is learned then, and execution starts at once — never under a guessed fork); an outage
// while running (said once each way, execution resumes, /readyz keeps no stale error); the node reset behind the same
// URL to a lower head (said once, the daemon re-anchors on the node's head and applies the new chain's flashblocks).
// The node and the stream are reached through switchable loopback ports (test/helpers/switch-proxy.ts) in front of
// real devnets.
import t from 'tap';
import { rpcCall } from '../../scripts/devnet/anvil.js';
import { startDevnet, type Devnet } from '../../scripts/devnet/sequencer.js';
import { sourceCommand, spawnDaemon, type DaemonProcess } from '../helpers/daemon-process.js';
import { metricValue } from '../helpers/metrics-text.js';
import { startSwitchProxy } from '../helpers/switch-proxy.js';

/** Hang guard for each wait (the daemon is a child process on a busy 2-core machine), never a pace. */
const WAIT_MS = 60_000;

async function until(pred: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const end = Date.now() + WAIT_MS;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Ready {
  ready: boolean;
  checks: Record<string, { ok: boolean; detail: string }>;
}

const readyz = async (d: DaemonProcess): Promise<Ready> => (await fetch(`http://127.0.0.1:${d.metricsPort}/readyz`)).json() as Promise<Ready>;
const metric = async (d: DaemonProcess, series: string): Promise<number> => metricValue(await (await fetch(`http://127.0.0.1:${d.metricsPort}/metrics`)).text(), series);
const msgs = (d: DaemonProcess): string[] => d.logs().map((l) => String(l.msg ?? ''));
const logged = (d: DaemonProcess, re: RegExp): string[] => msgs(d).filter((m) => re.test(m));
const onPort = (url: string, port: number): string => {
  const u = new URL(url);
  u.port = String(port);
  return u.toString();
};
const head = async (dn: Devnet): Promise<number> => Number(await rpcCall<string>(dn.nodeRpcUrl, 'eth_blockNumber', []));
const EXECUTED = 'flashblocksd_execution_flashblocks_total{outcome="executed"}';

const first = await startDevnet({});
t.teardown(() => first.stop());
const nodePort = await startSwitchProxy(null);
const streamPort = await startSwitchProxy(first.flashblocksUrl);
t.teardown(async () => {
  await nodePort.close();
  await streamPort.close();
});
const daemon = await spawnDaemon(sourceCommand(), [
  '--flashblocks-url', onPort(first.flashblocksUrl, streamPort.port),
  '--node-rpc-url', `http://127.0.0.1:${nodePort.port}/`,
  '--port', '0', '--metrics-port', '0',
]);
t.teardown(() => daemon.close());

t.test('node down at start-up, then up: the chain is learned when it answers; no execution before, execution at once after', async (t) => {
  await until(() => logged(daemon, /^chain: not known yet/).length > 0, 'the start-up line saying the chain is not known');
  t.match(logged(daemon, /^chain: /)[0], /execution waits for the chain/, 'the start-up line says execution waits for the chain');
  await until(async () => (await metric(daemon, 'flashblocksd_pending_block_number')) > 0, 'flashblocks applied from the stream');
  const down = await readyz(daemon);
  t.equal(down.ready, false, '/readyz: not ready');
  t.match(down.checks.chain, { ok: false, detail: /^not known yet/ }, `/readyz names the unknown chain: ${down.checks.chain?.detail}`);
  t.equal(await metric(daemon, EXECUTED), 0, 'nothing executed while no fork is known');
  t.same(logged(daemon, /cannot run/), [], 'execution is waiting, not refused for the run');

  await nodePort.point(first.nodeRpcUrl);
  await until(() => logged(daemon, /^chain: Devnet \(901\) by the node's eth_chainId/).length > 0, "the chain learned from the node's eth_chainId");
  await until(async () => (await metric(daemon, EXECUTED)) > 0, 'flashblocks executed');
  t.ok(logged(daemon, /^execution engine started/).length === 1, 'the engine started once the chain was known');
  await until(async () => (await readyz(daemon)).ready, '/readyz ready');
  const up = await readyz(daemon);
  t.match(up.checks.chain, { ok: true }, `/readyz chain: ${up.checks.chain?.detail}`);
  t.match(up.checks.execution, { ok: true, detail: /^up: / }, `/readyz execution: ${up.checks.execution?.detail}`);
  t.notMatch(up.checks.execution!.detail, /last error/, 'no stale error once up');
});

t.test('an outage while running: said once each way; execution resumes as soon as the node answers', async (t) => {
  // The start-up outage was said once each way already (the node was down at start).
  const downBefore = logged(daemon, /^node unreachable: /).length;
  const upBefore = logged(daemon, /^node reachable again/).length;
  t.same([downBefore, upBefore], [1, 1], 'the start-up outage: one line each way');
  await nodePort.down();
  await until(() => logged(daemon, /^node unreachable: /).length > downBefore, 'the outage logged');
  await until(async () => !(await readyz(daemon)).checks.node!.ok, '/readyz: node not answering');
  // A few polls fail meanwhile (every 100 ms): the outage is one warn line, not one a poll.
  await new Promise((r) => setTimeout(r, 1500));
  t.equal(logged(daemon, /^node unreachable: /).length - downBefore, 1, 'one warn line for the outage');
  await nodePort.point(first.nodeRpcUrl);
  await until(() => logged(daemon, /^node reachable again after \d+\.\d s/).length > upBefore, '"node reachable again" logged');
  t.equal(logged(daemon, /^node reachable again/).length - upBefore, 1, 'said once');
  const before = await metric(daemon, EXECUTED);
  await until(async () => (await metric(daemon, EXECUTED)) > before, 'flashblocks executed again');
  await until(async () => (await readyz(daemon)).ready, '/readyz ready again');
  t.notMatch((await readyz(daemon)).checks.execution!.detail, /last error/, '/readyz keeps no stale error');
});

t.test('the node reset behind the same URL to a lower head: said once, re-anchored, the new chain served', async (t) => {
  await until(async () => (await head(first)) >= 6, 'the first devnet past block 6');
  const second = await startDevnet({});
  t.teardown(() => second.stop());
  const from = await head(first);
  t.ok((await head(second)) < from - 2, 'the second devnet is lower');
  const rewindsBefore = await metric(daemon, 'flashblocksd_node_head_rewinds_total');
  await nodePort.point(second.nodeRpcUrl);
  await streamPort.point(second.flashblocksUrl);
  await first.stop();
  await until(() => logged(daemon, /^node head went back from \d+ to \d+/).length > 0, 'the rewind logged');
  const line = logged(daemon, /^node head went back/)[0]!;
  t.match(line, /reset or restored from a snapshot/, `why it matters is said: ${line}`);
  t.equal((await metric(daemon, 'flashblocksd_node_head_rewinds_total')) - rewindsBefore, 1, 'counted once');
  // The new chain's flashblocks apply: the pending block is the second devnet's next block.
  await until(async () => {
    const p = await rpcCall<{ number: string } | null>(daemon.rpcUrl, 'eth_getBlockByNumber', ['pending', false]);
    return p !== null && Number(p.number) === (await head(second)) + 1;
  }, "the pending block is the second devnet's next block");
  const executed = await metric(daemon, EXECUTED);
  await until(async () => (await metric(daemon, EXECUTED)) > executed, "the second devnet's flashblocks executed");
  await until(async () => (await readyz(daemon)).ready, '/readyz ready on the new chain');
  t.equal(logged(daemon, /^node head went back/).length, 1, 'one line for the episode');
});
