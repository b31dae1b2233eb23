// The cadence judge: a stream whose blocks or flashblocks-per-block contradict the timing the daemon runs under is
// said once when it starts and once when it ends; agreeing streams, gaps, rewinds and replays' bursts are not.
import t from 'tap';
import { presetByName } from '../../src/chain/presets.js';
import { CadenceJudge, cadenceExpectation, type CadenceExpectation, type CadenceVerdict } from '../../src/ingest/cadence.js';

const DEVNET = presetByName('devnet')!;
const UNICHAIN = presetByName('unichain')!;
/** The devnet preset by the node's chain id: 2 s blocks, 200 ms flashblocks. */
const TWO_SECONDS = cadenceExpectation({ kind: 'node', preset: DEVNET }, DEVNET, { blockTimeMs: 0, flashblockIntervalMs: 0 });

/** Feeds `blocks` blocks from `first`, each `perBlock` flashblocks, timestamps `blockSec` apart; returns the verdicts. */
function feed(judge: CadenceJudge, first: number, blocks: number, perBlock: number, blockSec: number, ts0 = 1_800_000_000): CadenceVerdict[] {
  const out: CadenceVerdict[] = [];
  for (let b = 0; b < blocks; b++) {
    for (let i = 0; i < perBlock; i++) {
      const v = judge.flashblock(first + b, i, ts0 + b * blockSec);
      if (v !== null) out.push(v);
    }
  }
  return out;
}

t.test('a stream at the expected cadence is never contradicted', async (t) => {
  const judge = new CadenceJudge(TWO_SECONDS);
  t.same(feed(judge, 100, 30, 10, 2), []);
  t.same(judge.mismatches, []);
  // 11 flashblocks a block (index 0 plus ten, as Base sent them) is within the tolerance.
  t.same(feed(judge, 130, 20, 11, 2, 1_800_000_060), []);
});

t.test('1 s blocks of 5 under a 2 s preset: one warning naming both cadences and the flags, after enough blocks', async (t) => {
  const judge = new CadenceJudge(TWO_SECONDS);
  // Six blocks are five completed ones (the sixth still open): no verdict yet, six completed ones are needed.
  t.same(feed(judge, 10, 6, 5, 1), [], 'no verdict before six completed blocks');
  const v = feed(judge, 16, 20, 5, 1, 1_800_000_006);
  t.equal(v.length, 1, 'said once for the whole episode');
  const first = v[0]!;
  t.equal(first.kind, 'contradicted');
  if (first.kind !== 'contradicted') return;
  t.same(first.checks, ['block_time', 'flashblocks_per_block']);
  t.equal(first.observedBlockTimeMs, 1000);
  t.equal(first.observedPerBlock, 5);
  t.match(first.message, /the Devnet preset \(by the node's chain id 901\)/, 'names what the daemon runs under');
  t.match(first.message, /every 1 s with 5 flashblocks each/, 'the observed cadence');
  t.match(first.message, /expects 2 s blocks of 10 flashblock intervals \(200 ms\)/, 'the expected one');
  t.match(first.message, /--chain <unichain\|unichain-sepolia\|xlayer\|xlayer-testnet>/, 'the presets that fit the stream');
  t.match(first.message, /--block-time-ms 1000 --flashblock-interval-ms 200/, 'and the flags that fit it');
  t.same(judge.mismatches, ['block_time', 'flashblocks_per_block']);
});

t.test('the episode ends once the median agrees again, and a new one is said again', async (t) => {
  const judge = new CadenceJudge(TWO_SECONDS);
  t.equal(feed(judge, 1, 10, 5, 1).length, 1);
  const back = feed(judge, 11, 10, 10, 2, 1_800_000_010);
  t.equal(back.length, 1);
  t.equal(back[0]!.kind, 'agrees');
  t.match(back[0]!.message, /agrees with the Devnet preset .* again: 2 s blocks with 10 flashblocks each/);
  t.same(judge.mismatches, []);
  const again = feed(judge, 21, 10, 5, 1, 1_800_000_040);
  t.same(again.map((v) => v.kind), ['contradicted'], 'a second episode warns again');
});

t.test('a block of N intervals has N or N + 1 flashblocks: both agree, and the fix names N', async (t) => {
  const unichain = cadenceExpectation({ kind: 'node', preset: UNICHAIN }, UNICHAIN, { blockTimeMs: 0, flashblockIntervalMs: 0 });
  t.same(feed(new CadenceJudge(unichain), 1, 12, 6, 1), [], '6 flashblocks a block under 5 intervals (op-rbuilder, the devnet)');
  t.same(feed(new CadenceJudge(unichain), 1, 12, 4, 1), [], '4 (one late) too');
  const v = feed(new CadenceJudge(TWO_SECONDS), 1, 12, 6, 1);
  if (v[0]?.kind !== 'contradicted') return t.fail('contradicted');
  t.match(v[0].message, /every 1 s with 6 flashblocks each/);
  t.match(v[0].message, /--chain <unichain\|unichain-sepolia\|xlayer\|xlayer-testnet> .* --block-time-ms 1000 --flashblock-interval-ms 200$/, '6 of 1000 ms: 5 intervals of 200 ms');
  const eleven = feed(new CadenceJudge(unichain), 1, 12, 11, 2);
  if (eleven[0]?.kind !== 'contradicted') return t.fail('contradicted');
  t.match(eleven[0].message, /--chain <op-mainnet\|op-sepolia\|base\|base-sepolia\|devnet> .* --block-time-ms 2000 --flashblock-interval-ms 200$/, 'Base-like: 11 of 2000 ms are 10 intervals');
});

t.test('only the flashblock count off: 2 s blocks of 4 (500 ms flashblocks) under a 200 ms preset', async (t) => {
  const judge = new CadenceJudge(TWO_SECONDS);
  const v = feed(judge, 1, 12, 4, 2);
  t.equal(v.length, 1);
  if (v[0]!.kind !== 'contradicted') return t.fail('contradicted');
  t.same(v[0]!.checks, ['flashblocks_per_block']);
  t.notMatch(v[0]!.message, /--chain/, 'no preset has 2 s blocks of 4');
  t.match(v[0]!.message, /--block-time-ms 2000 --flashblock-interval-ms 500/);
});

t.test('timestamps, not arrival: gaps and rewinds start over, a block seen from its middle is not counted', async (t) => {
  const judge = new CadenceJudge(TWO_SECONDS);
  // Every other block missing (a gap each time): no block completes, nothing is judged.
  for (let b = 0; b < 40; b += 2) for (let i = 0; i < 5; i++) t.equal(judge.flashblock(b, i, 1_800_000_000 + b), null);
  // Joined mid-block (index 3 first): that block's count is not known, so it is not a sample.
  for (let i = 3; i < 10; i++) judge.flashblock(100, i, 1_800_001_000);
  t.same(feed(judge, 101, 6, 10, 2, 1_800_001_002), []);
  // A rewind to an earlier block starts over too.
  t.equal(judge.flashblock(50, 0, 1_800_000_500), null);
  t.same(judge.mismatches, []);
});

t.test('a new expectation forgets the episode: the same stream under the right preset agrees silently', async (t) => {
  const judge = new CadenceJudge(TWO_SECONDS);
  t.equal(feed(judge, 1, 10, 5, 1).length, 1);
  judge.setExpectation(cadenceExpectation({ kind: 'node', preset: UNICHAIN }, UNICHAIN, { blockTimeMs: 0, flashblockIntervalMs: 0 }));
  t.same(feed(judge, 11, 10, 5, 1, 1_800_000_010), [], 'no verdict: the stream agrees with Unichain');
  t.same(judge.mismatches, []);
});

t.test('where the expectation comes from, as the message says it', async (t) => {
  const none = { blockTimeMs: 0, flashblockIntervalMs: 0 };
  const timing = { blockTimeMs: 2000, flashblockIntervalMs: 200 };
  const cases: [Parameters<typeof cadenceExpectation>, string][] = [
    [[{ kind: 'flag', preset: UNICHAIN }, timing, none], 'the Unichain preset (--chain unichain)'],
    [[{ kind: 'unknown', chainId: 12345 }, timing, none], 'the defaults (chain 12345 has no preset)'],
    [[{ kind: 'unavailable', detail: 'down' }, timing, none], 'the defaults (the chain is not known yet)'],
    [[{ kind: 'node', preset: DEVNET }, timing, { blockTimeMs: 2000, flashblockIntervalMs: 0 }], "--block-time-ms 2000 (over the Devnet preset (by the node's chain id 901))"],
  ];
  for (const [args, source] of cases) {
    const e: CadenceExpectation = cadenceExpectation(...args);
    t.equal(e.source, source);
  }
});
