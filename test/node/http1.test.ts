// The node client's HTTP/1.1 pool over node:net (http:// nodes) against real servers on loopback: node:http where a
// framing is to be provoked, raw node:net servers where the node must misbehave at a precise byte, anvil for a
// real node. Keep-alive reuse and the socket cap, chunked and close-delimited answers, oversized answers, timeouts in
// flight, a socket cut mid-answer, a stale kept-alive socket (retried once for reads, reported for submissions), a
// node restart, close(), and no URL credentials in any message.
import t from 'tap';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { NodeClient, NodeError, type NodeErrorReason } from '../../src/node/client.js';
import { startAnvil, startRpc } from '../helpers/rpc-harness.js';

interface Served {
  url: string;
  port: number;
  /** TCP connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

/** A node:http server on `port` (0 = any) answering through `handler`. */
async function serveHttp(handler: (req: IncomingMessage, body: string, res: ServerResponse) => void, port = 0, keepAliveTimeoutMs = 5000): Promise<Served> {
  let connections = 0;
  const server: Server = createServer({ keepAliveTimeout: keepAliveTimeoutMs }, (req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => handler(req, body, res));
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const p = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${p}`,
    port: p,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A raw TCP server: `onRequest` is called once per complete request head+body seen on a socket (n = its index on that socket). */
async function serveRaw(onRequest: (socket: net.Socket, body: string, n: number, conn: number) => void): Promise<Served> {
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    const conn = connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buf = '';
    let n = 0;
    socket.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end === -1) return;
        const len = Number(/content-length: (\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0);
        if (buf.length < end + 4 + len) return;
        const body = buf.slice(end + 4, end + 4 + len);
        buf = buf.slice(end + 4 + len);
        onRequest(socket, body, n++, conn);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const p = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${p}`,
    port: p,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function idOf(body: string): number {
  return (JSON.parse(body) as { id: number }).id;
}

function answer(id: number, result: unknown): string {
  return JSON.stringify({ jsonrpc: '2.0', id, result });
}

async function failure(p: Promise<unknown>): Promise<NodeError | string> {
  try {
    await p;
    return 'resolved';
  } catch (e) {
    return e instanceof NodeError ? e : `not a NodeError: ${String(e)}`;
  }
}

async function reasonOf(p: Promise<unknown>): Promise<NodeErrorReason | string> {
  const e = await failure(p);
  return typeof e === 'string' ? e : e.reason;
}

t.test('sequential calls reuse one kept-alive connection; concurrent ones stay under the socket cap', async (t) => {
  let inFlight = 0;
  let most = 0;
  const node = await serveHttp((_req, body, res) => {
    inFlight++;
    most = Math.max(most, inFlight);
    setTimeout(() => {
      inFlight--;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(answer(idOf(body), 'ok'));
    }, 5);
  });
  const client = new NodeClient({ url: node.url, timeoutMs: 2000, maxSockets: 2 });
  t.teardown(async () => {
    client.close();
    await node.close();
  });
  for (let i = 0; i < 5; i++) t.equal(await client.call('eth_chainId', []), 'ok');
  t.equal(node.connections(), 1, 'one connection for five sequential calls');
  const all = await Promise.all(Array.from({ length: 8 }, () => client.call('eth_chainId', [])));
  t.same(all, Array(8).fill('ok'));
  t.equal(most, 2, 'never more than maxSockets requests at the node at once');
  t.equal(node.connections(), 2);
});

t.test('a chunked answer and a close-delimited answer', async (t) => {
  const node = await serveHttp((_req, body, res) => {
    const id = idOf(body);
    res.writeHead(200, { 'content-type': 'application/json' });
    // No Content-Length: node:http sends it chunked, one chunk per write.
    const text = answer(id, 'x'.repeat(10_000));
    res.write(text.slice(0, 7));
    setTimeout(() => res.end(text.slice(7)), 5);
  });
  const raw = await serveRaw((socket, body) => {
    const text = answer(idOf(body), 'until close');
    socket.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n' + text.slice(0, 10));
    setTimeout(() => socket.end(text.slice(10)), 5);
  });
  const a = new NodeClient({ url: node.url, timeoutMs: 2000, maxSockets: 1 });
  const b = new NodeClient({ url: raw.url, timeoutMs: 2000, maxSockets: 1 });
  t.teardown(async () => {
    a.close();
    b.close();
    await node.close();
    await raw.close();
  });
  t.equal(await a.call('eth_chainId', []), 'x'.repeat(10_000));
  t.equal(await a.call('eth_chainId', []), 'x'.repeat(10_000), 'the connection is reused after a chunked answer');
  t.equal(node.connections(), 1);
  t.equal(await b.call('eth_chainId', []), 'until close');
  t.equal(await b.call('eth_chainId', []), 'until close', 'a new connection after a close-delimited answer');
  t.equal(raw.connections(), 2);
});

t.test('an idle socket past the idle cap, or the server\'s Keep-Alive hint less a second, is not reused', async (t) => {
  const handler = (_req: IncomingMessage, body: string, res: ServerResponse): void => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(answer(idOf(body), 1));
  };
  const node = await serveHttp(handler);
  const client = new NodeClient({ url: node.url, timeoutMs: 2000, maxSockets: 1, keepAliveIdleMs: 30 });
  t.teardown(async () => {
    client.close();
    await node.close();
  });
  t.equal(await client.call('eth_chainId', []), 1);
  t.equal(await client.call('eth_chainId', []), 1);
  t.equal(node.connections(), 1, 'reused while fresh');
  await new Promise((r) => setTimeout(r, 60));
  t.equal(await client.call('eth_chainId', []), 1);
  t.equal(node.connections(), 2, 'a new connection after the idle cap');
  // node:http announces `Keep-Alive: timeout=1` for a 1 s keep-alive: less a second leaves nothing to reuse.
  const short = await serveHttp(handler, 0, 1000);
  const c2 = new NodeClient({ url: short.url, timeoutMs: 2000, maxSockets: 1 });
  t.teardown(async () => {
    c2.close();
    await short.close();
  });
  t.equal(await c2.call('eth_chainId', []), 1);
  t.equal(await c2.call('eth_chainId', []), 1);
  t.equal(short.connections(), 2, 'a 1 s hint: a new connection per call');
});

t.test('a non-ASCII body goes out with its byte length, a Buffer body as is', async (t) => {
  const node = await serveHttp((req, body, res) => {
    const msg = JSON.parse(body) as { id: number; params: unknown[] };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(answer(msg.id, { params: msg.params, length: Number(req.headers['content-length']), bytes: Buffer.byteLength(body) }));
  });
  const client = new NodeClient({ url: node.url, timeoutMs: 2000, maxSockets: 1 });
  t.teardown(async () => {
    client.close();
    await node.close();
  });
  const r = await client.call<{ params: string[]; length: number; bytes: number }>('web3_sha3', ['héllo ✓ 𝄞']);
  t.same(r.params, ['héllo ✓ 𝄞']);
  t.equal(r.length, r.bytes);
  const raw = await client.postRaw(Buffer.from('{"jsonrpc":"2.0","id":3,"method":"x","params":["€"]}'));
  t.match(JSON.parse(raw.toString()), { id: 3, result: { params: ['€'], length: 54 } });
});

t.test('Connection: close is honoured: the next call opens a new connection', async (t) => {
  const node = await serveHttp((_req, body, res) => {
    res.writeHead(200, { 'content-type': 'application/json', connection: 'close' });
    res.end(answer(idOf(body), 1));
  });
  const client = new NodeClient({ url: node.url, timeoutMs: 2000, maxSockets: 1 });
  t.teardown(async () => {
    client.close();
    await node.close();
  });
  t.equal(await client.call('eth_chainId', []), 1);
  t.equal(await client.call('eth_chainId', []), 1);
  t.equal(node.connections(), 2);
});

t.test('an answer over maxResponseBytes fails with reason http and the bound; the client keeps working', async (t) => {
  const node = await serveHttp((_req, body, res) => {
    const msg = JSON.parse(body) as { id: number; method: string };
    const big = answer(msg.id, 'y'.repeat(5000));
    if (msg.method === 'length') {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(big) });
      res.end(big);
    } else if (msg.method === 'chunked') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(big.slice(0, 1000));
      res.end(big.slice(1000));
    } else {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(answer(msg.id, 'small'));
    }
  });
  const seen: Array<NodeErrorReason | null> = [];
  const client = new NodeClient({ url: node.url, timeoutMs: 2000, maxSockets: 1, maxResponseBytes: 4096, observe: (_s, e) => seen.push(e) });
  t.teardown(async () => {
    client.close();
    await node.close();
  });
  for (const how of ['length', 'chunked']) {
    const e = await failure(client.call(how, []));
    t.match(e, { reason: 'http', limitBytes: 4096, message: 'node answer exceeds 4096 bytes' }, `${how}: refused`);
    t.equal(await client.call('small', []), 'small', `${how}: the next call is answered`);
  }
  t.same(seen, ['http', null, 'http', null]);
});

t.test('a call that times out in flight closes its connection; the next call gets a new one', async (t) => {
  let closedByClient = 0;
  const node = await serveRaw((socket, body, _n, conn) => {
    socket.on('close', () => closedByClient++);
    if (conn === 0) return; // the first connection never answers
    socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${answer(idOf(body), 2).length}\r\n\r\n${answer(idOf(body), 2)}`);
  });
  const seen: Array<NodeErrorReason | null> = [];
  const client = new NodeClient({ url: node.url, timeoutMs: 2000, maxSockets: 1, observe: (_s, e) => seen.push(e) });
  t.teardown(async () => {
    client.close();
    await node.close();
  });
  const e = await failure(client.call('eth_chainId', [], 50));
  t.match(e, { reason: 'timeout', message: 'node did not answer within 50 ms' });
  t.equal(await client.call('eth_chainId', []), 2);
  t.equal(node.connections(), 2);
  t.equal(closedByClient >= 1, true, 'the timed-out connection was closed');
  t.same(seen, ['timeout', null]);
});

t.test('a connection cut mid-answer fails with reason connect', async (t) => {
  const node = await serveRaw((socket) => {
    socket.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"jsonrpc":');
    setTimeout(() => socket.destroy(), 5);
  });
  const client = new NodeClient({ url: node.url, timeoutMs: 2000, maxSockets: 1 });
  t.teardown(async () => {
    client.close();
    await node.close();
  });
  t.match(await failure(client.call('eth_chainId', [])), { reason: 'connect', message: 'node connection broke mid-response' });
});

t.test('garbage instead of HTTP fails with reason http', async (t) => {
  const node = await serveRaw((socket) => socket.write('SSH-2.0-OpenSSH_9.2\r\n\r\n'));
  const client = new NodeClient({ url: node.url, timeoutMs: 2000, maxSockets: 1 });
  t.teardown(async () => {
    client.close();
    await node.close();
  });
  t.match(await failure(client.call('eth_chainId', [])), { reason: 'http', message: /invalid HTTP answer: malformed HTTP status line/ });
});

t.test('a kept-alive socket the node closed under a request: reads are sent again once, submissions are not', async (t) => {
  // Each connection answers its first request and closes without a word on its second: what a client sees when
  // the node closed an idle socket just as a request went out on it.
  const requests: Array<{ conn: number; n: number; method: string }> = [];
  const node = await serveRaw((socket, body, n, conn) => {
    const msg = JSON.parse(body) as { id: number; method: string };
    requests.push({ conn, n, method: msg.method });
    if (n > 0) {
      socket.destroy();
      return;
    }
    const text = answer(msg.id, `${msg.method}@${conn}`);
    socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${text.length}\r\n\r\n${text}`);
  });
  const client = new NodeClient({ url: node.url, timeoutMs: 2000, maxSockets: 1 });
  t.teardown(async () => {
    client.close();
    await node.close();
  });
  t.equal(await client.call('eth_chainId', []), 'eth_chainId@0');
  t.equal(await client.call('eth_getBlockByNumber', ['latest', false]), 'eth_getBlockByNumber@1', 'the read went out again on a new connection');
  const e = await failure(client.call('eth_sendRawTransaction', ['0x00']));
  t.match(e, { reason: 'connect', message: /node closed the connection before answering/ }, 'a submission is reported, not sent twice');
  t.same(requests.map((r) => `${r.conn}.${r.n}:${r.method}`), ['0.0:eth_chainId', '0.1:eth_getBlockByNumber', '1.0:eth_getBlockByNumber', '1.1:eth_sendRawTransaction']);
  // A raw body (the dispatcher's forwarding) is retried only when the caller says it only reads.
  t.equal((await client.postRaw('{"jsonrpc":"2.0","id":9,"method":"eth_chainId"}', undefined, true)).toString(), answer(9, 'eth_chainId@2'));
  t.equal(await reasonOf(client.postRaw('{"jsonrpc":"2.0","id":9,"method":"eth_chainId"}')), 'connect');
});

t.test('a node restart: calls fail with reason connect while it is down and are answered once it is back', async (t) => {
  const handler = (_req: IncomingMessage, body: string, res: ServerResponse): void => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(answer(idOf(body), 'up'));
  };
  let node = await serveHttp(handler);
  const client = new NodeClient({ url: node.url, timeoutMs: 2000, maxSockets: 4 });
  t.teardown(async () => {
    client.close();
    await node.close();
  });
  await Promise.all([client.call('eth_chainId', []), client.call('eth_chainId', [])]);
  await node.close();
  t.match(await failure(client.call('eth_chainId', [])), { reason: 'connect', message: 'node unreachable (ECONNREFUSED)' });
  node = await serveHttp(handler, node.port);
  t.equal(await client.call('eth_chainId', []), 'up');
  t.equal(await client.call('eth_blockNumber', []), 'up');
});

t.test('anvil: answers, a JSON-RPC error, and the node gone', async (t) => {
  const anvil = await startAnvil();
  const client = new NodeClient({ url: anvil.url, timeoutMs: 5000, maxSockets: 4 });
  t.teardown(async () => {
    client.close();
    await anvil.stop();
  });
  t.equal(await client.call('eth_chainId', []), '0x7a69');
  const block = await client.call<{ number: string }>('eth_getBlockByNumber', ['latest', false]);
  t.equal(block.number, '0x0');
  t.match(await failure(client.call('eth_getBalance', ['0x12', 'latest'])), { reason: 'rpc' });
  await anvil.stop();
  t.equal(await reasonOf(client.call('eth_chainId', [])), 'connect', 'the node is gone');
});

t.test('close(): calls in flight and queued fail with reason connect; later calls too', async (t) => {
  const node = await serveRaw(() => {});
  const client = new NodeClient({ url: node.url, timeoutMs: 2000, maxSockets: 1 });
  t.teardown(() => node.close());
  const inFlight = failure(client.call('eth_chainId', []));
  const queued = failure(client.call('eth_chainId', []));
  await new Promise((r) => setTimeout(r, 20));
  client.close();
  t.match(await inFlight, { reason: 'connect', message: 'node client closed' });
  t.match(await queued, { reason: 'connect', message: 'node client closed' });
  t.equal(await reasonOf(client.call('eth_chainId', [])), 'connect');
});

t.test('no message carries the credentials or the path of the URL', async (t) => {
  const closed = await serveRaw(() => {});
  const port = closed.port;
  await closed.close();
  const secret = 'sup3r-s3cret-key';
  const client = new NodeClient({ url: `http://user:${secret}@127.0.0.1:${port}/v1/${secret}`, timeoutMs: 2000, maxSockets: 1 });
  const e = await failure(client.call('eth_chainId', []));
  t.match(e, { reason: 'connect' });
  t.notMatch(String((e as Error).message), secret);
  t.notMatch(String((e as Error).stack), secret);
  client.close();
  const bad = new NodeClient({ url: `ftp://user:${secret}@127.0.0.1/`, timeoutMs: 2000, maxSockets: 1 });
  const e2 = await failure(bad.call('eth_chainId', []));
  t.match(e2, { reason: 'connect', message: /not an http:\/\/ or https:\/\/ URL/ });
  t.notMatch(String((e2 as Error).message), secret);
});

t.test('through the dispatcher: an answer over the bound is -32005, a stale socket under a forwarded read is not seen', async (t) => {
  let cut = 0;
  const node = await serveRaw((socket, body, n) => {
    const msg = JSON.parse(body) as { id: number | string; method: string };
    if (n > 0 && msg.method === 'eth_getCode') {
      cut++;
      socket.destroy();
      return;
    }
    const text = JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: msg.method === 'eth_getLogs' ? 'l'.repeat(8000) : '0x1' });
    socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${text.length}\r\n\r\n${text}`);
  });
  const h = await startRpc({ nodeUrl: node.url });
  const client = new NodeClient({ url: node.url, timeoutMs: 2000, maxSockets: 1, maxResponseBytes: 4096 });
  (h.ctx as { node: NodeClient }).node = client;
  t.teardown(async () => {
    client.close();
    await h.close();
    await node.close();
  });
  const big = await h.call('eth_getLogs', [{}]);
  t.match(big.error, { code: -32005, message: 'response exceeds the 4096-byte limit' });
  t.same((await h.call('eth_chainId')).result, '0x1');
  t.same((await h.call('eth_getCode', ['0x0000000000000000000000000000000000000001', 'latest'])).result, '0x1', 'read again on a new connection');
  t.equal(cut, 1, 'the first try was cut');
  t.equal(node.connections(), 3);
});
