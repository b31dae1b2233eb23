// Baseline for bench/rpc.ts only: the node client as it was on undici's Pool for every URL (before the HTTP/1.1
// client over node:net for http:// nodes), kept to measure src/node/client.ts against in the same run. Not used by
// the daemon.
import { performance } from 'node:perf_hooks';
import { Pool, type Dispatcher } from 'undici';
import { NodeError, callOver, type NodeClientOptions } from '../../src/node/client.js';

/**
 * One POST in flight, as undici's dispatch handler: collects the body and settles once (answer, error or timeout).
 * A class, not closures: one object per call (bench/rpc.ts measures this client against node:http's).
 */
class Call implements Dispatcher.DispatchHandlers {
  private status = 0;
  private readonly chunks: Buffer[] = [];
  private done = false;
  private abort: ((err?: Error) => void) | null = null;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly t0: number,
    timeoutMs: number,
    private readonly observe: NodeClientOptions['observe'],
    private readonly resolve: (b: Buffer) => void,
    private readonly reject: (e: NodeError) => void,
  ) {
    this.timer = setTimeout(() => this.onTimeout(timeoutMs), timeoutMs);
  }

  private onTimeout(timeoutMs: number): void {
    this.finish(new NodeError('timeout', `node did not answer within ${timeoutMs} ms`), null);
    this.abort?.();
  }

  private finish(err: NodeError | null, buf: Buffer | null): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    this.observe?.((performance.now() - this.t0) / 1000, err === null ? null : err.reason);
    if (err !== null) this.reject(err);
    else this.resolve(buf as Buffer);
  }

  onConnect(abort: (err?: Error) => void): void {
    // Timed out while queued for a connection: drop it as soon as it would be written.
    if (this.done) abort();
    else this.abort = abort;
  }

  onHeaders(statusCode: number): boolean {
    this.status = statusCode;
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.chunks.push(chunk);
    return true;
  }

  onComplete(): void {
    const c = this.chunks;
    const buf = c.length === 1 ? (c[0] as Buffer) : Buffer.concat(c);
    if (this.status >= 200 && this.status < 300) this.finish(null, buf);
    // A JSON-RPC error may come with a 4xx/5xx status: the body is still the answer.
    else if (buf.length > 0 && (buf[0] === 0x7b || buf[0] === 0x5b)) this.finish(null, buf);
    else this.finish(new NodeError('http', `node answered HTTP ${this.status}`), null);
  }

  onError(err: Error): void {
    if (this.done) return;
    const code = (err as NodeJS.ErrnoException).code;
    if (this.status !== 0) this.finish(new NodeError('connect', 'node connection broke mid-response'), null);
    else this.finish(new NodeError('connect', `node unreachable (${code ?? err.message})`), null);
  }
}

/** A pooled JSON-RPC client for one node URL. */
export class NodeClient {
  private readonly pool: Pool | null;
  private readonly path: string;
  private readonly headers: Record<string, string>;

  private nextId = 1;

  constructor(private readonly opts: NodeClientOptions) {
    if (opts.url === '') {
      this.pool = null;
      this.path = '/';
      this.headers = {};
      return;
    }
    const target = new URL(opts.url);
    this.pool = new Pool(target.origin, { connections: opts.maxSockets, pipelining: 1 });
    this.path = target.pathname + target.search;
    this.headers = { 'content-type': 'application/json' };
    if (target.username !== '') {
      this.headers.authorization = 'Basic ' + Buffer.from(`${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`).toString('base64');
    }
  }

  /** Whether a node URL is configured. */
  get enabled(): boolean {
    return this.pool !== null;
  }

  /**
   * POSTs a raw JSON-RPC body (single or batch) and resolves with the node's raw response body. Rejects with
   * NodeError on connect failure, timeout or a non-2xx status without a JSON body.
   */
  postRaw(body: string | Buffer, timeoutMs: number = this.opts.timeoutMs): Promise<Buffer> {
    const pool = this.pool;
    if (pool === null) return Promise.reject(new NodeError('disabled', 'no --node-rpc-url configured'));
    const t0 = performance.now();
    return new Promise<Buffer>((resolve, reject) => {
      const call = new Call(t0, timeoutMs, this.opts.observe, resolve, reject);
      // The per-call timer above is the deadline; undici's own header/body timeouts stay as a backstop only.
      pool.dispatch({ path: this.path, method: 'POST', headers: this.headers, body }, call);
    });
  }

  /** Calls one method and returns its `result`; a JSON-RPC error becomes NodeError('rpc') with code and data. */
  call<T = unknown>(method: string, params: unknown[], timeoutMs?: number): Promise<T> {
    return callOver<T>(this, this.nextId++, method, params, timeoutMs);
  }

  /** Closes pooled sockets; calls still in flight fail with reason 'connect'. */
  close(): void {
    this.pool?.destroy().catch(() => {});
  }
}
