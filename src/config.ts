// Configuration: one defaults table, command-line flags with environment twins, validation once, then frozen.
// Owns parsing and the redacted dump; knows nothing of sockets or state.
import { isIP } from 'node:net';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { StartupCode, StartupError } from './errors.js';
import { redactUrl, type LogLevel } from './log.js';

type Kind = 'string' | 'urls' | 'bool' | 'int' | 'list' | 'enum';

interface Setting {
  /** Flag name without dashes; the environment twin is its upper snake case. */
  flag: string;
  key: keyof Config;
  kind: Kind;
  def: string;
  help: string;
  /** Inclusive bounds for ints. */
  min?: number;
  max?: number;
  /** The allowed values of an enum (anything else is E_CONFIG, listing them); --help shows them. */
  values?: readonly string[];
  /** ws/wss or http/https for url kinds. */
  schemes?: string[];
  secret?: boolean;
  /** How a computed default is derived (shown after it in --help). */
  defNote?: string;
}

/** The frozen configuration every module receives. Units are in the names. */
export interface Config {
  flashblocksUrls: string[];
  flashblocksEnabled: boolean;
  upstreamResume: boolean;
  nodeRpcUrl: string;
  nodeWsUrl: string;
  host: string;
  port: number;
  metricsPort: number;
  logLevel: LogLevel;
  pingIntervalMs: number;
  stallTimeoutMs: number;
  backoffInitialMs: number;
  backoffMaxMs: number;
  healthyResetMs: number;
  connectTimeoutMs: number;
  maxFrameBytes: number;
  gapWindowFrames: number;
  gapTimeoutMs: number;
  maxAheadMs: number;
  maxPendingBlocks: number;
  pendingMaxAgeMs: number;
  canonicalPollMs: number;
  canonicalWsConnectTimeoutMs: number;
  canonicalWsRetryInitialMs: number;
  canonicalWsRetryMaxMs: number;
  tickIntervalMs: number;
  maxBodyBytes: number;
  maxBatchItems: number;
  maxResponseBytes: number;
  nodeTimeoutMs: number;
  nodeMaxSockets: number;
  allowNamespaces: string[];
  forwardMethods: string[];
  corsOrigins: string[];
  sendRawSyncTimeoutMs: number;
  traceTimeoutMs: number;
  maxTracesInFlight: number;
  pinWaitMs: number;
  pinMaxWaiters: number;
  streamMaxBackpressureBytes: number;
  streamMaxSubscribers: number;
  streamMaxPerIp: number;
  streamPort: number;
  streamThreads: number;
  maxSubscriptionsPerConnection: number;
  streamIdleTimeoutS: number;
  apiKeys: string[];
  trustedProxies: string[];
  redisUrl: string;
  rateLimitRps: number;
  replayRingFrames: number;
  shutdownGraceMs: number;
  heapGrowingPercent: number;
  /** 0 = the chain preset's (2000 without one). */
  blockTimeMs: number;
  /** 0 = the chain preset's (200 without one). */
  flashblockIntervalMs: number;
  /** auto (by the node's chain id) or a preset name (src/chain/presets.ts). */
  chain: string;
  /** An upstream silent or refusing this long = flashblocks gone; 0 = never conclude it. */
  upstreamAbsentMs: number;
  readyMaxAgeMs: number;
  execution: boolean;
  executionCacheMb: number;
  /** A pending read answerable from memory within this many µs runs on the RPC thread; 0 = always on read threads. */
  executionInlineReadUs: number;
  executionReadMemo: number;
  /** The longest a pending read may take on the engine's read threads (its wait included); past it: a timeout error. */
  executionReadTimeoutMs: number;
  executionHardfork: ExecutionHardfork;
  executionWaitMs: number;
  /** Above this share (percent) of diverging flashblocks among the last 100 executed, no executed state is served. */
  executionMaxDivergencePercent: number;
}

const MiB = 1024 * 1024;

/** --log-level values, most verbose first. */
export const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

/**
 * OP hardforks in activation order: a fixed spec for every block when --execution-hardfork names one (the same list as
 * OP_FORKS in src/chain/presets.ts; config stays a leaf, test/chain/presets.test.ts keeps the two equal).
 */
export const OP_HARDFORKS = ['bedrock', 'regolith', 'canyon', 'ecotone', 'fjord', 'granite', 'holocene', 'isthmus', 'jovian', 'karst'] as const;
export type OpHardfork = (typeof OP_HARDFORKS)[number];
/** --execution-hardfork: `auto` (the chain's own schedule by block timestamp) or one fixed hardfork. */
export type ExecutionHardfork = 'auto' | OpHardfork;

/** Stream threads by default: one core stays with the main thread (RPC, ingest), at most 4, at least 1. */
export function defaultStreamThreads(): number {
  return Math.min(4, Math.max(1, os.availableParallelism() - 1));
}

/** The defaults table: every setting, its flag, its environment twin (derived), its default and its meaning. */
export const SETTINGS: readonly Setting[] = [
  { flag: 'flashblocks-url', key: 'flashblocksUrls', kind: 'urls', def: '', schemes: ['ws:', 'wss:'], secret: true, help: 'Upstream flashblocks WebSocket URL(s), comma-separated; all are used at once (hedged)' },
  { flag: 'flashblocks-enabled', key: 'flashblocksEnabled', kind: 'bool', def: 'true', help: 'false = pure forwarding proxy (no upstream, pending = latest)' },
  { flag: 'upstream-resume', key: 'upstreamResume', kind: 'bool', def: 'false', help: 'Relay tier: on every (re)connect ask each upstream for the flashblocks after the last one applied (block_number=&index=, as a flashblocksd /flashblocks serves them); a position too old for its replay buffer (close 4000) is dropped and the next connect goes without it' },
  { flag: 'node-rpc-url', key: 'nodeRpcUrl', kind: 'urls', def: '', schemes: ['http:', 'https:'], secret: true, help: "The node's HTTP JSON-RPC URL (forwarding, canonical head)" },
  { flag: 'node-ws-url', key: 'nodeWsUrl', kind: 'urls', def: '', schemes: ['ws:', 'wss:'], secret: true, help: "The node's WebSocket URL for newHeads (optional; polling is used without it)" },
  { flag: 'host', key: 'host', kind: 'string', def: '127.0.0.1', help: 'Address to bind the RPC, stream and metrics listeners' },
  { flag: 'port', key: 'port', kind: 'int', def: '8547', min: 0, max: 65535, help: 'HTTP JSON-RPC, WebSocket JSON-RPC and /flashblocks stream port (0 = any free port)' },
  { flag: 'metrics-port', key: 'metricsPort', kind: 'int', def: '9464', min: 0, max: 65535, help: '/metrics, /healthz, /readyz port (0 = any free port)' },
  { flag: 'log-level', key: 'logLevel', kind: 'enum', values: LOG_LEVELS, def: 'info', help: 'Least severe log line written (debug is per flashblock)' },
  { flag: 'ping-interval-ms', key: 'pingIntervalMs', kind: 'int', def: '500', min: 50, max: 60000, help: 'Upstream WebSocket ping interval' },
  { flag: 'stall-timeout-ms', key: 'stallTimeoutMs', kind: 'int', def: '1000', min: 100, max: 600000, help: 'No frame and no pong for this long = stalled upstream; reconnect' },
  { flag: 'backoff-initial-ms', key: 'backoffInitialMs', kind: 'int', def: '100', min: 1, max: 60000, help: 'First reconnect delay (doubles, with jitter)' },
  { flag: 'backoff-max-ms', key: 'backoffMaxMs', kind: 'int', def: '5000', min: 1, max: 600000, help: 'Reconnect delay cap, for an upstream still failing after 30 attempts in a row (the first 30 wait at most 500 ms)' },
  { flag: 'healthy-reset-ms', key: 'healthyResetMs', kind: 'int', def: '10000', min: 0, max: 3600000, help: 'Connected this long (or the first frame received) = backoff resets' },
  { flag: 'connect-timeout-ms', key: 'connectTimeoutMs', kind: 'int', def: '3000', min: 100, max: 600000, help: 'Upstream connect timeout' },
  { flag: 'max-frame-bytes', key: 'maxFrameBytes', kind: 'int', def: String(16 * MiB), min: 1024, max: 1024 * MiB, help: 'Largest upstream frame, compressed or decompressed' },
  { flag: 'gap-window-frames', key: 'gapWindowFrames', kind: 'int', def: '16', min: 1, max: 1024, help: 'Out-of-order flashblocks buffered while waiting for a missing one' },
  { flag: 'gap-timeout-ms', key: 'gapTimeoutMs', kind: 'int', def: '1000', min: 10, max: 60000, help: 'How long a gap may stay open before the block is marked broken' },
  { flag: 'max-ahead-ms', key: 'maxAheadMs', kind: 'int', def: '20000', min: 0, max: 3600000, help: 'A flashblock further ahead of the canonical head than one block plus this (in block times, counted from when that head was seen) is refused; 0 = no bound' },
  { flag: 'max-pending-blocks', key: 'maxPendingBlocks', kind: 'int', def: '8', min: 2, max: 1024, help: 'Pending blocks kept in memory (oldest dropped first)' },
  { flag: 'pending-max-age-ms', key: 'pendingMaxAgeMs', kind: 'int', def: '10000', min: 100, max: 3600000, help: 'Pending state older than this answers as latest (forwarded)' },
  { flag: 'canonical-poll-ms', key: 'canonicalPollMs', kind: 'int', def: '100', min: 10, max: 60000, help: 'Canonical head polling interval when no node WebSocket is configured' },
  { flag: 'canonical-ws-connect-timeout-ms', key: 'canonicalWsConnectTimeoutMs', kind: 'int', def: '3000', min: 100, max: 600000, help: "Connect timeout of the node's newHeads WebSocket" },
  { flag: 'canonical-ws-retry-initial-ms', key: 'canonicalWsRetryInitialMs', kind: 'int', def: '500', min: 1, max: 600000, help: 'First reconnect delay of the newHeads WebSocket (doubles; polling continues meanwhile)' },
  { flag: 'canonical-ws-retry-max-ms', key: 'canonicalWsRetryMaxMs', kind: 'int', def: '10000', min: 1, max: 3600000, help: 'Reconnect delay cap of the newHeads WebSocket' },
  { flag: 'tick-interval-ms', key: 'tickIntervalMs', kind: 'int', def: '50', min: 5, max: 10000, help: 'How often open gaps are expired while frames wait for a missing predecessor (no timer runs otherwise)' },
  { flag: 'max-body-bytes', key: 'maxBodyBytes', kind: 'int', def: String(5 * MiB), min: 1024, max: 1024 * MiB, help: 'Largest JSON-RPC request body (HTTP 413 above)' },
  { flag: 'max-batch-items', key: 'maxBatchItems', kind: 'int', def: '1000', min: 1, max: 100000, help: 'Largest JSON-RPC batch (-32600 above)' },
  { flag: 'max-response-bytes', key: 'maxResponseBytes', kind: 'int', def: String(100 * MiB), min: 1024, max: 4096 * MiB, help: 'Largest JSON-RPC response (-32005 above)' },
  { flag: 'node-timeout-ms', key: 'nodeTimeoutMs', kind: 'int', def: '5000', min: 10, max: 600000, help: 'Per-call timeout for forwarded requests' },
  { flag: 'node-max-sockets', key: 'nodeMaxSockets', kind: 'int', def: '64', min: 1, max: 4096, help: 'Keep-alive connections to the node' },
  { flag: 'allow-namespaces', key: 'allowNamespaces', kind: 'list', def: '', help: 'Whole namespaces to forward beyond the default allow-list (e.g. debug,txpool); same as --forward-methods ns_*' },
  { flag: 'forward-methods', key: 'forwardMethods', kind: 'list', def: '', help: 'Methods to forward beyond the default allow-list of standard read and submit methods: names, ns_* or * (all)' },
  { flag: 'cors-origins', key: 'corsOrigins', kind: 'list', def: '', help: 'CORS allowed origins (comma-separated, * for any); off when empty' },
  { flag: 'send-raw-sync-timeout-ms', key: 'sendRawSyncTimeoutMs', kind: 'int', def: '10000', min: 10, max: 600000, help: 'Default and maximum wait of eth_sendRawTransactionSync' },
  { flag: 'pin-wait-ms', key: 'pinWaitMs', kind: 'int', def: '1000', min: 0, max: 60000, help: 'How long an HTTP request whose X-Flashblock-Min is not applied yet waits for it before the -32000 "flashblock not yet applied" error (0 = answer the error at once)' },
  { flag: 'pin-max-waiters', key: 'pinMaxWaiters', kind: 'int', def: '10000', min: 1, max: 1000000, help: 'HTTP requests that may wait for their X-Flashblock-Min at once; beyond it they get the -32000 error without waiting' },
  { flag: 'stream-max-backpressure-bytes', key: 'streamMaxBackpressureBytes', kind: 'int', def: String(4 * MiB), min: 1024, max: 1024 * MiB, help: 'Per-subscriber send buffer; a subscriber above it is closed at once, its buffered frames dropped (it sees 1006)' },
  { flag: 'stream-max-subscribers', key: 'streamMaxSubscribers', kind: 'int', def: '10000', min: 1, max: 1000000, help: 'Global WebSocket connection cap' },
  { flag: 'stream-max-per-ip', key: 'streamMaxPerIp', kind: 'int', def: '100', min: 1, max: 1000000, help: 'WebSocket connections per client IP' },
  { flag: 'max-subscriptions-per-connection', key: 'maxSubscriptionsPerConnection', kind: 'int', def: '100', min: 1, max: 100000, help: 'eth_subscribe subscriptions one WebSocket connection may hold (-32005 above)' },
  { flag: 'stream-port', key: 'streamPort', kind: 'int', def: '0', min: 0, max: 65535, help: 'A second port serving only the raw stream (/flashblocks, /ws, with replay, resume, brotli, API keys and the same limits, counted together with --port) on --stream-threads worker threads, so that fan-out to many subscribers never competes with RPC answers for the main thread; 0 = off (the stream is served on --port only)' },
  { flag: 'stream-threads', key: 'streamThreads', kind: 'int', def: String(defaultStreamThreads()), defNote: 'cores − 1, 1–4', min: 0, max: 64, help: 'Worker threads serving --stream-port, each with its own listener on it (the kernel spreads connections); 0 = the main thread serves --stream-port too' },
  { flag: 'stream-idle-timeout-s', key: 'streamIdleTimeoutS', kind: 'int', def: '120', min: 8, max: 960, help: 'WebSocket idle timeout (uWS sends pings before it)' },
  { flag: 'api-keys', key: 'apiKeys', kind: 'list', def: '', secret: true, help: 'Optional API keys for /ws/<key> and /flashblocks/<key>; when set, keyless stream access is refused' },
  { flag: 'trusted-proxies', key: 'trustedProxies', kind: 'list', def: '', help: 'CIDRs whose X-Forwarded-For is honoured' },
  { flag: 'redis-url', key: 'redisUrl', kind: 'urls', def: '', schemes: ['redis:', 'rediss:'], secret: true, help: 'Redis shared by several instances (redis[s]://[user:password@]host:port[/db]): --stream-max-per-ip and the per-API-key connection limit, and --rate-limit-rps, then hold across all of them; off when empty. Redis unreachable = local limits until it returns' },
  { flag: 'rate-limit-rps', key: 'rateLimitRps', kind: 'int', def: '0', min: 0, max: 10000000, help: 'JSON-RPC requests per second per client IP and per API key (HTTP requests and WebSocket messages; HTTP 429 / -32005 above); shared through --redis-url when set; 0 = no quota' },
  { flag: 'replay-ring-frames', key: 'replayRingFrames', kind: 'int', def: '256', min: 1, max: 100000, help: 'Recent frames kept for replay/resume' },
  { flag: 'chain', key: 'chain', kind: 'string', def: 'auto', help: "The chain's preset (block time, flashblock interval, forks, whether it still streams): auto = by the node's eth_chainId, or one of op-mainnet, op-sepolia, unichain, unichain-sepolia, xlayer, xlayer-testnet, base, base-sepolia, devnet" },
  { flag: 'block-time-ms', key: 'blockTimeMs', kind: 'int', def: '0', min: 0, max: 600000, help: "L2 block time (OP: 2000; Unichain, X Layer: 1000); used for flashblock lateness; 0 = the chain preset's (2000 without one)" },
  { flag: 'flashblock-interval-ms', key: 'flashblockIntervalMs', kind: 'int', def: '0', min: 0, max: 60000, help: "Flashblock interval (200 on every chain that streams today); the lateness and interval budgets; 0 = the chain preset's (200 without one)" },
  { flag: 'upstream-absent-ms', key: 'upstreamAbsentMs', kind: 'int', def: '600000', min: 0, max: 86400000, help: 'An upstream refusing or silent this long means the chain stopped streaming: said once in the log, in /readyz and flashblocksd_upstream_retired, pending answers as latest, reconnects wait --backoff-max-ms; 0 = never conclude it' },
  { flag: 'ready-max-age-ms', key: 'readyMaxAgeMs', kind: 'int', def: '2000', min: 100, max: 3600000, help: '/readyz fails when no flashblock was applied for this long' },
  { flag: 'execution', key: 'execution', kind: 'bool', def: 'true', help: 'Execute every flashblock in the native engine (op-revm, in process), so pending state reads (eth_call, eth_getCode, …) answer from executed state; false = they answer as latest' },
  { flag: 'execution-cache-mb', key: 'executionCacheMb', kind: 'int', def: '512', min: 16, max: 65536, help: 'Bound of the native engine\'s cache of the node\'s state, MiB (dropped and read again above it)' },
  { flag: 'execution-inline-read-us', key: 'executionInlineReadUs', kind: 'int', def: '500', min: 0, max: 100000, help: 'A pending eth_call or state read that the engine can answer from memory within this many µs runs at once on the RPC thread (no thread hop); longer ones, ones needing the node, and all but the first of the reads handled in one turn of the event loop go to the engine\'s read threads; 0 = always the read threads' },
  { flag: 'execution-read-timeout-ms', key: 'executionReadTimeoutMs', kind: 'int', def: '5000', min: 10, max: 600000, help: "The longest a pending eth_call, eth_estimateGas, eth_createAccessList or eth_simulateV1 may take on the engine's read threads, its wait for a thread included (geth's --rpc.evmtimeout); past it no further EVM run or node read starts and the request answers -32000 'execution aborted (timeout = …)'" },
  { flag: 'execution-read-memo', key: 'executionReadMemo', kind: 'int', def: '1024', min: 0, max: 1000000, help: 'Distinct pending reads (eth_call, eth_getCode, …, same parameters) whose answers are kept until the next executed flashblock, so the same read asked again is not executed again; 0 = none' },
  { flag: 'execution-hardfork', key: 'executionHardfork', kind: 'enum', values: ['auto', ...OP_HARDFORKS], def: 'auto', help: "The EVM spec blocks are executed with: auto = the chain's own hardfork schedule by block timestamp (from its chain preset; a chain without one runs the fork the node's eth_config names, else no execution); a hardfork name = that spec for every block" },
  { flag: 'execution-wait-ms', key: 'executionWaitMs', kind: 'int', def: '1000', min: 0, max: 60000, help: 'How long a pending state read waits for the engine to execute the newest served flashblock before it answers as latest' },
  { flag: 'trace-timeout-ms', key: 'traceTimeoutMs', kind: 'int', def: '5000', min: 10, max: 600000, help: "Default and largest per-call time of a trace at pending (debug_trace*, trace_*; a request's geth `timeout` may ask for less); past it the trace answers 'execution timeout'" },
  { flag: 'max-traces-in-flight', key: 'maxTracesInFlight', kind: 'int', def: '4', min: 1, max: 1024, help: 'Traces at pending run at once at most (on the engine\'s read threads); one more is refused at once with -32005' },
  { flag: 'execution-max-divergence-percent', key: 'executionMaxDivergencePercent', kind: 'int', def: '25', min: 0, max: 100, help: 'Above this share of the last 100 executed flashblocks disagreeing with the builder or the chain (a wrong fork, an engine bug), pending state reads answer as latest and /readyz reports execution not ready; 100 = never' },
  { flag: 'shutdown-grace-ms', key: 'shutdownGraceMs', kind: 'int', def: '5000', min: 0, max: 600000, help: 'In-flight requests get this long after SIGTERM' },
  { flag: 'heap-growing-percent', key: 'heapGrowingPercent', kind: 'int', def: '300', min: 0, max: 1000, help: "How far V8 lets the JS heap grow past what survived its last full collection before the next one, %: held blocks are promoted and freed block after block, and at V8's own setting that is a full collection every few seconds (pauses in the latency tail); 300 = one every ~25 s for a heap ~2× larger; 0 = V8's own" },
];

/** The environment variable that twins a flag: `--node-rpc-url` → `NODE_RPC_URL`. */
export function envName(flag: string): string {
  return flag.toUpperCase().replace(/-/g, '_');
}

function fail(msg: string): never {
  throw new StartupError(StartupCode.CONFIG_INVALID, msg);
}

function parseValue(s: Setting, raw: string, from: string): unknown {
  const v = raw.trim();
  switch (s.kind) {
    case 'string':
      return v;
    case 'enum':
      if (!(s.values ?? []).includes(v)) fail(`${from}: "${v}" is not one of ${(s.values ?? []).join(', ')}`);
      return v;
    case 'bool':
      if (/^(true|1|yes|on)$/i.test(v)) return true;
      if (/^(false|0|no|off)$/i.test(v)) return false;
      return fail(`${from}: expected true or false, got "${v}"`);
    case 'int': {
      const range = s.min !== undefined && s.max !== undefined ? ` from ${s.min} to ${s.max}` : '';
      if (!/^\d+$/.test(v)) fail(`${from}: expected a whole number${range}, got "${v}"`);
      const n = Number(v);
      if (s.min !== undefined && n < s.min) fail(`${from}: ${n} is below the minimum ${s.min} (valid: ${s.min} to ${s.max})`);
      if (s.max !== undefined && n > s.max) fail(`${from}: ${n} is above the maximum ${s.max} (valid: ${s.min} to ${s.max})`);
      return n;
    }
    case 'list':
      return v === '' ? [] : v.split(',').map((x) => x.trim()).filter((x) => x !== '');
    case 'urls': {
      const list = v === '' ? [] : v.split(',').map((x) => x.trim()).filter((x) => x !== '');
      for (const u of list) {
        let parsed: URL;
        try {
          parsed = new URL(u);
        } catch {
          return fail(`${from}: "${redactUrl(u)}" is not a URL; expected ${s.schemes?.join(' or ')}//host:port/path`);
        }
        if (s.schemes !== undefined && !s.schemes.includes(parsed.protocol)) {
          fail(`${from}: ${redactUrl(u)} must use ${s.schemes.map((x) => x.replace(':', '://')).join(' or ')}`);
        }
      }
      return s.key === 'flashblocksUrls' ? list : (list[0] ?? '');
    }
  }
}

/** The text `--help` prints: every flag, its environment twin, default and meaning. */
export function helpText(): string {
  const lines = ['Usage: flashblocksd [flags]   (every flag also reads from its environment variable)', ''];
  for (const s of SETTINGS) {
    lines.push(`  --${s.flag.padEnd(30)} ${envName(s.flag).padEnd(30)} default: ${s.def === '' ? '(none)' : s.def}${s.defNote === undefined ? '' : ` (${s.defNote})`}`);
    lines.push(`      ${s.help}`);
    if (s.values !== undefined) lines.push(`      one of: ${s.values.join(' | ')}`);
  }
  lines.push(
    '',
    'Subcommands (each has --help):',
    '  flashblocksd setup              ask for the settings (or take them as flags; --yes for defaults), write the',
    '                                  environment file the systemd unit reads, print the install commands.',
    '                                  Exit 0 written, 1 not written (file exists without --force), 2 invalid input.',
    '  flashblocksd unit               print the systemd unit, ExecStart= naming this binary (from a checkout: node and',
    '                                  dist/src/main.js): flashblocksd unit | sudo tee /etc/systemd/system/flashblocksd.service',
    '  flashblocksd verify <rpc-url>   watch pending vs latest and report whether the endpoint serves preconfirmations.',
    '                                  Exit 0 preconfirmations observed, 1 not observed, 2 could not verify. --json.',
    '  flashblocksd check-execution --node-rpc-url URL --blocks N[-M]   re-execute canonical blocks through the engine',
    '                                  and compare receipts root, gas used and logs bloom with the node\'s headers.',
    '                                  Exit 0 all match, 1 a block differs, 2 could not check.',
    'The daemon itself exits 2 on a start-up error (E_CONFIG, E_NATIVE, E_LISTEN).',
  );
  return lines.join('\n');
}

/** Reads `argv` with `util.parseArgs`: `--flag value`, `--flag=value`, and a bare boolean flag meaning true. */
function readFlags(argv: readonly string[]): Map<string, string> {
  const byFlag = new Map(SETTINGS.map((s) => [s.flag, s]));
  // A bare boolean (`--flashblocks-enabled` last or before another flag) means true; parseArgs has no optional values.
  const args: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const next = argv[i + 1];
    args.push(byFlag.get(arg.slice(2))?.kind === 'bool' && arg.startsWith('--') && (next === undefined || next.startsWith('--')) ? `${arg}=true` : arg);
  }
  const options: Record<string, { type: 'string' }> = {};
  for (const s of SETTINGS) options[s.flag] = { type: 'string' };
  // Non-strict so that a value starting with a dash (`--port -1`) reaches validation and gets its own message.
  const { tokens } = parseArgs({ args, options, strict: false, allowPositionals: true, tokens: true });
  const out = new Map<string, string>();
  for (const tok of tokens) {
    if (tok.kind === 'positional') fail(`unexpected argument "${tok.value}"; flags look like --port 8547 (see --help)`);
    if (tok.kind === 'option-terminator') fail('unexpected "--"; flags look like --port 8547 (see --help)');
    if (tok.kind !== 'option') continue;
    if (!byFlag.has(tok.name) || !tok.rawName.startsWith('--')) fail(`unknown flag ${tok.rawName} (see --help)`);
    if (tok.value === undefined || (!tok.inlineValue && tok.value.startsWith('--'))) fail(`--${tok.name} needs a value (see --help)`);
    out.set(tok.name, tok.value);
  }
  return out;
}

/** Whether `v` is an IP address or a DNS host name (not a dotted-number string that only looks like an address). */
function isHost(v: string): boolean {
  if (isIP(v) !== 0) return true;
  return /^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/.test(v) && !/^[\d.]+$/.test(v);
}

/** Why `v` is not a CORS origin entry (`*` or `scheme://host[:port]` as browsers send it), or null. */
function originProblem(v: string): string | null {
  if (v === '*') return null;
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    return `"${v}" is not an origin; expected * or scheme://host[:port], e.g. https://app.example.com`;
  }
  if (u.origin === 'null') return `"${v}" is not an origin; expected * or http(s)://host[:port], e.g. https://app.example.com`;
  if (u.origin !== v) return `"${v}" is not an origin as browsers send it (no path, no trailing slash, lower case); use "${u.origin}"`;
  return null;
}

/**
 * Builds the frozen configuration from flags (highest precedence), then environment, then defaults.
 * Throws StartupError(E_CONFIG) with a message naming the flag/variable and what to fix.
 */
export function loadConfig(argv: readonly string[], env: NodeJS.ProcessEnv): Readonly<Config> {
  const fromFlags = readFlags(argv);
  const out: Record<string, unknown> = {};
  const source = new Map<string, string>();
  for (const s of SETTINGS) {
    const flagVal = fromFlags.get(s.flag);
    const envVal = env[envName(s.flag)];
    if (flagVal !== undefined) source.set(s.flag, `--${s.flag}`);
    else if (envVal !== undefined && envVal !== '') source.set(s.flag, envName(s.flag));
    else source.set(s.flag, `default of --${s.flag}`);
    const from = source.get(s.flag) as string;
    if (flagVal !== undefined) out[s.key] = parseValue(s, flagVal, from);
    else if (envVal !== undefined && envVal !== '') out[s.key] = parseValue(s, envVal, from);
    else out[s.key] = parseValue(s, s.def, from);
  }
  const c = out as unknown as Config;
  const src = (flag: string): string => source.get(flag) as string;
  if (!isHost(c.host)) fail(`${src('host')}: "${c.host}" is not an IP address or host name (e.g. 127.0.0.1, 0.0.0.0, ::)`);
  if (c.backoffMaxMs < c.backoffInitialMs) fail(`--backoff-max-ms (${c.backoffMaxMs}) must be ≥ --backoff-initial-ms (${c.backoffInitialMs})`);
  if (c.canonicalWsRetryMaxMs < c.canonicalWsRetryInitialMs) {
    fail(`--canonical-ws-retry-max-ms (${c.canonicalWsRetryMaxMs}) must be ≥ --canonical-ws-retry-initial-ms (${c.canonicalWsRetryInitialMs})`);
  }
  // The names themselves are checked against src/chain/presets.ts at start-up (config stays a leaf).
  if (!/^[a-z0-9-]+$/i.test(c.chain)) fail(`${src('chain')}: "${c.chain}" is not auto or a chain name (e.g. op-mainnet, unichain, base)`);
  if (c.blockTimeMs !== 0 && c.blockTimeMs < 100) fail(`${src('block-time-ms')}: ${c.blockTimeMs} is below 100 (0 = the chain preset's)`);
  if (c.flashblockIntervalMs !== 0 && c.flashblockIntervalMs < 10) fail(`${src('flashblock-interval-ms')}: ${c.flashblockIntervalMs} is below 10 (0 = the chain preset's)`);
  if (c.blockTimeMs !== 0 && c.flashblockIntervalMs > c.blockTimeMs) fail(`--flashblock-interval-ms (${c.flashblockIntervalMs}) must be ≤ --block-time-ms (${c.blockTimeMs})`);
  for (const ns of c.allowNamespaces) {
    if (!/^[A-Za-z][A-Za-z0-9]*$/.test(ns)) fail(`${src('allow-namespaces')}: "${ns}" is not a namespace name (letters and digits, e.g. debug, txpool)`);
  }
  for (const m of c.forwardMethods) {
    if (m !== '*' && !/^[A-Za-z][A-Za-z0-9]*_(\*|[A-Za-z0-9_]+)$/.test(m)) fail(`${src('forward-methods')}: "${m}" is not a method name (eth_sendTransaction), a namespace pattern (debug_*) or *`);
  }
  for (const o of c.corsOrigins) {
    const why = originProblem(o);
    if (why !== null) fail(`${src('cors-origins')}: ${why}`);
  }
  for (const cidr of c.trustedProxies) {
    if (!/^[0-9a-fA-F.:]+(\/\d{1,3})?$/.test(cidr)) fail(`${src('trusted-proxies')}: "${cidr}" is not an IP or CIDR (e.g. 10.0.0.0/8)`);
  }
  return Object.freeze(Object.assign(c, {
    flashblocksUrls: Object.freeze([...c.flashblocksUrls]),
    allowNamespaces: Object.freeze([...c.allowNamespaces]),
    forwardMethods: Object.freeze([...c.forwardMethods]),
    corsOrigins: Object.freeze([...c.corsOrigins]),
    apiKeys: Object.freeze([...c.apiKeys]),
    trustedProxies: Object.freeze([...c.trustedProxies]),
  })) as Readonly<Config>;
}

/**
 * The checks a configuration must pass to run the daemon (not to validate one setting, as `setup` does): flashblocks
 * need the node beside them (canonical head, forwarding), forwarding needs a node, and the two listeners need two
 * ports. Run after the embedded-devnet decision (no upstream and no node = devnet). Throws StartupError(E_CONFIG)
 * saying what to add.
 */
export function checkRunnable(c: Readonly<Config>): void {
  if (c.flashblocksEnabled && c.flashblocksUrls.length === 0) {
    fail('flashblocks are enabled but no --flashblocks-url / FLASHBLOCKS_URL is set; give one, or set --flashblocks-enabled false');
  }
  if (c.port !== 0 && c.metricsPort === c.port) {
    fail(`--metrics-port: ${c.metricsPort} is also --port (JSON-RPC); give the metrics listener its own port, e.g. ${c.port === 9464 ? 9465 : 9464}`);
  }
  if (c.streamPort !== 0 && (c.streamPort === c.port || c.streamPort === c.metricsPort)) {
    fail(`--stream-port: ${c.streamPort} is also --port or --metrics-port; give the stream its own port`);
  }
  if (c.nodeRpcUrl === '') {
    fail(
      c.flashblocksEnabled
        ? "--flashblocks-url is set but --node-rpc-url / NODE_RPC_URL is not: the daemon needs the node beside it (canonical head, every non-pending call); add --node-rpc-url with the node's http(s) JSON-RPC URL, e.g. --node-rpc-url http://127.0.0.1:8545"
        : "--flashblocks-enabled false forwards everything to the node, but --node-rpc-url / NODE_RPC_URL is not set; add the node's http(s) JSON-RPC URL, e.g. --node-rpc-url http://127.0.0.1:8545",
    );
  }
}

/** The configuration with secrets redacted, for the one start-up log line. */
export function redactedConfig(c: Readonly<Config>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const s of SETTINGS) {
    const v = c[s.key];
    if (s.kind === 'urls') out[s.key] = Array.isArray(v) ? v.map((u: string) => redactUrl(u)) : v === '' ? '' : redactUrl(v as string);
    else if (s.secret === true) out[s.key] = Array.isArray(v) ? `<${v.length} redacted>` : '<redacted>';
    else out[s.key] = v;
  }
  return out;
}
