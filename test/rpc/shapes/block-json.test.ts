// Block JSON assembled from text kept per flashblock is byte for byte JSON.stringify of the block object, for hashes
// and full transactions, as of every flashblock, before and after later flashblocks arrive, with deposits, a post-exec
// transaction, subblocks' local hashes and a stream without receipts (deposit extras from execution: never kept).
import t, { type Test } from 'tap';
import { blockToRpc } from '../../../src/rpc/shapes/block.js';
import { Shapes } from '../../../src/rpc/shapes/json.js';
import type { ReceiptSource } from '../../../src/rpc/shapes/receipt.js';
import { STREAM_RECEIPTS } from '../../../src/rpc/shapes/receipt.js';
import type { DepositExtras } from '../../../src/rpc/shapes/context.js';
import type { BlockView, TxView } from '../../../src/state/view.js';
import { generateStream } from '../../../bench/flashblock-gen.js';
import { asOpRbuilder, asSubblocks, postExecTx } from '../../helpers/dialects.js';
import { unichainMessages } from '../../helpers/fixtures.js';
import { feed, makePipeline } from '../../helpers/ingest.js';

type Msg = Record<string, any>;

/** Every flashblock of `block`, both shapes: the assembled text against JSON.stringify of the object. */
function compare(t: Test, shapes: Shapes, block: BlockView, deposit: (rec: TxView) => DepositExtras | null, label: string): void {
  let bad = 0;
  for (let i = 0; i <= block.lastIndex; i++) {
    for (const full of [false, true]) {
      const want = JSON.stringify(blockToRpc(block, full, i, deposit));
      if (shapes.blockJson(block, full, i).json !== want) bad++;
    }
  }
  t.equal(bad, 0, `${label}: ${2 * (block.lastIndex + 1)} answers byte for byte`);
}

function run(t: Test, msgs: Msg[], label: string, source: ReceiptSource = STREAM_RECEIPTS, opts: { nativeDecode?: boolean } = {}): void {
  const { state, pipeline, senders } = makePipeline(opts);
  const shapes = new Shapes(senders, source);
  const deposit = (rec: TxView): DepositExtras | null => rec.receipt ?? source.facts(rec);
  const half = Math.ceil(msgs.length / 2);
  for (const m of msgs.slice(0, half)) feed(pipeline, m);
  senders.recoverQueued();
  compare(t, shapes, state.pendingBlock()!, deposit, `${label}, first half`);
  for (const m of msgs.slice(half)) feed(pipeline, m);
  senders.recoverQueued();
  compare(t, shapes, state.pendingBlock()!, deposit, `${label}, all (texts of the first half kept)`);
}

t.test('assembled block JSON equals the stringified object', async (t) => {
  run(t, unichainMessages(), 'unichain (deposits with stream receipts)');
  run(t, unichainMessages(), 'unichain, JS decoder', STREAM_RECEIPTS, { nativeDecode: false });
  const pe = asOpRbuilder(unichainMessages());
  pe[1]!.diff.post_exec_tx = postExecTx(pe[1]!.metadata.block_number, [[0, 100]]);
  run(t, pe, 'op-rbuilder with a post-exec transaction');
  run(t, asSubblocks(asOpRbuilder(unichainMessages())), 'subblocks (local hashes)');
  const stream = generateStream({ firstBlock: 900, blocks: 1, flashblocksPerBlock: 6, txs: () => 120, calldataBytes: 30 });
  run(t, stream.map((f) => f.message), 'generated, 720 transactions');
  // Post-Azul: no receipts; a source that "executed" the deposits (their extras change with it, so never kept).
  const executed: ReceiptSource = {
    facts: (rec) => (rec.tx.type === 0x7e ? ({ depositNonce: BigInt(rec.position + 7), depositReceiptVersion: 1n } as never) : null),
    logs: () => null,
  };
  const azul = unichainMessages().map((m) => {
    const c = structuredClone(m) as Msg;
    delete c.metadata.receipts;
    return c;
  });
  run(t, azul, 'no stream receipts, deposit extras from execution', executed);
});
