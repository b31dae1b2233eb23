// The systemd watchdog: interval from WATCHDOG_USEC/WATCHDOG_PID, pets delivered through the real systemd-notify to a
// datagram socket (a python3 listener stands in for systemd), a blocked event loop skips a pet, and the daemon
// process pets once it is ready. Skipped where systemd-notify or python3 is missing.
import t from 'tap';
import { createLogger } from '../../src/log.js';
import { startWatchdog, watchdogIntervalMs } from '../../src/metrics/sdnotify.js';
import { sourceCommand, spawnDaemon } from '../helpers/daemon-process.js';
import { cannotReceive, notifySocket } from '../helpers/notify-socket.js';
import { startAnvil } from '../helpers/rpc-harness.js';

const CAN_RECEIVE = cannotReceive;

function sink(): { lines: string[]; log: ReturnType<typeof createLogger> } {
  const lines: string[] = [];
  return { lines, log: createLogger({ level: 'debug', write: (l) => lines.push(l) }) };
}

t.test('the pet interval is half of WATCHDOG_USEC, only for the process systemd meant', async (t) => {
  const sock = { NOTIFY_SOCKET: '/run/systemd/notify' };
  const cases: [NodeJS.ProcessEnv, number | null, string][] = [
    [{ ...sock, WATCHDOG_USEC: '30000000' }, 15_000, 'WatchdogSec=30'],
    [{ ...sock, WATCHDOG_USEC: '30000000', WATCHDOG_PID: String(process.pid) }, 15_000, 'WATCHDOG_PID is this process'],
    [{ ...sock, WATCHDOG_USEC: '30000000', WATCHDOG_PID: String(process.pid + 1) }, null, 'WATCHDOG_PID is another process (inherited env)'],
    [{ ...sock, WATCHDOG_USEC: '30000000', WATCHDOG_PID: 'x' }, null, 'WATCHDOG_PID unparsable'],
    [{ ...sock, WATCHDOG_USEC: '1500' }, 1, 'sub-millisecond half rounds up to 1 ms'],
    [{ ...sock, WATCHDOG_USEC: '3000001' }, 1500, 'microseconds round down'],
    [{ ...sock, WATCHDOG_USEC: '0' }, null, 'zero = off'],
    [{ ...sock, WATCHDOG_USEC: '-5' }, null, 'negative'],
    [{ ...sock, WATCHDOG_USEC: '' }, null, 'empty'],
    [{ ...sock }, null, 'no WATCHDOG_USEC'],
    [{ WATCHDOG_USEC: '30000000' }, null, 'no NOTIFY_SOCKET'],
  ];
  for (const [env, want, name] of cases) t.equal(watchdogIntervalMs(env), want, name);
});

t.test('with the watchdog off startWatchdog does nothing', async (t) => {
  const { lines, log } = sink();
  const stop = startWatchdog(log, { env: { NOTIFY_SOCKET: '/run/systemd/notify' } });
  stop();
  t.same(lines, [], 'nothing logged, nothing sent');
});

t.test('pets arrive as WATCHDOG=1; a blocked event loop skips a pet, then pets resume', { skip: CAN_RECEIVE }, async (t) => {
  const sock = await notifySocket(t);
  const saved = process.env.NOTIFY_SOCKET;
  process.env.NOTIFY_SOCKET = sock.path; // systemd-notify reads it from its environment
  t.teardown(() => (saved === undefined ? delete process.env.NOTIFY_SOCKET : (process.env.NOTIFY_SOCKET = saved)));
  const { lines, log } = sink();
  const stop = startWatchdog(log, { env: { NOTIFY_SOCKET: sock.path, WATCHDOG_USEC: '400000', WATCHDOG_PID: String(process.pid) } });
  t.teardown(stop);
  t.match(lines.join('\n'), /systemd watchdog on: petting every 200 ms/);

  await sock.next(/WATCHDOG=1/);
  await sock.next(/WATCHDOG=1/);
  t.ok(sock.received.filter((l) => l.includes('WATCHDOG=1')).length >= 2, 'pets received');

  // Block the loop for longer than one interval (200 ms).
  const until = Date.now() + 600;
  while (Date.now() < until);
  const skipped = (): boolean => lines.some((l) => /event loop was blocked for \d+ ms \(limit 200 ms\): watchdog not petted/.test(l));
  while (!skipped()) await new Promise((r) => setTimeout(r, 20));
  t.pass('the pet after the stall was skipped, with a warning');
  const before = sock.received.length;
  await sock.next(/WATCHDOG=1/);
  t.ok(sock.received.length > before, 'pets resume once the loop runs freely');
});

t.test('the daemon process pets the watchdog once it is ready', { skip: CAN_RECEIVE }, async (t) => {
  const sock = await notifySocket(t);
  const anvil = await startAnvil();
  t.teardown(() => anvil.stop());
  const { NODE_OPTIONS: _tapLoaders, ...env } = process.env;
  const ready = sock.next(/READY=1/);
  const pet = sock.next(/WATCHDOG=1/);
  const d = await spawnDaemon(sourceCommand(), ['--port', '0', '--metrics-port', '0', '--flashblocks-enabled', 'false', '--node-rpc-url', anvil.url], {
    env: { ...env, NOTIFY_SOCKET: sock.path, WATCHDOG_USEC: '2000000' },
  });
  t.teardown(() => d.close());
  t.match(await ready, `MAINPID=${d.proc.pid}`);
  t.match(await pet, 'WATCHDOG=1');
  t.ok(d.logs().some((l) => l.msg === 'systemd watchdog on: petting every 1000 ms'));
  d.proc.kill('SIGTERM');
  t.same(await d.exited, { code: 0, signal: null }, `exit 0 after SIGTERM; last log lines: ${d.logs().slice(-3).map((l) => JSON.stringify(l)).join(' ')} ${d.stderr()}`);
});
