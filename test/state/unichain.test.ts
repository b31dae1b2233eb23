import t from 'tap';
import { makePipeline, feed } from '../helpers/ingest.js';
import { unichainMessages, unichainRpcBlock, baseSepoliaMessages } from '../helpers/fixtures.js';
import { blockToRpc, computedBlockHash } from '../../src/rpc/shapes/block.js';
import { receiptToRpc } from '../../src/rpc/shapes/receipt.js';
import { toRpcTransaction } from '../../src/rpc/shapes/transaction.js';
import { txContext } from '../../src/rpc/shapes/context.js';
import type { TxView } from '../../src/state/view.js';
import { txsOf } from '../helpers/views.js';

const txToRpc = (rec: TxView): Record<string, unknown> => toRpcTransaction(rec.tx, txContext(rec));

t.test('replaying the Unichain Sepolia capture gives the canonical block field by field', async (t) => {
  const { state, observer, pipeline, senders } = makePipeline();
  for (const m of unichainMessages()) feed(pipeline, m);
  senders.recoverQueued();
  t.equal(observer.appliedN, 5, 'all five flashblocks applied');
  t.same(Object.fromEntries(observer.decodeErrors), {}, 'no decode errors');
  const block = state.pendingBlock();
  t.ok(block, 'pending block held');
  if (block === null) return;
  const got = blockToRpc(block, true);
  const want = unichainRpcBlock();
  const keys = new Set([...Object.keys(got), ...Object.keys(want)]);
  for (const k of keys) {
    if (k === 'hash' || k === 'transactions') continue;
    t.same(got[k], want[k], `field ${k}`);
  }
  const gotTxs = got.transactions as Record<string, unknown>[];
  const wantTxs = want.transactions as Record<string, unknown>[];
  t.equal(gotTxs.length, wantTxs.length, 'same transaction count');
  for (let i = 0; i < wantTxs.length; i++) {
    const w = { ...wantTxs[i] };
    const g = { ...gotTxs[i] };
    delete w.blockHash;
    delete g.blockHash;
    // The execution-apis schema requires blockTimestamp of mined transactions; this op-reth capture predates it.
    t.equal(g.blockTimestamp, got.timestamp, 'blockTimestamp is the block timestamp');
    delete g.blockTimestamp;
    t.same(g, w, `transaction ${i} (${String(w.hash).slice(0, 10)}) equal`);
  }
});

t.test('every flashblock block_hash recomputes from base + cumulative diff + transactions', async (t) => {
  const { state, pipeline } = makePipeline();
  const msgs = unichainMessages();
  for (const m of msgs) feed(pipeline, m);
  const block = state.pendingBlock()!;
  for (let i = 0; i < msgs.length; i++) {
    t.equal(computedBlockHash(block, i), (msgs[i]!.diff as { block_hash: string }).block_hash, `flashblock ${i}`);
  }
});

t.test('a flashblock hash resolves to the block as of that flashblock', async (t) => {
  const { state, pipeline } = makePipeline();
  const msgs = unichainMessages();
  for (const m of msgs) feed(pipeline, m);
  const h1 = (msgs[1]!.diff as { block_hash: string }).block_hash;
  const hit = state.blockByFlashblockHash(h1)!;
  t.equal(hit.index, 1);
  const asOf = blockToRpc(hit.block, false, hit.index);
  t.equal(asOf.hash, h1);
  t.equal((asOf.transactions as string[]).length, hit.block.txCountAt[1]);
  t.equal(asOf.gasUsed, (msgs[1]!.diff as { gas_used: string }).gas_used);
});

t.test('receipts derived from metadata agree with each other', async (t) => {
  const { state, pipeline, senders } = makePipeline();
  for (const m of unichainMessages()) feed(pipeline, m);
  senders.recoverQueued();
  const block = state.pendingBlock()!;
  let prevCum = 0n;
  let logIndex = 0;
  for (const rec of txsOf(block)) {
    const r = receiptToRpc(rec)!;
    t.ok(r, `receipt for ${rec.tx.hash.slice(0, 10)}`);
    const cum = BigInt(r.cumulativeGasUsed as string);
    t.equal(BigInt(r.gasUsed as string), cum - prevCum, 'gasUsed = cumulative difference');
    prevCum = cum;
    t.equal(r.transactionIndex, '0x' + rec.position.toString(16));
    t.equal(r.blockHash, block.hash);
    t.equal(r.from, txToRpc(rec).from, 'receipt from = tx from');
    for (const l of r.logs as { logIndex: string }[]) t.equal(l.logIndex, '0x' + (logIndex++).toString(16), 'logIndex runs across the block');
  }
  t.equal('0x' + prevCum.toString(16), blockToRpc(block, false).gasUsed, 'last cumulative = block gasUsed');
  const dep = receiptToRpc(block.txAt(0)!)!;
  t.equal(dep.type, '0x7e');
  t.equal(dep.depositNonce, '0x21e3b52');
  t.equal(dep.depositReceiptVersion, '0x1');
  t.equal(dep.effectiveGasPrice, '0x0');
});

t.test('pending balances and nonces come from the flashblocks', async (t) => {
  const { state, pipeline, senders } = makePipeline();
  const msgs = unichainMessages();
  for (const m of msgs) feed(pipeline, m);
  senders.recoverQueued();
  const last = msgs[msgs.length - 1]!.metadata as { new_account_balances: Record<string, string> };
  for (const [addr, bal] of Object.entries(last.new_account_balances)) t.equal(state.balance(addr), BigInt(bal), `balance of ${addr.slice(0, 10)}`);
  const want = unichainRpcBlock().transactions as { from: string; nonce: string }[];
  const maxNonce = new Map<string, bigint>();
  for (const tx of want) {
    const n = BigInt(tx.nonce);
    if ((maxNonce.get(tx.from) ?? -1n) < n) maxNonce.set(tx.from, n);
  }
  for (const [from, n] of maxNonce) t.equal(state.nextNonce(from), n + 1n, `next nonce of ${from.slice(0, 10)}`);
  t.equal(state.nextNonce('0x000000000000000000000000000000000000dead'), null, 'no pending txs → null');
});

t.test('the Base Sepolia capture ingests with zero errors', async (t) => {
  const { state, observer, pipeline, senders } = makePipeline();
  const msgs = baseSepoliaMessages();
  for (const m of msgs) feed(pipeline, m);
  senders.recoverQueued();
  t.same(Object.fromEntries(observer.decodeErrors), {}, 'no decode errors');
  t.equal(observer.appliedN, msgs.length, 'every flashblock applied');
  const block = state.pendingBlock()!;
  const txCount = msgs.reduce((n, m) => n + (m.diff as { transactions: unknown[] }).transactions.length, 0);
  t.equal(block.txCount, txCount, 'every transaction indexed');
  t.equal(computedBlockHash(block, 0), (msgs[0]!.diff as { block_hash: string }).block_hash, 'index 0 hash recomputes');
  const rpc = blockToRpc(block, true);
  t.equal((rpc.transactions as unknown[]).length, txCount);
  for (const rec of txsOf(block)) t.ok(txToRpc(rec).from, 'sender recovered');
});
