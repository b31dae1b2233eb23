// Pending execution end to end on the devnet (real anvil node, real flashblocks, the anvil sidecar engine): a
// contract deployed and written by preconfirmed transactions is visible to eth_getCode, eth_getStorageAt, eth_call
// and eth_estimateGas with `pending` before its canonical block exists — through viem and ethers, on a stream with
// receipts and on a post-Azul stream (`?azul=1`) without them. Then: the engine's process killed → reads answer as
// latest (never wrong), the engine restarts and answers resume; the execution metrics move.
import t, { type Test } from 'tap';
import { execFileSync } from 'node:child_process';
import { JsonRpcProvider } from 'ethers';
import { createPublicClient, createWalletClient, defineChain, http, getContractAddress, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { optimism } from 'viem/chains';
import { rpcCall } from '../../scripts/devnet/anvil.js';
import { startDevnet, type Devnet } from '../../scripts/devnet/sequencer.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { createLogger } from '../../src/log.js';

/** Runtime: with calldata, SSTORE(0, calldata[0:32]); always returns SLOAD(0). */
const RUNTIME = '3615600b576000356000555b60005460005260206000f3';
const INIT = `0x60${(RUNTIME.length / 2).toString(16)}600c60003960${(RUNTIME.length / 2).toString(16)}6000f3${RUNTIME}` as Hex;
const word = (n: bigint): Hex => `0x${n.toString(16).padStart(64, '0')}`;

const logs: string[] = [];
const log = createLogger({ level: 'warn', write: (line) => void logs.push(line) });

const devnet = await startDevnet({ blockTimeMs: 2000, flashblockMs: 200 });
t.teardown(() => devnet.stop());

async function boot(t: Test, streamUrl: string): Promise<{ daemon: Daemon; rpc: string }> {
  const config = loadConfig(
    ['--flashblocks-url', streamUrl, '--node-rpc-url', devnet.nodeRpcUrl, '--port', '0', '--metrics-port', '0', '--block-time-ms', '2000', '--log-level', 'warn'],
    {},
  );
  const daemon = await startDaemon(config, { log });
  t.teardown(() => daemon.stop());
  const rpc = `http://127.0.0.1:${daemon.rpcPort}`;
  // The engine is up once it has executed a flashblock.
  await until(() => daemon.execution?.executed != null, 30_000, 'the engine executes a flashblock');
  return { daemon, rpc };
}

async function until(pred: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Resolves at the next flashblock matching `pred`. */
function flashblock(d: Devnet, pred: (fb: { index: number; blockNumber: number }) => boolean): Promise<{ index: number; blockNumber: number }> {
  return new Promise((resolve) => {
    const off = d.onFlashblock((fb) => {
      if (pred(fb)) {
        off();
        resolve(fb);
      }
    });
  });
}

async function scrape(daemon: Daemon): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${daemon.metricsPort}/metrics`);
  return res.text();
}

function metric(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(name + ' ') || line.startsWith(name + '{')) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

let accountIndex = 4;

/**
 * Deploys the contract and writes `value` with two back-to-back preconfirmed transactions sent just after a block
 * started, waits until the daemon serves the write (its receipt, or on a stream without receipts its transaction),
 * and returns what is needed to read it while the canonical block does not exist yet.
 */
async function deployAndWrite(rpc: string, value: bigint, waitFor: 'receipt' | 'transaction') {
  const acct = devnet.accounts[accountIndex++]!;
  const account = privateKeyToAccount(acct.privateKey);
  const chain = defineChain({ ...optimism, id: devnet.chainId, name: 'devnet', rpcUrls: { default: { http: [rpc] } } });
  const wallet = createWalletClient({ account, chain, transport: http(rpc) });
  const nonce = Number(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getTransactionCount', [acct.address, 'latest']));
  const contract = getContractAddress({ from: acct.address, nonce: BigInt(nonce) });
  const fb = await flashblock(devnet, (f) => f.index === 1);
  const fees = { maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000n };
  const deploy = await wallet.sendTransaction({ data: INIT, nonce, gas: 200_000n, ...fees });
  const write = await wallet.sendTransaction({ to: contract, data: word(value), nonce: nonce + 1, gas: 100_000n, ...fees });
  const method = waitFor === 'receipt' ? 'eth_getTransactionReceipt' : 'eth_getTransactionByHash';
  // The node's own eth_getTransactionByHash shows pooled transactions too: only one in a block counts.
  await until(async () => (await rpcCall<{ blockNumber: string | null } | null>(rpc, method, [write]))?.blockNumber != null, 5000, `the daemon serves the write's ${waitFor}`);
  return { account, acct, contract, deploy, write, block: fb.blockNumber, chain };
}

for (const kind of ['receipts', 'azul'] as const) {
  t.test(`code, storage, eth_call and eth_estimateGas with pending before the canonical block (${kind === 'azul' ? '?azul=1, no receipts' : 'stream with receipts'}), viem and ethers`, async (t) => {
    const url = kind === 'azul' ? `${devnet.flashblocksUrl}?azul=1` : devnet.flashblocksUrl;
    const { daemon, rpc } = await boot(t, url);
    const value = 0xc0ffeen + BigInt(accountIndex);
    const w = await deployAndWrite(rpc, value, kind === 'azul' ? 'transaction' : 'receipt');

    // viem
    const client = createPublicClient({ chain: w.chain, transport: http(rpc) });
    const code = await client.getCode({ address: w.contract, blockTag: 'pending' });
    const slot = await client.getStorageAt({ address: w.contract, slot: '0x0', blockTag: 'pending' });
    const called = await client.call({ to: w.contract, blockTag: 'pending', account: w.acct.address });
    const estimate = await client.estimateGas({ account: w.acct.address, to: w.contract, data: word(value + 1n), blockTag: 'pending' });
    // ethers
    const provider = new JsonRpcProvider(rpc, devnet.chainId, { staticNetwork: true, cacheTimeout: -1 });
    t.teardown(() => provider.destroy());
    const eCode = await provider.getCode(w.contract, 'pending');
    const eSlot = await provider.getStorage(w.contract, 0n, 'pending');
    const eCall = await provider.call({ to: w.contract, from: w.acct.address, blockTag: 'pending' });
    const eEstimate = await provider.estimateGas({ from: w.acct.address, to: w.contract, data: word(value + 1n), blockTag: 'pending' });
    // A call without `from` (anvil charges the L1 fee on calls; the engine must not fail it).
    const bare = await rpcCall<string>(rpc, 'eth_call', [{ to: w.contract }, 'pending']);
    const nodeReceipt = await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [w.write]);
    const nodeCode = await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getCode', [w.contract, 'latest']);

    t.equal(nodeReceipt, null, 'the node had no receipt yet: every read above ran before the canonical block existed');
    t.equal(nodeCode, '0x', "the node's latest state has no code there");
    t.equal(code, `0x${RUNTIME}`, 'viem getCode(pending): the deployed runtime');
    t.equal(slot, word(value), 'viem getStorageAt(pending): the preconfirmed write');
    t.equal(called.data, word(value), 'viem call(pending): the contract returns the written value');
    t.equal(eCode, `0x${RUNTIME}`, 'ethers getCode(pending)');
    t.equal(eSlot, word(value), 'ethers getStorage(pending)');
    t.equal(eCall, word(value), 'ethers call(pending)');
    t.equal(bare, word(value), 'eth_call(pending) without from');
    t.equal(eEstimate, estimate, 'ethers and viem estimate the same');

    // Once the block lands, the node's latest answers must equal what pending answered.
    await until(async () => (await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [w.write])) !== null, 10_000, 'the canonical block');
    const nodeEstimate = BigInt(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_estimateGas', [{ from: w.acct.address, to: w.contract, data: word(value + 1n) }, 'latest']));
    t.equal(estimate, nodeEstimate, `estimateGas(pending) before the block = the node's estimate after it (${estimate})`);
    t.equal(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getStorageAt', [w.contract, '0x0', 'latest']), word(value), "the node's storage after the block");

    const text = await scrape(daemon);
    t.ok(metric(text, 'flashblocksd_execution_flashblocks_total') > 0, 'flashblocks executed');
    t.equal(metric(text, 'flashblocksd_execution_up'), 1, 'engine up');
    t.ok(metric(text, 'flashblocksd_execution_apply_seconds_count') > 0, 'apply time observed');
    t.ok(metric(text, 'flashblocksd_execution_verified_total') > 0, 'flashblocks verified against diff.receipts_root');
    t.equal(metric(text, 'flashblocksd_execution_divergences_total'), 0, 'no divergence on the devnet');
  });
}

t.test('eth_getProof with pending is refused; an unknown block tag still is -32602', async (t) => {
  const { rpc } = await boot(t, devnet.flashblocksUrl);
  const res = await fetch(rpc, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getProof', params: [devnet.accounts[0]!.address, [], 'pending'] }) });
  const body = (await res.json()) as { error?: { code: number; message: string } };
  t.equal(body.error?.code, -32602);
  t.match(body.error?.message, /eth_getProof does not answer at "pending"/);
  const bad = await fetch(rpc, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getCode', params: [devnet.accounts[0]!.address, 'Pending'] }) });
  t.equal(((await bad.json()) as { error?: { code: number } }).error?.code, -32602, 'eth_getCode with an unknown tag is -32602');
});

t.test('the engine killed: reads answer as latest (never wrong) until it restarted, then from executed state again', async (t) => {
  const { daemon, rpc } = await boot(t, devnet.flashblocksUrl);
  const pids = (): number[] => {
    try {
      return execFileSync('pgrep', ['-P', String(process.pid), '-f', 'fork-block-number'], { encoding: 'utf8' }).trim().split('\n').filter(Boolean).map(Number);
    } catch {
      return [];
    }
  };
  const before = pids();
  t.ok(before.length >= 1, `engine sidecar(s) running: ${before.join(', ')}`);
  const restartsBefore = metric(await scrape(daemon), 'flashblocksd_execution_restarts_total');
  for (const pid of before) process.kill(pid, 'SIGKILL');
  // Right after the kill, a pending read must not fail and must not be half-applied state: it is the executed
  // answer or the node's latest answer.
  const acct = devnet.accounts[1]!.address;
  const during = await rpcCall<string>(rpc, 'eth_getBalance', [acct, 'pending']);
  const truth = await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getBalance', [acct, 'latest']);
  t.equal(during, truth, `eth_getBalance(pending) answered while the engine was down, and right (an untouched account): ${during}`);
  await until(async () => metric(await scrape(daemon), 'flashblocksd_execution_restarts_total') > restartsBefore, 20_000, 'a restart counted');
  await until(() => daemon.execution?.health().phase === 'up' && daemon.execution.engine.status().ready, 20_000, 'the engine up again');
  const after = pids();
  t.ok(after.length >= 1 && after.every((p) => !before.includes(p)), `a new sidecar: ${after.join(', ')}`);
  // Answers resume correct: a contract written by preconfirmed txs reads back before its block lands.
  const value = 0xbeefn;
  const w = await deployAndWrite(rpc, value, 'receipt');
  const slot = await rpcCall<string>(rpc, 'eth_getStorageAt', [w.contract, '0x0', 'pending']);
  t.equal(await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [w.write]), null, 'before the canonical block');
  t.equal(slot, word(value), 'storage from executed state after the restart');
  const text = await scrape(daemon);
  t.ok(metric(text, 'flashblocksd_execution_restarts_total') > restartsBefore, 'restarts counted');
});
