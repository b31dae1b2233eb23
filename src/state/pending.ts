// The pending chain: blocks by number (each indexing its own transactions by hash, balances and sender nonces) and
// flashblock hashes. The only writer is the ingest pipeline (synchronously per flashblock; senders later through
// SenderRecovery); readers see it through PendingView and never see half a flashblock.
import type { Flashblock } from '../chain/flashblock.js';
import { applyAccessList, type AccountPost } from '../chain/access-list.js';
import { LocalBlockHasher, ZERO_HASH } from './local-hash.js';
import { PendingBlock, postExecReceipt, TxRecord, type RawFrame } from './block.js';
import type { PendingView, TxView } from './view.js';

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

/** The in-memory pending state: written by ingest (and sender recovery), read through PendingView. */
export class PendingState implements PendingView {
  private readonly blocks = new Map<number, PendingBlock>();
  private readonly byFlashblockHash = new Map<string, { block: PendingBlock; index: number }>();
  private highest = -1;
  /** Held blocks newest first; rebuilt lazily after a block is added or removed. */
  private orderCache: PendingBlock[] | null = null;
  /** Transactions in the last block started (sizes the next block's columns). */
  private lastBlockTxs = 0;
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
    const prev = this.blocks.get(this.highest);
    if (prev !== undefined) this.lastBlockTxs = prev.txCount;
    const block = new PendingBlock(fb.blockNumber, fb.payloadId, fb.base, this.lastBlockTxs);
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
    const body = fb.body;
    block.append(fb);
    if (!body.hasReceipts) block.noMetadata = true;
    const al = fb.accessList;
    if (al !== null) {
      applyAccessList(block.accountPost, al);
      // An access list lists every balance change, so it reports balances as new_account_balances does.
      for (const a of al) if (block.accountPost.get(a.address)!.balance !== undefined) block.noteAccessListBalance(fb.index, a.address);
    } else if (body.txCount > 0) {
      block.accessListComplete = false;
    }
    if (body.balanceCount < 0 && al === null && body.txCount > 0) block.balancesComplete = false;
    this.setPostExec(block, fb);
    let diff = fb.diff;
    if (diff.blockHash === ZERO_HASH) {
      // OP subblocks: never serve the zero hash as a block hash; a local identifier stands in (local-hash.ts).
      block.hasher ??= new LocalBlockHasher();
      block.localHash = true;
      diff = { ...diff, blockHash: block.hasher.hash(block.number, block.base, diff, block, block.txCount, block.postExec?.tx.raw ?? null) };
    }
    block.postExecAt.push(block.postExec);
    block.diffs.push(diff);
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
    const tx = fb.diff.postExecTx;
    if (tx === null) {
      block.postExec = null;
      return;
    }
    const cumulative = block.lastCumulativeGas;
    const receipt = cumulative === null ? null : postExecReceipt(cumulative);
    block.postExec = new TxRecord(tx, block, block.txCount, fb.index, receipt, block.logsKnown ? block.logCount : -1, receipt === null ? null : 0n);
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
      for (let i = 0; i < held.txCount; i++) {
        const h = held.txHash(i);
        if (!canonicalTxHashes.has(h)) reorged.push(h);
      }
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
      this.settledTxCount = held === undefined || held.broken ? -1 : (canonicalTxHashes?.size ?? held.txCount);
    }
    return { reorged, dropped };
  }

  /**
   * The node's head went back to `n` (a reset, a snapshot restore, another node behind the same URL): every held block
   * was built on the chain the node no longer has, so all are dropped, and `n` becomes the canonical head. Returns how
   * many blocks were dropped.
   */
  rewind(n: number): number {
    const held = this.blocks.size;
    for (const num of [...this.blocks.keys()]) this.removeBlock(num);
    this.canonical = n;
    this.settledTxCount = -1;
    return held;
  }

  /** Drops the held blocks at these heights (blocks the stream abandoned). */
  dropBlocks(numbers: readonly number[]): void {
    for (const n of numbers) this.removeBlock(n);
  }

  private removeFrom(n: number): void {
    for (const num of [...this.blocks.keys()]) if (num >= n) this.removeBlock(num);
  }

  private removeBlock(n: number): void {
    const b = this.blocks.get(n);
    if (b === undefined) return;
    this.blocks.delete(n);
    this.orderCache = null;
    // Its indexes (by hash, nonces, balances) go with it; only the flashblock hashes are indexed here. Its bodies' memory
    // (native layouts' frame pool regions) is given back.
    for (const body of b.bodies) body.release();
    for (const d of b.diffs) if (this.byFlashblockHash.get(d.blockHash)?.block === b) this.byFlashblockHash.delete(d.blockHash);
    if (n === this.highest) {
      this.highest = -1;
      for (const k of this.blocks.keys()) if (k > this.highest) this.highest = k;
    }
  }

  private lowestNumber(): number {
    let min = Infinity;
    for (const k of this.blocks.keys()) if (k < min) min = k;
    return min;
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

  /**
   * A preconfirmed transaction by hash (lower-case), newest block first; a block's post-exec transaction only when no
   * transaction has that hash. Transactions of broken blocks are not served.
   */
  tx(hash: string): TxView | undefined {
    const order = this.descending();
    for (let i = 0; i < order.length; i++) {
      const b = order[i]!;
      const p = b.findTx(hash);
      if (p >= 0) return b.broken ? undefined : b.txAt(p);
    }
    for (let i = 0; i < order.length; i++) {
      const pe = order[i]!.postExec;
      if (pe !== null && pe.tx.hash === hash) return pe.block.broken ? undefined : pe;
    }
    return undefined;
  }

  /** The next nonce of `address` from the senders known so far, or null when it has none pending. */
  nextNonce(address: string): bigint | null {
    let next: bigint | null = null;
    const order = this.descending();
    for (let i = 0; i < order.length; i++) {
      const n = order[i]!.nextNonceOf(address);
      if (n !== null && (next === null || n > next)) next = n;
    }
    return next;
  }

  /** The balance of `address` after the pending state, or null when no held block reports it. */
  balance(address: string): bigint | null {
    const order = this.descending();
    for (let i = 0; i < order.length; i++) {
      const b = order[i]!;
      if (b.broken) return null;
      const v = b.balanceOf(address);
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

  /** Transactions held, post-exec ones included (tests and metrics). */
  get txCount(): number {
    let n = 0;
    for (const b of this.blocks.values()) n += b.txCount + (b.postExec === null ? 0 : 1);
    return n;
  }
}
