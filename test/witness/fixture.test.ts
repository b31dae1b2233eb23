// Every real-block fixture of ../shared/conformance/op-blocks loads as it is (tar, tar.gz, WAL, SST, ecotone gz), with
// every preimage checked by an independent keccak, headers that hash to what the chain says, and the base fee computed
// from the parent equal to the real one wherever the block's header is known.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { RLP } from '@ethereumjs/rlp';
import { keccak_256 } from '@noble/hashes/sha3.js';
import { loadWitnessFixture, type WitnessFixture } from '../../scripts/witness/fixture.js';
import { holoceneExtraData } from '../../scripts/witness/header.js';
import { readTar } from '../../scripts/witness/tar.js';
import { OP_BLOCKS_ABSENT, opBlockFixtures } from '../helpers/op-blocks.js';

const fixtures = opBlockFixtures();
if (fixtures.length === 0) t.plan(0, OP_BLOCKS_ABSENT);

const hex = (b: Uint8Array): string => '0x' + Buffer.from(b).toString('hex');

/** The header's RLP from kona's JSON by another RLP encoder (@ethereumjs/rlp), field order per the execution specs. */
const ORDER = ['parentHash', 'sha3Uncles', 'miner', 'stateRoot', 'transactionsRoot', 'receiptsRoot', 'logsBloom', 'difficulty', 'number', 'gasLimit',
  'gasUsed', 'timestamp', 'extraData', 'mixHash', 'nonce', 'baseFeePerGas', 'withdrawalsRoot', 'blobGasUsed', 'excessBlobGas', 'parentBeaconBlockRoot', 'requestsHash'];
const SCALARS = new Set(['difficulty', 'number', 'gasLimit', 'gasUsed', 'timestamp', 'baseFeePerGas', 'blobGasUsed', 'excessBlobGas']);
function oracleHash(j: Record<string, string>): string {
  const fields = ORDER.filter((k) => j[k] !== undefined).map((k) => (SCALARS.has(k) ? (BigInt(j[k]!) === 0n ? new Uint8Array(0) : BigInt(j[k]!)) : Buffer.from(j[k]!.slice(2), 'hex')));
  return hex(keccak_256(RLP.encode(fields)));
}

const loaded = new Map<string, WitnessFixture>();
t.before(async () => {
  for (const f of fixtures) loaded.set(f.name, await loadWitnessFixture(f.file));
});

for (const f of fixtures) {
  t.test(`${f.name}: loads with verified preimages, a real parent header and the block's base fee`, async (t) => {
    const fx = loaded.get(f.name)!;
    t.equal(fx.name, f.name);
    t.equal(fx.layout, f.layout);
    t.equal(fx.block.number, fx.parent.number + 1, 'the block is the parent + 1');
    t.ok(fx.preimages.size > 0, `${fx.preimages.size} preimages`);
    let bad = 0;
    for (const [k, v] of fx.preimages) if (hex(keccak_256(v)) !== k) bad++;
    t.equal(bad, 0, 'every preimage is the keccak256 of its value (independent keccak)');
    t.ok(fx.preimages.has(fx.parent.stateRoot), "the parent's state root node is in the witness");
    t.equal(fx.parent.hash, hex(keccak_256(fx.parent.rlp)), "the parent's hash is the keccak of its RLP");
    if (f.layout === 'kona-executor') {
      // The same header re-encoded from kona's JSON by another encoder hashes the same.
      const fj = readTar(readFileSync(f.file)).find((e) => e.name.endsWith('/fixture.json') && !e.name.split('/').pop()!.startsWith('._'))!;
      const j = JSON.parse(fj.data.toString('utf8')) as { parent_header: Record<string, string>; expected_block_hash: string };
      t.equal(fx.parent.hash, oracleHash(j.parent_header), 'the parent hash matches an independent RLP encoding');
      t.equal(fx.expectedBlockHash, j.expected_block_hash.toLowerCase());
    } else {
      t.equal(fx.header!.parentHash, fx.parent.hash, "the block's header names this parent");
    }
    t.equal(fx.block.transactions.length > 0 && fx.block.transactions[0]!.startsWith('0x7e'), true, 'the L1-attributes deposit comes first');
    t.equal(fx.block.baseFeePerGas, fx.header?.baseFeePerGas ?? fx.computedBaseFee);
    if (fx.header !== null) {
      t.equal(fx.header.hash, fx.expectedBlockHash, "the block's header hashes to the expected block hash");
      t.equal(fx.computedBaseFee, fx.header.baseFeePerGas, `base fee computed from the parent (${fx.computedBaseFee}) is the real one`);
      if (fx.block.eip1559Params !== null) t.equal(holoceneExtraData(fx.block.eip1559Params, { denominator: 250n, elasticity: 6n }), fx.header.extraData, 'Holocene extraData = 0x00 ++ eip1559Params');
    }
  });
}

const CONSECUTIVE = ['op-sepolia-block-26207960', 'op-sepolia-block-26207961', 'op-sepolia-block-26207962', 'op-sepolia-block-26207963'];
const consecutivePresent = CONSECUTIVE.every((n) => fixtures.some((f) => f.name === n));
t.test('the consecutive OP Sepolia fixtures link: each parent_header is the previous block, and its header is known', { skip: consecutivePresent ? false : 'the consecutive OP Sepolia fixtures are not all present' }, async (t) => {
  const names = CONSECUTIVE;
  const chain = names.map((n) => loaded.get(n));
  for (let i = 1; i < chain.length; i++) {
    const prev = chain[i - 1]!;
    const cur = chain[i]!;
    t.equal(cur.parent.parentHash, prev.parent.hash, `${names[i]}'s parent follows ${names[i - 1]}'s parent`);
    t.equal(cur.parent.hash, prev.expectedBlockHash, `${names[i - 1]}'s expected hash is ${names[i]}'s parent`);
    t.ok(prev.header !== null, `${names[i - 1]} knows its header`);
    t.equal(prev.computedBaseFee, cur.parent.baseFeePerGas, `${names[i - 1]}: computed base fee = the real ${cur.parent.baseFeePerGas}`);
  }
  t.equal(chain[3]!.header, null, 'the last one knows only its hash');
});
