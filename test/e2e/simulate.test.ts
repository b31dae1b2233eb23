// eth_simulateV1 at `pending` end to end on the devnet (real anvil node, real flashblocks, the native engine), through
// viem's simulateBlocks / simulateCalls: calls see a contract deployed only in a preconfirmed transaction; state
// carries from call to call and block to block; a second block takes block overrides (number, time) and state
// overrides (balance, code); the first block runs with the pending block's own env (NUMBER, TIMESTAMP, BASEFEE,
// COINBASE, PREVRANDAO); a reverting call is status 0x0 with its error and data while the others run; malformed
// params are -32602. The response has the shape of the node's own eth_simulateV1 (anvil's, at latest).
import t, { type Test } from 'tap';
import { createPublicClient, createWalletClient, defineChain, getContractAddress, http, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { optimism } from 'viem/chains';
import { rpcCall } from '../../scripts/devnet/anvil.js';
import { startDevnet } from '../../scripts/devnet/sequencer.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { createLogger } from '../../src/log.js';
import { word } from '../helpers/store-contract.js';
import { nextFlashblock } from '../helpers/devnet-wait.js';

/** With calldata, SSTORE(0, calldata[0:32]); always returns SLOAD(0). */
const STORE = '3615600b576000356000555b60005460005260206000f3';
const STORE_INIT = `0x6017600c60003960176000f3${STORE}` as Hex;
/** Returns NUMBER, TIMESTAMP, BASEFEE, COINBASE, PREVRANDAO as five words. */
const ENV = '0x436000524260205248604052416060524460805260a06000f3' as Hex;
/** Returns BALANCE(calldata[0:32]). */
const BALANCE = '0x60003531600052602060' + '00f3';
/** Reverts with the word 42. */
const REVERT = '0x602a60005260206000fd' as Hex;
const words = (data: Hex): bigint[] => (data.slice(2).match(/.{64}/g) ?? []).map((w) => BigInt('0x' + w));
const ENV_AT = '0x00000000000000000000000000000000000e0e01' as Hex;
const BALANCE_AT = '0x00000000000000000000000000000000000e0e02' as Hex;
const REVERT_AT = '0x00000000000000000000000000000000000e0e03' as Hex;
const RICH = '0x00000000000000000000000000000000000e0e04' as Hex;
const ZERO_ADDRESS = '0x0000000000000000000000000000000000000000' as Hex;

const log = createLogger({ level: 'warn', write: () => undefined });
const devnet = await startDevnet({ blockTimeMs: 2000, flashblockMs: 200 });
t.teardown(() => devnet.stop());

async function boot(t: Test): Promise<{ daemon: Daemon; rpc: string }> {
  // A read timeout short enough for the test of it below, far above what the other simulations here take.
  const config = loadConfig(['--flashblocks-url', devnet.flashblocksUrl, '--node-rpc-url', devnet.nodeRpcUrl, '--port', '0', '--metrics-port', '0', '--block-time-ms', '2000', '--log-level', 'warn', '--execution-read-timeout-ms', '1500'], {});
  const daemon = await startDaemon(config, { log });
  t.teardown(() => daemon.stop());
  await until(() => daemon.execution?.executed != null, 30_000, 'the engine executes a flashblock');
  return { daemon, rpc: `http://127.0.0.1:${daemon.rpcPort}` };
}

async function until(pred: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function raw(url: string, method: string, params: unknown): Promise<{ result?: any; error?: { code: number; message: string } }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  return (await res.json()) as { result?: any; error?: { code: number; message: string } };
}

/** The value of the series `series` (name and labels as exposed), 0 when absent. */
async function metric(daemon: Daemon, series: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${daemon.metricsPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** eth_simulateV1 answers counted with `source`. */
const sourceOf = (daemon: Daemon, source: string): Promise<number> => metric(daemon, `flashblocksd_rpc_requests_total{method="eth_simulateV1",source="${source}"}`);

const { daemon, rpc } = await boot(t);
const chain = defineChain({ ...optimism, id: devnet.chainId, name: 'devnet', rpcUrls: { default: { http: [rpc] } } });
const client = createPublicClient({ chain, transport: http(rpc) });

t.test('simulateCalls and simulateBlocks at pending: a preconfirmed contract, state carried, a second block with overrides, the pending env, a revert', async (t) => {
  // A contract deployed and written by preconfirmed transactions, sent just after a block's index 1.
  const acct = devnet.accounts[5]!;
  const wallet = createWalletClient({ account: privateKeyToAccount(acct.privateKey), chain, transport: http(rpc) });
  const nonce = Number(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getTransactionCount', [acct.address, 'latest']));
  const store = getContractAddress({ from: acct.address, nonce: BigInt(nonce) });
  await nextFlashblock(devnet, (fb) => fb.index === 1);
  const fees = { maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000n };
  await wallet.sendTransaction({ data: STORE_INIT, nonce, gas: 200_000n, ...fees });
  const write = await wallet.sendTransaction({ to: store, data: word(7n), nonce: nonce + 1, gas: 100_000n, ...fees });
  await until(async () => (await rpcCall<{ blockNumber: string | null } | null>(rpc, 'eth_getTransactionReceipt', [write]))?.blockNumber != null, 5000, 'the daemon serves the write');

  // (a) + (b): simulateCalls sees the preconfirmed contract; call 2 sees call 1's write.
  const calls = await client.simulateCalls({ account: acct.address, blockTag: 'pending', calls: [{ to: store }, { to: store, data: word(8n) }, { to: store }] });
  const nodeReceipt = await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [write]);
  t.equal(nodeReceipt, null, 'the node has no receipt of the write yet: the simulation ran on preconfirmed state only');
  t.same(calls.results.map((r) => [r.status, r.data]), [['success', word(7n)], ['success', word(8n)], ['success', word(8n)]], 'the preconfirmed value, then call 2 writes 8 and call 3 reads it');

  // (c) + (d) + (e): two blocks; the first with the pending env, the second with block and state overrides.
  const pending = await rpcCall<{ number: Hex; timestamp: Hex }>(rpc, 'eth_getBlockByNumber', ['pending', false]);
  const later = { number: BigInt(pending.number) + 10n, time: BigInt(pending.timestamp) + 100n };
  const blocks = await client.simulateBlocks({
    blockTag: 'pending',
    blocks: [
      {
        stateOverrides: [{ address: ENV_AT, code: ENV }, { address: REVERT_AT, code: REVERT }],
        calls: [{ to: ENV_AT }, { to: REVERT_AT }, { to: store, data: word(9n) }],
      },
      {
        blockOverrides: later,
        stateOverrides: [{ address: BALANCE_AT, code: BALANCE as Hex }, { address: RICH, balance: 123_456_789n }],
        calls: [{ to: ENV_AT }, { to: BALANCE_AT, data: `0x${RICH.slice(2).padStart(64, '0')}` }, { to: store }],
      },
    ],
  });
  t.equal(blocks.length, 2, 'two simulated blocks');
  const [b1, b2] = blocks as [typeof blocks[0], typeof blocks[0]];
  const [number, timestamp, baseFee, coinbase, prevRandao] = words(b1.calls[0]!.data);
  const base = await rpcCall<{ number: Hex; timestamp: Hex; baseFeePerGas: Hex; miner: Hex; mixHash: Hex }>(rpc, 'eth_getBlockByNumber', [`0x${number!.toString(16)}`, false]);
  t.ok(base !== null, `the first simulated block is held pending block ${number}`);
  t.equal(b1.number, number, "the first block's number is NUMBER inside it");
  t.equal(number, BigInt(base.number), 'NUMBER: the pending block');
  t.equal(timestamp, BigInt(base.timestamp), "TIMESTAMP: the pending block's");
  t.equal(baseFee, BigInt(base.baseFeePerGas), "BASEFEE: the pending block's");
  t.equal(coinbase, BigInt(base.miner), "COINBASE: the pending block's fee recipient");
  t.equal(prevRandao, BigInt(base.mixHash), "PREVRANDAO: the pending block's prev_randao");
  t.equal(b1.calls[1]!.status, 'failure', 'the reverting call failed');
  t.equal(b1.calls[1]!.data, word(42n), 'with its revert data');
  t.ok(b1.calls[1]!.error, 'and its error');
  t.equal(b1.calls[2]!.status, 'success', 'the call after the revert ran');
  const [n2, ts2] = words(b2.calls[0]!.data);
  t.equal(n2, later.number, 'block 2: NUMBER overridden');
  t.equal(ts2, later.time, 'block 2: TIMESTAMP overridden');
  t.equal(b2.number, later.number, "block 2's number");
  t.equal(b2.timestamp, later.time, "block 2's timestamp");
  t.equal(words(b2.calls[1]!.data)[0], 123_456_789n, 'block 2: the balance override');
  t.equal(b2.calls[2]!.data, word(9n), "block 2 sees block 1's write (state carries across blocks)");
  t.equal(words(b2.calls[0]!.data).length, 5, "block 2 still sees block 1's code override");
});

t.test("the response has the shape of the node's own eth_simulateV1 (same state: overrides only)", async (t) => {
  const payload = {
    blockStateCalls: [
      // The calls' default sender (the zero address) funded: anvil 1.7.1 charges it the L1 and operator fees of the
      // devnet's blocks even without validation, and refuses the call when it cannot pay them.
      { stateOverrides: { [REVERT_AT]: { code: REVERT }, [BALANCE_AT]: { code: BALANCE }, [RICH]: { balance: '0x75bcd15' }, [ZERO_ADDRESS]: { balance: '0xde0b6b3a7640000' } }, calls: [{ to: BALANCE_AT, data: `0x${RICH.slice(2).padStart(64, '0')}` }, { to: REVERT_AT }] },
      { blockOverrides: { time: '0x' + (Math.floor(Date.now() / 1000) + 1000).toString(16) }, calls: [{ to: BALANCE_AT, data: `0x${RICH.slice(2).padStart(64, '0')}` }] },
    ],
  };
  // A preconfirmed transaction first: a pending block without any is answered as latest (see usablePending).
  const acct = devnet.accounts[6]!;
  const wallet = createWalletClient({ account: privateKeyToAccount(acct.privateKey), chain, transport: http(rpc) });
  const sent = await wallet.sendTransaction({ to: RICH, value: 1n, maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000n });
  await until(async () => (await rpcCall<{ blockNumber: string | null } | null>(rpc, 'eth_getTransactionReceipt', [sent]))?.blockNumber != null, 5000, 'the daemon serves the transfer');
  const before = await sourceOf(daemon, 'state');
  const mine = await raw(rpc, 'eth_simulateV1', [payload, 'pending']);
  t.equal((await sourceOf(daemon, 'state')) - before, 1, 'answered by the engine (not forwarded as latest)');
  const node = await raw(devnet.nodeRpcUrl, 'eth_simulateV1', [payload, 'latest']);
  t.equal(mine.error, undefined, 'the daemon answers');
  t.equal(node.error, undefined, 'the node answers');
  // The calls' results field by field; a failed call's error object aside (anvil 1.7.1 answers a revert with code
  // -3200 and no data; the execution-apis spec and geth: code 3 with the revert data, which viem reads).
  const strip = (blocks: any[]) => blocks.map((b) => ({ keys: Object.keys(b).filter((k) => k !== 'calls'), calls: b.calls.map((c: any) => ({ ...c, gasUsed: c.gasUsed, error: typeof c.error })) }));
  const ours = strip(mine.result);
  const theirs = strip(node.result);
  t.equal(ours.length, theirs.length, 'as many blocks');
  for (let i = 0; i < theirs.length; i++) {
    const missing = theirs[i]!.keys.filter((k: string) => !ours[i]!.keys.includes(k));
    t.same(missing.sort(), ['receiptsRoot', 'stateRoot', 'transactionsRoot'], `block ${i}: every field the node gives but the roots (not computed) is there`);
    t.same(ours[i]!.calls, theirs[i]!.calls, `block ${i}: the calls' results as the node's (status, returnData, logs, gasUsed; an error present)`);
  }
  const reverted = mine.result[0].calls[1];
  t.same(reverted.error, { code: 3, message: reverted.error.message, data: word(42n) }, `a revert: code 3 with its data (${reverted.error.message})`);
  t.equal(mine.result[1].logsBloom, `0x${'00'.repeat(256)}`, 'a block without logs: an empty bloom');
});

t.test('with validation a call is checked as a transaction: no fee is below the base fee (-38012), a stale nonce -38010, …', async (t) => {
  const from = devnet.accounts[7]!.address;
  const nonce = Number(await rpcCall<string>(rpc, 'eth_getTransactionCount', [from, 'pending']));
  const sim = (call: Record<string, unknown>, stateOverrides?: unknown) => raw(rpc, 'eth_simulateV1', [{ validation: true, blockStateCalls: [{ stateOverrides, calls: [{ from, to: RICH, ...call }] }] }, 'pending']);
  t.equal((await sim({})).error?.code, -38012, 'no fee given: fee cap too low');
  const fees = { maxFeePerGas: '0x2540be400', maxPriorityFeePerGas: '0x1' };
  t.equal((await sim(fees)).result?.[0]?.calls?.[0]?.status, '0x1', 'with a fee: a valid transaction');
  if (nonce > 0) t.equal((await sim({ ...fees, nonce: '0x' + (nonce - 1).toString(16) })).error?.code, -38010, 'a nonce already used: nonce too low');
  t.equal((await sim({ ...fees, nonce: '0x' + (nonce + 5).toString(16) })).error?.code, -38011, 'a nonce ahead: nonce too high');
  t.equal((await sim({ ...fees, gas: '0x5207' })).error?.code, -38013, 'below 21,000 gas: intrinsic gas');
  t.equal((await sim({ ...fees, value: '0x' + (10n ** 30n).toString(16) })).error?.code, -38014, 'more value than its balance: insufficient funds');
  t.equal((await sim(fees, { [from]: { code: '0x00' } })).error?.code, -38024, 'a sender with code: not an EOA');
  t.equal((await sim({ ...fees, to: null, input: '0x' + '00'.repeat(49_153) })).error?.code, -38025, 'init code over 49,152 bytes');
  t.equal((await sim({ maxFeePerGas: '0x2540be400', maxPriorityFeePerGas: '0x2540be401' })).error?.code, -32602, 'a priority fee above the max fee: invalid params (as geth)');
  const call = await raw(rpc, 'eth_call', [{ from, to: RICH, ...fees, value: '0x' + (10n ** 30n).toString(16) }, 'pending']);
  t.equal(call.error?.code, -32000, `eth_call answers the same refusal -32000, as geth (${call.error?.message})`);
});

t.test('malformed eth_simulateV1 params are -32602', async (t) => {
  const cases: [string, unknown][] = [
    ['no params', []],
    ['payload not an object', ['x', 'pending']],
    ['blockStateCalls missing', [{}, 'pending']],
    ['blockStateCalls not a list', [{ blockStateCalls: {} }, 'pending']],
    ['a call with a bad address', [{ blockStateCalls: [{ calls: [{ to: '0x1234' }] }] }, 'pending']],
    ['a bad block override', [{ blockStateCalls: [{ blockOverrides: { number: 'soon' }, calls: [] }] }, 'pending']],
    ['a bad state override', [{ blockStateCalls: [{ stateOverrides: { '0xzz': { balance: '0x1' } }, calls: [] }] }, 'pending']],
  ];
  for (const [what, params] of cases) {
    const r = await raw(rpc, 'eth_simulateV1', params);
    t.equal(r.error?.code, -32602, `${what}: -32602 (${r.error?.message})`);
  }
  t.ok(daemon.execution?.executed, 'the engine still executes');
});

t.test('a simulation past --execution-read-timeout-ms answers -32000 execution aborted, counted; the daemon answers on', async (t) => {
  const LOOP = '0x' + '55'.repeat(20);
  // 250 blocks (each with its own gas) of a call looping until its gas runs out: seconds of EVM without the timeout.
  const blockStateCalls = Array.from({ length: 250 }, (_, i) => ({ ...(i === 0 ? { stateOverrides: { [LOOP]: { code: '0x5b600056' } } } : {}), calls: [{ to: LOOP }] }));
  const series = 'flashblocksd_execution_read_timeouts_total';
  const before = await metric(daemon, series);
  const r = await raw(rpc, 'eth_simulateV1', [{ blockStateCalls }, 'pending']);
  t.same(r.error, { code: -32000, message: 'execution aborted (timeout = 1.5s)' }, 'the timeout, as geth words it');
  await until(async () => (await metric(daemon, series)) === before + 1, 5000, 'the timeout counted');
  t.pass(`${series} counted it`);
  const after = await raw(rpc, 'eth_simulateV1', [{ blockStateCalls: [{ calls: [{ to: LOOP, gas: '0x5208' }] }] }, 'pending']);
  t.equal(after.result?.[0]?.calls?.length, 1, 'the next simulation is answered');
});
