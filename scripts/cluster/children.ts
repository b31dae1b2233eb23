// The cluster's child processes (scripts/cluster.ts): free ports, readiness waits, one flashblocksd instance, stop.
// Spawns only through spawnTied (src/child.ts); knows nothing of what the cluster is for.
import { createConnection, createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { ChildProcess } from 'node:child_process';
import { spawnTied } from '../../src/child.js';

/** The repository root (or dist/ when this file runs compiled). */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Compiled (dist/scripts/cluster/*.js): run dist/src/main.js; from source: src/main.ts through tsx. */
const MAIN = import.meta.url.endsWith('.js') ? [join(ROOT, 'src/main.js')] : ['--import', 'tsx', join(ROOT, 'src/main.ts')];

/** A free TCP port on 127.0.0.1 (for the programs that cannot take port 0: redis-server, HAProxy). */
export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

/** Resolves once `test()` is true; throws `what` after `ms`, or at once when `fatal()` names a reason. */
export async function until(what: string, test: () => Promise<boolean>, ms: number, fatal: () => string | null = () => null): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (await test().catch(() => false)) return;
    const why = fatal();
    if (why !== null) throw new Error(`cluster: ${what}: ${why}`);
    if (Date.now() > end) throw new Error(`cluster: timed out after ${ms} ms waiting for ${what}`);
    await sleep(100);
  }
}

/** Whether a redis-server on `port` answers PING. */
export function redisPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection(port, '127.0.0.1');
    const done = (ok: boolean): void => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(1000, () => done(false));
    s.once('error', () => done(false));
    s.once('connect', () => s.write('PING\r\n'));
    s.once('data', (d) => done(d.toString().startsWith('+PONG')));
  });
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the child has exited. */
export async function stopChild(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

export interface Spawned {
  child: ChildProcess;
  rpcPort: number;
  metricsPort: number;
}

/** Starts one flashblocksd (tied, in its own process group) and resolves with its ports once it logs that it listens. */
export async function spawnInstance(name: string, args: string[], log: (msg: string) => void): Promise<Spawned> {
  const { child } = spawnTied(process.execPath, ['--enable-source-maps', ...MAIN, ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let partial = '';
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  return await new Promise<Spawned>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`cluster: ${name} did not listen within 60 s: ${stderr}`));
    }, 60_000);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`cluster: ${name} exited (${code ?? signal}) before listening: ${stderr}`));
    });
    child.stdout!.on('data', (d: Buffer) => {
      partial += d.toString();
      let nl: number;
      while ((nl = partial.indexOf('\n')) >= 0) {
        const text = partial.slice(0, nl);
        partial = partial.slice(nl + 1);
        let line: Record<string, unknown>;
        try {
          line = JSON.parse(text) as Record<string, unknown>;
        } catch {
          continue;
        }
        if (typeof line.rpcPort === 'number' && typeof line.metricsPort === 'number') {
          clearTimeout(timer);
          resolve({ child, rpcPort: line.rpcPort, metricsPort: line.metricsPort });
        }
        if (line.level === 'warn' || line.level === 'error') log(`${name}: ${text}`);
      }
    });
  });
}
