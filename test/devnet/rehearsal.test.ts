// The devnet as an operator rehearses with it: `npm run devnet` as a real child process (scripts/devnet.ts through
// tsx), run as Unichain on fixed ports. --help and a bad flag answer without starting anything. The node answers
// chain id 130 on the port asked for, the stream is op-rbuilder's with 1 s blocks of 5 flashblocks, each opening with
// a Jovian L1-info deposit (anvil runs jovian: it has no karst). A daemon pointed at it learns Unichain from
// eth_chainId. A second daemon, executing jovian as anvil does and told 2 s blocks, warns once that the stream
// contradicts that; viem's `multicall` at `pending` through it (Multicall3 preinstalled) reads a preconfirmed transfer
// and the sender's balance after the L1 and Jovian operator fees, as the node has them once sealed. Then anvil is
// killed: the devnet says so in one line and exits 1.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createPublicClient, defineChain, getContractAddress, http, parseAbi, parseGwei, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import WebSocket from 'ws';
import { rpcCall } from '../../scripts/devnet/anvil.js';
import { DEVNET_FEE_PARAMS, nodeChargedFees } from '../../scripts/devnet/l1block.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { createLogger } from '../../src/log.js';
import { metricValue } from '../helpers/metrics-text.js';

const SCRIPT = fileURLToPath(new URL('../../scripts/devnet.ts', import.meta.url));
const { NODE_OPTIONS: _tapLoaders, ...childEnv } = process.env;
for (const k of Object.keys(childEnv)) if (k.startsWith('DEVNET_')) delete childEnv[k];
const MULTICALL3 = '0xcA11bde05977b3631167028862bE2a173976CA11';
const PROXY = '0x4e59b44847b379578588920cA78FbF26c0B4956C';

interface Child {
  proc: ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function devnetChild(args: string[]): Child {
  const proc = spawn(process.execPath, ['--import', 'tsx', SCRIPT, ...args], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => proc.once('exit', (code, signal) => r({ code, signal })));
  return { proc, out: () => out, err: () => err, exited };
}

/** The child's exit; one still running after `ms` (a bound for a busy machine) is killed, so the caller sees SIGKILL. */
async function exitOf(c: Child, ms: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  const timer = setTimeout(() => c.proc.kill('SIGKILL'), ms);
  try {
    return await c.exited;
  } finally {
    clearTimeout(timer);
  }
}

/** Waits for `pred`, polling every 50 ms; a bound for a busy machine, never a pace. */
async function until(pred: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(Array.from({ length: n }, () => new Promise<ReturnType<typeof createServer>>((r) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => r(s));
  })));
  const ports = servers.map((s) => (s.address() as AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

t.test('--help prints every flag and exits 0; a bad flag is one line and exit 2; a taken port one line and exit 1', async (t) => {
  const held = createServer();
  await new Promise<void>((r) => held.listen(0, '127.0.0.1', r));
  t.teardown(() => held.close());
  const port = (held.address() as AddressInfo).port;
  const help = devnetChild(['--help']);
  const bad = devnetChild(['--chain', 'mars']);
  const taken = devnetChild(['--node-port', String(port), '--tx-per-sec', '0']);
  t.same(await exitOf(help, 30_000), { code: 0, signal: null }, '--help exits 0');
  t.match(help.out(), /^Usage: npm run devnet/);
  for (const f of ['--chain', '--dialect', '--node-port', '--stream-port', '--anvil-port', 'DEVNET_NODE_PORT']) t.match(help.out(), f);
  t.same(await exitOf(bad, 30_000), { code: 2, signal: null }, 'a bad flag exits 2');
  t.match(bad.err(), /^devnet: --chain "mars" is not a chain preset: one of op-mainnet, [^\n]*\n$/, 'one line, no stack');
  t.same(await exitOf(taken, 30_000), { code: 1, signal: null }, 'a taken port exits 1');
  t.equal(taken.err(), `devnet failed to start: cannot listen on 127.0.0.1:${port} for the devnet's node RPC: the port is in use; choose another or leave it unset for a free one\n`);
});

t.test('npm run devnet as Unichain on fixed ports: a daemon learns the chain, multicall at pending, anvil killed', async (t) => {
  const [nodePort, streamPort, anvilPort] = (await freePorts(3)) as [number, number, number];
  const child = devnetChild(['--chain', 'unichain', '--node-port', String(nodePort), '--stream-port', String(streamPort), '--anvil-port', String(anvilPort), '--tx-per-sec', '2']);
  t.teardown(() => {
    if (child.proc.exitCode === null) child.proc.kill('SIGKILL');
  });
  await until(() => child.out().includes('Ctrl-C stops everything.') || child.proc.exitCode !== null, 60_000, 'the devnet banner');
  const banner = child.out();
  t.match(banner, /^devnet up \(chain 130: Unichain\)$/m);
  t.match(banner, new RegExp(`^ {2}node RPC {6}http://127\\.0\\.0\\.1:${nodePort} {3}\\(anvil: http://127\\.0\\.0\\.1:${anvilPort}, pid \\d+\\)$`, 'm'), 'the node and anvil on the ports asked for');
  t.match(banner, new RegExp(`^ {2}flashblocks {3}ws://127\\.0\\.0\\.1:${streamPort}/flashblocks {3}\\(dialect op-rbuilder;`, 'm'), "the stream on its port, in Unichain's dialect");
  t.match(banner, /^ {2}fork {10}jovian \(Unichain runs karst now, which anvil 1\.7 cannot run;/m);
  const pid = Number(/pid (\d+)\)/.exec(banner)?.[1]);
  const key = /key (0x[0-9a-f]{64})$/m.exec(banner)?.[1] as Hex | undefined;
  t.ok(key, 'the free account and its key');
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  t.equal(readFileSync(`/proc/${pid}/comm`, 'utf8').trim(), 'anvil', `pid ${pid} is anvil`);
  t.equal(Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]), child.proc.pid, "and the devnet's child");
  const nodeUrl = `http://127.0.0.1:${nodePort}`;
  t.equal(await rpcCall<string>(nodeUrl, 'eth_chainId'), '0x82', 'the node answers chain id 130');
  t.equal(await rpcCall<string>(`http://127.0.0.1:${anvilPort}`, 'eth_chainId'), '0x82', 'so does anvil on its port');

  // The stream: op-rbuilder frames, 5 a block, block timestamps 1 s apart.
  const frames: any[] = [];
  const ws = new WebSocket(`ws://127.0.0.1:${streamPort}/flashblocks`);
  ws.on('message', (d: Buffer) => frames.push(JSON.parse(d.toString())));
  t.teardown(() => ws.terminate());

  // Two daemons on it: one as an operator starts it (the chain learned from the node: karst, 1 s blocks), one
  // executing jovian (what anvil runs) and told 2 s blocks.
  const daemons: { daemon: Daemon; rpc: string; lines: { level: string; msg: string }[] }[] = [];
  for (const extra of [[], ['--execution-hardfork', 'jovian', '--block-time-ms', '2000', '--flashblock-interval-ms', '200']]) {
    const lines: { level: string; msg: string }[] = [];
    const log = createLogger({ level: 'info', write: (l) => void lines.push(JSON.parse(l) as { level: string; msg: string }) });
    const config = loadConfig(['--flashblocks-url', `ws://127.0.0.1:${streamPort}/flashblocks`, '--node-rpc-url', nodeUrl, '--port', '0', '--metrics-port', '0', ...extra], {});
    const daemon = await startDaemon(config, { log });
    t.teardown(() => daemon.stop());
    daemons.push({ daemon, rpc: `http://127.0.0.1:${daemon.rpcPort}`, lines });
  }
  const [learned, told] = daemons as [(typeof daemons)[0], (typeof daemons)[0]];
  t.ok(learned.lines.some((l) => l.msg.startsWith("chain: Unichain (130) by the node's eth_chainId: 1000 ms blocks, 200 ms flashblocks (5 per block), dialect op-rbuilder")), 'the daemon learned Unichain from eth_chainId');
  // Both have seen a block from its index 0 (its L1-info deposit: the fee fields of its receipts).
  const pendingOf = async (rpc: string): Promise<number> => Number(await rpcCall<string>(rpc, 'eth_blockNumber', ['pending']).catch(() => '-1'));
  const joined = await Promise.all(daemons.map((d) => pendingOf(d.rpc)));
  await until(async () => (await Promise.all(daemons.map((d) => pendingOf(d.rpc)))).every((n, i) => n > joined[i]! && joined[i]! >= 0), 30_000, 'a whole block on both daemons');

  // A transfer from the free account to a fresh address, preconfirmed through the daemon.
  const account = privateKeyToAccount(key!);
  const to = privateKeyToAccount(`0x${'5a'.repeat(32)}`).address;
  const value = 123_456_789n;
  t.equal(BigInt(await rpcCall<string>(nodeUrl, 'eth_getBalance', [to, 'latest'])), 0n, 'the recipient is empty on the node');
  const nonce = Number(await rpcCall<string>(told.rpc, 'eth_getTransactionCount', [account.address, 'pending']));
  const raw = await account.signTransaction({ chainId: 130, nonce, type: 'eip1559', to, value, gas: 21_000n, maxFeePerGas: parseGwei('5'), maxPriorityFeePerGas: 1n });
  const receipt = await rpcCall<any>(told.rpc, 'eth_sendRawTransactionSync', [raw]);
  t.equal(receipt.status, '0x1', 'preconfirmed');
  t.equal(receipt.daFootprintGasScalar, '0x190', "its receipt carries Jovian's DA footprint scalar (400)");

  // Multicall3 at pending, through the daemon's executed state.
  const unichain = defineChain({ id: 130, name: 'devnet as unichain', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [told.rpc] } }, contracts: { multicall3: { address: MULTICALL3 } } });
  const client = createPublicClient({ chain: unichain, transport: http(told.rpc) });
  const onKarst = createPublicClient({ chain: unichain, transport: http(learned.rpc) });
  const abi = parseAbi(['function getChainId() view returns (uint256)', 'function getEthBalance(address) view returns (uint256)', 'function getBlockNumber() view returns (uint256)']);
  const [chainId, toBalance, fromBalance, pendingNumber] = await client.multicall({
    blockTag: 'pending',
    allowFailure: false,
    contracts: [
      { address: MULTICALL3, abi, functionName: 'getChainId' },
      { address: MULTICALL3, abi, functionName: 'getEthBalance', args: [to] },
      { address: MULTICALL3, abi, functionName: 'getEthBalance', args: [account.address] },
      { address: MULTICALL3, abi, functionName: 'getBlockNumber' },
    ],
  });
  t.equal(chainId, 130n, 'multicall: getChainId');
  const karst = await onKarst.multicall({ blockTag: 'pending', allowFailure: false, contracts: [{ address: MULTICALL3, abi, functionName: 'getEthBalance', args: [to] }] }).then(
    ([v]) => (v === value ? 'ok' : `read ${v}`),
    (e: Error) => e.message.split('\n').find((l) => l.startsWith('Details:')) ?? e.message,
  );
  // An eth_call without gas runs within karst's 2^24 transaction cap (it got the block's 30M before, and failed).
  t.equal(karst, 'ok', "multicall at pending on the daemon executing karst (the chain's fork by its schedule)");
  t.equal(toBalance, value, 'multicall: the preconfirmed transfer arrived at pending');
  t.ok(pendingNumber >= BigInt(receipt.blockNumber), 'multicall: runs on the pending block');
  // The deterministic deployment proxy: salt ‖ init code gives the CREATE2 address.
  const init: Hex = '0x600a600c600039600a6000f3602a60005260206000f3';
  const salt: Hex = `0x${'01'.repeat(32)}`;
  const deployed = await rpcCall<string>(told.rpc, 'eth_call', [{ to: PROXY, data: salt + init.slice(2) }, 'pending']);
  t.equal(deployed.toLowerCase(), getContractAddress({ opcode: 'CREATE2', from: PROXY, salt, bytecode: init }).toLowerCase(), 'the deployment proxy answers the CREATE2 address');

  // Once sealed, the node agrees: the balances, and fees charged as Jovian charges them.
  const n = Number(receipt.blockNumber);
  await until(async () => (await rpcCall<any>(nodeUrl, 'eth_getTransactionReceipt', [receipt.transactionHash])) !== null, 30_000, 'the block sealed');
  const at = '0x' + n.toString(16);
  t.equal(BigInt(await rpcCall<string>(nodeUrl, 'eth_getBalance', [to, at])), value, 'the node has the transfer');
  t.equal(BigInt(await rpcCall<string>(nodeUrl, 'eth_getBalance', [account.address, at])), fromBalance, "the sender's balance read at pending is the node's after both fees");
  const charged = (await nodeChargedFees(`http://127.0.0.1:${anvilPort}`, n)).get(receipt.transactionHash.toLowerCase());
  t.equal(charged?.l1Fee, BigInt(receipt.l1Fee), "the L1 fee the daemon's receipt shows is the node's");
  // Under jovian the devnet's operator fee has no per-gas part (anvil 1.7.1 applies Isthmus's formula there).
  t.equal(receipt.operatorFeeScalar, '0x0');
  t.equal(charged?.operatorFee, DEVNET_FEE_PARAMS.operatorFeeConstant, 'the node charged the operator fee constant');

  // The daemon told 2 s blocks: one warning, naming both cadences and the flags; the other daemon none.
  await until(() => told.lines.some((l) => /cadence contradicts/.test(l.msg)), 60_000, 'the cadence warning');
  const warned = told.lines.filter((l) => /cadence/.test(l.msg));
  t.equal(warned.length, 1, 'said once');
  t.equal(warned[0]!.level, 'warn');
  t.match(warned[0]!.msg, /contradicts --block-time-ms 2000 --flashblock-interval-ms 200 \(over the Unichain preset \(by the node's chain id 130\)\): its blocks come every 1 s with [56] flashblocks each .* expects 2 s blocks of 10 flashblock intervals \(200 ms\)/);
  t.match(warned[0]!.msg, /To fix it: --chain <unichain\|unichain-sepolia\|xlayer\|xlayer-testnet> if the stream is that chain's, or --block-time-ms 1000 --flashblock-interval-ms 200$/);
  const metrics = await (await fetch(`http://127.0.0.1:${told.daemon.metricsPort}/metrics`)).text();
  t.equal(metricValue(metrics, 'flashblocksd_stream_cadence_mismatch{check="block_time"}'), 1, 'the gauge shows it');
  t.same(learned.lines.filter((l) => /cadence/.test(l.msg)), [], 'the daemon on the right timing does not warn');

  // The stream as Unichain's: op-rbuilder receipts (internally tagged), 5 flashblocks a block, 1 s apart, each block
  // opening with a Jovian L1-info deposit.
  const byBlock = new Map<number, any[]>();
  for (const f of frames) byBlock.set(f.metadata.block_number, [...(byBlock.get(f.metadata.block_number) ?? []), f]);
  const complete = [...byBlock.entries()].filter(([, fs]) => fs[0].index === 0).slice(0, -1);
  t.ok(complete.length >= 3, `${complete.length} complete blocks seen`);
  // 5 intervals: index 0, 1-4 on the interval, and one more at the seal when transactions came after the fourth.
  for (const [b, fs] of complete) t.match(fs.map((f) => f.index).join(','), /^0,1,2,3,4(,5)?$/, `block ${b}: 5 flashblock intervals`);
  const stamps = complete.map(([, fs]) => Number(fs[0].base.timestamp));
  // A build cycle that overran (a busy machine) rounds the next timestamp up: the typical step is what counts.
  const steps = stamps.slice(1).map((s, i) => s - stamps[i]!).sort((a, b) => a - b);
  t.equal(steps[(steps.length - 1) >> 1], 1, `block timestamps 1 s apart (steps ${steps.join(', ')})`);
  const anyReceipt = Object.values(complete[0]![1][0].metadata.receipts)[0] as Record<string, unknown>;
  t.equal(anyReceipt.type, '0x7e', 'receipts internally tagged (op-rbuilder); index 0 opens with a deposit');
  const l1Info = await rpcCall<any>(nodeUrl, 'eth_getTransactionByBlockNumberAndIndex', [at, '0x0']);
  t.equal(l1Info.input.slice(0, 10), '0x3db6be2b', "the block opens with Jovian's setL1BlockValuesJovian()");

  // anvil killed: one line naming it, exit 1, no stack; the node port closed.
  const errBefore = child.err().length;
  process.kill(pid, 'SIGKILL');
  const exit = await exitOf(child, 30_000);
  t.same(exit, { code: 1, signal: null }, 'the devnet exits 1');
  const said = child.err().slice(errBefore);
  t.match(said, new RegExp(`^devnet: anvil \\(pid ${pid}\\) exited \\(signal SIGKILL\\): the devnet cannot run without its node, stopped \\(exit code 1\\); start it again with npm run devnet\\n$`), 'one line saying what happened and what to do');
  t.notMatch(child.err(), /\n\s+at /, 'no stack trace');
  await t.rejects(fetch(nodeUrl, { method: 'POST', body: '{}' }), 'the node port is closed');
});
