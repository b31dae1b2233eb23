// The frame pool hands out regions in ring order, takes them back oldest first only once released and past their
// grace period, wraps around, says "full" instead of overwriting a held region, and tells a stale reader its region
// was reused. Then the pipeline: frames it drops and blocks it settles give their regions back.
import t from 'tap';
import { FramePool } from '../../src/chain/frame-pool.js';
import { framePool } from '../../src/ingest/native-frame.js';
import { generateStream } from '../../bench/flashblock-gen.js';
import { feed, makePipeline } from '../helpers/ingest.js';

t.test('regions: ring order, release, grace, wrap-around, full', async (t) => {
  let now = 0;
  const p = new FramePool(1024, 100, () => now);
  p.offer();
  t.same([p.offerAt, p.offerRoom], [0, 1024], 'empty: the whole ring');
  const a = p.commit(0, 300); // rounded to 304
  p.offer();
  t.same([p.offerAt, p.offerRoom], [304, 720]);
  const b = p.commit(p.offerAt, 600); // [304, 904)
  t.equal(p.reserve(300), -1, 'full: 120 bytes left at the end, nothing released');
  p.release(a);
  t.equal(p.reserve(300), -1, 'released but within its grace period');
  t.ok(p.live(a));
  now = 100;
  t.equal(p.reserve(300), 0, 'past its grace: the oldest region is taken back, the write position wraps to 0');
  t.notOk(p.live(a), 'a reader of the old region is told');
  t.ok(p.live(b));
  const c = p.commit(0, 200);
  p.offer();
  t.same([p.offerAt, p.offerRoom], [200, 104], 'wrapped: the room up to the oldest held region');
  t.equal(p.reserve(200), -1, 'the held region after it is never overwritten');
  t.equal(p.held, 2);
  p.release(b);
  p.release(b);
  t.equal(p.held, 1, 'release is idempotent');
  now = 300;
  t.equal(p.reserve(500), 200, 'b taken back: room from 200 to the end');
  t.ok(p.live(c));
  p.release(c);
  now = 1000;
  t.equal(p.reserve(1024), 0, 'everything released: the whole ring again');
  t.equal(p.reserve(2000), -1, 'never more than the ring');
});

t.test('the pipeline gives back what it drops and what settles; the state keeps what it holds', async (t) => {
  const stream = generateStream({ firstBlock: 700, blocks: 3, flashblocksPerBlock: 3, txs: () => 20 });
  const pool = framePool();
  const before = pool.held;
  const { state, pipeline } = makePipeline({ nativeDecode: true });
  for (const f of stream) feed(pipeline, f.message);
  t.equal(pool.held - before, 9, 'every applied flashblock holds its region');
  for (const f of stream.slice(0, 3)) feed(pipeline, f.message);
  t.equal(pool.held - before, 9, 'a duplicate decoded again is given back at once');
  pipeline.settle(701, null);
  t.equal(state.heldBlocks().length, 1);
  t.equal(pool.held - before, 3, 'settled blocks give theirs back');
  const stale = stream[9 - 1]!.message as { index: number };
  t.equal(stale.index, 2);
  feed(pipeline, stream[0]!.message);
  t.equal(pool.held - before, 3, 'a stale frame is given back');
  await pipeline.senders.drained();
});
