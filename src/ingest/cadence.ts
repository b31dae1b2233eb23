// Does the stream's observed cadence contradict the timing the daemon runs under (its chain preset's, or
// --block-time-ms / --flashblock-interval-ms)? Block time from the blocks' own timestamps (so a replayed or
// reconnecting stream's bursts do not count), flashblocks per block from the indices seen; the median of the newest
// blocks judged against the expectation, one verdict when a contradiction starts and one when it ends. Pure: no
// clock, no I/O; the daemon logs the verdicts and sets the gauge (src/daemon.ts).
import { PRESETS, type ChainChoice } from '../chain/presets.js';

/** What a contradiction is about: the block time, or how many flashblocks a block has. */
export const CADENCE_CHECKS = ['block_time', 'flashblocks_per_block'] as const;
export type CadenceCheck = (typeof CADENCE_CHECKS)[number];

/** The timing the daemon runs under, and where it comes from (for the message). */
export interface CadenceExpectation {
  blockTimeMs: number;
  flashblockIntervalMs: number;
  /** e.g. "the Devnet preset (chain 901)", "--block-time-ms 2000": what the message says the daemon runs under. */
  source: string;
}

export interface CadenceOptions {
  /** Completed blocks judged (the newest); a verdict needs at least `minBlocks` of them. */
  windowBlocks: number;
  minBlocks: number;
  /**
   * Observed / expected outside [1 / tolerance, tolerance] contradicts (1.25: 2 s blocks vs 1.6–2.5 s agree). A block
   * of N flashblock intervals has N or N + 1 flashblocks (index 0 opens it; a builder may send one more at the end, as
   * op-rbuilder and the devnet do), so counts from N / tolerance to (N + 1) × tolerance agree.
   */
  tolerance: number;
}

export const CADENCE_DEFAULTS: CadenceOptions = { windowBlocks: 8, minBlocks: 6, tolerance: 1.25 };

/** A change of verdict: a contradiction starts (warn once), or the cadence agrees again (the episode ends). */
export type CadenceVerdict =
  | { kind: 'contradicted'; checks: CadenceCheck[]; observedBlockTimeMs: number; observedPerBlock: number; message: string }
  | { kind: 'agrees'; message: string };

/** The expectation of a daemon running with `timing` for `chain`; `explicit` says which settings were given as flags. */
export function cadenceExpectation(
  chain: ChainChoice,
  timing: { blockTimeMs: number; flashblockIntervalMs: number },
  explicit: { blockTimeMs: number; flashblockIntervalMs: number },
): CadenceExpectation {
  const flags = [
    ...(explicit.blockTimeMs > 0 ? [`--block-time-ms ${explicit.blockTimeMs}`] : []),
    ...(explicit.flashblockIntervalMs > 0 ? [`--flashblock-interval-ms ${explicit.flashblockIntervalMs}`] : []),
  ];
  const base =
    chain.kind === 'flag' ? `the ${chain.preset.title} preset (--chain ${chain.preset.name})` :
    chain.kind === 'node' ? `the ${chain.preset.title} preset (by the node's chain id ${chain.preset.chainId})` :
    chain.kind === 'unknown' ? `the defaults (chain ${chain.chainId} has no preset)` :
    'the defaults (the chain is not known yet)';
  return { ...timing, source: flags.length === 0 ? base : `${flags.join(' ')} (over ${base})` };
}

/** The lower median: always one of the observed values (a whole count of flashblocks, a whole block time). */
const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[(xs.length - 1) >> 1]!;

/** Judges the cadence of applied flashblocks against an expectation; see the file header. */
export class CadenceJudge {
  private expect: CadenceExpectation;
  private readonly opts: CadenceOptions;
  /** Newest completed blocks: block time (ms, from timestamps) and flashblock count; rings of `windowBlocks`. */
  private readonly blockTimes: number[] = [];
  private readonly perBlock: number[] = [];
  /** The block being observed: its number, timestamp (s), highest index, and whether its index 0 was seen. */
  private current = -1;
  private currentTs = 0;
  private currentMaxIndex = -1;
  private currentFromStart = false;
  private contradicted: CadenceCheck[] = [];

  constructor(expect: CadenceExpectation, opts: CadenceOptions = CADENCE_DEFAULTS) {
    this.expect = expect;
    this.opts = opts;
  }

  /** The checks contradicted now (empty while the cadence agrees or is not judged yet). */
  get mismatches(): readonly CadenceCheck[] {
    return this.contradicted;
  }

  /**
   * The daemon runs under another timing from now on (the chain was learned or changed): the observations stay, an
   * ongoing contradiction is forgotten so that one against the new expectation is said anew.
   */
  setExpectation(expect: CadenceExpectation): void {
    this.expect = expect;
    this.contradicted = [];
  }

  /**
   * One applied flashblock: its block number, index, and the block's timestamp (s). Returns a verdict when the
   * judgement changes (at most once per block), else null.
   */
  flashblock(blockNumber: number, index: number, timestampSec: number): CadenceVerdict | null {
    if (blockNumber === this.current) {
      if (index > this.currentMaxIndex) this.currentMaxIndex = index;
      return null;
    }
    // Only a block that follows the one observed completes it; anything else (a gap, a rewind) starts over.
    const completes = blockNumber === this.current + 1 && this.currentFromStart && index === 0;
    if (completes) {
      this.push(this.blockTimes, (timestampSec - this.currentTs) * 1000);
      this.push(this.perBlock, this.currentMaxIndex + 1);
    }
    this.current = blockNumber;
    this.currentTs = timestampSec;
    this.currentMaxIndex = index;
    this.currentFromStart = index === 0;
    return completes ? this.judge() : null;
  }

  private push(ring: number[], v: number): void {
    ring.push(v);
    if (ring.length > this.opts.windowBlocks) ring.shift();
  }

  private judge(): CadenceVerdict | null {
    if (this.blockTimes.length < this.opts.minBlocks) return null;
    const e = this.expect;
    const expectedPerBlock = Math.max(1, Math.round(e.blockTimeMs / e.flashblockIntervalMs));
    const blockTimeMs = median(this.blockTimes);
    const perBlock = median(this.perBlock);
    const tol = this.opts.tolerance;
    const now: CadenceCheck[] = [];
    if (blockTimeMs * tol < e.blockTimeMs || blockTimeMs > e.blockTimeMs * tol) now.push('block_time');
    if (perBlock * tol < expectedPerBlock || perBlock > (expectedPerBlock + 1) * tol) now.push('flashblocks_per_block');
    const was = this.contradicted;
    this.contradicted = now;
    if (now.length > 0 && was.length === 0) {
      return { kind: 'contradicted', checks: now, observedBlockTimeMs: blockTimeMs, observedPerBlock: perBlock, message: this.describe(blockTimeMs, perBlock, expectedPerBlock) };
    }
    if (now.length === 0 && was.length > 0) {
      return { kind: 'agrees', message: `the stream's cadence agrees with ${e.source} again: ${seconds(blockTimeMs)} blocks with ${perBlock} flashblocks each` };
    }
    return null;
  }

  private describe(blockTimeMs: number, perBlock: number, expectedPerBlock: number): string {
    const e = this.expect;
    // N intervals give N or N + 1 flashblocks: the N that divides the block time evenly (5 of 1000 ms, not 6).
    const intervals = blockTimeMs % perBlock !== 0 && perBlock > 1 && blockTimeMs % (perBlock - 1) === 0 ? perBlock - 1 : perBlock;
    const intervalMs = Math.round(blockTimeMs / intervals);
    const fits = PRESETS.filter((p) => p.blockTimeMs === Math.round(blockTimeMs) && (p.flashblocksPerBlock === perBlock || p.flashblocksPerBlock === perBlock - 1)).map((p) => p.name);
    const chain = fits.length > 0 ? `--chain ${fits.length === 1 ? fits[0] : `<${fits.join('|')}>`} if the stream is that chain's, or ` : '';
    return (
      `the stream's cadence contradicts ${e.source}: its blocks come every ${seconds(blockTimeMs)} with ${perBlock} flashblocks each ` +
      `(newest ${this.blockTimes.length} blocks), where the daemon expects ${seconds(e.blockTimeMs)} blocks of ${expectedPerBlock} ` +
      `flashblock intervals (${e.flashblockIntervalMs} ms), and times flashblocks (budget metrics, lateness, stale-head rules) by that. ` +
      `To fix it: ${chain}--block-time-ms ${Math.round(blockTimeMs)} --flashblock-interval-ms ${intervalMs}`
    );
  }
}

/** 1000 → "1 s", 2500 → "2.5 s", 200 → "0.2 s". */
function seconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(3))} s`;
}
