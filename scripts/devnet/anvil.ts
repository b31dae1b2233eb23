// Owns the anvil child process of the devnet: spawn on a loopback port (a free one unless given), wait until it
// answers, say when it exits, stop it. Must not touch any process it did not start, and must never leave its child
// behind when the parent exits.
import type { ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { spawnTied } from '../../src/child.js';

/** The mnemonic of anvil's funded dev accounts (anvil's default). */
export const DEV_MNEMONIC = 'test test test test test test test test test test test junk';

export interface AnvilOptions {
  /** Chain id; 901 is the OP-stack devnet convention. */
  chainId?: number;
  /** Loopback port to listen on; 0 or unset: a free port the OS picks. */
  port?: number;
  /** OP hardfork name (anvil --optimism takes OP names); isthmus gives Cancun+Prague semantics. */
  hardfork?: string;
  /** Number of funded dev accounts. */
  accounts?: number;
  /** Give up when anvil has not printed its port and answered eth_chainId within this time. */
  startTimeoutMs?: number;
  /** Mine each transaction at once (anvil's default) instead of leaving mining to the caller (the sequencer). */
  automine?: boolean;
  /** Extra command-line arguments appended last. */
  extraArgs?: string[];
}

/** A running anvil. */
export interface Anvil {
  readonly url: string;
  readonly wsUrl: string;
  readonly port: number;
  readonly pid: number;
  readonly chainId: number;
  /** Settles once the process has exited, for whatever reason (stop() included), with its exit code or signal. */
  readonly exited: Promise<AnvilExit>;
  /** Kills this anvil (SIGTERM, then SIGKILL after 2 s) and resolves once it has exited. Idempotent. */
  stop(): Promise<void>;
}

/** How an anvil process ended. */
export interface AnvilExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** "exit code 1" / "signal SIGKILL", for messages. */
export function describeExit(e: AnvilExit): string {
  return e.signal !== null ? `signal ${e.signal}` : `exit code ${e.code ?? '?'}`;
}

/** Error thrown by {@link rpcCall} when the node answers with a JSON-RPC error. */
export class NodeRpcError extends Error {
  constructor(
    readonly method: string,
    readonly code: number,
    readonly rpcMessage: string,
  ) {
    super(`${method}: ${rpcMessage} (${code})`);
  }
}

/** Path of the native anvil binary shipped by @foundry-rs/anvil's platform package. */
export function anvilBinary(): string {
  const arch = process.arch === 'x64' ? 'amd64' : process.arch;
  const pkg = `@foundry-rs/anvil-${process.platform}-${arch}`;
  const require = createRequire(import.meta.url);
  try {
    return join(dirname(require.resolve(`${pkg}/package.json`)), 'bin', 'anvil');
  } catch {
    throw new Error(`anvil binary not found: install ${pkg} (an optional runtime dependency of this project)`);
  }
}

/** A reply's JSON; a body that is not JSON (a proxy's 502 page) is an error saying so, not a bare SyntaxError. */
async function jsonBody(res: Response, method: string): Promise<unknown> {
  const text = await res.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`${method}: HTTP ${res.status} without a JSON-RPC reply: ${text.slice(0, 200)}`);
  }
}

/** One JSON-RPC call over HTTP; throws {@link NodeRpcError} on an error reply. */
export async function rpcCall<T = any>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = (await jsonBody(res, method)) as { result?: T; error?: { code: number; message: string } };
  if (body.error) throw new NodeRpcError(method, body.error.code, body.error.message);
  return body.result as T;
}

/** Result of one item of {@link rpcBatch}: the value or the error. */
export type BatchResult<T = any> = { ok: true; value: T } | { ok: false; error: NodeRpcError };

/** A JSON-RPC batch over HTTP; answers are returned in call order. */
export async function rpcBatch<T = any>(url: string, calls: [string, unknown[]][]): Promise<BatchResult<T>[]> {
  if (calls.length === 0) return [];
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(calls.map(([method, params], id) => ({ jsonrpc: '2.0', id, method, params }))),
  });
  const body = (await jsonBody(res, calls[0]![0])) as { id: number; result?: T; error?: { code: number; message: string } }[];
  const out: BatchResult<T>[] = new Array(calls.length);
  for (const item of body) {
    const method = calls[item.id]?.[0] ?? '?';
    out[item.id] = item.error
      ? { ok: false, error: new NodeRpcError(method, item.error.code, item.error.message) }
      : { ok: true, value: item.result as T };
  }
  return out;
}

const live = new Set<ChildProcess>();
let hooksInstalled = false;

/** Kills every live child on process exit, and on SIGINT/SIGTERM when nobody else handles the signal. */
function installExitHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on('exit', () => {
    for (const c of live) c.kill('SIGKILL');
  });
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    const onSignal = (): void => {
      // Another handler (devnet.ts, main.ts) owns graceful shutdown and will call stop(); 'exit' is the backstop.
      if (process.listenerCount(sig) > 1) return;
      for (const c of live) c.kill('SIGKILL');
      process.removeListener(sig, onSignal);
      process.kill(process.pid, sig);
    };
    process.on(sig, onSignal);
  }
}

/**
 * Starts anvil in OP-stack mode on 127.0.0.1 and a port the OS picks; mining off (the sequencer mines, FIFO order)
 * unless `automine`. Resolves once it answers eth_chainId.
 */
export async function startAnvil(opts: AnvilOptions = {}): Promise<Anvil> {
  const chainId = opts.chainId ?? 901;
  const wantedPort = opts.port ?? 0;
  const args = [
    '--optimism',
    '--host', '127.0.0.1',
    '--port', String(wantedPort),
    ...(opts.automine === true ? [] : ['--no-mining', '--order', 'fifo']),
    '--hardfork', opts.hardfork ?? 'isthmus',
    '--chain-id', String(chainId),
    '--accounts', String(opts.accounts ?? 10),
    '--mnemonic', DEV_MNEMONIC,
    ...(opts.extraArgs ?? []),
  ];
  installExitHooks();
  // Tied: the kernel kills anvil if this process dies, `kill -9` included (the exit hooks cover only clean exits).
  // Its own process group: a terminal's Ctrl-C (SIGINT to the foreground group) must not kill the node under the
  // daemon and sequencer while they stop; stop() ends it last.
  const { child } = spawnTied(anvilBinary(), args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  live.add(child);
  const exited = new Promise<AnvilExit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  void exited.then(() => live.delete(child));

  let stopping: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    if (stopping) return stopping;
    stopping = (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 2000);
        await exited;
        clearTimeout(t);
      }
    })();
    return stopping;
  };

  const tail: string[] = [];
  const timeoutMs = opts.startTimeoutMs ?? 15_000;
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`anvil did not start within ${timeoutMs} ms`)), timeoutMs);
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /Listening on [\d.]+:(\d+)/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(Number(m[1]));
        }
      });
      child.stderr!.on('data', (d: Buffer) => {
        tail.push(d.toString());
        if (tail.length > 20) tail.shift();
      });
      child.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      // 'close', not 'exit': by then its last words on stderr have been read.
      child.once('close', (code, sig) => {
        clearTimeout(timer);
        const said = tail.join('').trim();
        // anvil's own words for a taken port ("Address already in use (os error 98)") name no port: this does.
        if (wantedPort !== 0 && /already in use/i.test(said)) reject(new Error(`anvil cannot listen on 127.0.0.1:${wantedPort}: the port is in use; choose another or leave it unset for a free one`));
        else reject(new Error(`anvil exited during start (${code ?? sig}): ${said.slice(-500)}`));
      });
    });
    // Keep draining its logs (one line per tx) so a full pipe never blocks anvil.
    child.stdout!.removeAllListeners('data');
    child.stdout!.resume();
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const id = Number(await rpcCall<string>(url, 'eth_chainId'));
        if (id !== chainId) throw new Error(`anvil answers chain id ${id}, expected ${chainId}`);
        break;
      } catch (e) {
        if (e instanceof Error && e.message.startsWith('anvil answers')) throw e;
        if (Date.now() > deadline) throw new Error(`anvil on port ${port} did not answer within ${timeoutMs} ms`, { cause: e });
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    return { url, wsUrl: `ws://127.0.0.1:${port}`, port, pid: child.pid ?? -1, chainId, exited, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
