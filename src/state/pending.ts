// The pending chain: blocks by number, indexes by tx hash, flashblock hash, sender nonce and balance. The only
// writer is the ingest pipeline (synchronously per flashblock; senders later through SenderRecovery); readers see
// it through PendingView and never see half a flashblock.
import type { Flashblock } from '../chain/flashblock.js';
import type { FlashReceipt } from '../chain/flashblock.js';
import { applyAccessList, type AccountPost } from '../chain/access-list.js';
import { TX_DEPOSIT, TX_POST_EXEC } from '../chain/types.js';
import { LocalBlockHasher, ZERO_HASH } from './local-hash.js';
import { PendingBlock, TxRecord, type RawFrame } from './block.js';
import type { PendingView } from './view.js';

export interface PendingOptions {
  /** Pending blocks kept; the oldest is dropped beyond this. */
  maxPendingBlocks: number;
}

/** What settling a canonical block found. */
export interface SettleResult {
  /** Preconfirmed transactions of that height missing from the canonical block. */
  reorged: string[];
  /** Pending blocks dropped. */
  dropped: number;
}

interface NonceEntry {
  next: bigint;
  blockNumber: number;
}

/**
 * The receipt of a post-exec (0x7d) transaction appended now (lagoon/post-exec.md "Receipt"): status 1, no logs, the
 * previous receipt's cumulative gas; null while that is unknown. The stream never carries one.
 */
function postExecReceipt(block: PendingBlock): FlashReceipt | null {
  const cumulative = block.lastCumulativeGas;
  if (cumulative === null) return null;
  return { type: TX_POST_EXEC, status: 1, cumulativeGasUsed: cumulative, logs: [], depositNonce: null, depositReceiptVersion: null };
}

/** The in-memory pending state: written by ingest (and sender recovery), read through PendingView. */
export class PendingState implements PendingView {
  private readonly blocks = new Map<number, PendingBlock>();
  private readonly txByHash = new Map<string, TxRecord>();
  private readonly byFlashblockHash = new Map<string, { block: PendingBlock; index: number }>();
  private readonly nonces = new Map<string, NonceEntry>();
  private highest = -1;
  /** Held blocks newest first; rebuilt lazily after a block is added or removed. */
  private orderCache: PendingBlock[] | null = null;
  canonical = -1;
  /** Transactions of the last settled canonical block when it was held here, else -1 (unknown). */
  settledTxCount = -1;
  /** performance.now() of the last applied flashblock. */
  lastAppliedMs = 0;

  constructor(private readonly opts: PendingOptions) {}

  // ---- writes (ingest only) ----

  /** Starts a new block from an index-0 flashblock, replacing any build held at that height and above it. */
  startBlock(fb: Flashblock, frame: RawFrame, nowMs: number): PendingBlock {
    if (fb.base === null) throw new Error('startBlock needs index 0 with base');
    if (this.blocks.has(fb.blockNumber)) this.removeFrom(fb.blockNumber);
    const block = new PendingBlock(fb.blockNumber, fb.payloadId, fb.base);
    this.blocks.set(fb.blockNumber, block);
    this.orderCache = null;
    if (fb.blockNumber > this.highest) this.highest = fb.blockNumber;
    this.appendTo(block, fb, frame, nowMs);
    while (this.blocks.size > this.opts.maxPendingBlocks) this.removeBlock(this.lowestNumber());
    return block;
  }

  /** Appends the next flashblock of a held build. The caller has classified it as 'next'. */
  appendFlashblock(fb: Flashblock, frame: RawFrame, nowMs: number): PendingBlock {
    const block = this.blocks.get(fb.blockNumber);
    if (block === undefined || block.payloadId !== fb.payloadId || block.nextIndex !== fb.index) {
      throw new Error(`appendFlashblock: ${fb.blockNumber}/${fb.index} is not next`);
    }
    this.appendTo(block, fb, frame, nowMs);
    return block;
  }

  private appendTo(block: PendingBlock, fb: Flashblock, frame: RawFrame, nowMs: number): void {
    const txs = fb.txs;
    for (let i = 0; i < txs.length; i++) {
      const tx = txs[i]!;
      let receipt = fb.receipts === null ? null : (fb.receipts.get(tx.hash) ?? null);
      if (receipt === null && !tx.executes) receipt = postExecReceipt(block);
      if (receipt !== null && receipt.cumulativeGasUsed === null) receipt = null;
      // A receipt is kept even when an earlier one is missing (a stream may carry only some): what it cannot give
      // alone (gasUsed without the previous cumulative gas, logIndex without the earlier logs) comes from execution.
      let gasUsed: bigint | null = null;
      if (receipt !== null) {
        const cumulative = receipt.cumulativeGasUsed as bigint;
        // A cumulative gas below the previous one is a stream fault: no gasUsed from it (never a negative one).
        if (block.lastCumulativeGas !== null && cumulative >= block.lastCumulativeGas) gasUsed = cumulative - block.lastCumulativeGas;
        block.lastCumulativeGas = cumulative;
      } else {
        block.lastCumulativeGas = null;
      }
      if (gasUsed === null) block.receiptsComplete = false;
      const firstLogIndex = block.logsKnown ? block.logCount : -1;
      if (receipt === null) block.logsKnown = false;
      else block.logCount += receipt.logCount ?? receipt.logs.length;
      const rec = new TxRecord(tx, block, block.txs.length, fb.index, receipt, firstLogIndex, gasUsed);
      block.txs.push(rec);
      this.txByHash.set(tx.hash, rec);
      // Signed transactions whose sender is unknown get theirs from SenderRecovery (noteSender).
      if (tx.type === TX_DEPOSIT || (tx.from !== null && tx.executes)) this.noteNonce(rec);
    }
    if (fb.receipts === null) block.noMetadata = true;
    // forEach: no [key, value] entry array per balance (an iterator's would be allocated for each).
    if (fb.balances !== null) fb.balances.forEach((b, a) => block.balances.set(a, b));
    const al = fb.accessList;
    if (al !== null) {
      applyAccessList(block.accountPost, al);
      // An access list lists every balance change, so it reports balances as new_account_balances does.
      for (const a of al) {
        const b = block.accountPost.get(a.address)!.balance;
        if (b !== undefined) block.balances.set(a.address, b);
      }
    } else if (txs.length > 0) {
      block.accessListComplete = false;
    }
    if (fb.balances === null && al === null && txs.length > 0) block.balancesComplete = false;
    this.setPostExec(block, fb);
    let diff = fb.diff;
    if (diff.blockHash === ZERO_HASH) {
      // OP subblocks: never serve the zero hash as a block hash; a local identifier stands in (local-hash.ts).
      block.hasher ??= new LocalBlockHasher();
      block.localHash = true;
      diff = { ...diff, blockHash: block.hasher.hash(block.number, block.base, diff, block.txs, block.txs.length, block.postExec?.tx.raw ?? null) };
    }
    block.postExecAt.push(block.postExec);
    block.diffs.push(diff);
    block.txCountAt.push(block.txs.length);
    block.frames.push(frame);
    block.version++;
    block.lastAppliedMs = nowMs;
    this.byFlashblockHash.set(diff.blockHash, { block, index: fb.index });
    this.lastAppliedMs = nowMs;
  }

  /**
   * The block's post-exec transaction as this flashblock restates it (lagoon/post-exec.md "Subblocks"): after the
   * block's transactions, with the receipt op-reth gives it (status 1, no logs, no gas, the previous cumulative gas;
   * the stream carries none). Replaces or clears the previous one.
   */
  private setPostExec(block: PendingBlock, fb: Flashblock): void {
    const old = block.postExec;
    if (old !== null && this.txByHash.get(old.tx.hash) === old) this.txByHash.delete(old.tx.hash);
    const tx = fb.diff.postExecTx;
    if (tx === null) {
      block.postExec = null;
      return;
    }
    const receipt = postExecReceipt(block);
    const rec = new TxRecord(tx, block, block.txs.length, fb.index, receipt, block.logsKnown ? block.logCount : -1, receipt === null ? null : 0n);
    block.postExec = rec;
    if (!this.txByHash.has(tx.hash)) this.txByHash.set(tx.hash, rec);
  }

  private noteNonce(rec: TxRecord): void {
    const from = rec.tx.from;
    if (from === null) return;
    // Deposits carry their nonce in the receipt (depositNonce); signed txs in the tx itself.
    const n = rec.tx.type === TX_DEPOSIT ? rec.receipt?.depositNonce ?? null : rec.tx.nonce;
    if (n === null) return;
    const cur = this.nonces.get(from);
    if (cur === undefined || n + 1n > cur.next) this.nonces.set(from, { next: n + 1n, blockNumber: rec.block.number });
  }

  /** Marks the build at a height broken (a gap that never filled): its answers fall back to the node. */
  markBroken(blockNumber: number, reason: string): boolean {
    const b = this.blocks.get(blockNumber);
    if (b === undefined || b.broken) return false;
    b.broken = true;
    b.brokenReason = reason;
    b.version++;
    return true;
  }

  /**
   * Settles canonical block `n`: compares its transaction hashes (when given) with the preconfirmed ones, then drops
   * every pending block ≤ n.
   */
  settleCanonical(n: number, canonicalTxHashes: ReadonlySet<string> | null): SettleResult {
    const reorged: string[] = [];
    const held = this.blocks.get(n);
    if (held !== undefined && canonicalTxHashes !== null && !held.broken) {
      for (const rec of held.txs) if (!canonicalTxHashes.has(rec.tx.hash)) reorged.push(rec.tx.hash);
    }
    let dropped = 0;
    for (const num of [...this.blocks.keys()]) {
      if (num <= n) {
        this.removeBlock(num);
        dropped++;
      }
    }
    if (n > this.canonical) {
      this.canonical = n;
      this.settledTxCount = held === undefined || held.broken ? -1 : (canonicalTxHashes?.size ?? held.txs.length);
    }
    return { reorged, dropped };
  }

  /** Drops the held blocks at these heights (blocks the stream abandoned); nonces are rebuilt from what stays. */
  dropBlocks(numbers: readonly number[]): void {
    if (numbers.length === 0) return;
    for (const n of numbers) this.removeBlock(n);
    this.rebuildNonces();
  }

  private removeFrom(n: number): void {
    for (const num of [...this.blocks.keys()]) if (num >= n) this.removeBlock(num);
    this.rebuildNonces();
  }

  private removeBlock(n: number): void {
    const b = this.blocks.get(n);
    if (b === undefined) return;
    this.blocks.delete(n);
    this.orderCache = null;
    for (const rec of b.txs) if (this.txByHash.get(rec.tx.hash) === rec) this.txByHash.delete(rec.tx.hash);
    const pe = b.postExec;
    if (pe !== null && this.txByHash.get(pe.tx.hash) === pe) this.txByHash.delete(pe.tx.hash);
    for (const d of b.diffs) if (this.byFlashblockHash.get(d.blockHash)?.block === b) this.byFlashblockHash.delete(d.blockHash);
    // The highest nonce of a sender lives in the newest block holding its txs, so dropping from the bottom only
    // removes entries whose newest tx was in the dropped block.
    // forEach (no entry array per sender); deleting the visited entry is allowed.
    this.nonces.forEach((e, addr) => {
      if (e.blockNumber === n) this.nonces.delete(addr);
    });
    if (n === this.highest) {
      this.highest = -1;
      for (const k of this.blocks.keys()) if (k > this.highest) this.highest = k;
    }
  }

  private rebuildNonces(): void {
    this.nonces.clear();
    const nums = [...this.blocks.keys()].sort((a, b) => a - b);
    for (const num of nums) for (const rec of this.blocks.get(num)!.txs) if (rec.tx.from !== null && rec.tx.executes) this.noteNonce(rec);
  }

  private lowestNumber(): number {
    let min = Infinity;
    for (const k of this.blocks.keys()) if (k < min) min = k;
    return min;
  }

  /** Indexes the nonce of a transaction whose sender was just recovered (SenderRecovery only). */
  noteSender(rec: TxRecord): void {
    if (rec.tx.from !== null && this.holds(rec.block)) this.noteNonce(rec);
  }

  /** Whether `block` is still held (not settled, dropped or replaced). */
  holds(block: PendingBlock): boolean {
    return this.blocks.get(block.number) === block;
  }

  // ---- reads ----

  /** The block `pending` means: the highest held block, or null when it is broken or none is held. */
  pendingBlock(): PendingBlock | null {
    const b = this.blocks.get(this.highest);
    return b === undefined || b.broken ? null : b;
  }

  /** Highest block number held (even if broken), or -1. */
  get highestNumber(): number {
    return this.highest;
  }

  /** The held block at a height, or undefined. */
  block(n: number): PendingBlock | undefined {
    return this.blocks.get(n);
  }

  /** All held blocks in ascending order. */
  heldBlocks(): PendingBlock[] {
    return [...this.descending()].reverse();
  }

  /** A flashblock's block hash → the block as of that flashblock. */
  blockByFlashblockHash(hash: string): { block: PendingBlock; index: number } | undefined {
    return this.byFlashblockHash.get(hash);
  }

  /** A preconfirmed transaction by hash (lower-case). Transactions of broken blocks are not served. */
  tx(hash: string): TxRecord | undefined {
    const r = this.txByHash.get(hash);
    return r === undefined || r.block.broken ? undefined : r;
  }

  /** The next nonce of `address` from the senders known so far, or null when it has none pending. */
  nextNonce(address: string): bigint | null {
    return this.nonces.get(address)?.next ?? null;
  }

  /** The balance of `address` after the pending state, or null when no held block reports it. */
  balance(address: string): bigint | null {
    const order = this.descending();
    for (let i = 0; i < order.length; i++) {
      const b = order[i]!;
      if (b.broken) return null;
      const v = b.balances.get(address);
      if (v !== undefined) return v;
    }
    return null;
  }

  /**
   * What the access lists of held blocks at or below `blockNumber` say of `address` after that block (newest first):
   * its post-values, or null when no complete list covers it (a block without access lists, a broken one, none held).
   * A field left undefined was not changed in the held blocks: the node's latest value holds.
   */
  accountAfter(address: string, blockNumber: number): Readonly<AccountPost> | null {
    let balance: bigint | undefined;
    let nonce: bigint | undefined;
    let code: string | undefined;
    const storage = new Map<string, bigint>();
    let any = false;
    for (let n = blockNumber; n > this.canonical; n--) {
      const b = this.blocks.get(n);
      if (b === undefined) break; // below the held blocks: the node's state
      if (b.broken || !b.accessListComplete) return null;
      const p = b.accountPost.get(address);
      if (p === undefined) continue;
      any = true;
      balance ??= p.balance;
      nonce ??= p.nonce;
      code ??= p.code;
      for (const [k, v] of p.storage) if (!storage.has(k)) storage.set(k, v);
    }
    return any || this.blocks.has(blockNumber) ? { balance, nonce, code, storage } : null;
  }

  private descending(): PendingBlock[] {
    if (this.orderCache === null) this.orderCache = [...this.blocks.values()].sort((a, b) => b.number - a.number);
    return this.orderCache;
  }

  /** Count of indexed transactions (tests and metrics). */
  get txCount(): number {
    return this.txByHash.size;
  }
}
