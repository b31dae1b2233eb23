// Forwarding to a real anvil: single calls byte for byte, mixed batches split (one upstream batch) and reassembled
// in order, node errors passed through (reverts keep code 3 and data), node down or slow → a clear error within the
// timeout while pending methods keep answering, refused namespaces and the allow flag.
import t from 'tap';
import { connect, createServer, type Socket } from 'node:net';
import { RpcCode } from '../../src/errors.js';
import { feed } from '../helpers/ingest.js';
import { unichainMessages, unichainRpcBlock } from '../helpers/fixtures.js';
import { freePort, startAnvil, startRpc } from '../helpers/rpc-harness.js';

const anvil = await startAnvil();
t.teardown(() => anvil.stop());
const msgs = unichainMessages();
const canonical = unichainRpcBlock() as { transactions: { hash: string }[]; number: string };
const txHash = canonical.transactions[1]!.hash;

type Env = { id: unknown; result?: unknown; error?: { code: number; message: string; data?: unknown } };

t.test('single calls are forwarded and answered by the node', async (tt) => {
  const h = await startRpc({ nodeUrl: anvil.url });
  tt.teardown(() => h.close());
  tt.same(await h.call('eth_chainId'), { jsonrpc: '2.0', id: 1, result: '0x7a69' });
  const r = await h.post('{"jsonrpc":"2.0","id":"abc","method":"net_version","params":[]}');
  tt.same(JSON.parse(r.text), { jsonrpc: '2.0', id: 'abc', result: '31337' });
  const acct = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
  tt.equal((await h.call('eth_getBalance', [acct, 'latest'])).result, '0x21e19e0c9bab2400000');
  tt.equal((await h.call('eth_getBalance', [acct, 'pending'])).result, '0x21e19e0c9bab2400000', 'no pending state → latest from the node');
  tt.equal(h.ctx.metrics.rpcHandle('eth_chainId', 'node').counter.value, 1);
});

t.test('a revert passes through with code 3 and its data', async (tt) => {
  const h = await startRpc({ nodeUrl: anvil.url });
  tt.teardown(() => h.close());
  const target = '0x' + 'ab'.repeat(20);
  // PUSH4 deadbeef, PUSH1 0, MSTORE, PUSH1 4, PUSH1 28, REVERT
  await anvil.rpc('anvil_setCode', [target, '0x63deadbeef6000526004601cfd']);
  const single = await h.call('eth_call', [{ to: target, data: '0x' }, 'pending']);
  tt.equal(single.error?.code, RpcCode.EXECUTION_REVERTED);
  tt.equal(single.error?.data, '0xdeadbeef');
  const batch = JSON.parse((await h.post(JSON.stringify([
    { jsonrpc: '2.0', id: 1, method: 'eth_call', params: [{ to: target, data: '0x' }, 'latest'] },
    { jsonrpc: '2.0', id: 2, method: 'eth_chainId' },
  ]))).text) as Env[];
  tt.equal(batch[0]!.error?.code, 3);
  tt.equal(batch[0]!.error?.data, '0xdeadbeef');
  tt.equal(batch[1]!.result, '0x7a69');
});

t.test('a mixed batch: local items from state, the rest as one upstream batch, request order kept', async (tt) => {
  const h = await startRpc({ nodeUrl: anvil.url });
  tt.teardown(() => h.close());
  for (const m of msgs) feed(h.pipeline, m);
  const before = h.nodeRequests();
  const body = [
    { jsonrpc: '2.0', id: 'r', method: 'eth_getTransactionReceipt', params: [txHash] },
    { jsonrpc: '2.0', id: 1, method: 'eth_chainId' },
    { jsonrpc: '2.0', id: 1, method: 'eth_getBlockByNumber', params: ['0x0', false] },
    { jsonrpc: '2.0', id: 'n', method: 'eth_blockNumber', params: ['pending'] },
    { jsonrpc: '2.0', method: 'eth_chainId' },
    { jsonrpc: '2.0', id: 'bad', method: 'eth_getBalance', params: ['nothex'] },
    { jsonrpc: '2.0', id: 'bal', method: 'eth_getBalance', params: ['0x' + '77'.repeat(20), 'pending'] },
    { jsonrpc: '2.0', id: 'admin', method: 'admin_peers' },
  ];
  const r = JSON.parse((await h.post(JSON.stringify(body))).text) as Env[];
  tt.same(r.map((x) => x.id), ['r', 1, 1, 'n', 'bad', 'bal', 'admin'], 'order kept, the notification left out, duplicate ids kept apart');
  tt.equal((r[0]!.result as { transactionHash: string }).transactionHash, txHash);
  tt.equal(r[1]!.result, '0x7a69');
  tt.equal((r[2]!.result as { number: string }).number, '0x0');
  tt.equal(r[3]!.result, canonical.number);
  tt.equal(r[4]!.error?.code, RpcCode.INVALID_PARAMS);
  tt.equal(r[5]!.result, '0x0');
  tt.equal(r[6]!.error?.code, RpcCode.METHOD_NOT_FOUND);
  tt.equal(h.nodeRequests() - before, 1, 'one upstream request for all forwarded items');
});

t.test('node down: a clear error fast, pending methods keep answering', async (tt) => {
  // A long node timeout: the refused connection's own error (not -32008) shows nothing waited for it.
  const h = await startRpc({ nodeUrl: `http://127.0.0.1:${await freePort()}/`, config: { nodeTimeoutMs: 30_000 } });
  tt.teardown(() => h.close());
  for (const m of msgs) feed(h.pipeline, m);
  const r = await h.call('eth_chainId');
  tt.equal(r.error?.code, RpcCode.SERVER_ERROR);
  tt.match(r.error?.message, /node unreachable \(ECONNREFUSED\)/);
  tt.equal((await h.call('eth_blockNumber', ['pending'])).result, canonical.number);
  tt.equal(((await h.call('eth_getTransactionReceipt', [txHash])).result as { transactionHash: string }).transactionHash, txHash);
  const batch = JSON.parse((await h.post(JSON.stringify([
    { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: ['pending'] },
    { jsonrpc: '2.0', id: 2, method: 'eth_gasPrice' },
  ]))).text) as Env[];
  tt.equal(batch[0]!.result, canonical.number);
  tt.equal(batch[1]!.error?.code, RpcCode.SERVER_ERROR);
});

t.test('node slow: -32008 after the node timeout', async (tt) => {
  const sockets: Socket[] = [];
  const silent = createServer((s) => void sockets.push(s));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const port = (silent.address() as { port: number }).port;
  tt.teardown(() => {
    for (const s of sockets) s.destroy();
    silent.close();
  });
  const h = await startRpc({ nodeUrl: `http://127.0.0.1:${port}/`, config: { nodeTimeoutMs: 300 } });
  tt.teardown(() => h.close());
  const t0 = performance.now();
  const r = await h.call('eth_chainId');
  const ms = performance.now() - t0;
  tt.ok(ms >= 290, `answered after the timeout, never before (${Math.round(ms)} ms)`);
  tt.equal(r.error?.code, RpcCode.TIMEOUT);
  tt.match(r.error?.message, /did not answer within 300 ms/);
});

t.test('refused namespaces unless allowed', async (tt) => {
  const closed = await startRpc({ nodeUrl: anvil.url });
  tt.teardown(() => closed.close());
  tt.equal((await closed.call('txpool_status')).error?.code, RpcCode.METHOD_NOT_FOUND);
  const open = await startRpc({ nodeUrl: anvil.url, config: { allowNamespaces: ['txpool'] } });
  tt.teardown(() => open.close());
  tt.same((await open.call('txpool_status')).result, { pending: '0x0', queued: '0x0' });
  tt.equal((await open.call('debug_traceTransaction', [txHash])).error?.code, RpcCode.METHOD_NOT_FOUND, 'other namespaces stay refused');
  const before = open.nodeRequests();
  await open.call('admin_nodeInfo');
  tt.equal(open.nodeRequests(), before, 'a refused call never reaches the node');
});

t.test('CORS when configured', async (tt) => {
  const h = await startRpc({ nodeUrl: anvil.url, config: { corsOrigins: ['https://app.example'] } });
  tt.teardown(() => h.close());
  const pre = await fetch(h.url, { method: 'OPTIONS', headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' } });
  tt.equal(pre.status, 204);
  tt.equal(pre.headers.get('access-control-allow-origin'), 'https://app.example');
  tt.match(pre.headers.get('access-control-allow-methods'), /POST/);
  const r = await fetch(h.url, { method: 'POST', headers: { origin: 'https://app.example', 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' });
  tt.equal(r.headers.get('access-control-allow-origin'), 'https://app.example');
  const other = await fetch(h.url, { method: 'POST', headers: { origin: 'https://evil.example', 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' });
  tt.equal(other.headers.get('access-control-allow-origin'), null);
});

t.test('drain: a keep-alive client that sends again right after its answer is answered, with Connection: close, before drain ends', async (tt) => {
  const h = await startRpc({ nodeUrl: anvil.url });
  const sock = connect(h.port, '127.0.0.1');
  await new Promise((resolve) => sock.once('connect', resolve));
  let received = '';
  sock.on('data', (d: Buffer) => (received += d.toString('latin1')));
  const body = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":["pending"]}';
  const request = `POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  /** Resolves with the next whole response on the connection (headers, then Content-Length bytes of body). */
  const answer = async (): Promise<string> => {
    for (;;) {
      const head = received.indexOf('\r\n\r\n');
      const len = head < 0 ? NaN : Number(/content-length: *(\d+)/i.exec(received.slice(0, head))?.[1]);
      if (head >= 0 && received.length >= head + 4 + len) {
        const whole = received.slice(0, head + 4 + len);
        received = received.slice(head + 4 + len);
        return whole;
      }
      await new Promise((resolve) => sock.once('data', resolve));
    }
  };
  sock.write(request);
  const first = await answer();
  tt.match(first, /^HTTP\/1\.1 200/, 'answered before the drain');
  tt.notMatch(first, /connection: close/i, 'and kept alive');
  // The drain starts with nothing in flight; the client's next request follows its answer at once. A quiet spell of
  // 5 s: the request is read long before it ends, however busy the machine.
  let drained = false;
  const drain = h.mounted.drain(20_000, 5_000).then(() => (drained = true));
  sock.write(request);
  const second = await answer();
  tt.equal(drained, false, 'the drain had not ended when the next request was answered');
  tt.match(second, /^HTTP\/1\.1 503/, 'a refusal (the server is draining)');
  tt.match(second, /connection: close/i, 'that closes the connection');
  await drain;
  tt.ok(drained, 'the drain ends once no request has ended for the quiet spell');
  sock.destroy();
  await h.close();
});

t.test('drain: new requests get 503, WebSocket clients are closed with 1001', async (tt) => {
  const h = await startRpc({ nodeUrl: anvil.url });
  const { default: WebSocket } = await import('ws');
  const ws = new WebSocket(h.wsUrl);
  await new Promise((resolve) => ws.once('open', resolve));
  const closed = new Promise<number>((resolve) => ws.once('close', (code: number) => resolve(code)));
  await h.mounted.drain(200);
  tt.equal(await closed, 1001);
  const r = await h.post('{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}');
  tt.equal(r.status, 503);
  await h.close();
});
