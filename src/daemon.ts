// Assembles the daemon: config → metrics, state, pipeline, node client → uWS app with rpc/ and stream/ mounted →
// listeners → upstreams and canonical tracking. Owns start and stop order; holds no logic of its own.
import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import type { Config } from './config.js';
import { forkFromEthConfig } from './chain/eth-config.js';
import { chainTiming, choicePreset, nextFork, PRESET_NAMES, presetByChainId, presetByName, utcMinute, type ChainChoice, type ChainPreset } from './chain/presets.js';
import { StartupCode, StartupError } from './errors.js';
import type { ExecutionEngine } from './exec/engine.js';
import { RevmEngine } from './exec/revm.js';
import { executionSpecAt } from './exec/spec.js';
import { ExecutionFeed } from './execution.js';
import { CADENCE_CHECKS, CadenceJudge, cadenceExpectation } from './ingest/cadence.js';
import { CanonicalTracker } from './ingest/canonical.js';
import { CHAIN_MATCH_DEFAULTS, ChainMatch, describeMismatch } from './ingest/chain-match.js';
import { nativeDecoder } from './ingest/native-frame.js';
import { metricsObserver, observeUpstreamEvent } from './ingest/observer.js';
import { IngestPipeline } from './ingest/pipeline.js';
import { RetirementWatch, type RetirementChange } from './ingest/retirement.js';
import { UpstreamPool, type ResumePosition } from './ingest/upstream.js';
import { ConnectionLeases } from './limits/connections.js';
import { RequestQuota } from './limits/quota.js';
import { RedisLink } from './limits/redis.js';
import { createLogger, type Logger } from './log.js';
import { healthReport, type HealthInputs } from './metrics/health.js';
import { createMetrics, LAG_RESOLUTION_MS, type ExecutionSpec, type Metrics } from './metrics/metrics.js';
import { startMetricsServer, type HealthReport, type MetricsServer } from './metrics/server.js';
import { mainThreadLoad, watchThreads } from './metrics/threads.js';
import { checkNative, listenExclusive, loadUws, type NativeReport } from './binaries.js';
import { NodeClient } from './node/client.js';
import { mountRpc, type RpcOptions } from './rpc/server.js';
import { PendingState } from './state/pending.js';
import { RecoveryWorker } from './state/recover-worker.js';
import type { PendingView } from './state/view.js';
import { mountLocalStream } from './stream/local.js';
import type { StreamOptions } from './stream/server.js';
import { startStreamPort, type StreamPort } from './stream/threads.js';

/** A running daemon. */
export interface Daemon {
  readonly rpcPort: number;
  /** --stream-port when set, else 0. */
  readonly streamPort: number;
  readonly metricsPort: number;
  readonly metrics: Metrics;
  /** The pending state, read-only. */
  readonly view: PendingView;
  readonly pipeline: IngestPipeline;
  readonly native: NativeReport;
  /** The pending-execution feed (null when --execution is off or there is no upstream). */
  readonly execution: ExecutionFeed | null;
  /** Health as /readyz reports it. */
  health(): HealthReport;
  /** Graceful stop: drain serving modules within the grace period, close upstreams and listeners. */
  stop(): Promise<void>;
}

export interface DaemonOptions {
  log?: Logger;
  version?: string;
  commit?: string;
}

/** The settings `keys` of `config`, as the options object of one module (nothing else of Config reaches it). */
function pick<K extends keyof Config>(config: Readonly<Config>, keys: readonly K[]): Pick<Config, K> {
  const out = {} as Pick<Config, K>;
  for (const k of keys) out[k] = config[k];
  return out;
}

/** How often the node's chain id is asked again while it answers (a node swapped behind its URL without an outage). */
const CHAIN_ID_RECHECK_MS = 60_000;

/** How often the daemon judges whether its chain stopped streaming (RetirementWatch; its default threshold is 10 min). */
const RETIREMENT_CHECK_MS = 1000;

const RPC_SETTINGS = [
  'maxBodyBytes', 'corsOrigins', 'streamMaxBackpressureBytes', 'streamIdleTimeoutS', 'maxBatchItems', 'maxResponseBytes',
  'forwardMethods', 'allowNamespaces', 'flashblocksEnabled', 'sendRawSyncTimeoutMs', 'maxSubscriptionsPerConnection',
  'pinWaitMs', 'pinMaxWaiters', 'traceTimeoutMs', 'maxTracesInFlight',
  'trustedProxies', 'apiKeys',
] as const satisfies readonly (keyof RpcOptions & keyof Config)[];

const STREAM_SETTINGS = [
  'streamMaxBackpressureBytes', 'streamMaxSubscribers', 'streamMaxPerIp', 'streamIdleTimeoutS', 'apiKeys', 'trustedProxies',
  'replayRingFrames', 'maxFrameBytes',
] as const satisfies readonly (keyof StreamOptions & keyof Config)[];

/** How the execution spec was chosen: a flag, the chain's schedule, the node's eth_config, or refused (no fork known). */
type SpecChoice =
  | { kind: 'flag'; specAt: (timestampSec: number) => string; fork: string }
  | { kind: 'schedule'; specAt: (timestampSec: number) => string; preset: ChainPreset }
  | { kind: 'node'; specAt: (timestampSec: number) => string; fork: string }
  | { kind: 'refused'; why: string }
  | { kind: 'waiting'; why: string }
  | { kind: 'off' };

/**
 * The execution spec: --execution-hardfork, else the chain preset's schedule, else the fork the node's EIP-7910
 * eth_config names unambiguously (asked once, with a short timeout); else refused, with the reason. Never a guess.
 */
async function chooseSpec(config: Readonly<Config>, chain: ChainChoice, wanted: boolean): Promise<SpecChoice> {
  if (!wanted) return { kind: 'off' };
  if (config.executionHardfork !== 'auto') return { kind: 'flag', specAt: executionSpecAt(config.executionHardfork, null), fork: config.executionHardfork };
  const preset = choicePreset(chain);
  if (preset !== null) return { kind: 'schedule', specAt: executionSpecAt('auto', preset), preset };
  // The node did not answer eth_chainId: nothing is known to run under yet (learned when it answers).
  if (chain.kind === 'unavailable' && config.chain === 'auto') return { kind: 'waiting', why: `the chain is not known yet (${chain.detail}): it is learned when the node answers` };
  const which = chain.kind === 'unknown' ? `chain ${chain.chainId} has no preset` : `the chain is not known (${chain.kind === 'unavailable' ? chain.detail : ''})`;
  const probe = new NodeClient({ url: config.nodeRpcUrl, timeoutMs: Math.min(config.nodeTimeoutMs, 3000), maxSockets: 1 });
  try {
    const named = forkFromEthConfig(await probe.call<unknown>('eth_config', []));
    if (named.ok) return { kind: 'node', specAt: () => named.fork, fork: named.fork };
    return { kind: 'refused', why: `${which} and ${named.why}; give --execution-hardfork <fork>` };
  } catch (e) {
    return { kind: 'refused', why: `${which} and the node's eth_config failed (${(e as Error).message}); give --execution-hardfork <fork>` };
  } finally {
    probe.close();
  }
}

/** The execution engine: the native core's in-process EVM (src/exec/revm.ts), under the spec `specNow()` chooses. */
function makeEngine(config: Readonly<Config>, log: Logger, specNow: () => SpecChoice): ExecutionEngine {
  const logTo = (msg: string, fields: Record<string, unknown>, level: 'info' | 'warn' | 'error'): void =>
    level === 'info' ? log.info(msg, fields) : level === 'error' ? log.error(msg, fields) : log.warn(msg, fields);
  return new RevmEngine({
    // The engine reads the node itself, on its own threads and connections (never the sockets of forwarded
    // requests). It trusts what this process's TLS trusts: the Mozilla roots and NODE_EXTRA_CA_CERTS.
    node: { url: config.nodeRpcUrl, ...(process.env.NODE_EXTRA_CA_CERTS ? { caFile: process.env.NODE_EXTRA_CA_CERTS } : {}) },
    specAt: (timestampSec) => {
      const spec = specNow();
      // Never reached without a spec: the feed starts the engine only when runnable() (below) says it may.
      if (!('specAt' in spec)) throw new Error('execution refused: no fork known');
      return spec.specAt(timestampSec);
    },
    cacheCapBytes: config.executionCacheMb * 1024 * 1024,
    inlineReadUs: config.executionInlineReadUs,
    readTimeoutMs: config.executionReadTimeoutMs,
    readMemoEntries: config.executionReadMemo,
    nodeTimeoutMs: config.nodeTimeoutMs,
    log: logTo,
  });
}

/** Why the engine may not run under `spec` now (ExecutionFeedDeps.runnable), or null. */
function specBlocks(spec: SpecChoice): string | null {
  if (spec.kind === 'refused') return `execution engine cannot run: ${spec.why}`;
  if (spec.kind === 'waiting') return spec.why;
  return null;
}

/**
 * The feed's health for /readyz, marked cannot-run when it stopped for good: the start errors on which
 * src/execution.ts gives up retrying (the native core is missing or cannot be loaded, or no fork is known: chooseSpec).
 */
function executionHealth(feed: ExecutionFeed): NonNullable<HealthInputs['execution']> {
  const h = feed.health();
  return { ...h, cannotRun: h.phase === 'down' && /cannot run/.test(h.detail) };
}

/**
 * The chain's preset: --chain when it names one, else the preset of the node's eth_chainId (asked once, with a short
 * timeout: a node down at start-up means no preset, never a failed start).
 */
async function chooseChain(config: Readonly<Config>): Promise<ChainChoice> {
  if (config.chain !== 'auto') {
    const p = presetByName(config.chain);
    if (p !== null) return { kind: 'flag', preset: p };
    throw new StartupError(StartupCode.CONFIG_INVALID, `--chain: "${config.chain}" is not auto or a known chain (${PRESET_NAMES.join(', ')})`);
  }
  if (config.nodeRpcUrl === '') return { kind: 'unavailable', detail: 'no --node-rpc-url' };
  const probe = new NodeClient({ url: config.nodeRpcUrl, timeoutMs: Math.min(config.nodeTimeoutMs, 3000), maxSockets: 1 });
  try {
    const hex = await probe.call<string>('eth_chainId', []);
    const id = typeof hex === 'string' ? Number.parseInt(hex, 16) : NaN;
    if (!Number.isSafeInteger(id)) return { kind: 'unavailable', detail: `eth_chainId answered ${JSON.stringify(hex)}` };
    const p = presetByChainId(id);
    return p === null ? { kind: 'unknown', chainId: id } : { kind: 'node', preset: p };
  } catch (e) {
    return { kind: 'unavailable', detail: `eth_chainId failed: ${(e as Error).message}` };
  } finally {
    probe.close();
  }
}

/** The execution part of the start-up line: the spec in force now and how it was chosen (the next scheduled fork). */
function describeSpec(spec: SpecChoice, nowSec: number): { text: string; spec: string | null } {
  switch (spec.kind) {
    case 'off':
      return { text: 'execution off', spec: null };
    case 'refused':
      return { text: 'execution refused (no fork known): give --execution-hardfork <fork>', spec: null };
    case 'waiting':
      return { text: 'execution waits for the chain (learned when the node answers)', spec: null };
    case 'flag':
      return { text: `execution spec ${spec.fork} (--execution-hardfork)`, spec: spec.fork };
    case 'node':
      return { text: `execution spec ${spec.fork} (the node's eth_config)`, spec: spec.fork };
    case 'schedule': {
      const now = spec.specAt(nowSec);
      const next = nextFork(spec.preset, nowSec);
      return { text: `execution spec ${now} by the chain's schedule${next === null ? '' : ` (${next.fork} from ${utcMinute(next.sec)})`}`, spec: now };
    }
  }
}

/** The start-up line saying which chain the daemon runs for, with what timing and under which execution spec. */
function logChain(log: Logger, choice: ChainChoice, timing: { blockTimeMs: number; flashblockIntervalMs: number }, spec: SpecChoice): void {
  const t = `${timing.blockTimeMs} ms blocks, ${timing.flashblockIntervalMs} ms flashblocks (${Math.round(timing.blockTimeMs / timing.flashblockIntervalMs)} per block)`;
  const ex = describeSpec(spec, Math.floor(Date.now() / 1000));
  if (choice.kind === 'flag' || choice.kind === 'node') {
    const p = choice.preset;
    const how = choice.kind === 'flag' ? `--chain ${p.name}` : "the node's eth_chainId";
    const streams = p.flashblocks.untilSec !== null ? `flashblocks retired ${utcMinute(p.flashblocks.untilSec)}` : 'streams flashblocks';
    log.info(`chain: ${p.title} (${p.chainId}) by ${how}: ${t}, dialect ${p.dialect}, ${streams}; ${ex.text}`, { chain: p.name, chainId: p.chainId, spec: ex.spec });
  } else if (choice.kind === 'unknown') {
    log.info(`chain: id ${choice.chainId} has no preset: ${t} (--block-time-ms / --flashblock-interval-ms or their defaults); ${ex.text}`, { chainId: choice.chainId, spec: ex.spec });
  } else {
    log.warn(`chain: not known yet (${choice.detail}): ${t} (--block-time-ms / --flashblock-interval-ms or their defaults) until the node answers eth_chainId, or give --chain; ${ex.text}`, { spec: ex.spec });
  }
}

/** Starts the daemon. Throws StartupError (E_NATIVE, E_LISTEN) when it cannot. */
export async function startDaemon(config: Readonly<Config>, opts: DaemonOptions = {}): Promise<Daemon> {
  const log = opts.log ?? createLogger({ level: config.logLevel });
  // Process-wide, read by V8 at each heap-limit update (so it takes effect after start-up; node refuses it in
  // NODE_OPTIONS). Fewer, not shorter, full collections: see docs/internals.md "What a held block keeps".
  if (config.heapGrowingPercent > 0) setFlagsFromString(`--heap-growing-percent=${config.heapGrowingPercent}`);
  const uWS = loadUws();
  const native = checkNative(uWS, log);
  const upstreamCount = Math.max(1, config.flashblocksUrls.length);
  const streamThreads = config.streamPort > 0 ? config.streamThreads : 0;
  // The chain: its preset supplies block time and flashblock interval unless set explicitly (nothing assumes 10 per 2 s).
  // Learned again when the node answers after an outage or changes chain (learnChain below).
  let chain = await chooseChain(config);
  const preset = choicePreset(chain);
  const timing = { ...chainTiming(preset, { blockTimeMs: config.blockTimeMs, flashblockIntervalMs: config.flashblockIntervalMs }) };
  if (timing.flashblockIntervalMs > timing.blockTimeMs) {
    throw new StartupError(StartupCode.CONFIG_INVALID, `--flashblock-interval-ms (${timing.flashblockIntervalMs}) is longer than the block time (${timing.blockTimeMs} ms${config.blockTimeMs === 0 ? ", the chain preset's" : ''})`);
  }
  // Pending execution only with an upstream to execute and a node to read state from.
  const wantsExecution = config.execution && config.flashblocksEnabled && config.flashblocksUrls.length > 0 && config.nodeRpcUrl !== '';
  let spec = await chooseSpec(config, chain, wantsExecution);
  logChain(log, chain, timing, spec);
  const metrics = createMetrics({ version: opts.version ?? '0.0.0', commit: opts.commit ?? 'unknown', upstreamCount, streamThreads, flashblockIntervalMs: timing.flashblockIntervalMs });
  const state = new PendingState({ maxPendingBlocks: config.maxPendingBlocks });
  // Sender recovery (~50 µs a transaction): the native core recovers every flashblock's when it loads; without it, a
  // worker thread started by the first frame, or (without the JS binding either) the event loop.
  const recoveryWorker = nativeDecoder() === null && native.secp256k1 ? RecoveryWorker.lazy(log, LAG_RESOLUTION_MS) : null;
  // Is the node on the stream's chain? One error line when it is not, a metric per flashblock, a /readyz reason.
  const chainMatch = new ChainMatch(CHAIN_MATCH_DEFAULTS, {
    mismatch: (m) =>
      log.error(describeMismatch(m), m.check === 'chain_id' ? { streamChainId: Number(m.streamChainId), nodeChainId: Number(m.nodeChainId) } : { streamBlock: m.streamBlock, nodeHead: m.nodeHead }),
    flashblock: (check) => metrics.chainMismatches[check].inc(),
  });
  const pipeline = new IngestPipeline(
    state,
    {
      maxFrameBytes: config.maxFrameBytes,
      gapWindowFrames: config.gapWindowFrames,
      gapTimeoutMs: config.gapTimeoutMs,
      recoveryWorker,
      blockTimeMs: timing.blockTimeMs,
      maxAheadMs: config.maxAheadMs,
      chainMatch,
      dialect: choicePreset(chain)?.dialect ?? 'op-rbuilder',
      // A read waiting for execution holds a dropped block's views at most this long (with a margin).
      layoutGraceMs: Math.max(2000, 2 * config.executionWaitMs),
    },
    log,
    metricsObserver(metrics, timing),
  );
  const events = pipeline.events;
  // The stream's cadence against the timing run under: a warning when a contradiction starts, a line when it ends.
  const cadence = new CadenceJudge(cadenceExpectation(chain, timing, config));
  events.onApplied((block, fb) => {
    const v = cadence.flashblock(block.number, fb.index, block.base.timestamp);
    if (v === null) return;
    if (v.kind === 'contradicted') log.warn(v.message, { checks: v.checks, blockTimeMs: v.observedBlockTimeMs, flashblocksPerBlock: v.observedPerBlock });
    else log.info(v.message);
    for (const c of CADENCE_CHECKS) metrics.streamCadenceMismatch[c].set(cadence.mismatches.includes(c) ? 1 : 0);
  });
  // Open gaps (frames held for a missing predecessor) are expired every --tick-interval-ms while there are any; no
  // timer runs otherwise (started by the upstream's frame handler below).
  let gapTicker: NodeJS.Timeout | null = null;
  const stopGapTicker = (): void => {
    if (gapTicker !== null) clearInterval(gapTicker);
    gapTicker = null;
  };
  const startGapTicker = (): void => {
    gapTicker = setInterval(() => {
      pipeline.tick();
      if (pipeline.bufferedFrames === 0) stopGapTicker();
    }, config.tickIntervalMs);
    gapTicker.unref();
  };
  const node = new NodeClient({
    url: config.nodeRpcUrl,
    timeoutMs: config.nodeTimeoutMs,
    maxSockets: config.nodeMaxSockets,
    maxResponseBytes: config.maxResponseBytes,
    observe: (s, err) => {
      metrics.nodeSeconds.observe(s);
      if (err !== null && err !== 'disabled') metrics.nodeErrors[err].inc();
    },
  });
  // A chain that stopped streaming (retired per its preset, or no frame for --upstream-absent-ms): judged here,
  // said once, and pending answers as latest meanwhile.
  const streaming = config.flashblocksEnabled && config.flashblocksUrls.length > 0;
  const watch = streaming ? new RetirementWatch({ preset, absentMs: config.upstreamAbsentMs, backoffMaxMs: config.backoffMaxMs }, Date.now()) : null;
  const pendingUsable = (): boolean =>
    config.flashblocksEnabled && state.pendingBlock() !== null && performance.now() - state.lastAppliedMs < config.pendingMaxAgeMs &&
    (watch === null || watch.retirement === null);

  // Pending execution: the engine (the native core's in-process EVM) executes every applied flashblock (src/exec).
  // Only with an upstream to execute; failures leave pending state reads answering as latest, never stop the daemon.
  const execution =
    wantsExecution
      ? new ExecutionFeed(
          {
            engine: makeEngine(config, log, () => spec),
            runnable: () => specBlocks(spec),
            view: state,
            events,
            senders: pipeline.senders,
            metrics,
            log,
            canonicalHead: async () => Number(await node.call<string>('eth_blockNumber', [])),
          },
          { waitMs: config.executionWaitMs, maxDivergenceRatio: config.executionMaxDivergencePercent / 100 },
        )
      : null;
  // flashblocksd_execution_spec_info: 1 for the spec of the newest executed block (set when it changes).
  if (execution !== null) {
    let shown: string | null = null;
    execution.onExecuted((block) => {
      if (!('specAt' in spec)) return;
      const now = spec.specAt(block.base.timestamp);
      if (now === shown) return;
      if (shown !== null) metrics.executionSpec[shown as ExecutionSpec].set(0);
      metrics.executionSpec[now as ExecutionSpec].set(1);
      shown = now;
    });
  }

  // Shared limits (--redis-url): connection leases and rate quotas in Redis; local limits while it is unreachable.
  const redis = config.redisUrl !== '' ? new RedisLink(config.redisUrl, metrics, log) : null;
  const leases = redis !== null ? new ConnectionLeases(redis, { limit: config.streamMaxPerIp }) : null;
  const quota = config.rateLimitRps > 0 ? new RequestQuota({ rps: config.rateLimitRps }, redis) : null;

  // The raw stream's limits are counted once for the main port and the stream port (and its threads).
  const streamOptions = pick(config, STREAM_SETTINGS) satisfies StreamOptions;
  const app = uWS.App();
  const stream = mountLocalStream(app, { options: streamOptions, events, metrics, log, leases });
  const rpc = mountRpc(app, { options: pick(config, RPC_SETTINGS) satisfies RpcOptions, view: state, senders: pipeline.senders, events, node, metrics, log, pendingUsable, upstreamRetired: () => watch?.retirement != null, execution, quota });

  // Exclusive: uWS sets SO_REUSEPORT by default, so a second daemon on a port already serving would start silently
  // and the kernel would split connections between the two.
  const listenSocket = await new Promise<unknown>((resolve) => listenExclusive(app, config.host, config.port, resolve));
  if (!listenSocket) {
    leases?.close();
    await redis?.close();
    throw new StartupError(StartupCode.PORT_IN_USE, `cannot listen on ${config.host}:${config.port} (in use or not permitted); choose another --port`);
  }
  const rpcPort = uWS.us_socket_local_port(listenSocket as never);

  // --stream-port: the raw stream again on its own port, served by stream threads (or the main thread with 0).
  let streamPort: StreamPort | null = null;
  if (config.streamPort > 0) {
    try {
      streamPort = await startStreamPort(
        { host: config.host, port: config.streamPort, threads: streamThreads, logLevel: config.logLevel, options: streamOptions },
        { uWS, frames: stream.frames, fanout: events.fanout, admission: stream.admission, hub: stream.hub, crashes: metrics.streamThreadCrashes, log },
      );
    } catch (e) {
      uWS.us_listen_socket_close(listenSocket as never);
      await stream.drain(0);
      leases?.close();
      await redis?.close();
      await recoveryWorker?.close().catch(() => undefined);
      throw e;
    }
  }

  // Relay tier: the position of the last applied flashblock, sent on every upstream (re)connect (--upstream-resume).
  let lastBlock = -1;
  let lastIndex = -1;
  if (config.upstreamResume) {
    events.onApplied((block, fb) => {
      lastBlock = block.number;
      lastIndex = fb.index;
    });
  }
  const resumeFrom = (): ResumePosition | null => (lastBlock < 0 ? null : { blockNumber: lastBlock, index: lastIndex });

  const pool =
    config.flashblocksEnabled && config.flashblocksUrls.length > 0
      ? new UpstreamPool(
          {
            urls: [...config.flashblocksUrls],
            pingIntervalMs: config.pingIntervalMs,
            stallTimeoutMs: config.stallTimeoutMs,
            backoffInitialMs: config.backoffInitialMs,
            backoffMaxMs: config.backoffMaxMs,
            healthyResetMs: config.healthyResetMs,
            maxFrameBytes: config.maxFrameBytes,
            connectTimeoutMs: config.connectTimeoutMs,
            ...(config.upstreamResume ? { resumeFrom } : {}),
          },
          {
            onFrame: (f) => {
              // No clock read: the frame's own arrival time, on the wall clock.
              const change = watch!.frame(performance.timeOrigin + f.receivedAtMs);
              if (change !== null) onRetirement(change);
              pipeline.handleFrame(f);
              if (gapTicker === null && !stopped && pipeline.bufferedFrames > 0) startGapTicker();
            },
            onEvent: (e) => observeUpstreamEvent(metrics, e),
          },
          log,
        )
      : null;

  function onRetirement(c: RetirementChange): void {
    if (c === null) return;
    if (c.kind === 'entered') {
      const r = c.retirement;
      log.warn(r.message, { reason: r.reason, since: new Date(r.sinceUnixMs).toISOString() });
      metrics.upstreamRetired[r.reason].set(1);
      pool?.settleAtCap(true);
    } else {
      log.info(`flashblocks arrive again (after ${c.after.reason}): pending is served from the stream, reconnects back to the usual backoff`);
      metrics.upstreamRetired[c.after.reason].set(0);
      pool?.settleAtCap(false);
    }
  }
  // Judged before the first connect, so a retired chain's reconnects start at the cap.
  if (watch !== null) onRetirement(watch.check(Date.now()));

  const tracker = new CanonicalTracker(
    node,
    {
      settle: (n, hashes) => {
        pipeline.settle(n, hashes);
        metrics.canonicalBlock.set(n);
      },
      holds: (n) => state.block(n) !== undefined,
      canonical: () => state.canonical,
      rewind: (from, to) => {
        const dropped = pipeline.rewind(to);
        metrics.nodeHeadRewinds.inc();
        metrics.canonicalBlock.set(to);
        log.warn(
          `node head went back from ${from} to ${to} and stayed there: the node was reset or restored from a snapshot, or another node answers at its URL. ` +
            `The ${dropped} pending blocks held belong to a chain the node no longer has: dropped; following the node from ${to} (the stream's flashblocks above it apply again, execution starts over there)`,
          { from, to, dropped },
        );
        execution?.rebase(to);
        askChainId();
      },
      reachable: (downMs, head) => {
        if (downMs !== null) log.info(`node reachable again after ${(downMs / 1000).toFixed(1)} s (head ${head})`, { head, downMs: Math.round(downMs) });
        // First answer, or back after an outage: (re)learn its chain; restart a waiting engine at once.
        if (config.flashblocksEnabled || wantsExecution) askChainId();
        execution?.startNow();
      },
      unreachable: (error) => {
        log.warn(`node unreachable: ${error}; canonical reads and forwarded methods fail until it answers, pending state keeps serving from flashblocks while they stay fresh`, { error });
      },
    },
    { pollMs: config.canonicalPollMs, wsUrl: config.nodeWsUrl, maxCatchUpBlocks: config.maxPendingBlocks, wsConnectTimeoutMs: config.canonicalWsConnectTimeoutMs, wsRetryInitialMs: config.canonicalWsRetryInitialMs, wsRetryMaxMs: config.canonicalWsRetryMaxMs, rewindConfirmMs: Math.max(2000, timing.blockTimeMs) },
    log,
  );

  // The node's chain id, asked when it answers (retried every few seconds until then), after its head went back, and
  // once a minute (another node may answer at the URL without an outage): checked against the stream's, and, with
  // --chain auto, the chain the daemon runs for (timing, dialect, retirement, execution spec).
  let stopped = false;
  let chainIdTimer: NodeJS.Timeout | null = null;
  let asking = false;
  const askChainId = (): void => {
    if (chainIdTimer !== null) clearTimeout(chainIdTimer);
    chainIdTimer = null;
    if (asking || stopped) return;
    asking = true;
    node.call<string>('eth_chainId', []).then(
      (id) => {
        asking = false;
        chainMatch.setNodeChainId(BigInt(id));
        if (config.chain === 'auto') void learnChain(Number.parseInt(id, 16));
        if (stopped) return;
        chainIdTimer = setTimeout(askChainId, CHAIN_ID_RECHECK_MS);
        chainIdTimer.unref();
      },
      () => {
        asking = false;
        if (stopped) return;
        chainIdTimer = setTimeout(askChainId, 3000);
        chainIdTimer.unref();
      },
    );
  };

  /** The node's chain id answered `id`: when it is not the chain run for so far, the daemon runs for it from now on. */
  const learnChain = async (id: number): Promise<void> => {
    if (!Number.isSafeInteger(id) || stopped) return;
    const known = chain.kind === 'node' ? chain.preset.chainId : chain.kind === 'unknown' ? chain.chainId : null;
    if (known === id) return;
    const p = presetByChainId(id);
    const next: ChainChoice = p === null ? { kind: 'unknown', chainId: id } : { kind: 'node', preset: p };
    const nextTiming = chainTiming(p, { blockTimeMs: config.blockTimeMs, flashblockIntervalMs: config.flashblockIntervalMs });
    if (nextTiming.flashblockIntervalMs > nextTiming.blockTimeMs) {
      log.error(`chain ${id}: --flashblock-interval-ms (${nextTiming.flashblockIntervalMs}) is longer than its block time (${nextTiming.blockTimeMs} ms); keeping the timing in use`, { chainId: id });
      return;
    }
    const nextSpec = await chooseSpec(config, next, wantsExecution);
    if (stopped) return;
    const changed = known !== null;
    chain = next;
    spec = nextSpec;
    Object.assign(timing, nextTiming);
    pipeline.setChain({ blockTimeMs: timing.blockTimeMs, dialect: p?.dialect ?? 'op-rbuilder' });
    metrics.setFlashblockInterval(timing.flashblockIntervalMs);
    watch?.setPreset(p);
    cadence.setExpectation(cadenceExpectation(chain, timing, config));
    for (const c of CADENCE_CHECKS) metrics.streamCadenceMismatch[c].set(0);
    if (changed) log.warn(`the node's chain changed from ${known} to ${id}: the daemon runs for the new chain from now on`, { from: known, to: id });
    logChain(log, chain, timing, spec);
    if (execution === null) return;
    if (changed) execution.rebase(Math.max(tracker.head, state.canonical));
    else execution.startNow();
  };

  const mismatchNow = (): string | null => {
    const m = config.flashblocksEnabled ? chainMatch.mismatch() : null;
    return m === null ? null : describeMismatch(m);
  };

  const health = (): HealthReport => {
    const now = performance.now();
    return healthReport({
      flashblocksEnabled: config.flashblocksEnabled,
      upstreamUrls: config.flashblocksUrls.length,
      upstreamConnected: pool?.connectedCount() ?? 0,
      pendingAgeMs: state.lastAppliedMs === 0 ? null : Math.round(now - state.lastAppliedMs),
      readyMaxAgeMs: config.readyMaxAgeMs,
      nodeEnabled: node.enabled,
      nodeOkAgeMs: tracker.lastOkMs > 0 ? now - tracker.lastOkMs : null,
      canonicalPollMs: config.canonicalPollMs,
      nodeHead: tracker.head,
      chainMismatch: mismatchNow(),
      chainNotKnown: chain.kind === 'unavailable' && config.chain === 'auto' && node.enabled ? chain.detail : null,
      ...(execution === null ? {} : { execution: executionHealth(execution) }),
      ...(watch?.retirement == null ? {} : { retirement: { reason: watch.retirement.reason, message: watch.retirement.message } }),
    });
  };

  let metricsServer: MetricsServer;
  try {
    metricsServer = await startMetricsServer({ host: config.host, port: config.metricsPort, metrics, health }, log);
  } catch (e) {
    uWS.us_listen_socket_close(listenSocket as never);
    await streamPort?.stop(0);
    leases?.close();
    await redis?.close();
    throw new StartupError(StartupCode.PORT_IN_USE, (e as Error).message);
  }

  // No timer wakes an idle daemon more than a few times a second (each JS wake-up costs ~0.2 ms of CPU on a small VM):
  // open gaps are expired every tick only while frames wait for a predecessor, retirement is judged once a second.
  // A short --upstream-absent-ms is judged within a tenth of it.
  const absentCheckMs = config.upstreamAbsentMs > 0 ? config.upstreamAbsentMs / 10 : RETIREMENT_CHECK_MS;
  const retirementCheckMs = Math.max(config.tickIntervalMs, Math.min(RETIREMENT_CHECK_MS, absentCheckMs));
  const retirementTicker = watch === null ? null : setInterval(() => onRetirement(watch.check(Date.now())), retirementCheckMs);
  retirementTicker?.unref();
  const mainLoad = mainThreadLoad(metrics.mainLoopDelay);
  const stopWatchingThreads = watchThreads(metrics, { main: mainLoad.sample, recover: () => recoveryWorker?.loopLoad() ?? null, ...streamPort?.loads });
  execution?.start();
  pool?.start();
  tracker.start();

  let stopping: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      if (retirementTicker !== null) clearInterval(retirementTicker);
      stopGapTicker();
      stopped = true;
      if (chainIdTimer !== null) clearTimeout(chainIdTimer);
      stopWatchingThreads();
      mainLoad.stop();
      tracker.stop();
      uWS.us_listen_socket_close(listenSocket as never);
      await Promise.all([rpc.drain(config.shutdownGraceMs), stream.drain(config.shutdownGraceMs), streamPort?.stop(config.shutdownGraceMs)]);
      leases?.close();
      await redis?.close();
      await pool?.stop();
      await execution?.stop();
      await metricsServer.close();
      node.close();
      // Nothing to lose: the worker holds no state, only a batch whose answer is no longer needed.
      await recoveryWorker?.close().catch(() => undefined);
    })();
    return stopping;
  };

  return { rpcPort, streamPort: streamPort?.port ?? 0, metricsPort: metricsServer.port, metrics, view: state, pipeline, native, execution, health, stop };
}
