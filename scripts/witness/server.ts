// The witness node's transport: JSON-RPC 2.0 (single and batch) over plain node:http on 127.0.0.1, answering from
// one fixture through methods.ts. For tests and tools only: no auth, no keep-alive tuning, nothing persisted.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadWitnessFixture, type WitnessFixture } from './fixture.js';
import { RpcError, WitnessMethods, type Touched } from './methods.js';

export type { WitnessFixture } from './fixture.js';

/** A running witness node. */
export interface WitnessNode {
  /** http://127.0.0.1:<port>/ */
  url: string;
  fixture: WitnessFixture;
  close(): Promise<void>;
  /** Every account and slot a state method was asked for (lower-case), for tests. */
  touched: Touched;
}

const MAX_BODY_BYTES = 16 * 1024 * 1024;
const MAX_BATCH_CALLS = 10_000;

type Id = string | number | null;

function envelope(id: Id, result: unknown): unknown {
  return { jsonrpc: '2.0', id, result };
}

function errorEnvelope(id: Id, code: number, message: string): unknown {
  return { jsonrpc: '2.0', id, error: { code, message } };
}

/** One request object's answer (never throws). */
function answer(methods: WitnessMethods, req: unknown): unknown {
  if (typeof req !== 'object' || req === null || Array.isArray(req)) return errorEnvelope(null, -32600, 'invalid request: expected a JSON-RPC object');
  const r = req as Record<string, unknown>;
  const id: Id = typeof r.id === 'string' || typeof r.id === 'number' ? r.id : null;
  if (r.jsonrpc !== '2.0' || typeof r.method !== 'string') return errorEnvelope(id, -32600, 'invalid request: needs jsonrpc "2.0" and a method name');
  try {
    return envelope(id, methods.call(r.method, r.params));
  } catch (e) {
    if (e instanceof RpcError) return errorEnvelope(id, e.code, e.message);
    process.stderr.write(`witness node: ${r.method} failed: ${(e as Error).stack ?? String(e)}\n`);
    return errorEnvelope(id, -32603, `internal error in ${r.method}: ${(e as Error).message}`);
  }
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function handle(methods: WitnessMethods, req: IncomingMessage, res: ServerResponse): void {
  if (req.method !== 'POST') {
    reply(res, 405, errorEnvelope(null, -32600, 'the witness node answers JSON-RPC over POST only'));
    return;
  }
  const chunks: Buffer[] = [];
  let bytes = 0;
  let tooLarge = false;
  req.on('data', (c: Buffer) => {
    bytes += c.length;
    if (bytes > MAX_BODY_BYTES) tooLarge = true;
    else chunks.push(c);
  });
  req.on('end', () => {
    if (tooLarge) return reply(res, 413, errorEnvelope(null, -32600, `request body over ${MAX_BODY_BYTES} bytes`));
    let body: unknown;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch (e) {
      return reply(res, 200, errorEnvelope(null, -32700, `parse error: ${(e as Error).message}`));
    }
    if (!Array.isArray(body)) return reply(res, 200, answer(methods, body));
    if (body.length === 0) return reply(res, 200, errorEnvelope(null, -32600, 'invalid request: empty batch'));
    if (body.length > MAX_BATCH_CALLS) return reply(res, 200, errorEnvelope(null, -32600, `batch of ${body.length} calls is over ${MAX_BATCH_CALLS}`));
    reply(res, 200, body.map((r) => answer(methods, r)));
  });
  req.on('error', () => res.destroy());
}

/**
 * Starts a witness node for `fixture` (loaded, or a fixture file to load) on `opts.host` (127.0.0.1) and
 * `opts.port` (0: any free port). Its chain head is the block's parent; state reads walk the parent's tries.
 */
export async function startWitnessNode(fixture: WitnessFixture | string, opts: { port?: number; host?: string } = {}): Promise<WitnessNode> {
  const fx = typeof fixture === 'string' ? await loadWitnessFixture(fixture) : fixture;
  const methods = new WitnessMethods(fx);
  const server = createServer((req, res) => handle(methods, req, res));
  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}/`,
    fixture: fx,
    touched: methods.touched,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
