// The devnet's L1 side: the L1Block predeploy (anvil --optimism 1.7.1 has no predeploy code) and the L1-info deposit
// that opens every devnet block with the Isthmus calldata (the Jovian calldata when anvil runs jovian, the fork of a
// chain preset the devnet plays), so every transaction pays an L1 fee and an operator fee as on a real OP chain.
// Devnet only; the daemon decodes these bytes with src/chain/l1fee.ts, never with this file.
//
// Sources (read, not copied): OP specs protocol/{isthmus,jovian}/l1-attributes.md (calldata layouts, selectors
// 0x098999be and 0x3db6be2b), protocol/deposits.md (L1-info deposit fields and source hash), L1Block.sol's storage
// layout (the slots op-revm reads the fee parameters from: 1 basefee, 3 scalars and sequence number, 7 blobBaseFee,
// 8 operator fee and, from Jovian, the DA footprint gas scalar above it).
import { concatHex, keccak256, pad, toHex, type Hex } from 'viem';
import { L1_BLOCK_ADDRESS, L1_INFO_DEPOSITOR, type L1Attributes, type L1InfoLayout } from '../../src/chain/l1fee.js';
import { rpcCall } from './anvil.js';
import { depositTx } from './contracts.js';

/**
 * L1Block runtime (131 bytes), the setters alone: `setL1BlockValuesIsthmus()` or `setL1BlockValuesJovian()` from the
 * depositor stores the packed calldata in L1Block.sol's slots, anything else reverts (from another caller with
 * NotDepositor(), 0x3cc50b45). The two layouts agree up to byte 176, where Jovian's adds the DA footprint gas scalar
 * (2 bytes; past the end of an Isthmus calldata, so read there as 0).
 *   00 PUSH1 0 CALLDATALOAD PUSH1 e0 SHR DUP1 PUSH4 098999be EQ SWAP1 PUSH4 3db6be2b EQ OR PUSH1 1c JUMPI
 *   18 PUSH1 0 DUP1 REVERT
 *   1c JUMPDEST PUSH20 depositor CALLER EQ PUSH1 44 JUMPI
 *   37 PUSH4 3cc50b45 PUSH1 0 MSTORE PUSH1 4 PUSH1 1c REVERT
 *   44 JUMPDEST
 *      slot 3 ← calldata[4..20) (baseFeeScalar ‖ blobBaseFeeScalar ‖ sequenceNumber) in the low 16 bytes
 *      slot 0 ← calldata[20..36) (timestamp ‖ number)
 *      slot 1 ← basefee, slot 7 ← blobBaseFee, slot 2 ← hash, slot 4 ← batcherHash
 *      slot 8 ← calldata[164..176) (operatorFeeScalar ‖ operatorFeeConstant) in the low 12 bytes, OR calldata[176..178)
 *               (daFootprintGasScalar) shifted 96 bits up (bytes 18..20 of the slot, where op-revm reads it)
 *      STOP
 */
export const L1_BLOCK_RUNTIME: Hex = `0x${[
  '60003560e01c8063098999be1490633db6be2b1417601c57600080fd',
  `5b73${L1_INFO_DEPOSITOR.slice(2)}3314604457`,
  '633cc50b456000526004601cfd',
  '5b',
  '60043560801c600355',
  '60143560801c600055',
  '602435600155',
  '604435600755',
  '606435600255',
  '608435600455',
  '60a43560a01c60b03560f01c60601b17600855',
  '00',
].join('')}`;

/** Selectors of setL1BlockValuesIsthmus() and setL1BlockValuesJovian(), and their calldata lengths. */
const SETTERS = {
  isthmus: { selector: '098999be', bytes: 176 },
  jovian: { selector: '3db6be2b', bytes: 178 },
} as const;

/** The L1-info layouts the devnet writes: Isthmus, or Jovian when its anvil runs jovian. */
export type DevnetL1Layout = Extract<L1InfoLayout, keyof typeof SETTERS>;

/** Gas of the L1-info deposit (post-Regolith: 1,000,000, not a system transaction). */
const L1_INFO_GAS = 1_000_000n;

/**
 * The devnet's fee parameters: Base mainnet's scalars (op-reth's vector) and an Isthmus operator fee (1.5 wei per
 * gas plus 1 gwei a transaction). Non-zero, so every devnet transaction pays both fees. The DA footprint gas scalar
 * is Jovian's default (400), written only in its layout.
 */
export const DEVNET_FEE_PARAMS = {
  baseFeeScalar: 2269n,
  blobBaseFeeScalar: 1_055_762n,
  operatorFeeScalar: 1_500_000n,
  operatorFeeConstant: 1_000_000_000n,
  daFootprintGasScalar: 400n,
} as const;

/** L2 blocks per L1 origin (12 s L1 slots over 2 s L2 blocks). */
const BLOCKS_PER_EPOCH = 6;
const FIRST_L1_NUMBER = 20_000_000n;
const FIRST_L1_TIMESTAMP = 1_700_000_000n;
const BATCHER_HASH = pad('0x00000000000000000000000000000000ba7c4e50', { size: 32 });

/**
 * The L1 attributes of devnet block `number`: a new L1 origin every six blocks (sequence number 0..5 within it), its
 * base fee and blob base fee varying with the origin, the fixed {@link DEVNET_FEE_PARAMS}. Deterministic.
 */
export function devnetL1Attributes(number: number, layout: DevnetL1Layout = 'isthmus'): L1Attributes {
  const epoch = BigInt(Math.floor(number / BLOCKS_PER_EPOCH));
  const l1Number = FIRST_L1_NUMBER + epoch;
  return {
    layout,
    baseFeeScalar: DEVNET_FEE_PARAMS.baseFeeScalar,
    blobBaseFeeScalar: DEVNET_FEE_PARAMS.blobBaseFeeScalar,
    sequenceNumber: BigInt(number % BLOCKS_PER_EPOCH),
    l1BlockTimestamp: FIRST_L1_TIMESTAMP + 12n * epoch,
    l1BlockNumber: l1Number,
    l1BaseFee: 1_000_000_000n + (epoch % 50n) * 37_000_001n,
    l1BlobBaseFee: 1n + (epoch % 7n) * 1_000_003n,
    l1BlockHash: keccak256(toHex(`devnet-l1-block-${l1Number}`)),
    batcherHash: BATCHER_HASH,
    // anvil 1.7.1 charges Isthmus's operator fee formula under jovian too (floor(gas × scalar / 1e6) + constant, not
    // Jovian's gas × scalar × 100 + constant): with no per-gas scalar both formulas give the constant, so the node and
    // a daemon executing jovian or karst charge the same.
    operatorFeeScalar: layout === 'jovian' ? 0n : DEVNET_FEE_PARAMS.operatorFeeScalar,
    operatorFeeConstant: DEVNET_FEE_PARAMS.operatorFeeConstant,
    daFootprintGasScalar: layout === 'jovian' ? DEVNET_FEE_PARAMS.daFootprintGasScalar : null,
  };
}

/**
 * Packed setL1BlockValuesIsthmus() calldata of `a` (176 bytes, the spec's table), or setL1BlockValuesJovian() (178:
 * the same, then daFootprintGasScalar) when `a.layout` is 'jovian'.
 */
export function encodeL1Info(a: Readonly<L1Attributes>): Hex {
  if (a.layout !== 'isthmus' && a.layout !== 'jovian') throw new Error(`the devnet writes no ${a.layout} L1-info calldata`);
  const setter = SETTERS[a.layout];
  const n = (v: bigint, bytes: number): string => {
    if (v < 0n || v >= 1n << BigInt(8 * bytes)) throw new Error(`L1 attribute ${v} does not fit ${bytes} bytes`);
    return v.toString(16).padStart(2 * bytes, '0');
  };
  const word = (h: string): string => {
    if (!/^0x[0-9a-fA-F]{64}$/.test(h)) throw new Error(`L1 attribute ${h} is not 32 bytes`);
    return h.slice(2).toLowerCase();
  };
  const da = a.layout === 'jovian' ? n(a.daFootprintGasScalar ?? 0n, 2) : '';
  const out = `0x${setter.selector}${n(a.baseFeeScalar, 4)}${n(a.blobBaseFeeScalar, 4)}${n(a.sequenceNumber, 8)}${n(a.l1BlockTimestamp, 8)}${n(a.l1BlockNumber, 8)}${n(a.l1BaseFee, 32)}${n(a.l1BlobBaseFee, 32)}${word(a.l1BlockHash)}${word(a.batcherHash)}${n(a.operatorFeeScalar ?? 0n, 4)}${n(a.operatorFeeConstant ?? 0n, 8)}${da}` as Hex;
  if ((out.length - 2) / 2 !== setter.bytes) throw new Error(`${a.layout} L1-info calldata is not ${setter.bytes} bytes`);
  return out;
}

/** Source hash of an L1-info deposit: keccak256(uint256(1) ‖ keccak256(l1BlockHash ‖ uint256(sequenceNumber))). */
export function l1InfoSourceHash(l1BlockHash: string, sequenceNumber: bigint): Hex {
  const inner = keccak256(concatHex([l1BlockHash as Hex, pad(toHex(sequenceNumber), { size: 32 })]));
  return keccak256(concatHex([pad('0x01', { size: 32 }), inner]));
}

/** The L1-info deposit (EIP-2718 hex) that sets `a`: depositor → L1Block, no mint or value, 1,000,000 gas. */
export function l1InfoDeposit(a: Readonly<L1Attributes>): Hex {
  return depositTx(l1InfoSourceHash(a.l1BlockHash, a.sequenceNumber), L1_INFO_DEPOSITOR, L1_BLOCK_ADDRESS, 0n, 0n, L1_INFO_GAS, encodeL1Info(a));
}

/** Installs {@link L1_BLOCK_RUNTIME} at the L1Block predeploy on an anvil (before its first block). */
export async function installL1Block(url: string): Promise<void> {
  await rpcCall(url, 'anvil_setCode', [L1_BLOCK_ADDRESS, L1_BLOCK_RUNTIME]);
  const code = await rpcCall<string>(url, 'eth_getCode', [L1_BLOCK_ADDRESS, 'latest']);
  if (code.toLowerCase() !== L1_BLOCK_RUNTIME) throw new Error(`anvil did not take the L1Block code at ${L1_BLOCK_ADDRESS}`);
}

/** The OP fee vaults op-revm pays the L1 data fee and the operator fee into. */
export const L1_FEE_VAULT = '0x420000000000000000000000000000000000001a';
export const OPERATOR_FEE_VAULT = '0x420000000000000000000000000000000000001b';

/**
 * The L1 attributes a node holds in its L1Block storage at `block` (a number or tag), read slot by slot: what its
 * op-revm charges fees from. `layout` says only which fields are read (Isthmus: operator fee included; Jovian: the DA
 * footprint gas scalar too).
 */
export async function nodeL1Attributes(url: string, block: number | string, layout: DevnetL1Layout = 'isthmus'): Promise<L1Attributes> {
  const at = typeof block === 'number' ? toHex(block) : block;
  const slots = [0, 1, 2, 3, 4, 7, 8];
  const words = await Promise.all(slots.map((s) => rpcCall<string>(url, 'eth_getStorageAt', [L1_BLOCK_ADDRESS, toHex(s), at])));
  const w = new Map(slots.map((s, i) => [s, Buffer.from(words[i]!.slice(2).padStart(64, '0'), 'hex')]));
  const uint = (slot: number, from: number, to: number): bigint => BigInt('0x' + w.get(slot)!.toString('hex', from, to));
  const hash = (slot: number): string => '0x' + w.get(slot)!.toString('hex');
  return {
    layout,
    baseFeeScalar: uint(3, 16, 20),
    blobBaseFeeScalar: uint(3, 20, 24),
    sequenceNumber: uint(3, 24, 32),
    l1BlockTimestamp: uint(0, 16, 24),
    l1BlockNumber: uint(0, 24, 32),
    l1BaseFee: uint(1, 0, 32),
    l1BlobBaseFee: uint(7, 0, 32),
    l1BlockHash: hash(2),
    batcherHash: hash(4),
    operatorFeeScalar: uint(8, 20, 24),
    operatorFeeConstant: uint(8, 24, 32),
    daFootprintGasScalar: layout === 'jovian' ? uint(8, 18, 20) : null,
  };
}

/** What a node charged one transaction: the L1 fee vault's and the operator fee vault's balance change over it. */
export interface ChargedFees {
  l1Fee: bigint;
  operatorFee: bigint;
}

/**
 * The L1 fee and operator fee the node charged each transaction of block `n`, by tx hash, from the fee vaults'
 * balance changes per transaction (debug_traceBlockByNumber, prestateTracer in diff mode). anvil 1.7.1 serves none
 * of the OP fee fields on its receipts, so this is the node's own word on them.
 */
export async function nodeChargedFees(url: string, n: number): Promise<Map<string, ChargedFees>> {
  type Side = Record<string, { balance?: string }>;
  const traces = await rpcCall<{ txHash: string; result: { pre: Side; post: Side } }[]>(url, 'debug_traceBlockByNumber', [
    toHex(n),
    { tracer: 'prestateTracer', tracerConfig: { diffMode: true } },
  ]);
  const delta = (r: { pre: Side; post: Side }, a: string): bigint => {
    const pre = r.pre[a]?.balance;
    const post = r.post[a]?.balance ?? pre;
    return pre === undefined || post === undefined ? 0n : BigInt(post) - BigInt(pre);
  };
  const out = new Map<string, ChargedFees>();
  for (const x of traces) out.set(x.txHash.toLowerCase(), { l1Fee: delta(x.result, L1_FEE_VAULT), operatorFee: delta(x.result, OPERATOR_FEE_VAULT) });
  return out;
}
