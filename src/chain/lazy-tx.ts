// Ingest-time transaction decoding (pure): every consensus-encoding check of `decodeTransaction` run as one walk over
// the bytes without building fields, plus the hash; the fields are decoded on first access and memoized.
// Must never accept a transaction `decodeTransaction` rejects (test/chain/lazy-tx.test.ts checks it differentially).
import type { AccessListEntry, Authorization, DecodedTx, DecodeTxResult, PostExecPayload } from './types.js';
import type { SenderLookup } from './flashblock.js';
import { TX_DEPOSIT, TX_EIP1559, TX_EIP2930, TX_EIP4844, TX_EIP7702, TX_LEGACY } from './types.js';
import { decodeTransaction } from './tx.js';
import { keccak256Hex } from './keccak.js';
import { KECCAK_POOL_BYTES, keccakPool, keccakPoolHex } from './keccak-wasm.js';
import { readRlpItem, RLP_OK, rlpItem } from './rlp.js';

/** secp256k1 n and n/2, big-endian (signature range checks without BigInt). */
const N_BYTES = Buffer.from('fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141', 'hex');
const HALF_N_BYTES = Buffer.from('7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0', 'hex');
const U64_MAX = 0xffffffffffffffffn;

/** Whether a well-formed item starts at `pos` and ends by `end`; its bounds and kind are then in `rlpItem`. */
function readItem(b: Buffer, pos: number, end: number): boolean {
  return readRlpItem(b, pos, end) === RLP_OK;
}

/** A byte string item at `pos`; its end, or -1. */
function byteString(b: Buffer, pos: number, end: number): number {
  return readItem(b, pos, end) && !rlpItem.isList ? rlpItem.end : -1;
}

/** A canonical unsigned integer of at most `maxBytes` bytes; its end, or -1. */
function scalar(b: Buffer, pos: number, end: number, maxBytes: number): number {
  if (!readItem(b, pos, end) || rlpItem.isList) return -1;
  const len = rlpItem.end - rlpItem.start;
  if (len > maxBytes || (len > 0 && b[rlpItem.start] === 0)) return -1;
  return rlpItem.end;
}

/** A byte string of exactly `bytes` bytes; its end, or -1. */
function fixed(b: Buffer, pos: number, end: number, bytes: number): number {
  if (!readItem(b, pos, end) || rlpItem.isList || rlpItem.end - rlpItem.start !== bytes) return -1;
  return rlpItem.end;
}

/** `to`: 20 bytes, or empty when `allowCreate`; its end, or -1. */
function toAddress(b: Buffer, pos: number, end: number, allowCreate: boolean): number {
  if (!readItem(b, pos, end) || rlpItem.isList) return -1;
  const len = rlpItem.end - rlpItem.start;
  return len === 20 || (len === 0 && allowCreate) ? rlpItem.end : -1;
}

/** Sign of (payload [start, end) − k) for a canonical scalar payload (no leading zeros) and a 32-byte constant. */
function compare32(b: Buffer, start: number, end: number, k: Buffer): number {
  if (end - start < 32) return -1;
  for (let i = 0; i < 32; i++) {
    const d = (b[start + i] as number) - (k[i] as number);
    if (d !== 0) return d;
  }
  return 0;
}

/** r and s in [1, n-1] with s ≤ n/2, read from the three items at `pos`: yParity/v was read by the caller. */
function signatureRS(b: Buffer, pos: number, end: number): number {
  const rEnd = scalar(b, pos, end, 32);
  if (rEnd < 0 || rlpItem.end === rlpItem.start || compare32(b, rlpItem.start, rlpItem.end, N_BYTES) >= 0) return -1;
  const sEnd = scalar(b, rEnd, end, 32);
  if (sEnd < 0 || rlpItem.end === rlpItem.start || compare32(b, rlpItem.start, rlpItem.end, HALF_N_BYTES) > 0) return -1;
  return sEnd;
}

/** A list of byte strings of `bytes` bytes each; its end, or -1. */
function fixedList(b: Buffer, pos: number, end: number, bytes: number): number {
  if (!readItem(b, pos, end) || !rlpItem.isList) return -1;
  const listEnd = rlpItem.end;
  let p = rlpItem.start;
  while (p < listEnd) {
    p = fixed(b, p, listEnd, bytes);
    if (p < 0) return -1;
  }
  return listEnd;
}

function accessList(b: Buffer, pos: number, end: number): number {
  if (!readItem(b, pos, end) || !rlpItem.isList) return -1;
  const listEnd = rlpItem.end;
  let p = rlpItem.start;
  while (p < listEnd) {
    if (!readItem(b, p, listEnd) || !rlpItem.isList) return -1;
    const entryEnd = rlpItem.end;
    let q = fixed(b, rlpItem.start, entryEnd, 20);
    if (q < 0) return -1;
    q = fixedList(b, q, entryEnd, 32);
    if (q !== entryEnd) return -1;
    p = entryEnd;
  }
  return listEnd;
}

function authorizations(b: Buffer, pos: number, end: number): number {
  if (!readItem(b, pos, end) || !rlpItem.isList) return -1;
  const listEnd = rlpItem.end;
  let p = rlpItem.start;
  while (p < listEnd) {
    if (!readItem(b, p, listEnd) || !rlpItem.isList) return -1;
    const e = rlpItem.end;
    let q = scalar(b, rlpItem.start, e, 32);
    if (q >= 0) q = fixed(b, q, e, 20);
    if (q >= 0) q = scalar(b, q, e, 8);
    if (q >= 0) q = scalar(b, q, e, 1);
    if (q >= 0) q = scalar(b, q, e, 32);
    if (q >= 0) q = scalar(b, q, e, 32);
    if (q !== e) return -1;
    p = e;
  }
  return listEnd;
}

/** Legacy: [nonce, gasPrice, gas, to, value, input, v, r, s] with v 27/28 or EIP-155 (chain id < 2^64). */
function checkLegacy(b: Buffer, end: number): boolean {
  if (!readItem(b, 0, end) || !rlpItem.isList || rlpItem.end !== end) return false;
  let p = scalar(b, rlpItem.start, end, 8);
  if (p >= 0) p = scalar(b, p, end, 32);
  if (p >= 0) p = scalar(b, p, end, 8);
  if (p >= 0) p = toAddress(b, p, end, true);
  if (p >= 0) p = scalar(b, p, end, 32);
  if (p >= 0) p = byteString(b, p, end);
  if (p >= 0) p = scalar(b, p, end, 32);
  if (p < 0) return false;
  const vLen = rlpItem.end - rlpItem.start;
  if (vLen > 6) {
    const v = BigInt('0x' + b.toString('hex', rlpItem.start, rlpItem.end));
    if (((v - 35n) >> 1n) > U64_MAX) return false;
  } else {
    const v = vLen === 0 ? 0 : b.readUIntBE(rlpItem.start, vLen);
    if (v !== 27 && v !== 28 && v < 35) return false;
  }
  return signatureRS(b, p, end) === end;
}

/** Field counts of the signed typed payloads (block form). */
const FIELD_COUNT: Record<number, number> = { 1: 11, 2: 12, 3: 14, 4: 13 };

/** Typed 0x01-0x04 payload at 1: the list and its fields in order, then yParity 0/1, r, s. */
function checkTyped(b: Buffer, type: number, end: number): boolean {
  if (!readItem(b, 1, end) || !rlpItem.isList || rlpItem.end !== end) return false;
  let p = scalar(b, rlpItem.start, end, 8); // chainId (≤ 8 bytes, so < 2^64)
  if (p >= 0) p = scalar(b, p, end, 8); // nonce
  if (p >= 0) p = scalar(b, p, end, 32); // gasPrice or maxPriorityFeePerGas
  if (p >= 0 && type !== TX_EIP2930) p = scalar(b, p, end, 32); // maxFeePerGas
  if (p >= 0) p = scalar(b, p, end, 8); // gas
  if (p >= 0) p = toAddress(b, p, end, type === TX_EIP2930 || type === TX_EIP1559);
  if (p >= 0) p = scalar(b, p, end, 32); // value
  if (p >= 0) p = byteString(b, p, end); // input
  if (p >= 0) p = accessList(b, p, end);
  if (p >= 0 && type === TX_EIP4844) {
    p = scalar(b, p, end, 32);
    if (p >= 0) p = fixedList(b, p, end, 32);
  } else if (p >= 0 && type === TX_EIP7702) {
    p = authorizations(b, p, end);
  }
  if (p >= 0) p = scalar(b, p, end, 1); // yParity
  if (p < 0 || (rlpItem.end > rlpItem.start && b[rlpItem.start] !== 1)) return false;
  return signatureRS(b, p, end) === end;
}

/** Deposit 0x7e: [sourceHash, from, to, mint, value, gas, isSystemTx, input]; returns `from`'s offset, or -1. */
function checkDeposit(b: Buffer, end: number): number {
  if (!readItem(b, 1, end) || !rlpItem.isList || rlpItem.end !== end) return -1;
  let p = fixed(b, rlpItem.start, end, 32);
  if (p < 0) return -1;
  p = fixed(b, p, end, 20);
  if (p < 0) return -1;
  const from = rlpItem.start;
  p = toAddress(b, p, end, true);
  if (p >= 0) p = scalar(b, p, end, 16);
  if (p >= 0) p = scalar(b, p, end, 32);
  if (p >= 0) p = scalar(b, p, end, 8);
  if (p >= 0) p = byteString(b, p, end);
  if (p < 0 || rlpItem.end - rlpItem.start > 1 || (rlpItem.end > rlpItem.start && b[rlpItem.start] !== 1)) return -1;
  return byteString(b, p, end) === end ? from : -1;
}

/**
 * A transaction as ingest keeps it: type, hash and (deposits) sender known; every other field decoded by
 * `decodeTransaction` on first access (with the signing hash), then memoized.
 */
export class LazyTx implements DecodedTx {
  private full: DecodedTx | null = null;
  private rawLower: string | null;
  private sender: string | null;
  /** The nonce read alone (nonceOf), before any full decode; -1n while not read. */
  private nonceOnly = -1n;

  constructor(
    readonly type: number,
    readonly hash: string,
    /** The transaction's hex exactly as the frame carried it; null when it is held as bytes (`rawBytes`). */
    private readonly rawText: string | null,
    from: string | null,
    /**
     * The native decoder's form: the bytes at [rawStart, rawEnd) of a buffer shared by the flashblock's transactions
     * (one object for all of them instead of a string each); the hex is made on first use.
     */
    private readonly rawBytes: Buffer | null = null,
    private readonly rawStart = 0,
    private readonly rawEnd = 0,
    /** Where the sender is read while this transaction does not carry one (its held block's recovered senders). */
    private readonly senders: SenderLookup | null = null,
    private readonly position = 0,
  ) {
    this.sender = from;
    this.rawLower = null;
  }

  private decoded(): DecodedTx {
    if (this.full === null) {
      // The hash is known, and the signing hash is computed by recovery when it needs it (signingHashOf).
      const r = decodeTransaction(this.rawText ?? this.raw, { hash: this.hash, signingHash: false });
      // Unreachable: the ingest walk rejects everything decodeTransaction does (differential test).
      if (!r.ok) throw new Error(`transaction ${this.hash} passed ingest checks but does not decode: ${r.reason}`);
      if (this.sender !== null) r.tx.from = this.sender;
      this.full = r.tx;
    }
    return this.full;
  }

  get raw(): string {
    if (this.rawLower === null) {
      this.rawLower = this.rawText !== null ? this.rawText.toLowerCase() : '0x' + (this.rawBytes as Buffer).toString('hex', this.rawStart, this.rawEnd);
    }
    return this.rawLower;
  }
  get from(): string | null {
    if (this.sender === null && this.senders !== null) this.sender = this.senders.senderAt(this.position);
    return this.sender;
  }
  set from(v: string | null) {
    this.sender = v;
    if (this.full !== null) this.full.from = v;
  }
  get signingHash(): Buffer | null {
    const d = this.decoded();
    if (d.signingHash === null && this.type !== TX_DEPOSIT) {
      // Decoded without it (only recovery needs it): decode once more with it.
      const again = decodeTransaction(this.rawText ?? this.raw, { hash: this.hash });
      if (again.ok) d.signingHash = again.tx.signingHash;
    }
    return d.signingHash;
  }
  set signingHash(v: Buffer | null) {
    this.decoded().signingHash = v;
  }
  get chainId(): bigint | null {
    return this.decoded().chainId;
  }
  get nonce(): bigint {
    // The sender nonce index reads every transaction's nonce once its sender is known: read it alone, so a held
    // transaction is not fully decoded (a dozen bigints, strings and a signing-hash buffer kept for the block's life,
    // promoted and freed per block — bench/combined.ts GC counts) unless a reader asks for more.
    if (this.full !== null) return this.full.nonce;
    if (this.nonceOnly < 0n) {
      const n = this.rawBytes !== null ? nonceOf(this.rawBytes, this.rawStart, this.rawEnd) : nonceOfHex(this.rawText as string);
      if (n === null) return this.decoded().nonce;
      this.nonceOnly = n;
    }
    return this.nonceOnly;
  }
  get gasPrice(): bigint | null {
    return this.decoded().gasPrice;
  }
  get maxPriorityFeePerGas(): bigint | null {
    return this.decoded().maxPriorityFeePerGas;
  }
  get maxFeePerGas(): bigint | null {
    return this.decoded().maxFeePerGas;
  }
  get maxFeePerBlobGas(): bigint | null {
    return this.decoded().maxFeePerBlobGas;
  }
  get gas(): bigint {
    return this.decoded().gas;
  }
  get to(): string | null {
    return this.decoded().to;
  }
  get value(): bigint {
    return this.decoded().value;
  }
  get input(): string {
    return this.decoded().input;
  }
  get accessList(): AccessListEntry[] | null {
    return this.decoded().accessList;
  }
  get blobVersionedHashes(): string[] | null {
    return this.decoded().blobVersionedHashes;
  }
  get authorizationList(): Authorization[] | null {
    return this.decoded().authorizationList;
  }
  get v(): bigint {
    return this.decoded().v;
  }
  get r(): bigint {
    return this.decoded().r;
  }
  get s(): bigint {
    return this.decoded().s;
  }
  get sourceHash(): string | null {
    return this.decoded().sourceHash;
  }
  get mint(): bigint | null {
    return this.decoded().mint;
  }
  get isSystemTx(): boolean | null {
    return this.decoded().isSystemTx;
  }
  get postExec(): PostExecPayload | null {
    return this.decoded().postExec;
  }
  /** Every transaction the ingest walk accepts runs in the EVM: post-exec (0x7d) goes to the full decoder. */
  get executes(): boolean {
    return true;
  }
}

/**
 * The nonce of the signed transaction at `b[pos, end)` (legacy or typed 0x01–0x04, already accepted by the ingest
 * walk), read without decoding the rest; null for other types (deposits, post-exec), which the full decoder reads.
 */
function nonceOf(b: Buffer, pos: number, end: number): bigint | null {
  const first = b[pos] as number;
  let p = pos;
  if (first < 0xc0) {
    if (FIELD_COUNT[first] === undefined) return null;
    p++;
  }
  const h = b[p] as number;
  if (h < 0xc0) return null;
  p += h <= 0xf7 ? 1 : 1 + (h - 0xf7); // the list header; its length was checked at ingest
  if (first < 0xc0) {
    if (readRlpItem(b, p, end) !== RLP_OK) return null; // chainId
    p = rlpItem.end;
  }
  if (readRlpItem(b, p, end) !== RLP_OK || rlpItem.isList) return null;
  const len = rlpItem.end - rlpItem.start;
  if (len === 0) return 0n;
  if (len <= 6) return BigInt(b.readUIntBE(rlpItem.start, len));
  return BigInt('0x' + b.toString('hex', rlpItem.start, rlpItem.end));
}

/** Bytes enough for a nonce: type, a list header of ≤ 9 bytes, chainId and nonce of ≤ 9 bytes each. */
const NONCE_PREFIX_BYTES = 28;

/** `nonceOf` for a transaction held as hex text (the JS decoder's form): only its first bytes are decoded. */
function nonceOfHex(rawHex: string): bigint | null {
  const b = Buffer.from(rawHex.slice(2, 2 + 2 * NONCE_PREFIX_BYTES), 'hex');
  return nonceOf(b, 0, b.length);
}

/** Runs the checks on `b[0, end)`; on success returns the LazyTx (hashing with `hash`), else null. */
function check(b: Buffer, end: number, rawHex: string, hash: (len: number) => string): LazyTx | null {
  const first = b[0] as number;
  if (first >= 0xc0) return checkLegacy(b, end) ? new LazyTx(TX_LEGACY, hash(end), rawHex, null) : null;
  if (first === TX_DEPOSIT) {
    const from = checkDeposit(b, end);
    return from < 0 ? null : new LazyTx(TX_DEPOSIT, hash(end), rawHex, '0x' + b.toString('hex', from, from + 20));
  }
  // Post-exec (0x7d, at most one a block) is left to decodeTransaction with the unknown types: FIELD_COUNT lacks it.
  if (FIELD_COUNT[first] === undefined || !checkTyped(b, first, end)) return null;
  return new LazyTx(first, hash(end), rawHex, null);
}

let largeRaw: Buffer = keccakPool;
const hashLarge = (len: number): string => keccak256Hex(largeRaw.subarray(0, len));

/**
 * Ingest form of `decodeTransaction` (no chain-id filter): the same accept/reject decision and reasons, the same
 * hash, but fields decode lazily. The hex is decoded into a pooled buffer and hashed there (bench/ingest.ts).
 */
export function ingestTransaction(rawHex: string): DecodeTxResult {
  if (typeof rawHex === 'string' && rawHex.length >= 4 && (rawHex.length & 1) === 0 && rawHex.charCodeAt(0) === 48 && rawHex.charCodeAt(1) === 120) {
    const bytes = (rawHex.length - 2) >>> 1;
    let tx: LazyTx | null;
    if (bytes <= KECCAK_POOL_BYTES) {
      if (keccakPool.write(rawHex.slice(2), 0, 'hex') !== bytes) return decodeTransaction(rawHex);
      tx = check(keccakPool, bytes, rawHex, keccakPoolHex);
    } else {
      largeRaw = Buffer.from(rawHex.slice(2), 'hex');
      if (largeRaw.length !== bytes) return decodeTransaction(rawHex);
      tx = check(largeRaw, bytes, rawHex, hashLarge);
    }
    if (tx !== null) return { ok: true, tx };
  }
  // Rejected (or an edge the walk is stricter about): the full decoder decides and words the reason.
  return decodeTransaction(rawHex);
}
