// Pending execution end to end on the devnet (real anvil node, real flashblocks, the native engine — the default): a
// contract deployed and written by preconfirmed transactions is visible to eth_getCode, eth_getStorageAt, eth_call
// and eth_estimateGas with `pending` before its canonical block exists — through viem and ethers, on a stream with
// receipts and on a post-Azul stream (`?azul=1`) without them. Then: a forced panic of the engine → the flashblock
// is not executed (counted as panic), reads answer as latest (never wrong), the engine restarts in-process and
// answers resume; the node unreachable for the engine → a node_error outcome, reads as latest, recovery; divergences
// counted and their executed receipts withheld; the execution metrics tell what happened.
import t, { type Test } from 'tap';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { JsonRpcProvider } from 'ethers';
import WebSocket from 'ws';
import { createPublicClient, createWalletClient, defineChain, http, getContractAddress } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { optimism } from 'viem/chains';
import { rpcBatch, rpcCall } from '../../scripts/devnet/anvil.js';
import { encodeFlashblock, startDevnet, type BuiltFlashblock } from '../../scripts/devnet/sequencer.js';
import { startTraffic, type SentTx } from '../../scripts/devnet/traffic.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import type { RevmEngine } from '../../src/exec/revm.js';
import { createLogger } from '../../src/log.js';
import { startReplayServer } from '../helpers/replay-server.js';
import { firstDiff, strip } from '../helpers/compare.js';
import { STORE_INIT, STORE_RUNTIME, word } from '../helpers/store-contract.js';
import { nextFlashblock } from '../helpers/devnet-wait.js';
import { metricValue } from '../helpers/metrics-text.js';

/** Runtime: with calldata, SSTORE(0, calldata[0:32]); always returns SLOAD(0). */
const RUNTIME = STORE_RUNTIME;
const INIT = STORE_INIT;

const logs: string[] = [];
const log = createLogger({ level: 'warn', write: (line) => void logs.push(line) });

const devnet = await startDevnet({ blockTimeMs: 2000, flashblockMs: 200 });
t.teardown(() => devnet.stop());

async function boot(t: Test, streamUrl: string, nodeRpcUrl = devnet.nodeRpcUrl): Promise<{ daemon: Daemon; rpc: string }> {
  const config = loadConfig(
    ['--flashblocks-url', streamUrl, '--node-rpc-url', nodeRpcUrl, '--port', '0', '--metrics-port', '0', '--block-time-ms', '2000', '--log-level', 'warn'],
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

async function scrape(daemon: Daemon): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${daemon.metricsPort}/metrics`);
  return res.text();
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
  const fb = await nextFlashblock(devnet, (f) => f.index === 1);
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
    // geth's state override (3rd param) passes through to the executed state.
    const overridden = await rpcCall<string>(rpc, 'eth_call', [{ to: w.contract }, 'pending', { [w.contract]: { stateDiff: { [word(0n)]: word(5n) } } }]);
    // The pending height as a number (as viem and others pass it on) answers like `pending`.
    const height = await rpcCall<string>(rpc, 'eth_blockNumber', ['pending']);
    const numericCode = await rpcCall<string>(rpc, 'eth_getCode', [w.contract, height]);
    const balance = await rpcCall<string>(rpc, 'eth_getBalance', [w.acct.address, 'pending']);
    const nonce = await rpcCall<string>(rpc, 'eth_getTransactionCount', [w.acct.address, 'pending']);
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
    t.equal(overridden, word(5n), 'eth_call(pending) with a state override');
    t.equal(numericCode, `0x${RUNTIME}`, `eth_getCode at the numeric pending height ${height}`);
    t.equal(eEstimate, estimate, 'ethers and viem estimate the same');

    // Once the block lands, the node's latest answers must equal what pending answered.
    await until(async () => (await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [w.write])) !== null, 10_000, 'the canonical block');
    const nodeEstimate = BigInt(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_estimateGas', [{ from: w.acct.address, to: w.contract, data: word(value + 1n) }, 'latest']));
    t.equal(estimate, nodeEstimate, `estimateGas(pending) before the block = the node's estimate after it (${estimate})`);
    t.equal(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getStorageAt', [w.contract, '0x0', 'latest']), word(value), "the node's storage after the block");
    t.equal(balance, await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getBalance', [w.acct.address, 'latest']), "eth_getBalance(pending) before the block = the node's balance after it (fees paid)");
    t.equal(nonce, await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getTransactionCount', [w.acct.address, 'latest']), "eth_getTransactionCount(pending) before the block = the node's after it");

    const ready = (await (await fetch(`http://127.0.0.1:${daemon.metricsPort}/readyz`)).json()) as { checks: Record<string, { ok: boolean; detail: string }> };
    t.equal(ready.checks.execution?.ok, true, '/readyz: execution check ok');
    t.match(ready.checks.execution?.detail, /^up: executed up to \d+\/\d+/, `/readyz: ${ready.checks.execution?.detail}`);
    const text = await scrape(daemon);
    const executed = metricValue(text, 'flashblocksd_execution_flashblocks_total{outcome="executed"}');
    t.ok(executed > 0, `flashblocks executed (${executed})`);
    const failures = ['engine_down', 'tx_rejected', 'execution_error', 'node_error', 'panic', 'block_failed'].map((o) => `${o}=${metricValue(text, `flashblocksd_execution_flashblocks_total{outcome="${o}"}`)}`);
    t.same(failures.filter((f) => !f.endsWith('=0')), [], 'no flashblock failed to execute');
    const ratio = metricValue(text, 'flashblocksd_execution_verified_ratio');
    t.ok(ratio > 0.5 && ratio <= 1, `verified share over the flashblocks handed over: ${ratio}`);
    t.ok(metricValue(text, 'flashblocksd_execution_cache_bytes') > 0, "the engine's state cache bytes");
    t.ok(metricValue(text, 'flashblocksd_execution_node_reads_per_block') > 0, 'node reads per block');
    t.equal(metricValue(text, 'flashblocksd_execution_up'), 1, 'engine up');
    t.ok(metricValue(text, 'flashblocksd_execution_apply_seconds_count') > 0, 'apply time observed');
    t.ok(metricValue(text, 'flashblocksd_execution_verified_total') > 0, 'flashblocks verified against diff.receipts_root');
    t.equal(metricValue(text, 'flashblocksd_execution_divergences_total'), 0, 'no divergence on the devnet');
    t.ok(metricValue(text, 'flashblocksd_execution_node_reads_total') > 0, 'the engine\'s canonical state reads from the node counted');
    // eth_call / getCode / getStorageAt above were answered inline (from memory); eth_estimateGas on the read threads.
    // The counters follow the engine's status on the feed's timer: wait for it.
    await until(async () => {
      const m = await scrape(daemon);
      return metricValue(m, 'flashblocksd_execution_reads_total{thread="inline"}') > 0 && metricValue(m, 'flashblocksd_execution_reads_total{thread="threads"}') > 0;
    }, 10_000, 'reads counted by thread');
    t.pass('engine reads counted by where they ran: inline and on the read threads');
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

t.test('a forced panic of the engine: its flashblock not executed (counted as panic), reads answer as latest (never wrong), the engine restarts in-process and reads resume from executed state', async (t) => {
  const { daemon, rpc } = await boot(t, devnet.flashblocksUrl);
  const feed = daemon.execution!;
  const engine = feed.engine as RevmEngine;
  const before = await scrape(daemon);
  // The panicking flashblock: the next one handed over after the hook is armed.
  const failed = new Promise<void>((resolve) => {
    const poll = setInterval(() => {
      if (logs.some((l) => l.includes('flashblock not executed (panic)'))) {
        clearInterval(poll);
        resolve();
      }
    }, 10);
  });
  engine.panicNextApply();
  await failed;
  // Right after the panic, a pending read must not fail and must not be half-applied state: it is the executed
  // answer or the node's latest answer.
  const acct = devnet.accounts[1]!.address;
  const during = await rpcCall<string>(rpc, 'eth_getBalance', [acct, 'pending']);
  const truth = await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getBalance', [acct, 'latest']);
  t.equal(during, truth, `eth_getBalance(pending) right after the panic is right (an untouched account): ${during}`);
  const text = await scrape(daemon);
  t.equal(metricValue(text, 'flashblocksd_execution_flashblocks_total{outcome="panic"}') - metricValue(before, 'flashblocksd_execution_flashblocks_total{outcome="panic"}'), 1, 'the flashblock is counted as not executed, reason panic');
  t.ok(metricValue(text, 'flashblocksd_execution_restarts_total') > metricValue(before, 'flashblocksd_execution_restarts_total'), 'the restart is counted');
  t.ok(logs.some((l) => l.includes('"level":"error"') && l.includes('execution engine panicked')), 'the panic is logged at error with its message');
  t.equal(engine.status().restarts, 1, 'the engine restarted once');
  await until(() => feed.health().phase === 'up' && engine.status().ready, 20_000, 'the engine up again');
  // Answers resume correct: a contract written by preconfirmed txs reads back before its block lands.
  const value = 0xbeefn;
  const w = await deployAndWrite(rpc, value, 'receipt');
  const slot = await rpcCall<string>(rpc, 'eth_getStorageAt', [w.contract, '0x0', 'pending']);
  t.equal(await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [w.write]), null, 'before the canonical block');
  t.equal(slot, word(value), 'storage from executed state after the restart');
  t.equal(process.exitCode ?? 0, 0, 'the daemon (this process) never aborted');
});

/** A TCP relay to the node that can be cut (every connection dropped, new ones refused) and restored. */
async function cuttableNode(t: Test): Promise<{ url: string; cut(): void; restore(): void }> {
  const target = new URL(devnet.nodeRpcUrl);
  let cut = false;
  const open = new Set<Socket>();
  const server: Server = createServer((client) => {
    if (cut) return void client.destroy();
    const up = connect(Number(target.port), target.hostname);
    const end = (): void => {
      client.destroy();
      up.destroy();
      open.delete(client);
    };
    open.add(client);
    client.pipe(up).pipe(client);
    for (const s of [client, up]) {
      s.on('error', end);
      s.on('close', end);
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  t.teardown(() => {
    for (const s of open) s.destroy();
  });
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    cut: () => {
      cut = true;
      for (const s of open) s.destroy();
    },
    restore: () => void (cut = false),
  };
}

t.test('the node unreachable: a flashblock that needs it is not executed (node_error, logged), pending reads fall back to latest, execution recovers when the node is back', async (t) => {
  const link = await cuttableNode(t);
  const { daemon, rpc } = await boot(t, devnet.flashblocksUrl, link.url);
  const before = await scrape(daemon);
  link.cut();
  // A fresh account deploys and writes, sent to the node itself (which is up; only the daemon's way to it is cut):
  // executing them needs state the engine never read.
  const acct = devnet.accounts[accountIndex++]!;
  const account = privateKeyToAccount(acct.privateKey);
  const chain = defineChain({ ...optimism, id: devnet.chainId, name: 'devnet', rpcUrls: { default: { http: [devnet.nodeRpcUrl] } } });
  const wallet = createWalletClient({ account, chain, transport: http(devnet.nodeRpcUrl) });
  const nonce = Number(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getTransactionCount', [acct.address, 'latest']));
  const contract = getContractAddress({ from: acct.address, nonce: BigInt(nonce) });
  const fees = { maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000n };
  await nextFlashblock(devnet, (f) => f.index === 1);
  await wallet.sendTransaction({ data: INIT, nonce, gas: 200_000n, ...fees });
  await wallet.sendTransaction({ to: contract, data: word(0xdeadn), nonce: nonce + 1, gas: 100_000n, ...fees });
  await until(() => logs.some((l) => l.includes('flashblock not executed (node_error)')), 20_000, 'a flashblock not executed for want of the node').catch((e: unknown) => {
    t.comment(`the daemon's warn lines so far:\n${logs.slice(-15).join('\n')}`);
    throw e;
  });
  const line = logs.find((l) => l.includes('flashblock not executed (node_error)'))!;
  t.match(line, /"level":"warn"/, 'logged at warn');
  t.match(line, /"error":"node read failed: /, `with a clear error: ${line.slice(0, 300)}`);
  // Pending state at the failed block answers as latest: the node's, here an error saying it is unreachable, never
  // a half-executed or a made-up state.
  const res = await fetch(rpc, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getStorageAt', params: [contract, '0x0', 'pending'] }) });
  const answer = (await res.json()) as { result?: string; error?: { code: number; message: string } };
  t.ok(answer.error !== undefined || answer.result === word(0n), `eth_getStorageAt(pending) answers as latest (the node's answer or its error): ${JSON.stringify(answer)}`);
  const during = await scrape(daemon);
  t.ok(metricValue(during, 'flashblocksd_execution_flashblocks_total{outcome="node_error"}') > metricValue(before, 'flashblocksd_execution_flashblocks_total{outcome="node_error"}'), 'counted as not executed, reason node_error');
  t.ok(metricValue(during, 'flashblocksd_pending_fallbacks_total{reason="execution"}') > metricValue(before, 'flashblocksd_pending_fallbacks_total{reason="execution"}'), 'the read was counted as a fallback to latest');
  t.equal(metricValue(during, 'flashblocksd_execution_restarts_total'), 0, 'a node outage is no engine crash');
  // The node is back: the engine executes again and answers from executed state.
  link.restore();
  const failedAt = daemon.execution!.executed;
  await until(() => {
    const e = daemon.execution!.executed;
    return e !== null && failedAt !== null && e.number > failedAt.number + 1;
  }, 30_000, 'flashblocks executed again after the outage');
  const w = await deployAndWrite(rpc, 0xfeedn, 'receipt');
  t.equal(await rpcCall<string>(rpc, 'eth_getStorageAt', [w.contract, '0x0', 'pending']), word(0xfeedn), 'storage from executed state after the outage');
  t.equal(await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [w.write]), null, 'before the canonical block');
});

t.test('post-Azul (?azul=1): receipts, block receipts and pending logs come from execution before the block, equal to the node\'s once it lands', async (t) => {
  const { daemon, rpc } = await boot(t, `${devnet.flashblocksUrl}?azul=1`);
  // pendingLogs over WebSocket: on this stream every log comes from execution.
  const ws = new WebSocket(rpc.replace('http', 'ws'));
  t.teardown(() => ws.terminate());
  await new Promise((r) => ws.once('open', r));
  const notified: { transactionHash: string; logIndex: string }[] = [];
  ws.on('message', (d) => {
    const m = JSON.parse(d.toString()) as { method?: string; params?: { result: { transactionHash: string; logIndex: string } } };
    if (m.method === 'eth_subscription') notified.push(m.params!.result);
  });
  ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['pendingLogs', {}] }));
  const sent: SentTx[] = [];
  const traffic = await startTraffic({ rpcUrl: rpc, chainId: devnet.chainId, accounts: devnet.accounts.slice(0, 4), txPerSec: 20, maxTxs: 40, onSent: (x) => void sent.push(x) });
  t.teardown(() => traffic.stop());
  const early = new Map<string, unknown>();
  const late = new Set<string>();
  let blockReceipts = 0;
  let logsSeen = 0;
  const problems: string[] = [];
  const deadline = Date.now() + 30_000;
  while ((sent.length < 40 || early.size + late.size < sent.length) && Date.now() < deadline) {
    const open = sent.map((x) => x.hash).filter((h) => !early.has(h) && !late.has(h));
    if (open.length > 0) {
      const res = await rpcBatch(rpc, open.map((h): [string, unknown[]] => ['eth_getTransactionReceipt', [h]]));
      const canon = await rpcBatch(devnet.nodeRpcUrl, open.map((h): [string, unknown[]] => ['eth_getTransactionReceipt', [h]]));
      for (let i = 0; i < open.length; i++) {
        const r = res[i];
        if (!r?.ok) problems.push(`${open[i]}: ${JSON.stringify(r)}`);
        // Only receipts answered while the node had none: those came from execution.
        else if (canon[i]?.ok === true && (canon[i] as { value: unknown }).value !== null) late.add(open[i]!);
        else if (r.value !== null) early.set(open[i]!, r.value);
      }
    }
    const [br, logs] = await rpcBatch(rpc, [['eth_getBlockReceipts', ['pending']], ['eth_getLogs', [{ fromBlock: 'pending', toBlock: 'pending' }]]]);
    if (br?.ok && Array.isArray(br.value)) blockReceipts += br.value.length;
    if (logs?.ok && Array.isArray(logs.value)) logsSeen += logs.value.length;
    else problems.push(`getLogs: ${JSON.stringify(logs)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
  await traffic.done();
  // The native engine misses the EIP-7702 refund of an authority that exists (gasUsed 46,000 executed vs 36,800
  // canonical on the devnet's 7702 txs): its blocks diverge and their executed receipts are withheld. Engine-side
  // (native/), reported to the lead; these two assertions hold again once it is fixed.
  t.ok(early.size >= 20, `${early.size} of ${sent.length} receipts served from execution before the node had them`);
  t.ok(blockReceipts > 0, `eth_getBlockReceipts(pending) served ${blockReceipts} receipts`);
  t.ok(logsSeen > 0, `eth_getLogs(pending) served ${logsSeen} logs`);
  // Once every block landed, each early receipt equals the node's (block-hash fields excepted).
  const hashes = [...early.keys()];
  await until(async () => (await rpcBatch(devnet.nodeRpcUrl, hashes.map((h): [string, unknown[]] => ['eth_getTransactionReceipt', [h]]))).every((x) => x?.ok === true && x.value !== null), 20_000, 'every block canonical');
  const canon = await rpcBatch(devnet.nodeRpcUrl, hashes.map((h): [string, unknown[]] => ['eth_getTransactionReceipt', [h]]));
  let equal = 0;
  for (let i = 0; i < hashes.length; i++) {
    const c = canon[i]!;
    const d = firstDiff(strip(early.get(hashes[i]!)), strip(c.ok ? c.value : null));
    if (d === null) equal++;
    else problems.push(`${hashes[i]}: ${d}`);
  }
  t.equal(equal, hashes.length, `${equal} of ${hashes.length} executed receipts equal the node's`);
  const sentHashes = new Set(sent.map((x) => x.hash as string));
  t.ok(notified.length > 0 && notified.every((l) => sentHashes.has(l.transactionHash)), `pendingLogs notified ${notified.length} executed logs of the sent transactions`);
  // Each notified log equals the node's canonical log at the same position (block-hash fields excepted).
  const byTx = new Map<string, unknown[]>();
  for (const h of new Set(notified.map((l) => l.transactionHash))) {
    byTx.set(h, ((await rpcCall<{ logs: unknown[] }>(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [h])).logs));
  }
  const logDiffs = notified.map((l) => firstDiff(strip(l), strip((byTx.get(l.transactionHash) ?? []).find((c: any) => c.logIndex === l.logIndex) ?? null))).filter((d) => d !== null);
  t.same(logDiffs.slice(0, 3), [], `${notified.length - logDiffs.length} of ${notified.length} notified logs equal the node's`);
  t.same(problems.slice(0, 3), [], `${problems.length} problems`);
  // eth_sendRawTransactionSync returns the executed receipt at flashblock inclusion, before the canonical block.
  const chain = defineChain({ ...optimism, id: devnet.chainId, name: 'devnet', rpcUrls: { default: { http: [rpc] } } });
  const wallet = createWalletClient({ chain, transport: http(rpc), account: privateKeyToAccount(devnet.accounts[9]!.privateKey) });
  await nextFlashblock(devnet, (fb) => fb.index === 0);
  const syncReceipt = await wallet.sendTransactionSync({ to: '0x000000000000000000000000000000000000dEaD', value: 1n, timeout: 5000 });
  t.equal(syncReceipt.status, 'success', 'viem sendTransactionSync on a stream without receipts');
  t.equal(await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [syncReceipt.transactionHash]), null, 'before the canonical block existed');
  const text = await scrape(daemon);
  t.equal(metricValue(text, 'flashblocksd_execution_divergences_total'), 0, 'no divergence');
});

t.test("a stream receipt and a receipts_root that disagree with execution: both divergences counted, the block's executed receipts withheld, the stream receipt still served", async (t) => {
  // The devnet's flashblocks relayed through a fake upstream that falsifies one receipt's status, then (in a later
  // block) one flashblock's receipts_root.
  const up = await startReplayServer();
  t.teardown(() => up.close());
  let badReceipt: string | null = null;
  let badRootBlock = -1;
  const off = devnet.onFlashblock((built) => {
    const fb = structuredClone(built) as BuiltFlashblock;
    if (badReceipt === null && fb.index > 0 && fb.receipts.length > 0 && fb.receipts[0]!.status === '0x1') {
      badReceipt = fb.receipts[0]!.hash;
      badRootBlock = fb.blockNumber + 1;
      fb.receipts[0]!.status = '0x0';
    } else if (fb.blockNumber === badRootBlock && fb.index === 2) {
      fb.diff.receipts_root = '0x' + 'ab'.repeat(32);
    }
    up.send(encodeFlashblock(fb, { receipts: 'external', azul: false }));
  });
  t.teardown(off);
  const { daemon, rpc } = await boot(t, up.url);
  // Seen as each flashblock of the falsified block executes: from index 2 on, its executed receipts are withheld.
  const withheld: boolean[] = [];
  t.teardown(daemon.execution!.onExecuted((b, index) => {
    if (b.number === badRootBlock && index >= 2) withheld.push(!daemon.execution!.receiptsVerified(b.number));
  }));
  const traffic = await startTraffic({ rpcUrl: rpc, chainId: devnet.chainId, accounts: devnet.accounts.slice(7, 9), txPerSec: 10 });
  t.teardown(() => traffic.stop());
  await until(async () => metricValue(await scrape(daemon), 'flashblocksd_execution_divergences_total{source="stream_receipt"}') >= 1, 20_000, 'the stream receipt divergence');
  const served = await rpcCall<{ status: string } | null>(rpc, 'eth_getTransactionReceipt', [badReceipt]);
  t.equal(served?.status, '0x0', 'the stream receipt is served as the stream gave it (metadata is served at once)');
  t.ok(
    logs.some((l) => l.includes('stream receipt differs') && l.includes(`"tx":"${badReceipt}"`) && l.includes('"field":"status"') && l.includes('"stream":"0"') && l.includes('"executed":"1"')),
    'the divergence is logged with the transaction and the first differing field (status: stream 0, executed 1)',
  );
  await until(async () => metricValue(await scrape(daemon), 'flashblocksd_execution_divergences_total{source="receipts_root"}') >= 1, 20_000, 'the receipts_root divergence');
  const after = await scrape(daemon);
  t.ok(withheld.length > 0 && withheld.every(Boolean), `the falsified block's executed receipts are withheld from its diverged flashblock on (${withheld.length} flashblocks)`);
  const rootLine = logs.find((l) => l.includes('receipts root differs') && l.includes(`"block":${badRootBlock}`));
  t.ok(rootLine !== undefined, `the divergence is logged with its block (${badRootBlock}) and index`);
  t.match(JSON.parse(rootLine ?? '{}'), { index: 2, streamReceiptsRoot: '0x' + 'ab'.repeat(32), positions: String, streamGasUsed: String, executedGasUsed: String }, "with the stream's root, its gas and execution's, and the positions the flashblock added");
  t.ok(metricValue(after, 'flashblocksd_execution_verified_total') > 0, 'the other flashblocks still verify');
  await traffic.stop();
});

t.test('post-Azul, a block whose execution disagrees with its receipts_root: its executed receipts are not served', async (t) => {
  const up = await startReplayServer();
  t.teardown(() => up.close());
  let badBlock = -1;
  let armed = false;
  const badTxs: string[] = [];
  const off = devnet.onFlashblock((built) => {
    const fb = structuredClone(built) as BuiltFlashblock;
    // A block the engine executes from its start: the next one to begin after the daemon is up.
    if (armed && badBlock === -1 && fb.index === 0) badBlock = fb.blockNumber;
    if (fb.blockNumber === badBlock) {
      for (const r of fb.receipts) badTxs.push(r.hash);
      if (fb.index > 0) fb.diff.receipts_root = '0x' + 'cd'.repeat(32);
    }
    up.send(encodeFlashblock(fb, { receipts: 'external', azul: true }));
  });
  t.teardown(off);
  const { daemon, rpc } = await boot(t, up.url);
  const traffic = await startTraffic({ rpcUrl: rpc, chainId: devnet.chainId, accounts: devnet.accounts.slice(7, 9), txPerSec: 10 });
  t.teardown(() => traffic.stop());
  armed = true;
  await until(() => badTxs.length > 0, 20_000, 'a transaction in the falsified block');
  await until(async () => metricValue(await scrape(daemon), 'flashblocksd_execution_divergences_total{source="receipts_root"}') >= 1, 20_000, 'the receipts_root divergence');
  const hash = badTxs[0]!;
  const served = await rpcCall<unknown>(rpc, 'eth_getTransactionReceipt', [hash]);
  const canonical = await rpcCall<unknown>(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [hash]);
  t.equal(canonical, null, 'its block is not canonical yet');
  t.equal(served, null, 'no executed receipt is served for a transaction of the diverged block');
  t.not(await rpcCall(rpc, 'eth_getTransactionByHash', [hash]), null, 'the transaction itself is preconfirmed');
  await traffic.stop();
});
