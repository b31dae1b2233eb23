// X Layer access lists (EIP-7928 post-values in `metadata.access_list`) end to end on the devnet streaming as X Layer
// (`?dialect=xlayer`, real anvil node, real frames): pending eth_getBalance / eth_getTransactionCount / eth_getCode
// answer the listed post-values once the frame is applied, before the canonical block, equal to the node's values
// once it lands, with the engine off and on; with the engine on, every executed flashblock's list is cross-checked
// against the executed state: none differs on honest frames, and one tampered balance counts one divergence.
import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { createWalletClient, defineChain, getContractAddress, http, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { optimism } from 'viem/chains';
import { rpcCall } from '../../scripts/devnet/anvil.js';
import { startDevnet } from '../../scripts/devnet/sequencer.js';
import { startTraffic } from '../../scripts/devnet/traffic.js';
import { decodeAccessList } from '../../src/chain/access-list.js';
import { bigIntToBytes } from '../../src/chain/hex.js';
import { encodeRlp } from '../../src/chain/rlp.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { createLogger } from '../../src/log.js';
import { startReplayServer } from '../helpers/replay-server.js';
import { holdSealOfTx, nextFlashblock } from '../helpers/devnet-wait.js';

/** Runtime: returns 42. */
const RUNTIME = '602a60005260206000f3';
const INIT = `0x600a600c600039600a6000f3${RUNTIME}` as Hex;

const logs: string[] = [];
const log = createLogger({ level: 'warn', write: (line) => void logs.push(line) });

const devnet = await startDevnet({ blockTimeMs: 2000, flashblockMs: 200 });
t.teardown(() => devnet.stop());
const XLAYER = `${devnet.flashblocksUrl}?dialect=xlayer`;

async function boot(t: Test, streamUrl: string, execution: boolean): Promise<{ daemon: Daemon; rpc: string }> {
  const config = loadConfig(
    ['--flashblocks-url', streamUrl, '--node-rpc-url', devnet.nodeRpcUrl, '--port', '0', '--metrics-port', '0', '--block-time-ms', '2000', '--log-level', 'warn', '--execution', String(execution)],
    {},
  );
  const daemon = await startDaemon(config, { log });
  t.teardown(() => daemon.stop());
  if (execution) await until(() => daemon.execution?.executed != null, 30_000, 'the engine executes a flashblock');
  return { daemon, rpc: `http://127.0.0.1:${daemon.rpcPort}` };
}

async function until(pred: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function metric(daemon: Daemon, series: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${daemon.metricsPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

const DIVERGENCES = 'flashblocksd_execution_divergences_total{source="access_list"}';
let accountIndex = 6;

for (const execution of [false, true]) {
  t.test(`pending balance, nonce and code answer the access list's post-values before the canonical block, equal to the node's after it (engine ${execution ? 'on' : 'off'})`, async (t) => {
    const { daemon, rpc } = await boot(t, XLAYER, execution);
    const acct = devnet.accounts[accountIndex++]!;
    const account = privateKeyToAccount(acct.privateKey);
    const chain = defineChain({ ...optimism, id: devnet.chainId, name: 'devnet', rpcUrls: { default: { http: [rpc] } } });
    const wallet = createWalletClient({ account, chain, transport: http(rpc) });
    const nonce = Number(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getTransactionCount', [acct.address, 'latest']));
    const contract = getContractAddress({ from: acct.address, nonce: BigInt(nonce) });
    const before = await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getBalance', [acct.address, 'latest']);
    // The seal of the block holding the deploy waits until the pending reads below are done (the node answers reads
    // meanwhile), so they run before the canonical block exists however slow the machine is.
    const seal = holdSealOfTx(devnet, t);
    // Sent just after a block's index 1: it lands several flashblocks before the seal.
    await nextFlashblock(devnet, (fb) => fb.index === 1);
    const fees = { maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000n };
    const deploy = await wallet.sendTransaction({ data: INIT, nonce, gas: 200_000n, ...fees });
    seal.track(deploy);
    await until(async () => (await rpcCall<{ blockNumber: string | null } | null>(rpc, 'eth_getTransactionByHash', [deploy]))?.blockNumber != null, 5000, 'the daemon serves the deploy');
    const [balance, count, code, nodeReceipt] = await Promise.all([
      rpcCall<string>(rpc, 'eth_getBalance', [acct.address, 'pending']),
      rpcCall<string>(rpc, 'eth_getTransactionCount', [acct.address, 'pending']),
      rpcCall<string>(rpc, 'eth_getCode', [contract, 'pending']),
      rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [deploy]),
    ]);
    seal.release();
    t.equal(nodeReceipt, null, 'the node had no receipt yet: the reads ran before the canonical block existed');
    t.not(balance, before, 'the pending balance is not the node latest one (fees paid)');
    t.equal(BigInt(count), BigInt(nonce + 1), 'pending nonce: one after the deploy');
    t.equal(code, `0x${RUNTIME}`, 'pending code of the contract deployed in the frame');

    await until(async () => (await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [deploy])) !== null, 10_000, 'the canonical block');
    t.equal(balance, await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getBalance', [acct.address, 'latest']), "pending balance before the block = the node's after it");
    t.equal(count, await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getTransactionCount', [acct.address, 'latest']), "pending nonce before the block = the node's after it");
    t.equal(code, await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getCode', [contract, 'latest']), "pending code before the block = the node's after it");
    if (execution) t.equal(await metric(daemon, DIVERGENCES), 0, 'no access-list divergence');
  });
}

t.test('execution is cross-checked against the access lists: none differs on honest frames, a tampered balance counts one divergence naming block, index, account and field', async (t) => {
  // Relay the devnet's X Layer stream; one frame with transactions gets one listed balance raised by 1 wei.
  const relay = await startReplayServer();
  t.teardown(() => relay.close());
  const upstream = new WebSocket(XLAYER);
  t.teardown(() => upstream.terminate());
  let tamper = false;
  let tampered: { block: number; index: number; account: string } | null = null;
  upstream.on('message', (data) => {
    let frame = data.toString();
    if (tamper && tampered === null) {
      const m = JSON.parse(frame) as { index: number; diff: { transactions: string[] }; metadata: { block_number: number; access_list: string } };
      const d = decodeAccessList(m.metadata.access_list);
      const victim = d.ok && m.index > 0 && m.diff.transactions.length > 0 ? d.accounts.find((a) => a.balanceChanges.length > 0) : undefined;
      if (d.ok && victim !== undefined) {
        const list = d.accounts.map((a) => [
          Buffer.from(a.address.slice(2), 'hex'),
          a.storageChanges.map((s) => [Buffer.from(s.slot.slice(2), 'hex'), s.changes.map((c) => [bigIntToBytes(BigInt(c.index)), bigIntToBytes(c.value)])]),
          a.storageReads.map((s) => Buffer.from(s.slice(2), 'hex')),
          a.balanceChanges.map((c) => [bigIntToBytes(BigInt(c.index)), bigIntToBytes(a === victim ? c.value + 1n : c.value)]),
          a.nonceChanges.map((c) => [bigIntToBytes(BigInt(c.index)), bigIntToBytes(c.value)]),
          a.codeChanges.map((c) => [bigIntToBytes(BigInt(c.index)), Buffer.from(c.value.slice(2), 'hex')]),
        ]);
        m.metadata.access_list = '0x' + encodeRlp(list).toString('hex');
        frame = JSON.stringify(m);
        tampered = { block: m.metadata.block_number, index: m.index, account: victim.address };
      }
    }
    relay.send(frame);
  });
  await new Promise((r) => upstream.once('open', r));
  const { daemon } = await boot(t, relay.url, true);
  const traffic = await startTraffic({ rpcUrl: devnet.nodeRpcUrl, chainId: devnet.chainId, accounts: devnet.accounts.slice(accountIndex, accountIndex + 3), txPerSec: 20 });
  t.teardown(() => traffic.stop());
  // Two blocks of honest frames with traffic, executed and cross-checked.
  const honestFrom = daemon.execution!.executed!.number;
  await until(() => (daemon.execution?.executed?.number ?? 0) >= honestFrom + 2, 20_000, 'two blocks executed');
  t.equal(await metric(daemon, DIVERGENCES), 0, 'honest frames: no access-list divergence');
  t.ok((await metric(daemon, 'flashblocksd_execution_verified_total')) > 0, 'the executed flashblocks verified against diff.receipts_root');

  tamper = true;
  await until(() => tampered !== null, 20_000, 'a frame with transactions to tamper with');
  const at = tampered!;
  await until(() => { const e = daemon.execution?.executed; return e != null && (e.number > at.block || (e.number === at.block && e.index >= at.index)); }, 10_000, 'the tampered flashblock executed');
  await until(async () => (await metric(daemon, DIVERGENCES)) >= 1, 5000, 'the divergence counted');
  // A few more flashblocks: still exactly the one.
  await until(() => (daemon.execution?.executed?.number ?? 0) >= at.block + 1, 10_000, 'the next block executed');
  await traffic.stop();
  t.equal(await metric(daemon, DIVERGENCES), 1, 'one tampered balance: one access_list divergence');
  const line = logs.find((l) => l.includes('access list disagrees with execution'));
  t.ok(line, 'a warn line says so');
  t.match(line, new RegExp(`"block":${at.block}`), 'naming the block');
  t.match(line, new RegExp(`"index":${at.index}`), 'and the index');
  t.match(line, new RegExp(at.account), 'and the account');
  t.match(line, /"field":"balance"/, 'and the field');
});
