// Every flashblocksd metric, defined once: names, help, units, buckets, closed label sets, pre-resolved handles.
// A leaf module: it imports nothing of the daemon and decides nothing; callers record, /metrics reads.

import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { Registry, collectDefaultMetrics, type Metric } from 'prom-client';

// ── Closed label sets ──────────────────────────────────────────────────────────────────────────────────────────

export const FRAME_KINDS = ['text', 'binary'] as const;
export type FrameKind = (typeof FRAME_KINDS)[number];

export const DECODE_ERROR_REASONS = ['too_large', 'brotli', 'json', 'schema', 'transaction'] as const;
export type DecodeErrorReason = (typeof DECODE_ERROR_REASONS)[number];

export const SEQUENCE_VERDICTS = [
  'next', 'new_block', 'duplicate', 'gap_buffered', 'gap_filled', 'out_of_order', 'replaced_payload', 'stale',
  'gap_skipped', 'joined_mid_block', 'too_far_ahead', 'abandoned', 'predecessor_missing', 'sequence_discarded',
] as const;
export type SequenceVerdictLabel = (typeof SEQUENCE_VERDICTS)[number];

/** Why flashblocks are considered gone (src/ingest/retirement.ts's RETIRED_REASONS; metrics stays a leaf). */
export const UPSTREAM_RETIRED_REASONS = ['chain_retired', 'upstream_absent'] as const;
export type UpstreamRetiredReason = (typeof UPSTREAM_RETIRED_REASONS)[number];

export const BUDGET_MISS_SOURCES = ['interval', 'timestamp'] as const;
export type BudgetMissSource = (typeof BUDGET_MISS_SOURCES)[number];

/** What the stream's observed cadence can contradict (src/ingest/cadence.ts's CADENCE_CHECKS; metrics stays a leaf). */
export const STREAM_CADENCE_CHECKS = ['block_time', 'flashblocks_per_block'] as const;
export type StreamCadenceCheck = (typeof STREAM_CADENCE_CHECKS)[number];

/** The checks that the node is on the stream's chain (src/ingest/chain-match.ts). */
export const CHAIN_CHECKS = ['chain_id', 'heights'] as const;
export type ChainCheck = (typeof CHAIN_CHECKS)[number];
export const PENDING_FALLBACK_REASONS = ['stale', 'broken', 'disabled', 'no_metadata', 'execution', 'retired', 'diverged'] as const;
export type PendingFallbackReason = (typeof PENDING_FALLBACK_REASONS)[number];

export const EXECUTION_READ_THREADS = ['inline', 'threads', 'memo'] as const;
export type ExecutionReadThread = (typeof EXECUTION_READ_THREADS)[number];
/**
 * Where an executed answer disagreed with the builder or the chain: its diff.receipts_root, a receipt the stream
 * carried, a post-value of the stream's access list (X Layer), or the canonical block's receipts root.
 */
export const EXECUTION_DIVERGENCE_SOURCES = ['receipts_root', 'stream_receipt', 'access_list', 'canonical'] as const;
export type ExecutionDivergenceSource = (typeof EXECUTION_DIVERGENCE_SOURCES)[number];

/**
 * What became of a flashblock of the stream, as pending execution saw it: executed, or why not — the engine's
 * ApplyFailure reasons (src/exec/engine.ts), `block_failed` (an earlier flashblock of its block was not executed, so
 * it was not handed over), `no_parent` (its block became canonical before the engine could start it: joined
 * mid-block, or its parent was not executed), `stopped` (the daemon was stopping: not a failure).
 */
export const EXECUTION_OUTCOMES = [
  'executed', 'engine_down', 'not_next', 'tx_rejected', 'execution_error', 'node_error', 'panic', 'block_failed', 'no_parent', 'stopped',
] as const;
export type ExecutionOutcome = (typeof EXECUTION_OUTCOMES)[number];

/** The spec label of execution_spec_info: the OP forks the engine runs (OP_FORKS in src/chain/presets.ts, kept equal by its test). */
export const EXECUTION_SPECS = ['bedrock', 'regolith', 'canyon', 'ecotone', 'fjord', 'granite', 'holocene', 'isthmus', 'jovian', 'karst'] as const;
export type ExecutionSpec = (typeof EXECUTION_SPECS)[number];

export const RPC_SOURCES = ['state', 'node', 'error'] as const;
export type RpcSource = (typeof RPC_SOURCES)[number];

/** How a request carrying X-Flashblock-Min went: state already there, waited for it, waited in vain, refused
 *  without waiting (too many waiting, or shutting down). */
export const PIN_OUTCOMES = ['immediate', 'waited', 'timeout', 'refused'] as const;
export type PinOutcome = (typeof PIN_OUTCOMES)[number];

export const NODE_ERROR_REASONS = ['timeout', 'connect', 'http', 'rpc'] as const;
export type NodeErrorReason = (typeof NODE_ERROR_REASONS)[number];

export const STREAM_REFUSAL_REASONS = ['global_limit', 'ip_limit', 'bad_key', 'key_limit', 'resume_too_old'] as const;
export type StreamRefusalReason = (typeof STREAM_REFUSAL_REASONS)[number];

/** Which quota refused a request: the client IP's or the API key's (--rate-limit-rps). */
export const RATE_LIMIT_SCOPES = ['ip', 'key'] as const;
export type RateLimitScope = (typeof RATE_LIMIT_SCOPES)[number];

/** eth_subscribe kinds: the standard four, Base's flashblocks kinds, and `other` for anything else. */
export const WS_SUBSCRIPTION_KINDS = [
  'newHeads', 'logs', 'newPendingTransactions', 'syncing', 'newFlashblocks', 'newFlashblockTransactions', 'pendingLogs',
  'other',
] as const;
export type WsSubscriptionKind = (typeof WS_SUBSCRIPTION_KINDS)[number];

/** Polling filters (src/rpc/filters.ts): eth_newFilter, eth_newBlockFilter, eth_newPendingTransactionFilter. */
export const RPC_FILTER_KINDS = ['logs', 'blocks', 'pending_transactions'] as const;
export type RpcFilterKind = (typeof RPC_FILTER_KINDS)[number];

/**
 * What the polling filters dropped: buffer_full = one change (the oldest) out of a filter's full buffer; expired = a
 * filter nobody polled within the idle timeout; limit = an install refused at the per-client or total cap;
 * node_error = a canonical block whose hash or logs the node did not give (its changes are missing).
 */
export const RPC_FILTER_DROP_REASONS = ['buffer_full', 'expired', 'limit', 'node_error'] as const;
/** The traces at pending (src/rpc/methods/trace.ts), their tracers and why one was refused. */
export const TRACE_METHODS = [
  'debug_traceTransaction', 'debug_traceCall', 'debug_traceBlockByNumber', 'debug_traceBlockByHash', 'trace_call', 'trace_callMany',
  'trace_transaction', 'trace_replayTransaction', 'trace_block', 'trace_replayBlockTransactions', 'trace_get',
] as const;
export type TraceMethod = (typeof TRACE_METHODS)[number];
export const TRACE_TRACERS = ['structLogger', 'callTracer', 'prestateTracer', '4byteTracer', 'flatCallTracer', 'muxTracer', 'noopTracer', 'parity'] as const;
export type TraceTracer = (typeof TRACE_TRACERS)[number];
export const TRACE_REFUSALS = ['execution_off', 'not_executed', 'diverged', 'not_held', 'timeout', 'too_large', 'busy', 'unsupported_tracer', 'not_pending_not_allowed'] as const;
export type TraceRefusal = (typeof TRACE_REFUSALS)[number];
export type RpcFilterDropReason = (typeof RPC_FILTER_DROP_REASONS)[number];

/**
 * Every RPC method name that gets its own `method` label: the spec's methods, every eth_/net_/web3_ method of the
 * execution-apis OpenRPC document, and the submission/subscription methods. Anything else is labelled `other`.
 */
export const RPC_METHOD_LABELS = [
  'eth_accounts', 'eth_baseFee', 'eth_blobBaseFee', 'eth_blockNumber', 'eth_call', 'eth_capabilities', 'eth_chainId',
  'eth_coinbase', 'eth_config', 'eth_createAccessList', 'eth_estimateGas', 'eth_feeHistory', 'eth_fillTransaction',
  'eth_gasPrice', 'eth_getBalance', 'eth_getBlockAccessList', 'eth_getBlockByHash', 'eth_getBlockByNumber',
  'eth_getBlockReceipts', 'eth_getBlockTransactionCountByHash', 'eth_getBlockTransactionCountByNumber', 'eth_getCode',
  'eth_getFilterChanges', 'eth_getFilterLogs', 'eth_getLogs', 'eth_getProof', 'eth_getRawTransactionByHash',
  'eth_getStorageAt', 'eth_getStorageValues', 'eth_getTransactionByBlockHashAndIndex',
  'eth_getTransactionByBlockNumberAndIndex', 'eth_getTransactionByHash', 'eth_getTransactionCount',
  'eth_getTransactionReceipt', 'eth_maxPriorityFeePerGas', 'eth_newBlockFilter', 'eth_newFilter',
  'eth_newPendingTransactionFilter', 'eth_sendRawTransaction', 'eth_sendRawTransactionSync', 'eth_sendTransaction',
  'eth_sign', 'eth_signTransaction', 'eth_simulateV1', 'eth_subscribe', 'eth_syncing', 'eth_uninstallFilter',
  'eth_unsubscribe', 'net_listening', 'net_peerCount', 'net_version', 'web3_clientVersion', 'web3_sha3',
  'debug_traceTransaction', 'debug_traceCall', 'debug_traceBlockByNumber', 'debug_traceBlockByHash', 'trace_call',
  'trace_callMany', 'trace_transaction', 'trace_replayTransaction', 'trace_block', 'trace_replayBlockTransactions',
  'trace_get',
] as const;
export type RpcMethodLabel = (typeof RPC_METHOD_LABELS)[number] | 'other';

const KNOWN_METHODS: ReadonlySet<string> = new Set<string>(RPC_METHOD_LABELS);

/** The `method` label for a wire method name: the name itself when it is in RPC_METHOD_LABELS, else `other`. */
export function methodLabel(name: string): RpcMethodLabel {
  return KNOWN_METHODS.has(name) ? (name as RpcMethodLabel) : 'other';
}

/** The `kind` label for an eth_subscribe kind: the kind itself when known, else `other`. */
export function subscriptionKindLabel(kind: string): WsSubscriptionKind {
  return (WS_SUBSCRIPTION_KINDS as readonly string[]).includes(kind) ? (kind as WsSubscriptionKind) : 'other';
}

// ── Budgets and buckets ────────────────────────────────────────────────────────────────────────────────────────

/** The default preconfirmation interval (every chain streaming today: 200 ms); a chain preset or flag may differ. */
export const FLASHBLOCK_INTERVAL_MS = 200;

/**
 * How often every thread's event-loop delay is sampled (ms), and prom-client's lag histogram too. Each sample is a
 * timer that wakes an idle thread: at 10 ms (Node's default) the two samplers of the main thread were 200 of its ~230
 * wake-ups a second and half of an idle daemon's CPU here (~400 → ~220 µs per 20 ms, .probe measurements in the
 * closing note of issue 24). At 50 ms a stall of 50 ms or more is always seen, a shorter one in proportion.
 */
export const LAG_RESOLUTION_MS = 50;

/** Threads whose event loops are always watched (per-thread lag and utilisation); stream threads are added. */
export const THREADS = ['main', 'recover'] as const;
/** `main`, `recover`, or `stream-<n>` (n = 1 … --stream-threads). */
export type ThreadName = string;

/** The thread label values: the fixed threads, then `stream-1` … `stream-<streamThreads>`. */
export function threadNames(streamThreads: number): readonly string[] {
  return [...THREADS, ...Array.from({ length: streamThreads }, (_, i) => `stream-${i + 1}`)];
}

/** Per-thread event-loop load, over the last sampling window. */
export interface ThreadLoadMetrics {
  readonly utilization: GaugeCell;
  readonly lagP99Seconds: GaugeCell;
  readonly lagMaxSeconds: GaugeCell;
}

/**
 * How late a flashblock arrived, in seconds (negative = early). A block with timestamp T is built during
 * [T − blockTime, T] (the builder schedules its flashblocks to finish by the payload timestamp), so flashblock
 * `index` is due at T − blockTime + index × interval. Arrival is our wall clock, so clock skew is included.
 */
export function flashblockLatenessSeconds(
  arrivalUnixMs: number,
  blockTimestampS: number,
  index: number,
  blockTimeMs: number,
  intervalMs: number = FLASHBLOCK_INTERVAL_MS,
): number {
  return (arrivalUnixMs - (blockTimestampS * 1000 - blockTimeMs + index * intervalMs)) / 1000;
}

const PROCESSING_BUCKETS = [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
  0.05, 0.1];
const INTERARRIVAL_BUCKETS = [0.01, 0.05, 0.1, 0.15, 0.18, 0.19, 0.2, 0.21, 0.22, 0.25, 0.3, 0.4, 0.5, 1, 2];
const LATENESS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.5, 1, 2, 5];
const VISIBLE_BUCKETS = [0.0005, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.05, 0.1, 0.2, 0.5, 1];
const EXEC_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const RPC_BUCKETS = [0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
  0.5, 1, 2.5, 5, 10];

// ── Cells: what the hot paths touch ───────────────────────────────────────────────────────────────────────────
// prom-client's labelled children hash their labels on every call: ~0.9 µs and garbage per observe+inc (5 M calls,
// this machine). Cells are plain fields read only at scrape: rpcHandle + inc + observe ~30 ns, no allocation.

/** A counter series. Recording allocates nothing. */
export class CounterCell {
  value = 0;
  /** Adds `by` (default 1); zero, negative and NaN amounts are ignored so the counter never goes down. */
  inc(by = 1): void {
    if (by > 0) this.value += by;
  }
}

/** A gauge series. Recording allocates nothing. */
export class GaugeCell {
  value = 0;
  set(v: number): void {
    this.value = v;
  }
  inc(by = 1): void {
    this.value += by;
  }
  dec(by = 1): void {
    this.value -= by;
  }
}

/** A histogram series with fixed buckets (per-bucket counts, last slot is +Inf). Recording allocates nothing. */
export class HistogramCell {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(readonly bounds: Float64Array) {
    this.counts = new Float64Array(bounds.length + 1);
  }
  /** Records one observation in seconds (or the family's unit); NaN is ignored. */
  observe(v: number): void {
    if (v !== v) return;
    const b = this.bounds;
    let i = 0;
    while (i < b.length && v > b[i]!) i++;
    this.counts[i] = this.counts[i]! + 1;
    this.sum += v;
    this.count++;
  }
}

type Cell = CounterCell | GaugeCell | HistogramCell;
type Labels = Record<string, string | number>;
interface Sample {
  value: number;
  labels: Labels;
  metricName?: string;
}

/**
 * One metric family backed by cells, registered in a prom-client Registry. It implements the part of prom-client's
 * metric contract the Registry reads (name, help, type, aggregator, get, reset), so exposition stays prom-client's.
 */
class Family<C extends Cell> {
  name: string; // not readonly: prom-client's Registry strips `_total` from counters in OpenMetrics mode
  readonly aggregator = 'sum';
  private readonly children: { labels: Labels; bucketLabels: Labels[]; cell: C }[] = [];

  constructor(
    registry: Registry,
    readonly type: 'counter' | 'gauge' | 'histogram',
    name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
    private readonly make: () => C,
    private readonly omitUnused = false,
  ) {
    this.name = name;
    // The one cast: Family satisfies what Registry reads from a metric, not prom-client's class types.
    registry.registerMetric(this as unknown as Metric);
  }

  /** The cell for these label values, created on first request (start-up only; it searches linearly). */
  child(...values: string[]): C {
    if (values.length !== this.labelNames.length) {
      throw new Error(`${this.name}: expected ${this.labelNames.length} label values, got ${values.length}`);
    }
    const labels: Labels = {};
    this.labelNames.forEach((n, i) => (labels[n] = values[i]!));
    for (const c of this.children) if (this.labelNames.every((n) => c.labels[n] === labels[n])) return c.cell;
    const cell = this.make();
    const bucketLabels = cell instanceof HistogramCell ? Array.from(cell.bounds, (le) => ({ ...labels, le })) : [];
    this.children.push({ labels, bucketLabels, cell });
    return cell;
  }

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }> {
    const values: Sample[] = [];
    for (const { labels, bucketLabels, cell } of this.children) {
      if (cell instanceof HistogramCell) {
        if (this.omitUnused && cell.count === 0) continue;
        let acc = 0;
        for (let i = 0; i < cell.bounds.length; i++) {
          acc += cell.counts[i]!;
          values.push({ metricName: `${this.name}_bucket`, labels: bucketLabels[i]!, value: acc });
        }
        values.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: '+Inf' }, value: cell.count });
        values.push({ metricName: `${this.name}_sum`, labels, value: cell.sum });
        values.push({ metricName: `${this.name}_count`, labels, value: cell.count });
      } else {
        if (this.omitUnused && cell.value === 0) continue;
        values.push({ labels, value: cell.value });
      }
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    for (const { cell } of this.children) {
      if (cell instanceof HistogramCell) {
        cell.counts.fill(0);
        cell.sum = 0;
        cell.count = 0;
      } else {
        cell.value = 0;
      }
    }
  }
}

// ── The handles callers hold ──────────────────────────────────────────────────────────────────────────────────

/** All series of one upstream (its index in the configured URL list), resolved at start-up. */
export interface UpstreamMetrics {
  readonly frames: Readonly<Record<FrameKind, CounterCell>>;
  readonly bytes: CounterCell;
  readonly firstCopies: CounterCell;
  readonly duplicateCopies: CounterCell;
  readonly reconnects: CounterCell;
  readonly stalls: CounterCell;
  readonly connected: GaugeCell;
  /** Connects made with a resume position (--upstream-resume), and those the upstream refused as too old (4000). */
  readonly resumes: Readonly<Record<ResumeOutcome, CounterCell>>;
}

/** Outcomes of a resumed upstream connect (label values of flashblocksd_upstream_resumes_total). */
export const RESUME_OUTCOMES = ['requested', 'too_old'] as const;
export type ResumeOutcome = (typeof RESUME_OUTCOMES)[number];

/** The two series of one RPC method × source. */
export interface RpcHandle {
  readonly counter: CounterCell;
  readonly histogram: HistogramCell;
}

export interface Metrics {
  readonly registry: Registry;
  /**
   * The main thread's event-loop delay (resolution LAG_RESOLUTION_MS) for its thread metrics (threads.ts), enabled
   * with the default metrics' own: both timers fall due together and wake the loop once per resolution, not twice.
   */
  readonly mainLoopDelay: IntervalHistogram;
  readonly upstreamCount: number;
  /** Indexed by upstream (0 … upstreamCount − 1). */
  readonly upstreamFrames: readonly Readonly<Record<FrameKind, CounterCell>>[];
  readonly upstreamBytes: readonly CounterCell[];
  readonly upstreamFirstCopies: readonly CounterCell[];
  readonly upstreamDuplicateCopies: readonly CounterCell[];
  readonly upstreamReconnects: readonly CounterCell[];
  readonly upstreamStalls: readonly CounterCell[];
  readonly upstreamConnected: readonly GaugeCell[];
  /** The series of upstream `i`; throws RangeError outside 0 … upstreamCount − 1 (call it at start-up). */
  forUpstream(i: number): UpstreamMetrics;

  readonly decodeErrors: Readonly<Record<DecodeErrorReason, CounterCell>>;
  readonly sequenceVerdicts: Readonly<Record<SequenceVerdictLabel, CounterCell>>;
  readonly processingSeconds: HistogramCell;
  readonly interarrivalSeconds: HistogramCell;
  readonly latenessSeconds: HistogramCell;
  readonly earlyFlashblocks: CounterCell;
  readonly budgetMisses: Readonly<Record<BudgetMissSource, CounterCell>>;
  /** Records lateness (see flashblockLatenessSeconds): early arrivals count in earlyFlashblocks and observe 0;
   *  lateness above one interval counts a `timestamp` budget miss. */
  observeLateness(seconds: number): void;
  /** Records the gap since the previous flashblock; above one interval + tolerance counts an `interval` miss. */
  observeInterarrival(seconds: number): void;
  /** The chain was learned after start-up: the budget the two above judge by from now on (the help texts keep the first). */
  setFlashblockInterval(ms: number): void;

  readonly pendingBlock: GaugeCell;
  readonly pendingIndex: GaugeCell;
  readonly canonicalBlock: GaugeCell;
  readonly preconfReorgs: CounterCell;
  /** Flashblocks received while the node did not match the stream, by check (src/ingest/chain-match.ts). */
  readonly chainMismatches: Readonly<Record<ChainCheck, CounterCell>>;
  /** The node's head went back and stayed (src/ingest/canonical.ts rewind). */
  readonly nodeHeadRewinds: CounterCell;
  readonly pendingFallbacks: Readonly<Record<PendingFallbackReason, CounterCell>>;
  /** 1 while flashblocks are considered gone for that reason (a retired chain, a long-absent upstream), else 0. */
  readonly upstreamRetired: Readonly<Record<UpstreamRetiredReason, GaugeCell>>;
  /** 1 while the stream's observed cadence contradicts the timing run under, by check (src/ingest/cadence.ts), else 0. */
  readonly streamCadenceMismatch: Readonly<Record<StreamCadenceCheck, GaugeCell>>;

  /** Pending execution (src/exec): engine up, lag behind the applied stream, apply time, outcomes, checks. */
  readonly executionUp: GaugeCell;
  /** 1 for the spec the newest executed block ran under, 0 for the others. */
  readonly executionSpec: Readonly<Record<ExecutionSpec, GaugeCell>>;
  readonly executionLagFlashblocks: GaugeCell;
  readonly executionLagSeconds: GaugeCell;
  readonly executionApplySeconds: HistogramCell;
  readonly executionFlashblocks: Readonly<Record<ExecutionOutcome, CounterCell>>;
  readonly executionVerified: CounterCell;
  readonly executionDivergences: Readonly<Record<ExecutionDivergenceSource, CounterCell>>;
  readonly executionRestarts: CounterCell;
  readonly executionNodeReads: CounterCell;
  readonly executionReadTimeouts: CounterCell;
  readonly executionReads: Readonly<Record<ExecutionReadThread, CounterCell>>;
  readonly executionVerifiedRatio: GaugeCell;
  readonly executionDivergenceRatio: GaugeCell;
  readonly executionCacheBytes: GaugeCell;
  readonly executionCacheDrops: CounterCell;
  readonly executionNodeReadsPerBlock: GaugeCell;

  readonly rpcRequests: Readonly<Record<RpcMethodLabel, Readonly<Record<RpcSource, CounterCell>>>>;
  readonly rpcSeconds: Readonly<Record<RpcMethodLabel, Readonly<Record<RpcSource, HistogramCell>>>>;
  /** Pre-resolved series for a wire method name (unknown names share `other`); allocates nothing. */
  rpcHandle(method: string, source: RpcSource): RpcHandle;

  /** Flashblock pinning (X-Flashblock-Min): outcomes, and requests waiting now. */
  readonly pinWaits: Readonly<Record<PinOutcome, CounterCell>>;
  readonly pinWaiters: GaugeCell;

  readonly nodeSeconds: HistogramCell;
  readonly nodeErrors: Readonly<Record<NodeErrorReason, CounterCell>>;

  readonly streamSubscribers: GaugeCell;
  readonly streamFramesSent: CounterCell;
  readonly streamFanoutSeconds: HistogramCell;
  /** Frame arrival → the first JSON-RPC request that read its state. */
  readonly flashblockVisibleSeconds: HistogramCell;
  readonly threads: Readonly<Record<ThreadName, ThreadLoadMetrics>>;
  readonly streamFramesDropped: CounterCell;
  readonly streamSlowCloses: CounterCell;
  /** Stream threads (--stream-port) that died without being asked to stop. */
  readonly streamThreadCrashes: CounterCell;
  readonly streamRefusals: Readonly<Record<StreamRefusalReason, CounterCell>>;
  readonly wsSubscriptions: Readonly<Record<WsSubscriptionKind, GaugeCell>>;
  /** Installed polling filters, by kind. */
  readonly rpcFilters: Readonly<Record<RpcFilterKind, GaugeCell>>;
  readonly rpcFilterDrops: Readonly<Record<RpcFilterDropReason, CounterCell>>;
  /** Traces at pending answered, by method and tracer (parity = the trace_* methods). */
  readonly traces: Readonly<Record<TraceMethod, Readonly<Record<TraceTracer, CounterCell>>>>;
  readonly traceSeconds: Readonly<Record<TraceMethod, HistogramCell>>;
  readonly traceRefusals: Readonly<Record<TraceRefusal, CounterCell>>;

  readonly redisUp: GaugeCell;
  readonly redisFallbacks: CounterCell;
  readonly rateLimited: Readonly<Record<RateLimitScope, CounterCell>>;

  readonly buildInfo: GaugeCell;
}

export interface MetricsOptions {
  version: string;
  commit: string;
  /** Number of configured upstream URLs (default 1): series exist for indexes 0 … upstreamCount − 1. */
  upstreamCount?: number;
  /** Jitter allowed above the flashblock interval before an `interval` budget miss is counted (default 50 ms). */
  intervalToleranceMs?: number;
  /** The chain's flashblock interval, the budget (default FLASHBLOCK_INTERVAL_MS). */
  flashblockIntervalMs?: number;
  /** Stream threads serving --stream-port (default 0): their thread label values exist from the start. */
  streamThreads?: number;
}

const PREFIX = 'flashblocksd_';

// prom-client exposes these as gauges named `_total`, which promtool rejects; each duplicates the sum of the
// per-type gauge of the same name without the suffix, so they are dropped.
const DROPPED_DEFAULTS = ['nodejs_active_handles_total', 'nodejs_active_requests_total',
  'nodejs_active_resources_total'];

function keyed<K extends string, V>(keys: readonly K[], make: (k: K) => V): Readonly<Record<K, V>> {
  const out = {} as Record<K, V>;
  for (const k of keys) out[k] = make(k);
  return Object.freeze(out);
}

function range<V>(n: number, make: (i: number) => V): readonly V[] {
  return Object.freeze(Array.from({ length: n }, (_, i) => make(i)));
}

/**
 * Builds a fresh Registry holding every flashblocksd metric plus Node's process/heap/event-loop metrics, and
 * returns pre-resolved handles. Each call is independent (tests may create several).
 */
export function createMetrics(opts: MetricsOptions): Metrics {
  const upstreamCount = opts.upstreamCount ?? 1;
  if (!Number.isInteger(upstreamCount) || upstreamCount < 1) {
    throw new RangeError(`upstreamCount must be a positive integer, got ${upstreamCount}`);
  }
  const toleranceS = (opts.intervalToleranceMs ?? 50) / 1000;
  let intervalS = (opts.flashblockIntervalMs ?? FLASHBLOCK_INTERVAL_MS) / 1000;

  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: PREFIX, eventLoopMonitoringPrecision: LAG_RESOLUTION_MS });
  // In the same turn as the default metrics' delay timer (same start, same period): see Metrics.mainLoopDelay.
  const mainLoopDelay = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
  mainLoopDelay.enable();
  for (const n of DROPPED_DEFAULTS) registry.removeSingleMetric(PREFIX + n);

  const counter = (name: string, help: string, labelNames: readonly string[] = [], omitUnused = false) =>
    new Family(registry, 'counter', PREFIX + name, help, labelNames, () => new CounterCell(), omitUnused);
  const gauge = (name: string, help: string, labelNames: readonly string[] = []) =>
    new Family(registry, 'gauge', PREFIX + name, help, labelNames, () => new GaugeCell());
  const histogram = (name: string, help: string, buckets: number[], labelNames: readonly string[] = [],
    omitUnused = false) => {
    const bounds = new Float64Array(buckets);
    return new Family(registry, 'histogram', PREFIX + name, help, labelNames, () => new HistogramCell(bounds),
      omitUnused);
  };

  // Threads
  const eluF = gauge('thread_event_loop_utilization', 'Share of the last second the thread\'s event loop was busy (0–1), by thread: main serves RPC, the stream and ingest; recover is sender recovery; stream-1 … serve --stream-port.', ['thread']);
  const lagP99F = gauge('thread_event_loop_lag_p99_seconds', 'Event-loop delay p99 over the last second, by thread.', ['thread']);
  const lagMaxF = gauge('thread_event_loop_lag_max_seconds', 'Event-loop delay maximum over the last second, by thread.', ['thread']);

  // Upstreams
  const up = ['upstream'];
  const framesF = counter('upstream_frames_total', 'WebSocket frames received, by upstream index and frame kind.',
    ['upstream', 'kind']);
  const bytesF = counter('upstream_bytes_total', 'Bytes received in upstream frames (as sent, before decompression).',
    up);
  const firstF = counter('upstream_first_copies_total',
    'Flashblocks this upstream delivered before any other upstream (hedged wins).', up);
  const dupF = counter('upstream_duplicate_copies_total',
    'Flashblocks this upstream delivered after another upstream already had (hedged losses).', up);
  const reconnectsF = counter('upstream_reconnects_total', 'Reconnection attempts to the upstream.', up);
  const stallsF = counter('upstream_stalls_total',
    'Times the upstream connection was dropped for sending nothing within the stall timeout.', up);
  const connectedF = gauge('upstream_connected', '1 while the upstream WebSocket is open, else 0.', up);
  const resumesF = counter('upstream_resumes_total',
    'Upstream connects made with a resume position (--upstream-resume; outcome=requested), and those the upstream closed with 4000 because it no longer held the flashblocks after it (outcome=too_old).',
    ['upstream', 'outcome']);
  const upstreams: UpstreamMetrics[] = [];
  for (let i = 0; i < upstreamCount; i++) {
    const u = String(i);
    upstreams.push(Object.freeze({
      frames: keyed(FRAME_KINDS, (k) => framesF.child(u, k)),
      bytes: bytesF.child(u),
      firstCopies: firstF.child(u),
      duplicateCopies: dupF.child(u),
      reconnects: reconnectsF.child(u),
      stalls: stallsF.child(u),
      connected: connectedF.child(u),
      resumes: keyed(RESUME_OUTCOMES, (o) => resumesF.child(u, o)),
    }));
  }
  const at = (i: number): UpstreamMetrics => upstreams[i]!;

  // Frames: decode, sequence, timing
  const decodeF = counter('decode_errors_total', 'Upstream frames dropped as undecodable, by reason.', ['reason']);
  const verdictF = counter('sequence_verdicts_total', 'Sequence verdicts given to decoded flashblocks.', ['verdict']);
  const processingSeconds = histogram('flashblock_processing_seconds',
    'Time to parse and apply one flashblock frame (decompression, JSON parse, validation, state apply).',
    PROCESSING_BUCKETS).child();
  const interarrivalSeconds = histogram('flashblock_interarrival_seconds',
    `Time between consecutive flashblock arrivals (any upstream, duplicates excluded); the budget is the chain's interval (${intervalS} s).`,
    INTERARRIVAL_BUCKETS).child();
  const latenessSeconds = histogram('flashblock_lateness_seconds',
    `Arrival wall-clock time minus due time, due = block timestamp - block time + index * interval (${intervalS} s); ` +
    'early arrivals are observed as 0 and counted in flashblocksd_flashblock_early_total.',
    LATENESS_BUCKETS).child();
  const earlyFlashblocks = counter('flashblock_early_total',
    'Flashblocks that arrived before their due time (negative lateness: clock skew or builder send offset).').child();
  const missF = counter('flashblock_budget_misses_total',
    `Flashblocks that missed the interval budget (${intervalS} s): source=interval when the gap since the previous one ` +
    'exceeded the interval plus tolerance, source=timestamp when lateness exceeded the interval.', ['source']);
  const budgetMisses = keyed(BUDGET_MISS_SOURCES, (s) => missF.child(s));

  const chainMismatchF = counter('chain_mismatch_flashblocks_total',
    "Flashblocks received while the node is not on the stream's chain: check=chain_id when the stream's signed transactions carry another chain id than the node's eth_chainId, check=heights when stream block numbers have stayed far from the node's head.", ['check']);

  const nodeHeadRewinds = counter('node_head_rewinds_total',
    "Times the node's head went back below the head followed so far and stayed there (a reset, a snapshot restore, another node behind the URL): the pending blocks held were dropped and the daemon re-anchored on the node's head.").child();

  // Pending state
  const fallbackF = counter('pending_fallbacks_total',
    'Pending-tag requests answered from the node\'s latest block instead of pending state, by reason.', ['reason']);

  const cadenceF = gauge('stream_cadence_mismatch',
    "1 while the stream's observed cadence contradicts the timing the daemon runs under (its chain preset's, or " +
    '--block-time-ms / --flashblock-interval-ms), by check: block_time (from the blocks\' timestamps) or ' +
    'flashblocks_per_block; the median of the newest 8 blocks. The warning names both and the flags that fit.',
    ['check']);
  const retiredF = gauge('upstream_retired',
    '1 while flashblocks are considered gone: reason=chain_retired (the chain preset says its flashblocks were retired, ' +
    'e.g. Base at Denim) or upstream_absent (no frame for --upstream-absent-ms); pending answers as latest meanwhile.',
    ['reason']);

  // Execution
  const execSpecF = gauge('execution_spec_info',
    '1 for the OP spec (hardfork) the newest executed block ran under, 0 for the others; all 0 before the first ' +
    'executed block (the start-up log line names the spec in force and how it was chosen).', ['spec']);
  const execOutcomeF = counter('execution_flashblocks_total',
    'Flashblocks of the stream by what execution did with them: outcome=executed, or why not (engine_down, ' +
    'not_next, tx_rejected, execution_error, node_error, panic: the engine\'s reason; block_failed: an earlier ' +
    'flashblock of the block was not executed; no_parent: the block turned canonical before it could start; ' +
    'stopped: the daemon was stopping). Reads at a flashblock not executed answer as latest.',
    ['outcome']);
  const execDivF = counter('execution_divergences_total',
    'Executed flashblocks that disagreed with the builder: source=receipts_root when the executed receipts root ' +
    'differs from diff.receipts_root, source=stream_receipt per transaction whose stream receipt differs from the ' +
    'executed one (status, gasUsed, logs), source=access_list per account whose access-list post-values (balance, ' +
    'nonce, code, storage) differ from the executed state, source=canonical per canonical block with the executed ' +
    'transactions whose receipts root differs from the executed one.', ['source']);

  const execReadsF = counter('execution_reads_total',
    'Pending state reads the execution engine answered (eth_call, eth_estimateGas, eth_getCode, …), by where: ' +
    'thread=inline at once on the RPC thread (from memory, within --execution-inline-read-us), thread=threads on ' +
    'the engine\'s read threads (longer, or needing the node), thread=memo from the answer of the same read at the ' +
    'same flashblock (--execution-read-memo).', ['thread']);

  // RPC: every known method × source is resolved here; series appear on first use to keep the scrape small.
  const rpcCountF = counter('rpc_requests_total', 'JSON-RPC requests by method and where the answer came from.',
    ['method', 'source'], true);
  const rpcSecondsF = histogram('rpc_request_seconds',
    'JSON-RPC request handling time by method and where the answer came from.', RPC_BUCKETS, ['method', 'source'],
    true);
  const allMethods: readonly RpcMethodLabel[] = [...RPC_METHOD_LABELS, 'other'];
  const rpcRequests = keyed(allMethods, (m) => keyed(RPC_SOURCES, (s) => rpcCountF.child(m, s)));
  const rpcSeconds = keyed(allMethods, (m) => keyed(RPC_SOURCES, (s) => rpcSecondsF.child(m, s)));
  const rpcHandles = new Map<string, Readonly<Record<RpcSource, RpcHandle>>>();
  for (const m of allMethods) {
    rpcHandles.set(m, keyed(RPC_SOURCES, (s) =>
      Object.freeze({ counter: rpcRequests[m][s], histogram: rpcSeconds[m][s] })));
  }
  const otherHandles = rpcHandles.get('other')!;

  // Pinning
  const pinWaitsF = counter('pin_waits_total',
    'HTTP JSON-RPC requests carrying X-Flashblock-Min, by outcome: immediate (state already at or past it), waited ' +
    '(answered once it was applied), timeout (not applied within --pin-wait-ms), refused (not waiting: ' +
    '--pin-max-waiters reached, or shutting down).', ['outcome']);

  // Node
  const nodeErrF = counter('node_errors_total', 'Failed calls to the node, by reason.', ['reason']);

  // Stream
  const refusalF = counter('stream_refusals_total', 'Stream connections refused, by reason.', ['reason']);
  const subsF = gauge('ws_subscriptions', 'Active eth_subscribe subscriptions, by kind.', ['kind']);
  const filtersF = gauge('rpc_filters', 'Installed polling filters (eth_newFilter = logs, eth_newBlockFilter = blocks, eth_newPendingTransactionFilter = pending_transactions), HTTP and WebSocket, by kind.', ['kind']);
  const filterDropsF = counter('rpc_filter_drops_total', 'What the polling filters dropped, by reason: buffer_full = a change (the oldest) out of a full filter buffer; expired = a filter not polled within 5 minutes, removed; limit = an eth_new*Filter refused at the per-client or total cap; node_error = a canonical block whose hash or logs the node did not give (those changes are missing).', ['reason']);

  // Traces at pending
  const tracesF = counter('rpc_traces_total', 'Traces at pending answered from the executed flashblocks (debug_trace*, trace_*), by method and tracer (structLogger = no tracer named; parity = the trace_* methods).', ['method', 'tracer'], true);
  const traceSecondsF = histogram('rpc_trace_seconds', 'Time of a trace at pending, by method (answered ones).', RPC_BUCKETS, ['method'], true);
  const traceRefusalsF = counter('rpc_trace_refusals_total', 'Traces at pending refused, by reason: execution_off, not_executed (the engine has not executed that flashblock), diverged (its execution disagreed with the builder or the chain), not_held (the engine no longer holds it), timeout, too_large (above --max-response-bytes), busy (--max-traces-in-flight), unsupported_tracer (a JavaScript or unknown tracer), not_pending_not_allowed (a canonical target while --forward-methods does not allow the method).', ['reason']);

  // Shared limits
  const rateLimitedF = counter('rate_limited_total', 'JSON-RPC requests (HTTP) and messages (WebSocket) refused by --rate-limit-rps, by the quota that refused them.', ['scope']);

  const buildInfo = gauge('build_info', 'Always 1; labels carry the daemon version, Node.js version and git commit.',
    ['version', 'node', 'commit']).child(opts.version, process.version, opts.commit);
  buildInfo.set(1);

  const metrics: Metrics = {
    registry,
    mainLoopDelay,
    upstreamCount,
    upstreamFrames: range(upstreamCount, (i) => at(i).frames),
    upstreamBytes: range(upstreamCount, (i) => at(i).bytes),
    upstreamFirstCopies: range(upstreamCount, (i) => at(i).firstCopies),
    upstreamDuplicateCopies: range(upstreamCount, (i) => at(i).duplicateCopies),
    upstreamReconnects: range(upstreamCount, (i) => at(i).reconnects),
    upstreamStalls: range(upstreamCount, (i) => at(i).stalls),
    upstreamConnected: range(upstreamCount, (i) => at(i).connected),
    forUpstream(i) {
      const u = upstreams[i];
      if (u === undefined) throw new RangeError(`no upstream ${i}: metrics were created for ${upstreamCount}`);
      return u;
    },

    decodeErrors: keyed(DECODE_ERROR_REASONS, (r) => decodeF.child(r)),
    sequenceVerdicts: keyed(SEQUENCE_VERDICTS, (v) => verdictF.child(v)),
    processingSeconds,
    interarrivalSeconds,
    latenessSeconds,
    earlyFlashblocks,
    budgetMisses,
    observeLateness(seconds) {
      if (seconds < 0) {
        earlyFlashblocks.inc();
        latenessSeconds.observe(0);
        return;
      }
      latenessSeconds.observe(seconds);
      if (seconds > intervalS) budgetMisses.timestamp.inc();
    },
    observeInterarrival(seconds) {
      interarrivalSeconds.observe(seconds);
      if (seconds > intervalS + toleranceS) budgetMisses.interval.inc();
    },
    setFlashblockInterval(ms) {
      intervalS = ms / 1000;
    },

    pendingBlock: gauge('pending_block_number', 'Block number of the newest pending (preconfirmed) block.').child(),
    pendingIndex: gauge('pending_flashblock_index', 'Index of the newest flashblock applied to the pending block.')
      .child(),
    canonicalBlock: gauge('canonical_block_number', 'Newest canonical block number reported by the node.').child(),
    preconfReorgs: counter('preconfirmation_reorgs_total',
      'Canonical blocks that did not contain a transaction we had preconfirmed for that block.').child(),
    pendingFallbacks: keyed(PENDING_FALLBACK_REASONS, (r) => fallbackF.child(r)),
    chainMismatches: keyed(CHAIN_CHECKS, (c) => chainMismatchF.child(c)),
    nodeHeadRewinds,
    upstreamRetired: keyed(UPSTREAM_RETIRED_REASONS, (r) => retiredF.child(r)),
    streamCadenceMismatch: keyed(STREAM_CADENCE_CHECKS, (c) => cadenceF.child(c)),

    executionUp: gauge('execution_up', '1 while the execution engine answers pending state reads, else 0.').child(),
    executionSpec: keyed(EXECUTION_SPECS, (k) => execSpecF.child(k)),
    executionLagFlashblocks: gauge('execution_lag_flashblocks',
      'Flashblocks applied to pending state but not yet executed by the engine.').child(),
    executionLagSeconds: gauge('execution_lag_seconds',
      'Age of the oldest flashblock applied to pending state but not yet executed (0 when caught up).').child(),
    executionApplySeconds: histogram('execution_apply_seconds',
      'Time the engine took to execute one flashblock (call to visible state).', EXEC_BUCKETS).child(),
    executionFlashblocks: keyed(EXECUTION_OUTCOMES, (o) => execOutcomeF.child(o)),
    executionVerified: counter('execution_verified_total',
      'Executed flashblocks whose receipts root equals diff.receipts_root (the verified share is ' +
      'execution_verified_ratio: this over the flashblocks handed to the engine, not over those executed).').child(),
    executionDivergences: keyed(EXECUTION_DIVERGENCE_SOURCES, (s) => execDivF.child(s)),
    executionRestarts: counter('execution_restarts_total', 'Execution engine restarts after a panic in the native core (held pending blocks are executed again).').child(),
    executionReads: keyed(EXECUTION_READ_THREADS, (k) => execReadsF.child(k)),
    executionReadTimeouts: counter('execution_read_timeouts_total',
      'Pending eth_call, eth_estimateGas, eth_createAccessList and eth_simulateV1 stopped past ' +
      '--execution-read-timeout-ms on the engine\'s read threads (answered -32000 "execution aborted").').child(),
    executionNodeReads: counter('execution_node_reads_total',
      'JSON-RPC calls the execution engine made to the node: canonical state it read (cold accounts, slots, code, ' +
      'ancestors\' hashes) and block headers.').child(),
    executionVerifiedRatio: gauge('execution_verified_ratio',
      'Verified share since start: execution_verified_total over the flashblocks handed to the engine (one not ' +
      'executed, still in flight or not verified counts against it); 0 before the first.').child(),
    executionDivergenceRatio: gauge('execution_divergence_ratio',
      'Share of the last 100 executed flashblocks whose execution disagreed with the builder or the chain (0-1); ' +
      'above --execution-max-divergence-percent no executed state is served and /readyz is not ready.').child(),
    executionCacheBytes: gauge('execution_cache_bytes',
      'Bytes held by the in-process engine\'s cache of the node\'s state (bounded by --execution-cache-mb).').child(),
    executionCacheDrops: counter('execution_cache_drops_total',
      'Times the execution engine\'s cache of the node\'s state passed --execution-cache-mb and was dropped whole (the ' +
      'next flashblocks read their state from the node again); one that keeps growing asks for a larger bound.').child(),
    executionNodeReadsPerBlock: gauge('execution_node_reads_per_block',
      'Node reads the execution engine made for the last complete block (from its first flashblock to the next ' +
      'block\'s): flat once the state cache is warm.').child(),

    rpcRequests,
    rpcSeconds,
    rpcHandle(method, source) {
      return (rpcHandles.get(method) ?? otherHandles)[source];
    },

    pinWaits: keyed(PIN_OUTCOMES, (o) => pinWaitsF.child(o)),
    pinWaiters: gauge('pin_waiters', 'HTTP JSON-RPC requests waiting now for the flashblock their X-Flashblock-Min asks for.')
      .child(),

    nodeSeconds: histogram('node_request_seconds', 'Round-trip time of calls forwarded to the node.', RPC_BUCKETS)
      .child(),
    nodeErrors: keyed(NODE_ERROR_REASONS, (r) => nodeErrF.child(r)),

    streamSubscribers: gauge('stream_subscribers', 'Open raw-stream (/flashblocks) subscriber connections.').child(),
    streamFramesSent: counter('stream_frames_sent_total', 'Frames sent to raw-stream subscribers.').child(),
    streamFanoutSeconds: histogram('stream_fanout_seconds',
      'Flashblock applied → its raw-stream fan-out finished (published to every subscriber with uWS topics, in ~1 ms slices that let RPC requests go first).',
      VISIBLE_BUCKETS).child(),
    flashblockVisibleSeconds: histogram('flashblock_visible_seconds',
      'Frame arrival → the first JSON-RPC request (HTTP or WebSocket) that read its state. With clients polling every few ms this is when a flashblock becomes visible over RPC; with sparse traffic it is an upper bound.',
      VISIBLE_BUCKETS).child(),
    threads: keyed(threadNames(opts.streamThreads ?? 0), (th) => Object.freeze({
      utilization: eluF.child(th),
      lagP99Seconds: lagP99F.child(th),
      lagMaxSeconds: lagMaxF.child(th),
    })),
    streamFramesDropped: counter('stream_frames_dropped_total',
      'Frames not delivered to a subscriber because its send buffer was over the backpressure cap: the frame it was not sent when closed, plus the frames still wholly or partly in its discarded send buffer (exact for live frames; when that buffer reaches back into its replay or past the last 4,096 frames, every frame it was sent counts: an upper bound).').child(),
    streamSlowCloses: counter('stream_slow_closes_total',
      'Raw-stream subscribers closed for falling behind (backpressure over the cap).').child(),
    streamThreadCrashes: counter('stream_thread_crashes_total',
      'Stream threads (--stream-port) that failed or exited without being asked to; their subscribers were disconnected, the other threads and the main port went on.').child(),
    streamRefusals: keyed(STREAM_REFUSAL_REASONS, (r) => refusalF.child(r)),
    wsSubscriptions: keyed(WS_SUBSCRIPTION_KINDS, (k) => subsF.child(k)),
    rpcFilters: keyed(RPC_FILTER_KINDS, (k) => filtersF.child(k)),
    rpcFilterDrops: keyed(RPC_FILTER_DROP_REASONS, (r) => filterDropsF.child(r)),
    traces: keyed(TRACE_METHODS, (m) => keyed(TRACE_TRACERS, (t) => tracesF.child(m, t))),
    traceSeconds: keyed(TRACE_METHODS, (m) => traceSecondsF.child(m)),
    traceRefusals: keyed(TRACE_REFUSALS, (r) => traceRefusalsF.child(r)),

    redisUp: gauge('redis_up', '1 while connection limits and rate quotas are shared through --redis-url, 0 while they are local to this instance (Redis unreachable, or not configured).').child(),
    redisFallbacks: counter('redis_fallbacks_total', 'Times this instance switched from shared (Redis) to local limits because Redis was unreachable or did not answer in time (at start included).').child(),
    rateLimited: keyed(RATE_LIMIT_SCOPES, (s) => rateLimitedF.child(s)),

    buildInfo,
  };
  return Object.freeze(metrics);
}
