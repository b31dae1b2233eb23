// What a JSON-RPC method handler is and what it may return: a value, pre-serialised JSON, or "forward to the node".
// Types and tiny value classes only; no transport, no state access.
import type { Logger } from '../../log.js';
import type { Metrics } from '../../metrics/metrics.js';
import type { NodeClient } from '../../node/client.js';
import type { StateEvents } from '../../state/events.js';
import type { PendingView, SenderSource } from '../../state/view.js';
import type { PendingExecution } from '../execution.js';
import type { Shapes } from '../shapes/json.js';
import type { SubscriberSink, Subscriptions } from '../subscriptions.js';

/** The settings method handlers read (built from Config by the daemon). */
export interface MethodOptions {
  /** false = pure forwarding proxy: `pending` answers as `latest`. */
  readonly flashblocksEnabled: boolean;
  /** Default and maximum wait of eth_sendRawTransactionSync. */
  readonly sendRawSyncTimeoutMs: number;
  /** Default and largest time of one trace at pending (--trace-timeout-ms; absent: geth's 5 s). */
  readonly traceTimeoutMs?: number;
  /** Traces at pending running at once at most (--max-traces-in-flight; absent: 4). */
  readonly maxTracesInFlight?: number;
  /** The response bound (--max-response-bytes): a trace larger than this is refused by the engine before it is sent. */
  readonly maxResponseBytes?: number;
}

export type { ExecutionReads, PendingExecution } from '../execution.js';

/** What a handler may use: the read-only state view and its senders, the shapes, the node, metrics. */
export interface MethodContext {
  readonly options: MethodOptions;
  readonly view: PendingView;
  readonly senders: SenderSource;
  readonly shapes: Shapes;
  readonly events: StateEvents;
  readonly node: NodeClient;
  readonly metrics: Metrics;
  readonly log: Logger;
  /**
   * Whether `pending` may be answered from state now: flashblocks enabled, an upstream frame applied within
   * pendingMaxAgeMs, and the pending block not broken. When false, `pending` answers as `latest` (forwarded).
   */
  pendingUsable(): boolean;
  /** True while the chain is known to have stopped streaming flashblocks (absent: never); the fallback's reason. */
  upstreamRetired?(): boolean;
  /** eth_subscribe support (WebSocket connections only). */
  readonly subscriptions: Subscriptions;
  /** Executed pending state; null when execution is off (then pending state reads answer as latest). */
  readonly execution: PendingExecution | null;
}

export { RawJson } from '../shapes/json.js';

/**
 * "Answer this item from the node." `params` null = the original params unchanged (lets a single request be
 * forwarded byte for byte); otherwise the rewritten params (e.g. `pending` replaced by `latest`).
 */
export class Forward {
  constructor(readonly params: unknown[] | null) {}
}

/**
 * What a handler's Promise resolves to when it answered from state after all (e.g. executed state): counted as
 * source="state". A Promise may also resolve to a Forward (then the call goes to the node) or a plain value
 * (source="node": the node took part in the answer).
 */
export class FromState {
  constructor(readonly value: unknown) {}
}

/** Forward with the original params; a shared instance so the common path allocates nothing. */
export const FORWARD_AS_IS = new Forward(null);

/**
 * A method handler. Returns a plain value (JSON.stringify'd), a RawJson, a Forward, or a Promise of one of them
 * (or of a FromState);
 * throws RpcError for invalid params and other expected failures. `sink` is the WebSocket connection, null on HTTP.
 */
export type Handler = (ctx: MethodContext, params: unknown[], sink: SubscriberSink | null) => unknown;

/** The method table: full wire name → handler. Methods absent from it are forwarded. */
export type MethodTable = ReadonlyMap<string, Handler>;
