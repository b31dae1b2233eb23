// The divergence window (src/execution-divergence.ts): the share of diverging flashblocks over the last N executed,
// later verdicts turning a block's flashblocks, and when the share passes its bound — table cases.
import t from 'tap';
import { DivergenceWindow } from '../src/execution-divergence.js';

/** A stream of blocks of `perBlock` flashblocks from block 100; `diverges(n, i)` says which disagreed. */
function fill(w: DivergenceWindow, blocks: number, perBlock: number, diverges: (n: number, i: number) => boolean): void {
  for (let n = 100; n < 100 + blocks; n++) for (let i = 0; i < perBlock; i++) w.note(n, i, diverges(n, i));
}

t.test('the share over the window, table cases', async (t) => {
  const cases: { name: string; blocks: number; perBlock: number; diverges: (n: number, i: number) => boolean; size: number; diverged: number; tripsAt25: boolean }[] = [
    { name: 'empty', blocks: 0, perBlock: 10, diverges: () => true, size: 0, diverged: 0, tripsAt25: false },
    { name: 'all verified', blocks: 20, perBlock: 10, diverges: () => false, size: 100, diverged: 0, tripsAt25: false },
    { name: 'one odd block from index 1 (a cumulative root: 9 of its 10 flashblocks)', blocks: 20, perBlock: 10, diverges: (n, i) => n === 115 && i >= 1, size: 100, diverged: 9, tripsAt25: false },
    { name: 'two odd blocks within the window: 18 %', blocks: 20, perBlock: 10, diverges: (n, i) => (n === 112 || n === 117) && i >= 1, size: 100, diverged: 18, tripsAt25: false },
    { name: 'a wrong fork: every block from its second flashblock on (as bedrock on the devnet)', blocks: 20, perBlock: 10, diverges: (_n, i) => i >= 6, size: 100, diverged: 40, tripsAt25: true },
    { name: 'the oldest leave: a bad stretch that ended 10 blocks ago is gone', blocks: 30, perBlock: 10, diverges: (n) => n < 110, size: 100, diverged: 0, tripsAt25: false },
    { name: 'fewer than the minimum (19): no verdict even at 100 %', blocks: 1, perBlock: 19, diverges: () => true, size: 19, diverged: 19, tripsAt25: false },
    { name: 'the minimum (20), all diverging', blocks: 1, perBlock: 20, diverges: () => true, size: 20, diverged: 20, tripsAt25: true },
    { name: 'exactly at the bound (25 of 100) is not past it', blocks: 10, perBlock: 10, diverges: (n, i) => n < 102 || (n === 102 && i < 5), size: 100, diverged: 25, tripsAt25: false },
    { name: 'one past the bound (26 of 100)', blocks: 10, perBlock: 10, diverges: (n, i) => n < 102 || (n === 102 && i < 6), size: 100, diverged: 26, tripsAt25: true },
  ];
  for (const c of cases) {
    const w = new DivergenceWindow(100, 20);
    fill(w, c.blocks, c.perBlock, c.diverges);
    t.equal(w.size, c.size, `${c.name}: size`);
    t.equal(w.diverged, c.diverged, `${c.name}: diverged`);
    t.equal(w.ratio, c.size === 0 ? 0 : c.diverged / c.size, `${c.name}: ratio`);
    const line = w.exceeds(0.25);
    t.equal(line !== null, c.tripsAt25, `${c.name}: ${line ?? 'within the bound'}`);
    if (line !== null) t.equal(line, `executed state diverges from the chain: ${c.diverged} of ${c.size} flashblocks in the last 100 (limit 25%)`, `${c.name}: the line names the counts and the bound`);
  }
});

t.test('a later verdict turns the flashblocks of its block still in the window, from its index on, once', async (t) => {
  const w = new DivergenceWindow(30, 5);
  fill(w, 3, 10, () => false);
  t.equal(w.markDiverged(101, 4), 6, 'a stream receipt at index 4 of block 101: indices 4-9 turn');
  t.equal(w.diverged, 6);
  t.equal(w.markDiverged(101, 0), 4, 'the canonical block differs: the rest of 101 turns, the turned ones are not counted twice');
  t.equal(w.diverged, 10);
  t.equal(w.markDiverged(99, 0), 0, 'a block no longer (or never) in the window: nothing');
  t.equal(w.exceeds(0.3), '' + 'executed state diverges from the chain: 10 of 30 flashblocks in the last 30 (limit 30%)', '10 of 30 passes 30 %');
  // The turned entries leave the window like any other.
  for (let i = 0; i < 10; i++) w.note(103, i, false);
  for (let i = 0; i < 10; i++) w.note(104, i, false);
  t.equal(w.diverged, 0, 'block 101 left the window with its verdicts');
  t.equal(w.exceeds(0.3), null);
});

t.test('bounds: 0 trips on any divergence past the minimum, 1 never', async (t) => {
  const w = new DivergenceWindow(100, 20);
  fill(w, 3, 10, (n, i) => n === 101 && i === 9);
  t.not(w.exceeds(0), null, 'one of 30 passes a bound of 0');
  fill(w, 10, 10, () => true);
  t.equal(w.exceeds(1), null, 'nothing passes 100 %');
  t.throws(() => new DivergenceWindow(0, 1), RangeError, 'an empty window is refused');
});
