// The shared reconnect policy: bounds of each delay, growth to the cap, reset, and refusal of nonsense.
import t from 'tap';
import { Backoff, backoffDelayMs } from '../../src/ingest/backoff.js';

t.test('delays start at initialMs, stay within the doubling ceiling and reach the cap', async (t) => {
  const b = new Backoff(100, 5000);
  const delays: number[] = [];
  for (let i = 1; i <= 12; i++) {
    const d = b.fail();
    t.equal(b.attempt, i);
    t.ok(d >= 100 && d <= Math.min(5000, 100 * 2 ** (i - 1)), `attempt ${i}: ${d} ms`);
    delays.push(d);
  }
  t.equal(delays[0], 100, 'the first retry waits exactly initialMs');
  let max = 0;
  for (let i = 0; i < 200; i++) max = Math.max(max, backoffDelayMs(12, 100, 5000));
  t.ok(max > 2500 && max <= 5000, `late attempts spread up to the cap (max of 200 draws: ${max})`);
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
