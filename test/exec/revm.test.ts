// The native execution engine (RevmEngine over the Rust core) against a real anvil node: flashblocks of real signed
// transactions, every one verified against its diff.receipts_root; the env opcodes inside flashblocks 1…N are the
// block's own (BLOCKHASH of a parent the node does not show yet included); node reads per flashblock do not grow
// with the block; a forced panic is an outcome and a restart, never a throw; an unreachable node is a clear error.
import t, { type Test } from 'tap';
import { toHex } from 'viem';
import type { Anvil } from '../../scripts/devnet/anvil.js';
import { SINK, type BuiltBlock, type ExecContracts } from '../../scripts/devnet/exec-blocks.js';
import { EngineUnavailableError, txBatch, type ApplyOutcome, type ExecutionEngine } from '../../src/exec/engine.js';
import { RevmEngine } from '../../src/exec/revm.js';
import { net, nodeCall } from '../helpers/exec-net.js';
import { startNodeFront, type NodeFront } from '../helpers/node-front.js';

/** A native engine reading `node` through a front the test can take down or make hide blocks. */
async function engineFor(t: Test, node: Anvil): Promise<{ e: RevmEngine; front: NodeFront }> {
  const front = await startNodeFront(node.url);
  t.teardown(() => front.close());
  const e = new RevmEngine({ node: { url: front.url }, specAt: () => 'isthmus', nodeTimeoutMs: 3000 });
  t.teardown(() => e.stop());
  return { e, front };
}

/** Applies `fb` and fails the test (with the engine's message) unless it executed and verified. */
async function applyVerified(t: Test, e: ExecutionEngine, b: BuiltBlock, i: number): Promise<ApplyOutcome> {
  const out = await e.applyFlashblock(b.flashblocks[i]!);
  t.ok(out.ok && out.verified === true, `${b.number}/${i} executed and its receipts root verified${out.ok ? '' : `: ${out.reason}: ${out.message}`}`);
  if (out.ok) t.equal(out.receipts.length, b.flashblocks[i]!.txs.bounds.length - 1, `${b.number}/${i} one receipt per tx`);
  return out;
}

/** The probe's slots: NUMBER, TIMESTAMP, BASEFEE, COINBASE, BLOCKHASH(NUMBER-1), PREVRANDAO. */
const PROBE_SLOTS = ['NUMBER', 'TIMESTAMP', 'BASEFEE', 'COINBASE', 'BLOCKHASH(NUMBER-1)', 'PREVRANDAO'] as const;

/** Every probe slot read at pending equals what the node stored in the canonical block (the env the block ran with). */
async function envExact(t: Test, e: ExecutionEngine, node: Anvil, c: ExecContracts, b: BuiltBlock, i: number): Promise<void> {
  for (let k = 0; k < PROBE_SLOTS.length; k++) {
    const want = await nodeCall(node, 'eth_getStorageAt', [c.probe, toHex(k), toHex(b.number)]);
    t.equal(await e.getStorageAt(c.probe, toHex(k)), want, `${b.number}/${i}: ${PROBE_SLOTS[k]} is the block's own`);
  }
}

t.test("every flashblock verifies against diff.receipts_root; NUMBER, TIMESTAMP, BASEFEE, COINBASE, PREVRANDAO and BLOCKHASH(NUMBER-1) are the block's own", async (t) => {
  const { node, c, blocks } = await net(t, 2, 4, 12);
  const { e } = await engineFor(t, node);
  await e.start(blocks[0]!.number - 1);
  for (const [k, b] of blocks.entries()) {
    // The first block on the node's state; the second on the engine's own execution of the first (then canonical).
    if (k === 1) e.noteCanonical(blocks[0]!.number);
    for (let i = 0; i < b.flashblocks.length; i++) {
      await applyVerified(t, e, b, i);
      await envExact(t, e, node, c, b, i);
      t.equal(BigInt(await e.call({ to: c.reader })), b.sinkBalances[i], `${b.number}/${i}: eth_call at pending sees the flashblock`);
      t.equal(await e.getBalance(SINK), b.sinkBalances[i], `${b.number}/${i}: eth_getBalance`);
    }
  }
  t.equal(blocks[0]!.env.prevRandao, await nodeCall(node, 'eth_getStorageAt', [c.probe, '0x5', toHex(blocks[0]!.number)]), "the probe stored the block's mixHash: PREVRANDAO came from base");
  const last = blocks[blocks.length - 1]!;
  const tag = toHex(last.number);
  const who = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8';
  t.equal(await e.getCode(c.probe), await nodeCall(node, 'eth_getCode', [c.probe, tag]), 'eth_getCode');
  t.equal(await e.getTransactionCount(who), BigInt(await nodeCall(node, 'eth_getTransactionCount', [who, tag])), 'eth_getTransactionCount');
  t.equal(await e.getBalance(who), BigInt(await nodeCall(node, 'eth_getBalance', [who, tag])), 'eth_getBalance');
  const numret = '0x' + '77'.repeat(20);
  const code = { [numret]: { code: '0x4360005260206000f3' } };
  t.equal(BigInt(await e.call({ to: numret }, code)), BigInt(last.number), 'NUMBER in eth_call is the pending block');
  t.equal(BigInt(await e.call({ to: numret }, code, { number: '0x99' })), 0x99n, 'block overrides win');
  const st = e.status();
  t.equal(st.verified, 8, 'every flashblock counted as verified');
  t.equal(st.divergences, 0, 'no divergence');
  t.ok((st.cacheBytes ?? 0) > 0, `the state cache's bytes are reported (${st.cacheBytes})`);
  t.equal(st.cacheDrops, 0, 'the cache stayed within its bound');
});

t.test('a state cache over its bound is dropped whole and counted; execution stays exact, reading the node again', async (t) => {
  const { node, c, blocks } = await net(t, 1, 4, 12);
  const front = await startNodeFront(node.url);
  t.teardown(() => front.close());
  const e = new RevmEngine({ node: { url: front.url }, specAt: () => 'isthmus', nodeTimeoutMs: 3000, cacheCapBytes: 1 });
  t.teardown(() => e.stop());
  const b = blocks[0]!;
  await e.start(b.number - 1);
  for (let i = 0; i < b.flashblocks.length; i++) {
    await applyVerified(t, e, b, i);
    t.equal(BigInt(await e.call({ to: c.reader })), b.sinkBalances[i], `${b.number}/${i}: eth_call at pending sees the flashblock`);
  }
  t.ok(e.status().cacheDrops > 0, `drops counted (${e.status().cacheDrops})`);
});

t.test('flashblocks sent without waiting are applied in call order, each verified against its own root', async (t) => {
  const { node, c, blocks } = await net(t, 2, 4, 10);
  const { e } = await engineFor(t, node);
  await e.start(blocks[0]!.number - 1);
  const all = blocks.flatMap((b) => b.flashblocks);
  const outs = await Promise.all(all.map((fb) => e.applyFlashblock(fb)));
  outs.forEach((o, i) => {
    t.ok(o.ok && o.verified === true, `flashblock ${all[i]!.blockNumber}/${all[i]!.index} verified`);
    t.equal(o.ok ? o.receipts.length : -1, all[i]!.txs.bounds.length - 1, 'its own receipts');
  });
  const last = blocks[1]!;
  t.equal(BigInt(await e.getStorageAt(c.probe, '0x0')), BigInt(last.number), 'NUMBER exact');
  t.equal(BigInt(await e.call({ to: c.reader })), last.sinkBalances[last.sinkBalances.length - 1], 'newest state visible');
  t.equal(e.status().index, 3, 'the last flashblock is the visible one');
});

t.test("a block the engine executed only in part is not built on once the node has it: the cache is dropped, the next block runs on the node's state", async (t) => {
  const { node, c, blocks } = await net(t, 2, 3, 8);
  const { e } = await engineFor(t, node);
  const [b1, b2] = [blocks[0]!, blocks[1]!];
  await e.start(b1.number - 1);
  t.ok((await e.applyFlashblock(b1.flashblocks[0]!)).ok, 'only index 0 of the first block is seen');
  e.noteCanonical(b1.number);
  for (let i = 0; i < b2.flashblocks.length; i++) await applyVerified(t, e, b2, i);
  t.equal(BigInt(await e.call({ to: c.reader })), b2.sinkBalances[b2.sinkBalances.length - 1], 'state includes the whole first block');
  t.equal(e.status().canonical, b1.number, 'settled at the node\'s head');
});

t.test('a block whose parent the node shows late is still exact: BLOCKHASH(parent) comes from base.parent_hash', async (t) => {
  const { node, c, blocks } = await net(t, 3, 3, 8);
  const [b0, b1, b2] = [blocks[0]!, blocks[1]!, blocks[2]!];
  // The node shows neither b0 nor b1 to the engine: b1 is built on the engine's own, not yet canonical, b0.
  const { e, front: link } = await engineFor(t, node);
  for (const n of [b0.number, b1.number]) link.hidden.add(n);
  await e.start(b0.number - 1);
  for (let i = 0; i < b0.flashblocks.length; i++) await applyVerified(t, e, b0, i);
  for (let i = 0; i < b1.flashblocks.length; i++) {
    await applyVerified(t, e, b1, i);
    await envExact(t, e, node, c, b1, i);
  }
  t.equal(await e.getStorageAt(c.probe, '0x4'), b1.env.parentHash, "BLOCKHASH(NUMBER-1) is base.parent_hash, which the node did not show");
  // The node catches up: both settle (kept: what was executed is what the chain has), and b2 builds on them.
  link.hidden.clear();
  e.noteCanonical(b1.number);
  for (let i = 0; i < b2.flashblocks.length; i++) {
    await applyVerified(t, e, b2, i);
    await envExact(t, e, node, c, b2, i);
  }
  t.equal(e.status().divergences, 0, 'no divergence');
  t.equal(e.status().canonical, b1.number, 'settled up to the head the node showed');
});

t.test('cost O(flashblock): node reads per flashblock do not grow with the block, and fall once the cache is warm', async (t) => {
  const { node, blocks } = await net(t, 2, 8, 10);
  const { e } = await engineFor(t, node);
  await e.start(blocks[0]!.number - 1);
  const perBlock: number[][] = [];
  for (const [k, b] of blocks.entries()) {
    if (k === 1) e.noteCanonical(blocks[0]!.number);
    const reads: number[] = [];
    for (let i = 0; i < b.flashblocks.length; i++) {
      const before = e.status().nodeReads!;
      await applyVerified(t, e, b, i);
      reads.push(e.status().nodeReads! - before);
    }
    perBlock.push(reads);
  }
  const [first, second] = [perBlock[0]!, perBlock[1]!];
  t.comment(`node reads per flashblock: block 1 ${first.join(' ')}, block 2 ${second.join(' ')}`);
  // Each flashblock reads only what its own transactions touch first: later flashblocks of a block (same senders,
  // already cached) read no more than the early ones, whatever the block has executed so far.
  const late = (rs: number[]): number => Math.max(...rs.slice(rs.length / 2));
  const early = (rs: number[]): number => Math.max(...rs.slice(0, rs.length / 2));
  t.ok(late(first) <= early(first), `block 1: the second half's flashblocks read at most the first half's (${late(first)} ≤ ${early(first)})`);
  t.ok(late(second) <= early(second), `block 2: the same (${late(second)} ≤ ${early(second)})`);
  const sum = (rs: number[]): number => rs.reduce((a, b) => a + b, 0);
  t.ok(sum(second) < sum(first), `the cache survives the settled block: block 2 read ${sum(second)} < block 1's ${sum(first)}`);
});

/** Every deposit receipt the engine holds for `b` carries the depositNonce the node committed (anvil: the one after). */
async function depositNoncesAgree(t: Test, e: RevmEngine, node: Anvil, b: BuiltBlock, when: string): Promise<void> {
  const canon = (await nodeCall(node, 'eth_getBlockReceipts', [toHex(b.number)])) as unknown as { transactionHash: string; type: string; depositNonce?: string }[];
  const deposits = canon.filter((r) => r.type.toLowerCase() === '0x7e');
  t.ok(deposits.length > 0, `${b.number} holds deposits (${deposits.length})`);
  const got = deposits.map((r) => {
    const x = e.receipt(r.transactionHash.toLowerCase());
    return x === null ? 'not held' : String(e.chainDepositNonce(x));
  });
  t.same(got, deposits.map((r) => String(BigInt(r.depositNonce!))), `${when}: deposit nonces as the node commits them`);
}

t.test('a forced panic: an E_PANIC outcome, never a throw; the engine restarts with the held blocks rebuilt and goes on', async (t) => {
  const { node, c, blocks } = await net(t, 3, 3, 8);
  const [b0, b1, b2] = [blocks[0]!, blocks[1]!, blocks[2]!];
  const { e } = await engineFor(t, node);
  await e.start(b0.number - 1);
  for (let i = 0; i < b0.flashblocks.length; i++) await applyVerified(t, e, b0, i);
  await applyVerified(t, e, b1, 0);
  await depositNoncesAgree(t, e, node, b0, 'before the panic');
  e.panicNextApply();
  const out = await e.applyFlashblock(b1.flashblocks[1]!);
  t.equal(out.ok, false, 'the panicking apply is an outcome, not a throw');
  if (!out.ok) {
    t.equal(out.reason, 'panic', 'reason panic');
    t.match(out.message, /E_PANIC|panic/, `it says so: ${out.message}`);
  }
  const st = e.status();
  t.equal(st.restarts, 1, 'restart counted');
  t.equal(st.ready, true, 'ready again');
  t.match(st.lastError ?? '', /panic/, `lastError: ${st.lastError}`);
  // The held block below the failed one was replayed on the new engine: reads answer its state, never b1's half.
  t.equal(BigInt(await e.call({ to: c.reader })), b0.sinkBalances[b0.sinkBalances.length - 1], "reads answer from the rebuilt state (b0's last flashblock)");
  t.equal(await e.getStorageAt(c.probe, '0x0'), await nodeCall(node, 'eth_getStorageAt', [c.probe, '0x0', toHex(b0.number)]), 'and its env');
  // The convention learned before is kept across engines (a new one starts from op-geth's until a root tells it).
  await depositNoncesAgree(t, e, node, b0, 'after the restart');
  const refused = await e.applyFlashblock(b1.flashblocks[2]!);
  t.ok(!refused.ok && refused.reason === 'not_next', 'the failed block takes no more flashblocks (reads at it fall back)');
  // The node has b1: the next block builds on it and verifies.
  e.noteCanonical(b1.number);
  for (let i = 0; i < b2.flashblocks.length; i++) await applyVerified(t, e, b2, i);
  t.equal(BigInt(await e.call({ to: c.reader })), b2.sinkBalances[b2.sinkBalances.length - 1], 'state after the restart is exact');
  await depositNoncesAgree(t, e, node, b2, 'a block executed after the restart');
  t.equal(e.status().restarts, 1, 'one restart in all');
});

t.test('node unreachable: start rejects with a clear error; an apply that needs the node is a node_error outcome, never a throw; recovery when it is back', async (t) => {
  const dead = new RevmEngine({ node: { url: 'http://user:secret@127.0.0.1:9/key123' }, specAt: () => 'isthmus' });
  t.teardown(() => dead.stop());
  const why = await dead.start(5).then(() => 'started', (e: unknown) => (e as Error).message);
  t.match(why, /node unreachable \(ECONNREFUSED\)/, `start rejects and says why: ${why}`);
  t.notMatch(why, /secret|key123|127\.0\.0\.1/, 'without the URL');
  await dead.getCode('0x' + '11'.repeat(20)).then(
    () => t.fail('answered without an engine'),
    (err: unknown) => t.ok(err instanceof EngineUnavailableError, 'reads refused'),
  );
  const never = await dead.applyFlashblock({ blockNumber: 6, index: 0, env: { number: 6, timestamp: 1, baseFeePerGas: 1n, feeRecipient: '0x' + '00'.repeat(20), gasLimit: 30_000_000n, prevRandao: '0x' + '00'.repeat(32), parentHash: '0x' + '00'.repeat(32) }, txs: txBatch([]), receiptsRoot: null });
  t.ok(!never.ok && never.reason === 'engine_down', 'apply on an engine that never started: engine_down');

  const { node, c, blocks } = await net(t, 2, 3, 8);
  const [b0, b1] = [blocks[0]!, blocks[1]!];
  const { e, front: link } = await engineFor(t, node);
  await e.start(b0.number - 1);
  link.down = true;
  // Index 0 reads its senders, recipients and the L1 block contract from the node: cold, the node gone.
  const out = await e.applyFlashblock(b0.flashblocks[0]!);
  t.equal(out.ok, false, 'not executed');
  if (!out.ok) {
    t.equal(out.reason, 'node_error', 'reason node_error');
    t.match(out.message, /node/i, `a clear message: ${out.message}`);
    t.notMatch(out.message, /127\.0\.0\.1|:\/\//, 'without the URL');
  }
  t.match(e.status().lastError ?? '', /node|ECONNREFUSED|502/i, `lastError: ${e.status().lastError}`);
  t.equal(e.status().restarts, 0, 'no restart: a node outage is not a crash');
  // The node is back: once it has b0, b1 builds on it and verifies.
  link.down = false;
  e.noteCanonical(b0.number);
  for (let i = 0; i < b1.flashblocks.length; i++) await applyVerified(t, e, b1, i);
  t.equal(BigInt(await e.call({ to: c.reader })), b1.sinkBalances[b1.sinkBalances.length - 1], 'served from executed state again');
});
