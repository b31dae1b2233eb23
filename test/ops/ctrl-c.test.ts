// `npm start` as a user runs it, stopped as a user stops it: the daemon with no upstream and no node flags starts the
// embedded devnet; flashblocks flow for a few blocks; then Ctrl-C — SIGINT to the whole process group (the daemon,
// the devnet's anvil; the execution engine runs in-process) and once more to the daemon, as npm forwards it. A stop
// is not a failure: nothing at warn or above while stopping (the engine included), nothing on stderr, exit 0. And a
// normal run logs nothing per block at info.
import t from 'tap';
import { sourceCommand, spawnDaemon } from '../helpers/daemon-process.js';

const LEVELS_ABOVE_INFO = new Set(['warn', 'error', 'fatal']);

async function pendingHeight(url: string): Promise<number> {
  try {
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":["pending"]}' });
    return Number(((await res.json()) as { result?: string }).result ?? -1);
  } catch {
    return -1;
  }
}

t.test('Ctrl-C of the daemon on the embedded devnet: no warning while stopping, exit 0; nothing per block at info', async (t) => {
  const d = await spawnDaemon(sourceCommand(), ['--port', '0', '--metrics-port', '0'], {
    detached: true,
    env: { ...process.env, npm_lifecycle_event: undefined },
    startTimeoutMs: 60_000,
  });
  t.teardown(() => d.close());
  // Flashblocks flowing over a few block boundaries.
  let first = -1;
  for (;;) {
    const h = await pendingHeight(d.rpcUrl);
    if (first < 0 && h > 0) first = h;
    if (first > 0 && h >= first + 3) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const flowing = d.logs().length;
  const stderrBefore = d.stderr().length;
  // A terminal's Ctrl-C: the whole foreground group; then npm passes it on to its child once more.
  process.kill(-d.proc.pid!, 'SIGINT');
  process.kill(d.proc.pid!, 'SIGINT');
  const exit = await d.exited;

  const lines = d.logs();
  const during = lines.slice(0, flowing);
  const stopping = lines.slice(flowing);
  t.equal(exit.code, 0, `exit code 0 (${JSON.stringify(exit)})`);
  t.ok(stopping.some((l) => l.msg === 'stopped cleanly'), 'stopped cleanly');
  const loud = stopping.filter((l) => LEVELS_ABOVE_INFO.has(String(l.level)) || l.raw !== undefined);
  t.same(loud, [], 'no line at warn or above while stopping (daemon, execution engine and devnet)');
  t.equal(d.stderr().slice(stderrBefore), '', 'nothing on stderr while stopping (no stack, no SyntaxError)');

  // Per-block info lines: a message logged more than once while blocks went by.
  const seen = new Map<string, number>();
  for (const l of during) if (l.level === 'info') seen.set(String(l.msg), (seen.get(String(l.msg)) ?? 0) + 1);
  const repeated = [...seen].filter(([, n]) => n > 1);
  t.same(repeated, [], 'no info line per block (daemon, execution engine and devnet)');
  // The native engine's divergence lines (EIP-7702 refund of an existing authority missed: executed 46,000 vs 36,800
  // gasUsed on the devnet's 7702 txs) are an engine bug, tracked here until native/ is fixed.
  const divergence = (l: Record<string, unknown>): boolean => /differs from/.test(String(l.msg ?? ''));
  const warned = during.filter((l) => LEVELS_ABOVE_INFO.has(String(l.level)));
  t.same(warned.filter((l) => !divergence(l)), [], 'no warning in a normal run (daemon, execution engine and devnet)');
  t.same(warned.filter(divergence), [], 'no execution divergence on the devnet');
});
