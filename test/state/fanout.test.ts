// The fan-out queue (state/events.ts): tasks in FIFO order, one bounded slice per event-loop turn, a yield before the
// first slice so the loop polls sockets once more, errors reported without stopping the queue, idle() and clear().
import net from 'node:net';
import t from 'tap';
import { FanoutQueue, slicedStep, TopicShards } from '../../src/state/events.js';

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

t.test('tasks run in order, a slice per turn, the next task only after the previous finished', async (t) => {
  const q = new FanoutQueue();
  const log: string[] = [];
  let a = 0;
  q.push(() => {
    log.push(`a${a}`);
    return ++a === 3;
  });
  q.push(() => {
    log.push('b');
    return true;
  });
  t.equal(q.pending, 2);
  t.same(log, [], 'nothing runs synchronously');
  await q.idle();
  t.same(log, ['a0', 'a1', 'a2', 'b'], 'a finished (three slices) before b started');
  t.equal(q.finished, 2);
  t.equal(q.turns, 4, 'one slice per turn');
  t.equal(q.pending, 0);
});

t.test('a socket that became readable before the push is read before the first slice (the yield turn)', async (t) => {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const order: string[] = [];
  const accepted = new Promise<net.Socket>((r) => server.once('connection', r));
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  t.teardown(() => client.destroy());
  const sock = await accepted;
  const got = new Promise<void>((r) => sock.once('data', () => {
    order.push('read');
    r();
  }));
  client.write('x');
  // Wait until the byte is in the server's kernel buffer, without letting the loop read it: a busy wait.
  const until = Date.now() + 50;
  while (Date.now() < until) { /* the write crosses loopback meanwhile */ }
  const q = new FanoutQueue();
  q.push(() => {
    order.push('slice');
    return true;
  });
  await Promise.all([got, q.idle()]);
  t.same(order, ['read', 'slice'], 'pending I/O first, then fan-out');
  sock.destroy();
});

t.test('a throwing step ends its task, is reported, and the queue goes on', async (t) => {
  const q = new FanoutQueue();
  const errors: unknown[] = [];
  q.onError = (e) => errors.push(e);
  let ran = false;
  q.push(() => {
    throw new Error('boom');
  });
  q.push(() => (ran = true));
  await q.idle();
  t.equal(errors.length, 1);
  t.equal((errors[0] as Error).message, 'boom');
  t.ok(ran, 'the next task ran');
});

t.test('a step returning a promise is resumed when it settles; clear() drops what is queued', async (t) => {
  const q = new FanoutQueue();
  let release: () => void = () => {};
  const gate = new Promise<void>((r) => (release = r));
  const log: string[] = [];
  let waited = false;
  q.push(() => {
    if (!waited) {
      waited = true;
      log.push('wait');
      return gate;
    }
    log.push('resumed');
    return true;
  });
  for (let i = 0; i < 5; i++) await turn();
  t.same(log, ['wait'], 'nothing spins while the promise is pending');
  release();
  await q.idle();
  t.same(log, ['wait', 'resumed']);

  q.push(() => t.fail('cleared tasks never run') as never);
  const idle = q.idle();
  q.clear();
  await idle;
  for (let i = 0; i < 3; i++) await turn();
  t.equal(q.pending, 0);
});

t.test('slicedStep stops a turn once its budget is spent and resumes where it stopped', async (t) => {
  const seen: number[] = [];
  const step = slicedStep(64, (i) => {
    seen.push(i);
    const end = performance.now() + 0.2;
    while (performance.now() < end) { /* 0.2 ms of work per item */ }
  }, 1);
  let turns = 0;
  while (!step()) turns++;
  t.same(seen, Array.from({ length: 64 }, (_, i) => i), 'every item once, in order');
  t.ok(turns >= 3, `64 items of 0.2 ms in 1 ms slices took ${turns + 1} turns`);
});

t.test('topic shards: members fill the first shard with room; a freed place is taken again', async (t) => {
  const s = new TopicShards('x', 2);
  t.same([s.add(), s.add(), s.add(), s.add(), s.add()], [0, 0, 1, 1, 2], 'two per shard, in order');
  t.equal(s.topic(2), 'x#2');
  s.remove(0);
  s.remove(1);
  t.equal(s.size, 3);
  t.equal(s.add(), 0, 'the first shard with room');
  t.equal(s.add(), 1);
  t.equal(s.add(), 2);
  s.remove(5); // never added: ignored
  t.equal(s.size, 6);
  const one = new TopicShards('y', Infinity);
  t.ok(Array.from({ length: 1000 }, () => one.add()).every((i) => i === 0), 'an unbounded shard size: one shard');
  t.throws(() => new TopicShards('z', 0), RangeError);
});

t.test('topic shards: a publish step reaches every non-empty shard once, in order, sliced unless deferred', async (t) => {
  const s = new TopicShards('x', 2);
  for (let i = 0; i < 7; i++) s.add();
  s.remove(1);
  s.remove(1); // shard 1 empty: never published
  const each: [string, number][] = [];
  s.publishEach((topic, n) => each.push([topic, n]));
  t.same(each, [['x#0', 2], ['x#2', 2], ['x#3', 1]]);

  const sliced: string[][] = [];
  const step = s.publishStep((topic) => sliced[sliced.length - 1]!.push(topic), false, 0);
  do sliced.push([]);
  while (!step());
  t.same(sliced, [['x#0'], ['x#2'], ['x#3']], 'with no budget left, one shard per slice');

  const deferred: string[][] = [];
  const all = s.publishStep((topic) => deferred[deferred.length - 1]!.push(topic), true, 0);
  do deferred.push([]);
  while (!all());
  t.same(deferred, [['x#0', 'x#2', 'x#3']], 'deferred sends: every shard in the first slice');
});
