// A wallet against the daemon on the devnet (real anvil node, real flashblocks, the execution engine): viem's
// eth_fillTransaction is answered from pending state (two back-to-back sends get consecutive nonces from one call
// each, gas estimated on executed state), and EIP-1898 block objects naming a pending block ({blockHash} of its
// newest flashblock, {blockNumber} of its height) answer state reads from pending state before the canonical block.
import t from 'tap';
import { createPublicClient, createWalletClient, defineChain, getContractAddress, http, parseTransaction, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { optimism } from 'viem/chains';
import { rpcCall } from '../../scripts/devnet/anvil.js';
import { startDevnet } from '../../scripts/devnet/sequencer.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon } from '../../src/daemon.js';
import { createLogger } from '../../src/log.js';
import { STORE_INIT, STORE_RUNTIME, word } from '../helpers/store-contract.js';
import { nextFlashblock } from '../helpers/devnet-wait.js';

/** Runtime: with calldata, SSTORE(0, calldata[0:32]); always returns SLOAD(0). */
const RUNTIME = STORE_RUNTIME;
const INIT = STORE_INIT;

const logs: string[] = [];
const log = createLogger({ level: 'warn', write: (line) => void logs.push(line) });

const devnet = await startDevnet({ blockTimeMs: 2000, flashblockMs: 200 });
t.teardown(() => devnet.stop());
const daemon = await startDaemon(
  loadConfig(['--flashblocks-url', devnet.flashblocksUrl, '--node-rpc-url', devnet.nodeRpcUrl, '--port', '0', '--metrics-port', '0', '--block-time-ms', '2000', '--log-level', 'warn'], {}),
  { log },
);
t.teardown(() => daemon.stop());
const rpc = `http://127.0.0.1:${daemon.rpcPort}/`;
const chain = defineChain({ ...optimism, id: devnet.chainId, name: 'devnet', rpcUrls: { default: { http: [rpc] } } });

async function until(pred: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function call(method: string, params: unknown[]): Promise<{ result?: any; error?: { code: number; message: string } }> {
  const res = await fetch(rpc, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  return (await res.json()) as { result?: unknown; error?: { code: number; message: string } };
}

await until(() => daemon.execution?.executed != null, 30_000, 'the engine executes a flashblock');

t.test('viem fills with eth_fillTransaction: two back-to-back sends get consecutive nonces, one call each', async (t) => {
  const acct = devnet.accounts[devnet.accounts.length - 1]!;
  const account = privateKeyToAccount(acct.privateKey as Hex);
  const methods: string[] = [];
  const transport = http(rpc, {
    onFetchRequest: async (req) => {
      const body = (await req.clone().json()) as { method: string } | { method: string }[];
      for (const m of Array.isArray(body) ? body : [body]) methods.push(m.method);
    },
  });
  const wallet = createWalletClient({ account, chain, transport });
  const start = BigInt(await rpcCall<string>(rpc, 'eth_getTransactionCount', [acct.address, 'pending']));

  const prepared = await wallet.prepareTransactionRequest({ to: devnet.accounts[0]!.address as Hex, value: 1n });
  t.equal(BigInt(prepared.nonce), start, `prepareTransactionRequest: the pending nonce ${start}`);
  t.equal(prepared.gas, 21_000n, 'gas of a plain transfer');
  t.ok(prepared.maxFeePerGas! >= prepared.maxPriorityFeePerGas!, 'maxFeePerGas ≥ maxPriorityFeePerGas');
  t.same(methods, ['eth_fillTransaction'], 'one round trip: eth_fillTransaction, answered (no -32601 and no fallback calls)');

  methods.length = 0;
  const h1 = await wallet.sendTransaction({ to: devnet.accounts[0]!.address as Hex, value: 1n });
  const h2 = await wallet.sendTransaction({ to: devnet.accounts[0]!.address as Hex, value: 2n });
  t.same(methods, ['eth_fillTransaction', 'eth_sendRawTransaction', 'eth_fillTransaction', 'eth_sendRawTransaction'], 'each send: one fill, one submit');
  const client = createPublicClient({ chain, transport: http(rpc) });
  const [t1, t2] = await Promise.all([client.getTransaction({ hash: h1 }), client.getTransaction({ hash: h2 })]);
  t.equal(BigInt(t1.nonce), start, 'first send: the pending nonce');
  t.equal(BigInt(t2.nonce), start + 1n, 'second send, right after: the next one (the node pool counted, no second call)');
  await until(async () => (await call('eth_getTransactionReceipt', [h2])).result != null, 10_000, 'the second send preconfirmed');
  t.equal((await call('eth_getTransactionReceipt', [h1])).result?.status, '0x1', 'the first send succeeded');
  t.equal((await call('eth_getTransactionReceipt', [h2])).result?.status, '0x1', 'the second send succeeded');
});

t.test('eth_fillTransaction: raw is the unsigned tx of the returned fields; gas is estimated on executed state', async (t) => {
  const acct = devnet.accounts[devnet.accounts.length - 2]!;
  const account = privateKeyToAccount(acct.privateKey as Hex);
  const wallet = createWalletClient({ account, chain, transport: http(rpc) });
  const nonce = Number(await rpcCall<string>(rpc, 'eth_getTransactionCount', [acct.address, 'pending']));
  const contract = getContractAddress({ from: acct.address as Hex, nonce: BigInt(nonce) });
  await nextFlashblock(devnet, (fb) => fb.index === 1);
  const deploy = await wallet.sendTransaction({ data: INIT, gas: 200_000n });
  await until(async () => (await call('eth_getTransactionReceipt', [deploy])).result != null, 5000, 'the deploy preconfirmed');

  const { result, error } = await call('eth_fillTransaction', [{ from: acct.address, to: contract, data: word(7n) }]);
  const nodeCode = await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getCode', [contract, 'latest']);
  t.equal(error, undefined, 'answered');
  const tx = result.tx as Record<string, string>;
  const parsed = parseTransaction(result.raw as Hex);
  t.equal(tx.type, '0x2', 'an EIP-1559 transaction by default');
  t.equal(parsed.nonce, Number(tx.nonce), 'raw and tx agree: nonce');
  t.equal(parsed.gas, BigInt(tx.gas!), 'raw and tx agree: gas');
  t.equal(parsed.maxFeePerGas, BigInt(tx.maxFeePerGas!), 'raw and tx agree: maxFeePerGas');
  t.equal(parsed.chainId, devnet.chainId, 'raw and tx agree: chainId');
  t.equal(parsed.to, contract.toLowerCase(), 'raw and tx agree: to');
  t.equal(Number(tx.nonce), nonce + 1, 'nonce after the preconfirmed deploy');
  const estimate = BigInt((await call('eth_estimateGas', [{ from: acct.address, to: contract, data: word(7n) }, 'pending'])).result as string);
  t.equal(BigInt(tx.gas!), estimate, `gas = eth_estimateGas(pending): the store into the preconfirmed contract (${estimate})`);
  t.ok(estimate > 40_000n, 'more than a call to an empty account: the contract was executed');
  if (nodeCode === '0x') t.pass('the node had no code there yet: the estimate came from executed state');

  const legacy = await call('eth_fillTransaction', [{ from: acct.address, to: contract, gasPrice: '0x3b9aca00', gas: '0x5208' }]);
  t.equal(legacy.result.tx.type, '0x0', 'gasPrice → legacy');
  t.equal(legacy.result.tx.gasPrice, '0x3b9aca00', 'the given gasPrice kept');
  t.equal(legacy.result.tx.gas, '0x5208', 'the given gas kept');
  t.equal(parseTransaction(legacy.result.raw as Hex).type, 'legacy', 'raw decodes as legacy');
  const mismatch = await call('eth_fillTransaction', [{ from: acct.address, to: contract, chainId: '0x1' }]);
  t.equal(mismatch.error?.code, -32602, 'a chainId not the node\'s is refused');
  t.match(mismatch.error?.message, /chainId does not match/);
});

t.test('EIP-1898 {blockHash} / {blockNumber} of the pending block answer state reads from pending state', async (t) => {
  const acct = devnet.accounts[devnet.accounts.length - 3]!;
  const account = privateKeyToAccount(acct.privateKey as Hex);
  const wallet = createWalletClient({ account, chain, transport: http(rpc) });
  // Everything below runs within one block, before the node has it: retried if a block boundary got in the way.
  for (let attempt = 1; ; attempt++) {
    const nonce = Number(await rpcCall<string>(rpc, 'eth_getTransactionCount', [acct.address, 'pending']));
    const contract = getContractAddress({ from: acct.address as Hex, nonce: BigInt(nonce) });
    const fb = await nextFlashblock(devnet, (fb) => fb.index === 1);
    const deploy = await wallet.sendTransaction({ data: INIT, gas: 200_000n, nonce });
    await until(async () => (await call('eth_getTransactionReceipt', [deploy])).result != null, 5000, 'the deploy preconfirmed');
    // The pending block's hash as of the deploy's flashblock: the write below lands in a later one.
    const older = ((await call('eth_getBlockByNumber', ['pending', false])).result as { hash: string }).hash;
    const write = await wallet.sendTransaction({ to: contract, data: word(42n), gas: 100_000n, nonce: nonce + 1 });
    await until(async () => (await call('eth_getTransactionReceipt', [write])).result != null, 5000, 'the write preconfirmed');
    const pending = (await call('eth_getBlockByNumber', ['pending', false])).result as { hash: string; number: string };
    const byHash = { blockHash: pending.hash };
    const r = {
      code: await call('eth_getCode', [contract, byHash]),
      storage: await call('eth_getStorageAt', [contract, '0x0', byHash]),
      call: await call('eth_call', [{ to: contract }, byHash]),
      estimate: await call('eth_estimateGas', [{ from: acct.address, to: contract, data: word(1n) }, byHash]),
      accessList: await call('eth_createAccessList', [{ from: acct.address, to: contract, data: word(1n) }, byHash]),
      balance: await call('eth_getBalance', [acct.address, byHash]),
      nonce: await call('eth_getTransactionCount', [acct.address, byHash]),
      plainHash: await call('eth_getCode', [contract, pending.hash]),
      byNumber: await call('eth_getCode', [contract, { blockNumber: pending.number }]),
      nonceByNumber: await call('eth_getTransactionCount', [acct.address, { blockNumber: pending.number }]),
      canonical: await call('eth_getBalance', [acct.address, { blockHash: pending.hash, requireCanonical: true }]),
      superseded: await call('eth_getBalance', [acct.address, { blockHash: older }]),
      pendingBalance: await call('eth_getBalance', [acct.address, 'pending']),
    };
    const latest = Number(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_blockNumber'));
    const after = (await call('eth_getBlockByNumber', ['pending', false])).result as { hash: string };
    if ((latest >= fb.blockNumber || after.hash !== pending.hash) && attempt < 3) {
      t.comment(`attempt ${attempt}: the block moved on during the reads; again`);
      continue;
    }
    t.equal(Number(pending.number), fb.blockNumber, 'the pending block is the one the transactions went into');
    t.equal(r.code.result, `0x${RUNTIME}`, 'eth_getCode {blockHash}: the preconfirmed contract (the node has no such block)');
    t.equal(r.storage.result, word(42n), 'eth_getStorageAt {blockHash}: the preconfirmed write');
    t.equal(r.call.result, word(42n), 'eth_call {blockHash}');
    t.ok(BigInt(r.estimate.result) > 21_000n, `eth_estimateGas {blockHash}: ${r.estimate.result}`);
    t.ok(Array.isArray(r.accessList.result?.accessList), 'eth_createAccessList {blockHash}');
    t.equal(r.balance.result, r.pendingBalance.result, 'eth_getBalance {blockHash} = pending');
    t.equal(BigInt(r.nonce.result), BigInt(nonce + 2), 'eth_getTransactionCount {blockHash}: after both preconfirmed sends');
    t.equal(r.plainHash.result, `0x${RUNTIME}`, 'a bare 32-byte hash too');
    t.equal(r.byNumber.result, `0x${RUNTIME}`, '{blockNumber: pending height} = the number');
    t.equal(BigInt(r.nonceByNumber.result), BigInt(nonce + 2), 'eth_getTransactionCount {blockNumber: pending height}');
    t.equal(r.canonical.error?.code, -32000, 'requireCanonical with a pending hash: an error, as geth for a non-canonical block');
    t.match(r.canonical.error?.message, /not currently canonical/);
    t.not(older, pending.hash, 'the write moved the pending block hash on');
    t.equal(r.superseded.error?.code, -32000, "an older flashblock's hash whose block has taken transactions since: refused, not answered with newer state");
    t.match(r.superseded.error?.message, /superseded/);
    break;
  }
  t.same(logs.filter((l) => /"level":"(warn|error)"/.test(l) && !l.includes('execution engine')), [], 'no warnings from the daemon');
});
