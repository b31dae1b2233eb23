// The node client on an https:// node (undici's Pool over TLS): a real node:https server on loopback with a
// self-signed certificate made by openssl for this run. Answers with the API key in the path and basic auth, the
// size bound, a timeout, a stale kept-alive socket retried for a read, and no credentials in any message.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NodeClient, NodeError } from '../../src/node/client.js';

/** A throwaway self-signed certificate for 127.0.0.1. */
function selfSigned(): { key: string; cert: string } {
  const dir = mkdtempSync(join(tmpdir(), 'fbd-tls-'));
  try {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
      '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
    ], { stdio: 'ignore' });
    return { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function failure(p: Promise<unknown>): Promise<NodeError | string> {
  try {
    await p;
    return 'resolved';
  } catch (e) {
    return e instanceof NodeError ? e : `not a NodeError: ${String(e)}`;
  }
}

const SECRET = 'k3y-0f-the-provider';

t.test('an https node: answers, auth, the size bound, a timeout, a stale socket', async (t) => {
  const tls = selfSigned();
  const perSocket = new WeakMap<object, number>();
  let connections = 0;
  const server: Server = createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const msg = JSON.parse(body) as { id: number; method: string; params: unknown[] };
      const sock = req.socket as TLSSocket;
      const n = perSocket.get(sock) ?? 0;
      perSocket.set(sock, n + 1);
      if (msg.method === 'slow') return; // never answered
      if (msg.params[0] === 'stale' && n > 0) {
        sock.destroy();
        return;
      }
      const result = msg.method === 'big' ? 'z'.repeat(5000) : msg.method === 'auth' ? (req.headers.authorization ?? null) : `${req.url} ${msg.method}`;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
    });
  });
  server.on('secureConnection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const client = new NodeClient({ url: `https://user:pw@127.0.0.1:${port}/v2/${SECRET}`, timeoutMs: 2000, maxSockets: 1, maxResponseBytes: 4096, ca: tls.cert });
  t.teardown(async () => {
    client.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  t.equal(await client.call('eth_chainId', []), `/v2/${SECRET} eth_chainId`, 'the API key in the path reaches the node');
  t.equal(await client.call('auth', []), 'Basic ' + Buffer.from('user:pw').toString('base64'));
  t.match(await failure(client.call('big', [])), { reason: 'http', limitBytes: 4096 });
  t.match(await failure(client.call('slow', [], 50)), { reason: 'timeout' });
  // A new connection now (the timed-out one was aborted); its second request finds it closed: read again once.
  const before = connections;
  t.equal(await client.call('eth_getBlockByNumber', ['stale']), `/v2/${SECRET} eth_getBlockByNumber`);
  t.equal(await client.call('eth_getBlockByNumber', ['stale']), `/v2/${SECRET} eth_getBlockByNumber`, 'sent again on a new connection');
  t.equal(connections, before + 2);
  t.match(await failure(client.call('eth_sendRawTransaction', ['stale'])), { reason: 'connect' }, 'a submission is not sent twice');
  t.equal(connections, before + 2);
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  const down = await failure(client.call('eth_chainId', []));
  t.match(down, { reason: 'connect' });
  t.notMatch(String((down as Error).message), SECRET);
});

t.test('an https node with a certificate nobody trusts is unreachable (connect) and says TLS failed, never a throw', async (t) => {
  const tls = selfSigned();
  const server: Server = createServer({ key: tls.key, cert: tls.cert }, (_req, res) => res.end('{}'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const client = new NodeClient({ url: `https://127.0.0.1:${port}/${SECRET}`, timeoutMs: 2000, maxSockets: 1 });
  t.teardown(async () => {
    client.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const e = await failure(client.call('eth_chainId', []));
  t.match(e, { reason: 'connect', message: /^node TLS failed: [A-Z_]+$/ });
  t.notMatch(String((e as Error).message), SECRET);
});
