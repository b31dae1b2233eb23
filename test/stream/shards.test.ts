// The topic shards' ledger of published frames (what a closed subscriber's send buffer held) and the wire size of a
// server frame. Membership and publishing over real sockets are covered by stream.test.ts.
import t from 'tap';
import type { WebSocket } from 'uWebSockets.js';
import { loadUws } from '../../src/binaries.js';
import { SENT_HISTORY_FRAMES, TopicShards, wireBytes } from '../../src/stream/shards.js';

const uWS = loadUws();

t.test('a server frame takes 2, 4 or 10 header bytes on the wire', async (t) => {
  for (const [payload, wire] of [[0, 2], [125, 127], [126, 130], [65535, 65539], [65536, 65546], [16 * 1024 * 1024, 16 * 1024 * 1024 + 10]] as const) {
    t.equal(wireBytes(payload), wire, `${payload} bytes`);
  }
});

t.test('framesInTail counts the frames a send buffer of the last N bytes still holds, partly or wholly', async (t) => {
  const shards = new TopicShards<WebSocket<unknown>>(uWS.App(), 'test');
  const sizes = [100, 200, 70_000, 50];
  for (const n of sizes) shards.publication(Buffer.alloc(n), false, () => Infinity);
  const wire = sizes.map(wireBytes);
  const total = wire.reduce((a, b) => a + b, 0);
  t.equal(shards.sentBytes, total, 'sentBytes: every frame once, on the wire');
  t.equal(shards.sentFrames, 4);
  const cases: [string, number, number, number | null][] = [
    ['an empty buffer holds none', total, 0, 0],
    ['one byte is the newest frame', total, 1, 1],
    ['exactly the newest frame', total, wire[3]!, 1],
    ['one byte more reaches the one before', total, wire[3]! + 1, 2],
    ['the whole stream', total, total, 4],
    ['more than was ever published: every frame', total, total + 10_000, 4],
    ['frames after the offset are not counted', total - wire[3]!, 1, 1],
    ['before the third frame, its predecessor', total - wire[3]! - wire[2]!, wire[1]!, 1],
  ];
  for (const [name, before, buffered, want] of cases) t.equal(shards.framesInTail(before, buffered), want, name);
});

t.test('past the frames it remembers, framesInTail answers null', async (t) => {
  const shards = new TopicShards<WebSocket<unknown>>(uWS.App(), 'test');
  for (let i = 0; i < SENT_HISTORY_FRAMES + 10; i++) shards.publication(Buffer.alloc(10), false, () => Infinity);
  const total = shards.sentBytes;
  t.equal(shards.framesInTail(total, 12 * SENT_HISTORY_FRAMES), SENT_HISTORY_FRAMES, 'all it remembers');
  t.equal(shards.framesInTail(total, 12 * SENT_HISTORY_FRAMES + 1), null, 'one byte further is not known');
});
