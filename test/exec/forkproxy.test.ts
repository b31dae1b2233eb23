// The loopback endpoint the native engine reads the node at: forwards JSON-RPC bodies through the given poster
// unchanged, counts calls (a batch counts its length), bounds the body, answers 502 without the node's URL when the
// node fails; and the engine reading through it executes against the node's real state.
import t from 'tap';
import { request } from 'undici';
import { rpcCall, startAnvil } from '../../scripts/devnet/anvil.js';
import { callCount, ForkProxy } from '../../src/exec/forkproxy.js';
import { NodeClient } from '../../src/node/client.js';
import { RevmEngine } from '../../src/exec/revm.js';

t.test('callCount: 1 for a single call, the length of a batch', async (t) => {
  t.equal(callCount(Buffer.from('{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}')), 1);
  t.equal(callCount(Buffer.from(' \n[{"id":1},{"id":2},{"id":3}]')), 3);
  t.equal(callCount(Buffer.from('[not json')), 1);
});

t.test('forwards bodies unchanged, counts calls, refuses what it must', async (t) => {
  const seen: string[] = [];
  let fail = false;
  const proxy = await ForkProxy.start(async (body) => {
    seen.push(body.toString());
    if (fail) throw new Error('connect ECONNREFUSED http://user:secret@node.example/key123456789012345');
    return Buffer.from('{"jsonrpc":"2.0","id":1,"result":"0x1"}');
  });
  t.teardown(() => proxy.close());
  t.match(proxy.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  const post = async (body: string, method = 'POST'): Promise<{ status: number; text: string }> => {
    const r = await request(proxy.url, { method: method as 'POST', body: method === 'POST' ? body : null, headers: { 'content-type': 'application/json' } });
    return { status: r.statusCode, text: await r.body.text() };
  };
  const one = await post('{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}');
  t.same(one, { status: 200, text: '{"jsonrpc":"2.0","id":1,"result":"0x1"}' }, 'the node\'s answer, unchanged');
  t.equal(seen[0], '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}', 'the body, unchanged');
  await post('[{"id":1},{"id":2}]');
  t.equal(proxy.reads, 3, 'a single call and a batch of 2');
  proxy.note(5);
  t.equal(proxy.reads, 8, 'calls the engine makes itself are counted too');
  t.equal((await post('', 'GET')).status, 405, 'GET refused');
  t.equal((await post('x'.repeat(9 * 1024 * 1024))).status, 413, 'a body over 8 MiB refused');
  t.equal(seen.length, 2, 'neither reached the node');
  fail = true;
  const bad = await post('{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":[]}');
  t.equal(bad.status, 502, 'the node failing is a 502');
  t.notMatch(bad.text, /secret|node\.example|key1234/, 'its message does not carry the node URL');
});

t.test('the native engine reading through the proxy (over the daemon\'s node client) executes against the node\'s state; its reads are counted', async (t) => {
  const node = await startAnvil({ automine: true });
  t.teardown(() => node.stop());
  const client = new NodeClient({ url: node.url, timeoutMs: 5000, maxSockets: 4 });
  t.teardown(() => client.close());
  const engine = new RevmEngine({ nodePost: (b) => client.postRaw(b), specAt: () => 'isthmus' });
  t.teardown(() => engine.stop());
  await rpcCall(node.url, 'evm_mine', []);
  const head = Number(await rpcCall<string>(node.url, 'eth_blockNumber'));
  await engine.start(head);
  const blk = await rpcCall<Record<string, string>>(node.url, 'eth_getBlockByNumber', ['latest', false]);
  const env = {
    number: head + 1, timestamp: Number(blk.timestamp) + 2, baseFeePerGas: BigInt(blk.baseFeePerGas!), feeRecipient: blk.miner!,
    gasLimit: BigInt(blk.gasLimit!), prevRandao: blk.mixHash!, parentHash: blk.hash!,
  };
  const out = await engine.applyFlashblock({ blockNumber: head + 1, index: 0, env, txs: [], receiptsRoot: null });
  t.equal(out.ok, true, 'an empty flashblock executed');
  const funded = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
  t.equal(await engine.getBalance(funded), BigInt(await rpcCall<string>(node.url, 'eth_getBalance', [funded, 'latest'])), 'a balance read through the proxy = the node\'s');
  const reads = engine.status().nodeReads ?? 0;
  t.ok(reads > 0, `canonical state reads counted: ${reads}`);
});
