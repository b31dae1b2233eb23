// Test helper: a datagram socket standing in for systemd's NOTIFY_SOCKET (a small python3 listener), so tests can
// see what the real systemd-notify sends. `canReceive` is false (with the reason) where systemd-notify or python3 is
// missing.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const HAVE_NOTIFY = spawnSync('systemd-notify', ['--help'], { stdio: 'ignore' }).status === 0;
const HAVE_PYTHON = spawnSync('python3', ['-c', 'import socket'], { stdio: 'ignore' }).status === 0;

/** false when datagrams can be received here, else why not (usable as a tap `skip` value). */
export const cannotReceive: false | string = HAVE_NOTIFY && HAVE_PYTHON ? false : 'needs systemd-notify and python3 to receive the datagrams';
export const haveSystemdNotify = HAVE_NOTIFY;

// Prints "bound", then one line per datagram (newlines as "|") until killed.
const LISTENER = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("bound", flush=True)
while True:
    print(s.recv(4096).decode().replace("\\n", "|"), flush=True)
`;

export interface NotifySocket {
  /** The socket path to put in NOTIFY_SOCKET. */
  path: string;
  /** Every datagram so far, one line each (newlines as "|"). */
  received: string[];
  /** Resolves with the next datagram matching `re` (arriving after the call). */
  next(re: RegExp): Promise<string>;
}

/** Binds a listener; `t.teardown` kills it and removes its directory. */
export async function notifySocket(t: { teardown(fn: () => unknown): void }): Promise<NotifySocket> {
  const dir = mkdtempSync(join(tmpdir(), 'fbd-notify-'));
  const path = join(dir, 'notify.sock');
  const listener = spawn('python3', ['-c', LISTENER, path], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => {
    listener.kill();
    rmSync(dir, { recursive: true, force: true });
  });
  const received: string[] = [];
  let waiters: { re: RegExp; resolve: (l: string) => void }[] = [];
  const lines = createInterface({ input: listener.stdout });
  await new Promise<void>((resolve) => lines.once('line', () => resolve()));
  lines.on('line', (l) => {
    received.push(l);
    waiters = waiters.filter((w) => (w.re.test(l) ? (w.resolve(l), false) : true));
  });
  return { path, received, next: (re) => new Promise((resolve) => waiters.push({ re, resolve })) };
}
