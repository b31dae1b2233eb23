// The OP subblocks sequence rule (specs/protocol/subblocks.md "Sequence": discard the current sequence if an index is
// skipped, duplicated, or paired with a different payload ID or block number), behind the pipeline's dialect option;
// other dialects keep buffering gaps. One test per rule, on the Unichain capture re-shaped as subblocks.
import t, { type Test } from 'tap';
import { asOpRbuilder, asSubblocks } from '../helpers/dialects.js';
import { unichainAtHeight, unichainMessages } from '../helpers/fixtures.js';
import { feed, makePipeline } from '../helpers/ingest.js';

type Msg = Record<string, any>;
const sub = (msgs: Msg[] = structuredClone(unichainMessages()) as Msg[]): Msg[] => asSubblocks(asOpRbuilder(msgs));
const strict = () => makePipeline({ dialect: 'op-subblocks' });

/** Whether the sequence at the capture's height was discarded: broken, pending falls back, counted once. */
function discarded(t: Test, p: ReturnType<typeof strict>, n: number): void {
  t.equal(p.state.block(n)?.broken, true, 'the block is discarded (broken)');
  t.equal(p.state.pendingBlock(), null, 'pending falls back to the node');
  t.equal(p.observer.verdicts.get('sequence_discarded'), 1, 'counted as sequence_discarded');
  t.same(p.observer.broken, [n]);
}

t.test('a skipped index discards the sequence (no buffering), and later frames of it stay ignored', async (t) => {
  const m = sub();
  const p = strict();
  for (const i of [0, 1, 3]) feed(p.pipeline, m[i]);
  discarded(t, p, m[0]!.metadata.block_number);
  t.equal(p.pipeline.bufferedFrames, 0, 'nothing buffered');
  feed(p.pipeline, m[2]);
  feed(p.pipeline, m[4]);
  t.equal(p.state.block(m[0]!.metadata.block_number)!.nextIndex, 2, 'the late index 2 does not revive it');
  t.equal(p.state.pendingBlock(), null);
});

t.test('the same skipped index under another dialect is buffered until it arrives (existing rule)', async (t) => {
  const m = sub();
  const p = makePipeline({ dialect: 'op-rbuilder' });
  for (const i of [0, 1, 3, 2]) feed(p.pipeline, m[i]);
  t.equal(p.observer.verdicts.get('sequence_discarded'), undefined);
  t.equal(p.state.pendingBlock()!.nextIndex, 4, 'gap filled');
});

t.test('an index repeated with other content discards the sequence', async (t) => {
  const m = sub();
  const p = strict();
  for (const i of [0, 1]) feed(p.pipeline, m[i]);
  const again = structuredClone(m[1]!);
  again.diff.gas_used = '0x1';
  feed(p.pipeline, again);
  discarded(t, p, m[0]!.metadata.block_number);
});

t.test('a byte-identical repeat (a re-sent or resumed frame) is only a duplicate', async (t) => {
  const m = sub();
  const p = strict();
  for (const i of [0, 1, 1, 2]) feed(p.pipeline, m[i]);
  t.equal(p.observer.verdicts.get('duplicate'), 1);
  t.equal(p.observer.verdicts.get('sequence_discarded'), undefined);
  t.equal(p.state.pendingBlock()!.nextIndex, 3);
});

t.test('a frame of another payload_id at the same height discards the sequence', async (t) => {
  const m = sub();
  const p = strict();
  for (const i of [0, 1]) feed(p.pipeline, m[i]);
  const foreign = structuredClone(m[2]!);
  foreign.payload_id = '0x00000000000000ff';
  feed(p.pipeline, foreign);
  discarded(t, p, m[0]!.metadata.block_number);
});

t.test('a frame of the same payload paired with another block number discards the sequence', async (t) => {
  const m = sub();
  const p = strict();
  for (const i of [0, 1]) feed(p.pipeline, m[i]);
  const moved = structuredClone(m[2]!);
  moved.metadata.block_number = m[0]!.metadata.block_number + 1;
  feed(p.pipeline, moved);
  discarded(t, p, m[0]!.metadata.block_number);
});

t.test('a new payload_id at index 0 supersedes the block (the spec: a new in-progress block), not a discard', async (t) => {
  const m = sub();
  const p = strict();
  for (const i of [0, 1]) feed(p.pipeline, m[i]);
  const restart = sub().map((x) => ({ ...x, payload_id: '0x00000000000000ee' }));
  feed(p.pipeline, restart[0]);
  t.equal(p.observer.verdicts.get('replaced_payload'), 1);
  t.equal(p.observer.verdicts.get('sequence_discarded'), undefined);
  t.equal(p.state.pendingBlock()!.payloadId, '0x00000000000000ee');
});

t.test('after a discard, the next index 0 starts a served block again', async (t) => {
  const m = sub();
  const p = strict();
  for (const i of [0, 2]) feed(p.pipeline, m[i]);
  t.equal(p.state.pendingBlock(), null);
  const n = m[0]!.metadata.block_number + 1;
  for (const x of sub(unichainAtHeight(n))) feed(p.pipeline, x);
  t.equal(p.state.pendingBlock()?.number, n);
  t.equal(p.state.pendingBlock()?.nextIndex, 5);
});

t.test('a frame of another payload at a height not held (its index 0 missed) discards nothing: dropped until index 0', async (t) => {
  const m = sub();
  const p = strict();
  for (const x of m) feed(p.pipeline, x);
  const n = m[0]!.metadata.block_number + 1;
  const next = sub(unichainAtHeight(n));
  feed(p.pipeline, next[1]);
  t.equal(p.observer.verdicts.get('sequence_discarded'), undefined, 'the complete block stays served');
  t.equal(p.state.pendingBlock()?.number, n - 1);
  t.equal(p.pipeline.bufferedFrames, 0, 'not buffered either');
  feed(p.pipeline, next[0]);
  t.equal(p.state.pendingBlock()?.number, n, 'the next index 0 starts it');
  t.equal(p.state.pendingBlock()?.nextIndex, 1, 'and the frame before it stays dropped');
});
