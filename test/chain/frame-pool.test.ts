// The frame pool hands out regions in ring order, takes them back oldest first only once released and past their
// grace period, wraps around, says "full" instead of overwriting a held region, and tells a stale reader its region
// was reused. Then the pipeline: frames it drops and blocks it settles give their regions back.
import t from 'tap';
import { FramePool } from '../../src/chain/frame-pool.js';
import { framePool } from '../../src/ingest/native-frame.js';
import { generateStream } from '../../bench/flashblock-gen.js';
import { feed, makePipeline } from '../helpers/ingest.js';

/** A tenant that records being moved out. */
class Tenant {
  moved = -1;
  moveOut(size: number): void {
    this.moved = size;
  }
}

t.test('regions: ring order, release, grace, wrap-around, moving a held or recent region out', async (t) => {
  let now = 0;
  const p = new FramePool(1024, 100, () => now);
  p.offer();
  t.same([p.offerAt, p.offerRoom], [0, 1024], 'empty: the whole ring');
  const ta = new Tenant();
  const a = p.commit(0, 300, ta); // rounded to 304
  p.offer();
  t.same([p.offerAt, p.offerRoom], [304, 720]);
  const tb = new Tenant();
  const b = p.commit(p.offerAt, 600, tb); // [304, 904)
  p.release(a);
  now = 100;
  t.equal(p.reserve(300), 0, 'a released past its grace: taken back, the write position wraps to 0');
  t.equal(ta.moved, -1, 'not copied');
  t.notOk(p.live(a), 'a reader of the old region is told');
  t.ok(p.live(b));
  const tc = new Tenant();
  const c = p.commit(0, 200, tc);
  p.offer();
  t.same([p.offerAt, p.offerRoom], [200, 104], 'wrapped: the room up to the oldest region');
  t.equal(p.reserve(200), 200, 'b is still held: it moves out, and its bytes are free');
  t.equal(tb.moved, 600, 'its tenant copied its 600 bytes out');
  t.ok(p.live(b), 'a moved region is not reported reused (its tenant reads its own copy)');
  t.equal(p.moved, 1);
  t.equal(p.held, 1);
  p.release(c);
  p.release(c);
  t.equal(p.held, 0, 'release is idempotent');
  t.equal(p.reserve(1024), 0, 'c released within its grace: moved out too, the whole ring is free');
  t.equal(tc.moved, 200);
  t.equal(p.reserve(2000), -1, 'never more than the ring');
});

t.test('the pipeline gives back what it drops and what settles; the state keeps what it holds', async (t) => {
  const stream = generateStream({ firstBlock: 700, blocks: 3, flashblocksPerBlock: 3, txs: () => 20 });
  const pool = framePool();
  const before = pool.held;
  const moved = pool.moved;
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
  t.equal(pool.moved, moved, 'nothing had to move');
  await pipeline.senders.drained();
});
