// Executed receipts: their EIP-2718 consensus encoding (OP deposit receipts included) and the receipts root of a
// block so far, to check execution against a flashblock's `diff.receipts_root`. Pure; no I/O, no RPC shapes.
import { bloomAdd } from '../chain/bloom.js';
import { bigIntToBytes, hexToBytes } from '../chain/hex.js';
import { encodeRlp, type RlpInput } from '../chain/rlp.js';
import { orderedTrieRootOf, type TrieCache } from '../chain/trie.js';
import { TX_DEPOSIT, TX_LEGACY } from '../chain/types.js';

/** One log as executed. Hex is lower-case 0x. */
export interface ExecutedLog {
  address: string;
  topics: string[];
  data: string;
}

/** The consensus fields of one executed receipt (what the receipts root commits to). */
export interface ExecutedReceipt {
  transactionHash: string;
  /** EIP-2718 type (0 legacy, 1, 2, 4, 0x7e deposit). */
  type: number;
  status: boolean;
  cumulativeGasUsed: bigint;
  gasUsed: bigint;
  logs: ExecutedLog[];
  /** Deposit receipts only (Regolith): the sender's nonce as the chain's consensus encodes it. */
  depositNonce: bigint | null;
  /** Deposit receipts only (Canyon). */
  depositReceiptVersion: bigint | null;
  /** The EVM's own answer for fields the root does not cover (contractAddress, effectiveGasPrice, from, to). */
  contractAddress: string | null;
  effectiveGasPrice: bigint;
  from: string;
  to: string | null;
}

const EMPTY = Buffer.alloc(0);
const ONE = Buffer.from([1]);

/** The 256-byte logs bloom of one receipt. */
export function receiptBloom(logs: readonly ExecutedLog[]): Uint8Array {
  const bloom = new Uint8Array(256);
  for (const log of logs) {
    bloomAdd(bloom, hexToBytes(log.address));
    for (const t of log.topics) bloomAdd(bloom, hexToBytes(t));
  }
  return bloom;
}

/** EIP-2718 encoding of a receipt: rlp list for legacy, type byte + rlp list otherwise (deposits add their fields). */
export function encodeReceipt(r: ExecutedReceipt): Buffer {
  const logs: RlpInput[] = r.logs.map((l) => [hexToBytes(l.address), l.topics.map(hexToBytes), hexToBytes(l.data)]);
  const fields: RlpInput[] = [r.status ? ONE : EMPTY, bigIntToBytes(r.cumulativeGasUsed), receiptBloom(r.logs), logs];
  if (r.type === TX_DEPOSIT && r.depositNonce !== null) {
    fields.push(bigIntToBytes(r.depositNonce));
    if (r.depositReceiptVersion !== null) fields.push(bigIntToBytes(r.depositReceiptVersion));
  }
  const body = encodeRlp(fields);
  return r.type === TX_LEGACY ? body : Buffer.concat([Buffer.from([r.type]), body]);
}

/** Receipts root (0x-hex) over the first `count` receipts of a block; `cache` makes growing blocks cheap. */
export function receiptsRoot(receipts: readonly ExecutedReceipt[], count = receipts.length, cache: TrieCache | null = null): string {
  return orderedTrieRootOf(count, (i) => encodeReceipt(receipts[i]!), cache);
}

/** Receipts root over receipts 0..count-1 given by `at` (e.g. adjusted views of stored receipts). */
export function receiptsRootOf(count: number, at: (index: number) => ExecutedReceipt, cache: TrieCache | null = null): string {
  return orderedTrieRootOf(count, (i) => encodeReceipt(at(i)), cache);
}

/** Reads one receipt from an `eth_getBlockReceipts` / `eth_getTransactionReceipt` answer of the engine. */
export function receiptFromRpc(r: Record<string, any>): ExecutedReceipt {
  const type = Number(r.type);
  return {
    transactionHash: String(r.transactionHash).toLowerCase(),
    type,
    status: r.status === '0x1' || r.status === true,
    cumulativeGasUsed: BigInt(r.cumulativeGasUsed),
    gasUsed: BigInt(r.gasUsed),
    logs: (r.logs as Record<string, any>[]).map((l) => ({
      address: String(l.address).toLowerCase(),
      topics: (l.topics as string[]).map((t) => t.toLowerCase()),
      data: String(l.data).toLowerCase(),
    })),
    depositNonce: type === TX_DEPOSIT && r.depositNonce != null ? BigInt(r.depositNonce) : null,
    depositReceiptVersion: type === TX_DEPOSIT && r.depositReceiptVersion != null ? BigInt(r.depositReceiptVersion) : null,
    contractAddress: r.contractAddress == null ? null : String(r.contractAddress).toLowerCase(),
    effectiveGasPrice: BigInt(r.effectiveGasPrice ?? 0),
    from: String(r.from).toLowerCase(),
    to: r.to == null ? null : String(r.to).toLowerCase(),
  };
}
