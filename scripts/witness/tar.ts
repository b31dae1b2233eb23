// A tar reader for the real-block fixtures (ustar, pax and GNU long-name headers; gzip detected by its magic).
// Reads a whole archive held in memory into named file entries; writes nothing and knows nothing of what the files mean.
import { gunzipSync } from 'node:zlib';

/** One regular file of an archive: its path inside the archive and its bytes (a view into the archive). */
export interface TarEntry {
  name: string;
  data: Buffer;
}

const BLOCK_BYTES = 512;

/** A NUL-terminated ASCII field of a header. */
function field(h: Buffer, at: number, len: number): string {
  const end = h.indexOf(0, at);
  return h.toString('utf8', at, end === -1 || end > at + len ? at + len : end);
}

/** An octal (or GNU base-256) size field. */
function sizeField(h: Buffer, at: number, len: number, name: string): number {
  if (((h[at] as number) & 0x80) !== 0) {
    let n = 0;
    for (let i = at + 1; i < at + len; i++) n = n * 256 + (h[i] as number);
    return n;
  }
  const s = field(h, at, len).trim();
  if (!/^[0-7]*$/.test(s)) throw new Error(`tar: entry ${JSON.stringify(name)} has a malformed size field ${JSON.stringify(s)}`);
  return s === '' ? 0 : parseInt(s, 8);
}

/** The records of a pax extended header ("<len> <key>=<value>\n" each). */
function paxRecords(data: Buffer): Map<string, string> {
  const out = new Map<string, string>();
  let pos = 0;
  while (pos < data.length) {
    const space = data.indexOf(0x20, pos);
    if (space === -1) break;
    const len = parseInt(data.toString('ascii', pos, space), 10);
    if (!Number.isSafeInteger(len) || len <= 0 || pos + len > data.length) throw new Error('tar: malformed pax header record');
    const rec = data.toString('utf8', space + 1, pos + len - 1);
    const eq = rec.indexOf('=');
    if (eq !== -1) out.set(rec.slice(0, eq), rec.slice(eq + 1));
    pos += len;
  }
  return out;
}

/** Whether the header block checksums right (the sum of its bytes with the checksum field read as spaces). */
function checksumOk(h: Buffer): boolean {
  const want = parseInt(field(h, 148, 8).trim(), 8);
  let sum = 0;
  for (let i = 0; i < BLOCK_BYTES; i++) sum += i >= 148 && i < 156 ? 0x20 : (h[i] as number);
  return sum === want;
}

/**
 * The regular files of a tar archive (gunzipped first when `archive` starts with the gzip magic). Directories, links
 * and metadata entries are left out; a truncated or corrupt archive throws an Error saying where.
 */
export function readTar(archive: Buffer): TarEntry[] {
  const buf = archive[0] === 0x1f && archive[1] === 0x8b ? gunzipSync(archive) : archive;
  const out: TarEntry[] = [];
  let pos = 0;
  let longName: string | null = null;
  let pax: Map<string, string> | null = null;
  while (pos + BLOCK_BYTES <= buf.length) {
    const h = buf.subarray(pos, pos + BLOCK_BYTES);
    if (h.every((b) => b === 0)) break; // end-of-archive marker
    if (!checksumOk(h)) throw new Error(`tar: header at byte ${pos} fails its checksum (not a tar archive, or corrupt)`);
    const type = String.fromCharCode(h[156] as number);
    let name = field(h, 0, 100);
    const prefix = field(h, 257 + 88, 155);
    if (field(h, 257, 6) === 'ustar' && prefix !== '') name = `${prefix}/${name}`;
    // A pax header may carry the size (files over 8 GiB); otherwise the octal field.
    const paxSize = pax?.get('size');
    const size = paxSize !== undefined && /^\d+$/.test(paxSize) ? Number(paxSize) : sizeField(h, 124, 12, name);
    const start = pos + BLOCK_BYTES;
    if (start + size > buf.length) throw new Error(`tar: entry ${JSON.stringify(name)} runs past the end of the archive (truncated)`);
    const data = buf.subarray(start, start + size);
    pos = start + Math.ceil(size / BLOCK_BYTES) * BLOCK_BYTES;
    if (type === 'x') {
      pax = paxRecords(data);
      continue;
    }
    if (type === 'g') continue; // global pax header: nothing in it matters here
    if (type === 'L') {
      longName = field(data, 0, data.length);
      continue;
    }
    const fullName = pax?.get('path') ?? longName ?? name;
    pax = null;
    longName = null;
    if (type === '0' || type === '\0' || type === '7') out.push({ name: fullName, data });
  }
  return out;
}
