// What a JSON-RPC method handler is and what it may return: a value, pre-serialised JSON, or "forward to the node".
// Types and tiny value classes only; no transport, no state access.
import type { ServiceContext, SubscriberSink } from '../../context.js';

/** A result that is already JSON text; the dispatcher splices it into the envelope without re-serialising. */
export class RawJson {
  constructor(readonly json: string) {}
}

/**
 * "Answer this item from the node." `params` null = the original params unchanged (lets a single request be
 * forwarded byte for byte); otherwise the rewritten params (e.g. `pending` replaced by `latest`).
 */
export class Forward {
  constructor(readonly params: unknown[] | null) {}
}

/** Forward with the original params; a shared instance so the common path allocates nothing. */
export const FORWARD_AS_IS = new Forward(null);

/**
 * A method handler. Returns a plain value (JSON.stringify'd), a RawJson, a Forward, or a Promise of one of them;
 * throws RpcError for invalid params and other expected failures. `sink` is the WebSocket connection, null on HTTP.
 */
export type Handler = (ctx: ServiceContext, params: unknown[], sink: SubscriberSink | null) => unknown;

/** The method table: full wire name → handler. Methods absent from it are forwarded. */
export type MethodTable = ReadonlyMap<string, Handler>;
