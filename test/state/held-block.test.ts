// A held block keeps no object per transaction: its columns, hash / balance / nonce indexes and on-demand views must
// answer exactly what the flashblocks said, whichever decoder laid them out (the native layout or the JS decoder's
// objects), past the columns' first capacity, with duplicates, rare big values and malformed lookups.
import t from 'tap';
import { generateStream } from '../../bench/flashblock-gen.js';
import { KeyTable } from '../../src/chain/key-table.js';
import { decodeFrame } from '../../src/ingest/frame.js';
import { PendingState } from '../../src/state/pending.js';
import { SenderRecovery } from '../../src/state/senders.js';
import { FramePool } from '../../src/chain/frame-pool.js';
import { decodeLayout, flashblockOfLayout, nativeDecoder } from '../../src/ingest/native-frame.js';
import { feed, makePipeline } from '../helpers/ingest.js';
import { fbBalances, fbReceipts, fbTxs } from '../helpers/views.js';

const stream = generateStream({ firstBlock: 500, blocks: 2, flashblocksPerBlock: 4, txs: (i) => 90 + i * 7, calldataBytes: 20 });

/** What the state says of every transaction, balance and sender of block `n` (views read field by field). */
function snapshot(state: PendingState, n: number): unknown {
  const b = state.block(n)!;
  const txs = [];
  for (let i = 0; i < b.txCount; i++) {
    const r = b.txAt(i)!;
    txs.push([r.position, r.flashblockIndex, r.tx.hash, r.tx.raw, r.tx.type, r.tx.from, r.tx.nonce, r.gasUsed, r.firstLogIndex, JSON.stringify(r.receipt?.logs), r.receipt?.cumulativeGasUsed, b.txHash(i), b.txType(i), b.txByteLength(i)]);
    if (state.tx(r.tx.hash)?.position !== i) txs.push(`hash lookup of ${i} failed`);
  }
  const balances: [string, bigint | undefined][] = [];
  const senders = new Set<string>();
  for (const f of stream.filter((x) => x.blockNumber === n)) {
    const nb = (f.message.metadata as { new_account_balances: Record<string, string> }).new_account_balances;
    for (const a of Object.keys(nb)) balances.push([a, b.balanceOf(a)]);
    for (const s of f.senders) senders.add(s);
  }
  return { txs, balances, nonces: [...senders].map((s) => [s, state.nextNonce(s)]) };
}

t.test('native layout and JS objects give the same held block, read through columns and views', async (t) => {
  const nat = makePipeline({ nativeDecode: true });
  const js = makePipeline({ nativeDecode: false });
  for (const f of stream) {
    feed(nat.pipeline, f.message);
    feed(js.pipeline, f.message);
  }
  nat.senders.recoverQueued();
  js.senders.recoverQueued();
  await nat.senders.drained();
  for (const n of [500, 501]) {
    const b = nat.state.block(n)!;
    t.ok(b.txCount > 256, `block ${n}: ${b.txCount} transactions, past the columns' first capacity`);
    t.same(snapshot(nat.state, n), snapshot(js.state, n), `block ${n} reads the same from either decoder`);
  }
  // The stream's own truth: the newest report of each address wins; each sender's next nonce is one past its last.
  const last = stream.filter((f) => f.blockNumber === 501);
  const want = new Map<string, bigint>();
  for (const f of last) for (const [a, v] of Object.entries((f.message.metadata as { new_account_balances: Record<string, string> }).new_account_balances)) want.set(a, BigInt(v));
  t.same([...want].filter(([a, v]) => nat.state.block(501)!.balanceOf(a) !== v), [], 'every balance as its newest flashblock reported it');
  const b = nat.state.block(501)!;
  const firstSender = last[0]!.senders[0]!;
  const mine = [];
  for (let i = 0; i < b.txCount; i++) if (b.txAt(i)!.tx.from === firstSender) mine.push(b.txAt(i)!.tx.nonce);
  t.equal(nat.state.nextNonce(firstSender), mine.reduce((a, x) => (x > a ? x : a)) + 1n, "a sender's next nonce is one past its highest pending one");
  t.equal(nat.state.tx('0x' + '00'.repeat(32)), undefined, 'an unknown hash');
  t.equal(nat.state.tx(stream[0]!.txHashes[0]!.toUpperCase()), undefined, 'not lower-case: not found (callers normalise)');
  t.equal(nat.state.tx('0x12'), undefined, 'a short string');
  t.equal(b.balanceOf('0x12'), undefined, 'a short address');
  t.equal(nat.state.nextNonce('0xzz'), null);
  t.equal(b.txAt(b.txCount), undefined, 'past the end');
  t.equal(b.txAt(1.5), undefined, 'not a position');
});

t.test('layouts moved out of a full frame pool while their block is held read the same', async (t) => {
  const native = nativeDecoder()!;
  const small = new FramePool(160 * 1024, 60_000); // a few frames: every new frame moves an older, still held one out
  const state = new PendingState({ maxPendingBlocks: 8 });
  const js = makePipeline({ nativeDecode: false });
  for (const f of stream) {
    const body = decodeLayout(native, Buffer.from(JSON.stringify(f.message)), small);
    if (typeof body === 'string') throw new Error(body);
    const { fb } = flashblockOfLayout(body)!;
    const raw = { data: Buffer.alloc(0), isBinary: false, blockNumber: fb.blockNumber, index: fb.index, receivedAtMs: 0 };
    if (fb.index === 0) state.startBlock(fb, raw, 0);
    else state.appendFlashblock(fb, raw, 0);
    feed(js.pipeline, f.message);
  }
  t.ok(small.moved > 3, `${small.moved} held layouts moved out of the pool`);
  const senders = new SenderRecovery(state);
  for (const n of [500, 501]) senders.recoverFirst(state.block(n)!, state.block(n)!.txCount);
  js.senders.recoverQueued();
  for (const n of [500, 501]) t.same(snapshot(state, n), snapshot(js.state, n), `block ${n} as the JS decoder gives it`);
});

t.test('a transaction listed twice in a block: the later one is found by hash', async (t) => {
  const m = structuredClone(stream[1]!.message) as { diff: { transactions: string[] } };
  const first = structuredClone(stream[0]!.message) as { diff: { transactions: string[] } };
  m.diff.transactions.push(first.diff.transactions[3]!);
  const { state, pipeline } = makePipeline({ nativeDecode: false });
  feed(pipeline, first);
  feed(pipeline, m);
  const hash = fbTxs((decodeFrame(Buffer.from(JSON.stringify(first)), 1 << 24, false) as { ok: true; fb: Parameters<typeof fbTxs>[0] }).fb)[3]!.hash;
  const b = state.pendingBlock()!;
  t.equal(state.tx(hash)!.position, b.txCount - 1, 'the last copy');
  t.equal(b.txHash(3), hash, 'the first copy is still at its position');
});

t.test('a cumulative gas of 2^53 or more: the JS decoder takes the frame and gasUsed stays exact', async (t) => {
  const m = structuredClone(stream[0]!.message) as { metadata: { receipts: Record<string, Record<string, { cumulativeGasUsed: string }>> } };
  const big = 2n ** 60n;
  let k = 0;
  for (const r of Object.values(m.metadata.receipts)) if (r.Eip1559 !== undefined) r.Eip1559.cumulativeGasUsed = '0x' + (big + BigInt(21000 * ++k)).toString(16);
  const r = decodeFrame(Buffer.from(JSON.stringify(m)), 1 << 24, false);
  t.ok(r.ok && r.senders === undefined, 'declined by the native decoder, decoded by the JS one');
  const { state, pipeline } = makePipeline();
  feed(pipeline, m);
  const b = state.pendingBlock()!;
  const signed = [];
  for (let i = 0; i < b.txCount; i++) if (b.txType(i) !== 0x7e) signed.push(b.txAt(i)!);
  t.equal(signed[0]!.receipt!.cumulativeGasUsed, big + 21000n);
  t.equal(signed[1]!.gasUsed, 21000n, 'the difference of two big cumulative gases');
  if (r.ok) t.equal(fbReceipts(r.fb)!.get(signed[0]!.tx.hash)!.cumulativeGasUsed, big + 21000n, 'the decoded receipt keeps it as a bigint');
  if (r.ok) t.ok(fbBalances(r.fb)!.size > 0);
});

t.test('KeyTable: colliding keys, growth and replacement', async (t) => {
  const table = new KeyTable(2);
  const n = 5000;
  for (let v = 0; v < n; v++) table.add(v % 7 === 0 ? 42 : (v * 2654435761) >>> 0, v);
  t.equal(table.size, n);
  const under42: number[] = [];
  table.seek(42);
  for (let v = table.next(); v >= 0; v = table.next()) under42.push(v);
  t.same(under42.sort((a, b) => a - b), Array.from({ length: Math.ceil(n / 7) }, (_, i) => 7 * i), 'every value under a shared key, none of another key');
  table.seek(42);
  table.next();
  table.replace(999999);
  table.seek(42);
  const after: number[] = [];
  for (let v = table.next(); v >= 0; v = table.next()) after.push(v);
  t.ok(after.includes(999999) && after.length === under42.length, 'replace overwrites the value last returned');
  table.seek(12345);
  t.equal(table.next(), -1, 'a key never added');
});
