// The smoke test each supported Node runs (the normal suite under Node 20; scripts/ci-node24.sh under Node 24 in a
// Debian 13 root): `npm start` with no upstream prints its banner over the embedded devnet, preconfirms a deploy and
// a write, answers eth_call at pending from the write before the node has it, and rebroadcasts the raw stream on the
// main port and on a --stream-port worker thread (each thread loads uWebSockets.js). One process tree, one devnet.
import t from 'tap';
import { createServer } from 'node:net';
import { getContractAddress, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { rpcCall } from '../../scripts/devnet/anvil.js';
import { checkNative, loadUws } from '../../src/binaries.js';
import { silentLogger } from '../../src/log.js';
import { spawnDaemon } from '../helpers/daemon-process.js';
import { connect } from '../helpers/stream.js';

// `npm start` compiles first where dist/ is stale (a fresh root: ~30 s of tsc); then a few 2 s blocks.
t.setTimeout(240_000);

/** Runtime: with calldata, SSTORE(0, calldata[0:32]); always returns SLOAD(0) (as in test/ops/binary.test.ts). */
const RUNTIME = '3615600b576000356000555b60005460005260206000f3';
const INIT = `0x60${(RUNTIME.length / 2).toString(16)}600c60003960${(RUNTIME.length / 2).toString(16)}6000f3${RUNTIME}` as Hex;
const word = (n: bigint): Hex => `0x${n.toString(16).padStart(64, '0')}`;

async function until(what: string, pred: () => boolean | Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

interface Frame {
  payload_id: string;
  index: number;
}

t.test(`node ${process.versions.node}: the uWebSockets.js build with this Node's binary is chosen`, async (t) => {
  const r = checkNative(loadUws(), silentLogger);
  t.equal(r.uws, true, 'native');
  // The pinned build carries binaries up to Node 20's ABI (115); Node 22 (127) and 24 (137) need the recent one.
  const abi = Number(process.versions.modules);
  t.match(r.uwsBuild, abi > 115 ? /^uWebSockets\.js-recent \(@btc-vision\/uwebsockets\.js / : /^uWebSockets\.js(-recent)? \(/, `in use: ${r.uwsBuild}`);
  t.comment(`node ${process.version} (ABI ${abi}), ${r.uwsBuild}`);
});

t.test(`node ${process.versions.node}: npm start's banner, a preconfirmed receipt, eth_call at pending, the raw stream on both ports`, async (t) => {
  const { NODE_OPTIONS: _tapLoaders, ...env } = process.env;
  const streamPort = await freePort();
  const d = await spawnDaemon(['npm', 'start', '--'], ['--port', '0', '--metrics-port', '0', '--stream-port', String(streamPort), '--stream-threads', '1'], { env, startTimeoutMs: 180_000 });
  t.teardown(() => d.close());

  await until('the banner', () => /^ {2}key {7}0x[0-9a-f]{64}$/m.test(d.stderr()), 30_000);
  const banner = d.stderr();
  const chainId = /^ {2}chain id {2}(\d+)$/m.exec(banner)?.[1];
  const nodeUrl = /^ {2}node {6}(http\S+)/m.exec(banner)?.[1];
  const key = /^ {2}key {7}(0x[0-9a-f]{64})$/m.exec(banner)?.[1] as Hex | undefined;
  t.ok(chainId && nodeUrl && key, 'the banner shows chain id, node and a funded key', { banner });
  if (!chainId || !nodeUrl || !key) return;
  t.equal(Number(await rpcCall<string>(d.rpcUrl, 'eth_chainId')), Number(chainId), 'the daemon answers on the banner\'s chain');

  // The raw stream: the main port (main thread) and --stream-port (a worker thread) relay the same bytes.
  const main = connect(`ws://127.0.0.1:${d.rpcPort}/flashblocks`);
  const worker = connect(`ws://127.0.0.1:${streamPort}/flashblocks`);
  t.teardown(() => {
    main.ws.terminate();
    worker.ws.terminate();
  });
  await Promise.all([main.opened, worker.opened]);
  const keyOf = (data: Buffer): string => {
    const f = JSON.parse(data.toString('utf8')) as Frame;
    return `${f.payload_id}/${f.index}`;
  };
  let common: string | undefined;
  await until('a flashblock on both ports', () => {
    const seen = new Set(main.frames.map((f) => keyOf(f.data)));
    common = worker.frames.map((f) => keyOf(f.data)).find((k) => seen.has(k));
    return common !== undefined;
  }, 15_000);
  const a = main.frames.find((f) => keyOf(f.data) === common)!;
  const b = worker.frames.find((f) => keyOf(f.data) === common)!;
  t.ok(a.data.equals(b.data) && !a.isBinary && !b.isBinary, `flashblock ${common} is the same text frame on both ports`);

  // A deploy and a write sent just after a block started; read while the node has not sealed the block. The node is
  // asked before the daemon in each poll, so "the node had no receipt" holds at a moment before the daemon served it.
  // On a machine so busy that the block sealed first (the 2 s block outran the poll), the pair is sent again (3 tries).
  const account = privateKeyToAccount(key);
  const fees = { chainId: Number(chainId), maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000n, type: 'eip1559' } as const;
  let result: { receipt: { blockNumber: string; status: string }; called: string; value: bigint; before: boolean } | null = null;
  for (let attempt = 1; attempt <= 3 && (result === null || !result.before); attempt++) {
    const nonce = Number(await rpcCall<string>(nodeUrl, 'eth_getTransactionCount', [account.address, 'pending']));
    const contract = getContractAddress({ from: account.address, nonce: BigInt(nonce) });
    const value = 0xc0ffeen + BigInt(attempt);
    const deploy = await account.signTransaction({ data: INIT, nonce, gas: 200_000n, ...fees });
    const write = await account.signTransaction({ to: contract, data: word(value), nonce: nonce + 1, gas: 100_000n, ...fees });
    const seen = main.frames.length;
    await until('the first flashblock after a block start', () => main.frames.slice(seen).some((f) => (JSON.parse(f.data.toString('utf8')) as Frame).index === 1), 10_000);
    await rpcCall(d.rpcUrl, 'eth_sendRawTransaction', [deploy]);
    const writeHash = await rpcCall<string>(d.rpcUrl, 'eth_sendRawTransaction', [write]);
    let receipt: { blockNumber: string | null; status: string } | null = null;
    let before = false;
    await until('the preconfirmed receipt of the write', async () => {
      const atNode = await rpcCall<unknown>(nodeUrl, 'eth_getTransactionReceipt', [writeHash]);
      receipt = await rpcCall<typeof receipt>(d.rpcUrl, 'eth_getTransactionReceipt', [writeHash]);
      before = atNode === null;
      return receipt?.blockNumber != null;
    }, 10_000);
    const called = await rpcCall<string>(d.rpcUrl, 'eth_call', [{ to: contract }, 'pending']);
    result = { receipt: receipt! as { blockNumber: string; status: string }, called, value, before };
    if (!before) t.comment(`attempt ${attempt}: the node sealed block ${Number(result.receipt.blockNumber)} before the poll saw the receipt; sending again`);
  }
  t.ok(result!.before, `the daemon served the receipt (block ${Number(result!.receipt.blockNumber)}) while the node had none: preconfirmed`);
  t.equal(result!.receipt.status, '0x1', 'the write succeeded');
  t.equal(result!.called, word(result!.value), 'eth_call at pending returns the preconfirmed write');

  d.proc.kill('SIGINT');
  const exit = await d.exited;
  t.ok(exit.signal === 'SIGINT' || exit.code === 0 || exit.code === 130, `npm ends on the signal (${JSON.stringify(exit)})`);
  t.ok(d.logs().some((l) => l.msg === 'stopped cleanly'), 'the daemon stopped cleanly');
  t.same(d.logs().filter((l) => l.level === 'error'), [], 'no errors logged');
});
