// Frame validation verdicts on a real capture: which reason (and detail) a broken frame gets, whatever part of the
// transaction checks found it first, and the lower-case normalisation of hashes, addresses and log data.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { decodeFrame, type DecodeFrameResult } from '../../src/ingest/frame.js';
import { decodeTransaction } from '../../src/chain/tx.js';
import { fbReceipts, fbTxs } from '../helpers/views.js';

const fixture = fileURLToPath(new URL('../fixtures/flashblocks/unichain-sepolia-block-35535698.messages.json', import.meta.url));
const messages = JSON.parse(readFileSync(fixture, 'utf8')) as any[];
/** Index 0 of the capture carrying the transactions and receipts of all its flashblocks (≥ 3 transactions). */
const withTxs = structuredClone(messages[0]);
for (const m of messages.slice(1)) {
  withTxs.diff.transactions.push(...m.diff.transactions);
  Object.assign(withTxs.metadata.receipts, m.metadata.receipts);
}

function decode(mut: (m: any) => void): DecodeFrameResult {
  const m = structuredClone(withTxs);
  mut(m);
  return decodeFrame(Buffer.from(JSON.stringify(m)), 1 << 24);
}

function failure(r: DecodeFrameResult): [string, string] {
  return r.ok ? ['ok', ''] : [r.reason, r.detail];
}

t.test('the capture decodes; every transaction is hashed like the full decoder hashes it', async (t) => {
  const r = decode(() => {});
  t.ok(r.ok);
  if (!r.ok) return;
  const raws = withTxs.diff.transactions as string[];
  t.same(fbTxs(r.fb).map((x) => x.hash), raws.map((raw) => (decodeTransaction(raw) as { tx: { hash: string } }).tx.hash));
  t.ok(fbTxs(r.fb).every((_, i) => r.fb.body.receipt(i) !== null), 'every receipt is matched by hash');
});

t.test('a transaction that is not hex is a schema failure; one that does not decode is a transaction failure', async (t) => {
  t.same(failure(decode((m) => (m.diff.transactions[1] = '0xzz'))), ['schema', 'diff.transactions[1] must be hex bytes']);
  t.same(failure(decode((m) => (m.diff.transactions[1] = 42))), ['schema', 'diff.transactions[1] must be hex bytes']);
  const [reason, detail] = failure(decode((m) => (m.diff.transactions[1] = '0x02f8')));
  t.equal(reason, 'transaction');
  t.match(detail, /^diff\.transactions\[1\]: /);
  t.same(
    failure(decode((m) => {
      m.diff.transactions[0] = '0x02f8';
      m.diff.transactions[2] = '0x1';
    })),
    ['schema', 'diff.transactions[2] must be hex bytes'],
    'a later non-hex transaction still makes it a schema failure, as when hex was checked first',
  );
  t.same(
    failure(decode((m) => {
      m.diff.transactions[0] = '0x02f8';
      m.diff.state_root = '0x12';
    })),
    ['schema', 'diff.state_root must be a 32-byte hex hash'],
    'schema problems of the diff win over a transaction that does not decode',
  );
});

t.test('receipt and log problems are schema failures naming the receipt', async (t) => {
  const key = Object.keys(withTxs.metadata.receipts).find((k) => {
    const r = withTxs.metadata.receipts[k];
    return (Object.values(r)[0] as any).logs?.length > 0;
  })!;
  const body = (m: any): any => Object.values(m.metadata.receipts[key])[0];
  const where = `metadata.receipts[${key.slice(0, 10)}]`;
  t.same(failure(decode((m) => (body(m).logs[0].address = '0x12'))), ['schema', `${where}.logs[0].address must be a 20-byte hex address`]);
  t.same(failure(decode((m) => delete body(m).logs[0].data)), ['schema', `${where}.logs[0].data missing`]);
  t.same(failure(decode((m) => (body(m).logs[0].topics = ['0x1']))), ['schema', `${where}.logs[0].topics[0] must be a 32-byte hex hash`]);
  t.same(failure(decode((m) => (body(m).logs[0] = []))), ['schema', `${where}.logs[0] must be an object`]);
  t.same(failure(decode((m) => (body(m).cumulativeGasUsed = 'x'))), ['schema', `${where}.cumulativeGasUsed must be a hex quantity`]);
  t.same(failure(decode((m) => (m.metadata.receipts[key] = { toString: {} }))), ['schema', `${where}: unknown receipt shape (keys toString)`]);
  t.same(failure(decode((m) => (m.metadata.receipts['0x12'] = {}))), ['schema', 'metadata.receipts key must be a 32-byte hex hash']);
});

t.test('upper-case hex in the frame is normalised to lower case', async (t) => {
  const key = Object.keys(withTxs.metadata.receipts)[0]!;
  const r = decode((m) => {
    m.diff.transactions[0] = '0x' + m.diff.transactions[0].slice(2).toUpperCase();
    m.metadata.receipts['0x' + key.slice(2).toUpperCase()] = m.metadata.receipts[key];
    delete m.metadata.receipts[key];
    m.diff.block_hash = '0x' + m.diff.block_hash.slice(2).toUpperCase();
  });
  t.ok(r.ok);
  if (!r.ok) return;
  t.equal(r.fb.body.txRaw(0), withTxs.diff.transactions[0]);
  t.equal(r.fb.diff.blockHash, withTxs.diff.block_hash);
  t.ok(fbReceipts(r.fb)!.has(key));
});
