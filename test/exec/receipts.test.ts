// Pure parts of the execution engine: receipt encoding (typed, legacy, OP deposit with and without its fields),
// receipts roots over a growing block, and the bytecode scan for NUMBER / BLOCKHASH.
import t from 'tap';
import { EMPTY_TRIE_ROOT, TrieCache } from '../../src/chain/trie.js';
import { encodeReceipt, receiptsRoot, type ExecutedReceipt } from '../../src/exec/receipts.js';

function receipt(over: Partial<ExecutedReceipt>): ExecutedReceipt {
  return {
    transactionHash: '0x' + '00'.repeat(32), type: 2, status: true, cumulativeGasUsed: 21000n, gasUsed: 21000n, logs: [],
    depositNonce: null, depositReceiptVersion: null, contractAddress: null, effectiveGasPrice: 1n, from: '0x' + '11'.repeat(20), to: null,
    ...over,
  };
}

t.test('encodeReceipt: type byte for typed receipts, none for legacy, deposit fields only on deposits', async (t) => {
  const legacy = encodeReceipt(receipt({ type: 0 }));
  t.equal(legacy[0]! >= 0xc0, true, 'legacy is a bare rlp list');
  const typed = encodeReceipt(receipt({ type: 2 }));
  t.equal(typed[0], 2, 'EIP-1559 receipt starts with 0x02');
  t.same(typed.subarray(1), legacy, 'same payload as legacy after the type byte');
  const dep = encodeReceipt(receipt({ type: 0x7e, depositNonce: 5n, depositReceiptVersion: 1n }));
  const depNoFields = encodeReceipt(receipt({ type: 0x7e }));
  t.equal(dep[0], 0x7e, 'deposit type byte');
  t.equal(dep.length, depNoFields.length + 2, 'depositNonce and depositReceiptVersion add one byte each (5, 1)');
  t.same(encodeReceipt(receipt({ type: 2, depositNonce: 5n })), typed, 'a non-deposit ignores deposit fields');
  t.not(encodeReceipt(receipt({ status: false })).toString('hex'), typed.toString('hex'), 'status is encoded');
});

t.test('receiptsRoot: empty list, and a growing block with a cache equals a fresh computation', async (t) => {
  t.equal(receiptsRoot([]), EMPTY_TRIE_ROOT, 'empty trie root');
  const rs: ExecutedReceipt[] = [];
  const cache = new TrieCache();
  for (let i = 0; i < 300; i++) {
    rs.push(receipt({ cumulativeGasUsed: 21000n * BigInt(i + 1), logs: i % 3 === 0 ? [{ address: '0x' + '22'.repeat(20), topics: ['0x' + '33'.repeat(32)], data: '0x01' }] : [] }));
    if (i === 0 || i === 127 || i === 128 || i === 299) t.equal(receiptsRoot(rs, rs.length, cache), receiptsRoot(rs), `cached root at ${i + 1} receipts`);
  }
  t.not(receiptsRoot(rs, 10), receiptsRoot(rs, 11), 'a prefix has its own root');
});
