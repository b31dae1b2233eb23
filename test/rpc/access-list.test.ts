// X Layer's access lists (metadata.access_list, EIP-7928) answer pending eth_getBalance / eth_getStorageAt /
// eth_getCode / eth_getTransactionCount the moment their flashblock is applied, with execution off and no node
// (the daemon's node URL is a closed port here): the values are the lists' post-values, newest flashblock first.
import t from 'tap';
import { asOpRbuilder, asXLayer, type ListedAccount } from '../helpers/dialects.js';
import { unichainMessages } from '../helpers/fixtures.js';
import { feed } from '../helpers/ingest.js';
import { startRpc } from '../helpers/rpc-harness.js';

const SENDER = '0xc0043c50ba044a5f948d32faed806913d781d428';
const CONTRACT = '0xf878f0340bf132c28f3211e8b46c569edf817495';
const NEW = '0x00000000000000000000000000000000000000c5';
const slot = (n: number): string => '0x' + n.toString(16).padStart(64, '0');

const lists: ListedAccount[][] = [
  [{ address: SENDER, balance: [[2, 1000n]], nonce: [[2, 0x1c8ea92n]] }],
  [{ address: SENDER, balance: [[3, 900n]], nonce: [[3, 0x1c8ea93n]] }, { address: CONTRACT, storage: [[1, [[3, 7n]]]], reads: [2] }],
  [{ address: NEW, code: [[4, '0x60006000fd']], nonce: [[4, 1n]] }],
  [{ address: CONTRACT, storage: [[1, [[5, 8n]]], [2, [[5, 9n]]]] }],
  [],
];

t.test('pending account reads answer from the access lists as each flashblock applies (execution off, no node)', async (t) => {
  const h = await startRpc();
  t.teardown(() => h.close());
  h.setUsable(true);
  const msgs = asXLayer(asOpRbuilder(structuredClone(unichainMessages()) as Record<string, any>[]), lists);
  const ok = async (method: string, params: unknown[]): Promise<unknown> => {
    const r = await h.call(method, params);
    if (r.error !== undefined) throw new Error(`${method}: ${r.error.message}`);
    return r.result;
  };
  feed(h.pipeline, msgs[0]);
  feed(h.pipeline, msgs[1]);
  t.equal(await ok('eth_getBalance', [SENDER, 'pending']), '0x384', 'balance after flashblock 1 (its last write)');
  t.equal(await ok('eth_getTransactionCount', [SENDER, '0x' + msgs[0]!.metadata.block_number.toString(16)]), '0x1c8ea93', 'nonce at the pending height');
  t.equal(await ok('eth_getStorageAt', [CONTRACT, '0x1', 'pending']), slot(7), 'storage written in flashblock 1');
  feed(h.pipeline, msgs[2]);
  t.equal(await ok('eth_getCode', [NEW, 'pending']), '0x60006000fd', 'code deployed in flashblock 2');
  feed(h.pipeline, msgs[3]);
  t.equal(await ok('eth_getStorageAt', [CONTRACT, slot(1), 'pending']), slot(8), 'a later flashblock overrides the slot');
  t.equal(await ok('eth_getStorageAt', [CONTRACT, '0x02', 'pending']), slot(9));
  t.equal(await ok('eth_getBalance', [SENDER, 'pending']), '0x384', 'fields a later list does not name keep their value');
  const r = await h.call('eth_getStorageAt', [CONTRACT, '0x3', 'pending']);
  t.ok(r.error !== undefined || r.result !== undefined, 'a slot the lists never wrote goes on as before (to the node)');
});

t.test('an access list that does not decode leaves the flashblock applied and the reads to the usual path', async (t) => {
  const h = await startRpc();
  t.teardown(() => h.close());
  h.setUsable(true);
  const msgs = asXLayer(asOpRbuilder(structuredClone(unichainMessages()) as Record<string, any>[]), lists);
  msgs[0]!.metadata.access_list = '0xffffff';
  feed(h.pipeline, msgs[0]);
  t.equal(h.state.pendingBlock()?.nextIndex, 1, 'applied');
  t.equal(h.state.pendingBlock()?.accessListComplete, false, 'its list is unknown, so no access-list answer');
  t.equal(h.state.accountAfter(SENDER, h.state.pendingBlock()!.number), null);
});
