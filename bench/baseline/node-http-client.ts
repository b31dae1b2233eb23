// Baseline for bench/rpc.ts only: the node client as it was before undici (a keep-alive node:http(s) Agent), kept
// to measure src/node/client.ts against in the same run. Not used by the daemon.
import http from 'node:http';
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import { NodeError, callOver, type NodeClientOptions } from '../../src/node/client.js';

/** A pooled JSON-RPC client for one node URL. */
export class NodeClient {
  private readonly agent: http.Agent;
  private readonly mod: typeof http | typeof https;
  private readonly target: URL;
  private readonly authHeader: string | null;

  private nextId = 1;

  constructor(private readonly opts: NodeClientOptions) {
    this.target = new URL(opts.url);
    const isHttps = this.target.protocol === 'https:';
    this.mod = isHttps ? https : http;
    this.agent = new (isHttps ? https.Agent : http.Agent)({ keepAlive: true, maxSockets: opts.maxSockets, maxFreeSockets: opts.maxSockets, scheduling: 'lifo' });
    this.authHeader = this.target.username !== '' ? 'Basic ' + Buffer.from(`${decodeURIComponent(this.target.username)}:${decodeURIComponent(this.target.password)}`).toString('base64') : null;
  }

  /** Whether a node URL is configured. */
  get enabled(): boolean {
    return this.opts.url !== '';
  }

  /**
   * POSTs a raw JSON-RPC body (single or batch) and resolves with the node's raw response body. Rejects with
   * NodeError on connect failure, timeout or a non-2xx status without a JSON body.
   */
  postRaw(body: string | Buffer, timeoutMs: number = this.opts.timeoutMs): Promise<Buffer> {
    const t0 = performance.now();
    return new Promise<Buffer>((resolve, reject) => {
      let done = false;
      const finish = (err: NodeError | null, buf?: Buffer): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        this.opts.observe?.((performance.now() - t0) / 1000, err === null ? null : err.reason);
        if (err !== null) reject(err);
        else resolve(buf as Buffer);
      };
      const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
      if (this.authHeader !== null) headers.authorization = this.authHeader;
      const req = this.mod.request(
        {
          agent: this.agent,
          method: 'POST',
          hostname: this.target.hostname.replace(/^\[|\]$/g, ''),
          port: this.target.port,
          path: this.target.pathname + this.target.search,
          headers,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const buf = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
            const status = res.statusCode ?? 0;
            if (status >= 200 && status < 300) finish(null, buf);
            else if (buf.length > 0 && (buf[0] === 0x7b || buf[0] === 0x5b)) finish(null, buf);
            else finish(new NodeError('http', `node answered HTTP ${status}`));
          });
          res.on('error', () => finish(new NodeError('connect', 'node connection broke mid-response')));
        },
      );
      const timer = setTimeout(() => {
        finish(new NodeError('timeout', `node did not answer within ${timeoutMs} ms`));
        req.destroy();
      }, timeoutMs);
      req.on('error', (e: NodeJS.ErrnoException) => finish(new NodeError('connect', `node unreachable (${e.code ?? e.message})`)));
      req.end(body);
    });
  }

  /** Calls one method and returns its `result`; a JSON-RPC error becomes NodeError('rpc') with code and data. */
  call<T = unknown>(method: string, params: unknown[], timeoutMs?: number): Promise<T> {
    return callOver<T>(this, this.nextId++, method, params, timeoutMs);
  }

  /** Closes pooled sockets. */
  close(): void {
    this.agent.destroy();
  }
}
