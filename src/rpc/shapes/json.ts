// Serialised JSON of pending blocks, transactions and receipts, cached per block version (a new flashblock bumps
// the version, which invalidates everything of that block: its hash, and so every blockHash field, changes).
// An answer built from execution (a receipt the stream lacked, a deposit's nonce in its transaction object) is
// cached only for the receipt source's epoch it was built at; a null receipt is never cached (the engine may have
// it at the next read).
// The entry point readers use: it asks SenderSource for the senders an answer shows, then builds it with the pure
// shapes beside it. Never mutates state.
import { TX_DEPOSIT } from '../../chain/types.js';
import type { BlockView, SenderSource, TxView } from '../../state/view.js';
import { blockToRpc } from './block.js';
import { BlockTexts, depositWaitsForExecution } from './block-json.js';
import { txContext, type DepositExtrasSource } from './context.js';
import { pendingLogs, receiptToRpc, STREAM_RECEIPTS, streamHasReceipt, type ReceiptSource, type TxLogs } from './receipt.js';
import { toRpcTransaction } from './transaction.js';

/** A result that is already JSON text; the dispatcher splices it into the envelope without re-serialising. */
export class RawJson {
  constructor(readonly json: string) {}
}

/** The epoch of a cached answer built from the stream alone: valid for as long as its block version. */
const STABLE = -1;

/** Cached JSON and the receipt source's epoch it depends on (STABLE: none). */
class Cached {
  constructor(
    readonly raw: RawJson,
    readonly epoch: number,
  ) {}
}

class BlockJson {
  /** Key: flashblock index × 2 + (fullTx ? 1 : 0). */
  readonly blocks = new Map<number, Cached>();
  /** By transaction position, as of the latest flashblock; receipts found only. */
  readonly receipts: (Cached | undefined)[] = [];
  /** By transaction position, as of the latest flashblock. */
  readonly txs: (Cached | undefined)[] = [];
  constructor(readonly version: number) {}
}

/** Whether `rec`'s transaction object shows receipt extras the stream did not give (a deposit, post-Azul). */
function txNeedsExecution(rec: TxView): boolean {
  return rec.tx.type === TX_DEPOSIT && rec.receipt === null;
}

/** The RPC objects of pending data, as objects or as cached JSON. */
export class Shapes {
  private readonly caches = new WeakMap<BlockView, BlockJson>();
  /** Text kept per held block and flashblock, from which block JSON is assembled (block-json.ts). */
  private readonly texts = new BlockTexts();
  /** A deposit's receipt extras: the stream's receipt, else the receipt source's (execution), as receipts are. */
  private readonly depositExtras: DepositExtrasSource = (rec) => rec.receipt ?? this.receipts.facts(rec);

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

  /** The receipt source's epoch now (see ReceiptSource.epoch). */
  private epoch(): number {
    return this.receipts.epoch?.() ?? 0;
  }

  /** Whether a cached answer still holds: built from the stream alone, or at the receipt source's current epoch. */
  private fresh(c: Cached | undefined): c is Cached {
    return c !== undefined && (c.epoch === STABLE || c.epoch === this.epoch());
  }

  /** The transactions of `block` up to flashblock `index`, with their senders recovered. */
  private withSenders(block: BlockView, index: number): void {
    this.senders.recoverFirst(block, block.txCountAt[index] as number);
  }

  /** The block object as of flashblock `index` (default latest), with hashes or full transactions. */
  blockObject(block: BlockView, fullTx: boolean, index: number = block.lastIndex): Record<string, unknown> {
    if (fullTx) this.withSenders(block, index);
    return blockToRpc(block, fullTx, index, this.depositExtras);
  }

  /** blockObject as cached JSON. */
  blockJson(block: BlockView, fullTx: boolean, index: number = block.lastIndex): RawJson {
    const c = this.entry(block);
    const key = index * 2 + (fullTx ? 1 : 0);
    const hit = c.blocks.get(key);
    if (this.fresh(hit)) return hit.raw;
    let epoch = STABLE;
    if (fullTx) {
      const count = block.txCountAt[index] as number;
      for (let i = 0; i < count && epoch === STABLE; i++) if (depositWaitsForExecution(block, i)) epoch = this.epoch();
    }
    if (fullTx) this.withSenders(block, index);
    const r = new RawJson(this.texts.blockJson(block, fullTx, index, this.depositExtras, (p) => depositWaitsForExecution(block, p)));
    c.blocks.set(key, new Cached(r, epoch));
    return r;
  }

  /** The transaction object as of flashblock `index` of its block (default latest). */
  txObject(rec: TxView, index: number = rec.block.lastIndex): Record<string, unknown> {
    this.senders.recover([rec]);
    return toRpcTransaction(rec.tx, txContext(rec, index, this.depositExtras));
  }

  /** txObject as JSON (cached as of the latest flashblock). */
  txJson(rec: TxView, index: number = rec.block.lastIndex): RawJson {
    if (index !== rec.block.lastIndex) return new RawJson(JSON.stringify(this.txObject(rec, index)));
    const c = this.entry(rec.block);
    const hit = c.txs[rec.position];
    if (this.fresh(hit)) return hit.raw;
    const epoch = txNeedsExecution(rec) ? this.epoch() : STABLE;
    const r = new RawJson(JSON.stringify(this.txObject(rec)));
    c.txs[rec.position] = new Cached(r, epoch);
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

  /**
   * receiptObject as JSON (cached as of the latest flashblock), or null (the caller forwards to the node, or waits
   * for execution). A null is never cached: on a stream without receipts it means "not executed yet", and the
   * next read must see the engine's receipt as soon as it exists.
   */
  receiptJson(rec: TxView, index: number = rec.block.lastIndex): RawJson | null {
    if (index !== rec.block.lastIndex) {
      const o = this.receiptObject(rec, index);
      return o === null ? null : new RawJson(JSON.stringify(o));
    }
    const c = this.entry(rec.block);
    const hit = c.receipts[rec.position];
    if (this.fresh(hit)) return hit.raw;
    const epoch = streamHasReceipt(rec) ? STABLE : this.epoch();
    const obj = this.receiptObject(rec);
    if (obj === null) return null;
    const r = new RawJson(JSON.stringify(obj));
    c.receipts[rec.position] = new Cached(r, epoch);
    return r;
  }
}
