// Memory for natively decoded flashblocks' layouts: one ArrayBuffer allocated once and used as a ring of regions, one
// per frame, so holding and then dropping a block allocates and frees nothing V8 accounts. (A layout in memory of
// its own — ~150 KB for a 200-tx frame — lives as long as its block, is promoted with it and freed only by a
// mark-compact, which V8 then starts for "external memory pressure".) The ring reuses its oldest region first: a
// region given back (its block dropped) more than a grace period ago is simply reused; one still held, or given back
// within the grace period, is first moved out (its frame copies it into memory of its own), so a held block never
// blocks the ring and is never overwritten. A reader still holding a view of a frame reused after its grace period
// gets an error, never another frame's bytes. Pure: no I/O, no addon.

/**
 * Bytes of the ring: a minute of Base's stream (~0.75 MB/s of layouts), many times what the held blocks and the grace
 * period need, so bursts (a relay's resume, a replay) fit without a move.
 */
export const FRAME_POOL_BYTES = 64 * 1024 * 1024;
/**
 * How long a released region keeps its bytes by default: longer than a reader holds a dropped block's views (an RPC
 * read waiting for execution holds one for at most --execution-wait-ms; the pipeline sets it from that).
 */
export const RELEASE_GRACE_MS = 2_000;
/** Regions tracked at once (a frame each; ~3,000 s of Base's stream): the oldest is moved out beyond it. */
export const MAX_REGIONS = 65_536;

/** A frame whose layout lies in a region: it can move its bytes elsewhere when the ring needs the region back. */
export interface PoolTenant {
  /** Copies the layout (`size` bytes at its region) into memory of its own and stops reading the pool. */
  moveOut(size: number): void;
}

/** See the file comment. Regions are handed out in ring order and taken back oldest first. */
export class FramePool {
  readonly mem: Buffer;
  /** The memory as u32 words and u64 quantities (region starts are 8-aligned). */
  readonly words: Uint32Array;
  readonly quads: BigUint64Array;
  /**
   * Live regions oldest first, a circular queue (typed arrays, and the tenant of each): start, end, and when released
   * (-1: still held); the oldest is at `front`, with sequence number `frontSeq`.
   */
  private readonly starts = new Uint32Array(MAX_REGIONS);
  private readonly ends = new Uint32Array(MAX_REGIONS);
  private readonly releasedAt = new Float64Array(MAX_REGIONS);
  private readonly tenants: (PoolTenant | null)[] = new Array<PoolTenant | null>(MAX_REGIONS).fill(null);
  private front = 0;
  private count = 0;
  private frontSeq = 1;
  private seqNext = 1;
  /** Regions below this sequence number may have been overwritten. */
  private liveFrom = 1;
  /**
   * How many regions from the oldest have dropped their tenant (released more than the grace period ago: reused
   * without a move, so their frames need not be kept reachable until then).
   */
  private swept = 0;
  /** Regions moved out before reuse (held, or released within the grace period): for tests and diagnostics. */
  moved = 0;
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
   * (~150 KB a 200-tx frame: native decode p50 ~530 -> ~460 us at the stream's pace, measured on the combined
   * bench's stream).
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

  /** An 8-aligned offset with room for `size` bytes, taking the oldest regions back as needed; -1 when too large. */
  reserve(size: number): number {
    if (this.count === MAX_REGIONS) this.evictOldest();
    for (;;) {
      this.offer();
      if (this.offerRoom >= size) return this.offerAt;
      // Not wrapped (the live regions lie in [tail, head)): the bytes before the oldest region are free too.
      if (this.count > 0 && this.offerAt > this.starts[this.front]! && this.starts[this.front]! >= size) return 0;
      if (this.count === 0) return -1;
      this.evictOldest();
    }
  }

  /** Whether another region can be recorded (see MAX_REGIONS); `reserve` makes room when it cannot. */
  get canCommit(): boolean {
    return this.count < MAX_REGIONS;
  }

  /** Records a region of `size` bytes at `at` (from `offer` or `reserve`) for `tenant`; its sequence number. */
  commit(at: number, size: number, tenant: PoolTenant): number {
    const i = this.slot(this.count++);
    this.starts[i] = at;
    this.ends[i] = at + ((size + 7) & ~7);
    this.releasedAt[i] = -1;
    this.tenants[i] = tenant;
    this.sweep();
    return this.seqNext++;
  }

  /** Lets go of the tenants of the oldest regions released more than the grace period ago. */
  private sweep(): void {
    const now = this.now();
    while (this.swept < this.count) {
      const i = this.slot(this.swept);
      const r = this.releasedAt[i]!;
      if (r < 0 || now - r < this.graceMs) return;
      this.tenants[i] = null;
      this.swept++;
    }
  }

  /** The sequence number the next region gets. */
  get nextSeq(): number {
    return this.seqNext;
  }

  /** Gives region `seq` back (its frame's block was dropped, or the frame never applied). Idempotent. */
  release(seq: number): void {
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

  /** Takes the oldest region back, moving its frame out first unless it was released more than the grace period ago. */
  private evictOldest(): void {
    const i = this.front;
    const r = this.releasedAt[i]!;
    const tenant = this.tenants[i] ?? null;
    if (tenant !== null && (r < 0 || this.now() - r < this.graceMs)) {
      tenant.moveOut(this.ends[i]! - this.starts[i]!);
      this.moved++;
    } else {
      this.liveFrom = this.frontSeq + 1;
    }
    this.tenants[i] = null;
    this.front = this.slot(1);
    this.count--;
    this.frontSeq++;
    if (this.swept > 0) this.swept--;
  }
}
