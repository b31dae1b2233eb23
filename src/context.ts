// What the serving modules (rpc/, stream/) receive from the daemon: read-only state, events, the node client,
// config, log and metrics. Types only; nothing here mutates state.
import type { Config } from './config.js';
import type { Logger } from './log.js';
import type { Metrics } from './metrics/metrics.js';
import type { NodeClient } from './node/client.js';
import type { StateEvents } from './state/events.js';
import type { PendingState } from './state/pending.js';

export interface ServiceContext {
  readonly config: Readonly<Config>;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** Read it, never write it: the ingest pipeline is the single writer. */
  readonly state: PendingState;
  readonly events: StateEvents;
  readonly node: NodeClient;
  /**
   * Whether `pending` may be answered from state now: flashblocks enabled, an upstream frame applied within
   * pendingMaxAgeMs, and the pending block not broken. When false, `pending` answers as `latest` (forwarded).
   */
  pendingUsable(): boolean;
  /** eth_subscribe support for the WebSocket JSON-RPC endpoint; null until the stream module provides it. */
  subscriptions: SubscriptionHub | null;
}

/** A serving module mounted on the shared uWS app; `drain` stops accepting and closes its clients. */
export interface Mounted {
  /** Stop accepting new work; close long-lived sockets with 1001; resolve when in-flight work finished or timed out. */
  drain(graceMs: number): Promise<void>;
}

/** One WebSocket JSON-RPC connection as the subscription hub sees it. */
export interface SubscriberSink {
  /** Unique per connection. */
  readonly id: number;
  /** Sends one text message; false when the socket is closed or over its backpressure cap (message dropped). */
  send(text: string): boolean;
}

/**
 * eth_subscribe / eth_unsubscribe for the WebSocket JSON-RPC endpoint (owned by stream/subscriptions.ts; the rpc
 * WebSocket transport calls it). `subscribe` throws RpcError on bad params and returns the subscription id.
 */
export interface SubscriptionHub {
  subscribe(sink: SubscriberSink, params: unknown[]): string;
  unsubscribe(sink: SubscriberSink, id: string): boolean;
  /** The connection closed: drop all its subscriptions. */
  disconnect(sink: SubscriberSink): void;
}
