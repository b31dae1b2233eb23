// The engine's read memo: answers of pending reads (eth_call, eth_getCode, …) at the engine's newest executed
// flashblock, keyed by the read's exact JSON, so a call asked again before the next flashblock (a backend polling a
// quote every 10 ms, many clients asking the same view) is answered without running the EVM again. Correct by
// construction, not by expiry:
// - an entry is stored from an answer computed at the engine's head of that moment, which is never older than any
//   flashblock JS has been told is executed: inline on the RPC thread, or on a read thread when no flashblock was
//   executed between asking and answering (the memo's `epoch` did not move); the answer says which head (its `seq`,
//   counted by the native engine, a re-executed position included);
// - an answer from a newer head drops every entry of the older one; the engine clears the memo whenever JS learns of
//   a newly executed flashblock (before anyone is told), so a hit is never older than what readers were promised;
// - reads pinned to a flashblock (`at`) are not memoised; the memo is per native engine (a restart starts a new one).
// Bounded: at most `maxEntries` entries and `maxBytes` of keys and answers per head; past that it stores nothing more.

/** A native read's answer, parsed: its result, or the JSON-RPC error it carries. */
export interface ReadAnswer {
  result?: unknown;
  error?: { code: string; message: string; data?: string | null };
  unavailable?: true;
  /** The head it was read at (native Head::seq). */
  seq?: number;
}

export class ReadMemo {
  private seq = -1;
  private bytes = 0;
  /** Moves with every clear(): an answer asked for before a clear is not stored after it. */
  private clears = 0;
  private readonly entries = new Map<string, ReadAnswer>();

  constructor(
    private readonly maxEntries: number,
    private readonly maxBytes: number,
  ) {}

  /** Where the memo is now; store an answer asked for at epoch `e` only while `epoch === e`. */
  get epoch(): number {
    return this.clears;
  }

  /** Entries held now. */
  get size(): number {
    return this.entries.size;
  }

  get(key: string): ReadAnswer | undefined {
    return this.entries.get(key);
  }

  /** Stores `answer` (read at head `answer.seq`, as the rules above allow) under `key`, its answer text `textBytes` long. */
  put(key: string, answer: ReadAnswer, textBytes: number): void {
    const seq = answer.seq;
    if (seq === undefined || seq < this.seq || this.maxEntries === 0) return;
    if (seq > this.seq) {
      this.drop();
      this.seq = seq;
    }
    const size = key.length + textBytes;
    if (this.entries.size >= this.maxEntries || this.bytes + size > this.maxBytes) return;
    this.entries.set(key, answer);
    this.bytes += size;
  }

  /** Drops every entry (a flashblock was executed: what readers may ask for is newer now). */
  clear(): void {
    this.clears++;
    this.drop();
  }

  private drop(): void {
    if (this.entries.size === 0) return;
    this.entries.clear();
    this.bytes = 0;
  }
}
