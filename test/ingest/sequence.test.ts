import t from 'tap';
import { classify, ReorderBuffer, type HeightView, type SequenceView } from '../../src/ingest/sequence.js';

function view(canonical: number, heights: Record<number, HeightView>, lastApplied = 100, aheadLimit = Infinity): SequenceView {
  return { canonical, aheadLimit, lastApplied, height: (n) => heights[n] };
}

const held = { payloadId: '0xaa', nextIndex: 3, broken: false };

const cases: Array<[string, { payloadId: string; index: number; blockNumber: number }, SequenceView, string]> = [
  ['index 0 of an unknown height starts a new block', { payloadId: '0xbb', index: 0, blockNumber: 101 }, view(99, { 100: held }), 'new_block'],
  ['the next index of the held build is next', { payloadId: '0xaa', index: 3, blockNumber: 100 }, view(99, { 100: held }), 'next'],
  ['an index already applied is a duplicate', { payloadId: '0xaa', index: 2, blockNumber: 100 }, view(99, { 100: held }), 'duplicate'],
  ['index 0 again is a duplicate', { payloadId: '0xaa', index: 0, blockNumber: 100 }, view(99, { 100: held }), 'duplicate'],
  ['an index past the next one is a gap', { payloadId: '0xaa', index: 5, blockNumber: 100 }, view(99, { 100: held }), 'gap'],
  ['index 0 with a new payload_id at a held height replaces the build', { payloadId: '0xcc', index: 0, blockNumber: 100 }, view(99, { 100: held }), 'replaced_payload'],
  ['index > 0 of a new payload_id at a held height is out of order', { payloadId: '0xcc', index: 1, blockNumber: 100 }, view(99, { 100: held }), 'out_of_order'],
  ['index > 0 of an unknown height is out of order', { payloadId: '0xbb', index: 1, blockNumber: 101 }, view(99, { 100: held }), 'out_of_order'],
  ['at the canonical head is stale', { payloadId: '0xaa', index: 3, blockNumber: 100 }, view(100, { 100: held }), 'stale'],
  ['below the canonical head is stale', { payloadId: '0xdd', index: 0, blockNumber: 50 }, view(100, {}), 'stale'],
  ['the next index of a broken build is dropped', { payloadId: '0xaa', index: 3, blockNumber: 100 }, view(99, { 100: { ...held, broken: true } }), 'broken'],
  ['a new build replaces a broken one', { payloadId: '0xee', index: 0, blockNumber: 100 }, view(99, { 100: { ...held, broken: true } }), 'replaced_payload'],
  ['block 0 index 0 with no canonical head is a new block', { payloadId: '0x01', index: 0, blockNumber: 0 }, view(-1, {}), 'new_block'],
  ['a jump several heights ahead starts a new block', { payloadId: '0x02', index: 0, blockNumber: 500 }, view(99, { 100: held }), 'new_block'],
  ['a height beyond the far-ahead bound is refused', { payloadId: '0x03', index: 0, blockNumber: 1_000_100 }, view(99, { 100: held }, 100, 110), 'too_far_ahead'],
  ['the far-ahead bound itself is accepted', { payloadId: '0x03', index: 0, blockNumber: 110 }, view(99, { 100: held }, 100, 110), 'new_block'],
  ['the far-ahead bound applies to held heights too', { payloadId: '0xaa', index: 3, blockNumber: 100 }, view(90, { 100: held }, 100, 95), 'too_far_ahead'],
  ['index > 0 of a block not following the last applied one is a mid-block join', { payloadId: '0xbb', index: 4, blockNumber: 105 }, view(99, { 100: held }), 'joined_mid_block'],
  ['index > 0 before anything was applied is a mid-block join', { payloadId: '0xbb', index: 4, blockNumber: 105 }, view(-1, {}, -1), 'joined_mid_block'],
];

for (const [name, fb, v, want] of cases) {
  t.test(name, async (t) => {
    t.equal(classify(fb, v), want);
  });
}

t.test('the reorder buffer holds within its window and evicts the oldest', async (t) => {
  const b = new ReorderBuffer<string>(2, 100);
  t.equal(b.hold({ payloadId: '0xa', index: 2, blockNumber: 1 }, 'two', 0), undefined);
  t.equal(b.hold({ payloadId: '0xa', index: 2, blockNumber: 1 }, 'again', 0), undefined, 'second copy ignored');
  t.equal(b.hold({ payloadId: '0xa', index: 3, blockNumber: 1 }, 'three', 1), undefined);
  const ev = b.hold({ payloadId: '0xa', index: 4, blockNumber: 1 }, 'four', 2);
  t.equal(ev?.item, 'two', 'oldest evicted');
  t.equal(b.size, 2);
  t.equal(b.take('0xa', 3), 'three');
  t.equal(b.take('0xa', 3), undefined, 'taken once');
});

t.test('the reorder buffer expires entries after the timeout and drops settled heights', async (t) => {
  const b = new ReorderBuffer<string>(10, 100);
  b.hold({ payloadId: '0xa', index: 2, blockNumber: 1 }, 'old', 0);
  b.hold({ payloadId: '0xb', index: 2, blockNumber: 2 }, 'new', 80);
  t.same(b.expire(99).map((h) => h.item), []);
  t.same(b.expire(100).map((h) => h.item), ['old']);
  t.equal(b.oldestSinceMs(), 80);
  t.equal(b.dropUpTo(2), 1);
  t.equal(b.size, 0);
});
