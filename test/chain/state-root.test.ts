// computePostState: a block's diff applied to the parent's tries, read node by node from a source, gives the root of
// the state built from scratch (changed, created, destroyed accounts; written and cleared slots); a node the source
// lacks or cannot give is a TrieNodeUnavailable naming the account. And buildHeader's pre-Ecotone refusal.
import t from 'tap';
import { MerklePatriciaTrie } from '@ethereumjs/mpt';
import { MapDB, ValueEncoding } from '@ethereumjs/util';
import { buildHeader } from '../../src/chain/header-build.js';
import { bigIntToBytes, bytesToHex, hexToBytes } from '../../src/chain/hex.js';
import { encodeRlp } from '../../src/chain/rlp.js';
import { computePostState, storageRootOfLeaf, TrieNodeUnavailable, type AccountAfter, type TrieNodeSource } from '../../src/chain/state-root.js';
import { EMPTY_TRIE_ROOT } from '../../src/chain/trie.js';

const CODE = '0x' + 'c0'.repeat(32);
const NO_CODE = '0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470';

/** A state: address → account with storage (slot → value, as bigints). */
type State = Map<string, { nonce: bigint; balance: bigint; codeHash: string; storage: Map<bigint, bigint> }>;

/** Builds `state`'s tries into one node store (0x-hash → node) and returns its root. */
async function build(state: State, store: Map<string, Uint8Array>): Promise<string> {
  const open = () => {
    const db = new MapDB<string, Uint8Array>();
    return { db, trie: new MerklePatriciaTrie({ db: db as never, useKeyHashing: true, valueEncoding: ValueEncoding.Bytes }) };
  };
  const keep = (db: MapDB<string, Uint8Array>) => {
    for (const [k, v] of db._database) store.set('0x' + k, v);
  };
  const accounts = open();
  for (const [addr, a] of state) {
    const st = open();
    for (const [slot, v] of a.storage) if (v !== 0n) await st.trie.put(hexToBytes('0x' + slot.toString(16).padStart(64, '0')), encodeRlp(bigIntToBytes(v)));
    keep(st.db);
    const leaf = encodeRlp([bigIntToBytes(a.nonce), bigIntToBytes(a.balance), st.trie.root(), hexToBytes(a.codeHash)]);
    await accounts.trie.put(hexToBytes(addr), leaf);
  }
  keep(accounts.db);
  return bytesToHex(accounts.trie.root());
}

const addr = (n: number) => '0x' + n.toString(16).padStart(40, '0');
const w = (n: bigint) => '0x' + n.toString(16).padStart(64, '0');

function parentState(): State {
  const s: State = new Map();
  for (let i = 1; i <= 40; i++) {
    const storage = new Map<bigint, bigint>();
    if (i % 4 === 0) for (let k = 0n; k < 12n; k++) storage.set(k, BigInt(i) * 1000n + k + 1n);
    s.set(addr(i), { nonce: BigInt(i), balance: BigInt(i) * 10n ** 18n, codeHash: i % 4 === 0 ? CODE : NO_CODE, storage });
  }
  return s;
}

t.test('the diff over the parent gives the root of the after-state built from scratch', async (t) => {
  const parentNodes = new Map<string, Uint8Array>();
  const parentRoot = await build(parentState(), parentNodes);
  const asked: string[] = [];
  const source: TrieNodeSource = async (h) => {
    asked.push(h);
    return parentNodes.get(h) ?? null;
  };

  const after = parentState();
  const changes: AccountAfter[] = [];
  const change = (a: string, c: Partial<AccountAfter>) => {
    const s = after.get(a)!;
    changes.push({ address: a, deleted: false, storageReset: false, balance: String(s.balance), nonce: String(s.nonce), codeHash: s.codeHash, storage: [], ...c });
  };
  // A balance and nonce change.
  after.get(addr(3))!.balance = 7n;
  after.get(addr(3))!.nonce = 4n;
  change(addr(3), {});
  // Slots written, one cleared, one new.
  const s8 = after.get(addr(8))!.storage;
  s8.set(2n, 99n);
  s8.delete(5n);
  s8.set(200n, 1n);
  change(addr(8), { storage: [[w(2n), w(99n)], [w(5n), w(0n)], [w(200n), w(1n)]] });
  // A destroyed account, and one left empty.
  after.delete(addr(12));
  changes.push({ address: addr(12), deleted: true, storageReset: true, balance: '0', nonce: '0', codeHash: NO_CODE, storage: [] });
  after.delete(addr(5));
  changes.push({ address: addr(5), deleted: true, storageReset: false, balance: '0', nonce: '0', codeHash: NO_CODE, storage: [] });
  // A created contract with storage, and a re-created one whose old storage is void.
  after.set(addr(1000), { nonce: 1n, balance: 0n, codeHash: CODE, storage: new Map([[0n, 5n], [1n, 6n]]) });
  changes.push({ address: addr(1000), deleted: false, storageReset: true, balance: '0', nonce: '1', codeHash: CODE, storage: [[w(0n), w(5n)], [w(1n), w(6n)]] });
  after.set(addr(16), { nonce: 1n, balance: 0n, codeHash: CODE, storage: new Map([[3n, 3n]]) });
  changes.push({ address: addr(16), deleted: false, storageReset: true, balance: '0', nonce: '1', codeHash: CODE, storage: [[w(3n), w(3n)]] });
  changes.sort((a, b) => a.address.localeCompare(b.address));

  const want = await build(after, new Map());
  const post = await computePostState(parentRoot, source, changes);
  t.equal(post.stateRoot, want, 'the state root equals the after-state built from scratch');
  t.ok(asked.length > 0 && asked.length < parentNodes.size, `only the nodes on the changed paths were read (${asked.length} of ${parentNodes.size})`);
  t.equal(new Set(asked).size, asked.length, 'each node read once');
  t.equal(await post.storageRootOf(addr(20)), await storageRootAlone(after.get(addr(20))!.storage), "an unchanged account's storage root");
  t.equal(await post.storageRootOf(addr(12)), EMPTY_TRIE_ROOT, 'a destroyed account has the empty storage root');
  t.equal(await post.storageRootOf(addr(1000)), await storageRootAlone(after.get(addr(1000))!.storage), "a created account's storage root");

  t.equal((await computePostState(parentRoot, source, [])).stateRoot, parentRoot, 'no changes: the parent root');
});

async function storageRootAlone(storage: Map<bigint, bigint>): Promise<string> {
  const trie = new MerklePatriciaTrie({ db: new MapDB<string, Uint8Array>() as never, useKeyHashing: true, valueEncoding: ValueEncoding.Bytes });
  for (const [slot, v] of storage) if (v !== 0n) await trie.put(hexToBytes(w(slot)), encodeRlp(bigIntToBytes(v)));
  return bytesToHex(trie.root());
}

t.test('a node the source lacks or cannot give: TrieNodeUnavailable naming the account or slot', async (t) => {
  const nodes = new Map<string, Uint8Array>();
  const root = await build(parentState(), nodes);
  const touch: AccountAfter = { address: addr(8), deleted: false, storageReset: false, balance: '1', nonce: '1', codeHash: CODE, storage: [[w(1n), w(2n)]] };
  await t.rejects(computePostState(root, async () => null, [touch]), new TrieNodeUnavailable(`no trie node on the path to account ${addr(8)}`), 'absent root node');
  await t.rejects(
    computePostState(root, async () => {
      throw new Error('debug_dbGet: method not found');
    }, [touch]),
    { name: 'Error', message: `no trie node on the path to account ${addr(8)}: debug_dbGet: method not found` },
    'a failing source',
  );
  t.ok((await computePostState(root, async () => null, [touch]).catch((e: unknown) => e)) instanceof TrieNodeUnavailable, 'typed');
  // The account trie is all there, the storage trie's root node is not.
  const storageRoot = await storageRootAlone(parentState().get(addr(8))!.storage);
  const partial: TrieNodeSource = async (h) => (h === storageRoot ? null : nodes.get(h) ?? null);
  await t.rejects(computePostState(root, partial, [touch]), /^no trie node on the path to account 0x0{39}8 slot 0x0{63}1$/);
});

t.test('storageRootOfLeaf reads the third field; malformed leaves throw', async (t) => {
  const root = '0x' + '11'.repeat(32);
  t.equal(storageRootOfLeaf(encodeRlp([bigIntToBytes(1n), bigIntToBytes(2n), hexToBytes(root), hexToBytes(CODE)])), root);
  t.throws(() => storageRootOfLeaf(encodeRlp(hexToBytes('0x01'))), /not an RLP list/);
  t.throws(() => storageRootOfLeaf(encodeRlp([bigIntToBytes(1n), bigIntToBytes(2n), hexToBytes('0x11')])), /not 32 bytes/);
});

t.test('buildHeader refuses a header before Ecotone (no parentBeaconBlockRoot)', async (t) => {
  t.throws(
    () =>
      buildHeader({
        parentHash: w(1n), feeRecipient: addr(1), number: 5, gasLimit: 30_000_000n, timestamp: 1, extraData: '0x', prevRandao: w(2n),
        baseFeePerGas: 1n, parentBeaconBlockRoot: null, transactions: [], receiptsRoot: EMPTY_TRIE_ROOT, logsBloom: '0x' + '00'.repeat(256), gasUsed: 0n, stateRoot: EMPTY_TRIE_ROOT,
      }),
    /block 5 has no parentBeaconBlockRoot: headers before Ecotone are not rebuilt/,
  );
});
