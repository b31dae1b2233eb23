// Which OP spec (op-revm name) a block is executed with: a fixed --execution-hardfork, or the chain preset's schedule.
// Pure; the daemon's engine (src/daemon.ts) and `flashblocksd check-execution` both choose it here, so a check runs a
// block under the spec the daemon would.
import { forkAt, type ChainPreset } from '../chain/presets.js';
import type { ExecutionHardfork } from '../config.js';

/**
 * The spec a block at L2 timestamp `ts` is executed with: `hardfork` when it names one, else the chain's schedule
 * (karst included). Throws for `auto` without a preset: such a chain is never executed under a guessed fork.
 */
export function executionSpecAt(hardfork: ExecutionHardfork, preset: ChainPreset | null): (timestampSec: number) => string {
  if (hardfork !== 'auto') return () => hardfork;
  if (preset === null) throw new Error('the chain has no preset, so its fork is not known: give --execution-hardfork <fork>');
  return (ts) => forkAt(preset, ts);
}
