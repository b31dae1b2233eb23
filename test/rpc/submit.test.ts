// eth_sendRawTransactionSync against anvil (--no-mining): answered by the flashblock that includes the transaction,
// by the node when it mines first, and with EIP-7966 code 4 (data = the hash) on timeout.
import t from 'tap';
import { createWalletClient, defineChain, http, parseEther } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { optimism } from 'viem/chains';
import { feed } from '../helpers/ingest.js';
import { flashblocksOf, previewNextBlock } from '../helpers/flashblock-builder.js';
import { startRpcOverAnvil } from '../helpers/rpc-harness.js';

const KEY2 = '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a';
const B = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8';
const { anvil, h } = await startRpcOverAnvil(t, ['--no-mining']);
const chain = defineChain({ ...optimism, id: 31337, name: 'anvil (op)', rpcUrls: { default: { http: [h.url] } } });
const wallet = createWalletClient({ chain, transport: http(anvil.url), account: privateKeyToAccount(KEY2) });

async function signed(nonce: number): Promise<`0x${string}`> {
  const req = await wallet.prepareTransactionRequest({ to: B, value: parseEther('0.1'), nonce, gas: 21000n });
  return wallet.signTransaction(req);
}

t.test('resolves with the receipt of the flashblock that includes it', async (tt) => {
  const raw = await signed(0);
  let answered = false;
  const pending = h.call('eth_sendRawTransactionSync', [raw, 3000]).finally(() => (answered = true));
  await new Promise((r) => setTimeout(r, 100));
  const preview = await previewNextBlock(anvil, []);
  tt.notOk(answered, 'no answer before the flashblock that includes it');
  for (const m of flashblocksOf(preview)) feed(h.pipeline, m);
  const r = await pending;
  // A receipt, not the timeout's error (code 4), and not mined (below): the flashblock answered it. (No clock: a
  // busy machine may take long, never 3 s, to get here.)
  tt.equal(r.error, undefined, 'answered with a result, not the timeout');
  const receipt = r.result as { transactionHash: string; blockHash: string; status: string };
  tt.equal(receipt.transactionHash, preview.block.transactions[0]);
  tt.equal(receipt.blockHash, preview.block.hash);
  tt.equal(receipt.status, '0x1');
  tt.equal(await anvil.rpc('eth_getTransactionReceipt', [receipt.transactionHash]), null, 'a preconfirmation, not mined yet');
  await anvil.rpc('evm_mine');
});

t.test('times out with code 4 and the hash as data; a bad timeout uses the default', async (tt) => {
  const raw = await signed(1);
  const t0 = performance.now();
  const r = await h.call('eth_sendRawTransactionSync', [raw, '0xc8']);
  const ms = performance.now() - t0;
  // Never early; the message names the 200 ms asked for (the default would be 10 s).
  tt.ok(ms >= 190, `not before 200 ms (${Math.round(ms)})`);
  tt.equal(r.error?.code, 4);
  tt.match(r.error?.message, /wasn't processed in 200 ms/);
  tt.match(r.error?.data, /^0x[0-9a-f]{64}$/);
  tt.ok(await anvil.rpc('eth_getTransactionByHash', [r.error?.data]), 'it was submitted to the node');
});

t.test('a receipt from the node (mined before any flashblock) also answers', async (tt) => {
  const raw = await signed(2);
  const pending = h.call('eth_sendRawTransactionSync', [raw, 3000]);
  await new Promise((r) => setTimeout(r, 100));
  await anvil.rpc('evm_mine');
  h.pipeline.events.emitCanonical(0, () => {});
  const r = await pending;
  tt.equal((r.result as { status: string }).status, '0x1');
});

t.test('node errors come back at once; undecodable input is -32602', async (tt) => {
  const raw = await signed(0); // nonce already used
  const r = await h.call('eth_sendRawTransactionSync', [raw, 3000]);
  tt.ok(r.error !== undefined, `node error: ${r.error?.message}`);
  const bad = await h.call('eth_sendRawTransactionSync', ['0x1234']);
  tt.equal(bad.error?.code, -32602);
  // op-core's post-exec vector: it decodes, but only the sequencer may build one (lagoon/post-exec.md).
  const postExec = await h.call('eth_sendRawTransactionSync', ['0x7dc7012a7bc3c20307']);
  tt.equal(postExec.error?.code, -32602);
  tt.match(postExec.error?.message, /post-exec/);
});

t.test('the timeout is accepted as a JSON number and as a hex quantity (EIP-7966 moved to integers)', async (tt) => {
  const cases: [unknown, number][] = [
    [150, 150],
    ['0x96', 150],
    [250, 250],
  ];
  let nonce = 3;
  for (const [timeout, ms] of cases) {
    const r = await h.call('eth_sendRawTransactionSync', [await signed(nonce++), timeout]);
    tt.equal(r.error?.code, 4, `${JSON.stringify(timeout)}: code 4`);
    tt.match(r.error?.message, new RegExp(`wasn't processed in ${ms} ms`), `${JSON.stringify(timeout)} is ${ms} ms`);
  }
});
