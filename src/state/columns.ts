// A held block's per-transaction facts as columns of numbers in one ArrayBuffer (gas used, first log index, flags,
// recovered senders), indexed by position in the block: what pending state derives at apply and recovery, without
// an object per transaction. Grows by doubling; knows nothing of blocks or bodies.

/** The stream's receipt for this transaction is usable (carried, with cumulativeGasUsed). */
export const F_RECEIPT = 1;
/** The sender is known (in `senders`). */
export const F_SENDER = 2;
/** The sender was recovered off the JS thread from the transaction's own bytes (native core or worker thread). */
export const F_OFF_THREAD = 4;
/** The receipt is the one op-reth gives a post-exec (0x7d) transaction (see PendingBlock.synthesised). */
export const F_SYNTHESISED = 8;

export const SENDER_BYTES = 20;

/** gasUsed column: not known (no receipt, or the previous cumulative gas unknown). */
export const GAS_UNKNOWN = -1;

/** See the file comment. */
export class TxColumns {
  /** Per-transaction gas (difference of cumulative gas); GAS_UNKNOWN; NaN when 2^53 or more (kept as a bigint aside). */
  gasUsed: Float64Array;
  /** logIndex of the transaction's first log within the block; -1 when an earlier transaction's logs are unknown. */
  firstLogIndex: Int32Array;
  /** F_* bits. */
  flags: Uint8Array;
  /** 20 bytes per transaction: its sender when F_SENDER is set (a Buffer, for hex without a copy). */
  senders: Buffer;

  constructor(public capacity: number) {
    const c = TxColumns.allocate(capacity);
    this.gasUsed = c.gasUsed;
    this.firstLogIndex = c.firstLogIndex;
    this.flags = c.flags;
    this.senders = c.senders;
  }

  private static allocate(capacity: number): Pick<TxColumns, 'gasUsed' | 'firstLogIndex' | 'flags' | 'senders'> {
    // Float64 first: every view starts at a multiple of its element size.
    const buf = new ArrayBuffer(capacity * (8 + 4 + 1 + SENDER_BYTES));
    let at = 0;
    const gasUsed = new Float64Array(buf, at, capacity);
    at += 8 * capacity;
    const firstLogIndex = new Int32Array(buf, at, capacity);
    at += 4 * capacity;
    const flags = new Uint8Array(buf, at, capacity);
    at += capacity;
    return { gasUsed, firstLogIndex, flags, senders: Buffer.from(buf, at, SENDER_BYTES * capacity) };
  }

  /** Makes room for `count` transactions, keeping the first `used`. */
  ensure(count: number, used: number): void {
    if (count <= this.capacity) return;
    let capacity = this.capacity;
    while (capacity < count) capacity *= 2;
    const c = TxColumns.allocate(capacity);
    c.gasUsed.set(this.gasUsed.subarray(0, used));
    c.firstLogIndex.set(this.firstLogIndex.subarray(0, used));
    c.flags.set(this.flags.subarray(0, used));
    c.senders.set(this.senders.subarray(0, SENDER_BYTES * used));
    this.gasUsed = c.gasUsed;
    this.firstLogIndex = c.firstLogIndex;
    this.flags = c.flags;
    this.senders = c.senders;
    this.capacity = capacity;
  }
}
