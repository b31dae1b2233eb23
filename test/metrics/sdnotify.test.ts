// Tests for src/metrics/sdnotify.ts: no-op outside systemd, never throws, and the real systemd-notify delivers
// READY=1 + MAINPID to a datagram socket (received by a small python3 listener, skipped when python3 is absent).

import t from 'tap';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '../../src/log.js';
import { notifyReady, notifyStopping, notifyWatchdog, watchdogIntervalMs } from '../../src/metrics/sdnotify.js';
import { cannotReceive, haveSystemdNotify, notifySocket } from '../helpers/notify-socket.js';

function withEnv(t: { teardown(fn: () => unknown): void }, env: Record<string, string | undefined>): void {
  const saved: Record<string, string | undefined> = {};
  for (const k of Object.keys(env)) {
    saved[k] = process.env[k];
    if (env[k] === undefined) delete process.env[k];
    else process.env[k] = env[k];
  }
  t.teardown(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
}

function sink(): { lines: string[]; log: ReturnType<typeof createLogger> } {
  const lines: string[] = [];
  return { lines, log: createLogger({ level: 'debug', write: (l) => lines.push(l) }) };
}

t.test('outside systemd (no NOTIFY_SOCKET) every call is a no-op that resolves false', async (t) => {
  withEnv(t, { NOTIFY_SOCKET: undefined });
  const { lines, log } = sink();
  t.equal(await notifyReady(log), false);
  t.equal(await notifyStopping(log), false);
  t.equal(await notifyWatchdog(log), false);
  t.same(lines, [], 'nothing logged');
});

t.test('a socket nobody listens on resolves false with a warning, never throws', { skip: !haveSystemdNotify && 'no systemd-notify' },
  async (t) => {
    withEnv(t, { NOTIFY_SOCKET: join(tmpdir(), `fbd-missing-${process.pid}.sock`) });
    const { lines, log } = sink();
    t.equal(await notifyReady(log), false);
    t.ok(lines.some((l) => l.includes('"level":"warn"') && l.includes('ready notification failed')), lines.join('\n'));
  });

t.test('without the systemd-notify binary it resolves false and says so', async (t) => {
  withEnv(t, { NOTIFY_SOCKET: '/run/systemd/notify', PATH: '/nonexistent' });
  const { lines, log } = sink();
  t.equal(await notifyStopping(log), false);
  t.ok(lines.some((l) => l.includes('systemd-notify is not installed')), lines.join('\n'));
});

t.test('systemd-notify delivers READY=1 with our MAINPID, then STOPPING=1',
  { skip: cannotReceive },
  async (t) => {
    const { path: sock, received } = await notifySocket(t);

    withEnv(t, { NOTIFY_SOCKET: sock });
    const { log } = sink();
    t.equal(await notifyReady(log, 'serving'), true);
    t.equal(await notifyStopping(log), true);
    await new Promise((r) => setTimeout(r, 100));

    const ready = received.find((l) => l.includes('READY=1'));
    t.ok(ready, `READY=1 received (${received.join(' / ')})`);
    t.match(ready, `MAINPID=${process.pid}`);
    t.match(ready, 'STATUS=serving');
    t.ok(received.some((l) => l.includes('STOPPING=1')), 'STOPPING=1 received');
  });

t.test('watchdogIntervalMs is half of WATCHDOG_USEC, only when enabled for this process', async (t) => {
  const pid = String(process.pid);
  t.equal(watchdogIntervalMs({}), null);
  t.equal(watchdogIntervalMs({ NOTIFY_SOCKET: '/run/systemd/notify' }), null);
  t.equal(watchdogIntervalMs({ NOTIFY_SOCKET: '/run/systemd/notify', WATCHDOG_USEC: '30000000' }), 15_000);
  t.equal(watchdogIntervalMs({ NOTIFY_SOCKET: '/run/systemd/notify', WATCHDOG_USEC: '30000000', WATCHDOG_PID: pid }),
    15_000);
  t.equal(watchdogIntervalMs({ NOTIFY_SOCKET: '/x', WATCHDOG_USEC: '30000000', WATCHDOG_PID: '1' }), null,
    'another process owns the watchdog');
  t.equal(watchdogIntervalMs({ NOTIFY_SOCKET: '/x', WATCHDOG_USEC: 'soon' }), null);
  t.equal(watchdogIntervalMs({ WATCHDOG_USEC: '30000000' }), null, 'no socket, no watchdog');
});
