// Frame decoding (pure): transport detection (JSON text or brotli), one parse, strict validation of the flashblock
// shape, transaction decoding — by the native core when it is built (src/ingest/native-frame.ts), else here with
// JSON.parse, which also words every reason. Returns a result value; never throws on bad input, never touches state.
import { brotliDecompressSync, constants as zlibConstants } from 'node:zlib';
import { ingestTransaction } from '../chain/lazy-tx.js';
import { ObjectBody } from '../chain/object-body.js';
import { decodeTransaction } from '../chain/tx.js';
import { TX_POST_EXEC } from '../chain/types.js';
import { decodeAccessList, type AccountChanges } from '../chain/access-list.js';
import type { FlashLog, FlashReceipt, Flashblock, FlashblockBase, FlashblockDiff } from '../chain/flashblock.js';
import type { DecodedTx } from '../chain/types.js';
import { isHexData, isLooseQuantity, lowerHexData, quantityToBigInt, quantityToNumber } from '../chain/hex.js';
import type { LayoutBody } from '../chain/layout-body.js';
import { decodeLayout, flashblockOfLayout, nativeDecoder, type NativeDecoder, type NativeSenders } from './native-frame.js';

export type { FlashLog, FlashReceipt, Flashblock, FlashblockBase, FlashblockDiff } from '../chain/flashblock.js';

/** Closed set of decode-failure reasons (metric label values). */
export type DecodeErrorReason = 'too_large' | 'brotli' | 'json' | 'schema' | 'transaction';

export type DecodeFrameResult =
  | {
      ok: true;
      fb: Flashblock;
      /** The frame's JSON text (made on first read when the native decoder took the frame). */
      readonly json: string;
      /** Set by the native decoder: the signed transactions, for recovery off the JS thread. */
      senders?: NativeSenders | null;
    }
  | { ok: false; reason: DecodeErrorReason; detail: string; blockNumber?: number; index?: number };

/** A frame the native decoder accepted. */
class NativeDecoded {
  readonly ok = true as const;
  private text: string | null = null;
  constructor(
    readonly fb: Flashblock,
    readonly senders: NativeSenders | null,
    private readonly bytes: Buffer,
  ) {}
  get json(): string {
    if (this.text === null) this.text = this.bytes.toString('utf8');
    return this.text;
  }
}

/** EIP-2718 type of an externally tagged receipt (`{"Eip1559":{…}}`), or -1. */
function receiptTag(key: string): number {
  switch (key) {
    case 'Legacy': return 0;
    case 'Eip2930': return 1;
    case 'Eip1559': return 2;
    case 'Eip4844': return 3;
    case 'Eip7702': return 4;
    case 'Deposit': return 0x7e;
    case 'PostExec': return 0x7d;
    default: return -1;
  }
}
const BLOOM_BYTES = 256;

class SchemaError extends Error {}

function req(obj: Record<string, unknown>, key: string, where: string): unknown {
  const v = obj[key];
  if (v === undefined) throw new SchemaError(`${where}.${key} missing`);
  return v;
}

// Per-item paths in messages ("metadata.receipts[0x1234abcd].logs[0]") are built only when something is wrong:
// the checks below run ~2,000 times per flashblock (bench/ingest.ts).

function hash(v: unknown, where: string): string {
  const s = lowerHexData(v, 66);
  if (s === null) throw new SchemaError(`${where} must be a 32-byte hex hash`);
  return s;
}

function address(v: unknown, where: string): string {
  const s = lowerHexData(v, 42);
  if (s === null) throw new SchemaError(`${where} must be a 20-byte hex address`);
  return s;
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
  const s = lowerHexData(v, -1);
  if (s === null) throw new SchemaError(`${where} must be hex data`);
  return s;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function object(v: unknown, where: string): Record<string, unknown> {
  if (!isObject(v)) throw new SchemaError(`${where} must be an object`);
  return v;
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

interface ParsedDiff {
  diff: FlashblockDiff;
  txs: DecodedTx[];
  /** The first transaction that does not decode (reported after the schema checks, as a 'transaction' failure). */
  badTx: { at: number; reason: string } | null;
}

function parseDiff(v: unknown): ParsedDiff {
  const d = object(v, 'diff');
  const bloom = data(req(d, 'logs_bloom', 'diff'), 'diff.logs_bloom');
  if (bloom.length !== 2 + BLOOM_BYTES * 2) throw new SchemaError('diff.logs_bloom must be 256 bytes');
  const raw = req(d, 'transactions', 'diff');
  if (!Array.isArray(raw)) throw new SchemaError('diff.transactions must be an array');
  // Decoding checks the hex too; the hex-shape test (a schema failure) only runs for what did not decode.
  const txs: DecodedTx[] = new Array(raw.length);
  let badTx: ParsedDiff['badTx'] = null;
  for (let i = 0; i < raw.length; i++) {
    const s: unknown = raw[i];
    if (badTx === null) {
      const r = ingestTransaction(s as string);
      if (r.ok) {
        txs[i] = r.tx;
        continue;
      }
      if (isHexData(s) && s.length >= 4) badTx = { at: i, reason: r.reason };
    }
    if (!isHexData(s) || s.length < 4) throw new SchemaError(`diff.transactions[${i}] must be hex bytes`);
  }
  const withdrawals = d.withdrawals ?? [];
  if (!Array.isArray(withdrawals)) throw new SchemaError('diff.withdrawals must be an array');
  const blobGas = d.blob_gas_used;
  const wroot = d.withdrawals_root;
  let postExecTx: DecodedTx | null = null;
  const pe = d.post_exec_tx;
  if (pe !== undefined && pe !== null) {
    if (!isHexData(pe) || pe.length < 4) throw new SchemaError('diff.post_exec_tx must be hex bytes');
    const r = decodeTransaction(pe);
    if (!r.ok) badTx ??= { at: -1, reason: r.reason };
    else if (r.tx.type !== TX_POST_EXEC) badTx ??= { at: -1, reason: `type 0x${r.tx.type.toString(16)} is not a post-exec (0x7d) transaction` };
    else postExecTx = r.tx;
  }
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
      postExecTx,
    },
    txs,
    badTx,
  };
}

function receiptPath(key: string): string {
  return `metadata.receipts[${key.slice(0, 10)}]`;
}

/** Throws the schema error for a log field that failed its check (the message path is only built here). */
function badLogField(l: Record<string, unknown>, key: string, i: number, field: 'address' | 'data'): never {
  const where = `${receiptPath(key)}.logs[${i}]`;
  req(l, field, where);
  throw new SchemaError(`${where}.${field} must be ${field === 'address' ? 'a 20-byte hex address' : 'hex data'}`);
}

function parseLog(v: unknown, key: string, i: number): FlashLog {
  if (!isObject(v)) throw new SchemaError(`${receiptPath(key)}.logs[${i}] must be an object`);
  const raw = v.topics;
  if (!Array.isArray(raw) || raw.length > 4) {
    req(v, 'topics', `${receiptPath(key)}.logs[${i}]`);
    throw new SchemaError(`${receiptPath(key)}.logs[${i}].topics must be an array of at most 4 hashes`);
  }
  const addr = lowerHexData(v.address, 42);
  if (addr === null) badLogField(v, key, i, 'address');
  const topics: string[] = new Array(raw.length);
  for (let j = 0; j < raw.length; j++) {
    const t = lowerHexData(raw[j], 66);
    if (t === null) throw new SchemaError(`${receiptPath(key)}.logs[${i}].topics[${j}] must be a 32-byte hex hash`);
    topics[j] = t;
  }
  const d = lowerHexData(v.data, -1);
  if (d === null) badLogField(v, key, i, 'data');
  return { address: addr, topics, data: d };
}

function parseStatus(v: unknown, key: string): number | null {
  if (v === undefined || v === null) return null;
  if (v === true || v === '0x1') return 1;
  if (v === false || v === '0x0') return 0;
  throw new SchemaError(`${receiptPath(key)}.status must be "0x1", "0x0" or a boolean`);
}

function optionalQuantity(v: unknown, key: string, field: string): bigint | null {
  if (v === undefined || v === null) return null;
  if (!isLooseQuantity(v)) throw new SchemaError(`${receiptPath(key)}.${field} must be a hex quantity`);
  return quantityToBigInt(v);
}

/** Normalises one receipt, externally tagged `{"Eip1559":{…}}` or internally tagged `{"type":"0x2",…}`. */
function parseReceipt(v: unknown, key: string): FlashReceipt {
  if (!isObject(v)) throw new SchemaError(`${receiptPath(key)} must be an object`);
  const outer = v;
  let type: number | null = null;
  let body = outer;
  let first: string | undefined;
  let keyCount = 0;
  for (const k in outer) {
    if (keyCount++ === 0) first = k;
    else break;
  }
  const tag = keyCount === 1 ? receiptTag(first as string) : -1;
  if (tag !== -1) {
    type = tag;
    const inner = outer[first as string];
    if (!isObject(inner)) throw new SchemaError(`${receiptPath(key)}.${first} must be an object`);
    body = inner;
  } else if (outer.type !== undefined) {
    const t = smallQuantity(outer.type, `${receiptPath(key)}.type`);
    if (t > 0x7f) throw new SchemaError(`${receiptPath(key)}.type out of range`);
    type = t;
  } else if (keyCount > 0 && outer.status === undefined && outer.cumulativeGasUsed === undefined) {
    throw new SchemaError(`${receiptPath(key)}: unknown receipt shape (keys ${Object.keys(outer).slice(0, 3).join(',')})`);
  }
  const logsRaw = body.logs ?? [];
  if (!Array.isArray(logsRaw)) throw new SchemaError(`${receiptPath(key)}.logs must be an array`);
  const status = parseStatus(body.status, key);
  const cumulativeGasUsed = optionalQuantity(body.cumulativeGasUsed, key, 'cumulativeGasUsed');
  const logs: FlashLog[] = new Array(logsRaw.length);
  for (let i = 0; i < logsRaw.length; i++) logs[i] = parseLog(logsRaw[i], key, i);
  return {
    type,
    status,
    cumulativeGasUsed,
    logs,
    depositNonce: optionalQuantity(body.depositNonce, key, 'depositNonce'),
    depositReceiptVersion: optionalQuantity(body.depositReceiptVersion, key, 'depositReceiptVersion'),
  };
}

const PREV_ID = /^(\d{1,15})-(\d{1,7})$/;

/** `metadata.prev_flashblock_id` as [block, index]; [-1, -1] when absent, null or `"0-0"` (node-reth's "none"). */
function parsePrevId(v: unknown): [number, number] {
  if (v === undefined || v === null) return [-1, -1];
  const m = typeof v === 'string' ? PREV_ID.exec(v) : null;
  if (m === null) throw new SchemaError('metadata.prev_flashblock_id must be "<block>-<index>"');
  const block = Number(m[1]);
  const index = Number(m[2]);
  return block === 0 && index === 0 ? [-1, -1] : [block, index];
}

interface ParsedMetadata {
  blockNumber: number;
  receipts: Map<string, FlashReceipt> | null;
  balances: Map<string, bigint> | null;
  prev: [number, number];
  accessList: AccountChanges[] | null;
  accessListProblem: string | null;
}

function parseMetadata(v: unknown): ParsedMetadata {
  const m = object(v, 'metadata');
  const bn = req(m, 'block_number', 'metadata');
  if (typeof bn !== 'number' || !Number.isSafeInteger(bn) || bn < 0) throw new SchemaError('metadata.block_number must be a non-negative integer');
  const prev = parsePrevId(m.prev_flashblock_id);
  let receipts: Map<string, FlashReceipt> | null = null;
  if (m.receipts !== undefined && m.receipts !== null) {
    const r = object(m.receipts, 'metadata.receipts');
    receipts = new Map();
    for (const k in r) receipts.set(hash(k, 'metadata.receipts key'), parseReceipt(r[k], k));
  }
  let balances: Map<string, bigint> | null = null;
  if (m.new_account_balances !== undefined && m.new_account_balances !== null) {
    const b = object(m.new_account_balances, 'metadata.new_account_balances');
    balances = new Map();
    for (const k in b) {
      const a = address(k, 'metadata.new_account_balances key');
      const q = b[k];
      if (!isLooseQuantity(q)) throw new SchemaError(`metadata.new_account_balances[${k.slice(0, 10)}] must be a hex quantity`);
      balances.set(a, quantityToBigInt(q));
    }
  }
  let accessList: AccountChanges[] | null = null;
  let accessListProblem: string | null = null;
  // X Layer sends RLP hex; Base's post-Azul frames carried a JSON `access_list` ({} or []) of their own, ignored here.
  const al = m.access_list;
  if (typeof al === 'string') {
    const r = isHexData(al) ? decodeAccessList(al) : { ok: false as const, reason: 'not hex bytes' };
    if (r.ok) accessList = r.accounts;
    else accessListProblem = r.reason;
  }
  return { blockNumber: bn, receipts, balances, prev, accessList, accessListProblem };
}

/** Turns a frame's bytes into JSON text: `{` first (after white space) = JSON, anything else = brotli. */
export function frameText(data: Buffer, maxBytes: number): { ok: true; text: string } | { ok: false; reason: 'too_large' | 'brotli'; detail: string } {
  const b = frameBytes(data, maxBytes);
  return b.ok ? { ok: true, text: b.bytes.toString('utf8') } : b;
}

/** A frame's JSON bytes: the frame itself when it starts with `{` (after white space), else brotli-inflated. */
function frameBytes(data: Buffer, maxBytes: number): { ok: true; bytes: Buffer } | { ok: false; reason: 'too_large' | 'brotli'; detail: string } {
  if (data.length > maxBytes) return { ok: false, reason: 'too_large', detail: `frame of ${data.length} bytes exceeds ${maxBytes}` };
  let i = 0;
  while (i < data.length && (data[i] === 0x20 || data[i] === 0x0a || data[i] === 0x0d || data[i] === 0x09)) i++;
  if (data[i] === 0x7b) return { ok: true, bytes: data };
  try {
    const out = brotliDecompressSync(data, { maxOutputLength: maxBytes, params: { [zlibConstants.BROTLI_DECODER_PARAM_LARGE_WINDOW]: 0 } });
    return { ok: true, bytes: out };
  } catch (e) {
    const err = e as { code?: string; message?: string };
    if (err.code === 'ERR_BUFFER_TOO_LARGE' || /too large|maxOutputLength/i.test(err.message ?? '')) {
      return { ok: false, reason: 'too_large', detail: `decompressed frame exceeds ${maxBytes} bytes` };
    }
    return { ok: false, reason: 'brotli', detail: `neither JSON nor brotli: ${err.message ?? 'decompression failed'}` };
  }
}

/**
 * Decodes one upstream frame into a validated Flashblock, or a reason. No state, no I/O, no throw. A natively decoded
 * flashblock's body lies in the frame pool: whoever drops it without handing it to pending state calls
 * `fb.body.release()` (the pipeline does; else its region waits for the body to be collected).
 * `json` is the decoded JSON text (the frame itself when it was text). `isBinary` is the WebSocket frame kind; it
 * only decides the reason a frame that is neither a JSON object nor brotli is counted under. `native`: the native
 * decoder (default: the addon's, when built); null = this file's decoder only.
 */
export function decodeFrame(data: Buffer, maxBytes: number, isBinary = true, native: NativeDecoder | null = nativeDecoder()): DecodeFrameResult {
  const t = frameBytes(data, maxBytes);
  if (!t.ok) return t.reason === 'brotli' ? (notBrotli(data, isBinary) ?? t) : t;
  if (native !== null) {
    // The native decoder accepts only what the code below accepts, with the same result; what it declines (bad
    // input included) is decided and worded below (test/ingest/native-frame.test.ts holds them equal).
    let body: LayoutBody | string = 'not decoded';
    try {
      body = decodeLayout(native, t.bytes);
    } catch {
      // Unreachable (the addon catches its panics); the JS decoder below still decides.
    }
    const d = typeof body === 'string' ? null : flashblockOfLayout(body);
    if (d === null && typeof body !== 'string') body.release();
    if (d !== null) return new NativeDecoded(d.fb, d.senders, t.bytes);
  }
  const text = t.bytes.toString('utf8');
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch (e) {
    return { ok: false, reason: 'json', detail: (e as Error).message.slice(0, 120) };
  }
  return validateFlashblock(root, text);
}

/**
 * The reason for a frame that did not start with `{` and is not brotli either: valid JSON of another type (`[1,2,3]`,
 * `null`) is a schema failure; a text frame that does not parse is a json failure; a binary frame that does not
 * parse stays a brotli failure (null). Runs only on that failure path.
 */
function notBrotli(data: Buffer, isBinary: boolean): DecodeFrameResult | null {
  const text = data.toString('utf8');
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch (e) {
    return isBinary ? null : { ok: false, reason: 'json', detail: (e as Error).message.slice(0, 120) };
  }
  return validateFlashblock(root, text);
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
    const { diff, txs, badTx } = parseDiff(req(o, 'diff', 'frame'));
    if (badTx !== null) {
      const where = badTx.at < 0 ? 'diff.post_exec_tx' : `diff.transactions[${badTx.at}]`;
      return { ok: false, reason: 'transaction', detail: `${where}: ${badTx.reason}`, blockNumber, index };
    }
    const pe = diff.postExecTx?.postExec;
    if (pe != null && pe.blockNumber !== BigInt(meta.blockNumber)) {
      throw new SchemaError(`diff.post_exec_tx is anchored to block ${pe.blockNumber}, not ${meta.blockNumber}`);
    }
    const fb: Flashblock = {
      payloadId: (pid as string).toLowerCase(),
      index: idx,
      blockNumber: meta.blockNumber,
      base,
      diff,
      body: new ObjectBody(txs, meta.receipts, meta.balances),
      accessList: meta.accessList,
      accessListProblem: meta.accessListProblem,
      prevBlockNumber: meta.prev[0],
      prevIndex: meta.prev[1],
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
