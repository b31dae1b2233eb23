// orderedTrieRoot against real block headers: the Unichain capture, Base mainnet blocks and the execution-apis chain.
import t from 'tap';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { EMPTY_TRIE_ROOT, orderedTrieRoot, orderedTrieRootOf, TrieCache } from '../../src/chain/trie.js';
import { encodeRlp } from '../../src/chain/rlp.js';
import { decodeRlp, type RlpItem } from '../helpers/rlp-oracle.js';
import { keccak256Hex } from '../../src/chain/keccak.js';
import { unichainMessages, unichainRpcBlock } from '../helpers/fixtures.js';

const bytes = (hex: string): Buffer => Buffer.from(hex.slice(2), 'hex');

/**
 * Fixtures not (yet) copied into test/fixtures are read from the shared conformance folder when it is mounted;
 * the test is skipped otherwise.
 */
function locate(rel: string): string | null {
  for (const p of [fileURLToPath(new URL('../fixtures/' + rel, import.meta.url))]) {
    if (existsSync(p)) return p;
  }
  return null;
}

t.test('the empty list has the empty-trie root', async (t) => {
  t.equal(orderedTrieRoot([]), EMPTY_TRIE_ROOT);
  t.equal(EMPTY_TRIE_ROOT, keccak256Hex(encodeRlp(Buffer.alloc(0))));
});

t.test('Unichain Sepolia 35535698: the flashblocks transactions give the canonical transactionsRoot', async (t) => {
  const raws: Buffer[] = [];
  for (const m of unichainMessages()) {
    for (const tx of (m.diff as { transactions: string[] }).transactions) raws.push(bytes(tx));
  }
  t.equal(raws.length, 6);
  t.equal(orderedTrieRoot(raws), unichainRpcBlock().transactionsRoot);
});

t.test('Base mainnet blocks 1 and 4999983: transactionsRoot recomputes from the raw transactions', async (t) => {
  const names = ['base-mainnet-derivation-window-l2-1-1', 'base-mainnet-derivation-batch-l2-4999983-4999983'];
  for (const name of names) {
    const path = locate(`base-mainnet/${name}/l2.json`);
    if (path === null) {
      t.fail(`${name}: fixture not available`);
      continue;
    }
    const blocks = JSON.parse(readFileSync(path, 'utf8')) as { header: { transactionsRoot: string }; transactions: string[] }[];
    for (const b of blocks) {
      t.equal(orderedTrieRoot(b.transactions.map(bytes)), b.header.transactionsRoot, `${name} (${b.transactions.length} txs)`);
    }
  }
});

t.test('execution-apis chain.rlp: every block body gives its header transactionsRoot', async (t) => {
  const path = locate('execution-apis/tests/chain.rlp');
  if (path === null) {
    t.fail('chain.rlp not available');
    return;
  }
  const data = readFileSync(path);
  let pos = 0;
  let blocks = 0;
  while (pos < data.length) {
    // Blocks are concatenated RLP lists: read each list's total length from its header.
    const b0 = data[pos] as number;
    const lenOfLen = b0 - 0xf7;
    const len = data.subarray(pos + 1, pos + 1 + lenOfLen).readUIntBE(0, lenOfLen);
    const block = decodeRlp(data.subarray(pos, pos + 1 + lenOfLen + len)) as RlpItem[];
    pos += 1 + lenOfLen + len;
    const header = block[0] as Buffer[];
    const txs = (block[1] as RlpItem[]).map((tx) => (Array.isArray(tx) ? encodeRlp(tx) : tx));
    t.equal(orderedTrieRoot(txs), '0x' + (header[4] as Buffer).toString('hex'), `block ${blocks + 1} (${txs.length} txs)`);
    blocks++;
  }
  t.ok(blocks > 0);
  t.comment(`chain.rlp: ${blocks} blocks checked`);
});

t.test('many items (keys past rlp(127) and rlp(255)) hash deterministically and differ by order', async (t) => {
  const items = Array.from({ length: 300 }, (_, i) => Buffer.from(`item-${i}`));
  const root = orderedTrieRoot(items);
  t.match(root, /^0x[0-9a-f]{64}$/);
  t.equal(orderedTrieRoot(items.slice()), root, 'same input, same root');
  t.not(orderedTrieRoot(items.slice().reverse()), root, 'order matters');
  t.not(orderedTrieRoot(items.slice(0, 129)), orderedTrieRoot(items.slice(0, 128)), 'index 128 is included');
});

t.test('a growing list with one TrieCache gives the uncached root at every size, and reads only new items', async (t) => {
  // Item sizes straddle the 32-byte inline limit; growth steps cross rlp(127)/rlp(0) and rlp(255)/rlp(256).
  const items = Array.from({ length: 700 }, (_, i) => Buffer.alloc(1 + ((i * 37) % 90), i & 0xff));
  const cache = new TrieCache();
  let size = 0;
  let mismatches = 0;
  let reads = 0;
  for (const step of [1, 1, 2, 5, 60, 60, 1, 70, 57, 200, 243]) {
    size += step;
    reads = 0;
    const got = orderedTrieRootOf(size, (i) => (reads++, items[i]!), cache);
    if (got !== orderedTrieRoot(items.slice(0, size))) mismatches++;
    if (size > 300) t.ok(reads < size / 2, `size ${size}: ${reads} of ${size} items read`);
  }
  t.equal(size, 700);
  t.equal(mismatches, 0, 'every size matches the uncached root');
  // Real transactions: the Unichain block, grown flashblock by flashblock, ends at the canonical root.
  const msgs = unichainMessages();
  const raws: Buffer[] = [];
  const rawCache = new TrieCache();
  for (const m of msgs) {
    for (const x of (m.diff as { transactions: string[] }).transactions) raws.push(bytes(x));
    t.equal(orderedTrieRootOf(raws.length, (i) => raws[i]!, rawCache), orderedTrieRoot(raws), `after ${raws.length} txs`);
  }
  t.equal(orderedTrieRootOf(raws.length, (i) => raws[i]!, rawCache), unichainRpcBlock().transactionsRoot);
});
