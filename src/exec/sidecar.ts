// One anvil (revm) process forked from the node at a given block, tied to this process (spawnTied), with pipelined
// connections: `ctl` for applying flashblocks (order matters) and a few for reads (`query`). Owns the child and
// its sockets; knows nothing of flashblocks or strategies.
import type { ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { spawnTied } from '../child.js';
import { PipelinedRpc } from './pipe.js';

/** How to start one forked anvil. */
export interface SidecarOptions {
  /** The node's JSON-RPC URL (http://…) anvil forks from. */
  forkUrl: string;
  /** Canonical block to fork at: the next block anvil mines is forkBlock + 1. */
  forkBlock: number;
  /** The chain's OP hardfork name for anvil's --hardfork (e.g. isthmus). */
  hardfork: string;
  /** Block gas limit for mined blocks (the pending block's gas limit). */
  gasLimit?: bigint;
  startTimeoutMs: number;
  /** Path of the anvil binary; defaults to the one of @foundry-rs/anvil-<platform>-<arch>. */
  binary?: string;
}

/** Start-up failed (binary missing, node unreachable, timeout); `message` says what to do. */
export class SidecarStartError extends Error {}

/** Path of the anvil binary shipped by the platform package @foundry-rs/anvil-<platform>-<arch>. */
export function anvilBinaryPath(): string {
  const arch = process.arch === 'x64' ? 'amd64' : process.arch;
  const pkg = `@foundry-rs/anvil-${process.platform}-${arch}`;
  try {
    return join(dirname(createRequire(import.meta.url).resolve(`${pkg}/package.json`)), 'bin', 'anvil');
  } catch {
    throw new SidecarStartError(`execution engine: anvil binary not found; install ${pkg} (npm install) or disable execution`);
  }
}

/** A running forked anvil. */
/** Read connections per process (see Sidecar.query). */
const QUERY_CONNECTIONS = 4;

export class Sidecar {
  /** Resolves when the process has exited (for any reason). */
  readonly exited: Promise<void>;
  private stopping = false;

  private constructor(
    readonly child: ChildProcess,
    readonly port: number,
    readonly forkBlock: number,
    readonly ctl: PipelinedRpc,
    private readonly queries: readonly PipelinedRpc[],
    exited: Promise<void>,
  ) {
    this.exited = exited;
  }

  /**
   * The read connection with the fewest calls in flight: anvil answers one connection's pipelined calls one after
   * another, so reads spread over a few connections run side by side (and none waits behind a slow one).
   */
  get query(): PipelinedRpc {
    let best = this.queries[0]!;
    for (const q of this.queries) if (q.inFlight < best.inFlight) best = q;
    return best;
  }

  /** True while the process runs and all its connections are open. */
  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null && this.ctl.alive && this.queries.every((q) => q.alive);
  }

  /** Spawns anvil forked at `forkBlock` and resolves once it listens; rejects with {@link SidecarStartError}. */
  static async start(o: SidecarOptions): Promise<Sidecar> {
    const args = [
      '--fork-url', o.forkUrl,
      '--fork-block-number', String(o.forkBlock),
      '--optimism',
      '--no-mining',
      '--order', 'fifo',
      '--accounts', '0',
      '--hardfork', o.hardfork,
      '--host', '127.0.0.1',
      '--port', '0',
      // No fork retries: a node outage must surface as an error here, not as a hung request.
      '--retries', '0',
      '--no-rate-limit',
      // No on-disk fork cache (~/.foundry/cache/rpc/<chain>/<block>, written when a fork flushes): with a fork per
      // canonical head it could grow by a directory per block, and hand a restarted devnet (same chain id, same
      // heights) another chain's state. The in-memory cache stays.
      '--no-storage-caching',
      '--timeout', String(o.startTimeoutMs),
      ...(o.gasLimit !== undefined ? ['--gas-limit', o.gasLimit.toString()] : []),
    ];
    const { child } = spawnTied(o.binary ?? anvilBinaryPath(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const tail: string[] = [];
    const keep = (d: Buffer): void => {
      tail.push(d.toString());
      if (tail.length > 20) tail.shift();
    };
    child.stderr!.on('data', keep);
    let port: number;
    try {
      port = await new Promise<number>((resolve, reject) => {
        let out = '';
        const timer = setTimeout(
          () => reject(new SidecarStartError(`execution engine: anvil did not start within ${o.startTimeoutMs} ms (forking ${o.forkUrl} at ${o.forkBlock})`)),
          o.startTimeoutMs,
        );
        child.stdout!.on('data', (d: Buffer) => {
          out += d.toString();
          keep(d);
          const m = /Listening on [\d.]+:(\d+)/.exec(out);
          if (m) {
            clearTimeout(timer);
            resolve(Number(m[1]));
          }
        });
        child.once('error', (e) => {
          clearTimeout(timer);
          reject(new SidecarStartError(`execution engine: cannot run anvil: ${e.message}`));
        });
        child.once('exit', (code, sig) => {
          clearTimeout(timer);
          const why = tail.join('').trim().split('\n').slice(-3).join(' ').slice(-400);
          reject(new SidecarStartError(`execution engine: anvil exited during start (${code ?? sig}) forking ${o.forkUrl} at ${o.forkBlock}: ${why}`));
        });
      });
    } catch (e) {
      child.kill('SIGKILL');
      throw e;
    }
    // Keep draining anvil's log (one line per tx) so a full pipe never blocks it.
    child.stdout!.removeAllListeners('data');
    child.stderr!.removeAllListeners('data');
    child.stdout!.resume();
    child.stderr!.resume();
    try {
      const [ctl, ...queries] = await Promise.all(Array.from({ length: 1 + QUERY_CONNECTIONS }, () => PipelinedRpc.open('127.0.0.1', port, 5000, true)));
      // Its per-tx log lines are drained and dropped anyway; off, a 2,000-tx mine takes 18–22 ms instead of 31.
      await ctl!.call('anvil_setLoggingEnabled', [false]).catch(() => undefined);
      return new Sidecar(child, port, o.forkBlock, ctl!, queries, exited);
    } catch (e) {
      child.kill('SIGKILL');
      throw new SidecarStartError(`execution engine: cannot connect to anvil on port ${port}: ${(e as Error).message}`);
    }
  }

  /** True when the exit was asked for with {@link stop}. */
  get stopRequested(): boolean {
    return this.stopping;
  }

  /** Kills the process (SIGKILL: its state is disposable) and resolves once it has exited. Idempotent. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.ctl.close();
    for (const q of this.queries) q.close();
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    await this.exited;
  }
}
