// Reads of the state view never recover; SenderSource.settled does only the work needed: a nonce query for an
// address that sent nothing pending answers without recovering the pending senders; one for a sender recovers them.
// These run the JS decoder (no native recovery, no worker): recovery on the event loop; the native path is in
// test/ingest/native-frame.test.ts.
import t from 'tap';
import { feed, makePipeline } from '../helpers/ingest.js';
import { unichainMessages, unichainRpcBlock } from '../helpers/fixtures.js';

const canonical = unichainRpcBlock() as { transactions: { from: string; nonce: string; type: string }[] };

t.test('nextNonce recovers senders only when the address can be one of them', async (t) => {
  const { state, pipeline, senders } = makePipeline({ nativeDecode: false });
  // Fed synchronously: the deferred recovery slices (setImmediate) have not run yet.
  for (const m of unichainMessages()) feed(pipeline, m);
  const waiting = senders.unrecoveredCount;
  t.ok(waiting > 0, `${waiting} senders await recovery`);

  t.equal(senders.settled('0x000000000000000000000000000000000000dead'), null, 'an address absent from new_account_balances needs no recovery');
  t.equal(state.nextNonce('0x000000000000000000000000000000000000dead'), null, '… and has no pending nonce');
  t.equal(senders.unrecoveredCount, waiting, '… and nothing was recovered to say so');

  const user = canonical.transactions.find((x) => x.type !== '0x7e')!;
  const last = canonical.transactions.filter((x) => x.from === user.from).map((x) => BigInt(x.nonce)).reduce((a, b) => (a > b ? a : b));
  t.equal(state.nextNonce(user.from.toLowerCase()), null, 'reading the view recovers nothing: the sender is not known yet');
  t.equal(senders.unrecoveredCount, waiting, '… and nothing was recovered by the read');
  t.equal(senders.settled(user.from.toLowerCase()), null, 'a possible sender: recovered on this thread (no worker), no wait');
  t.equal(state.nextNonce(user.from.toLowerCase()), last + 1n, "then a sender's next nonce is its highest pending nonce + 1");
  t.equal(senders.unrecoveredCount, 0, 'answering it recovered the pending senders');
});

t.test('without new_account_balances (post-Azul) every nonce query recovers first', async (t) => {
  const { state, pipeline, senders } = makePipeline({ nativeDecode: false });
  for (const m of unichainMessages()) {
    const copy = structuredClone(m) as { metadata?: Record<string, unknown> };
    if (copy.metadata) delete copy.metadata.new_account_balances;
    feed(pipeline, copy);
  }
  t.ok(senders.unrecoveredCount > 0);
  t.equal(senders.settled('0x000000000000000000000000000000000000dead'), null);
  t.equal(state.nextNonce('0x000000000000000000000000000000000000dead'), null);
  t.equal(senders.unrecoveredCount, 0, 'no balances to rule the address out: senders recovered');
});

t.test("a stream receipt whose cumulative gas goes down gives no gasUsed (never a negative one); execution completes it", async (t) => {
  for (const broken of [false, true]) {
    const { state, pipeline } = makePipeline({ nativeDecode: false });
    const msgs = unichainMessages().map((m) => structuredClone(m)) as { metadata: { receipts: Record<string, Record<string, { cumulativeGasUsed: string }>> } }[];
    const [hash, tagged] = Object.entries(msgs[1]!.metadata.receipts)[0]!;
    if (broken) Object.values(tagged)[0]!.cumulativeGasUsed = '0x1';
    feed(pipeline, msgs[0]!);
    feed(pipeline, msgs[1]!);
    const rec = state.tx(hash);
    t.ok(rec !== undefined, 'the transaction is held');
    if (broken) t.equal(rec!.gasUsed, null, 'below the previous cumulative gas: gasUsed unknown');
    else t.ok(rec!.gasUsed !== null && rec!.gasUsed > 0n, `consistent: gasUsed ${rec!.gasUsed} from the cumulative gas`);
  }
});
