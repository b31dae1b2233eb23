// A transaction of a held block as a reader sees it (TxView), built when asked from the block's columns and its
// flashblock's body: short-lived, so a held block keeps no object per transaction. Reads only; the sender it shows
// is the block's, read live (recovery may write it after the view was made).
import type { FlashReceipt, FlashblockBody, SenderLookup } from '../chain/flashblock.js';
import type { DecodedTx } from '../chain/types.js';
import { F_RECEIPT, F_SYNTHESISED, GAS_UNKNOWN, type TxColumns } from './columns.js';
import type { BlockView, TxView } from './view.js';

/** What a HeldTx reads of its block (a PendingBlock, src/state/block.ts, which builds it). */
export interface HeldBlock extends BlockView, SenderLookup {
  readonly bodies: readonly FlashblockBody[];
  readonly cols: Pick<TxColumns, 'flags' | 'firstLogIndex' | 'gasUsed'>;
  synthesised(position: number): FlashReceipt | null;
  bigGasUsed(position: number): bigint | null;
}

/** See the file comment. */
export class HeldTx implements TxView {
  private txMemo: DecodedTx | null = null;
  /** The receipt once built (undefined: not yet); readers ask for it several times per answer. */
  private receiptMemo: FlashReceipt | null | undefined = undefined;

  constructor(
    readonly block: HeldBlock,
    /** transactionIndex within the block. */
    readonly position: number,
    /** The flashblock that carried it, and its index there. */
    readonly flashblockIndex: number,
    private readonly slot: number,
  ) {}

  get tx(): DecodedTx {
    return (this.txMemo ??= this.block.bodies[this.flashblockIndex]!.tx(this.slot, this.block, this.position));
  }

  get receipt(): FlashReceipt | null {
    if (this.receiptMemo === undefined) {
      const f = this.block.cols.flags[this.position]!;
      if ((f & F_RECEIPT) === 0) this.receiptMemo = null;
      else if ((f & F_SYNTHESISED) !== 0) this.receiptMemo = this.block.synthesised(this.position);
      else this.receiptMemo = this.block.bodies[this.flashblockIndex]!.receipt(this.slot);
    }
    return this.receiptMemo;
  }

  get firstLogIndex(): number {
    return this.block.cols.firstLogIndex[this.position]!;
  }

  get gasUsed(): bigint | null {
    const g = this.block.cols.gasUsed[this.position]!;
    if (g === GAS_UNKNOWN) return null;
    return Number.isNaN(g) ? this.block.bigGasUsed(this.position) : BigInt(g);
  }
}
