// JSON-RPC block objects of pending blocks, as of any of their flashblocks, with the header (RLP, roots, size) built
// by chain/header.ts from plain fields. Reads the state view; derived data is cached here, never on the block.
import { toQuantity } from '../../chain/hex.js';
import { blockSize, EMPTY_OMMERS_HASH, headerRlp, requestsHashFor } from '../../chain/header.js';
import { keccak256Hex } from '../../chain/keccak.js';
import { EMPTY_TRIE_ROOT, TrieCache } from '../../chain/trie.js';
import { transactionsRootWith } from '../../state/local-hash.js';
import type { BlockView, TxView } from '../../state/view.js';
import { STREAM_DEPOSIT_EXTRAS, txContext, type DepositExtrasSource } from './context.js';
import { toRpcTransaction } from './transaction.js';

export { EMPTY_OMMERS_HASH, EMPTY_REQUESTS_HASH } from '../../chain/header.js';

const q = toQuantity;

interface HeaderParts {
  rlp: Buffer;
  transactionsRoot: string;
  requestsHash: string | null;
  size: number;
}

/** Per block object: header parts by flashblock index, and the transactions trie kept across its flashblocks. */
interface Derived {
  headers: (HeaderParts | undefined)[];
  /** A block's transaction list only grows, so only new leaves and the trie's right edge are hashed again. */
  trie: TrieCache;
}

const derived = new WeakMap<BlockView, Derived>();

/**
 * The header of `block` as of flashblock `index`, RLP-encoded, with the derived roots and the block size.
 * keccak256 of `rlp` equals the flashblock's block_hash when the builder filled in every root (Base leaves
 * state_root zero in flashblocks, so there it will not).
 */
export function headerParts(block: BlockView, index: number): HeaderParts {
  let c = derived.get(block);
  if (c === undefined) derived.set(block, (c = { headers: [], trie: new TrieCache() }));
  const cached = c.headers[index];
  if (cached !== undefined) return cached;
  const d = block.diffs[index];
  if (d === undefined) throw new Error(`block ${block.number} has no flashblock ${index}`);
  const count = block.txCountAt[index] as number;
  const postExec = block.postExecAt[index]?.tx.raw ?? null;
  // ~10 ms → ~1 ms for the 10th flashblock of 200 txs each with the kept trie (measured).
  const transactionsRoot = transactionsRootWith(count, (i) => block.txBytes(i), postExec, c.trie);
  const b = block.base;
  const requestsHash = requestsHashFor(d.withdrawalsRoot);
  const rlp = headerRlp({
    parentHash: b.parentHash,
    feeRecipient: b.feeRecipient,
    stateRoot: d.stateRoot,
    transactionsRoot,
    receiptsRoot: d.receiptsRoot,
    logsBloom: d.logsBloom,
    number: block.number,
    gasLimit: b.gasLimit,
    gasUsed: d.gasUsed,
    timestamp: b.timestamp,
    extraData: b.extraData,
    prevRandao: b.prevRandao,
    baseFeePerGas: b.baseFeePerGas,
    withdrawalsRoot: d.withdrawalsRoot ?? EMPTY_TRIE_ROOT,
    blobGasUsed: d.blobGasUsed ?? 0n,
    parentBeaconBlockRoot: b.parentBeaconBlockRoot,
    requestsHash,
  });
  const all = txCountAsOf(block, index);
  // The post-exec transaction, if any, follows the `count` others (txAsOf).
  const lengthAt = (i: number): number => (i < count ? block.txByteLength(i) : (postExec!.length - 2) >>> 1);
  const firstByteAt = (i: number): number => {
    if (i >= count) return Number.parseInt(postExec!.slice(2, 4), 16);
    const type = block.txType(i);
    return type === 0 ? 0xc0 : type; // legacy: an RLP list; typed: the type byte
  };
  const parts: HeaderParts = { rlp, transactionsRoot, requestsHash, size: blockSize(rlp.length, all, lengthAt, firstByteAt) };
  c.headers[index] = parts;
  return parts;
}

/**
 * Transactions of `block` as of flashblock `index`, as op-alloy materialises a sequence: the streamed ones, then the
 * post-exec (0x7d) transaction the flashblock restated, if any.
 */
export function txCountAsOf(block: BlockView, index: number): number {
  return (block.txCountAt[index] as number) + (block.postExecAt[index] == null ? 0 : 1);
}

/** Transaction `i` of `block` as of flashblock `index` (see txCountAsOf), or undefined past the end. */
export function txAsOf(block: BlockView, index: number, i: number): TxView | undefined {
  const count = block.txCountAt[index] as number;
  if (i < count) return block.txAt(i);
  return i === count ? (block.postExecAt[index] ?? undefined) : undefined;
}

/** keccak256 of the header as of flashblock `index` (for verification against the flashblock's block_hash). */
export function computedBlockHash(block: BlockView, index: number): string {
  return keccak256Hex(headerParts(block, index).rlp);
}

/**
 * The JSON-RPC block object of `block` as of flashblock `index` (default: latest). With `fullTx`, transactions are
 * objects (their senders must be known: see SenderSource; deposits' receipt extras from `deposit`); otherwise hashes.
 */
export function blockToRpc(block: BlockView, fullTx: boolean, index: number = block.lastIndex, deposit: DepositExtrasSource = STREAM_DEPOSIT_EXTRAS): Record<string, unknown> {
  const count = txCountAsOf(block, index);
  const txs: unknown[] = new Array(count);
  const held = block.txCountAt[index] as number;
  for (let i = 0; i < count; i++) {
    if (!fullTx && i < held) {
      txs[i] = block.txHash(i); // no view for a hash
      continue;
    }
    const rec = txAsOf(block, index, i)!;
    txs[i] = fullTx ? toRpcTransaction(rec.tx, txContext(rec, index, deposit)) : rec.tx.hash;
  }
  return blockFields(block, index, txs);
}

/** The JSON-RPC block object of `block` as of flashblock `index` with `txs` as its transactions. */
export function blockFields(block: BlockView, index: number, txs: unknown[]): Record<string, unknown> {
  const d = block.diffs[index];
  if (d === undefined) throw new Error(`block ${block.number} has no flashblock ${index}`);
  const hp = headerParts(block, index);
  const b = block.base;
  const out: Record<string, unknown> = {
    hash: d.blockHash,
    parentHash: b.parentHash,
    sha3Uncles: EMPTY_OMMERS_HASH,
    miner: b.feeRecipient,
    stateRoot: d.stateRoot,
    transactionsRoot: hp.transactionsRoot,
    receiptsRoot: d.receiptsRoot,
    logsBloom: d.logsBloom,
    difficulty: '0x0',
    number: q(block.number),
    gasLimit: q(b.gasLimit),
    gasUsed: q(d.gasUsed),
    timestamp: q(b.timestamp),
    extraData: b.extraData,
    mixHash: b.prevRandao,
    nonce: '0x0000000000000000',
    baseFeePerGas: q(b.baseFeePerGas),
    withdrawalsRoot: d.withdrawalsRoot ?? EMPTY_TRIE_ROOT,
    blobGasUsed: q(d.blobGasUsed ?? 0n),
    excessBlobGas: '0x0',
    parentBeaconBlockRoot: b.parentBeaconBlockRoot,
    size: q(hp.size),
    uncles: [],
    transactions: txs,
    withdrawals: [],
  };
  if (hp.requestsHash !== null) out.requestsHash = hp.requestsHash;
  return out;
}
