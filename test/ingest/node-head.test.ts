// The canonical tracker's view of a node that comes and goes or goes back (src/ingest/canonical.ts), against a
// loopback JSON-RPC server whose eth_blockNumber answer the test sets; and the pipeline's side of it
// (src/ingest/pipeline.ts): stale frames explained once per episode, a rewind that lets the lower chain apply.
import t, { type Test } from 'tap';
import { createServer } from 'node:http';
import { CanonicalTracker } from '../../src/ingest/canonical.js';
import { createLogger } from '../../src/log.js';
import { NodeClient } from '../../src/node/client.js';
import { feed, makePipeline } from '../helpers/ingest.js';
import { unichainAtHeight as atHeight } from '../helpers/fixtures.js';

/** A node whose head is `answer.head` (a number), or that fails every call with HTTP 503 (`answer.head` null). */
async function scriptedNode(t: Test): Promise<{ url: string; answer: { head: number | null } }> {
  const answer: { head: number | null } = { head: 10 };
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      if (answer.head === null) {
        res.writeHead(503).end('down');
        return;
      }
      const { id } = JSON.parse(body) as { id: number };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id, result: '0x' + answer.head.toString(16) }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/`, answer };
}

async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

interface Seen {
  rewinds: [number, number][];
  reachable: (number | null)[];
  unreachable: string[];
  canonical: number;
}

async function tracked(t: Test) {
  const node = await scriptedNode(t);
  const client = new NodeClient({ url: node.url, timeoutMs: 1000, maxSockets: 2 });
  const seen: Seen = { rewinds: [], reachable: [], unreachable: [], canonical: -1 };
  const tracker = new CanonicalTracker(
    client,
    {
      settle: (n) => void (seen.canonical = n),
      holds: () => false,
      canonical: () => seen.canonical,
      rewind: (from, to) => {
        seen.rewinds.push([from, to]);
        seen.canonical = to;
      },
      reachable: (downMs) => void seen.reachable.push(downMs),
      unreachable: (e) => void seen.unreachable.push(e),
    },
    { pollMs: 20, wsUrl: '', maxCatchUpBlocks: 8, wsConnectTimeoutMs: 1000, wsRetryInitialMs: 100, wsRetryMaxMs: 1000, rewindConfirmMs: 200 },
    createLogger({ level: 'error', write: () => {} }),
  );
  t.teardown(() => {
    tracker.stop();
    client.close();
  });
  tracker.start();
  await until(() => seen.canonical === 10, 'the first head settled');
  return { node, seen, tracker };
}

t.test('a head that flaps one block back (two nodes behind a balancer) is not a rewind; one that stays lower is, once', async (t) => {
  const { node, seen, tracker } = await tracked(t);
  t.same(seen.reachable, [null], 'the first answer: reachable, never down before');
  // Alternate 9 and 10 for longer than the confirmation (200 ms, 3 polls).
  for (let i = 0; i < 12; i++) {
    node.answer.head = i % 2 === 0 ? 9 : 10;
    await new Promise((r) => setTimeout(r, 45));
  }
  t.same(seen.rewinds, [], 'no rewind while an answer at the followed head keeps coming');
  node.answer.head = 3;
  await until(() => seen.rewinds.length > 0, 'the rewind');
  t.same(seen.rewinds, [[10, 3]], 'rewound from 10 to 3');
  t.equal(tracker.head, 3, 'the tracker follows 3');
  await new Promise((r) => setTimeout(r, 300));
  t.equal(seen.rewinds.length, 1, 'once');
  node.answer.head = 4;
  await until(() => seen.canonical === 4, 'the lower chain advances');
  t.pass('and it is followed upward from there');
});

t.test('an outage: one unreachable, one reachable with its duration', async (t) => {
  const { node, seen } = await tracked(t);
  node.answer.head = null;
  await until(() => seen.unreachable.length > 0, 'unreachable');
  await new Promise((r) => setTimeout(r, 200));
  t.equal(seen.unreachable.length, 1, 'said once across ~10 failed polls');
  t.match(seen.unreachable[0], /503/, `what failed: ${seen.unreachable[0]}`);
  node.answer.head = 11;
  await until(() => seen.reachable.length > 1, 'reachable again');
  t.equal(seen.reachable.length, 2, 'once');
  t.ok((seen.reachable[1] ?? 0) >= 200, `with the outage's duration (${Math.round(seen.reachable[1] ?? 0)} ms)`);
  t.same(seen.rewinds, [], 'no rewind: the head did not go back');
});


t.test('stale frames are explained once per episode; a rewind drops the old chain and the lower one applies', async (t) => {
  const lines: { level: string; msg: string }[] = [];
  const log = createLogger({ level: 'info', write: (l) => void lines.push(JSON.parse(l) as { level: string; msg: string }) });
  const { state, pipeline } = makePipeline({ log, maxPendingBlocks: 8 });
  for (const m of atHeight(101)) feed(pipeline, m);
  pipeline.settle(100, null);
  t.equal(state.pendingBlock()?.number, 101, 'the old chain: pending 101 over canonical 100');
  const frames = atHeight(41);
  t.ok(frames.length >= 5, `${frames.length} frames a block`);
  const staleWarnings = (): string[] => lines.filter((l) => l.level === 'warn' && /dropped as stale/.test(l.msg)).map((l) => l.msg);
  // Two blocks' worth of the new chain's frames while the daemon still follows 100: dropped as stale, said once.
  for (const n of [41, 42, 43]) for (const m of atHeight(n)) feed(pipeline, m);
  t.equal(staleWarnings().length, 1, 'one warn line for the episode');
  t.match(staleWarnings()[0], /from block 41 .* canonical head is 100/, String(staleWarnings()[0]));
  t.equal(state.pendingBlock()?.number, 101, 'nothing of the lower chain applied');
  const dropped = pipeline.rewind(43);
  t.equal(dropped, 1, 'the rewind drops the held block of the old chain');
  t.equal(state.canonical, 43, 'canonical is the node head');
  for (const m of atHeight(44)) feed(pipeline, m);
  t.equal(state.pendingBlock()?.number, 44, "the lower chain's next block applies");
  t.ok(lines.some((l) => l.level === 'info' && /apply again at block 44, after \d+ dropped as stale/.test(l.msg)), 'the end of the episode is said');
  for (const m of atHeight(40)) feed(pipeline, m);
  t.equal(staleWarnings().length, 1, 'a few stale frames later: below the episode threshold, no new line');
});
