import t from 'tap';
import { brotliCompressSync } from 'node:zlib';
import { randomBytes } from 'node:crypto';
import { makePipeline, feed } from '../helpers/ingest.js';
import { baseSepoliaMessages, unichainMessages } from '../helpers/fixtures.js';
import { receiptToRpc } from '../../src/state/view.js';

type Msg = Record<string, any>;
const clone = <T>(x: T): T => JSON.parse(JSON.stringify(x)) as T;
const base = (): Msg[] => clone(baseSepoliaMessages());
const uni = (): Msg[] => clone(unichainMessages());
const txCountUpTo = (msgs: Msg[], lastIndex: number) => msgs.slice(0, lastIndex + 1).reduce((n, m) => n + m.diff.transactions.length, 0);

/** The same flashblocks moved to another height with another payload id. */
function atHeight(msgs: Msg[], n: number, payloadId: string): Msg[] {
  return msgs.map((m) => {
    const c = clone(m);
    c.payload_id = payloadId;
    c.metadata.block_number = n;
    if (c.base) c.base.block_number = '0x' + n.toString(16);
    c.diff.block_hash = '0x' + n.toString(16).padStart(8, '0') + c.diff.block_hash.slice(10);
    return c;
  });
}

t.test('a duplicate flashblock is ignored and counted', async (t) => {
  const { state, observer, pipeline } = makePipeline();
  const m = base();
  feed(pipeline, m[0]);
  feed(pipeline, m[1]);
  feed(pipeline, m[1]);
  t.equal(observer.verdicts.get('duplicate'), 1);
  t.equal(state.pendingBlock()!.nextIndex, 2);
  t.equal(state.pendingBlock()!.txs.length, txCountUpTo(m, 1));
});

t.test('a gap is buffered until the missing flashblock arrives, then applied in order', async (t) => {
  const { state, observer, pipeline } = makePipeline();
  const m = base();
  feed(pipeline, m[0]);
  feed(pipeline, m[2]);
  feed(pipeline, m[3]);
  t.equal(observer.verdicts.get('gap_buffered'), 2);
  t.equal(state.pendingBlock()!.nextIndex, 1, 'only index 0 applied while the gap is open');
  t.equal(pipeline.bufferedFrames, 2);
  feed(pipeline, m[1]);
  t.equal(observer.verdicts.get('gap_filled'), 2);
  const b = state.pendingBlock()!;
  t.equal(b.nextIndex, 4);
  t.equal(pipeline.bufferedFrames, 0);
  const want = m.slice(0, 4).flatMap((x) => x.diff.transactions as string[]);
  t.same(b.txs.map((r) => r.tx.raw), want.map((x) => x.toLowerCase()), 'transactions in sequence order');
  feed(pipeline, m[4]);
  t.equal(b.nextIndex, 5, 'the next flashblock after the fill applies directly');
});

t.test('a gap that never fills marks the block broken; pending falls back until the next block', async (t) => {
  const { state, observer, pipeline } = makePipeline({ gapTimeoutMs: 50 });
  const m = base();
  feed(pipeline, m[0]);
  feed(pipeline, m[2]);
  t.ok(state.pendingBlock(), 'served as of index 0 while the gap is open');
  pipeline.tick(performance.now() + 10_000);
  t.equal(state.pendingBlock(), null, 'a broken block is never served');
  t.same(observer.broken, [m[0]!.metadata.block_number]);
  t.equal(observer.verdicts.get('gap_skipped'), 1);
  feed(pipeline, m[3]);
  t.equal(state.pendingBlock(), null, 'later flashblocks of the broken build are dropped');
  const next = atHeight(uni(), m[0]!.metadata.block_number + 1, '0x1111111111111111');
  feed(pipeline, next[0]);
  t.equal(state.pendingBlock()!.number, m[0]!.metadata.block_number + 1, 'the next block is served at once');
});

t.test('out of order: index 1 before index 0 is buffered and applied as soon as 0 arrives', async (t) => {
  const { state, observer, pipeline } = makePipeline();
  const m = base();
  feed(pipeline, m[1]);
  t.equal(observer.verdicts.get('out_of_order'), 1);
  t.equal(state.pendingBlock(), null);
  feed(pipeline, m[0]);
  t.equal(state.pendingBlock()!.nextIndex, 2);
  t.equal(observer.verdicts.get('gap_filled'), 1);
});

t.test('a new payload_id mid-block replaces the build; the next flashblock of the new build applies', async (t) => {
  const { state, observer, pipeline } = makePipeline();
  const m = base();
  for (let i = 0; i < 4; i++) feed(pipeline, m[i]);
  const replaced = clone(m.slice(0, 2)).map((x) => ({ ...x, payload_id: '0x0000000000000abc' }));
  feed(pipeline, replaced[0]);
  t.equal(observer.verdicts.get('replaced_payload'), 1);
  const b = state.pendingBlock()!;
  t.equal(b.payloadId, '0x0000000000000abc');
  t.equal(b.nextIndex, 1);
  t.equal(state.txCount, m[0]!.diff.transactions.length, 'transactions of the old build are no longer indexed');
  feed(pipeline, replaced[1]);
  t.equal(state.pendingBlock()!.nextIndex, 2);
  feed(pipeline, m[4]);
  t.equal(state.pendingBlock()!.nextIndex, 2, 'a late flashblock of the old build is not applied');
});

t.test('garbage is counted by reason and never changes state', async (t) => {
  const { state, observer, pipeline } = makePipeline({ maxFrameBytes: 64 * 1024 });
  const m = base();
  feed(pipeline, m[0]);
  const before = state.txCount;
  const bad = (mut: (x: Msg) => void): Msg => {
    const c = clone(m[1]!);
    mut(c);
    return c;
  };
  feed(pipeline, Buffer.from('{"payload_id": "0x01", "index": '));
  feed(pipeline, randomBytes(300), 0, true);
  feed(pipeline, bad((c) => (c.index = '1')));
  feed(pipeline, bad((c) => (c.metadata.block_number = '0x1fe4052')));
  feed(pipeline, bad((c) => (c.diff.transactions = 'nope')));
  feed(pipeline, bad((c) => (c.diff.gas_used = 12)));
  feed(pipeline, bad((c) => (c.diff.state_root = '0x1234')));
  feed(pipeline, bad((c) => (c.diff.transactions[1] = '0x02f8')));
  feed(pipeline, Buffer.alloc(70 * 1024, 0x20));
  feed(pipeline, brotliCompressSync(Buffer.from('{"x":"' + 'a'.repeat(200 * 1024) + '"}')), 0, true);
  t.same(Object.fromEntries(observer.decodeErrors), { json: 1, brotli: 1, schema: 5, transaction: 1, too_large: 2 });
  t.equal(state.txCount, before, 'nothing half-applied');
  t.equal(state.pendingBlock()!.nextIndex, 1);
  feed(pipeline, m[1]);
  t.equal(state.pendingBlock()!.nextIndex, 2, 'the next valid flashblock applies');
});

t.test('text frames of JSON that is not an object count as schema or json, never brotli', async (t) => {
  const { state, observer, pipeline } = makePipeline();
  const m = base();
  feed(pipeline, m[0]);
  for (const text of ['[1,2,3]', 'null', '  "flashblock"', '42', 'true']) feed(pipeline, Buffer.from(text));
  feed(pipeline, Buffer.from('[1,2,'));
  feed(pipeline, Buffer.from('nul'));
  feed(pipeline, Buffer.from('[1,2,3]'), 0, true); // valid JSON in a binary frame: still a schema failure
  feed(pipeline, randomBytes(64).fill(0x5b, 0, 1), 0, true); // binary garbage: brotli
  t.same(Object.fromEntries(observer.decodeErrors), { schema: 6, json: 2, brotli: 1 });
  feed(pipeline, m[1]);
  t.equal(state.pendingBlock()!.nextIndex, 2, 'the next valid flashblock applies');
});

t.test('brotli binary frames decode to the same state as text frames', async (t) => {
  const a = makePipeline();
  const b = makePipeline();
  for (const m of uni()) {
    feed(a.pipeline, m);
    feed(b.pipeline, brotliCompressSync(Buffer.from(JSON.stringify(m))), 0, true);
  }
  t.same(b.state.pendingBlock()!.txs.map((r) => r.tx.hash), a.state.pendingBlock()!.txs.map((r) => r.tx.hash));
  t.same(b.observer.decodeErrors.size, 0);
});

t.test('internally tagged receipts, boolean status and base:null give the same receipts', async (t) => {
  const ext = makePipeline();
  const int = makePipeline();
  const tags: Record<string, string> = { Legacy: '0x0', Eip2930: '0x1', Eip1559: '0x2', Eip7702: '0x4', Deposit: '0x7e' };
  for (const m of uni()) {
    feed(ext.pipeline, m);
    const c = clone(m);
    for (const [h, r] of Object.entries(c.metadata.receipts as Record<string, Record<string, any>>)) {
      const [tag, body] = Object.entries(r)[0]!;
      c.metadata.receipts[h] = { type: tags[tag], ...body, status: body.status === '0x1' };
    }
    if (c.index > 0) c.base = null;
    feed(int.pipeline, c);
  }
  t.equal(int.observer.decodeErrors.size, 0);
  const a = ext.state.pendingBlock()!.txs.map((r) => receiptToRpc(r));
  const b = int.state.pendingBlock()!.txs.map((r) => receiptToRpc(r));
  t.same(b, a);
});

t.test('post-Azul metadata (block_number only) applies; receipts are left to the node', async (t) => {
  const { state, observer, pipeline } = makePipeline();
  for (const m of uni()) {
    m.metadata = { block_number: m.metadata.block_number, access_list: {} };
    feed(pipeline, m);
  }
  t.equal(observer.decodeErrors.size, 0);
  const b = state.pendingBlock()!;
  t.equal(b.nextIndex, 5);
  t.ok(b.noMetadata);
  t.equal(receiptToRpc(b.txs[1]!), null, 'no derived receipt without metadata');
  t.ok(state.tx(b.txs[1]!.tx.hash), 'the transaction itself is preconfirmed');
});

t.test('empty receipt objects (as in the spec samples) are accepted', async (t) => {
  const { state, observer, pipeline } = makePipeline();
  for (const m of uni()) {
    for (const h of Object.keys(m.metadata.receipts)) m.metadata.receipts[h] = { [Object.keys(m.metadata.receipts[h])[0]!]: {} };
    feed(pipeline, m);
  }
  t.equal(observer.decodeErrors.size, 0);
  t.equal(receiptToRpc(state.pendingBlock()!.txs[0]!), null);
});

t.test('settling the canonical block prunes it, counts preconfirmation reorgs, and makes late frames stale', async (t) => {
  const { state, observer, pipeline } = makePipeline();
  const m = uni();
  const n = m[0]!.metadata.block_number as number;
  for (const x of m.slice(0, 3)) feed(pipeline, x);
  const held = state.pendingBlock()!.txs.map((r) => r.tx.hash);
  pipeline.settle(n, new Set(held.slice(1)));
  t.same(observer.reorgs, [held[0]], 'the missing preconfirmed tx is a reorg');
  t.equal(state.pendingBlock(), null);
  t.equal(state.txCount, 0);
  feed(pipeline, m[3]);
  t.equal(observer.verdicts.get('stale'), 1);
});

t.test('pending spans several heights; the oldest is dropped beyond the bound', async (t) => {
  const { state, pipeline } = makePipeline({ maxPendingBlocks: 3 });
  for (let k = 0; k < 5; k++) for (const x of atHeight(uni(), 1000 + k, '0x' + (k + 1).toString(16).padStart(16, '0'))) feed(pipeline, x);
  t.same(state.heldBlocks().map((b) => b.number), [1002, 1003, 1004]);
  t.equal(state.pendingBlock()!.number, 1004);
});
