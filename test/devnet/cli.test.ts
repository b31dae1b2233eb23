// `npm run devnet`'s command line (scripts/devnet/cli.ts): flags over environment over the chain preset, a preset
// name accepted as a dialect, fixed ports, and a clear error for anything it cannot run with. Pure: no process.
import t, { type Test } from 'tap';
import { devnetHelp, parseDevnetArgs, type DevnetArgs, type DevnetSettings } from '../../scripts/devnet/cli.js';

/** 2026-11-28: Unichain and OP Mainnet run karst, X Layer jovian (src/chain/presets.ts). */
const NOW_SEC = 1_795_900_000;

function settings(t: Test, a: DevnetArgs): DevnetSettings {
  if (a.kind !== 'run') {
    t.fail(`expected settings, got ${JSON.stringify(a)}`);
    throw new Error('no settings');
  }
  return a.settings;
}

t.test('no flags: the devnet chain (901, 2 s blocks of 10, its default shape, isthmus), free ports', async (t) => {
  const s = settings(t, parseDevnetArgs([], {}, NOW_SEC));
  t.equal(s.chain.chainId, 901);
  t.same([s.blockTimeMs, s.flashblockMs, s.dialect, s.chain.hardfork, s.chain.forkNote], [2000, 200, null, 'isthmus', null]);
  t.same([s.nodePort, s.streamPort, s.anvilPort, s.txPerSec, s.timingOverridden], [0, 0, 0, 10, false]);
});

t.test('--chain unichain (or DEVNET_CHAIN): chain id 130, 1 s blocks of 5, op-rbuilder, anvil on jovian with a note', async (t) => {
  for (const a of [parseDevnetArgs(['--chain', 'unichain'], {}, NOW_SEC), parseDevnetArgs([], { DEVNET_CHAIN: 'unichain' }, NOW_SEC), parseDevnetArgs(['--chain=Unichain'], { DEVNET_CHAIN: 'base' }, NOW_SEC)]) {
    const s = settings(t, a);
    t.same([s.chain.chainId, s.blockTimeMs, s.flashblockMs, s.dialect, s.chain.chainFork, s.chain.hardfork], [130, 1000, 200, 'op-rbuilder', 'karst', 'jovian']);
    t.match(s.chain.forkNote, /Unichain runs karst now, which anvil 1\.7 cannot run/);
  }
  const x = settings(t, parseDevnetArgs(['--chain', 'xlayer'], {}, NOW_SEC));
  t.same([x.chain.chainId, x.dialect, x.chain.hardfork, x.chain.forkNote], [196, 'xlayer', 'jovian', null], 'X Layer runs jovian: anvil runs it as is');
});

t.test('--dialect takes a dialect or a preset name (that chain\'s dialect); a flag wins over its variable', async (t) => {
  const cases: [string[], Record<string, string>, string | null][] = [
    [['--dialect', 'unichain'], {}, 'op-rbuilder'],
    [['--dialect', 'op-mainnet'], {}, 'op-subblocks'],
    [['--dialect', 'xlayer'], {}, 'xlayer'],
    [['--dialect', 'devnet'], {}, null],
    [[], { DEVNET_DIALECT: 'base' }, 'base'],
    [['--dialect=op-subblocks'], { DEVNET_DIALECT: 'base' }, 'op-subblocks'],
    [['--chain', 'unichain', '--dialect', 'xlayer'], {}, 'xlayer'],
  ];
  for (const [argv, env, dialect] of cases) t.equal(settings(t, parseDevnetArgs(argv, env, NOW_SEC)).dialect, dialect, argv.join(' ') || JSON.stringify(env));
});

t.test('fixed ports by flag or variable; timing overrides are flagged for the banner', async (t) => {
  const s = settings(t, parseDevnetArgs(['--node-port', '8545', '--stream-port=8546'], { DEVNET_ANVIL_PORT: '8547', DEVNET_NODE_PORT: '9999' }, NOW_SEC));
  t.same([s.nodePort, s.streamPort, s.anvilPort], [8545, 8546, 8547]);
  const o = settings(t, parseDevnetArgs(['--chain', 'unichain', '--block-time-ms', '2000'], { DEVNET_TX_PER_SEC: '0.5', DEVNET_BROTLI: '1' }, NOW_SEC));
  t.same([o.blockTimeMs, o.flashblockMs, o.timingOverridden, o.txPerSec, o.brotli, o.azul], [2000, 200, true, 0.5, true, false]);
  t.equal(settings(t, parseDevnetArgs(['--azul'], {}, NOW_SEC)).azul, true, 'a switch needs no value');
});

t.test('bad input: one clear error naming the flag or variable, never settings', async (t) => {
  const cases: [string[], Record<string, string>, RegExp][] = [
    [['--chain', 'mars'], {}, /--chain "mars" is not a chain preset: one of op-mainnet, .*devnet/],
    [[], { DEVNET_CHAIN: 'mars' }, /DEVNET_CHAIN "mars" is not a chain preset/],
    [['--dialect', 'nope'], {}, /--dialect "nope": expected a dialect \(op-rbuilder, op-subblocks, xlayer, base\) or a chain preset's name/],
    [['--node-port', '70000'], {}, /--node-port 70000: a port is at most 65535/],
    [['--stream-port', 'x'], {}, /--stream-port "x": expected a whole number/],
    [[], { DEVNET_ANVIL_PORT: '-1' }, /DEVNET_ANVIL_PORT "-1": expected a whole number/],
    [['--node-port', '9000', '--anvil-port', '9000'], {}, /--node-port and --anvil-port are both 9000/],
    [['--block-time-ms', '0'], {}, /--block-time-ms "0": expected a whole number of at least 1/],
    [['--block-time-ms', '100'], {}, /the flashblock interval \(200 ms\) is longer than the block time \(100 ms\)/],
    [['--receipts', 'both'], {}, /--receipts "both": expected external or internal/],
    [[], { DEVNET_BROTLI: 'yes' }, /DEVNET_BROTLI "yes": expected 1, true, 0 or false/],
    [['--node-port'], {}, /--node-port needs a value/],
    [['--bogus'], {}, /unknown argument "--bogus"; see --help/],
    [['unichain'], {}, /unknown argument "unichain"/],
  ];
  for (const [argv, env, error] of cases) {
    const a = parseDevnetArgs(argv, env, NOW_SEC);
    t.equal(a.kind, 'error', argv.join(' ') || JSON.stringify(env));
    if (a.kind === 'error') t.match(a.message, error);
  }
  t.equal(parseDevnetArgs(['--chain', 'mars', '--help'], {}, NOW_SEC).kind, 'help', '--help wins wherever it is');
  t.equal(parseDevnetArgs(['-h'], {}, NOW_SEC).kind, 'help');
});

t.test('--help names every flag and its environment variable, and what happens when anvil dies', async (t) => {
  const help = devnetHelp();
  const pairs = [
    ['--chain', 'DEVNET_CHAIN'], ['--dialect', 'DEVNET_DIALECT'], ['--block-time-ms', 'DEVNET_BLOCK_TIME_MS'],
    ['--flashblock-interval-ms', 'DEVNET_FLASHBLOCK_MS'], ['--tx-per-sec', 'DEVNET_TX_PER_SEC'], ['--receipts', 'DEVNET_RECEIPTS'],
    ['--brotli', 'DEVNET_BROTLI'], ['--azul', 'DEVNET_AZUL'], ['--node-port', 'DEVNET_NODE_PORT'], ['--stream-port', 'DEVNET_STREAM_PORT'],
    ['--anvil-port', 'DEVNET_ANVIL_PORT'],
  ];
  for (const [flag, env] of pairs) t.match(help, new RegExp(`^  ${flag}\\b.*\\b${env}$`, 'm'), `${flag} with ${env} on one line`);
  t.match(help, /--help, -h/);
  t.match(help, /If anvil exits .* exit code 1/s);
});
