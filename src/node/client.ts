// JSON-RPC client for the node (op-reth, op-geth, anvil): a keep-alive pool with a socket cap, per-call timeouts,
// bounded answers, raw forwarding of request bodies. http:// nodes go through a hand-written HTTP/1.1 pool over
// node:net (./http1.ts), https:// nodes through undici (./undici.ts); bench/rpc.ts measures both against node:http.
// Never logs the URL unredacted; never throws or rejects with anything but NodeError.
import { NodeError, type NodeErrorReason } from './error.js';
import { Http1Pool } from './http1.js';
import { UndiciPool } from './undici.js';

export { NodeError, type NodeErrorReason } from './error.js';

/** The client's bound on one answer unless told otherwise (above the default --max-response-bytes). */
export const DEFAULT_MAX_RESPONSE_BYTES = 128 * 1024 * 1024;
/** A kept-alive socket idle longer than this is not reused (undici's default); a server's shorter hint wins. */
export const DEFAULT_KEEPALIVE_IDLE_MS = 4000;

/** The `result` of one JSON-RPC reply body; a JSON-RPC error becomes NodeError('rpc') with code and data. */
export function rpcResult<T>(buf: Buffer): T {
  let msg: { result?: unknown; error?: { code?: number; message?: string; data?: unknown } };
  try {
    msg = JSON.parse(buf.toString('utf8')) as typeof msg;
  } catch {
    throw new NodeError('http', 'node answered with invalid JSON');
  }
  if (msg === null || typeof msg !== 'object') throw new NodeError('http', 'node answered with something other than a JSON-RPC object');
  if (msg.error !== undefined && msg.error !== null) {
    const e = msg.error;
    throw new NodeError('rpc', typeof e.message === 'string' ? e.message : 'node error', typeof e.code === 'number' ? e.code : undefined, e.data);
  }
  return msg.result as T;
}

/**
 * Whether a method may be sent twice (a retry after a kept-alive socket closed before any answer byte): reads only.
 * Submissions (eth_sendRawTransaction…) and eth_getFilterChanges (it consumes) are never retried.
 */
export function retryableMethod(method: string): boolean {
  if (method.startsWith('eth_get')) return method !== 'eth_getFilterChanges';
  return RETRYABLE.has(method);
}

const RETRYABLE: ReadonlySet<string> = new Set([
  'eth_chainId', 'eth_blockNumber', 'eth_call', 'eth_estimateGas', 'eth_createAccessList', 'eth_gasPrice',
  'eth_maxPriorityFeePerGas', 'eth_blobBaseFee', 'eth_feeHistory', 'eth_syncing', 'eth_protocolVersion',
  'net_version', 'net_listening', 'net_peerCount', 'web3_clientVersion', 'web3_sha3',
]);

/** What {@link callOver} needs of a client: whether a node is configured, and one raw POST. */
export interface RawPoster {
  readonly enabled: boolean;
  postRaw(body: string, timeoutMs?: number, retry?: boolean): Promise<Buffer>;
}

/** JSON-RPC call `id` over `client`: its `result`, or NodeError ('disabled' without a node, 'rpc' on an error reply). */
export async function callOver<T>(client: RawPoster, id: number, method: string, params: unknown[], timeoutMs?: number): Promise<T> {
  if (!client.enabled) throw new NodeError('disabled', 'no --node-rpc-url configured');
  return rpcResult<T>(await client.postRaw(JSON.stringify({ jsonrpc: '2.0', id, method, params }), timeoutMs, retryableMethod(method)));
}

export interface NodeClientOptions {
  /** The node's http(s) URL; '' = no node (every call fails with reason 'disabled'). */
  url: string;
  timeoutMs: number;
  maxSockets: number;
  /** Largest answer accepted (default {@link DEFAULT_MAX_RESPONSE_BYTES}); a larger one fails with reason 'http'. */
  maxResponseBytes?: number;
  /** Keep-alive idle cap (default {@link DEFAULT_KEEPALIVE_IDLE_MS}). */
  keepAliveIdleMs?: number;
  /** Trusted CA certificates (PEM) for an https node instead of Node's defaults; tests use a self-signed one. */
  ca?: string | Buffer | (string | Buffer)[];
  /**
   * Extra headers sent with every call (an API key); an `authorization` here wins over the URL's credentials. A
   * name or value that could break the request (CR, LF) makes the client unusable, as a bad URL does.
   */
  headers?: Record<string, string>;
  /** Called after every request with its duration (seconds) and outcome; for metrics. */
  observe?: (seconds: number, error: NodeErrorReason | null) => void;
}

interface Transport {
  post(body: string | Buffer, timeoutMs: number, retry: boolean, resolve: (b: Buffer) => void, reject: (e: NodeError) => void): void;
  close(): void;
}

/** A pooled JSON-RPC client for one node URL. */
export class NodeClient {
  private readonly transport: Transport | null;
  /** Set when the URL cannot be used (not http/https): every call fails with it. */
  private readonly unusable: NodeError | null = null;

  private nextId = 1;

  constructor(private readonly opts: NodeClientOptions) {
    if (opts.url === '') {
      this.transport = null;
      return;
    }
    let target: URL | null;
    try {
      target = new URL(opts.url);
    } catch {
      target = null;
    }
    if (target === null || (target.protocol !== 'http:' && target.protocol !== 'https:')) {
      this.transport = null;
      this.unusable = new NodeError('connect', `node URL is not an http:// or https:// URL${target === null ? '' : ` (${target.protocol})`}`);
      return;
    }
    const headers: Record<string, string> = {};
    if (target.username !== '') headers.authorization = 'Basic ' + Buffer.from(`${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`).toString('base64');
    for (const [k, v] of Object.entries(opts.headers ?? {})) {
      if (/[\r\n:]/.test(k) || /[\r\n]/.test(v)) {
        this.transport = null;
        this.unusable = new NodeError('connect', `node header ${JSON.stringify(k)} holds a line break or colon`);
        return;
      }
      headers[k.toLowerCase()] = v;
    }
    const common = {
      maxSockets: opts.maxSockets,
      maxResponseBytes: opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
      idleMs: opts.keepAliveIdleMs ?? DEFAULT_KEEPALIVE_IDLE_MS,
      ...(opts.observe === undefined ? {} : { observe: opts.observe }),
    };
    this.transport =
      target.protocol === 'http:'
        ? new Http1Pool(target, headers, common)
        : new UndiciPool(target, headers, opts.ca === undefined ? common : { ...common, ca: opts.ca });
  }

  /** Whether a node URL is configured. */
  get enabled(): boolean {
    return this.opts.url !== '';
  }

  /**
   * POSTs a raw JSON-RPC body (single or batch) and resolves with the node's raw response body. Rejects with
   * NodeError on connect failure, timeout, a non-2xx status without a JSON body, or an answer over the size bound.
   * `retry`: the body only reads (see {@link retryableMethod}), so it may be sent again once when a kept-alive
   * socket turns out closed before any answer byte; otherwise that is reported as reason 'connect'.
   */
  postRaw(body: string | Buffer, timeoutMs: number = this.opts.timeoutMs, retry = false): Promise<Buffer> {
    const t = this.transport;
    if (t === null) return Promise.reject(this.unusable ?? new NodeError('disabled', 'no --node-rpc-url configured'));
    return new Promise<Buffer>((resolve, reject) => t.post(body, timeoutMs, retry, resolve, reject));
  }

  /** Calls one method and returns its `result`; a JSON-RPC error becomes NodeError('rpc') with code and data. */
  call<T = unknown>(method: string, params: unknown[], timeoutMs?: number): Promise<T> {
    return callOver<T>(this, this.nextId++, method, params, timeoutMs);
  }

  /** Closes pooled sockets; calls still in flight fail with reason 'connect'. */
  close(): void {
    this.transport?.close();
  }
}
