// Block headers of the witness fixtures: decoded from their RLP (or from kona's JSON, re-encoded so the hash is the
// keccak of real bytes), served as eth_getBlockByNumber JSON, and the next block's base fee from a parent. Pure.
import { keccak256Hex } from '../../src/chain/keccak.js';
import { bigIntToBytes, bytesToBigInt, bytesToHex, hexToBytes, toQuantity } from '../../src/chain/hex.js';
import { encodeRlp, readRlpItem, RLP_OK, rlpItem, rlpProblem } from '../../src/chain/rlp.js';

/** A full block header as the chain has it. Hex lower-case; `json` is its eth_getBlockByNumber shape (no body). */
export interface WitnessHeader {
  hash: string;
  number: number;
  parentHash: string;
  sha3Uncles: string;
  miner: string;
  stateRoot: string;
  transactionsRoot: string;
  receiptsRoot: string;
  logsBloom: string;
  difficulty: bigint;
  gasLimit: bigint;
  gasUsed: bigint;
  timestamp: number;
  extraData: string;
  mixHash: string;
  nonce: string;
  baseFeePerGas: bigint;
  withdrawalsRoot: string | null;
  blobGasUsed: bigint | null;
  excessBlobGas: bigint | null;
  parentBeaconBlockRoot: string | null;
  requestsHash: string | null;
  /** The header's RLP (keccak of it is `hash`). */
  rlp: Buffer;
  json: Record<string, unknown>;
}

/** Header fields in RLP order: name and whether it is a scalar (else fixed bytes). The last five are optional. */
const FIELDS: readonly (readonly [string, 'bytes' | 'scalar'])[] = [
  ['parentHash', 'bytes'], ['sha3Uncles', 'bytes'], ['miner', 'bytes'], ['stateRoot', 'bytes'], ['transactionsRoot', 'bytes'],
  ['receiptsRoot', 'bytes'], ['logsBloom', 'bytes'], ['difficulty', 'scalar'], ['number', 'scalar'], ['gasLimit', 'scalar'],
  ['gasUsed', 'scalar'], ['timestamp', 'scalar'], ['extraData', 'bytes'], ['mixHash', 'bytes'], ['nonce', 'bytes'],
  ['baseFeePerGas', 'scalar'], ['withdrawalsRoot', 'bytes'], ['blobGasUsed', 'scalar'], ['excessBlobGas', 'scalar'],
  ['parentBeaconBlockRoot', 'bytes'], ['requestsHash', 'bytes'],
];
/** Fields up to baseFeePerGas are in every post-London header. */
const REQUIRED_FIELDS = 16;

/** Decodes a header's RLP; a malformed one is an Error naming `what`. */
export function decodeHeader(rlp: Buffer, what: string): WitnessHeader {
  let code = readRlpItem(rlp, 0, rlp.length);
  if (code !== RLP_OK || !rlpItem.isList || rlpItem.end !== rlp.length) {
    throw new Error(`${what}: not an RLP header list (${code === RLP_OK ? 'trailing bytes or not a list' : rlpProblem(code)})`);
  }
  const items: Buffer[] = [];
  for (let pos = rlpItem.start, end = rlpItem.end; pos < end; ) {
    code = readRlpItem(rlp, pos, end);
    if (code !== RLP_OK || rlpItem.isList) throw new Error(`${what}: header field ${items.length} is ${code === RLP_OK ? 'a list' : rlpProblem(code)}`);
    items.push(rlp.subarray(rlpItem.start, rlpItem.end));
    pos = rlpItem.end;
  }
  if (items.length < REQUIRED_FIELDS || items.length > FIELDS.length) {
    throw new Error(`${what}: a header has ${REQUIRED_FIELDS}..${FIELDS.length} fields, this one ${items.length}`);
  }
  const bytes = (i: number): string | null => (i < items.length ? bytesToHex(items[i] as Buffer) : null);
  const scalar = (i: number): bigint | null => (i < items.length ? bytesToBigInt(items[i] as Buffer) : null);
  const h: WitnessHeader = {
    hash: keccak256Hex(rlp),
    number: Number(scalar(8)),
    parentHash: bytes(0) as string,
    sha3Uncles: bytes(1) as string,
    miner: bytes(2) as string,
    stateRoot: bytes(3) as string,
    transactionsRoot: bytes(4) as string,
    receiptsRoot: bytes(5) as string,
    logsBloom: bytes(6) as string,
    difficulty: scalar(7) as bigint,
    gasLimit: scalar(9) as bigint,
    gasUsed: scalar(10) as bigint,
    timestamp: Number(scalar(11)),
    extraData: bytes(12) as string,
    mixHash: bytes(13) as string,
    nonce: bytes(14) as string,
    baseFeePerGas: scalar(15) as bigint,
    withdrawalsRoot: bytes(16),
    blobGasUsed: scalar(17),
    excessBlobGas: scalar(18),
    parentBeaconBlockRoot: bytes(19),
    requestsHash: bytes(20),
    rlp,
    json: {},
  };
  h.json = headerJson(h, items.length);
  return h;
}

/** The eth_getBlockByNumber fields of a header (without body fields: transactions, size, uncles, withdrawals). */
function headerJson(h: WitnessHeader, fieldCount: number): Record<string, unknown> {
  const out: Record<string, unknown> = { number: toQuantity(h.number), hash: h.hash };
  for (let i = 0; i < fieldCount; i++) {
    const [name, kind] = FIELDS[i] as readonly [string, 'bytes' | 'scalar'];
    const v = (h as unknown as Record<string, unknown>)[name];
    if (name === 'number') continue;
    out[name] = kind === 'scalar' ? toQuantity(v as bigint | number) : v;
  }
  return out;
}

/** A header given as kona's JSON (eth_getBlockByNumber field names), re-encoded to RLP and decoded from it. */
export function headerFromJson(j: Record<string, unknown>, what: string): WitnessHeader {
  const items: Buffer[] = [];
  for (const [name, kind] of FIELDS) {
    const v = j[name];
    if (v === undefined || v === null) {
      if (items.length < REQUIRED_FIELDS) throw new Error(`${what}: header field ${name} is missing`);
      break;
    }
    if (typeof v !== 'string' || !/^0x[0-9a-fA-F]*$/.test(v)) throw new Error(`${what}: header field ${name} is not hex: ${JSON.stringify(v)}`);
    if (kind === 'scalar') {
      items.push(bigIntToBytes(v.length === 2 ? 0n : BigInt(v)));
    } else {
      if (v.length % 2 !== 0) throw new Error(`${what}: header field ${name} has an odd number of hex digits`);
      items.push(hexToBytes(v.toLowerCase()));
    }
  }
  const h = decodeHeader(encodeRlp(items), what);
  if (typeof j.hash === 'string' && j.hash.toLowerCase() !== h.hash) {
    throw new Error(`${what}: header says hash ${j.hash} but its fields hash to ${h.hash}`);
  }
  return h;
}

/** EIP-1559 parameters: the base fee moves by at most 1/denominator; the gas target is gasLimit / elasticity. */
export interface BaseFeeParams {
  denominator: bigint;
  elasticity: bigint;
}

/** Holocene's extraData (version 0: denominator u32, elasticity u32), or null when `extraData` is not that. */
export function holoceneParams(extraData: string): BaseFeeParams | null {
  const b = hexToBytes(extraData);
  if (b.length !== 9 || b[0] !== 0) return null;
  return { denominator: BigInt(b.readUInt32BE(1)), elasticity: BigInt(b.readUInt32BE(5)) };
}

/** A Holocene block's extraData from its payload's eip1559Params (zero params stand for the chain's defaults). */
export function holoceneExtraData(eip1559Params: string, defaults: BaseFeeParams): string {
  const p = hexToBytes(eip1559Params);
  if (p.length !== 8) throw new Error(`eip1559Params must be 8 bytes, got ${JSON.stringify(eip1559Params)}`);
  if (p.every((x) => x === 0)) {
    p.writeUInt32BE(Number(defaults.denominator), 0);
    p.writeUInt32BE(Number(defaults.elasticity), 4);
  }
  return '0x00' + p.toString('hex');
}

/** EIP-1559: the base fee of the block after `parent` under `params`. */
export function nextBaseFee(parent: { gasLimit: bigint; gasUsed: bigint; baseFeePerGas: bigint }, params: BaseFeeParams): bigint {
  const target = parent.gasLimit / params.elasticity;
  const base = parent.baseFeePerGas;
  if (parent.gasUsed === target) return base;
  if (parent.gasUsed > target) {
    const delta = (base * (parent.gasUsed - target)) / target / params.denominator;
    return base + (delta > 1n ? delta : 1n);
  }
  const delta = (base * (target - parent.gasUsed)) / target / params.denominator;
  return base > delta ? base - delta : 0n;
}
