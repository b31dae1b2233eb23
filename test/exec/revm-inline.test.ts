// Reads answered inline (RevmEngine.readNow, on the calling thread) are the reads the engine's threads give: the same
// results and the same errors; a read that would wait (an account not in memory) or run past its budget (a long
// loop, a heavily funded precompile call) is not answered inline and gets its answer from the threads instead.
// Two engines over the same node and blocks: one with the default inline budget, one with inline reads off. Reads
// pinned to an earlier flashblock (`at`) answer that flashblock's state. Of the reads asked in one turn of the event
// loop only the first runs inline, the others go to the read threads, whose answers the memo keeps as it keeps inline
// ones.
import t, { type Test } from 'tap';
import { EngineUnavailableError, RpcReplyError, type NowRead } from '../../src/exec/engine.js';
import { SINK } from '../../scripts/devnet/exec-blocks.js';
import { loadAddon } from '../../src/exec/addon.js';
import { DEFAULT_INLINE_READ_US, type RevmEngine } from '../../src/exec/revm.js';
import { anvilEngine, net } from '../helpers/exec-net.js';
import type { Anvil } from '../../scripts/devnet/anvil.js';

const engine = (t: Test, node: Anvil, inlineReadUs: number): RevmEngine => anvilEngine(t, node, { inlineReadUs });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A read's outcome as comparable text: its result, or its JSON-RPC error. */
async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    return `result ${String(await p)}`;
  } catch (e) {
    if (e instanceof RpcReplyError) return `error ${e.code} ${e.rpcMessage} ${e.data ?? ''}`;
    throw e;
  }
}

function nowOutcome(e: RevmEngine, r: NowRead): string | undefined {
  try {
    const v = e.readNow(r);
    return v === undefined ? undefined : `result ${v}`;
  } catch (err) {
    if (err instanceof RpcReplyError) return `error ${err.code} ${err.rpcMessage} ${err.data ?? ''}`;
    throw err;
  }
}

const LOOP = '0x' + '11'.repeat(20);
const REVERTS = '0x' + '22'.repeat(20);
const NUMRET = '0x' + '33'.repeat(20);
const overrides = {
  // JUMPDEST PUSH1 0 JUMP: a loop until the gas runs out.
  [LOOP]: { code: '0x5b600056' },
  // Error("no") as revert data.
  [REVERTS]: { code: '0x7f08c379a000000000000000000000000000000000000000000000000000000000600052602060045260026024527f6e6f00000000000000000000000000000000000000000000000000000000000060445260646000fd' },
  // NUMBER, returned.
  [NUMRET]: { code: '0x4360005260206000f3' },
};

t.test('inline reads answer as the read threads do; what cannot be answered inline goes to the threads', async (t) => {
  const { node, c, blocks } = await net(t, 1, 3, 6);
  const inline = engine(t, node, DEFAULT_INLINE_READ_US);
  const threads = engine(t, node, 0);
  const b = blocks[0]!;
  for (const e of [inline, threads]) {
    await e.start(b.number - 1);
    for (const fb of b.flashblocks) {
      const out = await e.applyFlashblock(fb);
      t.ok(out.ok && out.verified === true, `${b.number}/${fb.index} executed and verified`);
    }
  }
  t.equal(threads.readNow({ method: 'call', tx: { to: c.reader }, stateOverrides: null, blockOverrides: null }), undefined, 'inline reads off: readNow never answers');

  // Reads pinned to an earlier executed flashblock answer its state, not the newest (both engines alike).
  for (const e of [inline, threads]) {
    for (const fb of b.flashblocks) {
      t.equal(await e.getBalance(SINK, { number: b.number, index: fb.index }), b.sinkBalances[fb.index], `SINK's balance at ${b.number}/${fb.index}`);
    }
    await e.getBalance(SINK, { number: b.number + 5, index: 0 }).then(
      () => t.fail('a flashblock never executed answered'),
      (err: unknown) => t.ok(err instanceof EngineUnavailableError, 'a flashblock the engine does not hold: unavailable'),
    );
  }

  // Warm the inline engine's cache the way a first read does (the threads read the node), then compare.
  const reads: NowRead[] = [
    { method: 'call', tx: { to: c.reader }, stateOverrides: null, blockOverrides: null },
    { method: 'call', tx: { to: NUMRET }, stateOverrides: overrides, blockOverrides: null },
    { method: 'call', tx: { to: NUMRET }, stateOverrides: overrides, blockOverrides: { number: '0x99' } },
    { method: 'call', tx: { to: REVERTS }, stateOverrides: overrides, blockOverrides: null },
    { method: 'getCode', address: c.probe },
    { method: 'getStorageAt', address: c.probe, slot: '0x0' },
  ];
  const viaThreads = async (r: NowRead): Promise<string> =>
    r.method === 'call'
      ? outcome(threads.call(r.tx, r.stateOverrides ?? undefined, r.blockOverrides ?? undefined))
      : r.method === 'getCode'
        ? outcome(threads.getCode(r.address))
        : outcome(threads.getStorageAt(r.address, r.slot));
  for (const r of reads) {
    const want = await viaThreads(r);
    // The Promise form on the inline engine fills its cache from the node where it must; readNow then answers.
    const asPromise = await outcome(r.method === 'call' ? inline.call(r.tx, r.stateOverrides ?? undefined, r.blockOverrides ?? undefined) : r.method === 'getCode' ? inline.getCode(r.address) : inline.getStorageAt(r.address, r.slot));
    t.equal(asPromise, want, `${JSON.stringify(r).slice(0, 80)}: the Promise form answers as the threads`);
    t.equal(nowOutcome(inline, r), want, `${JSON.stringify(r).slice(0, 80)}: readNow answers at once, as the threads`);
  }
  t.match(await viaThreads(reads[3]!), /^error 3 execution reverted: no 0x08c379a0/, 'the revert carries its reason and data');

  // An account the engine has never read: not answered inline (it needs the node), then answered by the threads.
  const fresh = '0x' + '44'.repeat(20);
  t.equal(inline.readNow({ method: 'getCode', address: fresh }), undefined, 'an account not in memory is not answered inline');
  t.equal(await inline.getCode(fresh), '0x', 'the threads read it from the node');
  const inlineBefore = inline.status().reads.inline;
  t.equal(inline.readNow({ method: 'call', tx: { to: fresh }, stateOverrides: null, blockOverrides: null }), '0x', 'then it is in memory: a call to it is answered inline');
  t.equal(inline.status().reads.inline, inlineBefore + 1, 'run inline, not from the memo');

  // A loop until 50 M gas are spent takes far longer than the inline budget: not answered inline, same answer after.
  const loop: NowRead = { method: 'call', tx: { to: LOOP, gas: '0x2faf080' }, stateOverrides: overrides, blockOverrides: null };
  t.equal(nowOutcome(inline, loop), undefined, 'a call past the inline budget is not answered inline');
  const loopWant = await viaThreads(loop);
  t.match(loopWant, /^error -32000 out of gas/, 'the threads answer it: out of gas');
  t.equal(await outcome(inline.call(loop.tx, overrides)), loopWant, 'the Promise form gives the threads\' answer');

  // A precompile call given more gas than an inline read allows (its run cannot be interrupted): to the threads.
  const modexp: NowRead = { method: 'call', tx: { to: '0x0000000000000000000000000000000000000005', gas: '0x4c4b40', input: '0x' + '00'.repeat(96) }, stateOverrides: null, blockOverrides: null };
  t.equal(nowOutcome(inline, modexp), undefined, 'a heavily funded precompile call is not answered inline');
  t.equal(await outcome(inline.call(modexp.tx)), await viaThreads(modexp), 'and is answered as the threads answer it');
});

t.test('the read memo answers a read asked again until the next flashblock is executed, never an older state', async (t) => {
  const { node, c, blocks } = await net(t, 1, 3, 6);
  const e = engine(t, node, DEFAULT_INLINE_READ_US);
  const off = anvilEngine(t, node, { readMemoEntries: 0 });
  const b = blocks[0]!;
  t.ok(new Set(b.sinkBalances).size === b.sinkBalances.length, 'every flashblock changes what the reader returns');
  const read: NowRead = { method: 'call', tx: { to: c.reader }, stateOverrides: null, blockOverrides: null };
  const reverts: NowRead = { method: 'call', tx: { to: REVERTS }, stateOverrides: overrides, blockOverrides: null };
  const memoReads = (x: RevmEngine): number => x.status().reads.memo;
  for (const x of [e, off]) await x.start(b.number - 1);
  for (const fb of b.flashblocks) {
    for (const x of [e, off]) t.ok((await x.applyFlashblock(fb)).ok, `${b.number}/${fb.index} executed`);
    const want = b.sinkBalances[fb.index]!;
    // The first read of a flashblock may need the node (the threads); the next ones are answered in memory.
    t.equal(BigInt(await e.call(read.tx)), want, `${fb.index}: the Promise form answers this flashblock's state`);
    const before = memoReads(e);
    for (let i = 0; i < 3; i++) t.equal(BigInt(e.readNow(read)!), want, `${fb.index}: readNow ${i} answers this flashblock's state`);
    t.ok(memoReads(e) >= before + 2, `${fb.index}: the reads after the first came from the memo`);
    t.equal(BigInt(await e.call(read.tx)), want, `${fb.index}: so does the Promise form`);
    const first = nowOutcome(e, reverts) ?? (await outcome(e.call(reverts.tx, overrides)));
    t.match(first, /^error 3 execution reverted: no/, `${fb.index}: a revert`);
    t.equal(nowOutcome(e, reverts), first, `${fb.index}: a revert asked again is the same revert`);
    t.equal(BigInt(await off.call(read.tx)), want, `${fb.index}: memo off: the same answer`);
  }
  t.equal(memoReads(off), 0, '--execution-read-memo 0: no read answered from the memo');
});

t.test('reads asked in the same turn of the event loop: the first inline, the others on the read threads, whose answers feed the memo until the next flashblock', async (t) => {
  const { node, c, blocks } = await net(t, 1, 3, 6);
  // A budget (a wall-clock deadline) no read of this contract reaches even on a slow, busy machine: only the turn
  // decides where a read runs here.
  const e = anvilEngine(t, node, { inlineReadUs: 100_000 });
  const b = blocks[0]!;
  await e.start(b.number - 1);
  for (const fb of b.flashblocks.slice(0, 2)) t.ok((await e.applyFlashblock(fb)).ok, `${b.number}/${fb.index} executed`);
  // The reader returns SINK's balance whatever the calldata: every read below is its own memo key, one answer.
  const read = (n: number): NowRead & { method: 'call' } => ({ method: 'call', tx: { to: c.reader, data: '0x' + n.toString(16).padStart(8, '0') }, stateOverrides: null, blockOverrides: null });
  t.equal(BigInt(await e.call(read(0).tx)), b.sinkBalances[1], 'the state of the newest flashblock');
  const reads = (): { inline: number; threads: number; memo: number } => e.status().reads;
  await sleep(0);
  const before = reads();
  t.equal(BigInt(e.readNow(read(1))!), b.sinkBalances[1], 'the first read of a turn: answered at once');
  t.equal(reads().inline, before.inline + 1, '… inline');
  t.equal(e.readNow(read(2)), undefined, 'a second read in the same turn (it waited behind the first): not inline');
  const got = await e.call(read(2).tx);
  t.equal(BigInt(got), b.sinkBalances[1], 'the read threads answer it');
  t.same([reads().inline, reads().threads], [before.inline + 1, before.threads + 1], 'on the read threads');
  t.equal(e.readNow(read(2)), got, 'asked again: answered at once');
  t.equal(reads().memo, before.memo + 1, '… from the memo, which kept the threads\' answer');
  await sleep(0);
  t.equal(BigInt(e.readNow(read(3))!), b.sinkBalances[1], 'the next turn: inline again');
  t.equal(reads().inline, before.inline + 2);

  t.ok((await e.applyFlashblock(b.flashblocks[2]!)).ok, `${b.number}/2 executed`);
  t.not(b.sinkBalances[2], b.sinkBalances[1], 'the flashblock changes what the reader returns');
  t.equal(BigInt(await e.call(read(2).tx)), b.sinkBalances[2], 'after the next flashblock: its state, not the kept answer');
});

t.test('the reads a turn sends to the read threads go over in batches, each answered as if asked alone; none is left hanging when the engine stops', async (t) => {
  const { node, c, blocks } = await net(t, 1, 2, 6);
  // A budget no read of this contract reaches even on a slow, busy machine: only the turn decides where a read runs.
  const e = anvilEngine(t, node, { inlineReadUs: 100_000 });
  const b = blocks[0]!;
  await e.start(b.number - 1);
  for (const fb of b.flashblocks.slice(0, 2)) t.ok((await e.applyFlashblock(fb)).ok, `${b.number}/${fb.index} executed`);
  const call = (n: number): Promise<string> => outcome(e.call({ to: c.reader, data: '0x' + n.toString(16).padStart(8, '0') }));
  const want = `result 0x${b.sinkBalances[1]!.toString(16).padStart(64, '0')}`;
  t.equal(await call(0), want, 'the reader returns the newest flashblock\'s SINK balance');
  const addon = loadAddon();
  if (addon instanceof Error) throw addon;
  const proto = addon.Engine.prototype;
  const send = proto.read;
  const sent: number[] = [];
  proto.read = function (this: typeof proto, reqs: string, timeoutMs: number) {
    sent.push(reqs.split('\n').length);
    return send.call(this, reqs, timeoutMs);
  };
  t.teardown(() => {
    proto.read = send;
  });
  await sleep(0);
  const before = e.status().reads;
  // One turn: 20 distinct calls, a revert and a read pinned to a flashblock the engine no longer holds among them.
  const asked = [
    ...Array.from({ length: 10 }, (_, i) => call(100 + i)),
    outcome(e.call({ to: REVERTS }, overrides)),
    outcome(e.getBalance(SINK, { number: b.number + 7, index: 0 })).catch((err: unknown) => (err instanceof EngineUnavailableError ? 'unavailable' : String(err))),
    ...Array.from({ length: 10 }, (_, i) => call(200 + i)),
  ];
  const got = await Promise.all(asked);
  t.same(got.slice(0, 10), Array(10).fill(want), 'calls before the others: each its own answer');
  t.match(got[10], /^error 3 execution reverted: no 0x08c379a0/, 'the revert in the batch: its own error');
  t.equal(got[11], 'unavailable', 'the read pinned to a flashblock no longer held: unavailable, alone');
  t.same(got.slice(12), Array(10).fill(want), 'calls after them: each its own answer');
  const after = e.status().reads;
  t.equal(after.inline - before.inline, 1, 'the first read of the turn ran inline');
  t.equal(after.threads - before.threads, 21, 'the other 21 on the read threads');
  t.same(sent, [8, 8, 5], 'in batches of at most 8, the rest at the end of the turn');

  const pending = [call(300), call(301), call(302)].map((p) => p.catch((err: unknown) => (err instanceof EngineUnavailableError ? 'unavailable' : String(err))));
  await e.stop();
  const [first, ...waiting] = await Promise.all(pending);
  t.equal(first, want, 'the first read of the turn: answered inline before the stop');
  t.same(waiting, ['unavailable', 'unavailable'], 'the reads waiting for their batch when the engine stops: unavailable, not left hanging');
});

t.test('a read on the read threads past its timeout stops and answers -32000, and the thread goes on to the next read', async (t) => {
  const { node, c, blocks } = await net(t, 1, 1, 6);
  // Roomy for the reads after it on a busy machine (the timeout counts a read's wait for a thread), far below the
  // seconds the simulation below needs.
  const e = anvilEngine(t, node, { inlineReadUs: 0, readTimeoutMs: 1000 });
  const b = blocks[0]!;
  await e.start(b.number - 1);
  for (const fb of b.flashblocks) t.ok((await e.applyFlashblock(fb)).ok, `${b.number}/${fb.index} executed`);
  // 200 blocks of a call looping until its block's gas runs out: seconds of EVM without the timeout.
  const loops = Array.from({ length: 200 }, (_, i) => ({ ...(i === 0 ? { stateOverrides: overrides } : {}), calls: [{ to: LOOP }] }));
  const timeouts = e.status().readTimeouts;
  t.equal(await outcome(e.simulateV1({ blockStateCalls: loops })), 'error -32000 execution aborted (timeout = 1s) ', 'eth_simulateV1: the timeout');
  t.equal(e.status().readTimeouts - timeouts, 1, 'counted (flashblocksd_execution_read_timeouts_total)');
  t.equal(await outcome(e.call({ to: NUMRET }, overrides)), `result 0x${b.number.toString(16).padStart(64, '0')}`, 'the next read is answered');
  t.equal(await outcome(e.call({ to: c.reader, data: '0x00000000' })), `result 0x${b.sinkBalances.at(-1)!.toString(16).padStart(64, '0')}`, 'and one that reads the state');
});
