// Configuration: one defaults table, command-line flags with environment twins, validation once, then frozen.
// Owns parsing and the redacted dump; knows nothing of sockets or state.
import { StartupCode, StartupError } from './errors.js';
import { redactUrl } from './log.js';

type Kind = 'string' | 'urls' | 'bool' | 'int' | 'list' | 'level';

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
  /** ws/wss or http/https for url kinds. */
  schemes?: string[];
  secret?: boolean;
}

/** The frozen configuration every module receives. Units are in the names. */
export interface Config {
  flashblocksUrls: string[];
  flashblocksEnabled: boolean;
  nodeRpcUrl: string;
  nodeWsUrl: string;
  host: string;
  port: number;
  metricsPort: number;
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  pingIntervalMs: number;
  stallTimeoutMs: number;
  backoffInitialMs: number;
  backoffMaxMs: number;
  healthyResetMs: number;
  connectTimeoutMs: number;
  maxFrameBytes: number;
  gapWindowFrames: number;
  gapTimeoutMs: number;
  maxPendingBlocks: number;
  pendingMaxAgeMs: number;
  canonicalPollMs: number;
  maxBodyBytes: number;
  maxBatchItems: number;
  maxResponseBytes: number;
  nodeTimeoutMs: number;
  nodeMaxSockets: number;
  allowNamespaces: string[];
  forwardMethods: string[];
  corsOrigins: string[];
  sendRawSyncTimeoutMs: number;
  streamMaxBackpressureBytes: number;
  streamMaxSubscribers: number;
  streamMaxPerIp: number;
  streamIdleTimeoutS: number;
  apiKeys: string[];
  trustedProxies: string[];
  replayRingFrames: number;
  shutdownGraceMs: number;
  blockTimeMs: number;
  readyMaxAgeMs: number;
}

const MiB = 1024 * 1024;

/** The defaults table: every setting, its flag, its environment twin (derived), its default and its meaning. */
export const SETTINGS: readonly Setting[] = [
  { flag: 'flashblocks-url', key: 'flashblocksUrls', kind: 'urls', def: '', schemes: ['ws:', 'wss:'], secret: true, help: 'Upstream flashblocks WebSocket URL(s), comma-separated; all are used at once (hedged)' },
  { flag: 'flashblocks-enabled', key: 'flashblocksEnabled', kind: 'bool', def: 'true', help: 'false = pure forwarding proxy (no upstream, pending = latest)' },
  { flag: 'node-rpc-url', key: 'nodeRpcUrl', kind: 'urls', def: '', schemes: ['http:', 'https:'], secret: true, help: "The node's HTTP JSON-RPC URL (forwarding, canonical head)" },
  { flag: 'node-ws-url', key: 'nodeWsUrl', kind: 'urls', def: '', schemes: ['ws:', 'wss:'], secret: true, help: "The node's WebSocket URL for newHeads (optional; polling is used without it)" },
  { flag: 'host', key: 'host', kind: 'string', def: '127.0.0.1', help: 'Address to bind the RPC, stream and metrics listeners' },
  { flag: 'port', key: 'port', kind: 'int', def: '8545', min: 0, max: 65535, help: 'HTTP JSON-RPC, WebSocket JSON-RPC and /flashblocks stream port (0 = any free port)' },
  { flag: 'metrics-port', key: 'metricsPort', kind: 'int', def: '9000', min: 0, max: 65535, help: '/metrics, /healthz, /readyz port (0 = any free port)' },
  { flag: 'log-level', key: 'logLevel', kind: 'level', def: 'info', help: 'debug | info | warn | error' },
  { flag: 'ping-interval-ms', key: 'pingIntervalMs', kind: 'int', def: '500', min: 50, max: 60000, help: 'Upstream WebSocket ping interval' },
  { flag: 'stall-timeout-ms', key: 'stallTimeoutMs', kind: 'int', def: '1000', min: 100, max: 600000, help: 'No frame and no pong for this long = stalled upstream; reconnect' },
  { flag: 'backoff-initial-ms', key: 'backoffInitialMs', kind: 'int', def: '100', min: 1, max: 60000, help: 'First reconnect delay (doubles, with jitter)' },
  { flag: 'backoff-max-ms', key: 'backoffMaxMs', kind: 'int', def: '5000', min: 1, max: 600000, help: 'Reconnect delay cap' },
  { flag: 'healthy-reset-ms', key: 'healthyResetMs', kind: 'int', def: '10000', min: 0, max: 3600000, help: 'Connected this long = backoff resets' },
  { flag: 'connect-timeout-ms', key: 'connectTimeoutMs', kind: 'int', def: '3000', min: 100, max: 600000, help: 'Upstream connect timeout' },
  { flag: 'max-frame-bytes', key: 'maxFrameBytes', kind: 'int', def: String(16 * MiB), min: 1024, max: 1024 * MiB, help: 'Largest upstream frame, compressed or decompressed' },
  { flag: 'gap-window-frames', key: 'gapWindowFrames', kind: 'int', def: '16', min: 1, max: 1024, help: 'Out-of-order flashblocks buffered while waiting for a missing one' },
  { flag: 'gap-timeout-ms', key: 'gapTimeoutMs', kind: 'int', def: '1000', min: 10, max: 60000, help: 'How long a gap may stay open before the block is marked broken' },
  { flag: 'max-pending-blocks', key: 'maxPendingBlocks', kind: 'int', def: '8', min: 2, max: 1024, help: 'Pending blocks kept in memory (oldest dropped first)' },
  { flag: 'pending-max-age-ms', key: 'pendingMaxAgeMs', kind: 'int', def: '10000', min: 100, max: 3600000, help: 'Pending state older than this answers as latest (forwarded)' },
  { flag: 'canonical-poll-ms', key: 'canonicalPollMs', kind: 'int', def: '100', min: 10, max: 60000, help: 'Canonical head polling interval when no node WebSocket is configured' },
  { flag: 'max-body-bytes', key: 'maxBodyBytes', kind: 'int', def: String(5 * MiB), min: 1024, max: 1024 * MiB, help: 'Largest JSON-RPC request body (HTTP 413 above)' },
  { flag: 'max-batch-items', key: 'maxBatchItems', kind: 'int', def: '1000', min: 1, max: 100000, help: 'Largest JSON-RPC batch (-32600 above)' },
  { flag: 'max-response-bytes', key: 'maxResponseBytes', kind: 'int', def: String(100 * MiB), min: 1024, max: 4096 * MiB, help: 'Largest JSON-RPC response (-32005 above)' },
  { flag: 'node-timeout-ms', key: 'nodeTimeoutMs', kind: 'int', def: '5000', min: 10, max: 600000, help: 'Per-call timeout for forwarded requests' },
  { flag: 'node-max-sockets', key: 'nodeMaxSockets', kind: 'int', def: '64', min: 1, max: 4096, help: 'Keep-alive connections to the node' },
  { flag: 'allow-namespaces', key: 'allowNamespaces', kind: 'list', def: '', help: 'Whole namespaces to forward beyond the default allow-list (e.g. debug,txpool); same as --forward-methods ns_*' },
  { flag: 'forward-methods', key: 'forwardMethods', kind: 'list', def: '', help: 'Methods to forward beyond the default allow-list of standard read and submit methods: names, ns_* or * (all)' },
  { flag: 'cors-origins', key: 'corsOrigins', kind: 'list', def: '', help: 'CORS allowed origins (comma-separated, * for any); off when empty' },
  { flag: 'send-raw-sync-timeout-ms', key: 'sendRawSyncTimeoutMs', kind: 'int', def: '10000', min: 10, max: 600000, help: 'Default and maximum wait of eth_sendRawTransactionSync' },
  { flag: 'stream-max-backpressure-bytes', key: 'streamMaxBackpressureBytes', kind: 'int', def: String(4 * MiB), min: 1024, max: 1024 * MiB, help: 'Per-subscriber send buffer; a subscriber above it is closed' },
  { flag: 'stream-max-subscribers', key: 'streamMaxSubscribers', kind: 'int', def: '10000', min: 1, max: 1000000, help: 'Global WebSocket connection cap' },
  { flag: 'stream-max-per-ip', key: 'streamMaxPerIp', kind: 'int', def: '100', min: 1, max: 1000000, help: 'WebSocket connections per client IP' },
  { flag: 'stream-idle-timeout-s', key: 'streamIdleTimeoutS', kind: 'int', def: '120', min: 8, max: 960, help: 'WebSocket idle timeout (uWS sends pings before it)' },
  { flag: 'api-keys', key: 'apiKeys', kind: 'list', def: '', secret: true, help: 'Optional API keys for /ws/<key> and /flashblocks/<key>; when set, keyless stream access is refused' },
  { flag: 'trusted-proxies', key: 'trustedProxies', kind: 'list', def: '', help: 'CIDRs whose X-Forwarded-For is honoured' },
  { flag: 'replay-ring-frames', key: 'replayRingFrames', kind: 'int', def: '256', min: 1, max: 100000, help: 'Recent frames kept for replay/resume' },
  { flag: 'block-time-ms', key: 'blockTimeMs', kind: 'int', def: '2000', min: 100, max: 600000, help: 'L2 block time (Base, OP: 2000; Unichain: 1000); used for flashblock lateness' },
  { flag: 'ready-max-age-ms', key: 'readyMaxAgeMs', kind: 'int', def: '2000', min: 100, max: 3600000, help: '/readyz fails when no flashblock was applied for this long' },
  { flag: 'shutdown-grace-ms', key: 'shutdownGraceMs', kind: 'int', def: '5000', min: 0, max: 600000, help: 'In-flight requests get this long after SIGTERM' },
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
    case 'level':
      if (!['debug', 'info', 'warn', 'error'].includes(v)) fail(`${from}: expected debug, info, warn or error, got "${v}"`);
      return v;
    case 'bool':
      if (/^(true|1|yes|on)$/i.test(v)) return true;
      if (/^(false|0|no|off)$/i.test(v)) return false;
      return fail(`${from}: expected true or false, got "${v}"`);
    case 'int': {
      if (!/^\d+$/.test(v)) fail(`${from}: expected a whole number, got "${v}"`);
      const n = Number(v);
      if (s.min !== undefined && n < s.min) fail(`${from}: ${n} is below the minimum ${s.min}`);
      if (s.max !== undefined && n > s.max) fail(`${from}: ${n} is above the maximum ${s.max}`);
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
    lines.push(`  --${s.flag.padEnd(30)} ${envName(s.flag).padEnd(30)} default: ${s.def === '' ? '(none)' : s.def}`);
    lines.push(`      ${s.help}`);
  }
  lines.push(
    '',
    'Subcommands (each has --help):',
    '  flashblocksd setup              ask for the settings (or take them as flags; --yes for defaults), write the',
    '                                  environment file systemd/flashblocksd.service reads, print the install commands.',
    '                                  Exit 0 written, 1 not written (file exists without --force), 2 invalid input.',
    '  flashblocksd verify <rpc-url>   watch pending vs latest and report whether the endpoint serves preconfirmations.',
    '                                  Exit 0 preconfirmations observed, 1 not observed, 2 could not verify. --json.',
    'The daemon itself exits 2 on a start-up error (E_CONFIG, E_NATIVE, E_LISTEN).',
  );
  return lines.join('\n');
}

/**
 * Builds the frozen configuration from flags (highest precedence), then environment, then defaults.
 * Throws StartupError(E_CONFIG) with a message naming the flag/variable and what to fix.
 */
export function loadConfig(argv: readonly string[], env: NodeJS.ProcessEnv): Readonly<Config> {
  const byFlag = new Map(SETTINGS.map((s) => [s.flag, s]));
  const fromFlags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (!arg.startsWith('--')) fail(`unexpected argument "${arg}"; flags look like --port 8545 (see --help)`);
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    const s = byFlag.get(name);
    if (s === undefined) fail(`unknown flag --${name} (see --help)`);
    let value: string;
    if (eq !== -1) value = arg.slice(eq + 1);
    else if (s.kind === 'bool' && (argv[i + 1] === undefined || (argv[i + 1] as string).startsWith('--'))) value = 'true';
    else {
      const next = argv[i + 1];
      if (next === undefined) fail(`--${name} needs a value`);
      value = next;
      i++;
    }
    fromFlags.set(name, value);
  }
  const out: Record<string, unknown> = {};
  for (const s of SETTINGS) {
    const flagVal = fromFlags.get(s.flag);
    const envVal = env[envName(s.flag)];
    if (flagVal !== undefined) out[s.key] = parseValue(s, flagVal, `--${s.flag}`);
    else if (envVal !== undefined && envVal !== '') out[s.key] = parseValue(s, envVal, envName(s.flag));
    else out[s.key] = parseValue(s, s.def, `default of --${s.flag}`);
  }
  const c = out as unknown as Config;
  if (c.backoffMaxMs < c.backoffInitialMs) fail(`--backoff-max-ms (${c.backoffMaxMs}) must be ≥ --backoff-initial-ms (${c.backoffInitialMs})`);
  for (const ns of c.allowNamespaces) {
    if (!/^[A-Za-z][A-Za-z0-9]*$/.test(ns)) fail(`--allow-namespaces: "${ns}" is not a namespace name (letters and digits, e.g. debug, txpool)`);
  }
  for (const m of c.forwardMethods) {
    if (m !== '*' && !/^[A-Za-z][A-Za-z0-9]*_(\*|[A-Za-z0-9_]+)$/.test(m)) fail(`--forward-methods: "${m}" is not a method name (eth_sendTransaction), a namespace pattern (debug_*) or *`);
  }
  for (const cidr of c.trustedProxies) {
    if (!/^[0-9a-fA-F.:]+(\/\d{1,3})?$/.test(cidr)) fail(`--trusted-proxies: "${cidr}" is not an IP or CIDR (e.g. 10.0.0.0/8)`);
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
