// One keep-alive HTTP/1.1 connection to a JSON-RPC server with pipelining: requests are written back to back and
// answered in the order sent. Owns the socket and the FIFO of waiting calls; knows nothing of what the calls mean.
// Devnet tooling (exec-blocks.ts drives the devnet's anvil with it); the daemon never imports it.
// Not a batch and not WebSocket on purpose: anvil runs batch entries (and pipelined WS messages) concurrently and
// loses their order; pipelined HTTP keeps it (research/pending-execution.md, "HTTP/1.1 pipelining keeps order").
import { connect, type Socket } from 'node:net';
import { RpcReplyError } from '../../src/exec/engine.js';

/** A JSON-RPC error answered by the server (the call reached it and was refused). */
export { RpcReplyError };

/** The connection failed or closed with calls in flight (the server is gone or restarting). */
export class ConnectionLostError extends Error {}

interface Waiter {
  method: string;
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

const CRLF2 = Buffer.from('\r\n\r\n');
const CRLF = Buffer.from('\r\n');

/** One pipelined connection; open with {@link PipelinedRpc.open}. Calls after a failure reject at once. */
export class PipelinedRpc {
  private readonly waiting: Waiter[] = [];
  private buf: Buffer = Buffer.alloc(0);
  private nextId = 1;
  private dead: Error | null = null;
  private readonly head: string;

  private constructor(
    private readonly socket: Socket,
    host: string,
    port: number,
    private readonly nudgeAcks: boolean,
  ) {
    this.head = `POST / HTTP/1.1\r\nHost: ${host}:${port}\r\nContent-Type: application/json\r\nConnection: keep-alive\r\nContent-Length: `;
    socket.setNoDelay(true);
    socket.on('data', (d: Buffer) => this.onData(d));
    socket.on('error', (e) => this.fail(new ConnectionLostError(`connection to ${host}:${port} failed: ${e.message}`)));
    socket.on('close', () => this.fail(new ConnectionLostError(`connection to ${host}:${port} closed`)));
  }

  /**
   * Connects to http://host:port. `nudgeAcks`: answer every reply segment while more are due with an empty line,
   * for servers that leave Nagle on and skip empty lines before a request (anvil/hyper; not Go's net/http).
   */
  static open(host: string, port: number, timeoutMs = 5000, nudgeAcks = false): Promise<PipelinedRpc> {
    return new Promise((resolve, reject) => {
      const s = connect({ host, port });
      const t = setTimeout(() => {
        s.destroy();
        reject(new ConnectionLostError(`connect to ${host}:${port} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      s.once('connect', () => {
        clearTimeout(t);
        s.removeAllListeners('error');
        resolve(new PipelinedRpc(s, host, port, nudgeAcks));
      });
      s.once('error', (e) => {
        clearTimeout(t);
        reject(new ConnectionLostError(`connect to ${host}:${port} failed: ${e.message}`));
      });
    });
  }

  /** True until the connection failed or was closed. */
  get alive(): boolean {
    return this.dead === null;
  }

  /** Calls in flight. */
  get inFlight(): number {
    return this.waiting.length;
  }

  /** One call; resolves with `result`, rejects with {@link RpcReplyError} or {@link ConnectionLostError}. */
  call<T = any>(method: string, params: unknown[] = []): Promise<T> {
    if (this.dead !== null) return Promise.reject(this.dead);
    const body = `{"jsonrpc":"2.0","id":${this.nextId++},"method":"${method}","params":${JSON.stringify(params)}}`;
    const p = new Promise<T>((resolve, reject) => {
      this.waiting.push({ method, resolve: resolve as (v: unknown) => void, reject });
    });
    this.socket.write(this.head + Buffer.byteLength(body) + '\r\n\r\n' + body);
    return p;
  }

  /**
   * Many calls written in one go, answered in order; each settles on its own (one error does not stop the rest).
   * The server executes them in the order given.
   */
  callMany(calls: ReadonlyArray<readonly [string, unknown[]]>): Promise<PromiseSettledResult<any>[]> {
    if (calls.length === 0) return Promise.resolve([]);
    if (this.dead !== null) return Promise.resolve(calls.map(() => ({ status: 'rejected', reason: this.dead }) as const));
    const parts: string[] = new Array(calls.length);
    const ps: Promise<unknown>[] = new Array(calls.length);
    for (let i = 0; i < calls.length; i++) {
      const [method, params] = calls[i]!;
      const body = `{"jsonrpc":"2.0","id":${this.nextId++},"method":"${method}","params":${JSON.stringify(params)}}`;
      parts[i] = this.head + Buffer.byteLength(body) + '\r\n\r\n' + body;
      ps[i] = new Promise((resolve, reject) => this.waiting.push({ method, resolve, reject }));
    }
    this.socket.write(parts.join(''));
    return Promise.allSettled(ps);
  }

  /** Closes the connection; calls in flight reject. */
  close(): void {
    this.fail(new ConnectionLostError('connection closed by the caller'));
    this.socket.destroy();
  }

  private fail(e: Error): void {
    if (this.dead !== null) return;
    this.dead = e;
    const ws = this.waiting.splice(0);
    for (const w of ws) w.reject(e);
  }

  private onData(d: Buffer): void {
    this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    this.takeReplies();
    // More replies due: answer this segment now with an empty line (HTTP/1.1 lets a server skip CRLFs before a
    // request line; hyper does). anvil does not set TCP_NODELAY, so Nagle holds its next reply until this side ACKs,
    // and Linux delays that ACK by ~40 ms: every pipelined write of ≥ 2 calls cost ≥ 44 ms (/tmp scratch
    // measurement: 2 × eth_chainId p50 44.0 ms; see the design note in engine.ts). Data carries the ACK at once.
    if (this.nudgeAcks && this.waiting.length > 0 && this.dead === null) this.socket.write(CRLF);
  }

  private takeReplies(): void {
    for (;;) {
      const end = this.buf.indexOf(CRLF2);
      if (end < 0) return;
      const header = this.buf.toString('latin1', 0, end);
      const m = /\r\ncontent-length:\s*(\d+)/i.exec(header);
      if (m === null) {
        // anvil always sends Content-Length; anything else is a protocol we do not speak.
        this.fail(new ConnectionLostError(`reply without content-length: ${header.slice(0, 80)}`));
        this.socket.destroy();
        return;
      }
      const len = Number(m[1]);
      const start = end + 4;
      if (this.buf.length < start + len) return;
      const body = this.buf.toString('utf8', start, start + len);
      this.buf = this.buf.subarray(start + len);
      const w = this.waiting.shift();
      if (w === undefined) continue;
      let msg: { result?: unknown; error?: { code: number; message: string; data?: unknown } };
      try {
        msg = JSON.parse(body) as typeof msg;
      } catch {
        w.reject(new ConnectionLostError(`${w.method}: unparseable reply (HTTP ${header.slice(9, 12)})`));
        continue;
      }
      if (msg.error !== undefined) w.reject(new RpcReplyError(w.method, msg.error.code, msg.error.message, msg.error.data));
      else w.resolve(msg.result);
    }
  }
}
