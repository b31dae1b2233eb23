// The one error the node client rejects with, and its closed set of reasons (metric label values). A leaf: no I/O.

/** Why a node call failed (closed set; metric label values). */
export type NodeErrorReason = 'timeout' | 'connect' | 'http' | 'rpc' | 'disabled';

/** A failed node call. For 'rpc', `rpcCode`/`rpcData` carry the node's JSON-RPC error. */
export class NodeError extends Error {
  constructor(
    readonly reason: NodeErrorReason,
    message: string,
    readonly rpcCode?: number,
    readonly rpcData?: unknown,
    /** Set when the answer was refused for its size (reason 'http'): the client's bound in bytes. */
    readonly limitBytes?: number,
  ) {
    super(message);
    this.name = 'NodeError';
  }
}

/** The node's answer was larger than the client's bound (`maxResponseBytes`); the connection is dropped. */
export function answerTooLarge(limitBytes: number): NodeError {
  return new NodeError('http', `node answer exceeds ${limitBytes} bytes`, undefined, undefined, limitBytes);
}
