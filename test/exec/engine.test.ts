// The anvil execution engine against a real anvil node: executed receipts roots equal every flashblock's
// diff.receipts_root, NUMBER inside flashblocks 1…N is the block's own number, a killed engine is restarted and
// rebuilt without serving a wrong answer, an unreachable node gives a clear error.
import { execFileSync } from 'node:child_process';
import t, { type Test } from 'tap';
import { toHex } from 'viem';
import type { Anvil } from '../../scripts/devnet/anvil.js';
import { devAccounts } from '../../scripts/devnet/sequencer.js';
import { SINK } from '../../scripts/devnet/exec-blocks.js';
import { AnvilEngine, type ExecStrategy } from '../../src/exec/anvil.js';
import { EngineUnavailableError, EngineUnsupportedError } from '../../src/exec/engine.js';
import { net, nodeCall } from '../helpers/exec-net.js';

/** pids of this process's children that are anvils forked by an engine. */
function forkedChildren(): number[] {
  try {
    return execFileSync('pgrep', ['-P', String(process.pid), '-f', 'fork-block-number'], { encoding: 'utf8' }).trim().split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function engineFor(t: Test, node: Anvil, strategy: ExecStrategy): AnvilEngine {
  const e = new AnvilEngine({ nodeRpcUrl: node.url, hardfork: 'isthmus', strategy, restartBackoffMs: 50 });
  t.teardown(() => e.stop());
  return e;
}

for (const strategy of ['rebuild', 'hybrid'] as const) {
  t.test(`${strategy}: every flashblock verifies against diff.receipts_root and NUMBER is the block's own`, async (t) => {
    const { node, c, blocks } = await net(t, 2, 4, 12);
    const e = engineFor(t, node, strategy);
    await e.start(blocks[0]!.number - 1);
    for (const b of blocks) {
      for (let i = 0; i < b.flashblocks.length; i++) {
        const fb = b.flashblocks[i]!;
        const out = await e.applyFlashblock(fb);
        if (!out.ok) {
          t.fail(`${b.number}/${i}: ${out.message}`);
          return;
        }
        t.equal(out.verified, true, `${b.number}/${i} receipts root verified`);
        t.equal(out.receipts.length, fb.txs.length, `${b.number}/${i} one receipt per tx`);
        t.equal(BigInt(await e.getStorageAt(c.probe, '0x0')), BigInt(b.number), `${b.number}/${i} NUMBER stored by the probe`);
        t.equal(BigInt(await e.getStorageAt(c.probe, '0x1')), BigInt(b.env.timestamp), `${b.number}/${i} TIMESTAMP`);
        t.equal(BigInt(await e.getStorageAt(c.probe, '0x2')), b.env.baseFeePerGas, `${b.number}/${i} BASEFEE`);
        t.equal(BigInt(await e.call({ to: c.reader })), b.sinkBalances[i], `${b.number}/${i} eth_call at pending sees the flashblock`);
        t.equal(await e.getBalance(SINK), b.sinkBalances[i], `${b.number}/${i} balance`);
      }
      // The node's own answers for the sealed block equal what the engine served for its last flashblock.
      const nodeNumber = await fetch(node.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getStorageAt', params: [c.probe, '0x0', toHex(b.number)] }),
      }).then((r) => r.json() as Promise<{ result: string }>);
      t.equal(BigInt(nodeNumber.result), BigInt(b.number), 'the node stored the same NUMBER');
    }
    // Reads at pending against the node's answers for the sealed last block (both anvil: equal when exact).
    const last = blocks[blocks.length - 1]!;
    const tag = toHex(last.number);
    const who = devAccounts(3)[2]!.address;
    t.equal(await e.getCode(c.probe), await nodeCall(node, 'eth_getCode', [c.probe, tag]), 'eth_getCode');
    t.equal(await e.getTransactionCount(who), BigInt(await nodeCall(node, 'eth_getTransactionCount', [who, tag])), 'eth_getTransactionCount');
    t.equal(await e.getBalance(who), BigInt(await nodeCall(node, 'eth_getBalance', [who, tag])), 'eth_getBalance');
    const req = { from: who, to: c.refund };
    t.equal(await e.estimateGas(req), BigInt(await nodeCall(node, 'eth_estimateGas', [req, tag])), 'eth_estimateGas');
    const al = await e.createAccessList(req);
    t.ok(Array.isArray(al.accessList) && al.accessList.length > 0, 'eth_createAccessList lists the refund contract');
    // Calls run with the pending block's env; geth-style overrides pass through.
    const numret = '0x' + '77'.repeat(20);
    const code = { [numret]: { code: '0x4360005260206000f3' } };
    t.equal(BigInt(await e.call({ to: numret }, code)), BigInt(last.number), 'NUMBER in eth_call is the pending block');
    t.equal(BigInt(await e.call({ to: numret }, code, { number: '0x99' })), 0x99n, 'block overrides win');
    const randao = '0x' + '88'.repeat(20);
    const randaoCode = { [randao]: { code: '0x4460005260206000f3' } };
    t.equal(await e.call({ to: randao }, randaoCode), last.env.prevRandao, 'PREVRANDAO in eth_call is the pending block\'s prev_randao');
    const st = e.status();
    t.equal(st.divergences, 0, 'no divergence counted');
    t.equal(st.verified, 8, 'every flashblock counted as verified');
    await e.getProof().then(
      () => t.fail('eth_getProof answered'),
      (err: unknown) => t.ok(err instanceof EngineUnsupportedError, 'eth_getProof at pending is refused, not forwarded'),
    );
  });
}

t.test('per-flashblock (the inexact baseline): flashblock i > 0 sees NUMBER = N + i and fails the receipts root', async (t) => {
  const { node, c, blocks } = await net(t, 1, 3, 8);
  const e = engineFor(t, node, 'per-flashblock');
  const b = blocks[0]!;
  await e.start(b.number - 1);
  const out0 = await e.applyFlashblock(b.flashblocks[0]!);
  t.ok(out0.ok && out0.verified === true, 'index 0 is exact');
  const out1 = await e.applyFlashblock(b.flashblocks[1]!);
  t.ok(out1.ok, 'applied');
  t.equal(BigInt(await e.getStorageAt(c.probe, '0x0')), BigInt(b.number + 1), 'NUMBER is one too high in flashblock 1');
  t.ok(out1.ok && out1.verified === false, 'the receipts root check catches it (the probe rewrote its slot)');
  t.equal(e.status().divergences, 1, 'divergence counted');
});

t.test('engine killed mid-block: restarted, state rebuilt, no wrong answer in between', async (t) => {
  const { node, c, blocks } = await net(t, 1, 4, 10);
  const e = engineFor(t, node, 'hybrid');
  const b = blocks[0]!;
  await e.start(b.number - 1);
  for (const i of [0, 1]) t.ok((await e.applyFlashblock(b.flashblocks[i]!)).ok, `flashblock ${i} applied`);
  const pid = e.status().pid;
  t.ok(pid !== null && pid > 0, 'engine pid known');
  process.kill(pid!, 'SIGKILL');
  // Until the restart has replayed the block, reads are refused; every answer that is given is the right one.
  let refused = 0;
  let answered = 0;
  for (let k = 0; k < 400; k++) {
    try {
      const v = BigInt(await e.call({ to: c.reader }));
      t.equal(v, b.sinkBalances[1], 'an answer given is the post-flashblock-1 state');
      answered++;
      if (refused > 0 && e.status().pid !== pid) break;
    } catch (err) {
      t.type(err, EngineUnavailableError, 'refused with EngineUnavailableError');
      refused++;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  t.ok(refused > 0, `reads were refused while the engine restarted (${refused})`);
  t.not(e.status().pid, pid, 'a new engine process serves');
  t.equal(e.status().restarts, 1, 'restart counted');
  t.ok(answered > 0, 'reads answered again after the restart');
  t.equal(BigInt(await e.getStorageAt(c.probe, '0x0')), BigInt(b.number), 'rebuilt state has the block number');
  const out = await e.applyFlashblock(b.flashblocks[2]!);
  t.ok(out.ok && out.verified === true, 'the next flashblock applies and verifies on the rebuilt engine');
  t.equal(BigInt(await e.call({ to: c.reader })), b.sinkBalances[2], 'and is visible');
});

t.test('node unreachable: start fails with a clear error; a crash with the node gone keeps refusing, never throws out', async (t) => {
  const dead = new AnvilEngine({ nodeRpcUrl: 'http://127.0.0.1:9', hardfork: 'isthmus', strategy: 'hybrid', startTimeoutMs: 3000 });
  t.teardown(() => dead.stop());
  await t.rejects(dead.start(5), /execution engine: .*(unreachable|anvil exited|did not start)/, 'start rejects and says why');
  await dead.getCode('0x' + '11'.repeat(20)).then(
    () => t.fail('answered without an engine'),
    (err: unknown) => t.ok(err instanceof EngineUnavailableError, 'reads refused'),
  );

  const { node, c, blocks } = await net(t, 1, 2, 6);
  const e = new AnvilEngine({ nodeRpcUrl: node.url, hardfork: 'isthmus', strategy: 'hybrid', restartBackoffMs: 50, restartBackoffMaxMs: 200, startTimeoutMs: 3000 });
  t.teardown(() => e.stop());
  const b = blocks[0]!;
  await e.start(b.number - 1);
  t.ok((await e.applyFlashblock(b.flashblocks[0]!)).ok, 'applied while the node is up');
  t.equal(BigInt(await e.call({ to: c.reader })), b.sinkBalances[0], 'served');
  await node.stop();
  process.kill(e.status().pid!, 'SIGKILL');
  await new Promise((r) => setTimeout(r, 600));
  await e.call({ to: c.reader }).then(
    () => t.fail('answered while the engine is down'),
    (err: unknown) => t.ok(err instanceof EngineUnavailableError, 'reads refused while the node is gone'),
  );
  const out = await e.applyFlashblock(b.flashblocks[1]!);
  t.equal(out.ok, false, 'apply reports a value, does not throw');
  const st = e.status();
  t.equal(st.ready, false, 'not ready');
  t.match(st.lastError ?? '', /unreachable|anvil exited|did not start/, `lastError says why: ${st.lastError}`);
});

t.test('flashblocks sent without waiting are applied together and each verified against its own root', async (t) => {
  const { node, c, blocks } = await net(t, 2, 4, 10);
  const e = engineFor(t, node, 'hybrid');
  await e.start(blocks[0]!.number - 1);
  const all = blocks.flatMap((b) => b.flashblocks);
  const outs = await Promise.all(all.map((fb) => e.applyFlashblock(fb)));
  outs.forEach((o, i) => {
    t.ok(o.ok && o.verified === true, `flashblock ${all[i]!.blockNumber}/${all[i]!.index} verified`);
    t.equal(o.ok ? o.receipts.length : -1, all[i]!.txs.length, 'its own receipts');
  });
  const last = blocks[1]!;
  t.equal(BigInt(await e.getStorageAt(c.probe, '0x0')), BigInt(last.number), 'NUMBER exact');
  t.equal(BigInt(await e.call({ to: c.reader })), last.sinkBalances[last.sinkBalances.length - 1], 'newest state visible');
  t.equal(e.status().index, 3, 'the last flashblock is the visible one');
});

t.test('a block the engine executed only in part is not built on once the node has it: re-forked from the node', async (t) => {
  const { node, c, blocks } = await net(t, 2, 3, 8);
  const e = engineFor(t, node, 'hybrid');
  const [b1, b2] = [blocks[0]!, blocks[1]!];
  await e.start(b1.number - 1);
  t.ok((await e.applyFlashblock(b1.flashblocks[0]!)).ok, 'only index 0 of the first block is seen');
  e.noteCanonical(b1.number);
  for (let i = 0; i < b2.flashblocks.length; i++) {
    const out = await e.applyFlashblock(b2.flashblocks[i]!);
    t.ok(out.ok && out.verified === true, `next block ${i} verified on the node's state`);
  }
  t.equal(BigInt(await e.call({ to: c.reader })), b2.sinkBalances[b2.sinkBalances.length - 1], 'state includes the whole first block');
  t.ok(e.status().rebuilds >= 1, 'the re-fork is counted');
});

for (const strategy of ['rebuild', 'hybrid'] as const) {
  t.test(`${strategy}: BLOCKHASH of the canonical parent inside a pending block is the node's, in index 0 and later flashblocks`, async (t) => {
    const { node, c, blocks } = await net(t, 3, 3, 8);
    const e = engineFor(t, node, strategy);
    await e.start(blocks[0]!.number - 1);
    for (const fb of blocks[0]!.flashblocks) t.ok((await e.applyFlashblock(fb)).ok, `${fb.blockNumber}/${fb.index} applied`);
    // Two blocks on top of blocks the engine executed itself: the node reports each parent canonical right before
    // (or, for the second, right after) the block's index 0, so the old process may execute index 0 first.
    for (const [k, b] of [blocks[1]!, blocks[2]!].entries()) {
      const swaps = e.status().swaps;
      if (k === 0) e.noteCanonical(b.number - 1);
      const wantHash = await nodeCall(node, 'eth_getStorageAt', [c.probe, '0x4', toHex(b.number)]);
      const parent = (await fetch(node.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBlockByNumber', params: [toHex(b.number - 1), false] }),
      }).then((r) => r.json())) as { result: { hash: string } };
      t.equal(wantHash, parent.result.hash, 'the node stored its own parent hash (the truth)');
      const out0 = await e.applyFlashblock(b.flashblocks[0]!);
      t.ok(out0.ok, `${b.number}/0 applied`);
      if (k === 1) e.noteCanonical(b.number - 1);
      // The swap to a fork at the canonical parent runs in the background; wait for it (bounded).
      for (let i = 0; i < 300 && e.status().swaps === swaps; i++) await new Promise((r) => setTimeout(r, 50));
      t.ok(e.status().swaps > swaps, `swapped to a fork at block ${b.number - 1}`);
      t.equal(await e.getStorageAt(c.probe, '0x4'), wantHash, `${b.number}/0: BLOCKHASH(NUMBER-1) equals the node's`);
      for (let i = 1; i < b.flashblocks.length; i++) {
        const out = await e.applyFlashblock(b.flashblocks[i]!);
        t.ok(out.ok && out.verified === true, `${b.number}/${i} verified`);
        t.equal(await e.getStorageAt(c.probe, '0x4'), wantHash, `${b.number}/${i}: BLOCKHASH(NUMBER-1) equals the node's`);
        t.equal(BigInt(await e.getStorageAt(c.probe, '0x0')), BigInt(b.number), `${b.number}/${i}: NUMBER exact`);
        t.equal(BigInt(await e.call({ to: c.reader })), b.sinkBalances[i], `${b.number}/${i}: state visible`);
      }
      const full = await nodeCall(node, 'eth_getStorageAt', [c.probe, '0x4', toHex(b.number)]);
      t.equal(await e.getStorageAt(c.probe, '0x4'), full, 'equal to the node\'s canonical storage once the block landed');
    }
    t.equal(e.status().divergences, 0, 'no divergence');
    // A standby being prepared when the engine stops is stopped too: no anvil forked by this engine outlives it.
    e.noteCanonical(blocks[2]!.number);
    await e.stop();
    t.same(forkedChildren(), [], 'no engine process left after stop()');
  });
}

t.test('rebuild: flashblocks applied while a standby replays are not lost; after the swap every receipt and read is the exact one', async (t) => {
  const { node, c, blocks } = await net(t, 2, 8, 10);
  const e = engineFor(t, node, 'rebuild');
  const [b0, b1] = [blocks[0]!, blocks[1]!];
  await e.start(b0.number - 1);
  for (const fb of b0.flashblocks) t.ok((await e.applyFlashblock(fb)).ok, `${fb.blockNumber}/${fb.index} applied`);
  e.noteCanonical(b0.number);
  // Every flashblock of the next block lands while the standby starts, warms up, replays and is swapped in; a reader
  // polls all along: no answer may be older than the newest flashblock already applied when it asked.
  let applied = -1;
  let reading = true;
  let reads = 0;
  const older: string[] = [];
  const reader = (async (): Promise<void> => {
    while (reading) {
      const floor = applied;
      try {
        const v = BigInt(await e.call({ to: c.reader }));
        reads++;
        if (floor >= 0 && v < b1.sinkBalances[floor]!) older.push(`read after ${b1.number}/${floor} answered ${v}`);
      } catch (err) {
        older.push(`read after ${b1.number}/${floor} failed: ${(err as Error).message}`);
      }
      await new Promise((r) => setTimeout(r, 3));
    }
  })();
  // Sent without waiting, so the apply queue is busy while the standby catches up and swaps.
  const outs: Promise<void>[] = [];
  for (const fb of b1.flashblocks) {
    outs.push(
      e.applyFlashblock(fb).then((o) => {
        t.ok(o.ok && o.verified === true, `${b1.number}/${fb.index} applied and verified`);
        applied = Math.max(applied, fb.index);
      }),
    );
    await new Promise((r) => setTimeout(r, 12));
  }
  await Promise.all(outs);
  for (let i = 0; i < 300 && e.status().swaps === 0; i++) await new Promise((r) => setTimeout(r, 50));
  reading = false;
  await reader;
  t.same(older, [], `no read older than an applied flashblock (${reads} reads)`);
  t.equal(e.status().swaps, 1, 'swapped once');
  t.equal(e.status().blockNumber, b1.number, 'the pending block is visible');
  t.equal(e.status().index, b1.flashblocks.length - 1, 'at its last flashblock');
  const tag = toHex(b1.number);
  for (const slot of ['0x0', '0x1', '0x2', '0x4']) {
    t.equal(await e.getStorageAt(c.probe, slot), await nodeCall(node, 'eth_getStorageAt', [c.probe, slot, tag]), `probe slot ${slot} equals the node's`);
  }
  t.equal(BigInt(await e.call({ to: c.reader })), b1.sinkBalances[b1.sinkBalances.length - 1], 'state of the last flashblock');
  const rs = e.blockReceipts(b1.number) ?? [];
  const nodeRs = (await fetch(node.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBlockReceipts', params: [tag] }),
  }).then((r) => r.json())) as { result: { transactionHash: string; gasUsed: string; cumulativeGasUsed: string }[] };
  t.equal(rs.length, nodeRs.result.length, 'one executed receipt per tx of the block');
  t.same(
    rs.map((r) => [r.transactionHash, r.gasUsed, r.cumulativeGasUsed]),
    nodeRs.result.map((r) => [r.transactionHash, BigInt(r.gasUsed), BigInt(r.cumulativeGasUsed)]),
    'executed receipts (hash, gas, cumulative gas) equal the node\'s',
  );
  t.ok(e.receipt(nodeRs.result[0]!.transactionHash) !== null, 'receipt() answers from the swapped-in process');
});
