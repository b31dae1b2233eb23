// EIP-2718 transaction decoding (legacy, 0x01-0x04, OP deposit 0x7e, OP post-exec 0x7d) with strict consensus-encoding checks.
// Returns values, never throws to callers; does not recover senders (sender.ts does that lazily).
import type { AccessListEntry, Authorization, DecodedTx, DecodeTxResult, PostExecPayload } from './types.js';
import { TX_DEPOSIT, TX_EIP1559, TX_EIP2930, TX_EIP4844, TX_EIP7702, TX_LEGACY, TX_POST_EXEC, ZERO_ADDRESS } from './types.js';
import { keccak256, keccak256Hex } from './keccak.js';
import { encodeRlp, readRlpItem, RLP_OK, rlpHeader, rlpItem, rlpProblem } from './rlp.js';
import { bigIntToBytes } from './hex.js';

/** secp256k1 group order and half of it (EIP-2: s must not exceed n/2 since Homestead). */
export const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
export const SECP256K1_HALF_N = SECP256K1_N >> 1n;
const U64_MAX = 0xffffffffffffffffn;

/** Options for `decodeTransaction`. */
export interface DecodeTxOptions {
  /** The chain's id: signed transactions that name another chain are rejected. null/undefined = accept any. */
  chainId?: bigint | null;
  /**
   * Compute `signingHash` now (default true). Ingest passes false: the hash is only needed for sender recovery,
   * which runs later, off the critical path; `recoverSender` computes it then (bench/ingest.ts: ~1 keccak per tx).
   */
  signingHash?: boolean;
  /** The transaction's hash when the caller already computed it from the same bytes (no keccak here then). */
  hash?: string;
}

/** A rejection reason raised inside the decoder and turned into `{ ok: false }` at the boundary. */
class Reject extends Error {}

function reject(reason: string): never {
  throw new Reject(reason);
}

/** The items of one RLP list, read one after another with the shared reader (src/chain/rlp.ts). */
class Items {
  constructor(
    readonly raw: Buffer,
    /** Where the next item's header starts. */
    public pos: number,
    readonly end: number,
  ) {}
}

/** Reads the next item of `c` into `rlpItem` and moves past it; a malformed item is rejected naming `name`. */
function next(c: Items, name: string): void {
  const code = readRlpItem(c.raw, c.pos, c.end);
  if (code !== RLP_OK) reject(`${name}: ${rlpProblem(code)} at byte ${c.pos}`);
  c.pos = rlpItem.end;
}

/** How many items are left in `c` (each one well-formed), without moving it. */
function count(c: Items, name: string): number {
  const at = c.pos;
  let n = 0;
  while (c.pos < c.end) {
    next(c, `${name} item ${n}`);
    n++;
  }
  c.pos = at;
  return n;
}

function str(c: Items, name: string): Buffer {
  next(c, name);
  if (rlpItem.isList) reject(`${name} must be a byte string, not a list`);
  return c.raw.subarray(rlpItem.start, rlpItem.end);
}

function list(c: Items, name: string): Items {
  next(c, name);
  if (!rlpItem.isList) reject(`${name} must be a list`);
  return new Items(c.raw, rlpItem.start, rlpItem.end);
}

function toBigInt(b: Buffer): bigint {
  const n = b.length;
  if (n === 0) return 0n;
  if (n <= 6) return BigInt(b.readUIntBE(0, n));
  return BigInt('0x' + b.toString('hex'));
}

/** A canonical unsigned integer of at most `maxBytes` bytes. */
function scalarOf(b: Buffer, name: string, maxBytes: number): bigint {
  if (b.length > 0 && b[0] === 0) reject(`${name} has leading zero bytes`);
  if (b.length > maxBytes) reject(`${name} exceeds ${maxBytes * 8} bits`);
  return toBigInt(b);
}

function scalar(c: Items, name: string, maxBytes: number): bigint {
  return scalarOf(str(c, name), name, maxBytes);
}

function hex(b: Buffer): string {
  return '0x' + b.toString('hex');
}

function fixedOf(b: Buffer, name: string, bytes: number): string {
  if (b.length !== bytes) {
    reject(`${name} must be ${bytes} bytes, got ${b.length} (${b.length < bytes ? 'too short' : 'too long'})`);
  }
  return hex(b);
}

function fixed(c: Items, name: string, bytes: number): string {
  return fixedOf(str(c, name), name, bytes);
}

/** `to`: 20 bytes, or empty for contract creation when `allowCreate`. */
function toAddress(c: Items, allowCreate: boolean): string | null {
  const b = str(c, 'to');
  if (b.length === 0) {
    if (!allowCreate) reject('to is required for this transaction type (no contract creation)');
    return null;
  }
  return fixedOf(b, 'to', 20);
}

function accessList(c: Items): AccessListEntry[] {
  const l = list(c, 'accessList');
  const out: AccessListEntry[] = [];
  while (l.pos < l.end) {
    next(l, 'access list entry');
    if (!rlpItem.isList) reject('access list entry must be [address, storageKeys]');
    const e = new Items(l.raw, rlpItem.start, rlpItem.end);
    if (count(e, 'access list entry') !== 2) reject('access list entry must be [address, storageKeys]');
    const address = fixed(e, 'access list address', 20);
    const keys = list(e, 'access list storage keys');
    const storageKeys: string[] = [];
    while (keys.pos < keys.end) storageKeys.push(fixed(keys, 'access list storage key', 32));
    out.push({ address, storageKeys });
  }
  return out;
}

function blobHashes(c: Items): string[] {
  const l = list(c, 'blobVersionedHashes');
  const out: string[] = [];
  while (l.pos < l.end) out.push(fixed(l, 'blob versioned hash', 32));
  return out;
}

function authorizations(c: Items): Authorization[] {
  const l = list(c, 'authorizationList');
  const out: Authorization[] = [];
  while (l.pos < l.end) {
    const a = list(l, 'authorization');
    const n = count(a, 'authorization');
    if (n !== 6) reject(`authorization must have 6 fields, got ${n}`);
    out.push({
      chainId: scalar(a, 'authorization chainId', 32),
      address: fixed(a, 'authorization address', 20),
      nonce: scalar(a, 'authorization nonce', 8),
      yParity: Number(scalar(a, 'authorization yParity', 1)),
      r: scalar(a, 'authorization r', 32),
      s: scalar(a, 'authorization s', 32),
    });
  }
  return out;
}

/** r and s in [1, n-1] with low s (EIP-2). */
function checkSignature(r: bigint, s: bigint): void {
  if (r === 0n || r >= SECP256K1_N) reject('signature r out of range [1, n-1]');
  if (s === 0n || s >= SECP256K1_N) reject('signature s out of range [1, n-1]');
  if (s > SECP256K1_HALF_N) reject('signature s above n/2 (EIP-2 malleability rule)');
}

function checkChain(chainId: bigint, opts: DecodeTxOptions | undefined): void {
  if (chainId > U64_MAX) reject('chain id exceeds 64 bits');
  const want = opts?.chainId;
  if (want !== undefined && want !== null && chainId !== want) reject(`chain id ${chainId} is not this chain's (${want})`);
}

/** keccak256 over prefix || listHeader(len) || raw[from, to) || suffix, where len covers body and suffix. */
function hashReencoded(prefix: Buffer | null, raw: Buffer, from: number, to: number, suffix: Buffer | null): Buffer {
  const body = raw.subarray(from, to);
  const header = rlpHeader(body.length + (suffix === null ? 0 : suffix.length), 0xc0);
  const parts = prefix === null ? [header, body] : [prefix, header, body];
  if (suffix !== null) parts.push(suffix);
  return keccak256(Buffer.concat(parts));
}

function newTx(type: number, hash: string, raw: string): DecodedTx {
  return {
    type, hash, raw, chainId: null, nonce: 0n, gasPrice: null, maxPriorityFeePerGas: null, maxFeePerGas: null,
    maxFeePerBlobGas: null, gas: 0n, to: null, value: 0n, input: '0x', accessList: null, blobVersionedHashes: null,
    authorizationList: null, v: 0n, r: 0n, s: 0n, signingHash: null, sourceHash: null, mint: null, isSystemTx: null,
    from: null, postExec: null, executes: true,
  };
}

/** The fields of the one list that must cover `raw[from, raw.length)` exactly. */
function payload(raw: Buffer, from: number, name: string): Items {
  const all = new Items(raw, from, raw.length);
  const fields = list(all, name);
  if (all.pos !== raw.length) reject(`${name}: trailing bytes after the list at byte ${all.pos}`);
  return fields;
}

function decodeLegacy(raw: Buffer, tx: DecodedTx, opts: DecodeTxOptions | undefined): void {
  const f = payload(raw, 0, 'transaction');
  const start = f.pos;
  const n = count(f, 'transaction');
  if (n !== 9) reject(`legacy transaction must have 9 fields, got ${n}`);
  tx.nonce = scalar(f, 'nonce', 8);
  tx.gasPrice = scalar(f, 'gasPrice', 32);
  tx.gas = scalar(f, 'gas', 8);
  tx.to = toAddress(f, true);
  tx.value = scalar(f, 'value', 32);
  tx.input = hex(str(f, 'input'));
  const vStart = f.pos;
  tx.v = scalar(f, 'v', 32);
  tx.r = scalar(f, 'r', 32);
  tx.s = scalar(f, 's', 32);
  checkSignature(tx.r, tx.s);
  const wantHash = opts?.signingHash !== false;
  if (tx.v === 27n || tx.v === 28n) {
    if (wantHash) tx.signingHash = hashReencoded(null, raw, start, vStart, null);
  } else if (tx.v >= 35n) {
    const chainId = (tx.v - 35n) >> 1n;
    checkChain(chainId, opts);
    tx.chainId = chainId;
    if (wantHash) {
      const suffix = Buffer.concat([encodeRlp(bigIntToBytes(chainId)), Buffer.from([0x80, 0x80])]);
      tx.signingHash = hashReencoded(null, raw, start, vStart, suffix);
    }
  } else {
    reject(`legacy v must be 27, 28 or an EIP-155 value >= 35, got ${tx.v}`);
  }
}

/** Field counts of the signed typed payloads (block form). */
const FIELD_COUNT: Record<number, number> = { 1: 11, 2: 12, 3: 14, 4: 13 };

function decodeTyped(raw: Buffer, tx: DecodedTx, opts: DecodeTxOptions | undefined): void {
  const type = tx.type;
  const f = payload(raw, 1, 'transaction payload');
  const start = f.pos;
  const n = count(f, 'transaction payload');
  if (type === TX_EIP4844 && n > 0) {
    readRlpItem(raw, f.pos, f.end);
    if (rlpItem.isList) reject('blob transaction in network form (with sidecar); only the block form is accepted');
  }
  const want = FIELD_COUNT[type] as number;
  if (n !== want) reject(`type ${type} transaction must have ${want} fields, got ${n}`);
  const chainId = scalar(f, 'chainId', 8);
  checkChain(chainId, opts);
  tx.chainId = chainId;
  tx.nonce = scalar(f, 'nonce', 8);
  if (type === TX_EIP2930) {
    tx.gasPrice = scalar(f, 'gasPrice', 32);
  } else {
    tx.maxPriorityFeePerGas = scalar(f, 'maxPriorityFeePerGas', 32);
    tx.maxFeePerGas = scalar(f, 'maxFeePerGas', 32);
  }
  tx.gas = scalar(f, 'gas', 8);
  tx.to = toAddress(f, type === TX_EIP2930 || type === TX_EIP1559);
  tx.value = scalar(f, 'value', 32);
  tx.input = hex(str(f, 'input'));
  tx.accessList = accessList(f);
  if (type === TX_EIP4844) {
    tx.maxFeePerBlobGas = scalar(f, 'maxFeePerBlobGas', 32);
    tx.blobVersionedHashes = blobHashes(f);
  } else if (type === TX_EIP7702) {
    tx.authorizationList = authorizations(f);
  }
  const vStart = f.pos;
  tx.v = scalar(f, 'yParity', 1);
  if (tx.v > 1n) reject(`yParity must be 0 or 1, got ${tx.v}`);
  tx.r = scalar(f, 'r', 32);
  tx.s = scalar(f, 's', 32);
  checkSignature(tx.r, tx.s);
  if (opts?.signingHash !== false) {
    tx.signingHash = hashReencoded(raw.subarray(0, 1), raw, start, vStart, null);
  }
}

function decodeDeposit(raw: Buffer, tx: DecodedTx): void {
  const f = payload(raw, 1, 'deposit payload');
  const n = count(f, 'deposit payload');
  if (n !== 8) reject(`deposit transaction must have 8 fields, got ${n}`);
  tx.sourceHash = fixed(f, 'sourceHash', 32);
  tx.from = fixed(f, 'from', 20);
  tx.to = toAddress(f, true);
  tx.mint = scalar(f, 'mint', 16);
  tx.value = scalar(f, 'value', 32);
  tx.gas = scalar(f, 'gas', 8);
  const sys = str(f, 'isSystemTx');
  if (sys.length > 1 || (sys.length === 1 && sys[0] !== 1)) reject('isSystemTx must be RLP false (0x80) or true (0x01)');
  tx.isSystemTx = sys.length === 1;
  tx.input = hex(str(f, 'input'));
}

/** Post-exec payload versions defined so far (lagoon/post-exec.md "Defined Schema Versions"). */
const POST_EXEC_VERSIONS = new Set([1]);

/**
 * Post-exec 0x7d: the type byte then the payload's own RLP list `[version, blockNumber, ...schema fields]` (no outer
 * wrapper, no signature). The envelope is checked; the v1 SDM layout `[[index, gasRefund], ...]` is read when the
 * trailing fields are exactly that list, other trailing items only need to be well-formed RLP.
 */
function decodePostExec(raw: Buffer, tx: DecodedTx): void {
  const f = payload(raw, 1, 'post-exec payload');
  const n = count(f, 'post-exec payload');
  if (n < 2) reject(`post-exec payload must start with [version, blockNumber], got ${n} fields`);
  const version = Number(scalar(f, 'post-exec version', 1));
  if (!POST_EXEC_VERSIONS.has(version)) reject(`unsupported post-exec payload version ${version}`);
  const blockNumber = scalar(f, 'post-exec blockNumber', 8);
  let gasRefunds: PostExecPayload['gasRefunds'] = null;
  if (n === 3) {
    next(f, 'post-exec gasRefundEntries');
    if (rlpItem.isList) {
      const l = new Items(raw, rlpItem.start, rlpItem.end);
      gasRefunds = [];
      while (l.pos < l.end) {
        const e = list(l, 'gas refund entry');
        if (count(e, 'gas refund entry') !== 2) reject('gas refund entry must be [index, gasRefund]');
        gasRefunds.push({ index: scalar(e, 'gas refund index', 8), gasRefund: scalar(e, 'gas refund', 8) });
      }
    }
  }
  tx.postExec = { version, blockNumber, gasRefunds };
  tx.executes = false;
  tx.from = ZERO_ADDRESS;
  tx.input = hex(raw.subarray(1));
}

/**
 * Decodes one EIP-2718 transaction from 0x-hex. Checks canonical RLP, field counts and kinds, scalar sizes
 * (nonce/gas/chainId < 2^64), address lengths, signature ranges (low s, yParity 0/1, legacy v) and, when
 * `opts.chainId` is given, the chain id. Computes `hash` and `signingHash`; leaves `from` null except for deposits.
 */
export function decodeTransaction(rawHex: string, opts?: DecodeTxOptions): DecodeTxResult {
  if (typeof rawHex !== 'string' || rawHex.length < 4 || rawHex.charCodeAt(0) !== 48 || rawHex.charCodeAt(1) !== 120) {
    return { ok: false, reason: 'transaction must be non-empty 0x-prefixed hex' };
  }
  if ((rawHex.length & 1) !== 0) return { ok: false, reason: 'transaction hex has an odd number of digits' };
  const raw = Buffer.from(rawHex.slice(2), 'hex');
  if (raw.length * 2 !== rawHex.length - 2) return { ok: false, reason: 'transaction hex has non-hex characters' };
  const first = raw[0] as number;
  if (first >= 0x80 && first < 0xc0) return { ok: false, reason: 'not a transaction: starts with an RLP string' };
  const type = first >= 0xc0 ? TX_LEGACY : first;
  if (type !== TX_LEGACY && type !== TX_DEPOSIT && type !== TX_POST_EXEC && FIELD_COUNT[type] === undefined) {
    return { ok: false, reason: `unsupported transaction type 0x${type.toString(16)}` };
  }
  const tx = newTx(type, opts?.hash ?? keccak256Hex(raw), rawHex.toLowerCase());
  try {
    if (type === TX_LEGACY) decodeLegacy(raw, tx, opts);
    else if (type === TX_DEPOSIT) decodeDeposit(raw, tx);
    else if (type === TX_POST_EXEC) decodePostExec(raw, tx);
    else decodeTyped(raw, tx, opts);
  } catch (e) {
    if (e instanceof Reject) return { ok: false, reason: e.message };
    return { ok: false, reason: `internal decoder error: ${(e as Error).message}` };
  }
  return { ok: true, tx };
}

/** Intrinsic-gas constants (Istanbul calldata, Berlin access lists, Shanghai initcode, Prague authorizations). */
const GAS = { tx: 21000n, create: 32000n, zeroByte: 4n, nonZeroByte: 16n, accessAddress: 2400n, accessKey: 1900n,
  initcodeWord: 2n, authorization: 25000n } as const;
const MAX_INITCODE_BYTES = 49152;
const U256_LIMIT = 1n << 256n;

/** Gas a transaction pays before execution (EIP-2028, EIP-2930, EIP-3860, EIP-7702); deposits return 0. */
export function intrinsicGas(tx: DecodedTx): bigint {
  if (tx.type === TX_DEPOSIT || tx.type === TX_POST_EXEC) return 0n;
  const input = tx.input;
  let zeros = 0;
  for (let i = 2; i < input.length; i += 2) if (input.charCodeAt(i) === 48 && input.charCodeAt(i + 1) === 48) zeros++;
  const bytes = (input.length - 2) / 2;
  let gas = GAS.tx + BigInt(zeros) * GAS.zeroByte + BigInt(bytes - zeros) * GAS.nonZeroByte;
  if (tx.to === null) gas += GAS.create + BigInt(Math.ceil(bytes / 32)) * GAS.initcodeWord;
  const al = tx.accessList;
  if (al !== null) for (const e of al) gas += GAS.accessAddress + BigInt(e.storageKeys.length) * GAS.accessKey;
  if (tx.authorizationList !== null) gas += BigInt(tx.authorizationList.length) * GAS.authorization;
  return gas;
}

/**
 * Stateless validity rules a client applies after decoding (Cancun rules; the EIP-7623 calldata floor is not
 * applied). Returns the reason a transaction can never be valid, or null. Deposits and post-exec are exempt.
 */
export function validateTransaction(tx: DecodedTx): string | null {
  if (tx.type === TX_DEPOSIT || tx.type === TX_POST_EXEC) return null;
  if (tx.nonce === U64_MAX) return 'nonce 2^64-1 is not allowed (EIP-2681)';
  const feeCap = tx.maxFeePerGas ?? tx.gasPrice ?? 0n;
  if (tx.maxPriorityFeePerGas !== null && tx.maxPriorityFeePerGas > feeCap) {
    return 'maxPriorityFeePerGas is above maxFeePerGas';
  }
  if (tx.gas * feeCap >= U256_LIMIT) return 'gas × fee cap overflows 256 bits';
  if (tx.to === null && (tx.input.length - 2) / 2 > MAX_INITCODE_BYTES) {
    return `initcode is larger than ${MAX_INITCODE_BYTES} bytes (EIP-3860)`;
  }
  const intrinsic = intrinsicGas(tx);
  if (tx.gas < intrinsic) return `gas limit ${tx.gas} is below the intrinsic gas ${intrinsic}`;
  if (tx.type === TX_EIP4844) {
    const hashes = tx.blobVersionedHashes ?? [];
    if (hashes.length === 0) return 'blob transaction carries no blob hashes';
    for (const h of hashes) if (!h.startsWith('0x01')) return `blob versioned hash ${h} is not version 0x01`;
  }
  if (tx.type === TX_EIP7702 && (tx.authorizationList ?? []).length === 0) {
    return 'set-code transaction has an empty authorization list';
  }
  return null;
}
