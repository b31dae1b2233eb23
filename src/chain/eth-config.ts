// What a node's EIP-7910 `eth_config` answer says about the OP fork it runs: the forks its current config allows, and
// the fork only when exactly one remains. Pure (the daemon asks the node); never a guess.
import type { OpFork } from './presets.js';

/** The fork `eth_config` names, or why it names none (a sentence for the start-up log). */
export type EthConfigFork = { ok: true; fork: OpFork } | { ok: false; why: string };

/** The OP forks of each L1 level an EIP-7910 config can show, with how the level shows. */
const LEVELS: readonly { level: string; forks: readonly OpFork[] }[] = [
  // EIP-2935's history contract (Prague; on OP chains from Isthmus on): Karst (Osaka) adds no precompile or system
  // contract an OP config shows, so isthmus, jovian and karst look alike.
  { level: 'Prague-level (HISTORY_STORAGE_ADDRESS)', forks: ['isthmus', 'jovian', 'karst'] },
  // EIP-4788's beacon roots contract alone (Cancun; OP from Ecotone on); P256VERIFY (RIP-7212) came with Fjord.
  { level: 'Cancun-level (BEACON_ROOTS_ADDRESS) with P256VERIFY', forks: ['fjord', 'granite', 'holocene'] },
  { level: 'Cancun-level (BEACON_ROOTS_ADDRESS)', forks: ['ecotone', 'fjord', 'granite', 'holocene'] },
  { level: 'pre-Cancun (no system contract)', forks: ['bedrock', 'regolith', 'canyon'] },
];

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * The OP fork a node's `eth_config` result names. EIP-7910 carries no fork name: its `current` object lists
 * precompiles and system contracts, which tell the L1 level; the fork is named only when that level leaves one OP fork.
 * (A node that leaves out P256VERIFY, as anvil 1.7 does on OP chains, is only read as "Cancun-level".)
 */
export function forkFromEthConfig(result: unknown): EthConfigFork {
  if (!isRecord(result) || !isRecord(result.current)) return { ok: false, why: `eth_config answered ${JSON.stringify(result)?.slice(0, 80)}, not an EIP-7910 config` };
  const cur = result.current;
  const system = isRecord(cur.systemContracts) ? cur.systemContracts : {};
  const precompiles = isRecord(cur.precompiles) ? cur.precompiles : {};
  const level =
    'HISTORY_STORAGE_ADDRESS' in system ? LEVELS[0]! : 'BEACON_ROOTS_ADDRESS' in system ? ('P256VERIFY' in precompiles ? LEVELS[1]! : LEVELS[2]!) : LEVELS[3]!;
  if (level.forks.length === 1) return { ok: true, fork: level.forks[0]! };
  return { ok: false, why: `the node's eth_config shows a ${level.level} EVM, which is ${level.forks.join(' or ')} on an OP chain: it does not say which` };
}
