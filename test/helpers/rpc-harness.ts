// Test helper: the RPC server mounted on a real uWS app over a real pending state (fed through the ingest
// pipeline), plus a real anvil node. Owns process and socket cleanup; knows nothing of what the tests assert.
import { createServer } from 'node:net';
import { loadConfig, type Config } from '../../src/config.js';
import { silentLogger, type Logger } from '../../src/log.js';
import { createMetrics, type Metrics } from '../../src/metrics/metrics.js';
import { loadUws } from '../../src/binaries.js';
import { NodeClient } from '../../src/node/client.js';
import type { RequestQuota } from '../../src/limits/quota.js';
import { rpcCall, startAnvil as startDevnetAnvil } from '../../scripts/devnet/anvil.js';
import type { MethodContext } from '../../src/rpc/methods/types.js';
import { mountRpc, type MountedRpc, type RpcDeps } from '../../src/rpc/server.js';
import { makePipeline } from './ingest.js';

export interface RpcHarness {
  url: string;
  wsUrl: string;
  port: number;
  /** What the handlers run with. */
  ctx: MethodContext;
  /** What the RPC module was given. */
  deps: RpcDeps;
  /** The configuration its options were taken from. */
  config: Readonly<Config>;
  pipeline: ReturnType<typeof makePipeline>['pipeline'];
  state: ReturnType<typeof makePipeline>['state'];
  mounted: MountedRpc;
  /** Requests the node client has sent (each batch counts once). */
  nodeRequests(): number;
  /** Whether `pending` is served from state (stands in for freshness). */
  setUsable(on: boolean): void;
  /** JSON-RPC call over HTTP; returns the parsed envelope. */
  call(method: string, params?: unknown[]): Promise<{ result?: unknown; error?: { code: number; message: string; data?: unknown } }>;
  /** POSTs a raw body; returns status and text. */
  post(body: string, headers?: Record<string, string>): Promise<{ status: number; text: string }>;
  close(): Promise<void>;
}

/** Starts the RPC server on 127.0.0.1 (any free port) with the node at `nodeUrl` (default: a closed port). */
export async function startRpc(opts: { nodeUrl?: string; config?: Partial<Config>; log?: Logger; /** Builds the request quota over the harness's metrics. */ quota?: (metrics: Metrics) => RequestQuota } = {}): Promise<RpcHarness> {
  const config = Object.freeze({ ...loadConfig([], {}), port: 0, nodeTimeoutMs: 2000, ...opts.config }) as Readonly<Config>;
  const { state, pipeline } = makePipeline();
  const metrics = createMetrics({ version: 'test', commit: 'test' });
  let nodeRequests = 0;
  const node = new NodeClient({ url: opts.nodeUrl ?? 'http://127.0.0.1:9', timeoutMs: config.nodeTimeoutMs, maxSockets: 16, observe: () => void nodeRequests++ });
  let usable = true;
  const deps: RpcDeps = {
    options: config,
    view: state,
    senders: pipeline.senders,
    events: pipeline.events,
    node,
    metrics,
    log: opts.log ?? silentLogger,
    pendingUsable: () => usable && config.flashblocksEnabled && state.pendingBlock() !== null,
    quota: opts.quota?.(metrics) ?? null,
  };
  const uws = loadUws();
  const app = uws.App();
  const mounted = mountRpc(app, deps);
  const ctx = mounted.ctx;
  const listen = await new Promise<import('uWebSockets.js').us_listen_socket>((resolve, reject) => {
    app.listen('127.0.0.1', 0, (s) => (s === false ? reject(new Error('listen failed')) : resolve(s)));
  });
  const port = uws.us_socket_local_port(listen);
  const url = `http://127.0.0.1:${port}/`;
  let nextId = 1;
  return {
    url,
    wsUrl: `ws://127.0.0.1:${port}/`,
    port,
    ctx,
    deps,
    config,
    pipeline,
    state,
    mounted,
    nodeRequests: () => nodeRequests,
    setUsable(on) {
      usable = on;
    },
    async call(method, params = []) {
      const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }) });
      return (await r.json()) as { result?: unknown; error?: { code: number; message: string; data?: unknown } };
    },
    async post(body, headers = { 'content-type': 'application/json' }) {
      const r = await fetch(url, { method: 'POST', headers, body });
      return { status: r.status, text: await r.text() };
    },
    async close() {
      await mounted.drain(100);
      uws.us_listen_socket_close(listen);
      node.close();
    },
  };
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const p = typeof a === 'object' && a !== null ? a.port : 0;
      s.close(() => resolve(p));
    });
  });
}

export interface Anvil {
  url: string;
  port: number;
  /** JSON-RPC call straight to anvil; throws on an error reply. */
  rpc<T = unknown>(method: string, params?: unknown[]): Promise<T>;
  stop(): Promise<void>;
}

/**
 * anvil --optimism as the node for RPC tests: chain id 31337, automine unless `args` has --no-mining (then FIFO
 * order, as on the devnet); other `args` are appended. The devnet's launcher, with its exit hooks.
 */
export async function startAnvil(args: string[] = []): Promise<Anvil> {
  const automine = !args.includes('--no-mining');
  const a = await startDevnetAnvil({ chainId: 31337, automine, extraArgs: args.filter((x) => x !== '--no-mining') });
  return {
    url: `${a.url}/`,
    port: a.port,
    rpc: <T>(method: string, params: unknown[] = []) => rpcCall<T>(a.url, method, params),
    stop: a.stop,
  };
}

/** anvil (`anvilArgs`) as the node behind a fresh RPC harness; both are stopped by `t`'s teardown. */
export async function startRpcOverAnvil(
  t: { teardown(fn: () => unknown): void },
  anvilArgs: string[] = [],
): Promise<{ anvil: Anvil; h: RpcHarness }> {
  const anvil = await startAnvil(anvilArgs);
  const h = await startRpc({ nodeUrl: anvil.url });
  t.teardown(async () => {
    await h.close();
    await anvil.stop();
  });
  return { anvil, h };
}
