// `npm run cluster`: a multi-instance setup on loopback — Redis, three flashblocksd instances and HAProxy (from the
// system packages) in front, fed by the embedded devnet. Wiring and child processes only; no daemon logic here.
// `startCluster()` is the same setup for tests (test/e2e/cluster.test.ts). Parts: scripts/cluster/.
import { accessSync, constants, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ChildProcess } from 'node:child_process';
import { onParentExit, spawnTied } from '../src/child.js';
import { SETTINGS } from '../src/config.js';
import { freePort, redisPing, spawnInstance, stopChild, until, type Spawned } from './cluster/children.js';
import { haproxyConfig } from './cluster/haproxy.js';
import { startDevnet, type DevAccount } from './devnet/sequencer.js';
import { startTraffic } from './devnet/traffic.js';

export { freePort, haproxyConfig };

const REDIS_SERVER = process.env.REDIS_SERVER ?? '/usr/bin/redis-server';
const HAPROXY = process.env.HAPROXY ?? '/usr/sbin/haproxy';
// Every child is spawned `detached` (its own process group): Ctrl-C reaches only this script, which stops HAProxy
// first, then drains the instances (a terminal's SIGINT to all of them followed by our SIGTERM would count as a second
// signal: exit at once). They still die with this process however it ends (spawnTied: parent-death signal).

/**
 * How the instances get flashblocks. `flat`: each takes the devnet's stream itself (no instance depends on another;
 * the default). `relay`: the first takes the devnet, the others take the first one's /flashblocks with
 * --upstream-resume (one upstream connection for the whole cluster; the fan-out is layered).
 */
export type Topology = 'flat' | 'relay';

export interface ClusterOptions {
  /** HAProxy's port (0 = a free one). */
  port?: number;
  /** HAProxy's statistics page port (0 = a free one). */
  statsPort?: number;
  /** Number of flashblocksd instances (default 3). */
  instances?: number;
  topology?: Topology;
  /** Extra flags for every instance (e.g. --api-keys, --stream-max-per-ip, --execution false). */
  daemonArgs?: string[];
  /** Devnet transactions per second (default 5). */
  txPerSec?: number;
  /** Where progress and the instances' warn/error log lines go (default: nowhere). */
  log?: (msg: string) => void;
}

/** One running flashblocksd instance. */
export interface ClusterInstance {
  readonly name: string;
  /** `http://127.0.0.1:<port>/`, the instance itself (bypassing HAProxy). */
  readonly rpcUrl: string;
  readonly rpcPort: number;
  /** `http://127.0.0.1:<port>/metrics` */
  readonly metricsUrl: string;
  readonly metricsPort: number;
  readonly child: ChildProcess;
}

/** A running cluster. */
export interface Cluster {
  /** `http://127.0.0.1:<haproxy port>/`: JSON-RPC over HTTP, balanced round-robin over the instances. */
  readonly url: string;
  /** `ws://127.0.0.1:<haproxy port>/`: WebSocket JSON-RPC and, under /flashblocks, the raw stream. */
  readonly wsUrl: string;
  /** HAProxy's statistics page. */
  readonly statsUrl: string;
  readonly redisUrl: string;
  /** Whether this build's daemon has --redis-url (shared limits); without it every instance limits alone. */
  readonly sharedLimits: boolean;
  readonly instances: readonly ClusterInstance[];
  readonly topology: Topology;
  readonly devnet: { nodeRpcUrl: string; flashblocksUrl: string; chainId: number; freeAccount: DevAccount };
  /** Kills redis-server (SIGKILL): what an outage looks like to the instances. */
  killRedis(): Promise<void>;
  /** Starts redis-server again on the same port (empty: nothing was persisted). */
  startRedis(): Promise<void>;
  /** Stops everything it started; idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts the devnet, redis-server, the instances and HAProxy on 127.0.0.1, and resolves once HAProxy answers and
 * every instance is ready (/readyz). Everything runs as tied children (src/child.ts): nothing outlives this process.
 */
export async function startCluster(opts: ClusterOptions = {}): Promise<Cluster> {
  const log = opts.log ?? (() => {});
  for (const [bin, pkg, env] of [[REDIS_SERVER, 'redis-server', 'REDIS_SERVER'], [HAPROXY, 'haproxy', 'HAPROXY']] as const) {
    try {
      accessSync(bin, constants.X_OK);
    } catch {
      throw new Error(`cluster: ${bin} is not there; install the Debian package ${pkg} (apt-get install ${pkg}) or set ${env} to its path`);
    }
  }
  const count = opts.instances ?? 3;
  const topology = opts.topology ?? 'flat';
  const extra = opts.daemonArgs ?? [];
  const sharedLimits = SETTINGS.some((s) => s.flag === 'redis-url');
  const dir = mkdtempSync(join(tmpdir(), 'flashblocksd-cluster-'));
  const children: ChildProcess[] = [];
  let redis: ChildProcess | null = null;
  let haproxy: ChildProcess | null = null;
  let devnet: Awaited<ReturnType<typeof startDevnet>> | null = null;
  let traffic: Awaited<ReturnType<typeof startTraffic>> | null = null;
  let stopping: Promise<void> | null = null;

  const redisPort = await freePort();
  const startRedis = async (): Promise<void> => {
    const { child } = spawnTied(REDIS_SERVER, ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore', detached: true });
    redis = child;
    await until('redis-server', () => redisPing(redisPort), 10_000);
  };
  const killRedis = async (): Promise<void> => {
    const r = redis;
    redis = null;
    if (r === null || r.exitCode !== null || r.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => r.once('exit', () => resolve()));
    r.kill('SIGKILL');
    await exited;
  };

  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      if (haproxy !== null) await stopChild(haproxy, 2000);
      await Promise.all(children.map((c) => stopChild(c, 8000)));
      await traffic?.stop();
      await devnet?.stop();
      await killRedis();
      rmSync(dir, { recursive: true, force: true });
    })();
    return stopping;
  };

  try {
    await startRedis();
    log(`redis-server on 127.0.0.1:${redisPort}`);
    devnet = await startDevnet({});
    traffic = await startTraffic({ rpcUrl: devnet.nodeRpcUrl, chainId: devnet.chainId, accounts: devnet.accounts.slice(0, -1), txPerSec: opts.txPerSec ?? 5 });
    log(`devnet: node ${devnet.nodeRpcUrl}, flashblocks ${devnet.flashblocksUrl}`);

    const common = ['--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--node-rpc-url', devnet.nodeRpcUrl, '--trusted-proxies', '127.0.0.1/32'];
    if (sharedLimits) common.push('--redis-url', `redis://127.0.0.1:${redisPort}`);
    else log('this build has no --redis-url: every instance enforces its limits alone');
    const names = Array.from({ length: count }, (_, i) => `fb${i + 1}`);
    const started: Spawned[] = [];
    const spawn = async (i: number, upstream: string, resume: boolean): Promise<void> => {
      const s = await spawnInstance(names[i]!, [...common, '--flashblocks-url', upstream, ...(resume ? ['--upstream-resume'] : []), ...extra], log);
      children.push(s.child);
      started[i] = s;
    };
    if (topology === 'flat') {
      await Promise.all(names.map((_, i) => spawn(i, devnet!.flashblocksUrl, false)));
    } else {
      await spawn(0, devnet.flashblocksUrl, false);
      // The relays connect to the first instance directly; with --api-keys its stream wants a key in the path.
      const keys = extra.includes('--api-keys') ? (extra[extra.indexOf('--api-keys') + 1] ?? '') : '';
      const key = keys.split(',')[0]?.trim() ?? '';
      const relayUrl = `ws://127.0.0.1:${started[0]!.rpcPort}/flashblocks${key !== '' ? '/' + key : ''}`;
      await Promise.all(names.slice(1).map((_, j) => spawn(j + 1, relayUrl, true)));
    }
    const instances: ClusterInstance[] = started.map((s, i) => ({
      name: names[i]!,
      rpcUrl: `http://127.0.0.1:${s.rpcPort}/`,
      rpcPort: s.rpcPort,
      metricsUrl: `http://127.0.0.1:${s.metricsPort}/metrics`,
      metricsPort: s.metricsPort,
      child: s.child,
    }));
    for (const i of instances) log(`${i.name}: rpc ${i.rpcUrl}  metrics ${i.metricsUrl}`);

    const port = opts.port === undefined || opts.port === 0 ? await freePort() : opts.port;
    const statsPort = opts.statsPort === undefined || opts.statsPort === 0 ? await freePort() : opts.statsPort;
    const cfg = join(dir, 'haproxy.cfg');
    writeFileSync(cfg, haproxyConfig({ port, statsPort, instances }));
    let haproxyErr = '';
    const hp = spawnTied(HAPROXY, ['-f', cfg, '-db'], { stdio: ['ignore', 'ignore', 'pipe'], detached: true }).child;
    hp.stderr!.on('data', (d: Buffer) => (haproxyErr = (haproxyErr + d.toString()).slice(-4000)));
    haproxy = hp;
    const url = `http://127.0.0.1:${port}/`;
    await until('every instance ready (/readyz)', async () => {
      const codes = await Promise.all(instances.map((i) => fetch(`http://127.0.0.1:${i.metricsPort}/readyz`).then((r) => r.status)));
      return codes.every((c) => c === 200);
    }, 60_000);
    // Ready behind HAProxy: its health checks have marked every server up (statistics CSV, status column).
    const hpExited = (): string | null => (hp.exitCode !== null || hp.signalCode !== null ? `haproxy exited: ${haproxyErr}` : null);
    await until(`HAProxy on ${port} with every server up`, async () => {
      const csv = await (await fetch(`http://127.0.0.1:${statsPort}/;csv`)).text();
      const up = csv.split('\n').filter((l) => l.startsWith('instances,fb') && l.split(',')[17] === 'UP');
      return up.length === instances.length;
    }, 30_000, hpExited);
    log(`HAProxy on ${url} (statistics http://127.0.0.1:${statsPort}/)`);

    return {
      url,
      wsUrl: `ws://127.0.0.1:${port}/`,
      statsUrl: `http://127.0.0.1:${statsPort}/`,
      redisUrl: `redis://127.0.0.1:${redisPort}`,
      sharedLimits,
      instances,
      topology,
      devnet: { nodeRpcUrl: devnet.nodeRpcUrl, flashblocksUrl: devnet.flashblocksUrl, chainId: devnet.chainId, freeAccount: devnet.accounts[devnet.accounts.length - 1]! },
      killRedis,
      startRedis,
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** `npm run cluster [-- --port 8547 --stats-port 8404 --topology flat|relay -- <daemon flags>]`: starts, prints, waits for Ctrl-C. */
async function main(argv: string[]): Promise<void> {
  const sep = argv.indexOf('--');
  const own = sep < 0 ? argv : argv.slice(0, sep);
  const daemonArgs = sep < 0 ? [] : argv.slice(sep + 1);
  const value = (flag: string, def: string): string => (own.includes(flag) ? (own[own.indexOf(flag) + 1] ?? def) : def);
  const topology = value('--topology', 'flat');
  if (topology !== 'flat' && topology !== 'relay') throw new Error(`--topology must be flat or relay, got "${topology}"`);
  const say = (msg: string): void => void process.stderr.write(msg + '\n');
  const c = await startCluster({ port: Number(value('--port', '8547')), statsPort: Number(value('--stats-port', '8404')), topology, daemonArgs, log: say });
  say(
    [
      '',
      `  flashblocksd cluster: ${c.instances.length} instances (${c.topology === 'flat' ? 'each on the devnet stream' : `${c.instances[0]!.name} on the devnet, the others relaying it with --upstream-resume`}) behind HAProxy${c.sharedLimits ? ', limits shared in Redis' : ''}.`,
      `  JSON-RPC  ${c.url}   (round-robin over the instances; answers carry X-Flashblock)`,
      `  stream    ${c.wsUrl}flashblocks`,
      `  HAProxy   ${c.statsUrl}   (statistics: requests per instance)`,
      `  redis     ${c.redisUrl}${c.sharedLimits ? '' : '   (this build has no --redis-url: limits are per instance)'}`,
      ...c.instances.map((i) => `  ${i.name}       ${i.rpcUrl}   ${i.metricsUrl}`),
      `  node      ${c.devnet.nodeRpcUrl}   (the devnet's anvil; chain id ${c.devnet.chainId})`,
      `  account   ${c.devnet.freeAccount.address}   key ${c.devnet.freeAccount.privateKey}`,
      '  Read your writes on any instance: send back the X-Flashblock of your last answer as X-Flashblock-Min:',
      `    curl -si -X POST -H 'Content-Type: application/json' --data '{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["pending",false]}' ${c.url} | grep -i x-flashblock`,
      '  Ctrl-C stops everything.',
      '',
    ].join('\n'),
  );
  let signals = 0;
  const onSignal = (sig: string): void => {
    if (++signals > 1) process.exit(130);
    say(`${sig}: stopping the cluster`);
    void c.stop().then(() => process.exit(0));
  };
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  if (process.env.npm_lifecycle_event !== undefined) onParentExit(() => onSignal('parent exit'));
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).catch((e: unknown) => {
    process.stderr.write(`cluster failed to start: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  });
}
