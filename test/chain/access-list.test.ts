// EIP-7928 block access lists as X Layer streams them (metadata.access_list): decoding against hand-assembled RLP
// of okx/optimism op-alloy's `sample_block_access_list` (metadata.rs tests), rejections, and post-value folding.
import t from 'tap';
import { applyAccessList, decodeAccessList, postDiffers, type AccountPost } from '../../src/chain/access-list.js';
import { encodeRlp, type RlpInput } from '../../src/chain/rlp.js';

// alloy-eip7928 field order: [address, storage_changes, storage_reads, balance_changes, nonce_changes, code_changes];
// the bytes were assembled by hand (a separate RLP encoder), not by the code under test.
const SAMPLE =
  '0xf853f6940000000000000000000000000000000000000042cac901c7c28064c30281c8c2050ac5c4808201f4c3c28007c8c7018560006000fd' +
  'db940000000000000000000000000000000000000099c0c12ac0c0c0';
const key = (n: number): string => '0x' + n.toString(16).padStart(64, '0');

t.test("op-alloy's sample access list decodes field by field", async (t) => {
  const r = decodeAccessList(SAMPLE);
  t.ok(r.ok);
  if (!r.ok) return;
  t.same(r.accounts, [
    {
      address: '0x0000000000000000000000000000000000000042',
      storageChanges: [{ slot: key(1), changes: [{ index: 0, value: 100n }, { index: 2, value: 200n }] }],
      storageReads: [key(5), key(10)],
      balanceChanges: [{ index: 0, value: 500n }],
      nonceChanges: [{ index: 0, value: 7n }],
      codeChanges: [{ index: 1, value: '0x60006000fd' }],
    },
    { address: '0x0000000000000000000000000000000000000099', storageChanges: [], storageReads: [key(42)], balanceChanges: [], nonceChanges: [], codeChanges: [] },
  ]);
});

/** RLP of nested byte arrays (the shared encoder; the sample above is the independent vector). */
const rlp = (x: RlpInput): string => '0x' + encodeRlp(x).toString('hex');
const b = (hex: string): Buffer => Buffer.from(hex, 'hex');
const ADDR = b('11'.repeat(20));
const E: RlpInput = [];

t.test('the empty list, and a 32-byte slot key (earlier drafts) decode', async (t) => {
  t.same(decodeAccessList('0xc0'), { ok: true, accounts: [] });
  const r = decodeAccessList(rlp([[ADDR, [[b('00'.repeat(31) + '07'), [[b('01'), b('09')]]]], E, E, E, E]]));
  t.ok(r.ok, r.ok ? 'decodes' : r.reason);
  if (r.ok) t.same(r.accounts[0]!.storageChanges, [{ slot: key(7), changes: [{ index: 1, value: 9n }] }]);
});

t.test('malformed access lists are rejected with a reason (okx metadata.rs: malformed RLP, trailing bytes)', async (t) => {
  const cases: [string, string, RegExp][] = [
    ['malformed RLP', '0xffffff', /./],
    ['trailing bytes', '0xc042', /trailing bytes/],
    ['not a list', '0x8180', /must be a list/],
    ['address of 19 bytes', rlp([[b('11'.repeat(19)), E, E, E, E, E]]), /address must be 20 bytes/],
    ['account with a seventh field', rlp([[ADDR, E, E, E, E, E, b('')]]), /extra fields/],
    ['account with five fields', rlp([[ADDR, E, E, E, E]]), /code change/],
    ['balance with leading zero', rlp([[ADDR, E, E, [[b(''), b('0001')]], E, E]]), /leading zero/],
    ['nonce above 64 bits', rlp([[ADDR, E, E, E, [[b('01'), b('010000000000000000')]], E]]), /exceeds 64 bits/],
    ['slot of 33 bytes', rlp([[ADDR, E, [b('01'.repeat(33))], E, E, E]]), /U256 or a 32-byte key/],
    ['a change with three fields', rlp([[ADDR, E, E, [[b('01'), b('02'), b('03')]], E, E]]), /extra fields/],
  ];
  for (const [name, hex, want] of cases) {
    const r = decodeAccessList(hex);
    t.notOk(r.ok, name);
    if (!r.ok) t.match(r.reason, want, `${name}: ${r.reason}`);
  }
});

t.test('post-values: the last write of each field; a later list overrides what it lists and keeps the rest', async (t) => {
  const r = decodeAccessList(SAMPLE);
  if (!r.ok) throw new Error(r.reason);
  const post = new Map<string, AccountPost>();
  applyAccessList(post, r.accounts);
  const a = post.get('0x0000000000000000000000000000000000000042')!;
  t.equal(a.balance, 500n);
  t.equal(a.nonce, 7n);
  t.equal(a.code, '0x60006000fd');
  t.same([...a.storage], [[key(1), 200n]], 'slot 1 after its write at index 2');
  const b = post.get('0x0000000000000000000000000000000000000099')!;
  t.same(b, { balance: undefined, nonce: undefined, code: undefined, storage: new Map() }, 'reads only: no post-values');
  applyAccessList(post, [{ address: '0x0000000000000000000000000000000000000042', storageChanges: [], storageReads: [], balanceChanges: [{ index: 4, value: 1n }], nonceChanges: [], codeChanges: [] }]);
  t.equal(post.get('0x0000000000000000000000000000000000000042')!.balance, 1n, 'the later flashblock overrides the balance');
  t.equal(post.get('0x0000000000000000000000000000000000000042')!.nonce, 7n, 'and keeps the nonce');
});

t.test('postDiffers names the fields where execution disagrees with the access list (the cross-check hook)', async (t) => {
  const post: AccountPost = { balance: 5n, nonce: 2n, code: '0x6000', storage: new Map([[key(1), 3n]]) };
  t.same(postDiffers(post, { balance: 5n, nonce: 2n, code: '0x6000', storage: new Map([[key(1), 3n]]) }), []);
  t.same(postDiffers(post, { balance: 6n, nonce: 2n, code: '0x6001', storage: new Map([[key(1), 4n]]) }), ['balance', 'code', 'storage ' + key(1)]);
  t.same(postDiffers({ balance: undefined, nonce: undefined, code: undefined, storage: new Map() }, { balance: 1n }), [], 'a field the list does not give is not compared');
});
