// Reads the key/value pairs of a RocksDB directory as the real-block fixtures ship it: the write-ahead log (`*.log`,
// 32 KiB blocks of CRC-checked records carrying WriteBatches) and block-based SST files (Snappy blocks). Read-only,
// default column family semantics; knows nothing of what the keys mean (fixture.ts checks they are hashes).
import { createRequire } from 'node:module';

/** Where the pairs go, oldest write first: later puts and deletions override earlier ones. */
export interface KvSink {
  put(key: Buffer, value: Buffer): void;
  delete(key: Buffer): void;
}

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32C (Castagnoli) of `b`. */
export function crc32c(b: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < b.length; i++) c = (CRC_TABLE[(c ^ (b[i] as number)) & 0xff] as number) ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** RocksDB stores CRCs masked (so a CRC of data holding CRCs is not degenerate). */
function maskCrc(c: number): number {
  return (((c >>> 15) | (c << 17)) + 0xa282ead8) >>> 0;
}

/** A cursor over bytes that reads RocksDB's little-endian varints; errors name `what` it is reading. */
class Reader {
  constructor(
    readonly b: Buffer,
    public pos: number,
    readonly end: number,
    readonly what: string,
  ) {}

  get done(): boolean {
    return this.pos >= this.end;
  }

  fail(msg: string): never {
    throw new Error(`${this.what}: ${msg} at byte ${this.pos}`);
  }

  byte(): number {
    if (this.pos >= this.end) this.fail('unexpected end');
    return this.b[this.pos++] as number;
  }

  varint(): number {
    let n = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      const x = this.byte();
      n += (x & 0x7f) * mul;
      if ((x & 0x80) === 0) {
        if (!Number.isSafeInteger(n)) this.fail('varint too large');
        return n;
      }
      mul *= 128;
    }
    return this.fail('varint longer than 10 bytes');
  }

  /** A zig-zag signed varint (index-block size deltas). */
  signedVarint(): number {
    const u = this.varint();
    return u % 2 === 0 ? u / 2 : -(u + 1) / 2;
  }

  bytes(n: number): Buffer {
    if (this.pos + n > this.end) this.fail(`${n} bytes run past the end`);
    const out = this.b.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  slice(): Buffer {
    return this.bytes(this.varint());
  }
}

// ---- write-ahead log -------------------------------------------------------------------------------------------

const WAL_BLOCK_BYTES = 32768;
const FULL = 1;
const FIRST = 2;
const MIDDLE = 3;
const LAST = 4;
/** Recyclable record types (5..8) carry a 4-byte log number after the type: an 11-byte header. */
const RECYCLABLE_OFFSET = 4;
/** Records that carry metadata, not a batch (user-defined timestamp sizes, plain and recyclable). */
const UDT_SIZES = 9;
const RECYCLABLE_UDT_SIZES = 10;

/**
 * Applies every WriteBatch of a RocksDB write-ahead log to `sink`, in order. Each record's CRC-32C is checked; a
 * record that fails it, runs past the file, or has an unknown type is an Error naming the file and byte.
 */
export function readWal(buf: Buffer, sink: KvSink, name = 'WAL'): void {
  let pos = 0;
  let pending: Buffer[] | null = null;
  while (pos < buf.length) {
    const left = WAL_BLOCK_BYTES - (pos % WAL_BLOCK_BYTES);
    if (left < 7 || pos + 7 > buf.length) {
      pos += left; // block trailer: too small for a header
      continue;
    }
    const length = buf.readUInt16LE(pos + 4);
    const type = buf[pos + 6] as number;
    if (type === 0) {
      pos += left; // zeroed (preallocated) space: nothing more in this block
      continue;
    }
    const recyclable = (type >= FULL + RECYCLABLE_OFFSET && type <= LAST + RECYCLABLE_OFFSET) || type === RECYCLABLE_UDT_SIZES;
    const headerBytes = recyclable ? 11 : 7;
    const end = pos + headerBytes + length;
    if (end > buf.length || end - (pos - (pos % WAL_BLOCK_BYTES)) > WAL_BLOCK_BYTES) {
      throw new Error(`${name}: record at byte ${pos} (${length} bytes) runs past ${end > buf.length ? 'the end of the file' : 'its 32 KiB block'}`);
    }
    if (maskCrc(crc32c(buf.subarray(pos + 6, end))) !== buf.readUInt32LE(pos)) {
      throw new Error(`${name}: record at byte ${pos} fails its CRC-32C check (corrupt log)`);
    }
    const payload = buf.subarray(pos + headerBytes, end);
    const kind = recyclable && type !== RECYCLABLE_UDT_SIZES ? type - RECYCLABLE_OFFSET : type;
    if (kind === FULL) {
      if (pending !== null) throw new Error(`${name}: record at byte ${pos} starts a batch inside an unfinished one`);
      readWriteBatch(payload, sink, `${name} batch at byte ${pos}`);
    } else if (kind === FIRST) {
      if (pending !== null) throw new Error(`${name}: record at byte ${pos} starts a batch inside an unfinished one`);
      pending = [payload];
    } else if (kind === MIDDLE || kind === LAST) {
      if (pending === null) throw new Error(`${name}: record at byte ${pos} continues a batch that never started`);
      pending.push(payload);
      if (kind === LAST) {
        readWriteBatch(Buffer.concat(pending), sink, `${name} batch ending at byte ${pos}`);
        pending = null;
      }
    } else if (kind !== UDT_SIZES && type !== RECYCLABLE_UDT_SIZES) {
      throw new Error(`${name}: record at byte ${pos} has unknown type ${type}`);
    }
    pos = end;
  }
  if (pending !== null) throw new Error(`${name}: the last batch is cut off (a FIRST record without its LAST)`);
}

// WriteBatch record tags (rocksdb db/dbformat.h ValueType).
const TAG_DELETION = 0x0;
const TAG_VALUE = 0x1;
const TAG_LOG_DATA = 0x3;
const TAG_CF_DELETION = 0x4;
const TAG_CF_VALUE = 0x5;
const TAG_SINGLE_DELETION = 0x7;
const TAG_CF_SINGLE_DELETION = 0x8;
const TAG_NOOP = 0xd;

/** Applies one WriteBatch (sequence 8, count 4, then tagged records) to `sink`. */
export function readWriteBatch(batch: Buffer, sink: KvSink, what: string): void {
  if (batch.length < 12) throw new Error(`${what}: a WriteBatch needs a 12-byte header, got ${batch.length} bytes`);
  const count = batch.readUInt32LE(8);
  const r = new Reader(batch, 12, batch.length, what);
  let seen = 0;
  while (!r.done) {
    const tag = r.byte();
    switch (tag) {
      case TAG_VALUE:
        sink.put(r.slice(), r.slice());
        seen++;
        break;
      case TAG_CF_VALUE:
        r.varint();
        sink.put(r.slice(), r.slice());
        seen++;
        break;
      case TAG_DELETION:
      case TAG_SINGLE_DELETION:
        sink.delete(r.slice());
        seen++;
        break;
      case TAG_CF_DELETION:
      case TAG_CF_SINGLE_DELETION:
        r.varint();
        sink.delete(r.slice());
        seen++;
        break;
      case TAG_LOG_DATA:
        r.slice();
        break;
      case TAG_NOOP:
        break;
      default:
        r.fail(`record tag 0x${tag.toString(16)} is not supported (merge, range deletion and 2PC markers are not preimages)`);
    }
  }
  if (seen !== count) throw new Error(`${what}: header says ${count} records, found ${seen}`);
}

// ---- SST (block-based table) -----------------------------------------------------------------------------------

const TABLE_MAGIC = Buffer.from('f7cff485b741e288', 'hex'); // 0x88e241b785f4cff7, little-endian
const FOOTER_BYTES = 53;
const BLOCK_TRAILER_BYTES = 5;
const NO_COMPRESSION = 0;
const SNAPPY = 1;

interface Handle {
  offset: number;
  size: number;
}

let snappy: { uncompress(b: Uint8Array): Uint8Array } | null = null;

/** The bytes of the block at `h`, decompressed (none or Snappy; any other codec is an Error). */
function readBlock(buf: Buffer, h: Handle, name: string): Buffer {
  if (h.offset + h.size + BLOCK_TRAILER_BYTES > buf.length) throw new Error(`${name}: block at ${h.offset} (+${h.size}) runs past the end`);
  const raw = buf.subarray(h.offset, h.offset + h.size);
  const codec = buf[h.offset + h.size] as number;
  if (codec === NO_COMPRESSION) return raw;
  if (codec !== SNAPPY) throw new Error(`${name}: block at ${h.offset} uses compression type ${codec}; only none and Snappy are supported`);
  snappy ??= createRequire(import.meta.url)('snappyjs') as { uncompress(b: Uint8Array): Uint8Array };
  const out = snappy.uncompress(raw);
  return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
}

/** Where a block's entries end: before its restart array (u32 count, top bit = data-block index type). */
function entriesEnd(block: Buffer, what: string): number {
  if (block.length < 4) throw new Error(`${what}: block shorter than its restart count`);
  const restarts = block.readUInt32LE(block.length - 4) & 0x7fffffff;
  const end = block.length - 4 - 4 * restarts;
  if (end < 0) throw new Error(`${what}: restart array larger than the block`);
  return end;
}

/** Calls `each(key, value)` for the entries of a plain (key-delta, value-length) block. */
function eachEntry(block: Buffer, what: string, each: (key: Buffer, value: Buffer) => void): void {
  const r = new Reader(block, 0, entriesEnd(block, what), what);
  let key = Buffer.alloc(0);
  while (!r.done) {
    const shared = r.varint();
    const unshared = r.varint();
    const valueLen = r.varint();
    if (shared > key.length) r.fail('entry shares more key bytes than the previous key has');
    key = Buffer.concat([key.subarray(0, shared), r.bytes(unshared)]);
    each(key, r.bytes(valueLen));
  }
}

/** The data-block handles of an index block; `deltaValues` = format_version ≥ 4 (sizes delta-coded between restarts). */
function indexHandles(block: Buffer, deltaValues: boolean, what: string): Handle[] {
  if (!deltaValues) {
    const out: Handle[] = [];
    eachEntry(block, what, (_k, v) => {
      const r = new Reader(v, 0, v.length, what);
      out.push({ offset: r.varint(), size: r.varint() });
    });
    return out;
  }
  const end = entriesEnd(block, what);
  const restarts = new Set<number>();
  for (let p = end; p < block.length - 4; p += 4) restarts.add(block.readUInt32LE(p));
  const r = new Reader(block, 0, end, what);
  const out: Handle[] = [];
  let prev: Handle | null = null;
  while (!r.done) {
    const at = r.pos;
    r.varint(); // shared key bytes
    r.bytes(r.varint()); // key (index keys are not needed: every data block is read)
    let h: Handle;
    if (restarts.has(at) || prev === null) h = { offset: r.varint(), size: r.varint() };
    else h = { offset: prev.offset + prev.size + BLOCK_TRAILER_BYTES, size: prev.size + r.signedVarint() };
    out.push(h);
    prev = h;
  }
  return out;
}

/** The metaindex and index handles from the footer (format_version 1..5, or 6+ where the index is in the metaindex). */
function footer(buf: Buffer, name: string): { formatVersion: number; metaindex: Handle; index: Handle | null } {
  if (buf.length < FOOTER_BYTES || !buf.subarray(buf.length - 8).equals(TABLE_MAGIC)) {
    throw new Error(`${name}: not a RocksDB block-based table (magic number missing; legacy and plain tables are not supported)`);
  }
  const at = buf.length - FOOTER_BYTES;
  const formatVersion = buf.readUInt32LE(buf.length - 12);
  if (formatVersion >= 6) {
    const size = buf.readUInt32LE(at + 13);
    return { formatVersion, metaindex: { offset: at - BLOCK_TRAILER_BYTES - size, size }, index: null };
  }
  const r = new Reader(buf, at + 1, buf.length - 12, `${name} footer`);
  const metaindex = { offset: r.varint(), size: r.varint() };
  return { formatVersion, metaindex, index: { offset: r.varint(), size: r.varint() } };
}

// Internal-key value types in SST entries (the low byte of the 8-byte sequence/type trailer).
const SST_DELETION = 0x0;
const SST_VALUE = 0x1;
const SST_SINGLE_DELETION = 0x7;

/** Applies every entry of a block-based SST file to `sink` (in key order; values whole, deletions as deletions). */
export function readSst(buf: Buffer, sink: KvSink, name = 'SST'): void {
  const f = footer(buf, name);
  let index = f.index;
  if (index === null) {
    eachEntry(readBlock(buf, f.metaindex, name), `${name} metaindex`, (k, v) => {
      if (k.toString('latin1') === 'rocksdb.index') {
        const r = new Reader(v, 0, v.length, `${name} metaindex`);
        index = { offset: r.varint(), size: r.varint() };
      }
    });
  }
  if (index === null) throw new Error(`${name}: the metaindex names no index block`);
  const handles = indexHandles(readBlock(buf, index, name), f.formatVersion >= 4, `${name} index`);
  for (const h of handles) {
    const what = `${name} data block at ${h.offset}`;
    eachEntry(readBlock(buf, h, name), what, (ikey, value) => {
      if (ikey.length < 8) throw new Error(`${what}: internal key shorter than its 8-byte trailer`);
      const key = Buffer.from(ikey.subarray(0, ikey.length - 8));
      const type = ikey[ikey.length - 8] as number;
      if (type === SST_VALUE) sink.put(key, value);
      else if (type === SST_DELETION || type === SST_SINGLE_DELETION) sink.delete(key);
      else throw new Error(`${what}: entry type 0x${type.toString(16)} is not supported`);
    });
  }
}
