// Chain presets: lookups by id and name, fork boundaries exact at the activation second, timing and retirement.
import t from 'tap';
import {
  BASE_DENIM_MAINNET_SEC, chainTiming, flashblocksRetired, forkAt, PRESET_NAMES, PRESETS, presetByChainId, presetByName,
  SCHEDULED_FORKS, utcMinute, type ChainPreset, type OpFork,
} from '../../src/chain/presets.js';

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
    ['op-mainnet', 1783526401, 'jovian'], // karst is beyond OpFork: reported as the newest known
    ['op-sepolia', 1744905599, 'holocene'],
    ['op-sepolia', 1744905600, 'isthmus'],
    ['op-sepolia', 1763568001, 'jovian'],
    ['unichain', 0, 'granite'],
    ['unichain', 1736445600, 'granite'],
    ['unichain', 1736445601, 'holocene'],
    ['unichain', 1764691201, 'jovian'],
    ['unichain-sepolia', 1734559199, 'granite'],
    ['unichain-sepolia', 1734559200, 'holocene'],
    ['xlayer', 0, 'isthmus'],
    ['xlayer', 1764691200, 'isthmus'],
    ['xlayer', 1764691201, 'jovian'],
    ['xlayer-testnet', 1764327599, 'isthmus'],
    ['xlayer-testnet', 1764327600, 'jovian'],
    ['base', 1764691201, 'jovian'],
    ['base-sepolia', 1763568000, 'isthmus'],
    ['devnet', 0, 'isthmus'],
    ['devnet', 4_000_000_000, 'isthmus'],
  ];
  for (const [name, ts, fork] of rows) t.equal(forkAt(get(name), ts), fork, `${name} at ${ts}`);
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
