// Real blocks through the real engine and daemon, end to end (half a of the fixtures; real-blocks-b.test.ts runs the other half in
// parallel): each block of ../shared/conformance/op-blocks split into flashblocks in every stream dialect, streamed
// by a replay server to a daemon whose node is the block's witness node; the daemon verifies each flashblock's
// receipts root (the last one the real block's) and serves every receipt at pending with the spec's
// fields and answers pending state reads with the real post-state. test/helpers/real-block-daemon.ts says why one
// daemon per fixture carries all four dialects.
import t from 'tap';
import { OP_BLOCKS_ABSENT, opBlockFixtures } from '../helpers/op-blocks.js';
import { throughDaemon, type RealBlockRow } from '../helpers/real-block-daemon.js';

const fixtures = opBlockFixtures().filter((_, i) => i % 2 === 0);
if (fixtures.length === 0) t.plan(0, OP_BLOCKS_ABSENT);

const rows: RealBlockRow[] = [];
for (const f of fixtures) {
  t.test(`${f.name}: every dialect through the daemon, verified and served at pending`, async (t) => {
    rows.push(await throughDaemon(t, f));
  });
}

t.teardown(() => {
  for (const r of rows) console.log(`# ${r.name} | chain ${r.chainId} | ${r.fork} | ${r.txs} txs | header ${r.headerKnown ? 'known' : 'unknown'} | matched in: ${r.dialects.join(', ') || 'none'}`);
});
