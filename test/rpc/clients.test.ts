// Real clients against the RPC server with anvil (--no-mining) as the node: viem with the OP-stack formatters and
// ethers v6 read a preconfirmed transaction (built into flashblocks from anvil's own next block) before anvil mines
// it, and signed transactions sent through the server reach anvil.
import t from 'tap';
import { createPublicClient, createWalletClient, defineChain, http, parseEther, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { optimism } from 'viem/chains';
import { JsonRpcProvider, Wallet } from 'ethers';
import { feed } from '../helpers/ingest.js';
import { flashblocksOf, previewNextBlock } from '../helpers/flashblock-builder.js';
import { startRpcOverAnvil } from '../helpers/rpc-harness.js';

const KEY0 = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const KEY1 = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';
const A = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
const B = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8';

const { anvil, h } = await startRpcOverAnvil(t, ['--no-mining']);

const chain = defineChain({ ...optimism, id: 31337, name: 'anvil (op)', rpcUrls: { default: { http: [h.url] } } });
const pub = createPublicClient({ chain, transport: http(h.url), pollingInterval: 10 });
const wallet = createWalletClient({ chain, transport: http(h.url), account: privateKeyToAccount(KEY0) });

// A transfer sent through the server, preconfirmed in a flashblock built from anvil's own next block.
const hash = await wallet.sendTransaction({ to: B, value: parseEther('1') });
const preview = await previewNextBlock(anvil, [A, B]);
const pendingNumber = BigInt(preview.block.number);

t.test('the transfer reached anvil through the server and is not mined yet', async (tt) => {
  const inPool = await anvil.rpc<{ hash: string } | null>('eth_getTransactionByHash', [hash]);
  tt.equal(inPool?.hash, hash);
  tt.equal(await anvil.rpc('eth_getTransactionReceipt', [hash]), null);
  tt.same(preview.block.transactions, [hash]);
});

t.test('viem (OP-stack formatters) waits for and reads the preconfirmation', async (tt) => {
  const waiting = pub.waitForTransactionReceipt({ hash, confirmations: 0, pollingInterval: 10, timeout: 5000 });
  await new Promise((r) => setTimeout(r, 60)); // viem's first receipt lookup misses: not preconfirmed yet
  for (const m of flashblocksOf(preview)) feed(h.pipeline, m);
  const receipt = await waiting;
  tt.equal(receipt.transactionHash, hash);
  tt.equal(receipt.status, 'success');
  tt.equal(receipt.blockNumber, pendingNumber);
  tt.equal(receipt.blockHash, preview.block.hash);
  tt.equal(await anvil.rpc('eth_getTransactionReceipt', [hash]), null, 'anvil has not mined it: the receipt is a preconfirmation');

  const block = await pub.getBlock({ blockTag: 'pending', includeTransactions: true });
  tt.equal(block.number, pendingNumber);
  tt.equal(block.transactions.length, 1);
  tt.equal(block.transactions[0]!.hash, hash);
  tt.equal(block.transactions[0]!.from.toLowerCase(), A);
  tt.equal(block.transactions[0]!.value, parseEther('1'));

  const again = await pub.getTransactionReceipt({ hash });
  tt.equal(again.gasUsed, 21000n);
  tt.equal(await pub.getBalance({ address: B, blockTag: 'pending' }), BigInt(preview.balances[B]!));
  tt.equal(await pub.getBalance({ address: B, blockTag: 'latest' }), parseEther('10000'), 'latest is still the node');
  tt.equal(await pub.getTransactionCount({ address: A, blockTag: 'pending' }), 1);
  const tx = await pub.getTransaction({ hash });
  tt.equal(tx.blockNumber, pendingNumber);
});

t.test('ethers v6 reads the same preconfirmed state', async (tt) => {
  const provider = new JsonRpcProvider(h.url, 31337, { staticNetwork: true, pollingInterval: 10 });
  tt.teardown(() => provider.destroy());
  const block = await provider.getBlock('pending', true);
  tt.equal(block?.number, Number(pendingNumber));
  tt.equal(block?.prefetchedTransactions[0]?.hash, hash);
  tt.equal(block?.prefetchedTransactions[0]?.from.toLowerCase(), A);
  const receipt = await provider.getTransactionReceipt(hash);
  tt.equal(receipt?.status, 1);
  tt.equal(receipt?.blockHash, preview.block.hash);
  tt.equal(receipt?.gasUsed, 21000n);
  tt.equal(await provider.getBalance(B, 'pending'), BigInt(preview.balances[B]!));
  tt.equal(await provider.getTransactionCount(A, 'pending'), 1);
  const waited = await provider.waitForTransaction(hash, 0, 2000);
  tt.equal(waited?.hash, hash);
});

t.test('ethers sends a signed transaction through the server to anvil', async (tt) => {
  const provider = new JsonRpcProvider(h.url, 31337, { staticNetwork: true, pollingInterval: 10 });
  tt.teardown(() => provider.destroy());
  const signer = new Wallet(KEY1, provider);
  const sent = await signer.sendTransaction({ to: A, value: 12345n });
  const inPool = await anvil.rpc<{ hash: string; nonce: string } | null>('eth_getTransactionByHash', [sent.hash]);
  tt.equal(inPool?.hash, sent.hash);
  await anvil.rpc('evm_mine');
  const mined = await anvil.rpc<{ status: string } | null>('eth_getTransactionReceipt', [sent.hash]);
  tt.equal(mined?.status, '0x1', 'anvil mined it');
  const first = await anvil.rpc<{ status: string } | null>('eth_getTransactionReceipt', [hash as Hex]);
  tt.equal(first?.status, '0x1', 'the preconfirmed transfer was mined for real as well');
});
