// Test helper: a real redis-server on 127.0.0.1 (no persistence), started through spawnTied so it cannot outlive the
// test; it can be killed and started again on the same port. Owns the process; knows nothing of what tests assert.
import type { ChildProcess } from 'node:child_process';
import { createConnection } from 'node:net';
import { Redis } from 'ioredis';
import type { Test } from 'tap';
import { spawnTied } from '../../src/child.js';
import { freePort } from './rpc-harness.js';

export const REDIS_SERVER = '/usr/bin/redis-server';

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** SIGKILLs the server (no shutdown save) and waits for it to exit. */
  kill(): Promise<void>;
  /** Starts it again on the same port (empty: nothing persisted). */
  restart(): Promise<void>;
  stop(): Promise<void>;
  /** SIGSTOP / SIGCONT: a Redis that accepts connections but never answers (a hung or swapped-out server). */
  pause(): void;
  resume(): void;
}

function connectable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

async function launch(port: number): Promise<ChildProcess> {
  const { child } = spawnTied(REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
    if (await connectable(port)) return child;
    await new Promise((r) => setTimeout(r, 25));
  }
  child.kill('SIGKILL');
  throw new Error(`redis-server did not listen on ${port}`);
}

/** Starts redis-server on a free loopback port. */
export async function startRedis(): Promise<RedisServer> {
  const port = await freePort();
  let child: ChildProcess | null = await launch(port);
  const kill = async (): Promise<void> => {
    const c = child;
    child = null;
    if (c === null || c.exitCode !== null || c.signalCode !== null) return;
    const gone = new Promise<void>((r) => c.once('exit', () => r()));
    c.kill('SIGKILL');
    await gone;
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    kill,
    async restart() {
      await kill();
      child = await launch(port);
    },
    stop: kill,
    pause: () => void child?.kill('SIGSTOP'),
    resume: () => void child?.kill('SIGCONT'),
  };
}

/** Polls `cond` every 20 ms until it holds; throws after `ms` (a bound, not a timing assertion). */
export async function until(cond: () => boolean | Promise<boolean>, ms = 10_000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A test file's redis-server (started before its first test, stopped after its last) and a client to look into it. */
export interface RedisFixture {
  server: RedisServer;
  probe: Redis;
}

/** Starts a {@link RedisFixture} for the file `tap` runs (filled in by its `before`). */
export function redisForFile(tap: Pick<Test, 'before' | 'teardown'>): RedisFixture {
  const fx = {} as RedisFixture;
  tap.before(async () => {
    fx.server = await startRedis();
    fx.probe = new Redis(fx.server.url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => 50 });
    fx.probe.on('error', () => {});
    await fx.probe.connect();
  });
  tap.teardown(async () => {
    fx.probe.disconnect();
    await fx.server.stop();
  });
  return fx;
}
