// JSON-RPC shapes of pending data: blocks (as of any flashblock), transactions and receipts derived from the
// metadata. Reads PendingBlock/TxRecord; never mutates them except their `derived` cache.
import { hexToBytes, toQuantity } from '../chain/hex.js';
import { keccak256Hex } from '../chain/keccak.js';
import { logsBloom } from '../chain/bloom.js';
import { encodeRlp } from '../chain/rlp.js';
import { contractAddress, recoverSender } from '../chain/sender.js';
import { EMPTY_TRIE_ROOT, orderedTrieRootOf } from '../chain/trie.js';
import { effectiveGasPrice, toRpcTransaction } from '../chain/rpc-tx.js';
import { TX_DEPOSIT } from '../chain/types.js';
import type { PendingBlock, TxRecord } from './block.js';

/** keccak256(rlp([])): the ommers hash of every post-merge block. */
export const EMPTY_OMMERS_HASH = '0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347';
/** sha256 of nothing: the requestsHash of an OP block since Isthmus (no EL requests on L2). */
export const EMPTY_REQUESTS_HASH = '0xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

function q(n: bigint | number): string {
  return toQuantity(n);
}

interface HeaderParts {
  rlp: Buffer;
  transactionsRoot: string;
  requestsHash: string | null;
  size: number;
}

/** RLP length of a byte string of `n` bytes whose first byte is `first`. */
function rlpLengthOfString(n: number, first: number): number {
  if (n === 1 && first < 0x80) return 1;
  return n + lengthPrefix(n);
}

function lengthPrefix(n: number): number {
  if (n < 56) return 1;
  let l = 0;
  for (let x = n; x > 0; x = Math.floor(x / 256)) l++;
  return 1 + l;
}

/**
 * The header of `block` as of flashblock `index`, RLP-encoded, with the derived roots and the block size (RLP of
 * [header, txs, ommers, withdrawals]). keccak256 of `rlp` equals the flashblock's block_hash when the builder
 * filled in every root (Base leaves state_root zero in flashblocks, so there it will not).
 */
export function headerParts(block: PendingBlock, index: number): HeaderParts {
  const key = 'header:' + index;
  const cached = block.derived.get(key) as HeaderParts | undefined;
  if (cached !== undefined) return cached;
  const d = block.diffs[index];
  if (d === undefined) throw new Error(`block ${block.number} has no flashblock ${index}`);
  const count = block.txCountAt[index] as number;
  // The block's trie cache: each flashblock only appends, so only the new leaves and the nodes on the trie's right
  // edge are hashed again (~10 ms → ~1 ms for the 10th flashblock of 200 txs each, measured).
  const transactionsRoot = orderedTrieRootOf(count, (i) => hexToBytes(block.txs[i]!.tx.raw), block.txTrie);
  const b = block.base;
  const isthmus = d.withdrawalsRoot !== null && d.withdrawalsRoot !== EMPTY_TRIE_ROOT;
  const requestsHash = isthmus ? EMPTY_REQUESTS_HASH : null;
  const fields: Buffer[] = [
    hexToBytes(b.parentHash),
    hexToBytes(EMPTY_OMMERS_HASH),
    hexToBytes(b.feeRecipient),
    hexToBytes(d.stateRoot),
    hexToBytes(transactionsRoot),
    hexToBytes(d.receiptsRoot),
    hexToBytes(d.logsBloom),
    scalar(0n),
    scalar(BigInt(block.number)),
    scalar(b.gasLimit),
    scalar(d.gasUsed),
    scalar(BigInt(b.timestamp)),
    hexToBytes(b.extraData),
    hexToBytes(b.prevRandao),
    Buffer.alloc(8),
    scalar(b.baseFeePerGas),
    hexToBytes(d.withdrawalsRoot ?? EMPTY_TRIE_ROOT),
    scalar(d.blobGasUsed ?? 0n),
    scalar(0n),
    hexToBytes(b.parentBeaconBlockRoot),
  ];
  if (requestsHash !== null) fields.push(hexToBytes(requestsHash));
  const rlp = encodeRlp(fields);
  let txPayload = 0;
  for (let i = 0; i < count; i++) {
    // From the hex, without decoding: byte length and first byte (a typed tx is an RLP string in the body).
    const raw = block.txs[i]!.tx.raw;
    const len = (raw.length - 2) >>> 1;
    const first = Number.parseInt(raw.slice(2, 4), 16);
    txPayload += first >= 0xc0 ? len : rlpLengthOfString(len, first);
  }
  const withdrawalsPayload = 0; // OP blocks carry no withdrawals
  const bodyPayload = rlp.length + (txPayload + lengthPrefix(txPayload)) + 1 + (withdrawalsPayload + 1);
  const parts: HeaderParts = { rlp, transactionsRoot, requestsHash, size: bodyPayload + lengthPrefix(bodyPayload) };
  block.derived.set(key, parts);
  return parts;
}

function scalar(n: bigint): Buffer {
  if (n === 0n) return Buffer.alloc(0);
  let h = n.toString(16);
  if (h.length & 1) h = '0' + h;
  return Buffer.from(h, 'hex');
}

/** keccak256 of the header as of flashblock `index` (for verification against the flashblock's block_hash). */
export function computedBlockHash(block: PendingBlock, index: number): string {
  return keccak256Hex(headerParts(block, index).rlp);
}

/**
 * The JSON-RPC block object of `block` as of flashblock `index` (default: latest). With `fullTx`, transactions are
 * objects; otherwise hashes.
 */
export function blockToRpc(block: PendingBlock, fullTx: boolean, index: number = block.lastIndex): Record<string, unknown> {
  const d = block.diffs[index];
  if (d === undefined) throw new Error(`block ${block.number} has no flashblock ${index}`);
  const hp = headerParts(block, index);
  const count = block.txCountAt[index] as number;
  const b = block.base;
  const txs: unknown[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const rec = block.txs[i]!;
    txs[i] = fullTx ? txToRpc(rec, d.blockHash) : rec.tx.hash;
  }
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

/** The JSON-RPC transaction object of a pending transaction; `blockHash` defaults to the block's latest hash. */
export function txToRpc(rec: TxRecord, blockHash: string = rec.block.hash): Record<string, unknown> {
  return toRpcTransaction(rec.tx, {
    blockHash,
    blockNumber: BigInt(rec.block.number),
    transactionIndex: rec.position,
    baseFeePerGas: rec.block.base.baseFeePerGas,
    depositReceiptVersion: rec.receipt?.depositReceiptVersion != null ? q(rec.receipt.depositReceiptVersion) : null,
    depositNonce: rec.receipt?.depositNonce ?? null,
  });
}

/** The logs of a receipt, positioned in the block. */
export function logsToRpc(rec: TxRecord, blockHash: string = rec.block.hash): Record<string, unknown>[] {
  const r = rec.receipt;
  if (r === null) return [];
  const bn = q(rec.block.number);
  const ti = q(rec.position);
  const ts = q(rec.block.base.timestamp);
  const out: Record<string, unknown>[] = new Array(r.logs.length);
  for (let i = 0; i < r.logs.length; i++) {
    const l = r.logs[i]!;
    out[i] = {
      address: l.address,
      topics: l.topics,
      data: l.data,
      blockHash,
      blockNumber: bn,
      blockTimestamp: ts,
      transactionHash: rec.tx.hash,
      transactionIndex: ti,
      logIndex: q(rec.firstLogIndex + i),
      removed: false,
    };
  }
  return out;
}

/**
 * The JSON-RPC receipt of a pending transaction, derived from the metadata receipt: gasUsed from the difference of
 * cumulative gas, positions, contract address, effective gas price and bloom computed here. Null when the stream
 * carried no usable receipt for it (the caller forwards to the node).
 */
export function receiptToRpc(rec: TxRecord): Record<string, unknown> | null {
  const r = rec.receipt;
  if (r === null || r.cumulativeGasUsed === null || rec.gasUsed === null) return null;
  const tx = rec.tx;
  const from = recoverSender(tx);
  if (from === null) return null;
  const blockHash = rec.block.hash;
  let created: string | null = null;
  if (tx.to === null) {
    const nonce = tx.type === TX_DEPOSIT ? r.depositNonce : tx.nonce;
    created = nonce === null ? null : contractAddress(from, nonce);
  }
  const out: Record<string, unknown> = {
    type: q(r.type ?? tx.type),
    status: q(r.status ?? 1),
    cumulativeGasUsed: q(r.cumulativeGasUsed),
    logs: logsToRpc(rec, blockHash),
    logsBloom: logsBloom(r.logs),
    transactionHash: tx.hash,
    transactionIndex: q(rec.position),
    blockHash,
    blockNumber: q(rec.block.number),
    // Not in the execution-apis receipt schema, but geth (1.16+) and anvil return it; clients use it to avoid a
    // block lookup.
    blockTimestamp: q(rec.block.base.timestamp),
    gasUsed: q(rec.gasUsed),
    effectiveGasPrice: q(effectiveGasPrice(tx, rec.block.base.baseFeePerGas)),
    from,
    to: tx.to,
    contractAddress: created,
  };
  if (tx.type === TX_DEPOSIT) {
    if (r.depositNonce !== null) out.depositNonce = q(r.depositNonce);
    if (r.depositReceiptVersion !== null) out.depositReceiptVersion = q(r.depositReceiptVersion);
  }
  return out;
}

/** Raw EIP-2718 bytes of a pending transaction. */
export function rawTx(rec: TxRecord): string {
  return rec.tx.raw;
}
