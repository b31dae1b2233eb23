// The JSON text of a pending block object, assembled from text kept per flashblock: its transactions' hashes, and
// their objects without the four fields that change with the flashblock an answer is given as of (blockHash,
// blockNumber, transactionIndex, blockTimestamp) — one string per flashblock, built on the first read that needs it
// and kept for the block's life, so a held block keeps no object per transaction and a later read only concatenates.
// Byte-identical to JSON.stringify of blockToRpc (test/rpc/shapes/block-json.test.ts). Reads the view only.
import { toQuantity } from '../../chain/hex.js';
import { TX_DEPOSIT } from '../../chain/types.js';
import type { BlockView } from '../../state/view.js';
import { blockFields, txAsOf, txCountAsOf } from './block.js';
import { txContext, type DepositExtrasSource } from './context.js';
import { toRpcTransaction } from './transaction.js';

/** A transaction object's JSON up to its hash is the context; the rest (from `,"hash":`) is the transaction's own. */
const OWN_FROM = ',"hash":"';
/** What stands for the transaction list in the block object's JSON until it is spliced in. */
const PLACEHOLDER = '"transactions":[]';

/**
 * Per block: per flashblock, its transactions' hashes and own object texts (with where each ends). The texts are
 * ASCII, kept as latin1 bytes off the JS heap: as strings they outlived scavenges and were promoted, then freed by
 * mark-compacts (~30 KB a frame with one reader of the pending block; bench/combined.ts counts major GCs).
 */
interface Texts {
  hashes: (Kept | undefined)[];
  own: (Kept | undefined)[];
  /** End of each transaction's own text in `own[f]`; -1: not kept (built at each read: a deposit whose extras wait for execution). */
  ownEnds: (Int32Array | undefined)[];
}

/** A text as kept: latin1 bytes when it is printable ASCII (always, for these objects), else the string itself. */
type Kept = Buffer | string;

const NOT_ASCII = /[^ -~]/; // anything outside printable ASCII (JSON text here has no control characters)

function keep(s: string): Kept {
  return NOT_ASCII.test(s) ? s : Buffer.from(s, 'latin1');
}

function text(k: Kept): string {
  return typeof k === 'string' ? k : k.toString('latin1');
}

function firstOf(block: BlockView, f: number): number {
  return f === 0 ? 0 : (block.txCountAt[f - 1] as number);
}

/** `"0x…","0x…"` of flashblock f's transactions. */
function hashesOf(block: BlockView, t: Texts, f: number): string {
  const kept = t.hashes[f];
  if (kept !== undefined) return text(kept);
  const parts: string[] = [];
  for (let p = firstOf(block, f); p < (block.txCountAt[f] as number); p++) parts.push('"' + block.txHash(p) + '"');
  const s = parts.join(',');
  t.hashes[f] = keep(s);
  return s;
}

/** The context part of a transaction object's JSON (what JSON.stringify of toRpcTransaction writes before its hash). */
function contextJson(block: BlockView, index: number, position: number): string {
  return '{"blockHash":"' + block.diffs[index]!.blockHash + '","blockNumber":"' + toQuantity(block.number) + '","transactionIndex":"' + toQuantity(position) +
    '","blockTimestamp":"' + toQuantity(block.base.timestamp) + '"';
}

/** A transaction's object JSON as of flashblock `index`, split into its context and its own part; null when it does not split. */
function objectJson(block: BlockView, index: number, position: number, deposit: DepositExtrasSource): { json: string; own: string | null } {
  const rec = txAsOf(block, index, position)!;
  const json = JSON.stringify(toRpcTransaction(rec.tx, txContext(rec, index, deposit)));
  const at = json.indexOf(OWN_FROM);
  const own = at >= 0 && json.slice(0, at) === contextJson(block, index, position) ? json.slice(at) : null;
  return { json, own };
}

/** Builds flashblock f's own texts; deposits whose receipt extras wait for execution (`live`) are left out. */
function ownOf(block: BlockView, t: Texts, f: number, deposit: DepositExtrasSource, live: (position: number) => boolean): void {
  if (t.own[f] !== undefined) return;
  const first = firstOf(block, f);
  const n = (block.txCountAt[f] as number) - first;
  const ends = new Int32Array(n);
  const parts: string[] = [];
  let len = 0;
  for (let j = 0; j < n; j++) {
    const own = live(first + j) ? null : objectJson(block, f, first + j, deposit).own;
    if (own === null) {
      ends[j] = -1;
      continue;
    }
    parts.push(own);
    len += own.length;
    ends[j] = len;
  }
  t.own[f] = keep(parts.join(''));
  t.ownEnds[f] = ends;
}

/** The texts kept per held block (one instance per Shapes: its deposit extras source decides a deposit's text). */
export class BlockTexts {
  private readonly byBlock = new WeakMap<BlockView, Texts>();

  /**
   * The block object's JSON as of flashblock `index`, with hashes or full transactions (their senders already known;
   * deposits' receipt extras from `deposit`; `live(position)`: a deposit whose extras come from execution, so its
   * text is built at each read).
   */
  blockJson(block: BlockView, fullTx: boolean, index: number, deposit: DepositExtrasSource, live: (position: number) => boolean): string {
    let t = this.byBlock.get(block);
    if (t === undefined) this.byBlock.set(block, (t = { hashes: [], own: [], ownEnds: [] }));
    return assemble(block, t, fullTx, index, deposit, live);
  }
}

function assemble(block: BlockView, t: Texts, fullTx: boolean, index: number, deposit: DepositExtrasSource, live: (position: number) => boolean): string {
  const parts: string[] = [];
  if (!fullTx) {
    for (let f = 0; f <= index; f++) {
      const h = hashesOf(block, t, f);
      if (h.length > 0) parts.push(h);
    }
  } else {
    for (let f = 0; f <= index; f++) {
      ownOf(block, t, f, deposit, live);
      const first = firstOf(block, f);
      const own = text(t.own[f]!);
      const ends = t.ownEnds[f]!;
      let from = 0;
      for (let j = 0; j < ends.length; j++) {
        const end = ends[j]!;
        if (end < 0) {
          parts.push(objectJson(block, index, first + j, deposit).json);
          continue;
        }
        parts.push(contextJson(block, index, first + j) + own.slice(from, end));
        from = end;
      }
    }
  }
  const held = block.txCountAt[index] as number;
  if (txCountAsOf(block, index) > held) {
    // The post-exec transaction the flashblock restated (at most one; never kept: each flashblock replaces it).
    const rec = txAsOf(block, index, held)!;
    parts.push(fullTx ? JSON.stringify(toRpcTransaction(rec.tx, txContext(rec, index, deposit))) : '"' + rec.tx.hash + '"');
  }
  const head = JSON.stringify(blockFields(block, index, []));
  const at = head.indexOf(PLACEHOLDER);
  return head.slice(0, at) + '"transactions":[' + parts.join(',') + ']' + head.slice(at + PLACEHOLDER.length);
}

/** Whether the transaction at `position` is a deposit whose object's receipt extras come from execution. */
export function depositWaitsForExecution(block: BlockView, position: number): boolean {
  return block.txType(position) === TX_DEPOSIT && block.txAt(position)!.receipt === null;
}
