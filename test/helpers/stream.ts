// Raw-stream test helpers: a recording `ws` subscriber, refused-upgrade probes, hand-written handshakes, frame digests,
// block rewriting. Shared by the main-port tests (test/stream/stream.test.ts, test/limits/upgrade.test.ts) and the
// stream-port tests (test/stream/threads.test.ts).
import { createHash } from 'node:crypto';
import net from 'node:net';
import WebSocket from 'ws';
import { feed, type makePipeline } from './ingest.js';

/** A subscriber that records every frame (bytes + kind). */
export class Sub {
  readonly frames: { data: Buffer; isBinary: boolean }[] = [];
  closeCode = 0;
  closeReason = '';
  readonly opened: Promise<void>;
  readonly closed: Promise<void>;
  private waiters: { n: number; resolve: () => void }[] = [];
  constructor(readonly ws: WebSocket) {
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      this.frames.push({ data, isBinary });
      this.waiters = this.waiters.filter((w) => (this.frames.length >= w.n ? (w.resolve(), false) : true));
    });
    ws.on('error', () => {});
    this.opened = new Promise((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
      ws.once('error', reject);
    });
    this.closed = new Promise((resolve) =>
      ws.once('close', (code, reason) => {
        this.closeCode = code;
        this.closeReason = reason.toString();
        resolve();
      }),
    );
  }
  waitFor(n: number, ms = 10_000): Promise<void> {
    if (this.frames.length >= n) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`got ${this.frames.length} of ${n} frames`)), ms);
      this.waiters.push({ n, resolve: () => (clearTimeout(timer), resolve()) });
    });
  }
}

export function connect(url: string, headers: Record<string, string | string[]> = {}): Sub {
  return new Sub(new WebSocket(url, { headers, perMessageDeflate: false }));
}

/**
 * HTTP status and body of a refused upgrade. The connection is closed once the body is read: `ws` leaves a refused
 * handshake's socket to whoever handles 'unexpected-response', and the server keeps it alive (~10 s of uWS idle
 * timeout), which held the test process open after its last test.
 */
export function refusal(url: string, headers: Record<string, string | string[]> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.on('open', () => {
      ws.close();
      reject(new Error(`expected ${url} to be refused`));
    });
    ws.on('error', () => {});
    ws.on('unexpected-response', (_req, res) => {
      const socket = res.socket;
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => {
        socket.destroy();
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
  });
}

/** A hand-written WebSocket handshake (rawUpgrade): its response head and socket, left open. */
export interface RawUpgrade {
  head: string;
  socket: net.Socket;
  /** Bytes received after the response head (frames; a close frame too). */
  frames: () => number;
  closed: () => boolean;
}

/**
 * A WebSocket handshake written by hand, with `Connection: <connection>` (e.g. `close`, which `ws` cannot send), to
 * `path`; resolves with the response head and the socket once the head has arrived (the socket is left open).
 */
export function rawUpgrade(port: number, connection: string, afterWrite = (): void => undefined, path = '/flashblocks'): Promise<RawUpgrade> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    let head = '';
    let closed = false;
    socket.on('error', reject);
    socket.on('close', () => (closed = true));
    socket.on('connect', () => {
      socket.write(
        `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: ${connection}\r\n` +
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
      );
      afterWrite();
    });
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (head === '' && end >= 0) {
        head = buf.subarray(0, end).toString('latin1');
        buf = buf.subarray(end + 4);
        resolve({ head, socket, frames: () => buf.length, closed: () => closed });
      }
    });
  });
}

/** Text frames as a subscriber records them. */
export const asText = (bufs: Buffer[]): { data: Buffer; isBinary: boolean }[] => bufs.map((data) => ({ data, isBinary: false }));

/**
 * Feeds a fence (the first frame of block `blockNumber`, a later block) and returns it: frames arrive in order, so
 * anything extra or repeated before it would stand in front of it.
 */
export function fence(h: { pipeline: ReturnType<typeof makePipeline>['pipeline'] }, msgs: Record<string, unknown>[], blockNumber: number): Buffer {
  const f = Buffer.from(JSON.stringify(asBlock(msgs, blockNumber)[0]));
  feed(h.pipeline, f);
  return f;
}

export function digest(frames: { data: Buffer; isBinary: boolean }[]): string {
  const h = createHash('sha256');
  for (const f of frames) {
    h.update(f.isBinary ? 'b' : 't');
    h.update(String(f.data.length) + ':');
    h.update(f.data);
  }
  return h.digest('hex');
}

/** The messages of a captured block rewritten as another block (new number and payload id); optional padding. */
export function asBlock(msgs: Record<string, unknown>[], blockNumber: number, padBytes = 0): Record<string, unknown>[] {
  const payloadId = '0x' + blockNumber.toString(16).padStart(16, '0');
  return msgs.map((m) => {
    const c = structuredClone(m) as Record<string, Record<string, unknown> | unknown>;
    c.payload_id = payloadId;
    (c.metadata as Record<string, unknown>).block_number = blockNumber;
    if (c.base !== null && c.base !== undefined) (c.base as Record<string, unknown>).block_number = '0x' + blockNumber.toString(16);
    if (padBytes > 0) c._pad = 'x'.repeat(padBytes);
    return c as Record<string, unknown>;
  });
}

export const tick = (ms = 0): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolves once the server has processed closes down to `n` open subscribers (its close handler runs per socket). */
export async function subscribersDownTo(stream: { subscriberCount(): number }, n: number): Promise<void> {
  for (let i = 0; i < 10_000 && stream.subscriberCount() > n; i++) await new Promise((r) => setImmediate(r));
}

export async function closeAll(subs: Sub[]): Promise<void> {
  for (const s of subs) s.ws.terminate();
  await Promise.all(subs.map((s) => s.closed));
}

/** One HTTP/1.1 keep-alive connection; `post` writes a request at once and resolves with the response body. */
export async function rawHttp(port: number): Promise<{ post(body: string): Promise<string>; close(): void }> {
  const sock = net.connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    sock.once('connect', resolve);
    sock.once('error', reject);
  });
  let buf = '';
  let waiter: ((body: string) => void) | null = null;
  sock.setEncoding('utf8');
  sock.on('data', (chunk: string) => {
    buf += chunk;
    const head = buf.indexOf('\r\n\r\n');
    if (head < 0 || waiter === null) return;
    const len = Number(/content-length: (\d+)/i.exec(buf.slice(0, head))?.[1] ?? -1);
    if (len < 0 || buf.length < head + 4 + len) return;
    const body = buf.slice(head + 4, head + 4 + len);
    buf = buf.slice(head + 4 + len);
    const w = waiter;
    waiter = null;
    w(body);
  });
  return {
    post(body) {
      const p = new Promise<string>((resolve) => (waiter = resolve));
      sock.write(`POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      return p;
    },
    close: () => sock.destroy(),
  };
}

/** What a test's stream server on its own uWS app holds, in the order {@link closeOnce} ends it. */
export interface StreamParts {
  stream: { drain(graceMs: number): Promise<void> };
  listen: unknown;
  closeListen(listen: unknown): void;
  leases: { close(): void } | null;
  link: { close(): Promise<void> } | null;
}

/** The close of a test's stream server: drain at once, stop listening, end leases and the Redis link; idempotent. */
export function closeOnce(p: StreamParts): () => Promise<void> {
  let closed = false;
  return async () => {
    if (closed) return;
    closed = true;
    await p.stream.drain(0);
    p.closeListen(p.listen);
    p.leases?.close();
    await p.link?.close();
  };
}
