// Today's dialects through decode → state → RPC shapes, checked against the sources' own data: op-rbuilder's golden
// wire frames (verbatim), the Unichain Sepolia capture re-shaped as op-rbuilder ≥ v0.4.13 and as OP subblocks send
// it (the canonical block is the answer key), and the post-exec (0x7d) transaction carried in diff.post_exec_tx.
import t, { type Test } from 'tap';
import { readFileSync } from 'node:fs';
import { decodeFrame } from '../../src/ingest/frame.js';
import { decodeTransaction } from '../../src/chain/tx.js';
import { blockToRpc, computedBlockHash } from '../../src/rpc/shapes/block.js';
import { txContext } from '../../src/rpc/shapes/context.js';
import { receiptToRpc } from '../../src/rpc/shapes/receipt.js';
import { toRpcTransaction } from '../../src/rpc/shapes/transaction.js';
import { ZERO_ADDRESS } from '../../src/chain/types.js';
import { orderedTrieRoot } from '../../src/chain/trie.js';
import type { TxView } from '../../src/state/view.js';
import { asOpRbuilder, asSubblocks, postExecTx } from '../helpers/dialects.js';
import { fixturePath, unichainMessages, unichainRpcBlock } from '../helpers/fixtures.js';
import { feed, makePipeline } from '../helpers/ingest.js';
import { fbBalances, fbReceipts, txsOf } from '../helpers/views.js';

const ZERO_HASH = '0x' + '00'.repeat(32);
const golden = (): Record<string, string> => (JSON.parse(readFileSync(fixturePath('op-rbuilder/golden-wire.json'), 'utf8')) as { frames: Record<string, string> }).frames;
const txToRpc = (rec: TxView): Record<string, unknown> => toRpcTransaction(rec.tx, txContext(rec));
const uni = (): Record<string, any>[] => structuredClone(unichainMessages()) as Record<string, any>[];

t.test("op-rbuilder's golden wire frames pass every schema check (their transactions are placeholder bytes)", async (t) => {
  const f = golden();
  for (const name of ['PINNED_INDEX0', 'PINNED_INDEX3', 'LEGACY_TAGGED_INDEX3']) {
    const r = decodeFrame(Buffer.from(f[name]!), 1 << 20, false);
    t.notOk(r.ok, name);
    if (r.ok) continue;
    // 0x7e010203 / 0x02ff stand for transactions in those tests; everything before them was accepted.
    t.equal(r.reason, 'transaction', `${name}: only the placeholder transaction is refused`);
    t.match(r.detail, /^diff\.transactions\[0\]/);
    t.equal(r.blockNumber, 100, `${name}: metadata.block_number as a JSON number`);
  }
});

t.test('the golden frames with real transactions decode to what they pin', async (t) => {
  const f = golden();
  const u = uni();
  const deposit = u[0]!.diff.transactions[0] as string;
  const eip1559 = u[1]!.diff.transactions[0] as string;
  /** The pinned text with its placeholder transaction replaced by `raw` and the receipt re-keyed to its hash. */
  const swap = (text: string, raw: string, placeholder: string, key: string): string => {
    const tx = decodeTransaction(raw);
    if (!tx.ok) throw new Error(tx.reason);
    return text.replace(`"${placeholder}"`, `"${raw}"`).replace(`"${key}"`, `"${tx.tx.hash}"`);
  };
  const r0 = decodeFrame(Buffer.from(swap(f.PINNED_INDEX0!, deposit, '0x7e010203', '0x' + '11'.repeat(32))), 1 << 20, false);
  t.ok(r0.ok, 'index 0 decodes');
  if (r0.ok) {
    const fb = r0.fb;
    t.equal(fb.blockNumber, 100);
    t.equal(fb.base?.gasLimit, 30_000_000n);
    t.equal(fb.diff.blobGasUsed, 0n, 'diff.blob_gas_used');
    t.equal(fb.diff.postExecTx, null);
    const rc = fbReceipts(fb)!.get(fb.body.txHash(0))!;
    t.same({ type: rc.type, status: rc.status, cumulativeGasUsed: rc.cumulativeGasUsed, depositNonce: rc.depositNonce, depositReceiptVersion: rc.depositReceiptVersion },
      { type: 0x7e, status: 1, cumulativeGasUsed: 50_000n, depositNonce: 7n, depositReceiptVersion: 1n }, 'internally tagged deposit receipt');
    t.equal(fbBalances(fb)!.get('0x00000000000000000000000000000000000000bb'), 0x2540be400n);
  }
  const pinned = decodeFrame(Buffer.from(swap(f.PINNED_INDEX3!, eip1559, '0x02ff', '0x' + '99'.repeat(32))), 1 << 20, false);
  const legacy = decodeFrame(Buffer.from(swap(f.LEGACY_TAGGED_INDEX3!, eip1559, '0x02ff', '0x' + '99'.repeat(32))), 1 << 20, false);
  t.ok(pinned.ok && legacy.ok, 'index 3 decodes in both receipt taggings');
  if (pinned.ok && legacy.ok) {
    t.equal(pinned.fb.base, null, 'base omitted');
    t.equal(pinned.fb.diff.blobGasUsed, null, 'blob_gas_used omitted (pre-Jovian)');
    t.same([...fbReceipts(pinned.fb)!.values()], [...fbReceipts(legacy.fb)!.values()], 'internal and external tagging give the same receipt');
    t.same([...fbReceipts(pinned.fb)!.values()][0]!.logs, [{ address: '0x00000000000000000000000000000000000000aa', topics: ['0x' + '00'.repeat(31) + 'a1'], data: '0x0102' }]);
  }
});

/** The canonical block's transactions and receipts-derived fields as the daemon serves them after `msgs`. */
function replayAgainstCanonical(t: Test, msgs: Record<string, any>[], opts: Parameters<typeof makePipeline>[0] = {}) {
  const p = makePipeline(opts);
  for (const m of msgs) feed(p.pipeline, m);
  p.senders.recoverQueued();
  t.same(Object.fromEntries(p.observer.decodeErrors), {}, 'no decode errors');
  t.equal(p.observer.appliedN, msgs.length, 'every flashblock applied');
  const block = p.state.pendingBlock()!;
  const want = unichainRpcBlock();
  const wantTxs = want.transactions as Record<string, unknown>[];
  t.equal(block.txCount, wantTxs.length, 'same transaction count');
  for (let i = 0; i < wantTxs.length; i++) {
    const g = { ...txToRpc(block.txAt(i)!) };
    const w = { ...wantTxs[i] };
    for (const o of [g, w]) {
      delete o.blockHash;
      delete o.blockTimestamp;
    }
    t.same(g, w, `transaction ${i} as the canonical block has it`);
    const r = receiptToRpc(block.txAt(i)!);
    t.ok(r, `receipt ${i} served from the stream`);
  }
  return { ...p, block, want };
}

t.test('op-rbuilder ≥ v0.4.13 shape: the Unichain capture (builder transaction first in every flashblock) replays as the canonical block', async (t) => {
  const msgs = asOpRbuilder(uni());
  const { block, want } = replayAgainstCanonical(t, msgs);
  // Unichain's flashblock-number builder transaction (Uniswap/flashblocks_number_contract) opens flashblocks 1-4.
  for (let i = 1; i < 5; i++) {
    const first = block.txAt(block.txCountAt[i - 1]!)!;
    t.equal(first.tx.to, '0xf878f0340bf132c28f3211e8b46c569edf817495', `flashblock ${i} opens with the builder transaction`);
    t.equal(first.tx.from, '0xc0043c50ba044a5f948d32faed806913d781d428');
    t.equal(first.tx.input, '0x3fd553e8', 'incrementFlashblockNumber() (op-rbuilder flashblocks_builder_tx.rs)');
  }
  const got = blockToRpc(block, false);
  t.equal(got.hash, want.hash, 'block hash as the builder gave it');
  t.equal(got.blobGasUsed, '0x0');
});

t.test('diff.post_exec_tx: served at the block end with its spec shape and receipt, restated per flashblock, never executed', async (t) => {
  const msgs = asOpRbuilder(uni());
  const n = msgs[0]!.metadata.block_number as number;
  const pe1 = postExecTx(n, [[1, 2500]]);
  const pe2 = postExecTx(n, [[1, 2500], [3, 1200]]);
  msgs[2]!.diff.post_exec_tx = pe1;
  msgs[4]!.diff.post_exec_tx = pe2;
  const p = makePipeline();
  for (const m of msgs.slice(0, 3)) feed(p.pipeline, m);
  p.senders.recoverQueued();
  const block = p.state.pendingBlock()!;
  const rec = block.postExec!;
  t.ok(rec, 'held after flashblock 2');
  t.equal(p.state.tx(rec.tx.hash), rec, 'indexed by hash');
  t.equal(rec.position, block.txCount, 'after every transaction of the block so far');
  t.equal(rec.tx.executes, false, 'flagged for the engine to skip');
  const obj = txToRpc(rec);
  t.same(obj, { blockHash: block.hash, blockNumber: '0x' + n.toString(16), transactionIndex: '0x' + block.txCount.toString(16), blockTimestamp: '0x' + block.base.timestamp.toString(16),
    hash: rec.tx.hash, type: '0x7d', from: ZERO_ADDRESS, gas: '0x0', value: '0x0', input: '0x' + pe1.slice(4) }, 'lagoon/post-exec.md transaction object');
  const r = receiptToRpc(rec)!;
  const prev = receiptToRpc(block.txAt(block.txCount - 1)!)!;
  t.match(r, { type: '0x7d', status: '0x1', gasUsed: '0x0', logs: [], cumulativeGasUsed: prev.cumulativeGasUsed, from: ZERO_ADDRESS, contractAddress: null, effectiveGasPrice: '0x0' }, 'PostExec receipt: success, no gas, previous cumulative');
  t.equal(p.state.nextNonce(ZERO_ADDRESS), null, 'no pending nonce for the zero address');

  const listed = blockToRpc(block, false);
  const raws = txsOf(block).map((r) => Buffer.from(r.tx.raw.slice(2), 'hex'));
  t.same(listed.transactions, [...txsOf(block).map((r) => r.tx.hash), rec.tx.hash], 'the pending block lists it last (op-alloy: base + transactions + post_exec_tx)');
  t.equal(listed.transactionsRoot, orderedTrieRoot([...raws, Buffer.from(pe1.slice(2), 'hex')]), 'and commits to it in transactionsRoot');

  feed(p.pipeline, msgs[3]);
  t.equal(block.postExec, null, 'a flashblock without post_exec_tx: none so far');
  t.equal(blockToRpc(block, false).transactionsRoot, orderedTrieRoot(txsOf(block).map((r) => Buffer.from(r.tx.raw.slice(2), 'hex'))), 'its root again without it (the kept trie was not changed by it)');
  t.equal((blockToRpc(block, false, 2).transactions as string[]).at(-1), rec.tx.hash, 'as of flashblock 2 the block still lists it');
  t.equal(p.state.tx(rec.tx.hash), undefined, 'the superseded one is no longer served');
  feed(p.pipeline, msgs[4]);
  t.equal(block.postExec!.tx.raw, pe2, 'the latest restated one');
  t.equal(block.postExec!.position, block.txCount);
  t.equal(block.txCount, 6, 'never among the streamed transactions');
  t.equal((blockToRpc(block, false).transactions as string[]).length, 7);
});

t.test('a post_exec_tx anchored to another block or of another type is refused', async (t) => {
  const m = asOpRbuilder(uni())[0]!;
  const other = structuredClone(m);
  other.diff.post_exec_tx = postExecTx(m.metadata.block_number + 1, []);
  const r1 = decodeFrame(Buffer.from(JSON.stringify(other)), 1 << 20, false);
  t.match(r1, { ok: false, reason: 'schema', detail: /anchored to block/ });
  const signed = structuredClone(m);
  signed.diff.post_exec_tx = m.diff.transactions[1];
  const r2 = decodeFrame(Buffer.from(JSON.stringify(signed)), 1 << 20, false);
  t.match(r2, { ok: false, reason: 'transaction', detail: /^diff\.post_exec_tx: type 0x2 is not a post-exec/ });
});

t.test('OP subblocks: zero block_hash never served; a local header hash per flashblock resolves the block as of it', async (t) => {
  const msgs = asSubblocks(asOpRbuilder(uni()));
  const { state, block, want } = replayAgainstCanonical(t, msgs);
  const seen = new Set<string>();
  for (let i = 0; i < msgs.length; i++) {
    const h = block.diffs[i]!.blockHash;
    t.not(h, ZERO_HASH, `flashblock ${i}: not the zero hash`);
    t.notOk(seen.has(h), `flashblock ${i}: its own hash`);
    seen.add(h);
    const hit = state.blockByFlashblockHash(h);
    t.equal(hit?.index, i, `flashblock ${i}: the hash resolves to the block as of it`);
  }
  t.ok(block.localHash, 'marked local (not the canonical hash: state and withdrawals roots are zero)');
  const got = blockToRpc(block, true);
  t.not(got.hash, want.hash, 'a local identifier, not the sealed block hash');
  for (const tx of got.transactions as Record<string, unknown>[]) t.equal(tx.blockHash, got.hash, 'transactions carry the local hash');
  t.equal(receiptToRpc(block.txAt(0)!)!.blockHash, got.hash, 'receipts carry the local hash');
  for (const k of Object.keys(want)) {
    if (['hash', 'stateRoot', 'withdrawalsRoot', 'transactions', 'size'].includes(k)) continue;
    t.same(got[k], want[k], `field ${k} as the canonical block`);
  }
  t.equal(got.stateRoot, ZERO_HASH, 'stateRoot as the stream gives it (unavailable)');
});

t.test('an externally tagged PostExec receipt decodes as type 0x7d', async (t) => {
  const m = asOpRbuilder(uni())[1]!;
  const [k] = Object.keys(m.metadata.receipts);
  m.metadata.receipts[k!] = { PostExec: { status: '0x1', cumulativeGasUsed: '0x5208', logs: [] } };
  const r = decodeFrame(Buffer.from(JSON.stringify(m)), 1 << 20, false);
  t.ok(r.ok);
  if (r.ok) t.equal(fbReceipts(r.fb)!.get(k!)!.type, 0x7d);
});

t.test('OP subblocks with a post-exec transaction: the local hash commits to it, and each still resolves', async (t) => {
  const msgs = asSubblocks(asOpRbuilder(uni()));
  const n = msgs[0]!.metadata.block_number as number;
  msgs[1]!.diff.post_exec_tx = postExecTx(n, [[1, 10]]);
  msgs[2]!.diff.post_exec_tx = postExecTx(n, [[1, 10], [2, 20]]);
  const p = makePipeline({ dialect: 'op-subblocks' });
  for (const m of msgs) feed(p.pipeline, m);
  const block = p.state.pendingBlock()!;
  for (let i = 0; i < msgs.length; i++) {
    const h = block.diffs[i]!.blockHash;
    t.equal(blockToRpc(block, false, i).hash, h);
    t.equal(computedBlockHash(block, i), h, `flashblock ${i}: the served header hashes to the local hash`);
    t.equal(p.state.blockByFlashblockHash(h)?.index, i);
  }
});
