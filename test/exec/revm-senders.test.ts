// Senders handed to the native engine with a flashblock (FlashblockWork.senders, what ingest recovered): the same
// receipts and verified receipts roots as when the engine recovers every sender itself; a sender left null is
// recovered by the engine; a deposit keeps the `from` of its own bytes whatever is given; a malformed transaction is
// rejected even with its sender given; sender rows or transaction bounds that do not fit are a clear error, not a crash.
import t, { type Test } from 'tap';
import { keccak256, toHex, type Hex } from 'viem';
import type { Anvil } from '../../scripts/devnet/anvil.js';
import type { BuiltBlock } from '../../scripts/devnet/exec-blocks.js';
import { senderRows, txBatch, txHexes, type ApplyOutcome, type FlashblockWork } from '../../src/exec/engine.js';
import type { RevmEngine } from '../../src/exec/revm.js';
import { anvilEngine, net } from '../helpers/exec-net.js';

const engineFor = (t: Test, node: Anvil): RevmEngine => anvilEngine(t, node);

/** Each canonical transaction's sender by hash (the node's `from`). */
async function sendersOf(node: Anvil, blocks: BuiltBlock[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const b of blocks) {
    const r = await fetch(node.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBlockByNumber', params: [toHex(b.number), true] }) });
    const block = ((await r.json()) as { result: { transactions: { hash: string; from: string }[] } }).result;
    for (const tx of block.transactions) out.set(tx.hash.toLowerCase(), tx.from.toLowerCase());
  }
  return out;
}

const isDeposit = (raw: string): boolean => raw.startsWith('0x7e');

/** Applies every flashblock of `blocks` in order (the second block on the first, settled); the outcomes. */
async function applyAll(e: RevmEngine, blocks: BuiltBlock[], work: (fb: FlashblockWork) => FlashblockWork): Promise<ApplyOutcome[]> {
  await e.start(blocks[0]!.number - 1);
  const outs: ApplyOutcome[] = [];
  for (const [k, b] of blocks.entries()) {
    if (k > 0) e.noteCanonical(blocks[k - 1]!.number);
    for (const fb of b.flashblocks) outs.push(await e.applyFlashblock(work(fb)));
  }
  return outs;
}

t.test("senders given: the same receipts and verified roots as senders recovered in the engine; null ones and deposits are the engine's own", async (t) => {
  const { node, blocks } = await net(t, 2, 3, 40);
  const truth = await sendersOf(node, blocks);
  // Without senders (as before): the engine recovers every one.
  const plain = await applyAll(engineFor(t, node), blocks, (fb) => fb);
  // With senders: every signed transaction's sender given (the node's `from`) except every third one (null: the
  // engine recovers it); deposits are given a wrong sender, which must be ignored.
  let given = 0;
  let left = 0;
  const bogus = '0x' + '11'.repeat(20);
  const outs = await applyAll(engineFor(t, node), blocks, (fb) => ({
    ...fb,
    senders: senderRows(txHexes(fb.txs).map((raw, i) => {
      if (isDeposit(raw)) return bogus;
      if (i % 3 === 2) {
        left++;
        return null;
      }
      given++;
      return truth.get(keccak256(raw as Hex))!;
    })),
  }));
  t.ok(given > 100 && left > 50, `${given} senders given, ${left} left to the engine`);
  t.equal(outs.length, plain.length, 'as many outcomes');
  outs.forEach((o, k) => {
    const p = plain[k]!;
    t.ok(o.ok && o.verified === true && p.ok && p.verified === true, `flashblock ${k}: executed and verified both ways`);
    if (o.ok && p.ok) t.same(o.receipts, p.receipts, `flashblock ${k}: identical receipts`);
  });
  const froms = outs.flatMap((o) => (o.ok ? o.receipts.map((r) => [r.transactionHash, r.from] as const) : []));
  t.same(froms.filter(([h, f]) => truth.get(h) !== f), [], "every receipt's from is the node's, deposits' included");
  t.notOk(froms.some(([, f]) => f === bogus), 'no deposit took the sender it was given');
});

t.test('a sender given does not make a malformed transaction acceptable; misfit sender rows or bounds are a clear error', async (t) => {
  const { node, blocks } = await net(t, 1, 2, 4);
  const truth = await sendersOf(node, blocks);
  const b = blocks[0]!;
  const fb = b.flashblocks[1]!;
  const hexes = txHexes(fb.txs);
  const k = hexes.findIndex((raw) => !isDeposit(raw));
  const raw = hexes[k]!;
  const sender = truth.get(keccak256(raw as Hex))!;
  const e = engineFor(t, node);
  await e.start(b.number - 1);
  const first = await e.applyFlashblock(b.flashblocks[0]!);
  t.ok(first.ok && first.verified === true, 'index 0 executes');
  const cut = txBatch(hexes.map((r, i) => (i === k ? r.slice(0, -10) : r)));
  const cutOut = await e.applyFlashblock({ ...fb, txs: cut, senders: senderRows(hexes.map((_, i) => (i === k ? sender : null))) });
  t.ok(!cutOut.ok && cutOut.reason === 'tx_rejected' && /undecodable transaction/.test(cutOut.message), `a truncated transaction is rejected with its sender given (${cutOut.ok ? 'ok' : cutOut.message})`);

  const e2 = engineFor(t, node);
  await e2.start(b.number - 1);
  t.ok((await e2.applyFlashblock(b.flashblocks[0]!)).ok, 'index 0 executes');
  const misfit = await e2.applyFlashblock({ ...fb, senders: senderRows([sender]) });
  t.ok(!misfit.ok && misfit.reason === 'execution_error' && /senders: 21 bytes for \d+ transactions/.test(misfit.message), `sender rows of the wrong length are refused (${misfit.ok ? 'ok' : misfit.message})`);
  const e3 = engineFor(t, node);
  await e3.start(b.number - 1);
  t.ok((await e3.applyFlashblock(b.flashblocks[0]!)).ok, 'index 0 executes');
  const junk = senderRows(hexes.map(() => null)).fill(7, 0, 1);
  const junkOut = await e3.applyFlashblock({ ...fb, senders: junk });
  t.ok(!junkOut.ok && /senders: flag 7/.test(junkOut.message), `a sender row with a flag other than 0 or 1 is refused (${junkOut.ok ? 'ok' : junkOut.message})`);
  const e5 = engineFor(t, node);
  await e5.start(b.number - 1);
  t.ok((await e5.applyFlashblock(b.flashblocks[0]!)).ok, 'index 0 executes');
  const short = { bytes: fb.txs.bytes, bounds: fb.txs.bounds.map((x, i, all) => (i === all.length - 1 ? x + 1 : x)) };
  const shortOut = await e5.applyFlashblock({ ...fb, txs: short });
  t.ok(!shortOut.ok && /transaction bounds do not fit/.test(shortOut.message), `bounds past the bytes are refused (${shortOut.ok ? 'ok' : shortOut.message})`);
  const e6 = engineFor(t, node);
  await e6.start(b.number - 1);
  t.ok((await e6.applyFlashblock(b.flashblocks[0]!)).ok, 'index 0 executes');
  const unordered = { bytes: fb.txs.bytes, bounds: fb.txs.bounds.map((x, i) => (i === 1 ? fb.txs.bytes.length : x)) };
  const unorderedOut = await e6.applyFlashblock({ ...fb, txs: unordered });
  t.ok(!unorderedOut.ok && /transaction bounds do not fit/.test(unorderedOut.message), `bounds out of order are refused (${unorderedOut.ok ? 'ok' : unorderedOut.message})`);
  const e4 = engineFor(t, node);
  await e4.start(b.number - 1);
  t.ok((await e4.applyFlashblock(b.flashblocks[0]!)).ok, 'index 0 executes');
  const ok = await e4.applyFlashblock({ ...fb, senders: senderRows(hexes.map((r) => (isDeposit(r) ? null : truth.get(keccak256(r as Hex))!))) });
  t.ok(ok.ok && ok.verified === true, 'the same flashblock with the right senders executes and verifies');
});
