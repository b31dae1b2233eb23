// `pending` on the devnet (real flashblocks, anvil sealing) through flashblocksd: sampled every 5 ms across block
// boundaries it never goes back (an older block, fewer transactions of the same block, or empty after non-empty)
// and never lags `latest`; a numeric pending height answers like the block it names; ethers and viem see a
// transaction at flashblock inclusion with 0 confirmations and only at the canonical block with 1; a wallet's
// back-to-back sends all get their own nonce.
import t from 'tap';
import { JsonRpcProvider, Wallet } from 'ethers';
import { createWalletClient, defineChain, http, parseTransaction, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { optimism } from 'viem/chains';
import { rpcBatch, rpcCall } from '../../scripts/devnet/anvil.js';
import { startDevnet } from '../../scripts/devnet/sequencer.js';
import { startTraffic } from '../../scripts/devnet/traffic.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon } from '../../src/daemon.js';
import { silentLogger } from '../../src/log.js';
import { holdSealOfTx } from '../helpers/devnet-wait.js';

const BOUNDARIES = Number(process.env.E2E_BOUNDARIES ?? 5);

interface RpcBlock {
  number: string;
  transactions: string[];
}

const devnet = await startDevnet({ blockTimeMs: 1000, flashblockMs: 200 });
t.teardown(() => devnet.stop());
const config = loadConfig(
  ['--flashblocks-url', devnet.flashblocksUrl, '--node-rpc-url', devnet.nodeRpcUrl, '--port', '0', '--metrics-port', '0', '--block-time-ms', '1000', '--log-level', 'error', '--execution', 'false'],
  {},
);
const daemon = await startDaemon(config, { log: silentLogger });
t.teardown(() => daemon.stop());
const rpc = `http://127.0.0.1:${daemon.rpcPort}`;
const traffic = await startTraffic({ rpcUrl: rpc, chainId: devnet.chainId, accounts: devnet.accounts.slice(0, 4), txPerSec: 25 });
t.teardown(() => traffic.stop());
const hex = (n: number): string => '0x' + n.toString(16);

/** Resolves when the devnet emits a flashblock matching `pred`. */
function flashblock(pred: (fb: { index: number; blockNumber: number }) => boolean): Promise<void> {
  return new Promise((resolve) => {
    const off = devnet.onFlashblock((fb) => {
      if (pred(fb)) {
        off();
        resolve();
      }
    });
  });
}

/** Resolves after the devnet has started `n` more blocks. */
function boundaries(n: number): Promise<void> {
  let seen = 0;
  return flashblock((fb) => fb.index === 0 && ++seen >= n);
}

t.test('pending never goes back, never lags latest, and a numeric pending height answers like its block', async (t) => {
  const problems: string[] = [];
  let prev: { number: number; txs: number } | null = null;
  let prevHeight = -1;
  let samples = 0;
  let numeric = 0;
  let running = true;
  const done = boundaries(BOUNDARIES).then(() => void (running = false));
  const acct = devnet.accounts[0]!.address;
  // Across the boundaries, and at least 100 samples however slow the machine (bounded).
  const enoughBy = Date.now() + 60_000;
  while (running || (samples <= 100 && Date.now() < enoughBy)) {
    // latest first: it only grows, so the pending answered after it must not be below it.
    const latest = await rpcCall<RpcBlock>(rpc, 'eth_getBlockByNumber', ['latest', false]);
    const [b, r, hgt] = await rpcBatch(rpc, [
      ['eth_getBlockByNumber', ['pending', false]],
      ['eth_getBlockReceipts', ['pending']],
      ['eth_blockNumber', ['pending']],
    ]);
    samples++;
    if (!b?.ok || !r?.ok || !hgt?.ok) {
      problems.push(`sample ${samples}: error ${JSON.stringify([b, r, hgt].find((x) => !x?.ok))}`);
      continue;
    }
    const block = b.value as RpcBlock;
    const receipts = r.value as { transactionHash: string; blockNumber: string }[];
    const view = { number: Number(block.number), txs: block.transactions.length };
    const lNum = Number(latest.number);
    const where = `sample ${samples}: pending ${view.number}/${view.txs} txs`;
    if (view.number < lNum || (view.number === lNum && view.txs < latest.transactions.length)) {
      problems.push(`${where} is behind latest ${lNum}/${latest.transactions.length}`);
    }
    if (prev !== null && (view.number < prev.number || (view.number === prev.number && view.txs < prev.txs))) {
      problems.push(`${where} went back from ${prev.number}/${prev.txs}`);
    }
    if (prev !== null && prev.txs > 0 && view.txs === 0) problems.push(`${where} went empty after ${prev.number}/${prev.txs}`);
    if (receipts.length !== view.txs || receipts.some((x, i) => x.transactionHash !== block.transactions[i])) {
      problems.push(`${where} beside ${receipts.length} receipts of other transactions`);
    }
    const height = Number(hgt.value);
    if (height < prevHeight || height < lNum) problems.push(`sample ${samples}: eth_blockNumber("pending") ${height} after ${prevHeight}, latest ${lNum}`);
    prevHeight = Math.max(prevHeight, height);
    if (prev === null || view.number > prev.number || view.txs > prev.txs) prev = view;

    // The pending height as a number, as clients pass it on (viem, rundler): never an error, never null.
    if (samples % 4 === 0) {
      numeric++;
      const n = hex(height);
      const res = await rpcBatch(rpc, [
        ['eth_getBlockByNumber', [n, false]],
        ['eth_getBlockReceipts', [n]],
        ['eth_getBlockTransactionCountByNumber', [n]],
        ['eth_getTransactionByBlockNumberAndIndex', [n, '0x0']],
        ['eth_getBalance', [acct, n]],
        ['eth_getTransactionCount', [acct, n]],
      ]);
      const values: unknown[] = [];
      for (const x of res) if (x?.ok) values.push(x.value);
      if (values.length !== res.length) problems.push(`numeric height ${height}: ${JSON.stringify(res.find((x) => !x?.ok))}`);
      else if ((values[0] as RpcBlock | null)?.number !== n) problems.push(`numeric height ${height}: block ${JSON.stringify((values[0] as RpcBlock | null)?.number)}`);
      else if (!Array.isArray(values[1])) problems.push(`numeric height ${height}: receipts ${JSON.stringify(values[1])}`);
    }
    await new Promise((res) => setTimeout(res, 5));
  }
  await done;
  t.ok(samples > 100, `${samples} samples (${numeric} at the numeric pending height) across ${BOUNDARIES} block boundaries`);
  t.same(problems.slice(0, 10), [], `${problems.length} regressions`);
});

t.test('ethers: 0 confirmations at flashblock inclusion, before the canonical block; 1 confirmation only after it', async (t) => {
  const provider = new JsonRpcProvider(rpc, devnet.chainId, { staticNetwork: true, pollingInterval: 10, cacheTimeout: -1 });
  t.teardown(() => provider.destroy());
  const signer = new Wallet(devnet.accounts[9]!.privateKey, provider);
  // The seal of the block holding the tx waits until the reads at 0 confirmations are done (the node answers reads
  // meanwhile), so they run before the canonical block exists however slow the machine is.
  const seal = holdSealOfTx(devnet, t);
  // Sent just after index 0: it lands early in the block, several flashblocks before the seal.
  await flashblock((fb) => fb.index === 0);
  const sent = await signer.sendTransaction({ to: '0x000000000000000000000000000000000000dEaD', value: 1n });
  seal.track(sent.hash);
  const one = provider.waitForTransaction(sent.hash, 1, 20_000).then(async (r) => ({ r, canonical: await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [sent.hash]) }));
  let receipt = await sent.wait(0);
  let misses = 0;
  while (receipt === null) {
    misses++;
    await new Promise((r) => setTimeout(r, 10));
    receipt = await sent.wait(0);
  }
  const canonicalThen = await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [sent.hash]);
  t.equal(receipt.hash, sent.hash, `wait(0) polled every 10 ms returned the receipt (${misses} misses first)`);
  t.equal(canonicalThen, null, 'the node had no receipt yet: the canonical block did not exist');
  t.equal(await receipt.confirmations(), 0, 'ethers counts it as 0 confirmations');
  const waited = await provider.waitForTransaction(sent.hash, 0);
  // The same transaction in the same block; its blockHash is the pending block's as of the newest flashblock (or the
  // canonical one once sealed), so it may have moved on between the two reads.
  t.same([waited?.hash, waited?.blockNumber, waited?.index], [receipt.hash, receipt.blockNumber, receipt.index], 'waitForTransaction(hash, 0) too');
  seal.release();
  const { r, canonical } = await one;
  t.equal(r?.hash, sent.hash);
  t.ok(canonical !== null, 'waitForTransaction(hash, 1) returned once the node had the canonical block');
});

t.test('viem: sendTransactionSync (eth_sendRawTransactionSync) returns at flashblock inclusion', async (t) => {
  const chain = defineChain({ ...optimism, id: devnet.chainId, name: 'devnet', rpcUrls: { default: { http: [rpc] } } });
  const wallet = createWalletClient({ chain, transport: http(rpc), account: privateKeyToAccount(devnet.accounts[7]!.privateKey) });
  // The seal of the block holding the tx (the only one to 0x…dEaD meanwhile: the traffic pays other addresses) waits
  // until the node was asked, so that read runs before the canonical block exists however slow the machine is.
  const dead = '0x000000000000000000000000000000000000dead';
  const ours = new Set<number>();
  const offFlashblocks = devnet.onFlashblock((fb) => {
    for (const raw of fb.diff.transactions) {
      try {
        if (parseTransaction(raw as Hex).to?.toLowerCase() === dead) ours.add(fb.blockNumber);
      } catch {
        // a deposit: not ours
      }
    }
  });
  let readDone: () => void = () => undefined;
  const read = new Promise<void>((r) => (readDone = r));
  const stopHolding = devnet.holdSeals((last) => (ours.has(last.blockNumber) ? read : Promise.resolve()), 60_000);
  t.teardown(() => {
    readDone();
    stopHolding();
    offFlashblocks();
  });
  await flashblock((fb) => fb.index === 0);
  const receipt = await wallet.sendTransactionSync({ to: '0x000000000000000000000000000000000000dEaD', value: 1n, timeout: 5000 });
  const canonicalThen = await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [receipt.transactionHash]);
  readDone();
  stopHolding();
  t.equal(receipt.status, 'success');
  t.equal(canonicalThen, null, 'before the canonical block existed');
});

t.test('ethers: three back-to-back sendTransaction calls from one wallet all succeed', async (t) => {
  const provider = new JsonRpcProvider(rpc, devnet.chainId, { staticNetwork: true, pollingInterval: 10, cacheTimeout: -1 });
  t.teardown(() => provider.destroy());
  const signer = new Wallet(devnet.accounts[8]!.privateKey, provider);
  const sent = [];
  for (let i = 0; i < 3; i++) sent.push(await signer.sendTransaction({ to: '0x000000000000000000000000000000000000dEaD', value: BigInt(i + 1) }));
  t.same(sent.map((x) => x.nonce), [0, 1, 2]);
  const mined = await Promise.all(sent.map((x) => provider.waitForTransaction(x.hash, 1, 20_000)));
  t.same(mined.map((x) => x?.status), [1, 1, 1], 'all three in canonical blocks');
});
