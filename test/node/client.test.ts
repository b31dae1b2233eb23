// The node client's contract (on an http:// node): answers, JSON-RPC errors, HTTP errors, basic auth from the URL,
// no node, and a timeout while queued for the pool's only connection. Real HTTP servers on port 0 stand in for the
// node; test/node/http1.test.ts and https.test.ts cover each transport's framing and failure cases.
import t from 'tap';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NodeClient, NodeError, type NodeErrorReason } from '../../src/node/client.js';

async function serve(handler: (req: IncomingMessage, body: string, res: ServerResponse) => void): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => handler(req, body, res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

async function reasonOf(p: Promise<unknown>): Promise<NodeErrorReason | string> {
  try {
    await p;
    return 'resolved';
  } catch (e) {
    return e instanceof NodeError ? e.reason : `not a NodeError: ${String(e)}`;
  }
}

t.test('results, JSON-RPC errors with code and data, and the observed outcomes', async (t) => {
  const seen: Array<NodeErrorReason | null> = [];
  const node = await serve((req, body, res) => {
    const msg = JSON.parse(body) as { id: number; method: string };
    res.writeHead(msg.method === 'boom' ? 500 : 200, { 'content-type': 'application/json' });
    if (msg.method === 'boom') res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: 3, message: 'execution reverted', data: '0x01' } }));
    else res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: `${req.url} ${msg.method}` }));
  });
  const client = new NodeClient({ url: node.url + '/rpc?x=1', timeoutMs: 2000, maxSockets: 2, observe: (_s, err) => seen.push(err) });
  t.teardown(async () => {
    client.close();
    await node.close();
  });
  t.equal(client.enabled, true);
  t.equal(await client.call('eth_chainId', []), '/rpc?x=1 eth_chainId', 'path and query of the URL are kept');
  const err = await client.call('boom', []).then(() => null, (e: unknown) => e);
  t.ok(err instanceof NodeError);
  t.match(err, { reason: 'rpc', message: 'execution reverted', rpcCode: 3, rpcData: '0x01' }, 'a JSON body on HTTP 500 is still the answer');
  const raw = await client.postRaw(Buffer.from('{"jsonrpc":"2.0","id":7,"method":"a"}'));
  t.match(raw.toString(), /"id":7/);
  t.same(seen, [null, null, null]);
});

t.test('HTTP errors without a JSON body, invalid JSON, and basic auth from the URL', async (t) => {
  const node = await serve((req, body, res) => {
    const msg = JSON.parse(body) as { id: number; method: string };
    if (msg.method === 'auth') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: req.headers.authorization ?? null }));
    } else if (msg.method === 'garbage') {
      res.writeHead(200);
      res.end('<html>');
    } else {
      res.writeHead(502);
      res.end('bad gateway');
    }
  });
  const u = new URL(node.url);
  u.username = 'us%20er';
  u.password = 'p:w';
  const client = new NodeClient({ url: u.toString(), timeoutMs: 2000, maxSockets: 1 });
  t.teardown(async () => {
    client.close();
    await node.close();
  });
  t.equal(await client.call('auth', []), 'Basic ' + Buffer.from('us er:p:w').toString('base64'));
  t.equal(await reasonOf(client.call('other', [])), 'http');
  t.equal(await reasonOf(client.call('garbage', [])), 'http');
});

t.test('no URL: disabled, every call fails with reason disabled', async (t) => {
  const client = new NodeClient({ url: '', timeoutMs: 100, maxSockets: 1 });
  t.equal(client.enabled, false);
  t.equal(await reasonOf(client.call('eth_chainId', [])), 'disabled');
  t.equal(await reasonOf(client.postRaw('{}')), 'disabled');
  client.close();
});

t.test('a call that times out while queued behind a slow one is dropped; the slow one still answers', async (t) => {
  let release: (() => void) | null = null;
  let requests = 0;
  const node = await serve((_req, body, res) => {
    requests++;
    const msg = JSON.parse(body) as { id: number };
    const answer = (): void => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: msg.id }));
    };
    if (release === null) release = answer;
    else answer();
  });
  const seen: Array<NodeErrorReason | null> = [];
  const client = new NodeClient({ url: node.url, timeoutMs: 5000, maxSockets: 1, observe: (_s, err) => seen.push(err) });
  t.teardown(async () => {
    client.close();
    await node.close();
  });
  const slow = client.call<number>('slow', []);
  const queued = client.call('queued', [], 50);
  t.equal(await reasonOf(queued), 'timeout');
  (release as unknown as () => void)();
  t.equal(await slow, 1);
  t.equal(await client.call('next', []), 3, 'the connection is usable afterwards');
  t.equal(requests, 2, 'the timed-out call was never sent');
  t.same(seen, ['timeout', null, null]);
});

t.test('extra headers reach the node with every call, an authorization among them over the URL credentials; a header that would break the request makes the client unusable', async (t) => {
  const seen: Array<[string | undefined, string | undefined]> = [];
  const node = await serve((req, body, res) => {
    seen.push([req.headers.authorization, req.headers['x-api-key'] as string | undefined]);
    res.end(JSON.stringify({ jsonrpc: '2.0', id: (JSON.parse(body) as { id: number }).id, result: 1 }));
  });
  t.teardown(() => node.close());
  const client = new NodeClient({ url: node.url.replace('http://', 'http://u:p@'), timeoutMs: 2000, maxSockets: 1, headers: { Authorization: 'Bearer t0k', 'X-Api-Key': 'k1' } });
  t.teardown(() => client.close());
  t.equal(await client.call('a', []), 1);
  t.equal(await client.call('b', []), 1);
  t.same(seen, [['Bearer t0k', 'k1'], ['Bearer t0k', 'k1']], 'both calls carried both headers, the header over the URL credentials');
  const bad = new NodeClient({ url: node.url, timeoutMs: 2000, maxSockets: 1, headers: { 'x-api-key': 'k1\r\nx-evil: 1' } });
  t.match(await bad.call('a', []).then(() => null, (e: unknown) => e), { reason: 'connect', message: /node header "x-api-key" holds a line break/ });
  t.equal(seen.length, 2, 'nothing was sent');
});

t.test('node unreachable: reason connect with the errno', async (t) => {
  const node = await serve(() => {});
  const url = node.url;
  await node.close();
  const client = new NodeClient({ url, timeoutMs: 2000, maxSockets: 1 });
  const err = await client.call('eth_chainId', []).then(() => null, (e: unknown) => e);
  t.match(err, { reason: 'connect', message: /node unreachable \(ECONNREFUSED\)/ });
  client.close();
});

t.test('deadlines of calls in flight at once, across clients and timeouts: each fails at its own, none early', async (t) => {
  // The node answers nothing; calls with later deadlines go first, so each earlier one must re-arm the shared timer.
  const node = await serve(() => {});
  const a = new NodeClient({ url: node.url, timeoutMs: 5000, maxSockets: 4 });
  const b = new NodeClient({ url: node.url, timeoutMs: 5000, maxSockets: 4 });
  t.teardown(async () => {
    a.close();
    b.close();
    await node.close();
  });
  const t0 = performance.now();
  const settledAt = (p: Promise<unknown>): Promise<{ reason: string; ms: number }> =>
    reasonOf(p).then((reason) => ({ reason, ms: performance.now() - t0 }));
  const runs = [
    settledAt(a.call('eth_chainId', [], 400)),
    settledAt(b.call('eth_chainId', [], 250)),
    settledAt(a.call('eth_chainId', [], 60)),
    settledAt(b.call('eth_chainId', [], 150)),
  ];
  const done = await Promise.all(runs);
  const bounds = [400, 250, 60, 150];
  for (let i = 0; i < done.length; i++) {
    t.equal(done[i]!.reason, 'timeout', `call ${i} timed out`);
    t.ok(done[i]!.ms >= bounds[i]! - 1, `call ${i} not before its ${bounds[i]} ms (${done[i]!.ms.toFixed(1)} ms)`);
  }
  const order = done.map((d, i) => [d.ms, bounds[i]!] as const).sort((x, y) => x[0] - y[0]).map((x) => x[1]);
  t.same(order, [60, 150, 250, 400], 'settled in deadline order (one late sweep fails them in that order too)');
  // A call after all that still gets its own deadline.
  t.equal(await reasonOf(a.call('eth_chainId', [], 30)), 'timeout');
});

t.test('calls whose deadlines all passed while the event loop was busy fail in the order they were due', async (t) => {
  const node = await serve(() => {});
  const client = new NodeClient({ url: node.url, timeoutMs: 5000, maxSockets: 4 });
  t.teardown(async () => {
    client.close();
    await node.close();
  });
  const order: number[] = [];
  const runs = [400, 250, 60, 150].map((ms) => reasonOf(client.call('eth_chainId', [], ms)).then(() => void order.push(ms)));
  // The loop is held past every deadline: one sweep finds all four due.
  const until = performance.now() + 450;
  while (performance.now() < until);
  await Promise.all(runs);
  t.same(order, [60, 150, 250, 400]);
});

t.test('a call in flight keeps the process alive until it settles; a settled one does not', async (t) => {
  // A child whose only pending work is one node call (the client's sockets are unref'd): it must wait for the answer
  // (300 ms), then exit at once although the client is still open (its deadline timer must not hold the process).
  const node = await serve((_req, body, res) => {
    const id = (JSON.parse(body) as { id: number }).id;
    setTimeout(() => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id, result: 'late' }));
    }, 300);
  });
  t.teardown(() => node.close());
  const client = new URL('../../src/node/client.ts', import.meta.url).href;
  const script =
    `import { NodeClient } from ${JSON.stringify(client)};\n` +
    `const c = new NodeClient({ url: ${JSON.stringify(node.url)}, timeoutMs: 60000, maxSockets: 1 });\n` +
    `const t0 = performance.now();\n` +
    `c.call('eth_chainId', []).then((r) => console.log(JSON.stringify({ r, ms: performance.now() - t0 })));\n`;
  const { spawn } = await import('node:child_process');
  const t0 = performance.now();
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  const wall = performance.now() - t0;
  t.equal(code, 0, err);
  t.match(out, /"r":"late"/, 'the answer arrived before the process exited');
  t.ok(wall < 30_000, `the process exited once the call settled, not at the 60 s deadline (${wall.toFixed(0)} ms)`);
});
