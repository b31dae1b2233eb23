import t from 'tap';
import { brotliCompressSync, brotliDecompressSync } from 'node:zlib';
import { randomBytes } from 'node:crypto';
import { makePipeline, feed } from '../helpers/ingest.js';
import { baseSepoliaMessages, unichainMessages } from '../helpers/fixtures.js';
import { Shapes } from '../../src/rpc/shapes/json.js';
import { createLogger } from '../../src/log.js';
import { txsOf } from '../helpers/views.js';

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

/** A fresh pipeline fed the messages of base() at `indexes`, in that order. */
function fedWith(indexes: number[]) {
  const p = makePipeline();
  const m = base();
  for (const i of indexes) feed(p.pipeline, m[i]);
  return { ...p, m };
}

t.test('a duplicate flashblock is ignored and counted', async (t) => {
  const { state, observer, m } = fedWith([0, 1, 1]);
  t.equal(observer.verdicts.get('duplicate'), 1);
  t.equal(state.pendingBlock()!.nextIndex, 2);
  t.equal(state.pendingBlock()!.txCount, txCountUpTo(m, 1));
});

t.test('a gap is buffered until the missing flashblock arrives, then applied in order', async (t) => {
  const { state, observer, pipeline, m } = fedWith([0, 2, 3]);
  t.equal(observer.verdicts.get('gap_buffered'), 2);
  t.equal(state.pendingBlock()!.nextIndex, 1, 'only index 0 applied while the gap is open');
  t.equal(pipeline.bufferedFrames, 2);
  feed(pipeline, m[1]);
  t.equal(observer.verdicts.get('gap_filled'), 2);
  const b = state.pendingBlock()!;
  t.equal(b.nextIndex, 4);
  t.equal(pipeline.bufferedFrames, 0);
  const want = m.slice(0, 4).flatMap((x) => x.diff.transactions as string[]);
  t.same(txsOf(b).map((r) => r.tx.raw), want.map((x) => x.toLowerCase()), 'transactions in sequence order');
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
  for (const x of atHeight(base(), m[0]!.metadata.block_number - 1, '0x0000000000000999')) feed(pipeline, x); // the block before, in full
  feed(pipeline, m[1]);
  t.equal(observer.verdicts.get('out_of_order'), 1);
  t.equal(state.pendingBlock()!.number, m[0]!.metadata.block_number - 1, 'the block before stays pending meanwhile');
  feed(pipeline, m[0]);
  t.equal(state.pendingBlock()!.nextIndex, 2);
  t.equal(observer.verdicts.get('gap_filled'), 1);
});

/** Hands one message to the pipeline as received at `atMs` (performance.now() scale). */
function at(pipeline: ReturnType<typeof makePipeline>['pipeline'], msg: Msg, atMs: number, upstream = 0): void {
  pipeline.handleFrame({ data: Buffer.from(JSON.stringify(msg)), isBinary: false, upstream, receivedAtMs: atMs });
}

t.test('a far-future flashblock is refused and counted; pending follows the real blocks after it', async (t) => {
  const { state, observer, pipeline } = makePipeline({ blockTimeMs: 2000, maxAheadMs: 20_000 });
  const n = 35_535_698;
  let now = 1_000;
  pipeline.settle(n - 1, null, now);
  for (const x of atHeight(uni(), n, '0x0000000000000001')) at(pipeline, x, (now += 200));
  t.equal(state.pendingBlock()!.number, n);
  const poison = atHeight(uni(), n + 1_000_000, '0x00000000000000ff');
  at(pipeline, poison[0]!, (now += 10));
  at(pipeline, poison[1]!, (now += 10));
  t.equal(observer.verdicts.get('too_far_ahead'), 2, 'refused and counted');
  t.equal(state.block(n + 1_000_000), undefined, 'never held');
  t.equal(state.pendingBlock()!.number, n, 'pending is still the real block');
  for (let k = 1; k <= 13; k++) {
    for (const x of atHeight(uni(), n + k, '0x' + (k + 1).toString(16).padStart(16, '0'))) at(pipeline, x, (now += 400));
    t.equal(state.pendingBlock()!.number, n + k, `pending follows real block ${n + k}`);
    if (k % 2 === 0) pipeline.settle(n + k - 1, null, now); // the node follows one block behind
  }
  // The bound is counted from the last canonical head seen: a node that stops answering does not stop pending.
  const quiet = now;
  for (let k = 14; k <= 30; k++) {
    for (const x of atHeight(uni(), n + k, '0x' + (k + 1).toString(16).padStart(16, '0'))) at(pipeline, x, (now += 400));
  }
  t.equal(state.pendingBlock()!.number, n + 30, `still following after ${now - quiet} ms without a canonical head`);
  t.equal(observer.verdicts.get('too_far_ahead'), 2, 'real blocks are never refused');
});

t.test('a far-future block taken before the canonical head was known is abandoned once the live sequence goes on', async (t) => {
  const { state, observer, pipeline } = makePipeline({ blockTimeMs: 2000, maxAheadMs: 20_000 });
  const n = 35_535_698;
  let now = 1_000;
  for (const x of atHeight(uni(), n, '0x0000000000000001')) at(pipeline, x, (now += 200));
  at(pipeline, atHeight(uni(), n + 1_000_000, '0x00000000000000ff')[0]!, (now += 10));
  t.equal(state.pendingBlock()!.number, n + 1_000_000, 'with no canonical head there is nothing to bound it by');
  const poisonAt = now;
  const seen: number[] = [];
  for (let k = 1; k <= 4; k++) {
    for (const x of atHeight(uni(), n + k, '0x' + (k + 1).toString(16).padStart(16, '0'))) {
      at(pipeline, x, (now += 200));
      seen.push(state.pendingBlock()!.number);
      if (now - poisonAt >= 2000) t.equal(state.pendingBlock()!.number, n + k, `at +${now - poisonAt} ms pending is the live block`);
    }
  }
  t.equal(observer.verdicts.get('abandoned'), 1);
  t.equal(state.block(n + 1_000_000), undefined, 'the abandoned block is no longer held');
  const firstLive = seen.findIndex((b) => b < n + 1_000_000);
  t.ok(seen.slice(firstLive).every((b) => b < n + 1_000_000), 'once dropped it never comes back');
});

t.test('a higher block that keeps receiving flashblocks is not abandoned when a lagging copy starts a lower one', async (t) => {
  const { state, observer, pipeline } = makePipeline({ blockTimeMs: 2000 });
  const n = 35_535_698;
  const lower = atHeight(uni(), n, '0x0000000000000001');
  const higher = atHeight(uni(), n + 1, '0x0000000000000002');
  let now = 1_000;
  at(pipeline, higher[0]!, (now += 200), 1); // upstream 1 joined at n + 1
  for (let i = 0; i < lower.length; i++) {
    at(pipeline, lower[i]!, (now += 100), 0); // upstream 0 lags a block behind
    if (i + 1 < higher.length) at(pipeline, higher[i + 1]!, (now += 100), 1);
  }
  t.equal(observer.verdicts.get('abandoned'), undefined);
  t.equal(state.pendingBlock()!.number, n + 1);
  t.equal(state.pendingBlock()!.nextIndex, higher.length);
});

t.test('joining mid-block is counted as such, not as a gap, and serving starts with the next block', async (t) => {
  const lines: string[] = [];
  const { state, observer, pipeline } = makePipeline({ log: createLogger({ level: 'info', write: (l) => lines.push(l) }) });
  const m = base();
  const n = m[0]!.metadata.block_number as number;
  for (const x of m.slice(4)) feed(pipeline, x);
  t.equal(observer.verdicts.get('joined_mid_block'), m.length - 4);
  t.equal(observer.verdicts.get('out_of_order'), undefined);
  t.equal(observer.verdicts.get('gap_buffered'), undefined);
  t.equal(pipeline.bufferedFrames, 0, 'nothing buffered for a block whose start was never seen');
  pipeline.tick(performance.now() + 60_000);
  t.equal(observer.verdicts.get('gap_skipped'), undefined, 'no gap');
  t.same(observer.broken, []);
  t.equal(state.pendingBlock(), null);
  const next = atHeight(base(), n + 1, '0x0000000000000abc');
  for (const x of next) feed(pipeline, x);
  t.equal(state.pendingBlock()!.number, n + 1, 'the next block is served');
  t.equal(state.pendingBlock()!.nextIndex, next.length);
  const logged = lines.map((l) => JSON.parse(l) as { level: string; msg: string; block?: number });
  const joins = logged.filter((l) => /mid-block/.test(l.msg));
  t.equal(joins.length, 1, 'one line per joined block');
  t.equal(joins[0]!.level, 'info');
  t.equal(joins[0]!.block, n);
  t.same(logged.filter((l) => l.level === 'warn' || l.level === 'error'), [], 'nothing at warn');
});

t.test('a mid-block join from one upstream does not lose the frame when another upstream then delivers the block from index 0', async (t) => {
  const { state, observer, pipeline } = makePipeline();
  const m = base();
  feed(pipeline, m[3], 1);
  t.equal(observer.verdicts.get('joined_mid_block'), 1);
  for (const x of m.slice(0, 5)) feed(pipeline, x, 0);
  t.equal(state.pendingBlock()!.nextIndex, 5, "the second upstream's copy of index 3 applied");
});

/** Base's metadata link: index 0 names the previous block's last flashblock, index i names i - 1. */
function linked(msgs: Msg[], prevBlockLast: string): Msg[] {
  return msgs.map((x, i) => {
    x.metadata.prev_flashblock_id = i === 0 ? prevBlockLast : `${x.metadata.block_number}-${i - 1}`;
    return x;
  });
}

t.test("prev_flashblock_id on index 0 reveals the previous block's missing last flashblocks", async (t) => {
  const first = linked(base(), '0-0');
  const n = first[0]!.metadata.block_number as number;
  const second = linked(atHeight(base(), n + 1, '0x0000000000000abc'), `${n}-${first.length - 1}`);

  const whole = makePipeline();
  for (const x of [...first, ...second]) feed(whole.pipeline, x);
  t.equal(whole.observer.decodeErrors.size, 0, 'real-shaped frames with the link decode');
  t.equal(whole.observer.verdicts.get('predecessor_missing'), undefined, 'a complete block links cleanly');
  t.equal(whole.state.pendingBlock()!.nextIndex, second.length);

  const cut = makePipeline();
  for (const x of first.slice(0, first.length - 3)) feed(cut.pipeline, x);
  for (const x of second) feed(cut.pipeline, x);
  t.equal(cut.observer.verdicts.get('predecessor_missing'), 1, 'the tail of the previous block is known missing');
  t.equal(cut.observer.verdicts.get('gap_buffered'), undefined, 'the index sequence alone saw nothing');
  t.equal(cut.state.pendingBlock()!.number, n + 1, 'the next block is served');
  t.equal(cut.state.block(n)!.nextIndex, first.length - 3, 'the previous block is held as received');

  const without = makePipeline();
  const bare = [...first.slice(0, first.length - 3), ...second].map((x) => {
    const c = clone(x);
    delete c.metadata.prev_flashblock_id;
    return c;
  });
  for (const x of bare) feed(without.pipeline, x);
  t.equal(without.observer.decodeErrors.size, 0, 'a frame without the link is fine');
  t.equal(without.observer.verdicts.get('predecessor_missing'), undefined);
  t.equal(without.state.pendingBlock()!.nextIndex, second.length);

  const bad = makePipeline();
  feed(bad.pipeline, first[0]);
  for (const v of ['33439826:1', 12, '-1-2', '1-x']) {
    const c = clone(first[1]!);
    c.metadata.prev_flashblock_id = v;
    feed(bad.pipeline, c);
  }
  t.equal(bad.observer.decodeErrors.get('schema'), 4, 'a malformed link is a schema failure');
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
  // Bytes that are not a brotli stream (4 % of random 300-byte buffers are one, decoding to something else).
  const notBrotli = Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 37 + 11) & 0xff));
  t.throws(() => brotliDecompressSync(notBrotli), 'the binary garbage is not brotli');
  feed(pipeline, notBrotli, 0, true);
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
  t.same(txsOf(b.state.pendingBlock()!).map((r) => r.tx.hash), txsOf(a.state.pendingBlock()!).map((r) => r.tx.hash));
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
  const a = txsOf(ext.state.pendingBlock()!).map((r) => new Shapes(ext.senders).receiptObject(r));
  const b = txsOf(int.state.pendingBlock()!).map((r) => new Shapes(int.senders).receiptObject(r));
  t.same(b, a);
});

t.test('post-Azul metadata (block_number only) applies; receipts are left to the node', async (t) => {
  const { state, observer, pipeline, senders } = makePipeline();
  for (const m of uni()) {
    m.metadata = { block_number: m.metadata.block_number, access_list: {} };
    feed(pipeline, m);
  }
  t.equal(observer.decodeErrors.size, 0);
  const b = state.pendingBlock()!;
  t.equal(b.nextIndex, 5);
  t.ok(b.noMetadata);
  t.equal(new Shapes(senders).receiptObject(b.txAt(1)!), null, 'no derived receipt without metadata');
  t.ok(state.tx(b.txAt(1)!.tx.hash), 'the transaction itself is preconfirmed');
});

t.test('empty receipt objects (as in the spec samples) are accepted', async (t) => {
  const { state, observer, pipeline, senders } = makePipeline();
  for (const m of uni()) {
    for (const h of Object.keys(m.metadata.receipts)) m.metadata.receipts[h] = { [Object.keys(m.metadata.receipts[h])[0]!]: {} };
    feed(pipeline, m);
  }
  t.equal(observer.decodeErrors.size, 0);
  t.equal(new Shapes(senders).receiptObject(state.pendingBlock()!.txAt(0)!), null);
});

t.test('settling the canonical block prunes it, counts preconfirmation reorgs, and makes late frames stale', async (t) => {
  const { state, observer, pipeline } = makePipeline();
  const m = uni();
  const n = m[0]!.metadata.block_number as number;
  for (const x of m.slice(0, 3)) feed(pipeline, x);
  const held = txsOf(state.pendingBlock()!).map((r) => r.tx.hash);
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
