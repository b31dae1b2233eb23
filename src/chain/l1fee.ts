// OP-stack L1 data fee (pure): the L1 attributes a block's L1-info deposit carries (Ecotone, Isthmus, Jovian
// layouts), the FastLZ compressed length, and the fee fields op-geth and op-reth put on a non-deposit receipt. Knows
// nothing of receipts or RPC; Bedrock-layout attributes (pre-Ecotone) are not decoded (null: no fields shown).
//
// Sources (read, not copied): OP specs `protocol/{ecotone,isthmus,jovian}/l1-attributes.md` (calldata layouts),
// `protocol/fjord/exec-engine.md` (FastLZ estimate), the GasPriceOracle spec (operator fee formulas);
// op-geth `core/types/rollup_cost.go` (cost functions, FlzCompressLen) and `core/types/receipt_opstack.go`
// (which receipt fields per fork); op-reth `crates/optimism/rpc/src/eth/receipt.rs` (OpReceiptFieldsBuilder).
import type { DecodedTx } from './types.js';
import { TX_DEPOSIT } from './types.js';

/** The system account that sends the L1-info deposit (first transaction of every OP block). */
export const L1_INFO_DEPOSITOR = '0xdeaddeaddeaddeaddeaddeaddeaddeaddead0001';
/** The L1Block predeploy the L1-info deposit calls. */
export const L1_BLOCK_ADDRESS = '0x4200000000000000000000000000000000000015';

/** Calldata layouts by selector: setL1BlockValuesEcotone / …Isthmus / …Jovian, and their exact lengths. */
const LAYOUTS = [
  { selector: 0x440a5e20, layout: 'ecotone', bytes: 164 },
  { selector: 0x098999be, layout: 'isthmus', bytes: 176 },
  { selector: 0x3db6be2b, layout: 'jovian', bytes: 178 },
] as const;

/**
 * Which setter the L1-info deposit called. 'ecotone' is also what Fjord, Granite and Holocene blocks (and the Isthmus
 * activation block) carry; 'isthmus' implies Fjord and Isthmus; 'jovian' implies Jovian (its activation block still
 * carries 'isthmus' and holds deposits only).
 */
export type L1InfoLayout = (typeof LAYOUTS)[number]['layout'];

/** The L1 attributes of one L2 block, as its L1-info deposit set them. */
export interface L1Attributes {
  layout: L1InfoLayout;
  baseFeeScalar: bigint;
  blobBaseFeeScalar: bigint;
  sequenceNumber: bigint;
  l1BlockTimestamp: bigint;
  l1BlockNumber: bigint;
  /** The L1 origin's base fee (a receipt's `l1GasPrice`). */
  l1BaseFee: bigint;
  l1BlobBaseFee: bigint;
  l1BlockHash: string;
  batcherHash: string;
  /** Isthmus and later, else null. */
  operatorFeeScalar: bigint | null;
  operatorFeeConstant: bigint | null;
  /** Jovian and later, else null. */
  daFootprintGasScalar: bigint | null;
}

/**
 * The OP fee fields of a non-deposit receipt, named as op-geth/op-reth serialise them; null means the field is
 * omitted. `l1FeeScalar` (a decimal string) exists only before Ecotone and is always null here.
 */
export interface TxL1Fee {
  l1GasPrice: bigint | null;
  l1GasUsed: bigint | null;
  l1Fee: bigint | null;
  l1FeeScalar: string | null;
  l1BaseFeeScalar: bigint | null;
  l1BlobBaseFee: bigint | null;
  l1BlobBaseFeeScalar: bigint | null;
  operatorFeeScalar: bigint | null;
  operatorFeeConstant: bigint | null;
  /** Jovian: the block's DA footprint gas scalar. */
  daFootprintGasScalar: bigint | null;
  /** Jovian: the transaction's DA footprint (daFootprintGasScalar × estimated DA size), shown as `blobGasUsed`. */
  blobGasUsed: bigint | null;
}

function uint(b: Buffer, from: number, to: number): bigint {
  return BigInt('0x' + b.toString('hex', from, to));
}

/** Decodes L1-info calldata (selector first); null for a selector or length this module does not know. */
export function decodeL1Attributes(input: Buffer): L1Attributes | null {
  if (input.length < 4) return null;
  const sel = input.readUInt32BE(0);
  const l = LAYOUTS.find((x) => x.selector === sel);
  if (l === undefined || input.length !== l.bytes) return null;
  // Packed (not ABI) encoding: offsets from the specs' tables.
  return {
    layout: l.layout,
    baseFeeScalar: BigInt(input.readUInt32BE(4)),
    blobBaseFeeScalar: BigInt(input.readUInt32BE(8)),
    sequenceNumber: input.readBigUInt64BE(12),
    l1BlockTimestamp: input.readBigUInt64BE(20),
    l1BlockNumber: input.readBigUInt64BE(28),
    l1BaseFee: uint(input, 36, 68),
    l1BlobBaseFee: uint(input, 68, 100),
    l1BlockHash: '0x' + input.toString('hex', 100, 132),
    batcherHash: '0x' + input.toString('hex', 132, 164),
    operatorFeeScalar: l.layout === 'ecotone' ? null : BigInt(input.readUInt32BE(164)),
    operatorFeeConstant: l.layout === 'ecotone' ? null : input.readBigUInt64BE(168),
    daFootprintGasScalar: l.layout === 'jovian' ? BigInt(input.readUInt16BE(176)) : null,
  };
}

/** True when `tx` is an L1-info deposit: a deposit from the depositor account to the L1Block predeploy. */
export function isL1InfoDeposit(tx: Readonly<DecodedTx>): boolean {
  return tx.type === TX_DEPOSIT && tx.from === L1_INFO_DEPOSITOR && tx.to === L1_BLOCK_ADDRESS;
}

/** The L1 attributes set by `tx` when it is an L1-info deposit of a known layout, else null. */
export function l1AttributesOf(tx: Readonly<DecodedTx>): L1Attributes | null {
  if (!isL1InfoDeposit(tx)) return null;
  return decodeL1Attributes(Buffer.from(tx.input.slice(2), 'hex'));
}

// FastLZ (level 1) compressed length, as Fjord defines the estimator's input (op-geth FlzCompressLen, after
// solady's LibZip.flzCompress): the byte count the compressor would emit, without producing the output.
const FLZ_HASH_ENTRIES = 8192;
const flzTable = new Uint32Array(FLZ_HASH_ENTRIES);

function u24(b: Uint8Array, i: number): number {
  return (b[i] as number) | ((b[i + 1] as number) << 8) | ((b[i + 2] as number) << 16);
}

function flzHash(v: number): number {
  // 32-bit wrapping multiply (Go's uint32 arithmetic), top 13 bits of the low word.
  return (Math.imul(2654435769, v) >>> 19) & 0x1fff;
}

/** Bytes a literal run of `r` bytes costs: a control byte per run of up to 32. */
function literalBytes(r: number): number {
  const full = Math.floor(r / 32);
  const rest = r % 32;
  return 33 * full + (rest === 0 ? 0 : rest + 1);
}

/** Bytes a match of length `l` costs (long matches are split every 262 bytes). */
function matchBytes(l: number): number {
  const m = l - 1;
  return 3 * Math.floor(m / 262) + (m % 262 >= 6 ? 3 : 2);
}

/** The FastLZ compressed length of `data`. */
export function flzCompressLen(data: Uint8Array): number {
  const len = data.length;
  const ipLimit = len < 13 ? 0 : len - 13;
  flzTable.fill(0);
  let n = 0;
  let anchor = 0;
  let ip = 2;
  while (ip < ipLimit) {
    let ref: number;
    // Find the next position whose 3 bytes were seen within the last 8 KiB.
    for (;;) {
      const seq = u24(data, ip);
      const h = flzHash(seq);
      ref = flzTable[h] as number;
      flzTable[h] = ip;
      const distance = ip - ref;
      if (ip >= ipLimit) break;
      ip++;
      if (distance <= 0x1fff && seq === u24(data, ref)) break;
    }
    if (ip >= ipLimit) break;
    ip--;
    if (ip > anchor) n += literalBytes(ip - anchor);
    // Match length past the 3 known bytes; a mismatch counts one more (the compressor's loop shape).
    const p = ref + 3;
    const q = ip + 3;
    const bound = ipLimit + 9 - q;
    let l = 0;
    while (l < bound) {
      const same = data[p + l] === data[q + l];
      l++;
      if (!same) break;
    }
    n += matchBytes(l);
    ip += l;
    flzTable[flzHash(u24(data, ip))] = ip;
    ip++;
    flzTable[flzHash(u24(data, ip))] = ip;
    ip++;
    anchor = ip;
  }
  return n + literalBytes(len - anchor);
}

/** The fee parameters the cost functions read (a subset of L1Attributes). */
export type L1FeeParams = Pick<L1Attributes, 'l1BaseFee' | 'l1BlobBaseFee' | 'baseFeeScalar' | 'blobBaseFeeScalar'>;

/** A cost function's output: the fee in wei and the receipt's l1GasUsed. */
export interface L1Cost {
  l1Fee: bigint;
  l1GasUsed: bigint;
}

/** l1BaseFee×16×baseFeeScalar + l1BlobBaseFee×blobBaseFeeScalar: the per-byte price scaled by 16e6 (Ecotone on). */
function scaledPrice(p: L1FeeParams): bigint {
  return p.l1BaseFee * 16n * p.baseFeeScalar + p.l1BlobBaseFee * p.blobBaseFeeScalar;
}

/** Ecotone: calldata gas (4 per zero byte, 16 per other byte) of the signed transaction as l1GasUsed. */
export function ecotoneL1Cost(raw: Uint8Array, p: L1FeeParams): L1Cost {
  let zeros = 0;
  for (let i = 0; i < raw.length; i++) if (raw[i] === 0) zeros++;
  const gas = BigInt(zeros) * 4n + BigInt(raw.length - zeros) * 16n;
  return { l1Fee: (gas * scaledPrice(p)) / 16_000_000n, l1GasUsed: gas };
}

const FJORD_INTERCEPT = -42_585_600n;
const FJORD_FASTLZ_COEF = 836_500n;
const FJORD_MIN_SIZE_SCALED = 100n * 1_000_000n;

/** Fjord's estimated DA size of a transaction with FastLZ length `fastLzSize`, scaled by 1e6 (at least 100 bytes). */
export function fjordSizeScaled(fastLzSize: number): bigint {
  const s = FJORD_INTERCEPT + FJORD_FASTLZ_COEF * BigInt(fastLzSize);
  return s < FJORD_MIN_SIZE_SCALED ? FJORD_MIN_SIZE_SCALED : s;
}

/** Fjord and later: the linear-regression size estimate; l1GasUsed is that size × 16 (op-geth, op-reth). */
export function fjordL1Cost(fastLzSize: number, p: L1FeeParams): L1Cost {
  const size = fjordSizeScaled(fastLzSize);
  return { l1Fee: (size * scaledPrice(p)) / 1_000_000_000_000n, l1GasUsed: (size * 16n) / 1_000_000n };
}

/**
 * The OP fee fields of the receipt of a non-deposit transaction (raw EIP-2718 bytes `raw`) in a block with `attrs`.
 * `fjord` says whether Fjord is active; it only matters for the Ecotone layout (which Fjord–Holocene blocks carry
 * too and so cannot tell by itself): the Isthmus and Jovian layouts imply Fjord.
 *
 * Which fields, per op-geth `receipt_opstack.go` and op-reth `OpReceiptFieldsBuilder` (they agree): l1GasPrice,
 * l1GasUsed, l1Fee, l1BaseFeeScalar, l1BlobBaseFee, l1BlobBaseFeeScalar from Ecotone on (l1FeeScalar only before);
 * operatorFeeScalar and operatorFeeConstant from the Isthmus layout on, and only when one of them is non-zero;
 * daFootprintGasScalar and blobGasUsed (the DA footprint) from Jovian on (op-geth PR #710, specs PR #839; op-reth
 * the same). Edge: with a zero DA scalar op-geth omits blobGasUsed (omitempty) while op-reth shows 0x0; this follows
 * op-reth (op-node never sends 0: it substitutes the default 400).
 */
export function txL1Fee(raw: Uint8Array, attrs: Readonly<L1Attributes>, fjord = true): TxL1Fee {
  const onFjord = fjord || attrs.layout !== 'ecotone';
  let cost: L1Cost;
  let blobGasUsed: bigint | null = null;
  if (onFjord) {
    const fastLz = flzCompressLen(raw);
    cost = fjordL1Cost(fastLz, attrs);
    if (attrs.daFootprintGasScalar !== null) blobGasUsed = attrs.daFootprintGasScalar * (fjordSizeScaled(fastLz) / 1_000_000n);
  } else {
    cost = ecotoneL1Cost(raw, attrs);
  }
  const opScalar = attrs.operatorFeeScalar;
  const opConstant = attrs.operatorFeeConstant;
  const showOperator = opScalar !== null && opConstant !== null && (opScalar !== 0n || opConstant !== 0n);
  return {
    l1GasPrice: attrs.l1BaseFee,
    l1GasUsed: cost.l1GasUsed,
    l1Fee: cost.l1Fee,
    l1FeeScalar: null,
    l1BaseFeeScalar: attrs.baseFeeScalar,
    l1BlobBaseFee: attrs.l1BlobBaseFee,
    l1BlobBaseFeeScalar: attrs.blobBaseFeeScalar,
    operatorFeeScalar: showOperator ? opScalar : null,
    operatorFeeConstant: showOperator ? opConstant : null,
    daFootprintGasScalar: attrs.daFootprintGasScalar,
    blobGasUsed,
  };
}

/**
 * The operator fee a non-deposit transaction that used `gasUsed` gas pays (not a receipt field; the EVM charges it):
 * 0 before Isthmus; Isthmus floor(gasUsed × scalar / 1e6) + constant; Jovian gasUsed × scalar × 100 + constant
 * (GasPriceOracle spec; a u32 scalar and u64 constant never reach op-revm's 256-bit saturation).
 */
export function operatorFee(gasUsed: bigint, attrs: Readonly<L1Attributes>): bigint {
  const scalar = attrs.operatorFeeScalar;
  const constant = attrs.operatorFeeConstant;
  if (scalar === null || constant === null) return 0n;
  if (attrs.layout === 'jovian') return gasUsed * scalar * 100n + constant;
  return (gasUsed * scalar) / 1_000_000n + constant;
}
