// Parameter validation for method handlers: each check names the argument and what was expected, in geth's wording
// ("invalid argument 0: hex string without 0x prefix"). Pure; throws RpcError(-32602) only.
import { RpcCode, RpcError } from '../../errors.js';

const HEX_BODY = /^[0-9a-fA-F]*$/;

/** A parsed block parameter. `number` is set for kind 'number'; `hash` for kind 'hash'. */
export interface BlockParam {
  kind: 'pending' | 'latest' | 'earliest' | 'safe' | 'finalized' | 'number' | 'hash';
  number: number;
  hash: string;
}

function invalid(i: number, what: string): RpcError {
  return new RpcError(RpcCode.INVALID_PARAMS, `invalid argument ${i}: ${what}`);
}

/** Throws unless `params` has between `min` and `max` entries. */
export function arity(params: unknown[], min: number, max: number): void {
  if (params.length < min) throw new RpcError(RpcCode.INVALID_PARAMS, `missing value for required argument ${params.length}`);
  if (params.length > max) throw new RpcError(RpcCode.INVALID_PARAMS, `too many arguments, want at most ${max}`);
}

function hexBody(v: unknown, i: number): string {
  if (typeof v !== 'string') throw invalid(i, `expected a 0x-prefixed hex string, got ${typeName(v)}`);
  if (v.length < 2 || v.charCodeAt(0) !== 48 || (v.charCodeAt(1) | 0x20) !== 120) throw invalid(i, 'hex string without 0x prefix');
  const body = v.slice(2);
  if (!HEX_BODY.test(body)) throw invalid(i, 'invalid hex string');
  return body;
}

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v === 'object' ? 'an object' : `a ${typeof v}`;
}

/** A 32-byte hash, lower-cased. */
export function hash32(params: unknown[], i: number): string {
  const body = hexBody(params[i], i);
  if (body.length !== 64) throw invalid(i, `hex string has length ${body.length}, want 64 for a 32-byte hash`);
  return '0x' + body.toLowerCase();
}

/** A 20-byte address, lower-cased. */
export function address(params: unknown[], i: number): string {
  const body = hexBody(params[i], i);
  if (body.length !== 40) throw invalid(i, `hex string has length ${body.length}, want 40 for an address`);
  return '0x' + body.toLowerCase();
}

/** Hex data of any even length (raw transactions). */
export function hexData(params: unknown[], i: number): string {
  const body = hexBody(params[i], i);
  if ((body.length & 1) !== 0) throw invalid(i, 'hex string of odd length');
  if (body.length === 0) throw invalid(i, 'empty hex string');
  return '0x' + body.toLowerCase();
}

/** A quantity that fits a safe integer (indexes, block numbers). */
export function quantity(params: unknown[], i: number): number {
  const body = hexBody(params[i], i);
  if (body.length === 0) throw invalid(i, 'hex string "0x"');
  if (body.length > 1 && body.charCodeAt(0) === 48) throw invalid(i, 'hex number with leading zero digits');
  if (body.length > 13) throw invalid(i, 'hex number > 52 bits');
  return Number.parseInt(body, 16);
}

/** A boolean; absent → `def` when given. */
export function bool(params: unknown[], i: number, def?: boolean): boolean {
  const v = params[i];
  if (v === undefined && def !== undefined) return def;
  if (typeof v !== 'boolean') throw invalid(i, `expected a boolean, got ${typeName(v)}`);
  return v;
}

/** The block tags (case-sensitive, as geth and reth have them). A Map: "constructor" is not a tag. */
const TAGS = new Map<string, BlockParam['kind']>([
  ['pending', 'pending'],
  ['latest', 'latest'],
  ['earliest', 'earliest'],
  ['safe', 'safe'],
  ['finalized', 'finalized'],
]);

/** What a block parameter may be, for error messages. */
export function validBlockParams(allowHash: boolean): string {
  const list = 'latest, pending, earliest, safe, finalized, or a hex block number such as "0x1b4"';
  return allowHash ? list + ', a 32-byte block hash, or an object {"blockHash": ...} / {"blockNumber": ...}' : list;
}

/** A string that is neither a tag nor 0x-prefixed: tags are case-sensitive ("Pending" is not one). */
function unknownTag(i: number, v: string, allowHash: boolean): RpcError {
  const shown = v.length > 40 ? v.slice(0, 40) + '…' : v;
  return invalid(i, `unknown block tag ${JSON.stringify(shown)}; valid: ${validBlockParams(allowHash)}`);
}

/** Throws -32602 when argument `i` is a string that is neither a block tag nor 0x-prefixed (e.g. "Pending"). */
export function checkBlockTag(params: unknown[], i: number, allowHash: boolean): void {
  const v = params[i];
  if (typeof v === 'string' && !TAGS.has(v) && !v.startsWith('0x') && !v.startsWith('0X')) throw unknownTag(i, v, allowHash);
}

/**
 * A block parameter: a tag, a quantity, or (with `allowHash`) a 32-byte block hash or an EIP-1898 object
 * `{blockNumber}` / `{blockHash}`. Absent → `latest` when `optional`.
 */
export function blockParam(params: unknown[], i: number, allowHash: boolean, optional = false): BlockParam {
  const v = params[i];
  if (v === undefined && optional) return { kind: 'latest', number: -1, hash: '' };
  if (typeof v === 'string') {
    const tag = TAGS.get(v);
    if (tag !== undefined) return { kind: tag, number: -1, hash: '' };
    if (!v.startsWith('0x') && !v.startsWith('0X')) throw unknownTag(i, v, allowHash);
    if (allowHash && v.length === 66) return { kind: 'hash', number: -1, hash: hash32(params, i) };
    return { kind: 'number', number: quantity(params, i), hash: '' };
  }
  if (allowHash && v !== null && typeof v === 'object' && !Array.isArray(v)) {
    const o = v as Record<string, unknown>;
    if (typeof o.blockHash === 'string') return { kind: 'hash', number: -1, hash: hash32([o.blockHash], 0) };
    if (o.blockNumber !== undefined) return blockParam([o.blockNumber], 0, false);
    throw invalid(i, 'block object needs blockHash or blockNumber');
  }
  throw invalid(i, `expected a block tag or number, got ${typeName(v)}; valid: ${validBlockParams(allowHash)}`);
}

/** Replaces argument `i` with `latest` in a copy of `params` (pending answered as latest by the node). */
export function withLatest(params: unknown[], i: number): unknown[] {
  const out = params.slice();
  while (out.length <= i) out.push(undefined);
  out[i] = 'latest';
  return out;
}
