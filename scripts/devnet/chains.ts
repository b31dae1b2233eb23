// Which chain the devnet plays: a chain preset (src/chain/presets.ts) turned into the devnet's settings (chain id,
// block time, flashblock interval, stream dialect) and the OP fork its anvil runs, so a daemon pointed at the devnet
// learns the chain from the node's eth_chainId exactly as at the real one. Pure: no I/O, the clock passed in.
import { forkAt, OP_FORKS, type ChainPreset, type OpFork } from '../../src/chain/presets.js';
import type { StreamDialect } from './sequencer.js';

/** The newest OP fork anvil 1.7 runs (`--hardfork karst` aborts it: "unimplemented Karst"). */
const ANVIL_NEWEST_FORK: OpFork = 'jovian';
/** The oldest fork the devnet runs: its blocks open with an Isthmus L1-info deposit (Jovian's from jovian on). */
const DEVNET_OLDEST_FORK: OpFork = 'isthmus';

/** The devnet's settings for one chain preset. */
export interface DevnetChain {
  readonly preset: ChainPreset;
  readonly chainId: number;
  readonly blockTimeMs: number;
  readonly flashblockMs: number;
  /** The stream's default dialect; null for the devnet's own preset (its default shape, README "chains"). */
  readonly dialect: StreamDialect | null;
  /** The fork anvil runs. */
  readonly hardfork: OpFork;
  /** The fork the chain runs now by its schedule: what a daemon on `--execution-hardfork auto` executes under. */
  readonly chainFork: OpFork;
  /** When anvil cannot run `chainFork`: one sentence on why it runs `hardfork` instead and what differs. */
  readonly forkNote: string | null;
}

/** What karst changes that jovian lacks (op-revm: karst is Osaka, jovian Prague), as the devnet's banner says it. */
const KARST_GAP =
  "karst (Osaka) adds only what the devnet's traffic never uses: the CLZ opcode, MODEXP and P256VERIFY repricing and " +
  "limits, a 2^24 per-transaction gas cap; a transaction of yours that uses them runs differently on the devnet's node " +
  "than in flashblocksd's pending execution";

const rank = (f: OpFork): number => OP_FORKS.indexOf(f);

/** The devnet's settings to play `preset` at Unix time `nowSec` (the chain's fork schedule is read at that time). */
export function devnetChain(preset: ChainPreset, nowSec: number): DevnetChain {
  const chainFork = forkAt(preset, nowSec);
  let hardfork = chainFork;
  let forkNote: string | null = null;
  if (rank(chainFork) > rank(ANVIL_NEWEST_FORK)) {
    hardfork = ANVIL_NEWEST_FORK;
    forkNote = `${preset.title} runs ${chainFork} now, which anvil 1.7 cannot run; ${chainFork === 'karst' ? KARST_GAP : `${chainFork}'s changes are missing on the devnet's node`}`;
  } else if (rank(chainFork) < rank(DEVNET_OLDEST_FORK)) {
    hardfork = DEVNET_OLDEST_FORK;
    forkNote = `${preset.title} runs ${chainFork} now; the devnet runs ${hardfork} at the least (its blocks open with an Isthmus L1-info deposit)`;
  }
  return {
    preset,
    chainId: preset.chainId,
    blockTimeMs: preset.blockTimeMs,
    flashblockMs: preset.flashblockIntervalMs,
    dialect: preset.name === 'devnet' ? null : preset.dialect,
    hardfork,
    chainFork,
    forkNote,
  };
}
