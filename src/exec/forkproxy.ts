// The node as the native engine sees it: a loopback plain-HTTP endpoint that forwards each JSON-RPC POST to the node
// through a poster the daemon gives (its own node client: TLS, credentials and URL paths stay in this process's JS,
// never in the native core) and counts the calls — the engine's canonical state reads. Knows nothing of the engine
// or flashblocks.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One JSON-RPC POST to the node: the request body in, the response body out; rejects on transport or HTTP errors. */
export type NodePost = (body: Buffer) => Promise<Buffer>;

/** Largest request body forwarded (the engine's reads are single calls or small batches). */
const MAX_BODY = 8 * 1024 * 1024;

/** JSON-RPC calls in a request body: the length of a batch, else 1. */
export function callCount(body: Buffer): number {
  let i = 0;
  while (i < body.length && (body[i] === 0x20 || body[i] === 0x0a || body[i] === 0x0d || body[i] === 0x09)) i++;
  if (body[i] !== 0x5b) return 1;
  try {
    const v: unknown = JSON.parse(body.toString('utf8'));
    return Array.isArray(v) ? v.length : 1;
  } catch {
    return 1;
  }
}

export class ForkProxy {
  private count = 0;

  private constructor(
    private readonly server: Server,
    /** http URL the native engine reads the node at. */
    readonly url: string,
  ) {}

  /** Listens on 127.0.0.1 (a free port) and forwards through `post`. */
  static async start(post: NodePost): Promise<ForkProxy> {
    let proxy: ForkProxy | null = null;
    const server = createServer((req, res) => void proxy!.forward(post, req, res));
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, resolve);
    });
    proxy = new ForkProxy(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return proxy;
  }

  /** JSON-RPC calls forwarded to the node so far (the engine's canonical state reads). */
  get reads(): number {
    return this.count;
  }

  /** Counts calls the engine's TypeScript side makes to the node itself (not through this proxy). */
  note(calls: number): void {
    this.count += calls;
  }

  /** Stops listening and closes its connections. */
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private async forward(post: NodePost, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const reply = (status: number, body: string): void => {
      if (res.headersSent || res.destroyed) return;
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    };
    if (req.method !== 'POST') return reply(405, '{"error":"POST only"}');
    const parts: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of req as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > MAX_BODY) return reply(413, '{"error":"request body too large"}');
        parts.push(chunk);
      }
    } catch {
      return; // the client went away
    }
    const body = Buffer.concat(parts);
    this.count += callCount(body);
    try {
      const answer = await post(body);
      if (res.headersSent || res.destroyed) return;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length });
      res.end(answer);
    } catch (e) {
      // The engine sees a failed node call (an E_NODE error); the message never carries the node's URL.
      reply(502, JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32603, message: `node unavailable: ${(e as Error).name}` } }));
    }
  }
}
