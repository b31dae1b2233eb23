// The chains flashblocksd knows: block time, flashblock interval, OP hardfork schedule, stream dialect and whether
// the chain streams flashblocks today. Pure data and lookups (no I/O, no clock); every value is cited in SOURCES.md.

/**
 * OP-stack hardforks that change execution, oldest first (delta changed only batch derivation, so it has no entry);
 * each name is an op-revm spec the native engine runs (native/src/spec.rs).
 */
export const OP_FORKS = ['bedrock', 'regolith', 'canyon', 'ecotone', 'fjord', 'granite', 'holocene', 'isthmus', 'jovian', 'karst'] as const;
export type OpFork = (typeof OP_FORKS)[number];

/** The forks a schedule gives a time for, oldest first (bedrock is the chain's genesis and has none). */
export const SCHEDULED_FORKS = ['regolith', 'canyon', 'delta', 'ecotone', 'fjord', 'granite', 'holocene', 'isthmus', 'jovian', 'karst'] as const;
export type ScheduledFork = (typeof SCHEDULED_FORKS)[number];

/** The stream format a chain's builder sends (src/ingest/frame.ts decodes them). */
export type StreamDialect = 'op-rbuilder' | 'op-subblocks' | 'xlayer' | 'base';

/** Whether and when a chain streams flashblocks. Times are Unix seconds; null = not known or not applicable. */
export interface FlashblocksStatus {
  /** True while the chain's sequencer publishes flashblocks (false once `untilSec` has passed for a retired chain). */
  readonly streams: boolean;
  readonly sinceSec: number | null;
  /** The end of the stream for a chain that retired flashblocks. */
  readonly untilSec: number | null;
  /** One line for people: what the chain streams, or why it stopped and what to do. */
  readonly note: string;
}

/** One chain. */
export interface ChainPreset {
  /** The --chain name (lower case, dashes). */
  readonly name: string;
  /** How people write it. */
  readonly title: string;
  readonly chainId: number;
  readonly blockTimeMs: number;
  readonly flashblockIntervalMs: number;
  /** blockTimeMs / flashblockIntervalMs: index 0 (deposits, system txs) plus the rest. */
  readonly flashblocksPerBlock: number;
  /** L2 block timestamp (Unix seconds) at which each fork activates; null = not scheduled on this chain (or not known). */
  readonly forks: Readonly<Record<ScheduledFork, number | null>>;
  readonly dialect: StreamDialect;
  readonly flashblocks: FlashblocksStatus;
  /** Fields no public source confirmed (see SOURCES.md); everything else is sourced. */
  readonly unconfirmed: readonly string[];
}

type Forks = Record<ScheduledFork, number | null>;

/** Every fork active from genesis up to and including `last` (the later ones unscheduled). */
function fromGenesis(last: ScheduledFork, later: Partial<Forks> = {}): Forks {
  const out = {} as Forks;
  let active = true;
  for (const f of SCHEDULED_FORKS) {
    out[f] = active ? 0 : null;
    if (f === last) active = false;
  }
  return { ...out, ...later };
}

/** karst_time in the registry's mainnet op.toml / unichain.toml (2026-07-08 16:00:01 UTC). */
const KARST_MAINNET_SEC = 1783526401;
/** karst_time in the registry's sepolia op.toml / unichain.toml (2026-06-17 16:00:01 UTC). */
const KARST_SEPOLIA_SEC = 1781712001;

// Superchain registry, superchain/configs/mainnet/op.toml (Base: mainnet/base.toml before its removal, so its karst
// is not known: null). Regolith is not in the TOML files: the registry activates it at genesis
// (ops/internal/manage/validation.go).
const OP_MAINNET_FORKS: Forks = {
  regolith: 0, canyon: 1704992401, delta: 1708560000, ecotone: 1710374401, fjord: 1720627201, granite: 1726070401,
  holocene: 1736445601, isthmus: 1746806401, jovian: 1764691201, karst: KARST_MAINNET_SEC,
};
// superchain/configs/sepolia/op.toml (and sepolia/base.toml before its removal): the same Sepolia schedule.
const OP_SEPOLIA_FORKS: Forks = {
  regolith: 0, canyon: 1699981200, delta: 1703203200, ecotone: 1708534800, fjord: 1716998400, granite: 1723478400,
  holocene: 1732633200, isthmus: 1744905600, jovian: 1763568001, karst: KARST_SEPOLIA_SEC,
};

/** Base's "Denim" (200 ms canonical blocks, flashblocks retired), docs.base.org: 2026-11-05 18:00 UTC. */
export const BASE_DENIM_MAINNET_SEC = 1793901600;
/** Denim on Base Sepolia: 2026-10-21 18:00 UTC. */
export const BASE_DENIM_SEPOLIA_SEC = 1792605600;

const BASE_NOTE =
  "retired flashblocks with its Denim upgrade (200 ms canonical blocks); Base's guidance: `pending` has no equivalent any more — " +
  'point clients at latest (the node), and run flashblocksd with --flashblocks-enabled false or remove it';

function preset(p: Omit<ChainPreset, 'flashblocksPerBlock'>): ChainPreset {
  return Object.freeze({ ...p, flashblocksPerBlock: Math.round(p.blockTimeMs / p.flashblockIntervalMs), forks: Object.freeze(p.forks) });
}

/** Every known chain, mainnets first. */
export const PRESETS: readonly ChainPreset[] = Object.freeze([
  preset({
    name: 'op-mainnet', title: 'OP Mainnet', chainId: 10, blockTimeMs: 2000, flashblockIntervalMs: 200,
    forks: OP_MAINNET_FORKS, dialect: 'op-subblocks',
    // 200 ms since 2026-08-31 (250 ms before); the day the 250 ms stream began is not confirmed ("in 2026").
    flashblocks: { streams: true, sinceSec: null, untilSec: null, note: '"subblocks": 200 ms since 2026-08-31 (250 ms before); no public stream, node operators get it from the sequencer' },
    unconfirmed: ['flashblocks.sinceSec'],
  }),
  preset({
    name: 'op-sepolia', title: 'OP Sepolia', chainId: 11155420, blockTimeMs: 2000, flashblockIntervalMs: 200,
    forks: OP_SEPOLIA_FORKS, dialect: 'op-subblocks',
    // Providers list flashblocks on OP Sepolia; its interval and dialect are assumed to follow OP Mainnet's.
    flashblocks: { streams: true, sinceSec: null, untilSec: null, note: 'flashblocks offered by RPC providers; interval and format assumed as on OP Mainnet' },
    unconfirmed: ['flashblockIntervalMs', 'dialect', 'flashblocks.sinceSec'],
  }),
  preset({
    name: 'unichain', title: 'Unichain', chainId: 130, blockTimeMs: 1000, flashblockIntervalMs: 200,
    forks: { ...fromGenesis('granite'), holocene: 1736445601, isthmus: 1746806401, jovian: 1764691201, karst: KARST_MAINNET_SEC },
    dialect: 'op-rbuilder',
    flashblocks: { streams: true, sinceSec: null, untilSec: null, note: 'public brotli stream; a builder transaction may open every flashblock' },
    unconfirmed: ['flashblocks.sinceSec'],
  }),
  preset({
    name: 'unichain-sepolia', title: 'Unichain Sepolia', chainId: 1301, blockTimeMs: 1000, flashblockIntervalMs: 200,
    forks: { ...fromGenesis('granite'), holocene: 1734559200, isthmus: 1744905600, jovian: 1763568001, karst: KARST_SEPOLIA_SEC },
    dialect: 'op-rbuilder',
    flashblocks: { streams: true, sinceSec: null, untilSec: null, note: 'public stream, as on Unichain' },
    unconfirmed: ['flashblocks.sinceSec'],
  }),
  preset({
    name: 'xlayer', title: 'X Layer', chainId: 196, blockTimeMs: 1000, flashblockIntervalMs: 200,
    // On Jovian; no karst scheduled.
    forks: fromGenesis('isthmus', { jovian: 1764691201 }), dialect: 'xlayer',
    // "since 2026-01": month only, so no second is claimed.
    flashblocks: { streams: true, sinceSec: null, untilSec: null, note: 'since 2026-01; receipts and balances optional, an EIP-7928 access list in metadata' },
    unconfirmed: ['flashblockIntervalMs', 'flashblocks.sinceSec'],
  }),
  preset({
    name: 'xlayer-testnet', title: 'X Layer Testnet', chainId: 1952, blockTimeMs: 1000, flashblockIntervalMs: 200,
    forks: fromGenesis('isthmus', { jovian: 1764327600 }), dialect: 'xlayer',
    flashblocks: { streams: true, sinceSec: null, untilSec: null, note: 'assumed as on X Layer (no public statement found)' },
    unconfirmed: ['flashblockIntervalMs', 'flashblocks.streams', 'flashblocks.sinceSec'],
  }),
  preset({
    name: 'base', title: 'Base', chainId: 8453, blockTimeMs: 2000, flashblockIntervalMs: 200,
    forks: { ...OP_MAINNET_FORKS, karst: null }, dialect: 'base',
    // Block time and interval as while it streamed; since Denim every block is a 200 ms canonical block.
    flashblocks: { streams: false, sinceSec: null, untilSec: BASE_DENIM_MAINNET_SEC, note: `streamed from 2025-07 until 2026-11-05 18:00 UTC; ${BASE_NOTE}` },
    unconfirmed: ['flashblocks.sinceSec', 'forks.karst'],
  }),
  preset({
    name: 'base-sepolia', title: 'Base Sepolia', chainId: 84532, blockTimeMs: 2000, flashblockIntervalMs: 200,
    forks: { ...OP_SEPOLIA_FORKS, karst: null }, dialect: 'base',
    flashblocks: { streams: false, sinceSec: null, untilSec: BASE_DENIM_SEPOLIA_SEC, note: `streamed until 2026-10-21 18:00 UTC; ${BASE_NOTE}` },
    unconfirmed: ['flashblocks.sinceSec', 'forks.karst'],
  }),
  preset({
    // scripts/devnet: anvil --optimism (every OP fork from genesis up to isthmus) and its sequencer; the frames are
    // the shape Base sent (externally tagged receipts; ?receipts=internal gives op-rbuilder's).
    name: 'devnet', title: 'Devnet', chainId: 901, blockTimeMs: 2000, flashblockIntervalMs: 200,
    forks: fromGenesis('isthmus'), dialect: 'base',
    flashblocks: { streams: true, sinceSec: 0, untilSec: null, note: 'scripts/devnet: anvil and a flashblocks sequencer on this machine' },
    unconfirmed: [],
  }),
]);

const BY_ID = new Map(PRESETS.map((p) => [p.chainId, p]));
const BY_NAME = new Map(PRESETS.map((p) => [p.name, p]));

/** The preset of chain id `id`, or null for a chain flashblocksd has no preset for. */
export function presetByChainId(id: number): ChainPreset | null {
  return BY_ID.get(id) ?? null;
}

/** The preset called `name` (as --chain takes it, case-insensitive), or null. */
export function presetByName(name: string): ChainPreset | null {
  return BY_NAME.get(name.trim().toLowerCase()) ?? null;
}

/** The --chain names, for help and error messages. */
export const PRESET_NAMES: readonly string[] = Object.freeze(PRESETS.map((p) => p.name));

/** OpForks in activation order after bedrock (each is its own schedule key). */
const FORK_ORDER = OP_FORKS.filter((f): f is Exclude<OpFork, 'bedrock'> => f !== 'bedrock');

/**
 * The newest fork active at L2 timestamp `timestampSec` (a fork is active from its activation second on). A chain's
 * forks activate in order, so the newest scheduled fork at or before the timestamp wins; bedrock when none is.
 */
export function forkAt(preset: ChainPreset, timestampSec: number): OpFork {
  let out: OpFork = 'bedrock';
  for (const f of FORK_ORDER) {
    const at = preset.forks[f];
    if (at !== null && at <= timestampSec) out = f;
  }
  return out;
}

/** The first fork `preset` schedules after L2 timestamp `timestampSec`, with its second; null when none is scheduled. */
export function nextFork(preset: ChainPreset, timestampSec: number): { fork: OpFork; sec: number } | null {
  let out: { fork: OpFork; sec: number } | null = null;
  for (const f of FORK_ORDER) {
    const at = preset.forks[f];
    if (at !== null && at > timestampSec && (out === null || at < out.sec)) out = { fork: f, sec: at };
  }
  return out;
}

/** Whether `preset`'s chain has stopped streaming flashblocks at Unix time `nowSec`. */
export function flashblocksRetired(preset: ChainPreset, nowSec: number): boolean {
  const until = preset.flashblocks.untilSec;
  return until !== null && nowSec >= until;
}

/**
 * For a chain that has retired flashblocks at `nowSec`: one sentence saying so and what to do (for setup and verify);
 * null while it streams.
 */
export function retirementNotice(preset: ChainPreset, nowSec: number): string | null {
  if (!flashblocksRetired(preset, nowSec)) return null;
  return `${preset.title} (chain ${preset.chainId}) ${preset.flashblocks.note}`;
}

/** `sec` as "2026-11-05 18:00 UTC". */
export function utcMinute(sec: number): string {
  return new Date(sec * 1000).toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
}

/** How the chain was chosen, for the start-up log line. */
export type ChainChoice =
  | { kind: 'flag'; preset: ChainPreset }
  | { kind: 'node'; preset: ChainPreset }
  | { kind: 'unknown'; chainId: number }
  | { kind: 'unavailable'; detail: string };

/** The preset a choice found, or null. */
export function choicePreset(c: ChainChoice): ChainPreset | null {
  return c.kind === 'flag' || c.kind === 'node' ? c.preset : null;
}

/**
 * Block time and flashblock interval to run with: an explicit setting (non-zero) wins, then the preset, then the
 * historical defaults (2 s blocks, 200 ms flashblocks).
 */
export function chainTiming(
  preset: ChainPreset | null,
  explicit: { blockTimeMs: number; flashblockIntervalMs: number },
): { blockTimeMs: number; flashblockIntervalMs: number } {
  return {
    blockTimeMs: explicit.blockTimeMs > 0 ? explicit.blockTimeMs : (preset?.blockTimeMs ?? 2000),
    flashblockIntervalMs: explicit.flashblockIntervalMs > 0 ? explicit.flashblockIntervalMs : (preset?.flashblockIntervalMs ?? 200),
  };
}
