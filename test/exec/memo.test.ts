// The read memo (src/exec/memo.ts) on its own: what it keeps, what a newer head drops, what an older one may not
// store, and its bounds. The engine's use of it (never an answer older than the executed flashblock) is in
// test/exec/revm-inline.test.ts.
import t from 'tap';
import { ReadMemo, type ReadAnswer } from '../../src/exec/memo.js';

const at = (seq: number, result: string): ReadAnswer => ({ result, seq });

t.test('answers are kept per head: a newer head drops the older one, an older answer is not stored', async (t) => {
  const m = new ReadMemo(10, 1 << 20);
  m.put('a', at(3, 'a@3'), 10);
  m.put('b', at(3, 'b@3'), 10);
  t.same(m.get('a'), at(3, 'a@3'));
  t.equal(m.size, 2);
  m.put('c', at(4, 'c@4'), 10);
  t.equal(m.get('a'), undefined, 'an answer from a newer head drops the older head\'s');
  t.equal(m.get('b'), undefined);
  t.same(m.get('c'), at(4, 'c@4'));
  m.put('a', at(3, 'a@3'), 10);
  t.equal(m.get('a'), undefined, 'an answer read at an older head is not stored');
  m.put('d', { result: 'no head' }, 10);
  t.equal(m.get('d'), undefined, 'an answer without a head is not stored');
  m.clear();
  t.equal(m.size, 0);
  m.put('a', at(3, 'a@3'), 10);
  t.equal(m.get('a'), undefined, 'a clear does not forget the newest head seen');
  m.put('a', at(4, 'a@4'), 10);
  t.same(m.get('a'), at(4, 'a@4'), 'answers at that head are stored again after a clear');
  m.put('e', { error: { code: 'E_REVERT', message: 'execution reverted' }, seq: 4 }, 10);
  t.same(m.get('e'), { error: { code: 'E_REVERT', message: 'execution reverted' }, seq: 4 }, 'errors are answers too');
});

t.test('bounded by entries and bytes; 0 entries keeps nothing', async (t) => {
  const byCount = new ReadMemo(2, 1 << 20);
  for (const k of ['a', 'b', 'c']) byCount.put(k, at(1, k), 1);
  t.equal(byCount.size, 2, 'no more than maxEntries');
  t.equal(byCount.get('c'), undefined, 'past the bound nothing more is stored');
  const byBytes = new ReadMemo(100, 25);
  byBytes.put('k1', at(1, 'x'), 10);
  byBytes.put('k2', at(1, 'y'), 10);
  byBytes.put('k3', at(1, 'z'), 10);
  t.equal(byBytes.size, 2, 'keys + answers within maxBytes');
  byBytes.put('k4', at(2, 'w'), 10);
  t.equal(byBytes.size, 1, 'a new head starts the byte count again');
  const off = new ReadMemo(0, 1 << 20);
  off.put('a', at(1, 'a'), 1);
  t.equal(off.size, 0);
});

t.test('the epoch moves with every clear, an empty memo\'s too: an answer asked for before it is not stored after', async (t) => {
  const m = new ReadMemo(10, 1 << 20);
  const e0 = m.epoch;
  m.clear();
  t.not(m.epoch, e0, 'a clear of an empty memo moves it');
  const e1 = m.epoch;
  m.put('a', at(1, 'a@1'), 10);
  t.equal(m.epoch, e1, 'storing does not move it');
  m.clear();
  t.not(m.epoch, e1);
});
