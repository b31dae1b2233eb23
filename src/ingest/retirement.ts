// Whether the chain still streams flashblocks: its preset says they were retired, or no upstream delivered a frame for
// --upstream-absent-ms. Pure (times are passed in); the daemon logs, counts and settles the reconnects on its verdicts.
import { flashblocksRetired, utcMinute, type ChainPreset } from '../chain/presets.js';

/** Why flashblocks are considered gone (the `reason` label of flashblocksd_upstream_retired). */
export const RETIRED_REASONS = ['chain_retired', 'upstream_absent'] as const;
export type RetiredReason = (typeof RETIRED_REASONS)[number];

/** The verdict while flashblocks are gone. */
export interface Retirement {
  readonly reason: RetiredReason;
  /** Unix ms since when (the chain's retirement, or the last frame / start of watching). */
  readonly sinceUnixMs: number;
  /** One line for the operator: what happened, since when, what to do. */
  readonly message: string;
}

export interface RetirementOptions {
  preset: ChainPreset | null;
  /** 0 = never conclude from silence. */
  absentMs: number;
  /** The reconnect cap the pool settles at, named in the message. */
  backoffMaxMs: number;
}

/** What changed on a check or a frame: entered (log it once), left (log that it is back), or nothing. */
export type RetirementChange = { kind: 'entered'; retirement: Retirement } | { kind: 'left'; after: Retirement } | null;

/**
 * Watches for a chain that stopped streaming. `check(nowUnixMs)` on start and then periodically; `frame(nowUnixMs)` for
 * every upstream frame (one comparison on the hot path). A frame ends either verdict: someone still streams.
 */
export class RetirementWatch {
  private lastFrameUnixMs: number;
  private current: Retirement | null = null;
  /** A frame arrived since start: the preset's retirement no longer applies (someone streams), only silence does. */
  private sawFrame = false;

  constructor(
    private opts: RetirementOptions,
    startUnixMs: number,
  ) {
    this.lastFrameUnixMs = startUnixMs;
  }

  /** The chain was learned (or changed) after start-up: its preset's retirement is judged from the next check. */
  setPreset(preset: ChainPreset | null): void {
    this.opts = { ...this.opts, preset };
  }

  /** The verdict now; null while the chain streams (or may). */
  get retirement(): Retirement | null {
    return this.current;
  }

  /** Re-judges at `nowUnixMs`; returns the change, if any. */
  check(nowUnixMs: number): RetirementChange {
    if (this.current !== null) return null;
    const p = this.opts.preset;
    const cap = `reconnects now wait ${this.opts.backoffMaxMs} ms (--backoff-max-ms)`;
    if (p !== null && !this.sawFrame && flashblocksRetired(p, nowUnixMs / 1000)) {
      const until = p.flashblocks.untilSec as number;
      this.current = {
        reason: 'chain_retired',
        sinceUnixMs: until * 1000,
        message:
          `${p.title} (chain ${p.chainId}) retired flashblocks on ${utcMinute(until)}: the upstream will not stream again, ` +
          `pending answers as latest, ${cap}. What to do: ${p.flashblocks.note.replace(/^.*?Base's guidance: /, "Base's guidance: ")}`,
      };
      return { kind: 'entered', retirement: this.current };
    }
    const absent = this.opts.absentMs;
    if (absent > 0 && nowUnixMs - this.lastFrameUnixMs >= absent) {
      this.current = {
        reason: 'upstream_absent',
        sinceUnixMs: this.lastFrameUnixMs,
        message:
          `no flashblock from any upstream for ${Math.round(absent / 1000)} s (since ${new Date(this.lastFrameUnixMs).toISOString()}): ` +
          `the chain may have stopped streaming flashblocks; pending answers as latest, ${cap}. What to do: check --flashblocks-url ` +
          'with the chain operator; if the chain retired flashblocks, run with --flashblocks-enabled false (pure proxy) or remove flashblocksd',
      };
      return { kind: 'entered', retirement: this.current };
    }
    return null;
  }

  /** A frame arrived at `nowUnixMs`: flashblocks flow (again). */
  frame(nowUnixMs: number): RetirementChange {
    this.lastFrameUnixMs = nowUnixMs;
    if (this.current === null) return null;
    this.sawFrame = true;
    const after = this.current;
    this.current = null;
    return { kind: 'left', after };
  }
}
