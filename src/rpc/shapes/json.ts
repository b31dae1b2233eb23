// Serialised JSON of pending blocks, transactions and receipts, cached per block version (a new flashblock bumps
// the version, which invalidates everything of that block: its hash, and so every blockHash field, changes).
// The entry point readers use: it asks SenderSource for the senders an answer shows, then builds it with the pure
// shapes beside it. Never mutates state.
import type { BlockView, SenderSource, TxView } from '../../state/view.js';
import { blockToRpc } from './block.js';
import { txContext } from './context.js';
import { pendingLogs, receiptToRpc, STREAM_RECEIPTS, type ReceiptSource, type TxLogs } from './receipt.js';
import { toRpcTransaction } from './transaction.js';

/** A result that is already JSON text; the dispatcher splices it into the envelope without re-serialising. */
export class RawJson {
  constructor(readonly json: string) {}
}

class BlockJson {
  /** Key: flashblock index × 2 + (fullTx ? 1 : 0). */
  readonly blocks = new Map<number, RawJson>();
  /** By transaction position, as of the latest flashblock; null = no usable receipt in the stream. */
  readonly receipts: (RawJson | null | undefined)[] = [];
  /** By transaction position, as of the latest flashblock. */
  readonly txs: (RawJson | undefined)[] = [];
  constructor(readonly version: number) {}
}

/** The RPC objects of pending data, as objects or as cached JSON. */
export class Shapes {
  private readonly caches = new WeakMap<BlockView, BlockJson>();

  constructor(
    private readonly senders: SenderSource,
    /** Where receipts and logs come from (the stream's metadata unless an execution-backed source is given). */
    readonly receipts: ReceiptSource = STREAM_RECEIPTS,
  ) {}

  private entry(block: BlockView): BlockJson {
    let c = this.caches.get(block);
    if (c === undefined || c.version !== block.version) {
      c = new BlockJson(block.version);
      this.caches.set(block, c);
    }
    return c;
  }

  /** The transactions of `block` up to flashblock `index`, with their senders recovered. */
  private withSenders(block: BlockView, index: number): void {
    this.senders.recover(block.txs.slice(0, block.txCountAt[index]));
  }

  /** The block object as of flashblock `index` (default latest), with hashes or full transactions. */
  blockObject(block: BlockView, fullTx: boolean, index: number = block.lastIndex): Record<string, unknown> {
    if (fullTx) this.withSenders(block, index);
    return blockToRpc(block, fullTx, index);
  }

  /** blockObject as cached JSON. */
  blockJson(block: BlockView, fullTx: boolean, index: number = block.lastIndex): RawJson {
    const c = this.entry(block);
    const key = index * 2 + (fullTx ? 1 : 0);
    let r = c.blocks.get(key);
    if (r === undefined) {
      r = new RawJson(JSON.stringify(this.blockObject(block, fullTx, index)));
      c.blocks.set(key, r);
    }
    return r;
  }

  /** The transaction object as of flashblock `index` of its block (default latest). */
  txObject(rec: TxView, index: number = rec.block.lastIndex): Record<string, unknown> {
    this.senders.recover([rec]);
    return toRpcTransaction(rec.tx, txContext(rec, index));
  }

  /** txObject as JSON (cached as of the latest flashblock). */
  txJson(rec: TxView, index: number = rec.block.lastIndex): RawJson {
    if (index !== rec.block.lastIndex) return new RawJson(JSON.stringify(this.txObject(rec, index)));
    const c = this.entry(rec.block);
    let r = c.txs[rec.position];
    if (r === undefined) {
      r = new RawJson(JSON.stringify(this.txObject(rec)));
      c.txs[rec.position] = r;
    }
    return r;
  }

  /** The receipt as of flashblock `index` (default latest), or null when the stream carried no usable one. */
  receiptObject(rec: TxView, index: number = rec.block.lastIndex): Record<string, unknown> | null {
    this.senders.recover([rec]);
    return receiptToRpc(rec, index, this.receipts);
  }

  /** The raw logs of a transaction (emission order), or null when the receipt source does not know them. */
  rawLogs(rec: TxView): TxLogs['logs'] | null {
    return this.receipts.logs(rec)?.logs ?? null;
  }

  /** The RPC logs of a transaction as of flashblock `index`, or null when the receipt source does not know them. */
  logObjects(rec: TxView, index: number = rec.block.lastIndex): Record<string, unknown>[] | null {
    return pendingLogs(rec, index, this.receipts);
  }

  /** receiptObject as JSON (cached as of the latest flashblock), or null (the caller forwards to the node). */
  receiptJson(rec: TxView, index: number = rec.block.lastIndex): RawJson | null {
    if (index !== rec.block.lastIndex) {
      const o = this.receiptObject(rec, index);
      return o === null ? null : new RawJson(JSON.stringify(o));
    }
    const c = this.entry(rec.block);
    let r = c.receipts[rec.position];
    if (r === undefined) {
      const obj = this.receiptObject(rec);
      r = obj === null ? null : new RawJson(JSON.stringify(obj));
      c.receipts[rec.position] = r;
    }
    return r;
  }
}
