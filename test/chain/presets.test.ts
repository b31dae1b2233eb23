// Chain presets: lookups by id and name, fork boundaries exact at the activation second (karst included), the next
// fork, the fork lists the config and the metrics keep, timing and retirement.
import t from 'tap';
import {
  BASE_DENIM_MAINNET_SEC, chainTiming, flashblocksRetired, forkAt, nextFork, OP_FORKS, PRESET_NAMES, PRESETS, presetByChainId,
  presetByName, SCHEDULED_FORKS, utcMinute, type ChainPreset, type OpFork,
} from '../../src/chain/presets.js';
import { OP_HARDFORKS } from '../../src/config.js';
import { EXECUTION_SPECS } from '../../src/metrics/metrics.js';

const get = (name: string): ChainPreset => {
  const p = presetByName(name);
  if (p === null) throw new Error(`no preset ${name}`);
  return p;
};

t.test('every chain is found by its id and by its name', async (t) => {
  const table: [number, string, number, number, number, string][] = [
    // id, name, block ms, interval ms, per block, dialect
    [10, 'op-mainnet', 2000, 200, 10, 'op-subblocks'],
    [11155420, 'op-sepolia', 2000, 200, 10, 'op-subblocks'],
    [130, 'unichain', 1000, 200, 5, 'op-rbuilder'],
    [1301, 'unichain-sepolia', 1000, 200, 5, 'op-rbuilder'],
    [196, 'xlayer', 1000, 200, 5, 'xlayer'],
    [1952, 'xlayer-testnet', 1000, 200, 5, 'xlayer'],
    [8453, 'base', 2000, 200, 10, 'base'],
    [84532, 'base-sepolia', 2000, 200, 10, 'base'],
    [901, 'devnet', 2000, 200, 10, 'base'],
  ];
  t.equal(PRESETS.length, table.length, 'no preset without a row here');
  for (const [id, name, block, interval, per, dialect] of table) {
    const p = presetByChainId(id);
    t.equal(p?.name, name, `chain ${id} is ${name}`);
    t.equal(presetByName(name), p, `${name} by name`);
    t.same([p?.blockTimeMs, p?.flashblockIntervalMs, p?.flashblocksPerBlock, p?.dialect], [block, interval, per, dialect], name);
  }
  t.equal(presetByName(' Base '), get('base'), 'names are trimmed and case-insensitive');
  t.equal(presetByChainId(1), null, 'Ethereum mainnet has no preset');
  t.equal(presetByName('auto'), null, 'auto is no preset');
  t.same(PRESET_NAMES, table.map((r) => r[1]));
});

t.test('forks activate exactly at their second', async (t) => {
  const rows: [string, number, OpFork][] = [
    ['op-mainnet', 0, 'regolith'],
    ['op-mainnet', 1704992400, 'regolith'],
    ['op-mainnet', 1704992401, 'canyon'],
    ['op-mainnet', 1708560000, 'canyon'], // delta changes no execution: still canyon
    ['op-mainnet', 1710374400, 'canyon'],
    ['op-mainnet', 1710374401, 'ecotone'],
    ['op-mainnet', 1720627201, 'fjord'],
    ['op-mainnet', 1726070400, 'fjord'],
    ['op-mainnet', 1726070401, 'granite'],
    ['op-mainnet', 1736445601, 'holocene'],
    ['op-mainnet', 1746806400, 'holocene'],
    ['op-mainnet', 1746806401, 'isthmus'],
    ['op-mainnet', 1764691200, 'isthmus'],
    ['op-mainnet', 1764691201, 'jovian'],
    ['op-mainnet', 1783526400, 'jovian'],
    ['op-mainnet', 1783526401, 'karst'], // 2026-07-08 16:00:01 UTC
    ['op-mainnet', 4_000_000_000, 'karst'],
    ['op-sepolia', 1744905599, 'holocene'],
    ['op-sepolia', 1744905600, 'isthmus'],
    ['op-sepolia', 1763568001, 'jovian'],
    ['op-sepolia', 1781712000, 'jovian'],
    ['op-sepolia', 1781712001, 'karst'], // 2026-06-17 16:00:01 UTC
    ['unichain', 0, 'granite'],
    ['unichain', 1736445600, 'granite'],
    ['unichain', 1736445601, 'holocene'],
    ['unichain', 1764691201, 'jovian'],
    ['unichain', 1783526400, 'jovian'],
    ['unichain', 1783526401, 'karst'],
    ['unichain-sepolia', 1734559199, 'granite'],
    ['unichain-sepolia', 1734559200, 'holocene'],
    ['unichain-sepolia', 1781712000, 'jovian'],
    ['unichain-sepolia', 1781712001, 'karst'],
    ['xlayer', 0, 'isthmus'],
    ['xlayer', 1764691200, 'isthmus'],
    ['xlayer', 1764691201, 'jovian'],
    ['xlayer', 4_000_000_000, 'jovian'], // X Layer schedules no karst
    ['xlayer-testnet', 1764327599, 'isthmus'],
    ['xlayer-testnet', 1764327600, 'jovian'],
    ['xlayer-testnet', 4_000_000_000, 'jovian'],
    ['base', 1764691201, 'jovian'],
    ['base', 4_000_000_000, 'jovian'], // Base's karst time is not known (null)
    ['base-sepolia', 1763568000, 'isthmus'],
    ['base-sepolia', 4_000_000_000, 'jovian'],
    ['devnet', 0, 'isthmus'],
    ['devnet', 4_000_000_000, 'isthmus'],
  ];
  for (const [name, ts, fork] of rows) t.equal(forkAt(get(name), ts), fork, `${name} at ${ts}`);
});

t.test('karst is a scheduled fork like the others: the next fork before it, none after it', async (t) => {
  t.same(nextFork(get('op-mainnet'), 1764691201), { fork: 'karst', sec: 1783526401 });
  t.same(nextFork(get('op-mainnet'), 1783526400), { fork: 'karst', sec: 1783526401 });
  t.equal(nextFork(get('op-mainnet'), 1783526401), null, 'nothing after karst');
  t.same(nextFork(get('unichain-sepolia'), 1770000000), { fork: 'karst', sec: 1781712001 });
  t.equal(nextFork(get('xlayer'), 1770000000), null, 'X Layer: none after jovian');
  t.equal(nextFork(get('base'), 1770000000), null, "Base's karst is not known");
  t.ok(get('base').unconfirmed.includes('forks.karst'), "and is marked unconfirmed");
  t.same(nextFork(get('op-sepolia'), 1744905599), { fork: 'isthmus', sec: 1744905600 });
  t.notOk('laterForks' in get('op-mainnet'), 'no special case beside the schedule');
});

t.test('the fork names agree: presets, --execution-hardfork values and the spec metric label', async (t) => {
  t.same([...OP_HARDFORKS], [...OP_FORKS], 'config OP_HARDFORKS = OP_FORKS');
  t.same([...EXECUTION_SPECS], [...OP_FORKS], 'metrics EXECUTION_SPECS = OP_FORKS');
  t.same([...SCHEDULED_FORKS.filter((f) => f !== 'delta')], OP_FORKS.slice(1), 'every OpFork but bedrock is scheduled (delta changes no execution)');
  t.equal(OP_FORKS.at(-1), 'karst');
});

t.test('a schedule never goes backwards and names every fork', async (t) => {
  for (const p of PRESETS) {
    let prev = -1;
    for (const f of SCHEDULED_FORKS) {
      const at = p.forks[f];
      if (at === null) {
        prev = Infinity;
        continue;
      }
      t.ok(at >= prev, `${p.name}: ${f} (${at}) not before the fork before it`);
      prev = at;
    }
  }
});

t.test('Base and Base Sepolia retired flashblocks at Denim; the others stream', async (t) => {
  const base = get('base');
  t.equal(base.flashblocks.streams, false);
  t.equal(utcMinute(BASE_DENIM_MAINNET_SEC), '2026-11-05 18:00 UTC');
  t.equal(flashblocksRetired(base, BASE_DENIM_MAINNET_SEC - 1), false, 'still streaming the second before');
  t.equal(flashblocksRetired(base, BASE_DENIM_MAINNET_SEC), true, 'retired at the activation second');
  t.equal(utcMinute(get('base-sepolia').flashblocks.untilSec!), '2026-10-21 18:00 UTC');
  for (const p of PRESETS.filter((x) => !x.name.startsWith('base'))) {
    t.equal(p.flashblocks.streams, true, `${p.name} streams`);
    t.equal(flashblocksRetired(p, 4_000_000_000), false, `${p.name} not retired`);
  }
});

t.test('timing: an explicit setting wins, then the preset, then 2 s / 200 ms', async (t) => {
  const none = { blockTimeMs: 0, flashblockIntervalMs: 0 };
  t.same(chainTiming(get('unichain'), none), { blockTimeMs: 1000, flashblockIntervalMs: 200 });
  t.same(chainTiming(get('unichain'), { blockTimeMs: 2000, flashblockIntervalMs: 0 }), { blockTimeMs: 2000, flashblockIntervalMs: 200 });
  t.same(chainTiming(null, none), { blockTimeMs: 2000, flashblockIntervalMs: 200 });
  t.same(chainTiming(null, { blockTimeMs: 0, flashblockIntervalMs: 250 }), { blockTimeMs: 2000, flashblockIntervalMs: 250 });
});

t.test('--chain help names every preset', async (t) => {
  const { SETTINGS } = await import('../../src/config.js');
  const help = SETTINGS.find((s) => s.flag === 'chain')?.help ?? '';
  for (const name of PRESET_NAMES) t.match(help, new RegExp(`\\b${name}\\b`), name);
});
