// The witness node over every real-block fixture: the chain head is the parent; the block and its transactions are
// served (full objects, deposits included, and raw); state at the parent comes from the witness tries — the block's
// senders are there, a proven absence is zero, a key the witness lacks is an error (never a zero), and eth_getProof's
// proofs verify against the state root with @ethereumjs/mpt, an implementation we did not write.
import t, { type Test } from 'tap';
import { verifyMerkleProof } from '@ethereumjs/mpt';
import { RLP } from '@ethereumjs/rlp';
import { keccak_256 } from '@noble/hashes/sha3.js';
import { loadWitnessFixture } from '../../scripts/witness/fixture.js';
import { startWitnessNode, type WitnessNode } from '../../scripts/witness/server.js';
import { orderedTrieRoot } from '../../src/chain/trie.js';
import { OP_BLOCKS_ABSENT, opBlockFixtures } from '../helpers/op-blocks.js';

const fixtures = opBlockFixtures();
if (fixtures.length === 0) t.plan(0, OP_BLOCKS_ABSENT);

/**
 * An account each witness proves absent: where the block names none itself, one ground so that its keccak path ends
 * at an empty branch slot or a diverging leaf within the witness (checked below against the proof, independently).
 */
const PROVEN_ABSENT: Record<string, string> = {
  'op-mainnet-block-132795025': '0x57b930d551e677cc36e2fa036ae2fe8fdae0330d',
  'op-mainnet-block-132796000': '0xa5a5a5a50000000000000000000000000007a897',
  'op-mainnet-block-132796100': '0xa5a5a5a5000000000000000000000000000312f9',
  'op-mainnet-block-132798000': '0xcd4e6b8ef3f24a58bb0ef0e7a1ccdde50ab6b62b',
  'op-mainnet-block-132799000': '0xa5a5a5a5000000000000000000000000000306ac',
  'op-sepolia-block-26207960': '0xa5a5a5a50000000000000000000000000001015f',
  'op-sepolia-block-26207961': '0xa5a5a5a500000000000000000000000000001064',
  'op-sepolia-block-26207962': '0x22d621991fb7b70812d7c448f7e74f6ca1c6c144',
  'op-sepolia-block-26207963': '0xd2ab9e2b4183bd821d95f9afce80f7d360f72b55',
  'op-sepolia-block-26208384': '0xe29479e2b6d874d86a0e8ddc65263a25d7794da9',
  'op-sepolia-block-26208858': '0x7963fff3ac263fc011325cad5709a6e9150a275b',
  'op-sepolia-block-26208927': '0x338a1edd2ceeca777131a4a6b61f42f93d4e8df0',
  'op-sepolia-block-26211680': '0xa5a0336809129eb66f66404c8cc5995b3f072eb5',
  'unichain-block-10211000': '0xa5a5a5a50000000000000000000000000000067a',
  'unichain-block-10215000': '0xa5a5a5a50000000000000000000000000000067a',
  'op-mainnet-block-120794432': '0xa5a5a5a5000000000000000000000000000feb21',
  'op-mainnet-block-121003241': '0x22fb762f614ede47d33ca2de13a5fb16354a7a5b',
  'op-mainnet-block-121049889': '0xa5a5a5a50000000000000000000000000007cc1c',
  'op-mainnet-block-121057303': '0x0eb22708b72cc00b04346eee1767c0e147f8db2d',
};
/** OP's L1Block predeploy: the L1-attributes deposit of every block reads and writes its storage. */
const L1_BLOCK = '0x4200000000000000000000000000000000000015';

const hex = (b: Uint8Array): string => '0x' + Buffer.from(b).toString('hex');
const bytes = (h: string): Uint8Array => Uint8Array.from(Buffer.from(h.slice(2), 'hex'));
const q = (n: number | bigint): string => '0x' + n.toString(16);
/** An RLP scalar's bytes as a quantity. */
const scalar = (b: Uint8Array): string => q(b.length === 0 ? 0n : BigInt(hex(b)));

type Answer = { result?: any; error?: { code: number; message: string } };

async function call(url: string, body: unknown): Promise<any> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return res.json();
}

async function rpc(url: string, method: string, params: unknown[]): Promise<Answer> {
  return (await call(url, { jsonrpc: '2.0', id: 1, method, params })) as Answer;
}

async function ok(url: string, method: string, params: unknown[]): Promise<any> {
  const a = await rpc(url, method, params);
  if (a.error !== undefined) throw new Error(`${method}(${JSON.stringify(params)}): ${a.error.message}`);
  return a.result;
}

/** Checks an EIP-1186 proof against `root` with @ethereumjs/mpt: the proven value (null = proven absent). */
async function proven(t: Test, root: string, key: Uint8Array, proof: string[], what: string): Promise<Uint8Array | null> {
  t.equal(hex(keccak_256(bytes(proof[0]!))), root, `${what}: the proof starts at the root`);
  return verifyMerkleProof(key, proof.map(bytes), { useKeyHashing: true });
}

for (const f of fixtures) {
  t.test(`${f.name}: served by the witness node`, async (t) => {
    const fx = await loadWitnessFixture(f.file);
    const node: WitnessNode = await startWitnessNode(fx);
    t.teardown(() => node.close());
    const url = node.url;
    t.match(url, /^http:\/\/127\.0\.0\.1:\d+\/$/);

    t.equal(await ok(url, 'eth_chainId', []), q(fx.chainId));
    t.equal(await ok(url, 'eth_blockNumber', []), q(fx.parent.number), 'the head is the parent');
    const latest = await ok(url, 'eth_getBlockByNumber', ['latest', false]);
    t.equal(latest.hash, fx.parent.hash);
    t.equal(latest.stateRoot, fx.parent.stateRoot);
    t.same(await ok(url, 'eth_getBlockByHash', [fx.parent.hash, false]), latest);
    t.same(await ok(url, 'eth_getBlockByNumber', [q(fx.block.number + 1), false]), null, 'past the block: null');
    const below = await rpc(url, 'eth_getBlockByNumber', [q(fx.parent.number - 1), false]);
    if (fx.preimages.has(fx.parent.parentHash)) t.equal(below.result.hash, fx.parent.parentHash);
    else t.match(below.error, { code: -32000, message: /not in the witness/ }, 'an ancestor the store cannot reach is an error, not null');

    // The block: header fields, transactions (hashes and full objects), raw bytes.
    const block = await ok(url, 'eth_getBlockByNumber', [q(fx.block.number), true]);
    t.equal(block.hash, fx.expectedBlockHash);
    t.equal(block.parentHash, fx.parent.hash);
    t.equal(block.baseFeePerGas, q(fx.block.baseFeePerGas));
    t.equal(block.transactions.length, fx.block.transactions.length);
    if (fx.header !== null) {
      t.equal(block.receiptsRoot, fx.header.receiptsRoot);
      t.equal(fx.header.transactionsRoot, orderedTrieRoot(fx.block.transactions.map(bytes)), "the transactions are the header's");
    } else {
      t.notOk('stateRoot' in block || 'receiptsRoot' in block, 'roots the witness does not know are omitted, not invented');
    }
    const hashes = (await ok(url, 'eth_getBlockByHash', [fx.expectedBlockHash, false])).transactions as string[];
    const senders = new Map<string, bigint | null>();
    for (let i = 0; i < fx.block.transactions.length; i++) {
      const raw = fx.block.transactions[i]!;
      const tx = block.transactions[i];
      t.equal(tx.hash, hex(keccak_256(bytes(raw))), `tx ${i}: hash`);
      t.equal(hashes[i], tx.hash);
      t.equal(tx.transactionIndex, q(i));
      t.equal(tx.blockHash, fx.expectedBlockHash);
      t.match(tx.from, /^0x[0-9a-f]{40}$/);
      if (i === 0) t.match(tx, { type: '0x7e', sourceHash: /^0x[0-9a-f]{64}$/, mint: /^0x/, depositReceiptVersion: '0x1' }, 'the L1-attributes deposit');
      if (!senders.has(tx.from)) senders.set(tx.from, tx.type === '0x7e' ? null : BigInt(tx.nonce));
    }
    const last = fx.block.transactions.length - 1;
    t.equal(await ok(url, 'eth_getRawTransactionByHash', [hashes[last]]), fx.block.transactions[last]);
    t.equal(await ok(url, 'eth_getRawTransactionByBlockNumberAndIndex', [q(fx.block.number), q(0)]), fx.block.transactions[0]);
    t.same(await ok(url, 'eth_getTransactionByHash', [hashes[last]]), block.transactions[last]);
    t.same(await ok(url, 'eth_getTransactionByBlockNumberAndIndex', [q(fx.block.number), q(last)]), block.transactions[last]);

    // Senders at the parent: balance and nonce served; a signed tx's nonce is the sender's nonce at the parent
    // (the first one from each sender), and each account proof verifies against the state root.
    for (const [from, firstNonce] of senders) {
      const balance = await ok(url, 'eth_getBalance', [from, 'latest']);
      const nonce = await ok(url, 'eth_getTransactionCount', [from, { blockHash: fx.parent.hash }]);
      if (firstNonce !== null) t.equal(BigInt(nonce), firstNonce, `${from}: nonce at the parent = its first tx's nonce`);
      const p = await ok(url, 'eth_getProof', [from, [], q(fx.parent.number)]);
      const value = await proven(t, fx.parent.stateRoot, bytes(from), p.accountProof, from);
      t.ok(value !== null, `${from}: the proof proves the account`);
      const [n, b, storageRoot, codeHash] = RLP.decode(value!) as Uint8Array[];
      t.same([scalar(n!), scalar(b!)], [nonce, balance], `${from}: proven nonce and balance are served`);
      t.same([p.storageHash, p.codeHash], [hex(storageRoot!), hex(codeHash!)]);
    }
    t.ok(senders.size > 0 && [...senders.keys()].every((a) => node.touched.accounts.has(a)), 'touched records every account asked for');

    // L1Block: code hashes to its codeHash, and the storage proofs verify against the account's storage root.
    const l1 = await ok(url, 'eth_getProof', [L1_BLOCK, ['0x0', '0x1', '0x3'], 'latest']);
    t.equal(hex(keccak_256(bytes(await ok(url, 'eth_getCode', [L1_BLOCK, 'latest'])))), l1.codeHash, 'L1Block code matches its codeHash');
    for (const s of l1.storageProof) {
      const v = await proven(t, l1.storageHash, bytes('0x' + s.key.slice(2).padStart(64, '0')), s.proof, `L1Block slot ${s.key}`);
      t.equal(v === null ? '0x0' : scalar(RLP.decode(v) as Uint8Array), s.value, `L1Block slot ${s.key}`);
      t.equal(BigInt(await ok(url, 'eth_getStorageAt', [L1_BLOCK, s.key, 'latest'])), BigInt(s.value));
    }
    t.ok(node.touched.slots.get(L1_BLOCK)?.has('0x' + '0'.repeat(63) + '1'), 'touched records slots');

    // A proven absence is a real zero; a path through a node the witness lacks is an error, never a zero.
    const absent = PROVEN_ABSENT[f.name]!;
    t.ok(absent !== undefined, 'the table names an absent account for every fixture');
    t.equal(await ok(url, 'eth_getBalance', [absent, 'latest']), '0x0');
    t.equal(await ok(url, 'eth_getTransactionCount', [absent, 'latest']), '0x0');
    t.equal(await ok(url, 'eth_getCode', [absent, 'latest']), '0x');
    const ap = await ok(url, 'eth_getProof', [absent, [], 'latest']);
    t.equal(await proven(t, fx.parent.stateRoot, bytes(absent), ap.accountProof, absent), null, 'the proof proves the absence');
    const unknown = '0x00000000000000000000000000000000000000aa';
    for (const m of ['eth_getBalance', 'eth_getTransactionCount', 'eth_getCode']) {
      t.match(await rpc(url, m, [unknown, 'latest']), { error: { code: -32000, message: /not in the witness/ } }, `${m} of an account outside the witness`);
    }
    t.match(await rpc(url, 'eth_getStorageAt', [unknown, '0x0', 'latest']), { error: { code: -32000 } });

    // State elsewhere than the parent, unknown methods, a batch.
    t.match(await rpc(url, 'eth_getBalance', [absent, q(fx.block.number)]), { error: { code: -32000, message: /not in the witness/ } }, 'state at the block itself is not served');
    t.match(await rpc(url, 'eth_getBalance', [absent, { blockHash: fx.expectedBlockHash }]), { error: { code: -32000 } });
    t.match(await rpc(url, 'eth_sendRawTransaction', ['0x00']), { error: { code: -32601 } });
    t.match(await rpc(url, 'eth_getBalance', ['0x12', 'latest']), { error: { code: -32602 } });
    const batch = (await call(url, [
      { jsonrpc: '2.0', id: 7, method: 'eth_chainId', params: [] },
      { jsonrpc: '2.0', id: 8, method: 'eth_getBalance', params: [unknown, 'latest'] },
      { jsonrpc: '2.0', id: 9, method: 'eth_blockNumber' },
    ])) as (Answer & { id: number })[];
    t.same(batch.map((a) => [a.id, a.result ?? a.error?.code]), [[7, q(fx.chainId)], [8, -32000], [9, q(fx.parent.number)]], 'a batch answers each call in order');
  });
}
