// Memory for natively decoded flashblocks' layouts: one ArrayBuffer allocated once and used as a ring of regions, one
// per frame, so holding and then dropping a block allocates and frees nothing V8 accounts. (A layout in memory of
// its own — ~150 KB for a 200-tx frame — lives as long as its block, is promoted with it and freed only by a
// mark-compact, which V8 then starts for "external memory pressure".) A region is reused only after its frame was
// released (its block dropped) and a grace period passed; a reader still holding a view of an older one gets an
// error, never another frame's bytes. Pure: no I/O, no addon.

/**
 * Bytes of the ring: a minute of Base's stream (~0.75 MB/s of layouts), many times what the held blocks and the grace
 * period need, so bursts (a relay's resume, a replay) and larger frames fit too; beyond it frames get memory of their
 * own, as without the pool.
 */
export const FRAME_POOL_BYTES = 64 * 1024 * 1024;
/**
 * How long a released region keeps its bytes by default: longer than a reader holds a dropped block's views (an RPC
 * read waiting for execution holds one for at most --execution-wait-ms; the pipeline sets it from that).
 */
export const RELEASE_GRACE_MS = 2_000;
/** Regions tracked at once (a frame each; ~3,000 s of Base's stream): the ring counts as full beyond it. */
export const MAX_REGIONS = 65_536;

/** See the file comment. Regions are handed out in ring order and taken back oldest first. */
export class FramePool {
  readonly mem: Buffer;
  /** The memory as u32 words and u64 quantities (region starts are 8-aligned). */
  readonly words: Uint32Array;
  readonly quads: BigUint64Array;
  /**
   * Live regions oldest first, a circular queue in typed arrays (nothing allocated per frame): start, end, and when
   * released (-1: still held); the oldest is at `front`, with sequence number `frontSeq`.
   */
  private readonly starts = new Uint32Array(MAX_REGIONS);
  private readonly ends = new Uint32Array(MAX_REGIONS);
  private readonly releasedAt = new Float64Array(MAX_REGIONS);
  private front = 0;
  private count = 0;
  private frontSeq = 1;
  private nextSeq = 1;
  /** Regions below this sequence number may have been overwritten. */
  private liveFrom = 1;
  /**
   * Regions whose frame object was collected without being released (a path that dropped a frame and forgot): given
   * back then, so a leak costs ring space until a collection, never the ring.
   */
  private readonly orphans = new FinalizationRegistry<number>((seq) => this.release(seq));
  /** Where the next region would start, and how many bytes it may take without evicting (see `offer`). */
  offerAt = 0;
  offerRoom = 0;

  constructor(
    readonly capacity: number = FRAME_POOL_BYTES,
    /** How long a released region keeps its bytes (see RELEASE_GRACE_MS). */
    public graceMs: number = RELEASE_GRACE_MS,
    private readonly now: () => number = () => performance.now(),
  ) {
    const buf = new ArrayBuffer(capacity);
    this.mem = Buffer.from(buf);
    this.words = new Uint32Array(buf);
    this.quads = new BigUint64Array(buf);
  }

  /**
   * Touches every page once (~20 ms for 64 MiB), so no frame pays the first-touch page faults of its region
   * (~150 KB a 200-tx frame: +15 % on native decode at the stream's pace, .probe measurement in the commit).
   */
  prefault(): void {
    this.mem.fill(0);
  }

  /** Queue slot of the i-th live region from the oldest. */
  private slot(i: number): number {
    return (this.front + i) % MAX_REGIONS;
  }

  /** Sets `offerAt` / `offerRoom` to the free bytes after the newest region (the ring's write position). */
  offer(): void {
    if (this.count === 0) {
      this.offerAt = 0;
      this.offerRoom = this.capacity;
      return;
    }
    const head = this.ends[this.slot(this.count - 1)]!;
    const tail = this.starts[this.front]!;
    this.offerAt = head;
    this.offerRoom = head > tail ? this.capacity - head : tail - head;
  }

  /** An 8-aligned offset with room for `size` bytes, evicting released regions past their grace; -1 when full. */
  reserve(size: number): number {
    if (this.count === MAX_REGIONS && !this.evictOldest()) return -1;
    for (;;) {
      this.offer();
      if (this.offerRoom >= size) return this.offerAt;
      // Not wrapped (the live regions lie in [tail, head)): the bytes before the oldest region are free too.
      if (this.count > 0 && this.offerAt > this.starts[this.front]! && this.starts[this.front]! >= size) return 0;
      if (!this.evictOldest()) return -1;
    }
  }

  /** Whether another region can be recorded (see MAX_REGIONS); `reserve` makes room when it can. */
  get canCommit(): boolean {
    return this.count < MAX_REGIONS;
  }

  /** Records a region of `size` bytes at `at` (from `offer` or `reserve`; `canCommit` true); its sequence number. */
  commit(at: number, size: number): number {
    const i = this.slot(this.count++);
    this.starts[i] = at;
    this.ends[i] = at + ((size + 7) & ~7);
    this.releasedAt[i] = -1;
    return this.nextSeq++;
  }

  /** Gives region `seq` back when `owner` is collected unreleased. */
  track(owner: object, seq: number): void {
    this.orphans.register(owner, seq, owner);
  }

  /** Gives region `seq` back (its frame's block was dropped, or the frame never applied). Idempotent. */
  release(seq: number, owner?: object): void {
    if (owner !== undefined) this.orphans.unregister(owner);
    const k = seq - this.frontSeq;
    if (k < 0 || k >= this.count) return;
    const i = this.slot(k);
    if (this.releasedAt[i]! < 0) this.releasedAt[i] = this.now();
  }

  /** Whether region `seq`'s bytes are still its frame's. */
  live(seq: number): boolean {
    return seq >= this.liveFrom;
  }

  /** Regions held (not released), for tests and diagnostics. */
  get held(): number {
    let n = 0;
    for (let k = 0; k < this.count; k++) if (this.releasedAt[this.slot(k)]! < 0) n++;
    return n;
  }

  private evictOldest(): boolean {
    if (this.count === 0) return false;
    const r = this.releasedAt[this.front]!;
    if (r < 0 || this.now() - r < this.graceMs) return false;
    this.front = this.slot(1);
    this.count--;
    this.liveFrom = ++this.frontSeq;
    return true;
  }
}
