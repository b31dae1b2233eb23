// The shared reconnect policy: bounds of each delay, growth to the cap, reset, and refusal of nonsense.
import t from 'tap';
import { Backoff } from '../../src/ingest/backoff.js';

t.test('delays start at initialMs, stay at most 500 ms for 30 failures, then climb to the cap and stay', async (t) => {
  const b = new Backoff(100, 5000);
  for (let i = 1; i <= 60; i++) {
    const d = b.fail();
    t.equal(b.attempt, i);
    const ceiling = Math.min(i <= 30 ? 500 : 5000, 100 * 2 ** (i - 1));
    if (!(d >= 100 && d <= ceiling)) t.fail(`attempt ${i}: ${d} ms outside [100, ${ceiling}]`);
    if (i === 1) t.equal(d, 100, 'the first retry waits exactly initialMs');
  }
  let max = 0;
  for (let i = 0; i < 200; i++) max = Math.max(max, b.fail());
  t.ok(max > 2500 && max <= 5000, `a peer that keeps failing spreads up to the cap (max of 200 draws: ${max})`);
  const slow = new Backoff(2000, 8000);
  t.equal(slow.fail(), 2000, 'an initial delay above the quick ceiling is kept');
  const tight = new Backoff(10, 80);
  for (let i = 0; i < 10; i++) tight.fail();
  for (let i = 0; i < 50; i++) if (tight.fail() > 80) t.fail('a cap below the quick ceiling holds');
});

t.test('reset() makes the next failure wait initialMs again', async (t) => {
  const b = new Backoff(50, 800);
  for (let i = 0; i < 6; i++) b.fail();
  b.reset();
  t.equal(b.attempt, 0);
  t.equal(b.fail(), 50);
  t.equal(b.attempt, 1);
});

t.test('nonsense bounds are refused', async (t) => {
  t.throws(() => new Backoff(0, 100), RangeError);
  t.throws(() => new Backoff(200, 100), RangeError);
  t.throws(() => new Backoff(Number.NaN, 100), RangeError);
});
