// A chain without a preset is never executed under a guessed fork: the devnet run with chain id 4242 (no preset; its
// anvil answers eth_config with a Prague-level config, which is isthmus, jovian or karst on an OP chain). With
// --execution-hardfork auto the daemon says so at start-up, refuses execution (one error line naming
// --execution-hardfork; /readyz execution down, not ready) and answers pending state reads as latest, counted with
// reason "execution", while the stream side serves the preconfirmed receipt as ever. With --execution-hardfork isthmus
// the same chain is executed: pending reads answer from executed state, the spec metric shows isthmus. With
// --chain op-mainnet the spec in force by its schedule today (karst) is in the start-up line and the metric.
import t, { type Test } from 'tap';
import { createWalletClient, defineChain, getContractAddress, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { optimism } from 'viem/chains';
import { rpcCall } from '../../scripts/devnet/anvil.js';
import { startDevnet } from '../../scripts/devnet/sequencer.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { createLogger } from '../../src/log.js';
import { holdSealOfTx, nextFlashblock } from '../helpers/devnet-wait.js';
import { STORE_INIT, STORE_RUNTIME } from '../helpers/store-contract.js';
import { metricValue } from '../helpers/metrics-text.js';

const CHAIN_ID = 4242;
const devnet = await startDevnet({ blockTimeMs: 1000, flashblockMs: 200, anvil: { chainId: CHAIN_ID } });
t.teardown(() => devnet.stop());

interface Booted {
  daemon: Daemon;
  rpc: string;
  lines: { level: string; msg: string; [k: string]: unknown }[];
}

async function boot(t: Test, extra: string[]): Promise<Booted> {
  const lines: Booted['lines'] = [];
  const log = createLogger({ level: 'info', write: (line) => void lines.push(JSON.parse(line) as Booted['lines'][number]) });
  const config = loadConfig(['--flashblocks-url', devnet.flashblocksUrl, '--node-rpc-url', devnet.nodeRpcUrl, '--port', '0', '--metrics-port', '0', ...extra], {});
  const daemon = await startDaemon(config, { log });
  t.teardown(() => daemon.stop());
  return { daemon, rpc: `http://127.0.0.1:${daemon.rpcPort}`, lines };
}

async function until(pred: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** One series of the daemon's /metrics (0 when absent). */
async function metric(daemon: Daemon, series: string): Promise<number> {
  return metricValue(await (await fetch(`http://127.0.0.1:${daemon.metricsPort}/metrics`)).text(), series);
}

let accountIndex = 5;

/**
 * Deploys the storage contract through the daemon with the seal of its block held, waits until the daemon serves its
 * receipt from the stream (the block is only preconfirmed), and calls `read` then; releases the seal after.
 */
async function whilePreconfirmed<T>(t: Test, rpc: string, read: (contract: string) => Promise<T>): Promise<T> {
  const acct = devnet.accounts[accountIndex++]!;
  const account = privateKeyToAccount(acct.privateKey);
  const chain = defineChain({ ...optimism, id: CHAIN_ID, name: 'no-preset', rpcUrls: { default: { http: [rpc] } } });
  const wallet = createWalletClient({ account, chain, transport: http(rpc) });
  const nonce = Number(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getTransactionCount', [acct.address, 'latest']));
  const contract = getContractAddress({ from: acct.address, nonce: BigInt(nonce) });
  const seal = holdSealOfTx(devnet, t);
  await nextFlashblock(devnet, (f) => f.index === 1);
  const hash = await wallet.sendTransaction({ data: STORE_INIT, nonce, gas: 200_000n, maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000n });
  seal.track(hash);
  await until(async () => (await rpcCall<{ blockNumber: string | null } | null>(rpc, 'eth_getTransactionReceipt', [hash]))?.blockNumber != null, 60_000, 'the daemon serves the receipt at pending');
  t.equal(await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [hash]), null, 'the node has no receipt yet: the block is only preconfirmed');
  try {
    return await read(contract);
  } finally {
    seal.release();
  }
}

t.test('--execution-hardfork auto on a chain without a preset: execution refused, pending state reads as latest, the stream served', async (t) => {
  const { daemon, rpc, lines } = await boot(t, []);
  const start = lines.find((l) => l.msg.startsWith('chain: '));
  t.match(start, { level: 'info', chainId: CHAIN_ID, spec: null, msg: /^chain: id 4242 has no preset: .*; execution refused \(no fork known\): give --execution-hardfork <fork>$/ }, `the start-up line: ${start?.msg}`);
  await until(() => lines.some((l) => l.msg.startsWith('execution engine cannot run')), 60_000, 'the execution error line');
  const refused = lines.find((l) => l.msg.startsWith('execution engine cannot run'))!;
  t.equal(refused.level, 'error', 'said once, as an error');
  t.match(refused.msg, /pending state reads answer as latest: chain 4242 has no preset and the node's eth_config shows a Prague-level .* isthmus or jovian or karst .*; give --execution-hardfork <fork>$/, refused.msg);
  t.notOk(lines.some((l) => l.msg === 'execution engine started'), 'the engine never started');

  const ready = await fetch(`http://127.0.0.1:${daemon.metricsPort}/readyz`);
  const report = (await ready.json()) as { ready: boolean; checks: { execution: { ok: boolean; detail: string } } };
  t.equal(ready.status, 503, '/readyz: not ready');
  t.equal(report.checks.execution.ok, false, 'its execution check fails');
  t.match(report.checks.execution.detail, /^down: .*--execution-hardfork/, `with the reason: ${report.checks.execution.detail}`);

  const before = await metric(daemon, 'flashblocksd_pending_fallbacks_total{reason="execution"}');
  const { code, latest } = await whilePreconfirmed(t, rpc, async (contract) => ({
    code: await rpcCall<string>(rpc, 'eth_getCode', [contract, 'pending']),
    latest: await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getCode', [contract, 'latest']),
  }));
  t.equal(latest, '0x', "the node's latest has no code there yet");
  t.equal(code, latest, 'eth_getCode at pending answers as latest (no executed state)');
  t.ok((await metric(daemon, 'flashblocksd_pending_fallbacks_total{reason="execution"}')) > before, 'counted as a fallback with reason "execution"');
  t.equal(await metric(daemon, 'flashblocksd_execution_up'), 0, 'execution_up 0');
  t.equal(daemon.execution?.executed ?? null, null, 'nothing executed');
});

t.test('--execution-hardfork isthmus on the same chain: executed, the spec in the start-up line and the metric', async (t) => {
  const { daemon, rpc, lines } = await boot(t, ['--execution-hardfork', 'isthmus']);
  const start = lines.find((l) => l.msg.startsWith('chain: '));
  t.match(start, { chainId: CHAIN_ID, spec: 'isthmus', msg: /^chain: id 4242 has no preset: .*; execution spec isthmus \(--execution-hardfork\)$/ }, `the start-up line: ${start?.msg}`);
  await until(() => daemon.execution?.executed != null, 30_000, 'the engine executes a flashblock');
  await until(async () => (await metric(daemon, 'flashblocksd_execution_spec_info{spec="isthmus"}')) === 1, 30_000, 'the spec metric');
  t.equal(await metric(daemon, 'flashblocksd_execution_spec_info{spec="karst"}'), 0, 'no other spec shown');
  const code = await whilePreconfirmed(t, rpc, (contract) => rpcCall<string>(rpc, 'eth_getCode', [contract, 'pending']));
  t.equal(code, '0x' + STORE_RUNTIME, 'eth_getCode at pending answers from executed state before the canonical block');
  t.notOk(lines.some((l) => l.msg.startsWith('execution engine cannot run')), 'no refusal');
});

t.test("--chain op-mainnet: the spec in force by the chain's schedule is karst, in the start-up line and the metric", async (t) => {
  // The node is not OP Mainnet (the daemon says so); what counts here is the spec its schedule gives today.
  const { daemon, lines } = await boot(t, ['--chain', 'op-mainnet']);
  const start = lines.find((l) => l.msg.startsWith('chain: '));
  t.match(start, { chain: 'op-mainnet', spec: 'karst', msg: /^chain: OP Mainnet \(10\) by --chain op-mainnet: .*; execution spec karst by the chain's schedule$/ }, `the start-up line: ${start?.msg}`);
  await until(() => daemon.execution?.executed != null, 30_000, 'the engine executes a flashblock');
  await until(async () => (await metric(daemon, 'flashblocksd_execution_spec_info{spec="karst"}')) === 1, 30_000, 'the spec metric');
  t.equal(await metric(daemon, 'flashblocksd_execution_spec_info{spec="jovian"}'), 0, 'jovian is not in force');
});
