// `npm run devnet`'s command line: one table of settings (flag, environment variable, meaning), parsed once into the
// devnet's options, and the --help text made from the same table. Pure: argv and env in, options or an error out.
import { PRESET_NAMES, presetByName } from '../../src/chain/presets.js';
import { devnetChain, type DevnetChain } from './chains.js';
import { STREAM_DIALECTS, type ReceiptShape, type StreamDialect } from './sequencer.js';

/** What the devnet runs with, every setting resolved (flag, else environment, else the chain preset's or the default). */
export interface DevnetSettings {
  chain: DevnetChain;
  blockTimeMs: number;
  flashblockMs: number;
  /** Whether block time or flashblock interval differ from the chain preset's (the daemon then needs them as flags). */
  timingOverridden: boolean;
  dialect: StreamDialect | null;
  receipts: ReceiptShape;
  brotli: boolean;
  azul: boolean;
  txPerSec: number;
  /** 0: a free port. */
  nodePort: number;
  streamPort: number;
  anvilPort: number;
}

export type DevnetArgs = { kind: 'run'; settings: DevnetSettings } | { kind: 'help' } | { kind: 'error'; message: string };

type Key = 'chain' | 'dialect' | 'blockTimeMs' | 'flashblockMs' | 'txPerSec' | 'receipts' | 'brotli' | 'azul' | 'nodePort' | 'streamPort' | 'anvilPort';

interface Setting {
  key: Key;
  flag: string;
  env: string;
  /** A switch takes no value on the command line (`--brotli`); its variable takes 1/true or 0/false. */
  kind: 'string' | 'count' | 'port' | 'switch';
  value: string;
  help: string;
}

/** Every setting, in --help order. */
const SETTINGS: readonly Setting[] = [
  { key: 'chain', flag: 'chain', env: 'DEVNET_CHAIN', kind: 'string', value: '<preset>', help: `The chain to play: its chain id, block time, flashblock interval and stream dialect (one of ${PRESET_NAMES.join(', ')}; default devnet, chain 901). A daemon pointed at the devnet learns the chain from eth_chainId as at the real one` },
  { key: 'dialect', flag: 'dialect', env: 'DEVNET_DIALECT', kind: 'string', value: '<dialect|preset>', help: `The stream's dialect unless a subscriber asks ?dialect= (${STREAM_DIALECTS.join(', ')}, or a preset name for that chain's dialect); default the chain's` },
  { key: 'blockTimeMs', flag: 'block-time-ms', env: 'DEVNET_BLOCK_TIME_MS', kind: 'count', value: '<ms>', help: "Block time, overriding the chain's (a daemon then needs the same --block-time-ms)" },
  { key: 'flashblockMs', flag: 'flashblock-interval-ms', env: 'DEVNET_FLASHBLOCK_MS', kind: 'count', value: '<ms>', help: "Flashblock interval, overriding the chain's (a daemon then needs the same --flashblock-interval-ms)" },
  { key: 'txPerSec', flag: 'tx-per-sec', env: 'DEVNET_TX_PER_SEC', kind: 'count', value: '<n>', help: 'Traffic: transactions a second of the mix (default 10; 0 = none)' },
  { key: 'receipts', flag: 'receipts', env: 'DEVNET_RECEIPTS', kind: 'string', value: 'external|internal', help: 'Receipt encoding of the default shape (default external; subscribers may ask ?receipts=)' },
  { key: 'brotli', flag: 'brotli', env: 'DEVNET_BROTLI', kind: 'switch', value: '', help: 'Brotli-compressed binary frames by default (subscribers may ask ?brotli=0|1)' },
  { key: 'azul', flag: 'azul', env: 'DEVNET_AZUL', kind: 'switch', value: '', help: 'Post-Azul metadata by default: block_number and an empty access_list (subscribers may ask ?azul=0|1)' },
  { key: 'nodePort', flag: 'node-port', env: 'DEVNET_NODE_PORT', kind: 'port', value: '<port>', help: "Port of the node RPC on 127.0.0.1 (default: a free one). Fixed, an env file written by `flashblocksd setup` stays true across runs" },
  { key: 'streamPort', flag: 'stream-port', env: 'DEVNET_STREAM_PORT', kind: 'port', value: '<port>', help: 'Port of the flashblocks stream on 127.0.0.1 (default: a free one)' },
  { key: 'anvilPort', flag: 'anvil-port', env: 'DEVNET_ANVIL_PORT', kind: 'port', value: '<port>', help: "Port of anvil itself on 127.0.0.1 (default: a free one); clients should use the node RPC, which never shows a flashblock's simulated state" },
];

/** The --help text: usage, every flag with its environment variable, and what happens when anvil dies. */
export function devnetHelp(): string {
  const rows = SETTINGS.map((s) => {
    const left = `  --${s.flag}${s.value === '' ? '' : ' ' + s.value}`;
    return `${left.padEnd(40)}${s.env}\n${wrap(s.help, 6)}`;
  });
  return [
    'Usage: npm run devnet -- [flags]     (or: node dist/scripts/devnet.js [flags])',
    '',
    'Runs anvil, a flashblocks sequencer and a traffic generator on this machine, prints the node and stream URLs,',
    'and runs until Ctrl-C. A flag wins over its environment variable, which wins over the chain preset.',
    '',
    `${'Flags'.padEnd(40)}Environment variable`,
    ...rows,
    '  --help, -h',
    '      This text.',
    '',
    "If anvil exits (killed, crashed), the devnet stops with one line saying so and exit code 1: its chain is gone",
    'with it. Start it again; with fixed ports the URLs stay the same.',
  ].join('\n');
}

function wrap(text: string, indent: number, width = 116): string {
  const out: string[] = [];
  let line = '';
  for (const w of text.split(' ')) {
    if (line !== '' && indent + line.length + 1 + w.length > width) {
      out.push(' '.repeat(indent) + line);
      line = w;
    } else line = line === '' ? w : `${line} ${w}`;
  }
  if (line !== '') out.push(' '.repeat(indent) + line);
  return out.join('\n');
}

/** Parses `argv` (after the script) and `env` into the devnet's settings; never throws. `nowSec` reads the fork schedule. */
export function parseDevnetArgs(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, nowSec: number): DevnetArgs {
  const given = new Map<Key, { raw: string; from: string }>();
  for (const s of SETTINGS) {
    const v = env[s.env];
    if (v !== undefined && v !== '') given.set(s.key, { raw: v, from: s.env });
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') return { kind: 'help' };
    const m = /^--([a-z-]+)(?:=(.*))?$/s.exec(arg);
    const s = m === null ? undefined : SETTINGS.find((x) => x.flag === m[1]);
    if (m === null || s === undefined) return { kind: 'error', message: `unknown argument ${JSON.stringify(arg)}; see --help` };
    let raw = m[2];
    if (raw === undefined) {
      if (s.kind === 'switch') raw = 'true';
      else if (i + 1 < argv.length && !argv[i + 1]!.startsWith('--')) raw = argv[++i]!;
      else return { kind: 'error', message: `--${s.flag} needs a value (${s.value}); see --help` };
    }
    given.set(s.key, { raw, from: `--${s.flag}` });
  }

  const errors: string[] = [];
  const str = (k: Key): { raw: string; from: string } | undefined => given.get(k);
  const count = (k: Key, min: number, fraction = false): number | null => {
    const g = given.get(k);
    if (g === undefined) return null;
    const n = Number(g.raw);
    if (!(fraction ? /^\d+(\.\d+)?$/ : /^\d+$/).test(g.raw.trim()) || !Number.isSafeInteger(Math.floor(n)) || n < min) {
      errors.push(`${g.from} ${JSON.stringify(g.raw)}: expected a ${fraction ? '' : 'whole '}number${min > 0 ? ` of at least ${min}` : ''}`);
      return null;
    }
    return n;
  };
  const port = (k: Key): number => {
    const n = count(k, 0);
    if (n !== null && n > 65535) {
      errors.push(`${given.get(k)!.from} ${n}: a port is at most 65535`);
      return 0;
    }
    return n ?? 0;
  };
  const onOff = (k: Key): boolean => {
    const g = given.get(k);
    if (g === undefined) return false;
    const v = g.raw.trim().toLowerCase();
    if (v === '1' || v === 'true') return true;
    if (v === '0' || v === 'false') return false;
    errors.push(`${g.from} ${JSON.stringify(g.raw)}: expected 1, true, 0 or false`);
    return false;
  };

  const chainArg = str('chain');
  const preset = presetByName(chainArg?.raw ?? 'devnet');
  if (preset === null) errors.push(`${chainArg!.from} ${JSON.stringify(chainArg!.raw)} is not a chain preset: one of ${PRESET_NAMES.join(', ')}`);
  const chain = devnetChain(preset ?? presetByName('devnet')!, nowSec);

  let dialect: StreamDialect | null = chain.dialect;
  const d = str('dialect');
  if (d !== undefined) {
    const name = d.raw.trim().toLowerCase();
    const byPreset = presetByName(name);
    if ((STREAM_DIALECTS as readonly string[]).includes(name)) dialect = name as StreamDialect;
    else if (byPreset !== null) dialect = devnetChain(byPreset, nowSec).dialect;
    else errors.push(`${d.from} ${JSON.stringify(d.raw)}: expected a dialect (${STREAM_DIALECTS.join(', ')}) or a chain preset's name (${PRESET_NAMES.join(', ')})`);
  }
  const r = str('receipts');
  if (r !== undefined && r.raw !== 'internal' && r.raw !== 'external') errors.push(`${r.from} ${JSON.stringify(r.raw)}: expected external or internal`);

  const blockTimeMs = count('blockTimeMs', 1) ?? chain.blockTimeMs;
  const flashblockMs = count('flashblockMs', 1) ?? chain.flashblockMs;
  if (errors.length === 0 && flashblockMs > blockTimeMs) errors.push(`the flashblock interval (${flashblockMs} ms) is longer than the block time (${blockTimeMs} ms)`);
  const settings: DevnetSettings = {
    chain,
    blockTimeMs,
    flashblockMs,
    timingOverridden: blockTimeMs !== chain.blockTimeMs || flashblockMs !== chain.flashblockMs,
    dialect,
    receipts: r?.raw === 'internal' ? 'internal' : 'external',
    brotli: onOff('brotli'),
    azul: onOff('azul'),
    txPerSec: count('txPerSec', 0, true) ?? 10,
    nodePort: port('nodePort'),
    streamPort: port('streamPort'),
    anvilPort: port('anvilPort'),
  };
  const ports = [['--node-port', settings.nodePort], ['--stream-port', settings.streamPort], ['--anvil-port', settings.anvilPort]] as const;
  for (let i = 0; i < ports.length; i++) {
    for (let j = i + 1; j < ports.length; j++) {
      if (ports[i]![1] !== 0 && ports[i]![1] === ports[j]![1]) errors.push(`${ports[i]![0]} and ${ports[j]![0]} are both ${ports[i]![1]}: each needs its own port`);
    }
  }
  return errors.length > 0 ? { kind: 'error', message: errors.join('; ') } : { kind: 'run', settings };
}
