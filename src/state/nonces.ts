// A held block's sender → highest nonce index (eth_getTransactionCount pending), without an entry object per sender:
// a KeyTable of the position holding each sender's highest nonce, the senders' bytes in the block's columns.
// Mutated by PendingBlock only, as senders become known.
import { addressKey, addressKeyOfBytes, bytesAreHex } from '../chain/keys.js';
import { SENDER_BYTES } from './columns.js';
import { KeyTable } from '../chain/key-table.js';

/** What the index reads of its block. */
export interface NonceSource {
  /** 20 bytes per position (valid where the sender is known). */
  readonly senderBytes: Uint8Array;
  /** The nonce the transaction at `position` uses: -1 when none is known, NaN when 2^53 or more (see nonceBigAt). */
  nonceAt(position: number): number;
  nonceBigAt(position: number): bigint | null;
}

/** `a` compared with `b` (nonces as nonceAt gives them; `big` for the rare ones): > 0 when a is higher. */
function compare(src: NonceSource, a: number, pa: number, b: number, pb: number): number {
  if (!Number.isNaN(a) && !Number.isNaN(b)) return a - b;
  const x = src.nonceBigAt(pa)!;
  const y = src.nonceBigAt(pb)!;
  return x > y ? 1 : x < y ? -1 : 0;
}

function sameSender(s: Uint8Array, a: number, b: number): boolean {
  const x = a * SENDER_BYTES;
  const y = b * SENDER_BYTES;
  for (let i = 0; i < SENDER_BYTES; i++) if (s[x + i] !== s[y + i]) return false;
  return true;
}

/** See the file comment. */
export class NonceIndex {
  private readonly table: KeyTable;

  constructor(expected: number) {
    this.table = new KeyTable(expected);
  }

  /** Indexes the transaction at `position`, whose sender is known; nothing when its nonce is unknown. */
  note(src: NonceSource, position: number): void {
    const n = src.nonceAt(position);
    if (n === -1) return;
    const s = src.senderBytes;
    const t = this.table;
    const key = addressKeyOfBytes(s, position * SENDER_BYTES);
    t.seek(key);
    for (let p = t.next(); p >= 0; p = t.next()) {
      if (!sameSender(s, p, position)) continue;
      if (compare(src, n, position, src.nonceAt(p), p) > 0) t.replace(position);
      return;
    }
    t.add(key, position);
  }

  /** The highest nonce `address` (lower-case 0x-hex) uses in this block, plus one; null when it sent none here. */
  next(src: NonceSource, address: string): bigint | null {
    if (address.length !== 2 + 2 * SENDER_BYTES) return null;
    const t = this.table;
    t.seek(addressKey(address));
    for (let p = t.next(); p >= 0; p = t.next()) {
      if (!bytesAreHex(src.senderBytes, p * SENDER_BYTES, SENDER_BYTES, address)) continue;
      const n = src.nonceAt(p);
      return (Number.isNaN(n) ? src.nonceBigAt(p)! : BigInt(n)) + 1n;
    }
    return null;
  }
}
