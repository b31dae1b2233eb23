// Deposits through the same shapes on both stream kinds, end to end with real parts: a real anvil node, two
// in-process daemons each with its anvil execution engine, real raw 0x7e deposits and a real signed transaction.
// The block is built on the node (mined, read, reverted, so it is pending again) and streamed as an OP builder
// writes it — metadata receipts with the pre-execution depositNonce, receipts_root over those — to one daemon with
// receipts in metadata and to one post-Azul (`{block_number}` metadata only). Once the engine executed it, the
// post-Azul daemon's deposit objects (alone, in the full block) and receipts are byte-identical to the other's.
// (The devnet sequencer cannot carry a deposit: it asks anvil for eth_getRawTransactionByHash, which kills anvil
// 1.7.1 for a deposit.)
import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { toHex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { rpcCall, startAnvil } from '../../scripts/devnet/anvil.js';
import { depositTx } from '../../scripts/devnet/contracts.js';
import { devAccounts, encodeFlashblock, type BuiltFlashblock } from '../../scripts/devnet/sequencer.js';
import { receiptFromRpc, receiptsRoot } from '../../src/exec/receipts.js';
import { TX_DEPOSIT } from '../../src/chain/types.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { createLogger } from '../../src/log.js';
import { startReplayServer } from '../helpers/replay-server.js';

const ZERO_HASH = '0x' + '00'.repeat(32);
const log = createLogger({ level: 'error', write: () => undefined });
const node = await startAnvil({});
t.teardown(() => node.stop());

async function boot(t: Test, streamUrl: string): Promise<{ daemon: Daemon; rpc: string }> {
  const config = loadConfig(
    ['--flashblocks-url', streamUrl, '--node-rpc-url', node.url, '--port', '0', '--metrics-port', '0', '--block-time-ms', '2000', '--log-level', 'error', '--pending-max-age-ms', '600000'],
    {},
  );
  const daemon = await startDaemon(config, { log });
  t.teardown(() => daemon.stop());
  return { daemon, rpc: `http://127.0.0.1:${daemon.rpcPort}` };
}

async function until(pred: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The `result` of a call exactly as the server wrote it (no re-serialisation, key order kept). */
async function rawCall(url: string, method: string, params: unknown[]): Promise<string> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  const text = await res.text();
  const at = text.indexOf('"result":');
  if (at < 0) throw new Error(`${method}: ${text}`);
  return text.slice(at + 9, text.lastIndexOf('}'));
}

const fresh = (): string => '0x' + randomBytes(20).toString('hex');
const deposit = (from: string, to: string): string => depositTx('0x' + randomBytes(32).toString('hex'), from, to, 10n ** 18n, 10n ** 15n, 100_000n);

/**
 * Block `head + 1` of a deposit from `repeat` (its second), a deposit from a fresh sender and a signed transfer,
 * mined on the node, read, and reverted; returned as one flashblock in an OP builder's terms.
 */
async function buildPendingBlock(repeat: string): Promise<{ fb: BuiltFlashblock; hashes: string[] }> {
  const head = await rpcCall<Record<string, string>>(node.url, 'eth_getBlockByNumber', ['latest', false]);
  const number = Number(head.number) + 1;
  const snap = await rpcCall<string>(node.url, 'evm_snapshot', []);
  const signer = privateKeyToAccount(devAccounts(1)[0]!.privateKey);
  const nonce = Number(await rpcCall<string>(node.url, 'eth_getTransactionCount', [signer.address, 'latest']));
  const user = await signer.signTransaction({ chainId: node.chainId, nonce, type: 'eip1559', maxFeePerGas: 10n ** 10n, maxPriorityFeePerGas: 1n, gas: 21_000n, to: repeat as `0x${string}`, value: 1n });
  const raws = [deposit(repeat, fresh()), deposit(fresh(), fresh()), user];
  const hashes: string[] = [];
  for (const r of raws) hashes.push(await rpcCall<string>(node.url, 'eth_sendRawTransaction', [r]));
  await rpcCall(node.url, 'evm_mine', [Number(head.timestamp) + 2]);
  const block = await rpcCall<Record<string, any>>(node.url, 'eth_getBlockByNumber', [toHex(number), false]);
  const rpcReceipts = await rpcCall<Record<string, any>[]>(node.url, 'eth_getBlockReceipts', [toHex(number)]);
  await rpcCall(node.url, 'evm_revert', [snap]);
  if (block.transactions.length !== raws.length) throw new Error(`block ${number} holds ${block.transactions.length} of ${raws.length} txs`);
  // anvil reports a deposit's nonce after execution; an OP builder (op-geth/op-reth) the one before.
  const pre = rpcReceipts.map((r) => (Number(r.type) === TX_DEPOSIT && r.depositNonce != null ? { ...r, depositNonce: toHex(BigInt(r.depositNonce) - 1n) } : r));
  const fb: BuiltFlashblock = {
    payloadId: '0x' + randomBytes(8).toString('hex'),
    index: 0,
    blockNumber: number,
    base: {
      parent_beacon_block_root: block.parentBeaconBlockRoot ?? ZERO_HASH,
      parent_hash: block.parentHash,
      fee_recipient: block.miner,
      prev_randao: block.mixHash ?? ZERO_HASH,
      block_number: toHex(number),
      gas_limit: block.gasLimit,
      timestamp: block.timestamp,
      extra_data: block.extraData,
      base_fee_per_gas: block.baseFeePerGas,
    },
    diff: {
      state_root: block.stateRoot,
      receipts_root: receiptsRoot(pre.map(receiptFromRpc)),
      logs_bloom: block.logsBloom,
      gas_used: block.gasUsed,
      block_hash: block.hash,
      transactions: raws,
      withdrawals: [],
      withdrawals_root: block.withdrawalsRoot ?? ZERO_HASH,
    },
    receipts: pre.map((r) => ({
      hash: r.transactionHash,
      type: Number(r.type),
      status: r.status,
      cumulativeGasUsed: r.cumulativeGasUsed,
      logs: r.logs.map((l: Record<string, unknown>) => ({ address: l.address, topics: l.topics, data: l.data })),
      ...(r.depositNonce === undefined ? {} : { depositNonce: r.depositNonce }),
      ...(r.depositReceiptVersion === undefined ? {} : { depositReceiptVersion: r.depositReceiptVersion }),
    })),
    balances: {},
  };
  return { fb, hashes };
}

t.test('deposits: tx object, full block and receipts byte-identical on both stream kinds once executed', async (t) => {
  // A sender with one deposit already canonical: its next deposit's nonce is 1 (anvil's receipt would say 2).
  const repeat = fresh();
  await rpcCall(node.url, 'eth_sendRawTransaction', [deposit(repeat, fresh())]);
  await rpcCall(node.url, 'evm_mine', []);
  const { fb, hashes } = await buildPendingBlock(repeat);
  // The senders' nonces before the block (what op-geth shows as a deposit's nonce); anvil's own deposit objects
  // say 0x0 whatever the sender's nonce, and its receipts the nonce after execution.
  const nonces = ['0x1', '0x0'];

  const upMeta = await startReplayServer();
  const upAzul = await startReplayServer();
  t.teardown(() => upMeta.close());
  t.teardown(() => upAzul.close());
  const withReceipts = await boot(t, upMeta.url);
  const azul = await boot(t, upAzul.url);
  await upMeta.waitForClients(1, 10_000);
  await upAzul.waitForClients(1, 10_000);
  await until(() => withReceipts.daemon.execution?.state === 'up' && azul.daemon.execution?.state === 'up', 30_000, 'both engines up');
  upMeta.send(encodeFlashblock(fb, { receipts: 'external', azul: false }));
  upAzul.send(encodeFlashblock(fb, { receipts: 'external', azul: true }));
  // Read (and so cached) as soon as the post-Azul daemon holds the block, most likely before its engine ran it.
  await until(async () => (await rpcCall(azul.rpc, 'eth_getTransactionByHash', [hashes[0]])) !== null, 10_000, 'the post-Azul daemon holds the block');
  const early = await rawCall(azul.rpc, 'eth_getBlockByNumber', ['pending', true]);
  t.comment(`read at once: the deposit object ${early.includes('"nonce":"0x1","depositReceiptVersion"') ? 'had' : 'lacked'} its nonce (execution ${azul.daemon.execution?.executed?.number === fb.blockNumber ? 'done' : 'not done'})`);

  // A client polling the post-Azul daemon for the last receipt every 10 ms gets it once the engine has run.
  await until(async () => (await rpcCall(withReceipts.rpc, 'eth_getTransactionReceipt', [hashes[2]])) !== null, 10_000, 'the daemon with receipts serves them');
  await until(async () => (await rpcCall(azul.rpc, 'eth_getTransactionReceipt', [hashes[2]])) !== null, 10_000, 'the post-Azul daemon serves the executed receipt');
  t.equal(await rpcCall(node.url, 'eth_getTransactionReceipt', [hashes[2]]), null, 'the node has no such block: read before it is canonical');
  t.equal(azul.daemon.execution?.executed?.number, fb.blockNumber, 'the post-Azul engine executed the block');

  for (let i = 0; i < hashes.length; i++) {
    const h = hashes[i]!;
    const [a, b] = await Promise.all([rawCall(withReceipts.rpc, 'eth_getTransactionByHash', [h]), rawCall(azul.rpc, 'eth_getTransactionByHash', [h])]);
    if (fb.receipts[i]!.type === TX_DEPOSIT) {
      t.match(JSON.parse(a), { type: '0x7e', nonce: nonces[i], depositReceiptVersion: '0x1' }, `deposit ${i}: the sender's nonce before it (${nonces[i]}) and the receipt version`);
    }
    t.equal(b, a, `eth_getTransactionByHash ${i} (type ${fb.receipts[i]!.type}): byte-identical`);
    const [ra, rb] = await Promise.all([rawCall(withReceipts.rpc, 'eth_getTransactionReceipt', [h]), rawCall(azul.rpc, 'eth_getTransactionReceipt', [h])]);
    t.equal(rb, ra, `eth_getTransactionReceipt ${i}: byte-identical`);
  }
  for (const [method, params] of [
    ['eth_getBlockByNumber', ['pending', true]],
    ['eth_getBlockByHash', [fb.diff.block_hash, true]],
    ['eth_getBlockReceipts', ['pending']],
    ['eth_getTransactionByBlockNumberAndIndex', ['pending', '0x0']],
  ] as const) {
    const [a, b] = await Promise.all([rawCall(withReceipts.rpc, method, [...params]), rawCall(azul.rpc, method, [...params])]);
    t.not(a, 'null', `${method}: answered from pending state`);
    t.equal(b, a, `${method}(${params.join(', ')}): byte-identical`);
  }
  // The nonce after the pending block at its height: a deposit's nonce comes from its receipt, executed or streamed.
  const height = toHex(fb.blockNumber);
  const [na, nb] = await Promise.all([rpcCall(withReceipts.rpc, 'eth_getTransactionCount', [repeat, height]), rpcCall(azul.rpc, 'eth_getTransactionCount', [repeat, height])]);
  t.equal(na, '0x2', "with receipts: the deposit sender's nonce after its second deposit");
  t.equal(nb, na, 'post-Azul: the same, from the executed receipt');
});
