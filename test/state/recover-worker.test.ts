// Sender recovery on the worker thread: the same senders as recovery on the event loop (real signed transactions
// of every type), applied to pending state by the pipeline; a dead worker falls back to the event loop. The worker is
// for the JS decoder without the native core: with it, every frame's senders come from the core (the last tests here).
import t, { type Test } from 'tap';
import { RecoveryWorker } from '../../src/state/recover-worker.js';
import { addressOfPublicKey, recoverSender, recoveryInput } from '../../src/chain/sender.js';
import { decodeTransaction } from '../../src/chain/tx.js';
import { decodeFrame } from '../../src/ingest/frame.js';
import { IngestPipeline } from '../../src/ingest/pipeline.js';
import { silentLogger } from '../../src/log.js';
import { LAG_RESOLUTION_MS } from '../../src/metrics/metrics.js';
import { PendingState } from '../../src/state/pending.js';
import { loadJson, unichainMessages, unichainRpcBlock } from '../helpers/fixtures.js';
import { feed } from '../helpers/ingest.js';

const worker = RecoveryWorker.start(silentLogger, LAG_RESOLUTION_MS);
t.ok(worker, 'the worker starts here (native secp256k1 loads on a thread)');
t.teardown(() => worker?.close());

t.test('the worker recovers the same senders as the event loop', async (t) => {
  const chain = loadJson<{ blocks: { transactions: { raw: string; sender: string }[] }[] }>('execution-apis-derived/chain-transactions.json');
  const vectors = chain.blocks.flatMap((b) => b.transactions);
  const txs = vectors.map((v) => decodeTransaction(v.raw)).filter((r) => r.ok).map((r) => (r as { tx: Parameters<typeof recoveryInput>[0] }).tx);
  const inputs = txs.map((tx) => recoveryInput(tx));
  const signed = txs.filter((_, i) => inputs[i] !== null);
  t.ok(signed.length > 100, `${signed.length} signed transactions`);
  const pubs = await worker!.recover(inputs.filter((x) => x !== null));
  const fromWorker = pubs.map((p) => (p === null ? null : addressOfPublicKey(p)));
  const onLoop = signed.map((tx) => recoverSender(tx));
  t.same(fromWorker, onLoop, 'identical addresses, in order');
  t.same(fromWorker, vectors.filter((_, i) => inputs[i] !== null).map((v) => v.sender.toLowerCase()), 'and equal to the recorded senders');
  // A signature that does not recover comes back as null, not as an error for the batch.
  const bad = { ...inputs.find((x) => x !== null)!, sig: Buffer.alloc(64, 0xff) };
  t.same((await worker!.recover([bad])).map((p) => p === null), [true]);
});

t.test('the pipeline recovers senders on the worker and indexes their nonces', async (t) => {
  const state = new PendingState({ maxPendingBlocks: 8 });
  const pipeline = new IngestPipeline(state, { maxFrameBytes: 1 << 24, gapWindowFrames: 16, gapTimeoutMs: 1000, nativeDecode: false, recoveryWorker: worker }, silentLogger, null);
  const before = worker!.recovered;
  for (const m of unichainMessages()) feed(pipeline, m);
  await pipeline.senders.drained();
  t.equal(pipeline.senders.unrecoveredCount, 0, 'every sender recovered');
  const signed = (unichainRpcBlock() as { transactions: { type: string }[] }).transactions.filter((x) => x.type !== '0x7e').length;
  t.equal(worker!.recovered - before, signed, `the worker recovered all ${signed} signed transactions' senders`);
  const canonical = unichainRpcBlock() as { transactions: { hash: string; from: string; nonce: string; type: string }[] };
  const wrong = canonical.transactions.filter((x) => state.tx(x.hash)?.tx.from !== x.from.toLowerCase());
  t.same(wrong.map((x) => x.hash), [], 'each sender equals the canonical block\'s `from`');
  const user = canonical.transactions.find((x) => x.type !== '0x7e')!;
  const last = canonical.transactions.filter((x) => x.from === user.from).reduce((a, x) => (BigInt(x.nonce) > a ? BigInt(x.nonce) : a), 0n);
  t.equal(state.nextNonce(user.from.toLowerCase()), last + 1n, 'nonce index filled from the worker\'s answers');
});

t.test('a nonce query waits for the worker instead of recovering on the event loop', async (t) => {
  const state = new PendingState({ maxPendingBlocks: 8 });
  const pipeline = new IngestPipeline(state, { maxFrameBytes: 1 << 24, gapWindowFrames: 16, gapTimeoutMs: 1000, nativeDecode: false, recoveryWorker: worker }, silentLogger, null);
  const canonical = unichainRpcBlock() as { transactions: { from: string; nonce: string; type: string }[] };
  const user = canonical.transactions.find((x) => x.type !== '0x7e')!.from.toLowerCase();
  const before = worker!.recovered;
  for (const m of unichainMessages()) feed(pipeline, m);
  t.equal(pipeline.senders.settled('0x000000000000000000000000000000000000dead'), null, 'an address absent from the balances need not wait');
  const settled = pipeline.senders.settled(user);
  t.ok(settled instanceof Promise, 'a possible sender waits for the batch the worker holds');
  await settled;
  t.ok(worker!.recovered > before, 'the worker answered');
  t.equal(pipeline.senders.unrecoveredCount, 0, 'nothing left to recover');
  t.equal(pipeline.senders.settled(user), null, 'afterwards the answer is immediate');
  t.ok(state.nextNonce(user) !== null, 'and the nonce is known');
});

t.test('a dead worker: the pipeline falls back to recovery on the event loop', async (t) => {
  const doomed = RecoveryWorker.start(silentLogger, LAG_RESOLUTION_MS)!;
  await doomed.close(); // resolves after the thread exited (the exit handler marks it failed)
  t.equal(doomed.usable, false, 'a closed worker is not usable');
  const state = new PendingState({ maxPendingBlocks: 8 });
  const pipeline = new IngestPipeline(state, { maxFrameBytes: 1 << 24, gapWindowFrames: 16, gapTimeoutMs: 1000, nativeDecode: false, recoveryWorker: doomed }, silentLogger, null);
  for (const m of unichainMessages()) feed(pipeline, m);
  await pipeline.senders.drained();
  t.equal(pipeline.senders.unrecoveredCount, 0, 'senders recovered anyway');
});

t.test('a lazy worker starts at the first batch of a JS-decoded frame, not before, and recovers the same senders', async (t) => {
  const lazy = RecoveryWorker.lazy(silentLogger, LAG_RESOLUTION_MS);
  t.teardown(() => lazy.close());
  const workers = (): number => (process.report.getReport() as { workers: unknown[] }).workers.length;
  const before = workers();
  const state = new PendingState({ maxPendingBlocks: 8 });
  const pipeline = new IngestPipeline(state, { maxFrameBytes: 1 << 24, gapWindowFrames: 16, gapTimeoutMs: 1000, nativeDecode: false, recoveryWorker: lazy }, silentLogger, null);
  t.equal(lazy.started, false, 'not started with the pipeline');
  t.equal(lazy.loopLoad(), null, 'no thread load to report before it starts');
  for (const m of unichainMessages()) feed(pipeline, m);
  await pipeline.senders.drained();
  t.equal(lazy.started, true, 'started by the first batch');
  t.equal(workers(), before + 1, 'one more worker thread');
  const signed = (unichainRpcBlock() as { transactions: { type: string }[] }).transactions.filter((x) => x.type !== '0x7e').length;
  t.equal(lazy.recovered, signed, `it recovered all ${signed} signed transactions' senders`);
  const canonical = unichainRpcBlock() as { transactions: { hash: string; from: string }[] };
  t.same(canonical.transactions.filter((x) => state.tx(x.hash)?.tx.from !== x.from.toLowerCase()).map((x) => x.hash), [], "each sender equals the canonical block's `from`");
  const rec = state.tx(canonical.transactions.find((x) => x.from !== canonical.transactions[0]!.from)!.hash)!;
  t.equal(pipeline.senders.recoveredSender(rec.block, rec.position), rec.tx.from, 'a sender the worker recovered is one the engine may be given');
  await lazy.close();
  t.equal(lazy.usable, false, 'closed: not usable, and no thread starts again');
  await t.rejects(lazy.recover([]), { message: /closed/ }, 'a batch after close is refused');
});

/**
 * Feeds `frames` (the Unichain block's) to a pipeline with the native core and a lazy worker: every sender is recovered
 * by the core (the worker never starts), equals the canonical block's `from`, and may be handed to the engine.
 */
async function recoveredNatively(t: Test, frames: unknown[]): Promise<void> {
  const lazy = RecoveryWorker.lazy(silentLogger, LAG_RESOLUTION_MS);
  t.teardown(() => lazy.close());
  const state = new PendingState({ maxPendingBlocks: 8 });
  const pipeline = new IngestPipeline(state, { maxFrameBytes: 1 << 24, gapWindowFrames: 16, gapTimeoutMs: 1000, recoveryWorker: lazy }, silentLogger, null);
  for (const m of frames) feed(pipeline, m);
  await pipeline.senders.drained();
  t.equal(pipeline.senders.unrecoveredCount, 0, 'every sender recovered');
  t.equal(lazy.started, false, 'the worker thread was never started');
  const canonical = unichainRpcBlock() as { transactions: { hash: string; from: string; type: string }[] };
  t.same(canonical.transactions.filter((x) => state.tx(x.hash)?.tx.from !== x.from.toLowerCase()).map((x) => x.hash), [], "each sender equals the canonical block's `from`");
  const signed = canonical.transactions.filter((x) => x.type !== '0x7e');
  const deposit = canonical.transactions.find((x) => x.type === '0x7e')!;
  t.same(signed.filter((x) => pipeline.senders.recoveredSender(state.tx(x.hash)!.block, state.tx(x.hash)!.position) !== x.from.toLowerCase()).map((x) => x.hash), [], 'each natively recovered sender may be handed to the engine');
  t.equal(pipeline.senders.recoveredSender(state.tx(deposit.hash)!.block, state.tx(deposit.hash)!.position), null, 'a deposit\'s is never (its from is in its bytes)');
}

t.test('a lazy worker never starts for natively decoded frames (the native core recovers them)', (t) => recoveredNatively(t, unichainMessages()));

t.test('with the native core, a frame the JS decoder handled is recovered natively too: the worker never starts', async (t) => {
  // A non-empty diff.withdrawals: the native decoder leaves such a frame to the JS decoder (src/ingest/frame.ts), whose
  // flashblock comes without a native layout of its signed transactions.
  const frames = (unichainMessages() as { diff: { withdrawals?: unknown[] } }[]).map((m) => {
    m.diff.withdrawals = [{ index: '0x1', validatorIndex: '0x2', address: '0x' + '33'.repeat(20), amount: '0x4' }];
    return Buffer.from(JSON.stringify(m));
  });
  t.ok(
    frames.every((f) => {
      const r = decodeFrame(f, 1 << 24, false);
      return r.ok && r.senders === undefined;
    }),
    'each frame is decoded by the JS decoder',
  );
  await recoveredNatively(t, frames);
});
