// End to end on the devnet: flashblocksd preconfirms before anvil seals, and everything it answered while pending
// equals what anvil answers once the block is canonical (block-hash fields excepted). E2E_TXS sets the run length.
import t, { type Test } from 'tap';
import { performance } from 'node:perf_hooks';
import { privateKeyToAccount } from 'viem/accounts';
import { rpcBatch, rpcCall } from '../../scripts/devnet/anvil.js';
import { startDevnet, type Devnet, type DevnetOptions } from '../../scripts/devnet/sequencer.js';
import { startTraffic, type SentTx, type TxKind } from '../../scripts/devnet/traffic.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon } from '../../src/daemon.js';
import { createLogger } from '../../src/log.js';
import { firstDiff, strip } from '../helpers/compare.js';
import { nextFlashblock } from '../helpers/devnet-wait.js';

const TXS = Number(process.env.E2E_TXS ?? 120);
const errors: string[] = [];
const silent = createLogger({ level: 'error', write: (line) => void errors.push(line) });

/**
 * The 1 s devnet the differentials and the post-Azul run share (one after the other, each with its own senders and
 * its own daemon, the stream variant chosen by the subscriber's URL): started once, at its first use.
 */
let shared: Promise<Devnet> | null = null;
function sharedDevnet(): Promise<Devnet> {
  if (shared === null) {
    // Senders: 6 per differential, 3 for the post-Azul run.
    shared = startDevnet({ blockTimeMs: 1000, flashblockMs: 200, anvil: { accounts: 15 } });
    t.teardown(async () => (await shared!).stop());
  }
  return shared;
}

/** A daemon (execution off) on `devnet`'s stream, asked for the variant in `query` (e.g. `?brotli=1`). */
async function bootDaemon(t: Test, devnet: Devnet, blockTimeMs: number, query = '') {
  const config = loadConfig(
    ['--flashblocks-url', devnet.flashblocksUrl + query, '--node-rpc-url', devnet.nodeRpcUrl, '--port', '0', '--metrics-port', '0', '--block-time-ms', String(blockTimeMs), '--log-level', 'error', '--execution', 'false'],
    {},
  );
  const daemon = await startDaemon(config, { log: silent });
  t.teardown(() => daemon.stop());
  return { devnet, daemon, rpc: `http://127.0.0.1:${daemon.rpcPort}` };
}

async function boot(t: Test, opts: DevnetOptions) {
  const devnet = await startDevnet({ blockTimeMs: 1000, flashblockMs: 200, ...opts });
  t.teardown(() => devnet.stop());
  return bootDaemon(t, devnet, opts.blockTimeMs ?? 1000);
}

/**
 * Follows `devnet`'s flashblocks from now on; `sealed(hashes)` resolves once every one of `hashes` is in a flashblock
 * and the newest of their blocks is sealed (the next block's index 0 published), or after `guardMs` (a hang guard: the
 * caller's assertions say what is missing). Stop following with `off()`.
 */
function sealWatch(devnet: Devnet, guardMs = 10_000) {
  const blockOf = new Map<string, number>();
  let newest = -1;
  const off = devnet.onFlashblock((fb) => {
    newest = Math.max(newest, fb.blockNumber);
    for (const r of fb.receipts) blockOf.set(r.hash, fb.blockNumber);
  });
  const sealed = async (hashes: Iterable<string>): Promise<void> => {
    const list = [...hashes];
    const deadline = Date.now() + guardMs;
    while (list.some((h) => !blockOf.has(h)) && Date.now() < deadline) await nextFlashblock(devnet, () => true);
    const last = Math.max(-1, ...list.map((h) => blockOf.get(h) ?? -1));
    if (newest > last) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      nextFlashblock(devnet, (fb) => fb.blockNumber > last),
      new Promise((r) => (timer = setTimeout(r, Math.max(0, deadline - Date.now())))),
    ]).finally(() => clearTimeout(timer));
  };
  return { sealed, off };
}

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};

t.test('a tx sent through flashblocksd has a daemon receipt before anvil seals it', async (t) => {
  // 2 s blocks: the tx, sent after index 1, is preconfirmed ~1.6 s before the seal even when the machine is busy.
  // anvil is asked through the devnet's node proxy, which (like a real node) never shows the simulated blocks the
  // sequencer builds and reverts for each flashblock.
  const { devnet, rpc } = await boot(t, { blockTimeMs: 2000 });
  const user = privateKeyToAccount(devnet.accounts[9]!.privateKey);
  // Send just after index 1 of a block past start-up (when ticks may run back to back to catch up), so the tx
  // lands mid-block, well before the seal.
  await new Promise<void>((resolve) => {
    const off = devnet.onFlashblock((fb) => {
      if (fb.index === 1 && fb.blockNumber >= 3) {
        off();
        resolve();
      }
    });
  });
  const signed = await user.signTransaction({
    chainId: devnet.chainId, nonce: 0, type: 'eip1559', maxFeePerGas: 3_000_000_000n, maxPriorityFeePerGas: 1n, gas: 21_000n,
    to: '0x000000000000000000000000000000000000dEaD', value: 1n,
  });
  const hash = await rpcCall<string>(rpc, 'eth_sendRawTransaction', [signed]);
  let daemonAt = -1;
  let anvilAt = -1;
  const t0 = performance.now();
  while ((daemonAt < 0 || anvilAt < 0) && performance.now() - t0 < 5000) {
    const [d, a] = await Promise.all([
      daemonAt < 0 ? rpcCall(rpc, 'eth_getTransactionReceipt', [hash]) : null,
      anvilAt < 0 ? rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [hash]) : null,
    ]);
    const now = performance.now() - t0;
    if (d && daemonAt < 0) daemonAt = now;
    if (a && anvilAt < 0) anvilAt = now;
    await new Promise((r) => setTimeout(r, 10));
  }
  t.ok(daemonAt >= 0, `daemon receipt after ${daemonAt.toFixed(0)} ms`);
  t.ok(anvilAt >= 0, `anvil receipt after ${anvilAt.toFixed(0)} ms`);
  t.ok(daemonAt < anvilAt, 'preconfirmed before canonical');
});

async function differential(t: Test, query: string, senderFrom: number, txs: number): Promise<void> {
  const { devnet, rpc } = await bootDaemon(t, await sharedDevnet(), 1000, query);
  const sent = new Map<string, SentTx>();
  const seen = new Map<string, { tx: any; receipt: any; atMs: number }>();
  const senders = devnet.accounts.slice(senderFrom, senderFrom + 6);
  const samples: { number: number; txCount: number; txs: any[]; balances: string[]; nonces: string[] }[] = [];
  const watch = sealWatch(devnet);
  t.teardown(watch.off);
  const traffic = await startTraffic({
    rpcUrl: rpc, chainId: devnet.chainId, accounts: senders, txPerSec: 60, maxTxs: txs,
    onSent: (s) => void sent.set(s.hash, s),
  });
  t.teardown(() => traffic.stop());
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const open = [...sent.keys()].filter((h) => !seen.has(h));
      if (open.length > 0) {
        const res = await rpcBatch(rpc, open.flatMap((h): [string, unknown[]][] => [['eth_getTransactionReceipt', [h]], ['eth_getTransactionByHash', [h]]]));
        const now = performance.now();
        open.forEach((h, i) => {
          const r = res[2 * i];
          const x = res[2 * i + 1];
          // Only a preconfirmed answer counts: while the daemon does not hold the tx yet it forwards, and the devnet's
          // anvil is mid snapshot/mine/revert, so a forwarded receipt and tx can straddle a revert.
          if (r?.ok && r.value && x?.ok && x.value && x.value.blockNumber !== null) seen.set(h, { receipt: r.value, tx: x.value, atMs: now - sent.get(h)!.sentAtMs });
        });
      }
      const pend = await rpcBatch(rpc, [
        ['eth_getBlockByNumber', ['pending', true]],
        ...senders.map((a): [string, unknown[]] => ['eth_getBalance', [a.address, 'pending']]),
      ]);
      const blk = pend[0]?.ok ? pend[0].value : null;
      // Nonces at the pending block's height: `pending` also counts the node's mempool (back-to-back sends), so it
      // may run ahead of the block. Asked after the block; only complete blocks are compared, and those do not grow.
      const nonces = blk ? await rpcBatch(rpc, senders.map((a): [string, unknown[]] => ['eth_getTransactionCount', [a.address, blk.number]])) : [];
      if (blk && pend.every((p) => p.ok) && nonces.every((p) => p.ok)) {
        samples.push({
          number: Number(blk.number), txCount: blk.transactions.length, txs: blk.transactions,
          balances: pend.slice(1).map((p) => (p as any).value),
          nonces: nonces.map((p) => (p as any).value),
        });
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  await traffic.done();
  // Let the last txs be preconfirmed and their block sealed: the sampler then took every block it could while pending.
  const deadline = Date.now() + 10_000;
  while (seen.size < sent.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  await watch.sealed(sent.keys());
  polling = false;
  await poller;

  t.equal(seen.size, sent.size, `every tx was preconfirmed (${seen.size}/${sent.size})`);
  let diffs = 0;
  // One failure per differing field (first example shown), so a systematic gap does not hide the others.
  const byField = new Map<string, { n: number; example: string }>();
  const fail = (what: string, d: string): void => {
    diffs++;
    // "receipt .logs.0.blockTimestamp" or "balance": the kind of answer and the path, without hashes or values.
    const field = what.includes(' balance ') ? 'balance' : what.includes(' nonce ') ? 'nonce' : `${what.split(' ')[0]} ${d.split(':')[0]}`;
    const e = byField.get(field);
    if (e) e.n++;
    else byField.set(field, { n: 1, example: `${what}: ${d}` });
  };
  const canonTx = await rpcBatch(devnet.nodeRpcUrl, [...seen.keys()].flatMap((h): [string, unknown[]][] => [['eth_getTransactionReceipt', [h]], ['eth_getTransactionByHash', [h]]]));
  [...seen.entries()].forEach(([h, s], i) => {
    const r = canonTx[2 * i];
    const x = canonTx[2 * i + 1];
    const dr = firstDiff(strip(s.receipt), strip(r?.ok ? r.value : null));
    if (dr) fail(`receipt ${h}`, dr);
    const dx = firstDiff(strip(s.tx), strip(x?.ok ? x.value : null));
    if (dx) fail(`tx ${h}`, dx);
  });
  // Pending blocks: tx lists are prefixes of the canonical block; complete ones carry the canonical balances/nonces.
  const canonBlocks = new Map<number, any>();
  let compared = 0;
  for (const s of samples) {
    if (!canonBlocks.has(s.number)) canonBlocks.set(s.number, await rpcCall(devnet.nodeRpcUrl, 'eth_getBlockByNumber', [`0x${s.number.toString(16)}`, true]));
    const c = canonBlocks.get(s.number);
    if (!c) continue;
    const d = firstDiff(strip(s.txs), strip(c.transactions.slice(0, s.txCount)));
    if (d) fail(`pending block ${s.number} txs`, d);
    if (s.txCount !== c.transactions.length) continue;
    compared++;
    const at = c.number;
    const want = await rpcBatch(devnet.nodeRpcUrl, [
      ...senders.map((a): [string, unknown[]] => ['eth_getBalance', [a.address, at]]),
      ...senders.map((a): [string, unknown[]] => ['eth_getTransactionCount', [a.address, at]]),
    ]);
    const got = [...s.balances, ...s.nonces];
    want.forEach((w, i) => {
      if (!w.ok || BigInt(w.value) !== BigInt(got[i]!)) fail(`block ${s.number} ${i < senders.length ? 'balance' : 'nonce'} of sender ${i % senders.length}`, `daemon ${got[i]} vs anvil ${w.ok ? w.value : w.error.message}`);
    });
  }
  for (const [field, e] of byField) t.fail(`${field} differs in ${e.n} answers, e.g. ${e.example}`);
  t.equal(diffs, 0, `no differences (${seen.size} txs, ${samples.length} pending samples, ${compared} complete-block balance/nonce checks)`);
  const lat = [...seen.values()].map((s) => s.atMs);
  const byKind: Partial<Record<TxKind, number>> = {};
  for (const s of sent.values()) byKind[s.kind] = (byKind[s.kind] ?? 0) + 1;
  t.comment(`tx kinds ${JSON.stringify(byKind)}; submission → preconfirmed receipt p50 ${pct(lat, 50).toFixed(0)} ms, p99 ${pct(lat, 99).toFixed(0)} ms`);
  const st = devnet.stats();
  t.equal(st.hashMismatches, 0, `every sealed block equals its last flashblock (${st.hashMatches} blocks)`);
  t.equal(st.prefixViolations + st.resendErrors, 0, 'no flashblock was reordered or lost by the devnet');
}

t.test('differential: pending answers equal canonical answers (text, external receipts)', (t) => differential(t, '', 0, TXS));
t.test('differential with brotli frames and internally tagged receipts', (t) => differential(t, '?brotli=1&receipts=internal', 6, TXS));

t.test('post-Azul stream runs without errors, and the metrics show which answers came from the node', async (t) => {
  const { devnet, daemon, rpc } = await bootDaemon(t, await sharedDevnet(), 1000, '?azul=1');
  const sent: string[] = [];
  const watch = sealWatch(devnet);
  t.teardown(watch.off);
  const traffic = await startTraffic({
    rpcUrl: rpc, chainId: devnet.chainId, accounts: devnet.accounts.slice(12, 15), txPerSec: 30, maxTxs: 30,
    onSent: (s) => void sent.push(s.hash),
  });
  t.teardown(() => traffic.stop());
  await traffic.done();
  // Every tx in a sealed block: the node has its receipt.
  await watch.sealed(sent);
  const pending = await rpcCall<{ number: string }>(rpc, 'eth_getBlockByNumber', ['pending', false]);
  t.ok(pending, 'pending block answered');
  t.equal(traffic.stats().errors, 0, 'every submission accepted');
  // Post-Azul flashblocks carry no receipts: receipts come from the node once sealed, blocks still from state.
  const receipts = await rpcBatch(rpc, sent.map((h): [string, unknown[]] => ['eth_getTransactionReceipt', [h]]));
  t.ok(receipts.every((r) => r.ok && r.value !== null), `all ${sent.length} receipts answered (by the node, once sealed)`);
  const scrape = await (await fetch(`http://127.0.0.1:${daemon.metricsPort}/metrics`)).text();
  const count = (method: string, source: string): number => {
    const m = new RegExp(`^flashblocksd_rpc_requests_total\\{method="${method}",source="${source}"\\} (\\d+)`, 'm').exec(scrape);
    return m === null ? 0 : Number(m[1]);
  };
  t.ok(count('eth_getTransactionReceipt', 'node') >= sent.length, `receipts counted as source="node" (${count('eth_getTransactionReceipt', 'node')})`);
  t.equal(count('eth_getTransactionReceipt', 'state'), 0, 'no receipt claimed from state');
  t.ok(count('eth_getBlockByNumber', 'state') >= 1, 'the pending block counted as source="state"');
  t.same(errors.filter((l) => /error/i.test(l)), [], 'no error logs');
});
