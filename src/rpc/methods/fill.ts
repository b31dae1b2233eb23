// eth_fillTransaction from pending state, as geth answers it ({raw, tx}: the unsigned transaction's EIP-2718 bytes
// and its fields), so a wallet's back-to-back sends are filled right in one call. Never signs, never forwards.
//
// Filled as geth's setDefaults does, with pending state where geth reads its head: nonce = the preconfirmed pending
// nonce (eth_getTransactionCount `pending`: the highest of the node's pending count, the preconfirmed next nonce
// and the executed state's nonce); gas = eth_estimateGas on the executed pending state (the node's at `latest` when
// execution is off or not ready); fees = the node's suggested tip, maxFeePerGas = tip + 2 × the pending block's
// base fee (geth's rule; gasPrice = tip + base fee for legacy and EIP-2930); chainId = the node's. Fields the caller
// gave are kept. Type: the caller's, else 0x4 with an authorizationList, 0x2 with EIP-1559 fees, 0x1 with gasPrice
// and an accessList, 0x0 with gasPrice, else 0x2. Blob transactions are refused (OP-stack chains take none).
import { bigIntToBytes, bytesToHex, hexToBytes, toQuantity } from '../../chain/hex.js';
import { keccak256Hex } from '../../chain/keccak.js';
import { encodeRlp, type RlpInput } from '../../chain/rlp.js';
import { RpcCode, RpcError } from '../../errors.js';
import type { NodeClient } from '../../node/client.js';
import type { BlockView } from '../../state/view.js';
import { atNewestState, engineFor, engineRead, pendingNonce } from './executed.js';
import { arity } from './params.js';
import { usablePending } from './pending.js';
import { FromState, type Handler, type MethodContext } from './types.js';

const ZERO_ADDRESS = '0x0000000000000000000000000000000000000000';
const QUANTITY = /^0x[0-9a-fA-F]{1,64}$/;
const DATA = /^0x(?:[0-9a-fA-F]{2})*$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const WORD = /^0x[0-9a-fA-F]{64}$/;

interface AccessEntry {
  address: string;
  storageKeys: string[];
}

interface Authorization {
  chainId: bigint;
  address: string;
  nonce: bigint;
  yParity: bigint;
  r: bigint;
  s: bigint;
}

/** The transaction arguments as given, validated (lower-case hex). */
interface TxArgs {
  type: number | null;
  from: string;
  to: string | null;
  value: bigint;
  input: string;
  nonce: bigint | null;
  gas: bigint | null;
  gasPrice: bigint | null;
  maxFeePerGas: bigint | null;
  maxPriorityFeePerGas: bigint | null;
  chainId: bigint | null;
  accessList: AccessEntry[] | null;
  authorizationList: Authorization[] | null;
}

function bad(what: string): RpcError {
  return new RpcError(RpcCode.INVALID_PARAMS, `invalid argument 0: ${what}`);
}

function qty(o: Record<string, unknown>, k: string): bigint | null {
  const v = o[k];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || !QUANTITY.test(v)) throw bad(`"${k}" must be a 0x-prefixed hex quantity`);
  return BigInt(v);
}

function addr(v: unknown, what: string): string {
  if (typeof v !== 'string' || !ADDRESS.test(v)) throw bad(`${what} must be a 20-byte 0x-prefixed address`);
  return v.toLowerCase();
}

function accessList(v: unknown): AccessEntry[] | null {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v)) throw bad('"accessList" must be an array');
  return v.map((e: unknown) => {
    const o = (e ?? {}) as { address?: unknown; storageKeys?: unknown };
    const keys = o.storageKeys ?? [];
    if (!Array.isArray(keys) || !keys.every((k) => typeof k === 'string' && WORD.test(k))) throw bad('"accessList" storageKeys must be 32-byte hex words');
    return { address: addr(o.address, '"accessList" address'), storageKeys: (keys as string[]).map((k) => k.toLowerCase()) };
  });
}

function authorizationList(v: unknown): Authorization[] | null {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v)) throw bad('"authorizationList" must be an array');
  return v.map((e: unknown) => {
    const o = (e ?? {}) as Record<string, unknown>;
    const yParity = qty(o, 'yParity') ?? qty(o, 'v');
    const chainId = qty(o, 'chainId');
    const nonce = qty(o, 'nonce');
    const r = qty(o, 'r');
    const s = qty(o, 's');
    if (chainId === null || nonce === null || yParity === null || r === null || s === null) throw bad('an authorization needs chainId, address, nonce, yParity, r and s');
    return { chainId, address: addr(o.address, 'an authorization address'), nonce, yParity, r, s };
  });
}

/** Validates the call object (geth's TransactionArgs). */
function txArgs(v: unknown): TxArgs {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw bad('expected a transaction object');
  const o = v as Record<string, unknown>;
  if (o.blobs !== undefined || o.blobVersionedHashes !== undefined || o.maxFeePerBlobGas !== undefined) {
    throw bad('blob transactions are not filled (OP-stack chains take none)');
  }
  const data = o.data ?? null;
  const input = o.input ?? null;
  for (const [k, x] of [['data', data], ['input', input]] as const) {
    if (x !== null && (typeof x !== 'string' || !DATA.test(x))) throw bad(`"${k}" must be 0x-prefixed hex bytes`);
  }
  if (data !== null && input !== null && (data as string).toLowerCase() !== (input as string).toLowerCase()) {
    throw bad('both "data" and "input" are set and not equal. Please use "input" to pass transaction call data');
  }
  const type = qty(o, 'type');
  if (type !== null && type !== 0n && type !== 1n && type !== 2n && type !== 4n) throw bad(`transaction type ${toQuantity(type)} is not filled here (0x0, 0x1, 0x2, 0x4)`);
  const args: TxArgs = {
    type: type === null ? null : Number(type),
    from: o.from === undefined || o.from === null ? ZERO_ADDRESS : addr(o.from, '"from"'),
    to: o.to === undefined || o.to === null ? null : addr(o.to, '"to"'),
    value: qty(o, 'value') ?? 0n,
    input: ((input ?? data ?? '0x') as string).toLowerCase(),
    nonce: qty(o, 'nonce'),
    gas: qty(o, 'gas'),
    gasPrice: qty(o, 'gasPrice'),
    maxFeePerGas: qty(o, 'maxFeePerGas'),
    maxPriorityFeePerGas: qty(o, 'maxPriorityFeePerGas'),
    chainId: qty(o, 'chainId'),
    accessList: accessList(o.accessList),
    authorizationList: authorizationList(o.authorizationList),
  };
  if (args.gasPrice !== null && (args.maxFeePerGas !== null || args.maxPriorityFeePerGas !== null)) {
    throw bad('both gasPrice and (maxFeePerGas or maxPriorityFeePerGas) specified');
  }
  return args;
}

/** The type geth's ToTransaction builds for these arguments. */
function txType(a: TxArgs): number {
  if (a.type !== null) return a.type;
  if (a.authorizationList !== null) return 4;
  if (a.maxFeePerGas !== null || a.maxPriorityFeePerGas !== null) return 2;
  if (a.gasPrice !== null) return a.accessList !== null ? 1 : 0;
  return 2;
}

/** The node's chain id, asked once per node client (a failed ask is retried next time). */
const chainIds = new WeakMap<NodeClient, Promise<bigint>>();
function chainIdOf(node: NodeClient): Promise<bigint> {
  let p = chainIds.get(node);
  if (p === undefined) {
    p = node.call<string>('eth_chainId', []).then(BigInt);
    p.catch(() => chainIds.delete(node));
    chainIds.set(node, p);
  }
  return p;
}

/** The base fee the next transaction pays: the pending block's, else the node's latest block's. */
async function baseFee(ctx: MethodContext, top: BlockView | null): Promise<bigint> {
  if (top !== null) return top.base.baseFeePerGas;
  const b = await ctx.node.call<{ baseFeePerGas?: string } | null>('eth_getBlockByNumber', ['latest', false]);
  return b?.baseFeePerGas === undefined ? 0n : BigInt(b.baseFeePerGas);
}

/** The call object eth_estimateGas gets: the caller's fields, without gas or nonce. */
function estimateRequest(a: TxArgs): Record<string, unknown> {
  const r: Record<string, unknown> = { from: a.from, value: toQuantity(a.value), input: a.input };
  if (a.to !== null) r.to = a.to;
  if (a.gasPrice !== null) r.gasPrice = toQuantity(a.gasPrice);
  if (a.maxFeePerGas !== null) r.maxFeePerGas = toQuantity(a.maxFeePerGas);
  if (a.maxPriorityFeePerGas !== null) r.maxPriorityFeePerGas = toQuantity(a.maxPriorityFeePerGas);
  if (a.accessList !== null) r.accessList = a.accessList;
  if (a.authorizationList !== null) r.authorizationList = a.authorizationList.map(authJson);
  return r;
}

/** Gas for `a`: estimated on the executed pending state, else by the node at `latest`. */
async function estimate(ctx: MethodContext, a: TxArgs, top: BlockView | null): Promise<bigint> {
  const req = estimateRequest(a);
  if (ctx.execution !== null && top !== null && atNewestState(ctx, top)) {
    const e = await engineFor(ctx, top);
    const g = e === null ? null : await engineRead(ctx, () => e.estimateGas(req));
    if (g !== null) return g;
  }
  return BigInt(await ctx.node.call<string>('eth_estimateGas', [req, 'latest']));
}

function authJson(x: Authorization): Record<string, string> {
  return { chainId: toQuantity(x.chainId), address: x.address, nonce: toQuantity(x.nonce), yParity: toQuantity(x.yParity), r: toQuantity(x.r), s: toQuantity(x.s) };
}

/** A filled transaction: every field set for its type. */
interface Filled {
  type: number;
  chainId: bigint;
  nonce: bigint;
  gas: bigint;
  gasPrice: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  a: TxArgs;
}

/** The unsigned transaction as geth's MarshalBinary gives it: EIP-2718 bytes with a zero signature. */
function encodeUnsigned(f: Filled): Buffer {
  const n = bigIntToBytes;
  const a = f.a;
  const to = a.to === null ? Buffer.alloc(0) : hexToBytes(a.to);
  const data = hexToBytes(a.input);
  const zeroSig: RlpInput[] = [n(0n), n(0n), n(0n)];
  if (f.type === 0) return encodeRlp([n(f.nonce), n(f.gasPrice), n(f.gas), to, n(a.value), data, ...zeroSig]);
  const list: RlpInput = (a.accessList ?? []).map((e) => [hexToBytes(e.address), e.storageKeys.map(hexToBytes)]);
  let fields: RlpInput[];
  if (f.type === 1) fields = [n(f.chainId), n(f.nonce), n(f.gasPrice), n(f.gas), to, n(a.value), data, list];
  else fields = [n(f.chainId), n(f.nonce), n(f.maxPriorityFeePerGas), n(f.maxFeePerGas), n(f.gas), to, n(a.value), data, list];
  if (f.type === 4) {
    fields.push((a.authorizationList ?? []).map((x) => [n(x.chainId), hexToBytes(x.address), n(x.nonce), n(x.yParity), n(x.r), n(x.s)]));
  }
  return Buffer.concat([Buffer.from([f.type]), encodeRlp([...fields, ...zeroSig])]);
}

/** The transaction object geth returns beside the bytes (its JSON form of the unsigned transaction). */
function txJson(f: Filled, hash: string): Record<string, unknown> {
  const a = f.a;
  const o: Record<string, unknown> = { type: toQuantity(f.type), chainId: toQuantity(f.chainId), nonce: toQuantity(f.nonce), to: a.to, gas: toQuantity(f.gas) };
  if (f.type <= 1) o.gasPrice = toQuantity(f.gasPrice);
  else {
    o.maxPriorityFeePerGas = toQuantity(f.maxPriorityFeePerGas);
    o.maxFeePerGas = toQuantity(f.maxFeePerGas);
  }
  o.value = toQuantity(a.value);
  o.input = a.input;
  if (f.type !== 0) o.accessList = a.accessList ?? [];
  if (f.type === 4) o.authorizationList = (a.authorizationList ?? []).map(authJson);
  o.v = '0x0';
  o.r = '0x0';
  o.s = '0x0';
  if (f.type !== 0) o.yParity = '0x0';
  o.hash = hash;
  return o;
}

async function fill(ctx: MethodContext, a: TxArgs): Promise<FromState> {
  const type = txType(a);
  if (type === 4 && a.to === null) throw bad('an EIP-7702 transaction needs "to"');
  // The block `pending` means, when it may be answered from state (null: the node's latest answers).
  const top = ctx.options.flashblocksEnabled ? usablePending(ctx) : null;
  const legacyFees = type <= 1;
  const needTip = legacyFees ? a.gasPrice === null : a.maxPriorityFeePerGas === null;
  const [chainId, nonce, gas, tip, base] = await Promise.all([
    chainIdOf(ctx.node),
    a.nonce ?? pendingNonce(ctx, a.from, top),
    a.gas ?? estimate(ctx, a, top),
    needTip ? ctx.node.call<string>('eth_maxPriorityFeePerGas', []).then(BigInt) : 0n,
    (legacyFees ? a.gasPrice === null : a.maxFeePerGas === null) ? baseFee(ctx, top) : 0n,
  ]);
  if (a.chainId !== null && a.chainId !== chainId) throw bad(`chainId does not match node's (have=${a.chainId}, want=${chainId})`);
  const priority = a.maxPriorityFeePerGas ?? tip;
  const f: Filled = {
    type,
    chainId,
    nonce,
    gas,
    gasPrice: legacyFees ? (a.gasPrice ?? tip + base) : 0n,
    maxPriorityFeePerGas: legacyFees ? 0n : priority,
    maxFeePerGas: legacyFees ? 0n : (a.maxFeePerGas ?? priority + 2n * base),
    a,
  };
  if (!legacyFees && f.maxFeePerGas < f.maxPriorityFeePerGas) {
    throw bad(`maxFeePerGas (${f.maxFeePerGas}) < maxPriorityFeePerGas (${f.maxPriorityFeePerGas})`);
  }
  const raw = encodeUnsigned(f);
  return new FromState({ raw: bytesToHex(raw), tx: txJson(f, keccak256Hex(raw)) });
}

/** eth_fillTransaction(args): the unsigned transaction filled from pending state, `{raw, tx}`. */
export const eth_fillTransaction: Handler = (ctx, params) => {
  arity(params, 1, 1);
  return fill(ctx, txArgs(params[0]));
};
