// Polling filters on the devnet (real anvil, real flashblocks, the daemon in process) through viem's HTTP watchers,
// the way app backends use them: watchContractEvent (eth_newFilter) and watchPendingTransactions
// (eth_newPendingTransactionFilter) poll eth_getFilterChanges; viem's watchBlocks polls eth_getBlockByNumber rather
// than a filter, so the block filter is viem's createBlockFilter + getFilterChanges. Every block's seal is held
// (devnet.holdSeals) until the watchers have had each token Transfer log and each transaction of that block: the
// block becomes canonical only after they arrived, so each arrived preconfirmed (event order, no clock). Then: each
// log, transaction hash and block hash arrived exactly once, and the logs are the node's canonical ones. Raw requests
// check eth_getFilterLogs, eth_uninstallFilter and an unknown id.
import t from 'tap';
import { createPublicClient, getContractAddress, http, parseAbi, type Log } from 'viem';
import { rpcCall } from '../../scripts/devnet/anvil.js';
import { startDevnet } from '../../scripts/devnet/sequencer.js';
import { startTraffic, type Traffic } from '../../scripts/devnet/traffic.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon } from '../../src/daemon.js';
import { silentLogger } from '../../src/log.js';

/** Bound of one seal's wait for the watchers (a busy machine's); the devnet's own bound is above it. */
const HOLD_WAIT_MS = 15_000;
const POLL_MS = 100;
const TXS = 40;
const TRANSFER = parseAbi(['event Transfer(address indexed from, address indexed to, uint256 value)']);

const devnet = await startDevnet({ blockTimeMs: 1000, flashblockMs: 200 });
t.teardown(() => devnet.stop());
const config = loadConfig(
  ['--flashblocks-url', devnet.flashblocksUrl, '--node-rpc-url', devnet.nodeRpcUrl, '--port', '0', '--metrics-port', '0', '--block-time-ms', '1000', '--log-level', 'error', '--execution', 'false'],
  {},
);
const daemon = await startDaemon(config, { log: silentLogger });
t.teardown(() => daemon.stop());
const rpc = `http://127.0.0.1:${daemon.rpcPort}`;
const client = createPublicClient({ transport: http(rpc), pollingInterval: POLL_MS });

/** Resolves once `pred` holds, checked on every devnet flashblock and every 20 ms; rejects after `ms` naming `what`. */
async function until(pred: () => boolean, ms: number, what: () => string): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out: ${what()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const key = (l: { transactionHash: string | null; logIndex: number | string | null }): string => `${l.transactionHash?.toLowerCase()}:${Number(l.logIndex)}`;

t.test('viem HTTP watchers see each log and transaction preconfirmed, once; block hashes once, in order', async (t) => {
  await until(() => daemon.view.pendingBlock() !== null, 30_000, () => 'the daemon applies a flashblock');
  // The token traffic's first account deploys at its next nonce: its address is known before it exists.
  const deployer = devnet.accounts[0]!;
  const nonce = Number(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getTransactionCount', [deployer.address, 'pending']));
  const token = getContractAddress({ from: deployer.address, nonce: BigInt(nonce) });

  // The watchers.
  const logs: Log[] = [];
  const txs: string[] = [];
  const blockHashes: string[] = [];
  const errors: string[] = [];
  const unwatchLogs = client.watchContractEvent({ address: token, abi: TRANSFER, eventName: 'Transfer', poll: true, pollingInterval: POLL_MS, onLogs: (ls) => void logs.push(...ls), onError: (e) => void errors.push(e.message) });
  const unwatchTxs = client.watchPendingTransactions({ poll: true, pollingInterval: POLL_MS, onTransactions: (hs) => void txs.push(...hs), onError: (e) => void errors.push(e.message) });
  const blockFilter = await client.createBlockFilter();
  let polling = true;
  const blockPoller = (async () => {
    while (polling) {
      try {
        blockHashes.push(...(await client.getFilterChanges({ filter: blockFilter })));
      } catch (e) {
        errors.push((e as Error).message);
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  })();
  t.teardown(async () => {
    unwatchLogs();
    unwatchTxs();
    polling = false;
    await blockPoller;
  });
  const installed = daemon.metrics.rpcFilters;
  await until(() => installed.logs.value >= 1 && installed.pending_transactions.value >= 1 && installed.blocks.value >= 1, 20_000, () => 'the watchers install their filters in the daemon');
  const firstBlock = daemon.view.highestNumber + 1;

  // What each block holds, from the sequencer: its transactions, and those that emitted a token Transfer.
  const blockTxs = new Map<number, string[]>();
  const transfersOf = new Map<number, string[]>();
  const offFlashblocks = devnet.onFlashblock((fb) => {
    for (const r of fb.receipts) {
      (blockTxs.get(fb.blockNumber) ?? blockTxs.set(fb.blockNumber, []).get(fb.blockNumber)!).push(r.hash.toLowerCase());
      if (r.logs.some((l) => l.address.toLowerCase() === token.toLowerCase())) {
        (transfersOf.get(fb.blockNumber) ?? transfersOf.set(fb.blockNumber, []).get(fb.blockNumber)!).push(r.hash.toLowerCase());
      }
    }
  });
  t.teardown(offFlashblocks);
  const sealed = new Set<number>();
  let holdFailure: string | null = null;
  const missing = (n: number): string[] => {
    const gotLogs = new Set(logs.map((l) => l.transactionHash?.toLowerCase()));
    const gotTxs = new Set(txs.map((h) => h.toLowerCase()));
    return [...(transfersOf.get(n) ?? []).filter((h) => !gotLogs.has(h)).map((h) => `log of ${h}`), ...(blockTxs.get(n) ?? []).filter((h) => !gotTxs.has(h)).map((h) => `tx ${h}`)];
  };
  // A block the watchers saw from its first flashblock seals only once they have all of it.
  const release = devnet.holdSeals(async (last) => {
    const n = last.blockNumber;
    if (n >= firstBlock && holdFailure === null) {
      await until(() => missing(n).length === 0, HOLD_WAIT_MS, () => `block ${n}: ${missing(n).slice(0, 3).join(', ')} not delivered before its seal`).catch((e: unknown) => void (holdFailure = (e as Error).message));
    }
    sealed.add(n);
  }, HOLD_WAIT_MS + 10_000);
  t.teardown(release);

  // Traffic starts in a block whose every flashblock the watchers see (and whose seal is held).
  await until(() => blockTxs.has(firstBlock), 20_000, () => `block ${firstBlock} begins`);
  let traffic: Traffic | null = null;
  const sent: string[] = [];
  let transfers = 0;
  traffic = await startTraffic({
    rpcUrl: rpc, chainId: devnet.chainId, accounts: devnet.accounts.slice(0, 3), txPerSec: 15, maxTxs: TXS, mix: ['transfer'], envEveryMs: 0,
    onSent: (s) => {
      sent.push(s.hash.toLowerCase());
      if (s.kind === 'transfer') transfers++;
    },
  });
  t.teardown(() => traffic?.stop());
  await traffic.done();
  const blockOf = (h: string): number | undefined => [...blockTxs].find(([, hs]) => hs.includes(h))?.[0];
  await until(() => sent.every((h) => blockOf(h) !== undefined), 20_000, () => 'every sent transaction in a flashblock');
  const lastBlock = Math.max(...sent.map((h) => blockOf(h)!));
  const lastHash = async (): Promise<string | null> => (await rpcCall<{ hash: string } | null>(devnet.nodeRpcUrl, 'eth_getBlockByNumber', ['0x' + lastBlock.toString(16), false]))?.hash ?? null;
  await until(() => sealed.has(lastBlock) && daemon.view.canonical >= lastBlock, 30_000, () => `block ${lastBlock} sealed and canonical in the daemon`);
  const want = await lastHash();
  await until(() => blockHashes.includes(want!), 20_000, () => `the block filter delivers block ${lastBlock}`);
  // The canonical reconciliation of the last block ran with its hash; two more polls of each watcher pick up anything it added.
  const polls = (): number => (['state', 'node', 'error'] as const).reduce((n, s) => n + daemon.metrics.rpcHandle('eth_getFilterChanges', s).counter.value, 0);
  const p0 = polls();
  await until(() => polls() >= p0 + 6, 20_000, () => 'more polls');
  release();

  t.equal(holdFailure, null, 'every block sealed only after the watchers had its Transfer logs and its transactions: all arrived preconfirmed');
  t.same(errors, [], 'no watcher error');
  t.equal(devnet.stats().sealHoldTimeouts, 0, 'no seal sealed anyway');

  const st = traffic.stats();
  t.equal(st.errors, 0, `every submission accepted (${st.lastError ?? 'no error'})`);
  const logKeys = logs.map(key);
  t.equal(new Set(logKeys).size, logKeys.length, `${logs.length} logs, each once`);
  t.same(logs.filter((l) => l.removed), [], 'none removed (the devnet seals what it preconfirmed)');
  const canonical = await rpcCall<{ transactionHash: string; logIndex: string }[]>(devnet.nodeRpcUrl, 'eth_getLogs', [{ address: token, fromBlock: '0x' + firstBlock.toString(16), toBlock: '0x' + lastBlock.toString(16) }]);
  t.ok(canonical.length >= transfers - 1, `${canonical.length} canonical Transfer logs in blocks ${firstBlock}…${lastBlock} (${transfers} transfers sent, one of them plain)`);
  t.same(canonical.map((l) => l.transactionHash.toLowerCase()).sort(), [...transfersOf.values()].flat().sort(), 'the Transfers the sequencer built');
  const inRange = logs.filter((l) => Number(l.blockNumber) >= firstBlock && Number(l.blockNumber) <= lastBlock);
  t.same(inRange.map(key).sort(), canonical.map(key).sort(), "exactly the node's canonical logs");

  t.equal(new Set(txs).size, txs.length, `${txs.length} transaction hashes, each once`);
  const gotTxs = new Set(txs.map((h) => h.toLowerCase()));
  t.same(sent.filter((h) => !gotTxs.has(h)), [], 'every transaction sent is among them');

  t.equal(new Set(blockHashes).size, blockHashes.length, `${blockHashes.length} block hashes, each once`);
  const numbers = await Promise.all(blockHashes.map(async (h) => Number((await rpcCall<{ number: string } | null>(devnet.nodeRpcUrl, 'eth_getBlockByHash', [h, false]))?.number ?? NaN)));
  t.same(numbers, numbers.map((_n, i) => numbers[0]! + i), `canonical blocks ${numbers[0]}…${numbers.at(-1)}, consecutive and in order`);
});

t.test('raw: eth_getFilterLogs answers the range now, eth_uninstallFilter true then false, an unknown id -32000', async (t) => {
  type Env = { result?: unknown; error?: { code: number; message: string } };
  const call = async (method: string, params: unknown[]): Promise<Env> => {
    const res = await fetch(rpc, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
    return (await res.json()) as Env;
  };
  const head = Number(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_blockNumber', []));
  const from = '0x' + Math.max(0, head - 5).toString(16);
  const id = (await call('eth_newFilter', [{ fromBlock: from }])).result as string;
  t.match(id, /^0x[0-9a-f]{32}$/);
  const got = (await call('eth_getFilterLogs', [id])).result as { transactionHash: string; logIndex: string; blockNumber: string }[];
  const node = await rpcCall<{ transactionHash: string; logIndex: string }[]>(devnet.nodeRpcUrl, 'eth_getLogs', [{ fromBlock: from, toBlock: '0x' + head.toString(16) }]);
  const upToHead = got.filter((l) => Number(l.blockNumber) <= head);
  t.same(upToHead.map(key).sort(), node.map(key).sort(), `the ${node.length} canonical logs of blocks ${Number(from)}…${head} (and any preconfirmed above)`);
  t.same(await call('eth_uninstallFilter', [id]), { jsonrpc: '2.0', id: 1, result: true });
  t.same(await call('eth_uninstallFilter', [id]), { jsonrpc: '2.0', id: 1, result: false });
  t.same(await call('eth_getFilterChanges', [id]), { jsonrpc: '2.0', id: 1, error: { code: -32000, message: 'filter not found' } });
  t.same(await call('eth_getFilterLogs', ['0x' + '00'.repeat(16)]), { jsonrpc: '2.0', id: 1, error: { code: -32000, message: 'filter not found' } });
});
