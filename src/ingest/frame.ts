// Frame decoding (pure): transport detection (JSON text or brotli), JSON.parse once, strict validation of the
// flashblock shape, transaction decoding. Returns a result value; never throws on bad input, never touches state.
import { brotliDecompressSync, constants as zlibConstants } from 'node:zlib';
import { decodeTransaction } from '../chain/tx.js';
import type { DecodedTx } from '../chain/types.js';
import { isAddress, isHash, isHexData, isLooseQuantity, quantityToBigInt, quantityToNumber } from '../chain/hex.js';

/** Block properties carried by index 0 (hex strings normalised to lower case). */
export interface FlashblockBase {
  parentBeaconBlockRoot: string;
  parentHash: string;
  feeRecipient: string;
  prevRandao: string;
  blockNumber: number;
  gasLimit: bigint;
  timestamp: number;
  extraData: string;
  baseFeePerGas: bigint;
}

/** Cumulative header fields of the block so far. */
export interface FlashblockDiff {
  stateRoot: string;
  receiptsRoot: string;
  logsBloom: string;
  gasUsed: bigint;
  blockHash: string;
  blobGasUsed: bigint | null;
  withdrawalsRoot: string | null;
  withdrawals: unknown[];
}

export interface FlashLog {
  address: string;
  topics: string[];
  data: string;
}

/** A receipt as the metadata gives it (either shape), normalised. Unknown fields are null. */
export interface FlashReceipt {
  /** EIP-2718 type from the tag, or null when the object gave none. */
  type: number | null;
  status: number | null;
  cumulativeGasUsed: bigint | null;
  logs: FlashLog[];
  depositNonce: bigint | null;
  depositReceiptVersion: bigint | null;
}

/** A decoded, validated flashblock. */
export interface Flashblock {
  payloadId: string;
  index: number;
  blockNumber: number;
  base: FlashblockBase | null;
  diff: FlashblockDiff;
  txs: DecodedTx[];
  /** Receipts by lower-case tx hash; null when metadata carries none (post-Azul streams). */
  receipts: Map<string, FlashReceipt> | null;
  /** Balances by lower-case address (cumulative within the block); null when absent. */
  balances: Map<string, bigint> | null;
}

/** Closed set of decode-failure reasons (metric label values). */
export type DecodeErrorReason = 'too_large' | 'brotli' | 'json' | 'schema' | 'transaction';

export type DecodeFrameResult =
  | { ok: true; fb: Flashblock; json: string }
  | { ok: false; reason: DecodeErrorReason; detail: string; blockNumber?: number; index?: number };

const RECEIPT_TAGS: Record<string, number> = { Legacy: 0, Eip2930: 1, Eip1559: 2, Eip4844: 3, Eip7702: 4, Deposit: 0x7e };
const BLOOM_BYTES = 256;
/** Sender recovery (and so the signing hash) is deferred off the ingest path; see DecodeTxOptions.signingHash. */
const NO_SIGNING_HASH = { signingHash: false } as const;

class SchemaError extends Error {}

function req(obj: Record<string, unknown>, key: string, where: string): unknown {
  const v = obj[key];
  if (v === undefined) throw new SchemaError(`${where}.${key} missing`);
  return v;
}

function hash(v: unknown, where: string): string {
  if (!isHash(v)) throw new SchemaError(`${where} must be a 32-byte hex hash`);
  return v.toLowerCase();
}

function address(v: unknown, where: string): string {
  if (!isAddress(v)) throw new SchemaError(`${where} must be a 20-byte hex address`);
  return v.toLowerCase();
}

function quantity(v: unknown, where: string): bigint {
  if (!isLooseQuantity(v)) throw new SchemaError(`${where} must be a hex quantity`);
  return quantityToBigInt(v);
}

function smallQuantity(v: unknown, where: string): number {
  if (!isLooseQuantity(v) || v.length > 15) throw new SchemaError(`${where} must be a hex quantity below 2^52`);
  return quantityToNumber(v);
}

function data(v: unknown, where: string): string {
  if (!isHexData(v)) throw new SchemaError(`${where} must be hex data`);
  return v.toLowerCase();
}

function object(v: unknown, where: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new SchemaError(`${where} must be an object`);
  return v as Record<string, unknown>;
}

function parseBase(v: unknown): FlashblockBase {
  const b = object(v, 'base');
  return {
    parentBeaconBlockRoot: hash(req(b, 'parent_beacon_block_root', 'base'), 'base.parent_beacon_block_root'),
    parentHash: hash(req(b, 'parent_hash', 'base'), 'base.parent_hash'),
    feeRecipient: address(req(b, 'fee_recipient', 'base'), 'base.fee_recipient'),
    prevRandao: hash(req(b, 'prev_randao', 'base'), 'base.prev_randao'),
    blockNumber: smallQuantity(req(b, 'block_number', 'base'), 'base.block_number'),
    gasLimit: quantity(req(b, 'gas_limit', 'base'), 'base.gas_limit'),
    timestamp: smallQuantity(req(b, 'timestamp', 'base'), 'base.timestamp'),
    extraData: data(req(b, 'extra_data', 'base'), 'base.extra_data'),
    baseFeePerGas: quantity(req(b, 'base_fee_per_gas', 'base'), 'base.base_fee_per_gas'),
  };
}

function parseDiff(v: unknown): { diff: FlashblockDiff; txHex: string[] } {
  const d = object(v, 'diff');
  const bloom = data(req(d, 'logs_bloom', 'diff'), 'diff.logs_bloom');
  if (bloom.length !== 2 + BLOOM_BYTES * 2) throw new SchemaError('diff.logs_bloom must be 256 bytes');
  const txs = req(d, 'transactions', 'diff');
  if (!Array.isArray(txs)) throw new SchemaError('diff.transactions must be an array');
  for (let i = 0; i < txs.length; i++) {
    if (!isHexData(txs[i]) || (txs[i] as string).length < 4) throw new SchemaError(`diff.transactions[${i}] must be hex bytes`);
  }
  const withdrawals = d.withdrawals ?? [];
  if (!Array.isArray(withdrawals)) throw new SchemaError('diff.withdrawals must be an array');
  const blobGas = d.blob_gas_used;
  const wroot = d.withdrawals_root;
  return {
    diff: {
      stateRoot: hash(req(d, 'state_root', 'diff'), 'diff.state_root'),
      receiptsRoot: hash(req(d, 'receipts_root', 'diff'), 'diff.receipts_root'),
      logsBloom: bloom,
      gasUsed: quantity(req(d, 'gas_used', 'diff'), 'diff.gas_used'),
      blockHash: hash(req(d, 'block_hash', 'diff'), 'diff.block_hash'),
      blobGasUsed: blobGas === undefined || blobGas === null ? null : quantity(blobGas, 'diff.blob_gas_used'),
      withdrawalsRoot: wroot === undefined || wroot === null ? null : hash(wroot, 'diff.withdrawals_root'),
      withdrawals,
    },
    txHex: txs as string[],
  };
}

function parseLog(v: unknown, where: string): FlashLog {
  const l = object(v, where);
  const topics = req(l, 'topics', where);
  if (!Array.isArray(topics) || topics.length > 4) throw new SchemaError(`${where}.topics must be an array of at most 4 hashes`);
  return {
    address: address(req(l, 'address', where), `${where}.address`),
    topics: topics.map((t, i) => hash(t, `${where}.topics[${i}]`)),
    data: data(req(l, 'data', where), `${where}.data`),
  };
}

function parseStatus(v: unknown, where: string): number | null {
  if (v === undefined || v === null) return null;
  if (v === true || v === '0x1') return 1;
  if (v === false || v === '0x0') return 0;
  throw new SchemaError(`${where}.status must be "0x1", "0x0" or a boolean`);
}

/** Normalises one receipt, externally tagged `{"Eip1559":{…}}` or internally tagged `{"type":"0x2",…}`. */
function parseReceipt(v: unknown, where: string): FlashReceipt {
  const outer = object(v, where);
  let type: number | null = null;
  let body = outer;
  const keys = Object.keys(outer);
  if (keys.length === 1 && RECEIPT_TAGS[keys[0] as string] !== undefined) {
    type = RECEIPT_TAGS[keys[0] as string] as number;
    body = object(outer[keys[0] as string], `${where}.${keys[0]}`);
  } else if (outer.type !== undefined) {
    const t = smallQuantity(outer.type, `${where}.type`);
    if (t > 0x7f) throw new SchemaError(`${where}.type out of range`);
    type = t;
  } else if (keys.length > 0 && outer.status === undefined && outer.cumulativeGasUsed === undefined) {
    throw new SchemaError(`${where}: unknown receipt shape (keys ${keys.slice(0, 3).join(',')})`);
  }
  const logsRaw = body.logs ?? [];
  if (!Array.isArray(logsRaw)) throw new SchemaError(`${where}.logs must be an array`);
  const cum = body.cumulativeGasUsed;
  const dn = body.depositNonce;
  const drv = body.depositReceiptVersion;
  return {
    type,
    status: parseStatus(body.status, where),
    cumulativeGasUsed: cum === undefined || cum === null ? null : quantity(cum, `${where}.cumulativeGasUsed`),
    logs: logsRaw.map((l, i) => parseLog(l, `${where}.logs[${i}]`)),
    depositNonce: dn === undefined || dn === null ? null : quantity(dn, `${where}.depositNonce`),
    depositReceiptVersion: drv === undefined || drv === null ? null : quantity(drv, `${where}.depositReceiptVersion`),
  };
}

function parseMetadata(v: unknown): { blockNumber: number; receipts: Map<string, FlashReceipt> | null; balances: Map<string, bigint> | null } {
  const m = object(v, 'metadata');
  const bn = req(m, 'block_number', 'metadata');
  if (typeof bn !== 'number' || !Number.isSafeInteger(bn) || bn < 0) throw new SchemaError('metadata.block_number must be a non-negative integer');
  let receipts: Map<string, FlashReceipt> | null = null;
  if (m.receipts !== undefined && m.receipts !== null) {
    const r = object(m.receipts, 'metadata.receipts');
    receipts = new Map();
    for (const k in r) receipts.set(hash(k, 'metadata.receipts key'), parseReceipt(r[k], `metadata.receipts[${k.slice(0, 10)}]`));
  }
  let balances: Map<string, bigint> | null = null;
  if (m.new_account_balances !== undefined && m.new_account_balances !== null) {
    const b = object(m.new_account_balances, 'metadata.new_account_balances');
    balances = new Map();
    for (const k in b) balances.set(address(k, 'metadata.new_account_balances key'), quantity(b[k], `metadata.new_account_balances[${k.slice(0, 10)}]`));
  }
  return { blockNumber: bn, receipts, balances };
}

/** Turns a frame's bytes into JSON text: `{` first (after white space) = JSON, anything else = brotli. */
export function frameText(data: Buffer, maxBytes: number): { ok: true; text: string } | { ok: false; reason: 'too_large' | 'brotli'; detail: string } {
  if (data.length > maxBytes) return { ok: false, reason: 'too_large', detail: `frame of ${data.length} bytes exceeds ${maxBytes}` };
  let i = 0;
  while (i < data.length && (data[i] === 0x20 || data[i] === 0x0a || data[i] === 0x0d || data[i] === 0x09)) i++;
  if (data[i] === 0x7b) return { ok: true, text: data.toString('utf8') };
  try {
    const out = brotliDecompressSync(data, { maxOutputLength: maxBytes, params: { [zlibConstants.BROTLI_DECODER_PARAM_LARGE_WINDOW]: 0 } });
    return { ok: true, text: out.toString('utf8') };
  } catch (e) {
    const err = e as { code?: string; message?: string };
    if (err.code === 'ERR_BUFFER_TOO_LARGE' || /too large|maxOutputLength/i.test(err.message ?? '')) {
      return { ok: false, reason: 'too_large', detail: `decompressed frame exceeds ${maxBytes} bytes` };
    }
    return { ok: false, reason: 'brotli', detail: `neither JSON nor brotli: ${err.message ?? 'decompression failed'}` };
  }
}

/**
 * Decodes one upstream frame into a validated Flashblock, or a reason. Pure: no state, no I/O, no throw.
 * `json` is the decoded JSON text (the frame itself when it was text).
 */
export function decodeFrame(data: Buffer, maxBytes: number): DecodeFrameResult {
  const t = frameText(data, maxBytes);
  if (!t.ok) return t;
  let root: unknown;
  try {
    root = JSON.parse(t.text);
  } catch (e) {
    return { ok: false, reason: 'json', detail: (e as Error).message.slice(0, 120) };
  }
  return validateFlashblock(root, t.text);
}

/** Validates a parsed JSON value as a flashblock and decodes its transactions. */
export function validateFlashblock(root: unknown, json: string): DecodeFrameResult {
  let blockNumber: number | undefined;
  let index: number | undefined;
  try {
    const o = object(root, 'frame');
    const idx = req(o, 'index', 'frame');
    if (typeof idx !== 'number' || !Number.isSafeInteger(idx) || idx < 0 || idx > 1_000_000) throw new SchemaError('index must be a non-negative integer');
    index = idx;
    const pid = req(o, 'payload_id', 'frame');
    if (!isHexData(pid) || pid.length < 4 || pid.length > 66) throw new SchemaError('payload_id must be hex bytes');
    const meta = parseMetadata(req(o, 'metadata', 'frame'));
    blockNumber = meta.blockNumber;
    const base = o.base === undefined || o.base === null ? null : parseBase(o.base);
    if (idx === 0 && base === null) throw new SchemaError('index 0 must carry base');
    if (base !== null && base.blockNumber !== meta.blockNumber) {
      throw new SchemaError(`base.block_number ${base.blockNumber} differs from metadata.block_number ${meta.blockNumber}`);
    }
    const { diff, txHex } = parseDiff(req(o, 'diff', 'frame'));
    const txs: DecodedTx[] = new Array(txHex.length);
    for (let i = 0; i < txHex.length; i++) {
      const r = decodeTransaction(txHex[i] as string, NO_SIGNING_HASH);
      if (!r.ok) return { ok: false, reason: 'transaction', detail: `diff.transactions[${i}]: ${r.reason}`, blockNumber, index };
      txs[i] = r.tx;
    }
    const fb: Flashblock = {
      payloadId: (pid as string).toLowerCase(),
      index: idx,
      blockNumber: meta.blockNumber,
      base,
      diff,
      txs,
      receipts: meta.receipts,
      balances: meta.balances,
    };
    return { ok: true, fb, json };
  } catch (e) {
    if (e instanceof SchemaError) {
      const r: DecodeFrameResult = { ok: false, reason: 'schema', detail: e.message };
      if (blockNumber !== undefined) r.blockNumber = blockNumber;
      if (index !== undefined) r.index = index;
      return r;
    }
    return { ok: false, reason: 'schema', detail: `unexpected: ${(e as Error).message}` };
  }
}
