// The engine reaches its node itself (native/src/node.rs for its reads, src/exec/endpoint.ts for its own few calls):
// over TLS with a CA it is given, the URL's credentials as a Basic authorization and extra headers on every call, every
// call counted in nodeReads; a certificate no trusted CA signed fails with a clear message that names no URL.
// Fronts of a real anvil node (test/helpers/node-front.ts), a CA and a certificate made by openssl for the run.
import t, { type Test } from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rpcCall, startAnvil, type Anvil } from '../../scripts/devnet/anvil.js';
import { txBatch, type FlashblockWork } from '../../src/exec/engine.js';
import { RevmEngine } from '../../src/exec/revm.js';
import { net } from '../helpers/exec-net.js';
import { selfSigned, startNodeFront, type Tls } from '../helpers/node-front.js';

const FUNDED = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';

/** `tls`'s CA in a file, removed at `t`'s teardown. */
function caFile(t: Test, tls: Tls): string {
  const dir = mkdtempSync(join(tmpdir(), 'fbd-ca-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'ca.pem'), tls.ca);
  return join(dir, 'ca.pem');
}

/** An empty flashblock 0 of the block after the node's head. */
async function emptyNext(node: Anvil): Promise<FlashblockWork> {
  const blk = await rpcCall<Record<string, string>>(node.url, 'eth_getBlockByNumber', ['latest', false]);
  const env = {
    number: Number(blk.number) + 1, timestamp: Number(blk.timestamp) + 2, baseFeePerGas: BigInt(blk.baseFeePerGas!), feeRecipient: blk.miner!,
    gasLimit: BigInt(blk.gasLimit!), prevRandao: blk.mixHash!, parentHash: blk.hash!,
  };
  return { blockNumber: env.number, index: 0, env, txs: txBatch([]), receiptsRoot: null };
}

function engine(t: Test, node: { url: string; headers?: Record<string, string>; caFile?: string }): RevmEngine {
  const e = new RevmEngine({ node, specAt: () => 'isthmus', nodeTimeoutMs: 3000 });
  t.teardown(() => e.stop());
  return e;
}

t.test("an https node with its CA and credentials in the URL: flashblocks execute and verify, reads answer; every call carries the authorization and is counted", async (t) => {
  const { node, c, blocks } = await net(t, 1, 2, 6);
  const b = blocks[0]!;
  const tls = selfSigned();
  const front = await startNodeFront(node.url, { tls, authorization: 'Basic ' + Buffer.from('us@r:pa ss').toString('base64') });
  t.teardown(() => front.close());
  const e = engine(t, { url: front.url.replace('https://', 'https://us%40r:pa%20ss@') + 'v1/k3y', caFile: caFile(t, tls) });
  await e.start(b.number - 1);
  for (const fb of b.flashblocks) {
    const out = await e.applyFlashblock(fb);
    t.ok(out.ok && out.verified === true, `${fb.blockNumber}/${fb.index} executed over TLS and verified${out.ok ? '' : `: ${out.message}`}`);
  }
  t.equal(BigInt(await e.call({ to: c.reader })), b.sinkBalances[b.sinkBalances.length - 1], 'eth_call at pending answers the executed state');
  t.equal(front.refused, 0, 'no call without the Basic authorization');
  t.ok(front.calls > 1, `the node was read over TLS (${front.calls} calls)`);
  t.equal(e.status().nodeReads, front.calls, 'nodeReads counts every JSON-RPC call that reached the node (a batch its length)');
});

t.test('extra headers, given once, reach the node with every call; an Authorization header wins over the URL credentials', async (t) => {
  const node = await startAnvil({ automine: true });
  t.teardown(() => node.stop());
  await rpcCall(node.url, 'evm_mine', []);
  const front = await startNodeFront(node.url, { authorization: 'Bearer t0k', header: ['x-api-key', 'k1'] });
  t.teardown(() => front.close());
  const e = engine(t, { url: front.url.replace('http://', 'http://old:creds@'), headers: { Authorization: 'Bearer t0k', 'X-Api-Key': 'k1' } });
  const fb = await emptyNext(node);
  await e.start(fb.blockNumber - 1);
  t.equal((await e.applyFlashblock(fb)).ok, true, 'a flashblock executed');
  t.equal(await e.getBalance(FUNDED), BigInt(await rpcCall<string>(node.url, 'eth_getBalance', [FUNDED, 'latest'])), "a balance read from the node = the node's");
  t.equal(front.refused, 0, 'every call carried both headers');
  t.equal(e.status().nodeReads, front.calls, `every call counted (${front.calls})`);
});

t.test('a certificate no trusted CA signed: a clear error naming no URL, at start and on a read of the native engine', async (t) => {
  const node = await startAnvil({ automine: true });
  t.teardown(() => node.stop());
  await rpcCall(node.url, 'evm_mine', []);
  const [good, other] = [selfSigned(), selfSigned()];
  const front = await startNodeFront(node.url, { tls: good });
  t.teardown(() => front.close());
  const secretUrl = front.url.replace('https://', 'https://user:s3cret@') + 'k3y-0f-the-provider';
  const url = /s3cret|k3y-0f|127\.0\.0\.1|https:/;

  const wrong = engine(t, { url: secretUrl, caFile: caFile(t, other) });
  const why = await wrong.start(1).then(() => 'started', (e: unknown) => (e as Error).message);
  t.match(why, /^node TLS failed: [A-Z_]+$/, `start refused: ${why}`);
  t.notMatch(why, url, 'without the URL, its credentials or its host');

  const e = engine(t, { url: secretUrl, caFile: caFile(t, good) });
  const fb = await emptyNext(node);
  await e.start(fb.blockNumber - 1);
  front.useCertificate(other);
  const out = await e.applyFlashblock(fb);
  const message = out.ok ? await e.getBalance(FUNDED).then(() => 'answered', (err: unknown) => (err as Error).message) : out.message;
  t.match(message, /node TLS failed: .*UnknownIssuer.*give the engine the node's CA/, `the native engine says what is wrong: ${message}`);
  t.notMatch(message, url, 'without the URL, its credentials or its host');
});
