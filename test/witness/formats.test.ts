// The fixture formats read by hand: tar (ustar, pax path, gzip), the RocksDB write-ahead log (CRC-32C records split
// across 32 KiB blocks, WriteBatch tags) and SST, and the preimage rule (key == keccak256(value)). Bad input is a clear
// Error, never a partial store. Synthetic archives are built here; the SST is read from the one fixture that has it.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import t from 'tap';
import { keccak_256 } from '@noble/hashes/sha3.js';
import { loadWitnessFixture } from '../../scripts/witness/fixture.js';
import { crc32c, readSst, readWal } from '../../scripts/witness/rocksdb.js';
import { startWitnessNode } from '../../scripts/witness/server.js';
import { readTar } from '../../scripts/witness/tar.js';
import { OP_BLOCKS_ABSENT, opBlocksDir } from '../helpers/op-blocks.js';

/** A tar header block for `name` of `size` bytes and `type`, with a valid checksum. */
function tarHeader(name: string, size: number, type = '0'): Buffer {
  const h = Buffer.alloc(512);
  h.write(name, 0, 100, 'utf8');
  h.write('0000644\0', 100);
  h.write(size.toString(8).padStart(11, '0') + '\0', 124);
  h.write(type, 156);
  h.write('ustar\0', 257);
  h.write('00', 263);
  h.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
  return h;
}

const pad = (b: Buffer): Buffer => Buffer.concat([b, Buffer.alloc((512 - (b.length % 512)) % 512)]);

function tar(files: { name: string; data: Buffer; pax?: string }[]): Buffer {
  const parts: Buffer[] = [];
  for (const f of files) {
    if (f.pax !== undefined) {
      const rec = ` path=${f.pax}\n`;
      let len = rec.length + 2;
      if (String(len).length + rec.length !== len) len = String(len + 1).length + rec.length;
      const body = Buffer.from(`${len}${rec}`);
      parts.push(tarHeader('PaxHeader', body.length, 'x'), pad(body));
    }
    parts.push(tarHeader(f.name, f.data.length), pad(f.data));
  }
  return Buffer.concat([...parts, Buffer.alloc(1024)]);
}

/** A WriteBatch of puts ([key, value]) and deletions ([key]). */
function batch(seq: number, ops: ([Buffer, Buffer] | [Buffer])[]): Buffer {
  const varint = (n: number): Buffer => {
    const out: number[] = [];
    while (n >= 0x80) {
      out.push((n & 0x7f) | 0x80);
      n = Math.floor(n / 128);
    }
    out.push(n);
    return Buffer.from(out);
  };
  const head = Buffer.alloc(12);
  head.writeUInt32LE(seq, 0);
  head.writeUInt32LE(ops.length, 8);
  const body = ops.map((o) => (o.length === 2 ? Buffer.concat([Buffer.from([1]), varint(o[0].length), o[0], varint(o[1].length), o[1]]) : Buffer.concat([Buffer.from([0]), varint(o[0].length), o[0]])));
  return Buffer.concat([head, ...body]);
}

const mask = (c: number): number => (((c >>> 15) | (c << 17)) + 0xa282ead8) >>> 0;

/** A write-ahead log of `batches`, each split into FIRST/MIDDLE/LAST records where it crosses a 32 KiB block. */
function wal(batches: Buffer[]): Buffer {
  const out: Buffer[] = [];
  let pos = 0;
  for (const b of batches) {
    let off = 0;
    let first = true;
    while (off < b.length || first) {
      const left = 32768 - (pos % 32768);
      if (left < 7) {
        out.push(Buffer.alloc(left));
        pos += left;
        continue;
      }
      const n = Math.min(b.length - off, left - 7);
      const last = off + n === b.length;
      const type = first && last ? 1 : first ? 2 : last ? 4 : 3;
      const rec = Buffer.alloc(7 + n);
      rec.writeUInt16LE(n, 4);
      rec[6] = type;
      b.copy(rec, 7, off, off + n);
      rec.writeUInt32LE(mask(crc32c(rec.subarray(6))), 0);
      out.push(rec);
      pos += rec.length;
      off += n;
      first = false;
    }
  }
  return Buffer.concat(out);
}

const kv = (value: Buffer): [Buffer, Buffer] => [Buffer.from(keccak_256(value)), value];

function sink(): { puts: Map<string, Buffer>; put(k: Buffer, v: Buffer): void; delete(k: Buffer): void } {
  const puts = new Map<string, Buffer>();
  return { puts, put: (k, v) => void puts.set(k.toString('hex'), v), delete: (k) => void puts.delete(k.toString('hex')) };
}

t.test('CRC-32C is Castagnoli (the standard check value)', async (t) => {
  t.equal(crc32c(Buffer.from('123456789')), 0xe3069283);
});

t.test('tar: ustar files, a pax path, gzip; corrupt and truncated archives are errors', async (t) => {
  const a = tar([
    { name: 'x/fixture.json', data: Buffer.from('{}') },
    { name: 'short', data: Buffer.alloc(700, 7), pax: 'x/a-name-longer-than-the-ustar-field/' + 'n'.repeat(120) },
  ]);
  for (const archive of [a, gzipSync(a)]) {
    const e = readTar(archive);
    t.same(e.map((x) => [x.name, x.data.length]), [['x/fixture.json', 2], ['x/a-name-longer-than-the-ustar-field/' + 'n'.repeat(120), 700]]);
  }
  const bad = Buffer.from(a);
  bad.writeUInt8(bad.readUInt8(3) ^ 0xff, 3);
  t.throws(() => readTar(bad), /header at byte 0 fails its checksum/);
  t.throws(() => readTar(a.subarray(0, a.length - 1024 - 600)), /runs past the end of the archive \(truncated\)/);
});

t.test('WAL: batches split across 32 KiB blocks, puts and deletions; a bad CRC, a cut-off batch, an unknown tag are errors', async (t) => {
  const big = kv(Buffer.alloc(70_000, 0xab)); // spans three blocks: FIRST, MIDDLE, LAST
  const small = kv(Buffer.from('small'));
  const gone = kv(Buffer.from('deleted later'));
  const log = wal([batch(1, [small, gone]), batch(3, [big]), batch(4, [[gone[0]]])]);
  const s = sink();
  readWal(log, s, 'test.log');
  t.same([...s.puts.keys()].sort(), [small[0].toString('hex'), big[0].toString('hex')].sort(), 'puts kept, deletion applied');
  t.ok(s.puts.get(big[0].toString('hex'))!.equals(big[1]), 'a value split over three records is whole');

  const flipped = Buffer.from(log);
  flipped.writeUInt8(flipped.readUInt8(40) ^ 1, 40);
  t.throws(() => readWal(flipped, sink(), 'test.log'), /test\.log: record at byte 0 fails its CRC-32C check/);
  t.throws(() => readWal(log.subarray(0, 40_000), sink(), 'test.log'), /runs past the end of the file|cut off/);
  const merge = batch(9, [small]);
  merge[12] = 0x2; // kTypeMerge
  t.throws(() => readWal(wal([merge]), sink(), 'test.log'), /record tag 0x2 is not supported/);
  const miscounted = batch(9, [small]);
  miscounted.writeUInt32LE(2, 8);
  t.throws(() => readWal(wal([miscounted]), sink(), 'test.log'), /header says 2 records, found 1/);
});

/** A minimal kona-executor fixture.json (a made-up Holocene parent on OP Sepolia). */
function konaJson(stateRoot: string): Buffer {
  const z32 = '0x' + '00'.repeat(32);
  return Buffer.from(JSON.stringify({
    rollup_config: { l2_chain_id: 11155420, holocene_time: 0, canyon_time: 0, chain_op_config: { eip1559Elasticity: 6, eip1559Denominator: 50, eip1559DenominatorCanyon: 250 } },
    parent_header: {
      parentHash: z32, sha3Uncles: '0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347', miner: '0x4200000000000000000000000000000000000011',
      stateRoot, transactionsRoot: z32, receiptsRoot: z32, logsBloom: '0x' + '00'.repeat(256), difficulty: '0x0', number: '0x10', gasLimit: '0x1c9c380',
      gasUsed: '0x0', timestamp: '0x67f6a95a', extraData: '0x00000000fa00000006', mixHash: z32, nonce: '0x0000000000000000', baseFeePerGas: '0x64',
      withdrawalsRoot: z32, blobGasUsed: '0x0', excessBlobGas: '0x0', parentBeaconBlockRoot: z32,
    },
    executing_payload: {
      timestamp: '0x67f6a95c', prevRandao: z32, suggestedFeeRecipient: '0x4200000000000000000000000000000000000011', parentBeaconBlockRoot: z32,
      gasLimit: '0x1c9c380', eip1559Params: '0x0000000000000000',
      // A well-formed deposit from the L1-attributes depositor.
      transactions: ['0x7ef853' + 'a0' + '11'.repeat(32) + '94deaddeaddeaddeaddeaddeaddeaddeaddead0001' + '944200000000000000000000000000000000000015' + '80' + '80' + '830f4240' + '80' + '80'],
    },
    expected_block_hash: '0x' + '22'.repeat(32),
  }));
}

t.test('a kona fixture whose store holds a value under a key that is not its hash is refused; a good one serves', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'witness-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  // State: one account leaf at the root (a trie of one account).
  const node = Buffer.from('e2a0' + '33'.repeat(32) + '80', 'hex'); // a leaf with an empty value is still a node
  const root = kv(node)[0];
  const good = join(dir, 'op-sepolia-block-17.tar');
  writeFileSync(good, tar([{ name: 'block-17/fixture.json', data: konaJson('0x' + root.toString('hex')) }, { name: 'block-17/kv/000004.log', data: wal([batch(1, [kv(node)])]) }, { name: 'block-17/kv/._000004.log', data: Buffer.from('apple') }]));
  const fx = await loadWitnessFixture(good);
  t.equal(fx.preimages.size, 1);
  t.equal(fx.block.number, 17);
  t.equal(fx.block.extraData, '0x00000000fa00000006', 'zero eip1559Params stand for the Canyon defaults');
  t.equal(fx.computedBaseFee, 100n - (100n * (0x1c9c380n / 6n)) / (0x1c9c380n / 6n) / 250n, 'an empty parent lowers the base fee by 1/250');
  const n = await startWitnessNode(fx);
  t.teardown(() => n.close());
  const res = await fetch(n.url, { method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: ['0x00000000000000000000000000000000000000aa', 'latest'] }) });
  t.match(await res.json(), { result: '0x0' }, 'the one-leaf trie proves any other account absent');

  const bad = join(dir, 'op-sepolia-block-40.tar');
  writeFileSync(bad, tar([{ name: 'block-40/fixture.json', data: konaJson('0x' + root.toString('hex')) }, { name: 'block-40/kv/000004.log', data: wal([batch(1, [[root, Buffer.from('not the preimage')]])]) }]));
  await t.rejects(loadWitnessFixture(bad), /is not the keccak256 of its value/);
  await t.rejects(loadWitnessFixture(join(dir, 'nothing.tar')), /no such file/);
});

const dir = opBlocksDir();
t.test('SST: the one fixture with an SST file reads whole, every key the keccak of its value, all also in the log', { skip: dir === null ? OP_BLOCKS_ABSENT : false }, async (t) => {
  const entries = readTar(readFileSync(join(dir!, 'kona-executor', 'op-sepolia-block-26208927.tar')));
  const sst = sink();
  const log = sink();
  readSst(entries.find((e) => /kv\/\d+\.sst$/.test(e.name))!.data, sst, 'sst');
  readWal(entries.find((e) => /kv\/\d+\.log$/.test(e.name))!.data, log, 'log');
  t.ok(sst.puts.size > 2000, `${sst.puts.size} SST entries`);
  let bad = 0;
  let missing = 0;
  for (const [k, v] of sst.puts) {
    if (Buffer.from(keccak_256(v)).toString('hex') !== k) bad++;
    if (!log.puts.get(k)?.equals(v)) missing++;
  }
  t.equal(bad, 0, 'every SST entry is a preimage');
  t.equal(missing, 0, 'the SST and the log agree on every key they share');
});
