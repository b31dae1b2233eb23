// The shapes as tables: one receipt builder for every producer (facts from the stream and facts as an executor would
// give them serialise byte for byte the same), "as of flashblock i" as a context (only blockHash moves), OP L1 fee
// fields in a fixed order, logs positioned in the block, blocks as of each flashblock.
import t from 'tap';
import { blockToRpc } from '../../../src/rpc/shapes/block.js';
import { txContext } from '../../../src/rpc/shapes/context.js';
import { logsToRpc } from '../../../src/rpc/shapes/log.js';
import { Shapes } from '../../../src/rpc/shapes/json.js';
import { buildReceipt, createdAddress, receiptToRpc, streamReceiptFacts, type OpL1Fee, type ReceiptFacts, type ReceiptSource } from '../../../src/rpc/shapes/receipt.js';
import { headOfBlock, notification, notificationPrefix, transactionWithReceipt } from '../../../src/rpc/shapes/subscription.js';
import { toRpcTransaction } from '../../../src/rpc/shapes/transaction.js';
import { l1FeeFacts } from '../../../src/rpc/shapes/l1fee.js';
import { executionReceiptSource } from '../../../src/rpc/methods/executed.js';
import { captureExecution } from '../../helpers/capture-execution.js';
import { keccak256 } from 'viem';
import { TX_DEPOSIT } from '../../../src/chain/types.js';
import { unichainMessages } from '../../helpers/fixtures.js';
import { feed, makePipeline } from '../../helpers/ingest.js';
import { txsOf } from '../../helpers/views.js';

function pending() {
  const { state, pipeline, senders } = makePipeline();
  const msgs = unichainMessages();
  for (const m of msgs) feed(pipeline, m);
  senders.recoverQueued();
  return { block: state.pendingBlock()!, msgs, senders };
}

t.test('an executed receipt with the same facts is byte-identical to the one from stream metadata', async (t) => {
  const { block, msgs } = pending();
  // The facts an executor reports, read here straight from the captured metadata (not through streamReceiptFacts).
  const raw = new Map<string, Record<string, any>>();
  for (const m of msgs) for (const [h, r] of Object.entries((m.metadata as any).receipts)) raw.set(h, Object.values(r as object)[0] as Record<string, any>);
  let prevCum = 0n;
  let firstLogIndex = 0;
  for (const rec of txsOf(block)) {
    const r = raw.get(rec.tx.hash)!;
    const cum = BigInt(r.cumulativeGasUsed);
    const executed: ReceiptFacts = {
      type: rec.tx.type,
      status: Number(r.status),
      cumulativeGasUsed: cum,
      gasUsed: cum - prevCum,
      logs: r.logs,
      firstLogIndex,
      contractAddress: createdAddress(rec.tx, rec.tx.from!, r.depositNonce === undefined ? null : BigInt(r.depositNonce)),
      depositNonce: r.depositNonce === undefined ? null : BigInt(r.depositNonce),
      depositReceiptVersion: r.depositReceiptVersion === undefined ? null : BigInt(r.depositReceiptVersion),
      l1Fee: l1FeeFacts(rec),
    };
    prevCum = cum;
    firstLogIndex += r.logs.length;
    const fromStream = JSON.stringify(receiptToRpc(rec));
    const fromExecution = JSON.stringify(buildReceipt(rec.tx, rec.tx.from!, txContext(rec), executed));
    t.equal(fromExecution, fromStream, `${rec.tx.hash.slice(0, 10)} (type ${rec.tx.type})`);
    t.equal('l1Fee' in JSON.parse(fromStream), rec.tx.type !== TX_DEPOSIT, 'OP fee fields on the user transaction only');
  }
});

t.test('as of flashblock i is another context: only blockHash differs, in the receipt and its logs', async (t) => {
  const { block } = pending();
  for (const rec of txsOf(block)) {
    const latest = receiptToRpc(rec)!;
    for (let i = rec.flashblockIndex; i <= block.lastIndex; i++) {
      const asOf = receiptToRpc(rec, i)!;
      const hash = block.diffs[i]!.blockHash;
      t.equal(asOf.blockHash, hash);
      t.ok((asOf.logs as { blockHash: string }[]).every((l) => l.blockHash === hash));
      const strip = (o: Record<string, unknown>) => JSON.stringify({ ...o, blockHash: null, logs: (o.logs as object[]).map((l) => ({ ...l, blockHash: null })) });
      t.equal(strip(asOf), strip(latest), `${rec.tx.hash.slice(0, 10)} as of ${i}`);
      t.equal(toRpcTransaction(rec.tx, txContext(rec, i)).blockHash, hash, 'the transaction object too');
    }
  }
});

t.test('receipt builder table: status, creation, deposits, OP L1 fee fields', async (t) => {
  const { block } = pending();
  const user = txsOf(block).find((r) => r.tx.type !== TX_DEPOSIT)!;
  const deposit = txsOf(block).find((r) => r.tx.type === TX_DEPOSIT)!;
  const base = streamReceiptFacts(user)!;
  const l1: OpL1Fee = {
    l1GasPrice: 7n, l1GasUsed: 1600n, l1Fee: 11200n, l1FeeScalar: null, l1BaseFeeScalar: 2269n, l1BlobBaseFee: 1n,
    l1BlobBaseFeeScalar: 1055762n, operatorFeeScalar: null, operatorFeeConstant: null, daFootprintGasScalar: null, blobGasUsed: null,
  };
  const rows: [string, ReceiptFacts, typeof user, (r: Record<string, unknown>) => void][] = [
    ['failed', { ...base, status: 0 }, user, (r) => t.equal(r.status, '0x0')],
    ['creation', { ...base, contractAddress: '0x' + '12'.repeat(20) }, user, (r) => t.equal(r.contractAddress, '0x' + '12'.repeat(20))],
    ['L1 fee fields after contractAddress, nulls omitted', { ...base, l1Fee: l1 }, user, (r) => {
      const keys = Object.keys(r);
      t.same(keys.slice(keys.indexOf('contractAddress') + 1), ['l1GasPrice', 'l1GasUsed', 'l1Fee', 'l1BaseFeeScalar', 'l1BlobBaseFee', 'l1BlobBaseFeeScalar']);
      t.equal(r.l1Fee, '0x2bc0');
    }],
    ['Isthmus operator fee and Jovian DA fields, in that order', { ...base, l1Fee: { ...l1, operatorFeeScalar: 5n, operatorFeeConstant: 7n, daFootprintGasScalar: 400n, blobGasUsed: 40_000n } }, user, (r) => {
      const keys = Object.keys(r);
      t.same(keys.slice(keys.indexOf('l1BlobBaseFeeScalar') + 1), ['operatorFeeScalar', 'operatorFeeConstant', 'daFootprintGasScalar', 'blobGasUsed']);
      t.match(r, { operatorFeeScalar: '0x5', operatorFeeConstant: '0x7', daFootprintGasScalar: '0x190', blobGasUsed: '0x9c40' });
    }],
    ['pre-Ecotone decimal scalar as a string', { ...base, l1Fee: { ...l1, l1FeeScalar: '0.684' } }, user, (r) => t.equal(r.l1FeeScalar, '0.684')],
    ['deposit: nonce and version, no L1 fields', { ...streamReceiptFacts(deposit)!, l1Fee: l1 }, deposit, (r) => {
      t.match(r, { type: '0x7e', depositNonce: '0x21e3b52', depositReceiptVersion: '0x1', effectiveGasPrice: '0x0' });
      t.notOk('l1Fee' in r);
    }],
  ];
  for (const [name, facts, rec, check] of rows) t.test(name, async () => check(buildReceipt(rec.tx, rec.tx.from!, txContext(rec), facts)));
});

t.test('logs are positioned in the block from the context', async (t) => {
  const logs = [{ address: '0x' + 'aa'.repeat(20), topics: ['0x' + '11'.repeat(32)], data: '0x' }, { address: '0x' + 'bb'.repeat(20), topics: [], data: '0x01' }];
  const ctx = { blockHash: '0x' + 'cc'.repeat(32), blockNumber: 16n, transactionIndex: 3, baseFeePerGas: 1n, blockTimestamp: 255n };
  const out = logsToRpc(logs, '0x' + 'dd'.repeat(32), ctx, 7);
  t.same(out.map((l) => l.logIndex), ['0x7', '0x8']);
  t.same(out[1], { address: logs[1]!.address, topics: [], data: '0x01', blockHash: ctx.blockHash, blockNumber: '0x10', blockTimestamp: '0xff', transactionHash: '0x' + 'dd'.repeat(32), transactionIndex: '0x3', logIndex: '0x8', removed: false });
});

t.test('blocks as of each flashblock', async (t) => {
  const { block, msgs } = pending();
  for (let i = 0; i <= block.lastIndex; i++) {
    const b = blockToRpc(block, true, i);
    const d = msgs[i]!.diff as { block_hash: string; gas_used: string };
    t.equal(b.hash, d.block_hash, `hash as of ${i}`);
    t.equal(b.gasUsed, d.gas_used, `gasUsed as of ${i}`);
    t.equal((b.transactions as unknown[]).length, block.txCountAt[i], `transactions as of ${i}`);
    t.ok((b.transactions as { blockHash: string }[]).every((x) => x.blockHash === d.block_hash), 'each transaction shows that hash');
  }
});

t.test('subscription payloads', async (t) => {
  const prefix = notificationPrefix('0xab');
  t.same(JSON.parse(notification(prefix, '"0x01"')), { jsonrpc: '2.0', method: 'eth_subscription', params: { subscription: '0xab', result: '0x01' } });
  t.same(headOfBlock({ number: '0x1', hash: '0x2', transactions: [], uncles: [] }), { number: '0x1', hash: '0x2' });
  t.same(transactionWithReceipt({ hash: '0x3' }, null), { hash: '0x3', receipt: null });
});

t.test('a receipt source stands in for the stream: a post-Azul block gets the same receipts and logs from it', async (t) => {
  const withMeta = pending();
  const azul = makePipeline();
  for (const m of unichainMessages()) {
    const c = structuredClone(m) as { metadata: Record<string, unknown> };
    c.metadata = { block_number: c.metadata.block_number };
    feed(azul.pipeline, c);
  }
  azul.senders.recoverQueued();
  const block = azul.state.pendingBlock()!;
  // What an executor would report, keyed by transaction hash (here: the facts the stream gave the other run).
  const executed = new Map(txsOf(withMeta.block).map((r) => [r.tx.hash, streamReceiptFacts(r)!]));
  const source: ReceiptSource = { facts: (rec) => executed.get(rec.tx.hash) ?? null, logs: (rec) => executed.get(rec.tx.hash) ?? null };
  const fromStream = new Shapes(withMeta.senders);
  const fromExecution = new Shapes(azul.senders, source);
  t.equal(new Shapes(azul.senders).receiptJson(block.txAt(1)!), null, 'no receipts in a post-Azul stream');
  for (let i = 0; i < block.txCount; i++) {
    const a = withMeta.block.txAt(i)!;
    const b = block.txAt(i)!;
    const strip = (json: string | undefined) => json?.replaceAll(withMeta.block.hash, 'H').replaceAll(block.hash, 'H');
    t.equal(strip(fromExecution.receiptJson(b)?.json), strip(fromStream.receiptJson(a)?.json), `receipt ${i} byte-identical (block hash aside)`);
    t.same(fromExecution.logObjects(b), fromStream.logObjects(a)?.map((l) => ({ ...l, blockHash: block.hash })), `logs ${i}`);
  }
});

/** A post-Azul run of `msgs`: the same flashblocks with metadata reduced to `{block_number}`. */
function azulPending(msgs: Record<string, unknown>[]) {
  const azul = makePipeline();
  for (const m of msgs) {
    const c = structuredClone(m) as { metadata: Record<string, unknown> };
    c.metadata = { block_number: c.metadata.block_number };
    feed(azul.pipeline, c);
  }
  azul.senders.recoverQueued();
  return { block: azul.state.pendingBlock()!, senders: azul.senders };
}

t.test('OP fee fields: a receipt from execution and one from stream metadata are byte-identical, fields included', async (t) => {
  const withMeta = pending();
  const azul = azulPending(unichainMessages());
  const fromStream = new Shapes(withMeta.senders);
  const fromExecution = new Shapes(azul.senders, executionReceiptSource(captureExecution()));
  const strip = (json: string | undefined) => json?.replaceAll(withMeta.block.hash, 'H').replaceAll(azul.block.hash, 'H');
  for (let i = 0; i < azul.block.txCount; i++) {
    const a = fromStream.receiptJson(withMeta.block.txAt(i)!)?.json;
    const b = fromExecution.receiptJson(azul.block.txAt(i)!)?.json;
    t.ok(b, `receipt ${i} from execution`);
    t.equal(strip(b), strip(a), `receipt ${i} byte-identical (block hash aside)`);
  }
  // The user transaction: the Unichain block's Isthmus L1 attributes, Fjord cost at the 100-byte minimum.
  const user = JSON.parse(fromExecution.receiptJson(azul.block.txAt(1)!)!.json) as Record<string, string>;
  const fee = (100_000_000n * (9n * 16n * 2000n + 900_000n)) / 1_000_000_000_000n;
  t.match(user, { l1GasPrice: '0x9', l1GasUsed: '0x640', l1Fee: '0x' + fee.toString(16), l1BaseFeeScalar: '0x7d0', l1BlobBaseFee: '0x1', l1BlobBaseFeeScalar: '0xdbba0' });
  for (const k of ['l1FeeScalar', 'operatorFeeScalar', 'operatorFeeConstant', 'daFootprintGasScalar', 'blobGasUsed']) t.notOk(k in user, `${k} omitted (pre-Ecotone / both operator params zero / pre-Jovian)`);
  const dep = JSON.parse(fromExecution.receiptJson(azul.block.txAt(0)!)!.json) as Record<string, string>;
  t.match(dep, { type: '0x7e', depositNonce: '0x21e3b52', depositReceiptVersion: '0x1' });
  t.notOk('l1Fee' in dep, 'the deposit has no fee fields');
});

t.test('a block without an L1-info deposit (the devnet emits none): no OP fee fields, nothing invented', async (t) => {
  const msgs = unichainMessages().map((m) => structuredClone(m) as { diff: { transactions: string[] }; metadata: { receipts: Record<string, unknown> } });
  const l1Info = msgs[0]!.diff.transactions.shift()!;
  delete msgs[0]!.metadata.receipts[keccak256(l1Info as `0x${string}`)];
  const { state, pipeline, senders } = makePipeline();
  for (const m of msgs) feed(pipeline, m as unknown as Record<string, unknown>);
  senders.recoverQueued();
  const block = state.pendingBlock()!;
  t.not(block.txAt(0)!.tx.type, TX_DEPOSIT, 'the first transaction is a user transaction now');
  for (const rec of txsOf(block)) {
    t.equal(l1FeeFacts(rec), null);
    const r = receiptToRpc(rec)!;
    t.ok(r, 'the stream receipt is served');
    t.notOk('l1Fee' in r || 'l1GasPrice' in r, `${rec.tx.hash.slice(0, 10)}: no fee fields`);
  }
});
