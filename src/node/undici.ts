// The node client's transport for https:// nodes (remote providers, often an API key in the path): undici's
// keep-alive Pool over TLS. Same contract as ./http1.ts: per-call deadline, bounded answers, NodeError only, one
// retry of a read whose kept-alive socket closed before any answer byte; messages never carry the URL.
import { Pool, type Dispatcher } from 'undici';
import { NodeCall, type Observe } from './call.js';
import { NodeError, answerTooLarge } from './error.js';

export interface UndiciOptions {
  maxSockets: number;
  maxResponseBytes: number;
  idleMs: number;
  /** Trusted CA certificates (PEM) instead of Node's defaults; tests use a self-signed one. */
  ca?: string | Buffer | (string | Buffer)[];
  observe?: Observe;
}

/** Socket errors undici reports when a kept-alive connection was closed under a request. */
const STALE_CODES: ReadonlySet<string> = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);

/** One POST in flight, as undici's dispatch handler: collects the body and settles once (answer, error or timeout). */
class UndiciCall extends NodeCall implements Dispatcher.DispatchHandlers {
  private status = 0;
  private chunks: Buffer[] = [];
  private abort: ((err?: Error) => void) | null = null;
  private retried = false;

  constructor(
    private readonly pool: UndiciPool,
    body: string | Buffer,
    timeoutMs: number,
    retry: boolean,
    observe: Observe | undefined,
    resolve: (b: Buffer) => void,
    reject: (e: NodeError) => void,
  ) {
    super(body, timeoutMs, retry, observe, resolve, reject);
  }

  protected timedOut(): void {
    this.abort?.();
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
    this.answer(this.status, c.length === 1 ? (c[0] as Buffer) : Buffer.concat(c));
  }

  onError(err: Error): void {
    if (this.done) return;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE') this.finish(answerTooLarge(this.pool.maxResponseBytes), null);
    else if (this.status !== 0) this.broke('node connection broke mid-response');
    else if (this.retry && !this.retried && code !== undefined && STALE_CODES.has(code)) {
      // A kept-alive socket closed before any answer: once more (undici opens a new connection).
      this.retried = true;
      this.chunks = [];
      this.abort = null;
      this.pool.dispatch(this);
    } else this.broke(code !== undefined && /CERT|SIGNATURE|SSL|TLS|ISSUER/.test(code) ? `node TLS failed: ${code}` : `node unreachable (${code ?? 'error'})`);
  }
}

/** The pool for one https:// node URL. */
export class UndiciPool {
  private readonly pool: Pool;
  private readonly path: string;
  private readonly headers: Record<string, string>;
  readonly maxResponseBytes: number;

  constructor(
    target: URL,
    /** Headers besides Content-Type (lower-case names). */
    headers: Record<string, string>,
    private readonly opts: UndiciOptions,
  ) {
    this.maxResponseBytes = opts.maxResponseBytes;
    this.pool = new Pool(target.origin, {
      connections: opts.maxSockets,
      pipelining: 1,
      maxResponseSize: opts.maxResponseBytes,
      keepAliveTimeout: opts.idleMs,
      ...(opts.ca === undefined ? {} : { connect: { ca: opts.ca } }),
    });
    this.path = target.pathname + target.search;
    this.headers = { 'content-type': 'application/json', ...headers };
  }

  /** Sends `body`; settles through resolve/reject exactly once (NodeError only). */
  post(body: string | Buffer, timeoutMs: number, retry: boolean, resolve: (b: Buffer) => void, reject: (e: NodeError) => void): void {
    this.dispatch(new UndiciCall(this, body, timeoutMs, retry, this.opts.observe, resolve, reject));
  }

  /** @internal (re)sends a call; the per-call timer is the deadline, undici's own timeouts stay a backstop. */
  dispatch(call: UndiciCall): void {
    this.pool.dispatch({ path: this.path, method: 'POST', headers: this.headers, body: call.body }, call);
  }

  /** Closes pooled sockets; calls still in flight fail with reason 'connect'. */
  close(): void {
    this.pool.destroy().catch(() => {});
  }
}
