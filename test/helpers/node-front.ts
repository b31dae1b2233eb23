// Test helper: a JSON-RPC front of a real node on loopback, plain or over TLS, as the execution engine reaches a node:
// it can go down (every request's connection cut), hide blocks (eth_getBlockByNumber answers null, as a node without
// them does), demand an authorization header, change its certificate, and counts the calls that reach the node.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttp, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttps } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Tls {
  key: string;
  cert: string;
  /** The CA that signed `cert` (PEM), for clients to trust. */
  ca: string;
}

/** A throwaway CA and a certificate for 127.0.0.1 it signed, as a private node has (the openssl CLI). */
export function selfSigned(): Tls {
  const dir = mkdtempSync(join(tmpdir(), 'fbd-tls-'));
  const at = (f: string): string => join(dir, f);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const run = (args: string[]): void => void execFileSync('openssl', args, { stdio: 'ignore' });
  try {
    run(['req', '-x509', ...ec, '-days', '1', '-subj', `/CN=flashblocksd test CA ${randomUUID()}`, '-keyout', at('ca.key'), '-out', at('ca.pem')]);
    run(['req', ...ec, '-subj', '/CN=127.0.0.1', '-keyout', at('key.pem'), '-out', at('leaf.csr')]);
    writeFileSync(at('leaf.ext'), 'basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
    run(['x509', '-req', '-in', at('leaf.csr'), '-CA', at('ca.pem'), '-CAkey', at('ca.key'), '-set_serial', '1', '-days', '1', '-extfile', at('leaf.ext'), '-out', at('cert.pem')]);
    const read = (f: string): string => readFileSync(at(f), 'utf8');
    return { key: read('key.pem'), cert: read('cert.pem'), ca: read('ca.pem') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface NodeFrontOptions {
  /** Serve https with this certificate. */
  tls?: Tls;
  /** Every request must carry exactly this Authorization header (else 401). */
  authorization?: string;
  /** And this header (name lower-case, value). */
  header?: [string, string];
}

export interface NodeFront {
  /** http(s)://127.0.0.1:port/ */
  readonly url: string;
  /** Cut every request's connection (a node gone). */
  down: boolean;
  /** Block numbers eth_getBlockByNumber answers null for. */
  readonly hidden: Set<number>;
  /** JSON-RPC calls passed to the node (a batch counts its length). */
  calls: number;
  /** Requests refused for a missing or wrong header. */
  refused: number;
  /** New connections get this certificate (open ones are cut). */
  useCertificate(tls: Tls): void;
  close(): Promise<void>;
}

interface Call {
  id?: unknown;
  method: string;
  params: unknown[];
}

/** Starts a front of the node at `target` on a free port. */
export async function startNodeFront(target: string, o: NodeFrontOptions = {}): Promise<NodeFront> {
  const handle = (req: IncomingMessage, res: ServerResponse): void => void serve(req, res);
  const server = o.tls === undefined ? createHttp(handle) : createHttps({ key: o.tls.key, cert: o.tls.cert }, handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const scheme = o.tls === undefined ? 'http' : 'https';
  const front: NodeFront = {
    url: `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    down: false,
    hidden: new Set(),
    calls: 0,
    refused: 0,
    useCertificate(tls) {
      (server as ReturnType<typeof createHttps>).setSecureContext({ key: tls.key, cert: tls.cert });
      server.closeAllConnections();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  const answer = (res: ServerResponse, status: number, body: string): void => {
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body = '';
    for await (const chunk of req as AsyncIterable<Buffer>) body += chunk.toString('utf8');
    if (front.down) return void req.socket.destroy();
    const [name, value] = o.header ?? ['', ''];
    if ((o.authorization !== undefined && req.headers.authorization !== o.authorization) || (name !== '' && req.headers[name] !== value)) {
      front.refused++;
      return answer(res, 401, '{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"unauthorized"}}');
    }
    const msg = JSON.parse(body) as Call | Call[];
    front.calls += Array.isArray(msg) ? msg.length : 1;
    const late = (c: Call): boolean => c.method === 'eth_getBlockByNumber' && typeof c.params[0] === 'string' && front.hidden.has(Number(c.params[0]));
    if (!Array.isArray(msg) && late(msg)) return answer(res, 200, JSON.stringify({ jsonrpc: '2.0', id: msg.id ?? 1, result: null }));
    const r = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    answer(res, r.status, await r.text());
  }
  return front;
}
