// Real clients against the RPC server with anvil (--no-mining) as the node: viem with the OP-stack formatters and
// ethers v6 read a preconfirmed transaction (built into flashblocks from anvil's own next block) before anvil mines
// it, count it as 0 confirmations until anvil does, and signed transactions sent through the server reach anvil.
import t from 'tap';
import { createPublicClient, createWalletClient, defineChain, http, parseEther, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { optimism } from 'viem/chains';
import { JsonRpcProvider, Wallet, type TransactionReceipt } from 'ethers';
import { feed } from '../helpers/ingest.js';
import { flashblocksOf, previewNextBlock } from '../helpers/flashblock-builder.js';
import { startRpcOverAnvil } from '../helpers/rpc-harness.js';

const KEY0 = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const KEY1 = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';
const KEY3 = '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6';
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

t.test('before any flashblock, pending answers exactly as latest, never as the node\'s own pending', async (tt) => {
  const anvilPending = await anvil.rpc<{ transactions: string[] }>('eth_getBlockByNumber', ['pending', false]);
  tt.same(anvilPending.transactions, [hash], "anvil's own pending block lists its pooled transaction");
  const same: [string, unknown[], number][] = [
    ['eth_getBlockByNumber', ['pending', false], 0],
    ['eth_getBlockByNumber', ['pending', true], 0],
    ['eth_getBlockReceipts', ['pending'], 0],
    ['eth_getBlockTransactionCountByNumber', ['pending'], 0],
    ['eth_getTransactionByBlockNumberAndIndex', ['pending', '0x0'], 0],
    ['eth_blockNumber', ['pending'], 0],
    ['eth_getBalance', [B, 'pending'], 1],
    ['eth_getBalance', [A, 'pending'], 1],
    ['eth_getCode', [B, 'pending'], 1],
    ['eth_getStorageAt', [B, '0x0', 'pending'], 2],
    ['eth_call', [{ to: B, data: '0x' }, 'pending'], 1],
    ['eth_getProof', [B, [], 'pending'], 2],
    ['eth_feeHistory', ['0x1', 'pending', []], 1],
    ['eth_getUncleCountByBlockNumber', ['pending'], 0],
    ['eth_getLogs', [{ fromBlock: 'pending', toBlock: 'pending' }], -1],
  ];
  for (const [method, params, i] of same) {
    const latest = params.slice();
    if (i >= 0) latest[i] = 'latest';
    else latest[0] = { fromBlock: 'latest', toBlock: 'latest' };
    const a = await h.call(method, params);
    const b = method === 'eth_blockNumber' ? await h.call(method, []) : await h.call(method, latest);
    tt.ok(a.error === undefined, `${method}: ${a.error?.message ?? 'answered'}`);
    tt.same(a.result, b.result, `${method}(${JSON.stringify(params)}) = latest`);
  }
});

let mined = false;
/** Started before the transaction is in any flashblock; each notes whether anvil had mined it when it returned. */
const early = {
  viem: pub.waitForTransactionReceipt({ hash, confirmations: 0, pollingInterval: 10, timeout: 60_000 }).then((r) => ({ r, mined })),
  ethersOne: (async () => {
    const provider = new JsonRpcProvider(h.url, 31337, { staticNetwork: true, pollingInterval: 10 });
    try {
      const r = await provider.waitForTransaction(hash, 1, 60_000);
      return { r, mined };
    } finally {
      provider.destroy();
    }
  })(),
};

/** Calls `attempt` every 10 ms until it returns non-null; resolves `missed` after its first miss. */
function poll10<T>(attempt: () => Promise<T | null>): { missed: Promise<void>; result: Promise<T> } {
  let onMiss!: () => void;
  const missed = new Promise<void>((r) => (onMiss = r));
  const result = (async () => {
    for (;;) {
      const v = await attempt();
      if (v !== null) return v;
      onMiss();
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  return { missed, result };
}

t.test('confirmation count 0 returns at flashblock inclusion, before the canonical block exists', async (tt) => {
  const provider = new JsonRpcProvider(h.url, 31337, { staticNetwork: true, pollingInterval: 10 });
  tt.teardown(() => provider.destroy());
  const response = await provider.getTransaction(hash);
  tt.equal(response?.blockNumber, null, 'ethers sees it in the pool');
  const pollers = [
    poll10(() => pub.getTransactionReceipt({ hash }).catch(() => null)),
    poll10(() => provider.waitForTransaction(hash, 0)),
    poll10(() => response!.wait(0)),
  ];
  await Promise.all(pollers.map((p) => p.missed)); // every client looked before the flashblock
  for (const m of flashblocksOf(preview)) feed(h.pipeline, m);
  const [viemReceipt, ethersWaited, ethersWait0] = await Promise.all(pollers.map((p) => p.result));
  tt.equal(await anvil.rpc('eth_getTransactionReceipt', [hash]), null, 'anvil has not mined it: every receipt is a preconfirmation');
  tt.equal((viemReceipt as { blockNumber: bigint }).blockNumber, pendingNumber);
  for (const r of [ethersWaited, ethersWait0] as TransactionReceipt[]) {
    tt.equal(r.hash, hash);
    tt.equal(BigInt(r.blockNumber), pendingNumber);
    tt.equal(await r.confirmations(), 0, 'ethers counts a preconfirmed transaction as 0 confirmations');
  }
  const late = await pub.waitForTransactionReceipt({ hash, confirmations: 0, pollingInterval: 10, timeout: 5000 });
  tt.equal(late.blockHash, preview.block.hash, 'viem waitForTransactionReceipt started after inclusion returns it at once');
  tt.equal(await provider.getBlockNumber(), Number(pendingNumber) - 1, 'eth_blockNumber without a tag is latest');
});

t.test('viem (OP-stack formatters) reads the preconfirmation', async (tt) => {
  const receipt = await pub.getTransactionReceipt({ hash });
  tt.equal(receipt.transactionHash, hash);
  tt.equal(receipt.status, 'success');
  tt.equal(receipt.blockNumber, pendingNumber);
  tt.equal(receipt.blockHash, preview.block.hash);
  tt.equal(await pub.getBlockNumber({ cacheTime: 0 }), pendingNumber - 1n, 'getBlockNumber is latest');
  const byNumber = await pub.getBlock({ blockNumber: pendingNumber });
  tt.equal(byNumber.hash, preview.block.hash, 'the pending height as a number resolves to the pending block');
  tt.equal(await pub.getBalance({ address: B, blockNumber: pendingNumber }), BigInt(preview.balances[B]!), 'balance at the pending height');
  tt.equal(await pub.getTransactionCount({ address: A, blockNumber: pendingNumber }), 1, 'nonce at the pending height');

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
  const byNumber = await provider.getBlock(Number(pendingNumber));
  tt.equal(byNumber?.hash, preview.block.hash, 'the pending height as a number resolves to the pending block');
});

t.test('ethers: three back-to-back sendTransaction calls from one wallet all succeed (pending nonce counts the node pool)', async (tt) => {
  // cacheTimeout -1: ethers otherwise reuses an identical request's answer for 250 ms, so back-to-back sends collide
  // even against the node itself; with it, every send asks for the pending nonce.
  const provider = new JsonRpcProvider(h.url, 31337, { staticNetwork: true, pollingInterval: 10, cacheTimeout: -1 });
  tt.teardown(() => provider.destroy());
  const signer = new Wallet(KEY3, provider);
  const sent = [];
  for (let i = 0; i < 3; i++) sent.push(await signer.sendTransaction({ to: B, value: 1000n + BigInt(i) }));
  tt.same(sent.map((x) => x.nonce), [0, 1, 2]);
  for (const x of sent) {
    const inPool = await anvil.rpc<{ hash: string } | null>('eth_getTransactionByHash', [x.hash]);
    tt.equal(inPool?.hash, x.hash, `nonce ${x.nonce} reached anvil's pool`);
  }
  tt.equal(await provider.getTransactionCount(signer.address, 'pending'), 3);
  tt.equal(await provider.getTransactionCount(signer.address, 'latest'), 0);
});

t.test('confirmation count 1 returns only once the canonical block exists', async (tt) => {
  tt.equal(await anvil.rpc('eth_getTransactionReceipt', [hash]), null);
  mined = true;
  await anvil.rpc('evm_mine');
  const ethersOne = await early.ethersOne;
  tt.ok(ethersOne.mined, 'ethers waitForTransaction(hash, 1), waiting since before the flashblock, returned after anvil mined it');
  tt.equal(ethersOne.r?.hash, hash);
  // viem re-checks a receipt only on a new eth_blockNumber (and treats 0 confirmations as 1): a wait started before
  // the flashblock returns with the canonical block; one started after it returns at once (above).
  const viem = await early.viem;
  tt.ok(viem.mined, 'viem waitForTransactionReceipt started before the flashblock returned on the new block number');
  tt.equal(viem.r.transactionHash, hash);
});

t.test('ethers sends a signed transaction through the server to anvil', async (tt) => {
  const provider = new JsonRpcProvider(h.url, 31337, { staticNetwork: true, pollingInterval: 10 });
  tt.teardown(() => provider.destroy());
  const signer = new Wallet(KEY1, provider);
  const sent = await signer.sendTransaction({ to: A, value: 12345n });
  const inPool = await anvil.rpc<{ hash: string; nonce: string } | null>('eth_getTransactionByHash', [sent.hash]);
  tt.equal(inPool?.hash, sent.hash);
  await anvil.rpc('evm_mine');
  const minedReceipt = await anvil.rpc<{ status: string } | null>('eth_getTransactionReceipt', [sent.hash]);
  tt.equal(minedReceipt?.status, '0x1', 'anvil mined it');
  const first = await anvil.rpc<{ status: string } | null>('eth_getTransactionReceipt', [hash as Hex]);
  tt.equal(first?.status, '0x1', 'the preconfirmed transfer was mined for real as well');
});
