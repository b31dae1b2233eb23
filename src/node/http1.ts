// The node client's transport for http:// nodes: a keep-alive HTTP/1.1 pool over node:net with at most `maxSockets`
// connections, one request in flight per connection (no pipelining), calls queued FIFO beyond that. Each request is
// one write of a precomputed head + body; answers are parsed by ./response.ts. A kept-alive socket found closed
// before any answer byte (the node restarted, or closed it idle) is retried once on a new connection when the call
// allows it. Messages never carry the URL (it may hold credentials). bench/rpc.ts measures it against undici.
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { NodeCall, type Observe } from './call.js';
import { NodeError, answerTooLarge } from './error.js';
import { Parse, ResponseParser } from './response.js';

export interface Http1Options {
  maxSockets: number;
  maxResponseBytes: number;
  /** A kept-alive socket idle longer than this is not reused (closed on its next pick); a server's shorter hint wins. */
  idleMs: number;
  observe?: Observe;
}

class Http1Call extends NodeCall {
  conn: Conn | null = null;
  retried = false;
  constructor(
    readonly pool: Http1Pool,
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
    this.pool.abandon(this);
  }
}

/** One socket to the node and the call it carries. */
class Conn {
  readonly socket: net.Socket;
  readonly parser: ResponseParser;
  call: Http1Call | null = null;
  /** Has completed an answer and been kept alive (a close before any answer byte may then be a stale socket). */
  used = false;
  connected = false;
  /** No longer counted by the pool (closing or closed). */
  gone = false;
  /** performance.now() after which an idle socket is not reused. */
  expiresAt = 0;
  errorCode = '';

  constructor(pool: Http1Pool, port: number, host: string, maxResponseBytes: number) {
    this.parser = new ResponseParser(maxResponseBytes);
    const s = net.connect({ port, host, noDelay: true, keepAlive: true, keepAliveInitialDelay: 60_000 });
    // An idle socket must not keep the process alive; a call in flight is held by its timer.
    s.unref();
    s.once('connect', () => {
      this.connected = true;
    });
    s.on('data', (d: Buffer) => pool.onData(this, d));
    s.on('end', () => pool.onEnd(this));
    s.on('error', (e: NodeJS.ErrnoException) => {
      this.errorCode = e.code ?? 'error';
    });
    s.on('close', () => pool.onClose(this));
    this.socket = s;
  }
}

/** The pool for one http:// node URL. */
export class Http1Pool {
  private readonly idle: Conn[] = [];
  private readonly queue: Http1Call[] = [];
  private readonly conns = new Set<Conn>();
  private closed = false;
  private readonly host: string;
  private readonly port: number;
  /** Request line and headers up to the Content-Length value. */
  private readonly head: string;

  constructor(
    target: URL,
    /** Headers besides Host, Content-Type and Content-Length (lower-case names). */
    headers: Record<string, string>,
    private readonly opts: Http1Options,
  ) {
    this.host = target.hostname.replace(/^\[|\]$/g, '');
    this.port = target.port === '' ? 80 : Number(target.port);
    this.head =
      `POST ${target.pathname}${target.search} HTTP/1.1\r\nHost: ${target.host}\r\nContent-Type: application/json\r\n` +
      Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('') +
      'Content-Length: ';
  }

  /** Sends `body`; settles through resolve/reject exactly once (NodeError only). */
  post(body: string | Buffer, timeoutMs: number, retry: boolean, resolve: (b: Buffer) => void, reject: (e: NodeError) => void): void {
    const call = new Http1Call(this, body, timeoutMs, retry, this.opts.observe, resolve, reject);
    if (this.closed) call.broke('node client closed');
    else this.assign(call);
  }

  /** Closes every socket; calls in flight or queued fail with reason 'connect'. */
  close(): void {
    this.closed = true;
    for (const call of this.queue.splice(0)) call.broke('node client closed');
    for (const c of [...this.conns]) {
      const call = c.call;
      c.call = null;
      this.forget(c);
      c.socket.destroy();
      call?.broke('node client closed');
    }
  }

  /** A reused idle socket (newest first, LIFO keeps few warm), a new one under the cap, or the queue. */
  private assign(call: Http1Call): void {
    if (this.idle.length > 0) {
      const now = performance.now();
      while (this.idle.length > 0) {
        const c = this.idle.pop() as Conn;
        if (c.expiresAt > now && !c.socket.destroyed) return this.send(c, call);
        this.forget(c);
        c.socket.destroy();
      }
    }
    if (this.conns.size < this.opts.maxSockets) this.open(call);
    else this.queue.push(call);
  }

  /** Sends `call` on a new connection. */
  private open(call: Http1Call): void {
    let c: Conn;
    try {
      c = new Conn(this, this.port, this.host, this.opts.maxResponseBytes);
    } catch (e) {
      // net.connect throws only on arguments URL parsing already excludes; a call still fails as a NodeError.
      call.broke(`node unreachable (${(e as NodeJS.ErrnoException).code ?? 'connect failed'})`);
      return;
    }
    this.conns.add(c);
    this.send(c, call);
  }

  private send(c: Conn, call: Http1Call): void {
    c.call = call;
    call.conn = c;
    c.parser.reset();
    const body = call.body;
    // One write per request: head and body together (one syscall, one packet on loopback).
    if (typeof body === 'string') c.socket.write(this.head + Buffer.byteLength(body) + '\r\n\r\n' + body);
    else c.socket.write(Buffer.concat([Buffer.from(this.head + body.length + '\r\n\r\n', 'latin1'), body]));
  }

  /** @internal socket data */
  onData(c: Conn, data: Buffer): void {
    const call = c.call;
    if (call === null) {
      // Bytes nobody asked for: the connection's framing cannot be trusted any more.
      this.drop(c);
      return;
    }
    const r = c.parser.feed(data);
    if (r === Parse.More) return;
    if (r === Parse.Error) {
      c.call = null;
      call.conn = null;
      this.drop(c);
      call.finish(c.parser.tooLarge ? answerTooLarge(this.opts.maxResponseBytes) : new NodeError('http', `node sent an invalid HTTP answer: ${c.parser.error}`), null);
      return;
    }
    this.complete(c, call);
  }

  /** @internal the node closed its side */
  onEnd(c: Conn): void {
    const call = c.call;
    if (call !== null && c.parser.received > 0 && c.parser.end() === Parse.Done) this.complete(c, call);
  }

  /** @internal the socket closed (after an error, a close by either side, or a destroy here) */
  onClose(c: Conn): void {
    this.forget(c);
    const call = c.call;
    c.call = null;
    if (call !== null && !call.done) {
      call.conn = null;
      const p = c.parser;
      const code = c.errorCode === '' ? '' : ` (${c.errorCode})`;
      if (p.received === 0 && c.used && call.retry && !call.retried && !this.closed) {
        // A stale kept-alive socket: the node never read the request. Once more, on a new connection.
        call.retried = true;
        if (this.conns.size < this.opts.maxSockets) this.open(call);
        else this.queue.unshift(call);
      } else if (p.started) call.broke('node connection broke mid-response');
      else if (!c.connected) call.broke(`node unreachable${code === '' ? ' (closed)' : code}`);
      else call.broke(`node closed the connection before answering${code}`);
    }
    this.next();
  }

  /** @internal a call's deadline passed: it leaves the queue, or its connection is closed (the answer would be late). */
  abandon(call: Http1Call): void {
    const c = call.conn;
    if (c === null) {
      const i = this.queue.indexOf(call);
      if (i !== -1) this.queue.splice(i, 1);
      return;
    }
    call.conn = null;
    c.call = null;
    this.drop(c);
  }

  /** A complete answer: the socket goes back (or serves the next queued call) before the caller resumes. */
  private complete(c: Conn, call: Http1Call): void {
    const p = c.parser;
    const status = p.status;
    const body = p.body();
    c.call = null;
    call.conn = null;
    const hint = p.keepAliveHintMs;
    // A server's keep-alive timeout hint: stop reusing the socket a second before it would close it.
    const idleMs = hint > 0 ? Math.min(hint - 1000, this.opts.idleMs) : this.opts.idleMs;
    if (p.keepAlive && idleMs > 0 && !this.closed) {
      c.used = true;
      const next = this.dequeue();
      if (next !== null) this.send(c, next);
      else {
        const now = performance.now();
        // The least recently used idle socket (reuse is LIFO) is closed once past its idle cap.
        const oldest = this.idle[0];
        if (oldest !== undefined && oldest.expiresAt <= now) this.drop(oldest);
        c.expiresAt = now + idleMs;
        this.idle.push(c);
      }
    } else this.drop(c);
    call.answer(status, body);
  }

  /** Stops counting `c` and closes it. */
  private drop(c: Conn): void {
    this.forget(c);
    c.socket.destroy();
    this.next();
  }

  private forget(c: Conn): void {
    if (c.gone) return;
    c.gone = true;
    this.conns.delete(c);
    const i = this.idle.indexOf(c);
    if (i !== -1) this.idle.splice(i, 1);
  }

  /** A slot freed up: the oldest queued call gets a new connection. */
  private next(): void {
    if (this.closed) return;
    while (this.queue.length > 0 && this.conns.size < this.opts.maxSockets) {
      const call = this.dequeue();
      if (call === null) return;
      this.open(call);
    }
  }

  private dequeue(): Http1Call | null {
    while (this.queue.length > 0) {
      const call = this.queue.shift() as Http1Call;
      if (!call.done) return call;
    }
    return null;
  }
}
