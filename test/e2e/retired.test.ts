// A chain that stopped streaming: the daemon against a node whose chain id is Base's (anvil --chain-id 8453, preset
// found by eth_chainId) with an upstream that refuses connections says so in one log line, /readyz names the reason,
// pending answers as latest (counted as reason="retired"), and reconnects stay at --backoff-max-ms over 15 s.
import t from 'tap';
import { rpcCall, startAnvil } from '../../scripts/devnet/anvil.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon } from '../../src/daemon.js';
import { createLogger } from '../../src/log.js';
import { freePort } from '../helpers/rpc-harness.js';

/**
 * The reconnect cap and how long the reconnects are counted. Only their ratio matters to the check: 15 cap-lengths
 * allow at most 17 settled attempts, where a daemon that had not settled would make about 40 (30 quick retries of
 * ≤ 500 ms, then delays drawn from [100, 1000] ms).
 */
const BACKOFF_MAX_MS = 1000;
const WINDOW_MS = 15_000;

/** The value of one sample line of `text` (0 when absent). */
function sample(text: string, line: string): number {
  const m = text.split('\n').find((l) => l.startsWith(line + ' '));
  return m === undefined ? 0 : Number(m.slice(line.length + 1));
}

t.test('a Base node and a refusing upstream: one clear line, a /readyz reason, pending = latest, reconnects at the cap', async (t) => {
  const anvil = await startAnvil({ chainId: 8453 });
  t.teardown(() => anvil.stop());
  const refused = await freePort(); // nothing listens there: every connect is refused at once
  const lines: string[] = [];
  const config = loadConfig(
    ['--flashblocks-url', `ws://127.0.0.1:${refused}/`, '--node-rpc-url', anvil.url, '--port', '0', '--metrics-port', '0',
      '--execution', 'false', '--backoff-max-ms', String(BACKOFF_MAX_MS), '--log-level', 'info'],
    {},
  );
  const daemon = await startDaemon(config, { log: createLogger({ level: 'info', write: (l) => lines.push(l) }) });
  t.teardown(() => daemon.stop());
  const rpc = `http://127.0.0.1:${daemon.rpcPort}/`;
  const metricsUrl = `http://127.0.0.1:${daemon.metricsPort}/metrics`;
  const reconnects = async (): Promise<number> => sample(await (await fetch(metricsUrl)).text(), 'flashblocksd_upstream_reconnects_total{upstream="0"}');

  t.match(lines.find((l) => l.includes('"chain: ')) ?? '', /chain: Base \(8453\) by the node's eth_chainId: 2000 ms blocks, 200 ms flashblocks \(10 per block\), dialect base, flashblocks retired 2026-11-05 18:00 UTC/);

  const ready = await fetch(`http://127.0.0.1:${daemon.metricsPort}/readyz`);
  t.equal(ready.status, 503, '/readyz is not ready');
  const report = (await ready.json()) as { reason?: string; checks: Record<string, { ok: boolean; detail: string }> };
  t.match(report.reason ?? '', /^chain_retired: Base \(chain 8453\) retired flashblocks on 2026-11-05 18:00 UTC/);
  t.match(report.reason ?? '', /--flashblocks-enabled false/);
  t.equal(report.checks.upstream?.ok, false);
  t.match(report.checks.upstream?.detail ?? '', /chain_retired/);

  const pending = await rpcCall<{ hash: string; number: string }>(rpc, 'eth_getBlockByNumber', ['pending', false]);
  const latest = await rpcCall<{ hash: string; number: string }>(rpc, 'eth_getBlockByNumber', ['latest', false]);
  t.equal(pending.hash, latest.hash, 'pending answers as latest');
  const m = await (await fetch(metricsUrl)).text();
  t.ok(sample(m, 'flashblocksd_pending_fallbacks_total{reason="retired"}') >= 1, 'counted as a retired fallback');
  t.equal(sample(m, 'flashblocksd_upstream_retired{reason="chain_retired"}'), 1, 'the gauge says why');
  t.equal(sample(m, 'flashblocksd_upstream_retired{reason="upstream_absent"}'), 0);

  // Reconnects over WINDOW_MS: each waits between 0.9 × and 1 × the cap, so at most WINDOW_MS / (0.9 × cap) + 1 of
  // them (the quick first retries of a live chain would make more than twice as many).
  const before = await reconnects();
  await new Promise((r) => setTimeout(r, WINDOW_MS));
  const attempts = (await reconnects()) - before;
  const bound = Math.floor(WINDOW_MS / (0.9 * BACKOFF_MAX_MS)) + 1;
  t.ok(attempts >= 1, `the daemon keeps trying (${attempts} attempts)`);
  t.ok(attempts <= bound, `${attempts} reconnect attempts in ${WINDOW_MS / 1000} s ≤ ${bound} (cap ${BACKOFF_MAX_MS} ms)`);

  const said = lines.filter((l) => l.includes('retired flashblocks on'));
  t.equal(said.length, 1, 'said once', { said });
  t.match(said[0] ?? '', /"level":"warn"/);
  t.match(said[0] ?? '', /pending answers as latest/);
  t.match(said[0] ?? '', /point clients at latest/);
  t.equal(lines.filter((l) => l.includes('"failure":"') && !l.includes('"level":"debug"')).length, 0, 'no reconnect line per attempt above debug');
});

t.test('--chain base forces the preset whatever the node says, and an unknown --chain is refused at start', async (t) => {
  const anvil = await startAnvil({});
  t.teardown(() => anvil.stop());
  const refused = await freePort();
  const base = ['--flashblocks-url', `ws://127.0.0.1:${refused}/`, '--node-rpc-url', anvil.url, '--port', '0', '--metrics-port', '0', '--execution', 'false'];
  const lines: string[] = [];
  const daemon = await startDaemon(loadConfig([...base, '--chain', 'base'], {}), { log: createLogger({ level: 'info', write: (l) => lines.push(l) }) });
  t.teardown(() => daemon.stop());
  t.match(daemon.health().reason ?? '', /^chain_retired: Base/);
  t.ok(lines.some((l) => l.includes('chain: Base (8453) by --chain base')));
  await t.rejects(startDaemon(loadConfig([...base, '--chain', 'basechain'], {}), { log: createLogger({ level: 'error', write: () => undefined }) }), { code: 'E_CONFIG', message: /--chain: "basechain" is not auto or a known chain \(op-mainnet, .*base, base-sepolia, devnet\)/ });
});

t.test('an upstream refusing for --upstream-absent-ms on a chain without a preset: upstream_absent, said once', async (t) => {
  const anvil = await startAnvil({ chainId: 31337 });
  t.teardown(() => anvil.stop());
  const refused = await freePort();
  const lines: string[] = [];
  const config = loadConfig(
    ['--flashblocks-url', `ws://127.0.0.1:${refused}/`, '--node-rpc-url', anvil.url, '--port', '0', '--metrics-port', '0',
      '--execution', 'false', '--upstream-absent-ms', '1000', '--backoff-max-ms', '2000'],
    {},
  );
  const daemon = await startDaemon(config, { log: createLogger({ level: 'info', write: (l) => lines.push(l) }) });
  t.teardown(() => daemon.stop());
  t.equal(daemon.health().reason, undefined, 'not yet');
  t.ok(lines.some((l) => l.includes('chain: id 31337 has no preset: 2000 ms blocks, 200 ms flashblocks')));
  while (daemon.health().reason === undefined) await new Promise((r) => setTimeout(r, 100));
  t.match(daemon.health().reason ?? '', /^upstream_absent: no flashblock from any upstream for 1 s \(since \d{4}-.*\): the chain may have stopped streaming/);
  await new Promise((r) => setTimeout(r, 1500));
  t.equal(lines.filter((l) => l.includes('no flashblock from any upstream')).length, 1, 'said once');
  const m = await (await fetch(`http://127.0.0.1:${daemon.metricsPort}/metrics`)).text();
  t.equal(sample(m, 'flashblocksd_upstream_retired{reason="upstream_absent"}'), 1);
});
