// Serialised JSON of pending blocks, transactions and receipts, cached per block version (a new flashblock bumps
// the version, which invalidates everything of that block: its hash, and so every blockHash field, changes).
// Reads state through view.ts; never mutates state.
import type { PendingBlock, TxRecord } from '../../state/block.js';
import { toQuantity } from '../../chain/hex.js';
import { blockToRpc, receiptToRpc, txToRpc } from '../../state/view.js';
import { RawJson } from './types.js';

/**
 * A transaction object with `blockTimestamp`, which the execution-apis schema requires of mined transactions
 * (view.ts leaves it out, as reth does; added here until view.ts passes it to toRpcTransaction).
 */
export function txObject(rec: TxRecord, blockHash: string = rec.block.hash): Record<string, unknown> {
  const o = txToRpc(rec, blockHash);
  o.blockTimestamp = toQuantity(rec.block.base.timestamp);
  return o;
}

function blockObject(block: PendingBlock, fullTx: boolean, index: number): Record<string, unknown> {
  const o = blockToRpc(block, fullTx, index);
  if (fullTx) {
    const ts = toQuantity(block.base.timestamp);
    for (const tx of o.transactions as Record<string, unknown>[]) tx.blockTimestamp = ts;
  }
  return o;
}

class BlockJson {
  version: number;
  /** Key: flashblock index × 2 + (fullTx ? 1 : 0). */
  readonly blocks = new Map<number, RawJson>();
  /** By transaction position; null = no usable receipt in the stream. */
  readonly receipts: (RawJson | null | undefined)[] = [];
  /** By transaction position (blockHash = the block's latest hash). */
  readonly txs: (RawJson | undefined)[] = [];
  constructor(version: number) {
    this.version = version;
  }
}

const caches = new WeakMap<PendingBlock, BlockJson>();

function entry(block: PendingBlock): BlockJson {
  let c = caches.get(block);
  if (c === undefined || c.version !== block.version) {
    c = new BlockJson(block.version);
    caches.set(block, c);
  }
  return c;
}

/** The block object JSON as of flashblock `index` (default latest), with hashes or full transactions. */
export function blockJson(block: PendingBlock, fullTx: boolean, index: number = block.lastIndex): RawJson {
  const c = entry(block);
  const key = index * 2 + (fullTx ? 1 : 0);
  let r = c.blocks.get(key);
  if (r === undefined) {
    r = new RawJson(JSON.stringify(blockObject(block, fullTx, index)));
    c.blocks.set(key, r);
  }
  return r;
}

/** The transaction object JSON, positioned in the block's latest flashblock. */
export function txJson(rec: TxRecord): RawJson {
  const c = entry(rec.block);
  let r = c.txs[rec.position];
  if (r === undefined) {
    r = new RawJson(JSON.stringify(txObject(rec)));
    c.txs[rec.position] = r;
  }
  return r;
}

/** The receipt JSON, or null when the stream carried no usable receipt (the caller forwards to the node). */
export function receiptJson(rec: TxRecord): RawJson | null {
  const c = entry(rec.block);
  let r = c.receipts[rec.position];
  if (r === undefined) {
    const obj = receiptToRpc(rec);
    r = obj === null ? null : new RawJson(JSON.stringify(obj));
    c.receipts[rec.position] = r;
  }
  return r;
}
