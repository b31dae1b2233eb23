// `flashblocksd setup`: asks for (or takes as flags) the settings a systemd install needs, checks the URLs, writes
// the environment file the unit reads and prints the commands to install and start it. Never prints a secret
// embedded in a URL and never replaces an existing file without --force.
import { existsSync } from 'node:fs';
import { isIP } from 'node:net';
import { resolve as resolvePath } from 'node:path';
import { parseArgs } from 'node:util';
import { envName, loadConfig, SETTINGS, type Config } from '../config.js';
import { StartupError } from '../errors.js';
import { redactUrl } from '../log.js';
import { checkFlashblocksUrl, checkNodeRpcUrl } from './checks.js';
import { presetByChainId, retirementNotice } from '../chain/presets.js';
import { DEFAULT_ENV_FILE, EnvFileError, formatEnvFile, writeEnvFile } from './envfile.js';
import { Prompter, type CliIo } from './prompt.js';
import { daemonCommand, execArg, type DaemonCommand, selfArgv, UNIT_INSTALL_PATH, UnitError, unitWarnings } from './unit.js';

/** Exit codes of `flashblocksd setup`. */
export const SetupExit = { WRITTEN: 0, NOT_WRITTEN: 1, BAD_INPUT: 2 } as const;

/** One setting setup asks for; `def` is setup's default (ports: the daemon's own, clear of the node's 8545). */
interface Question {
  flag: 'flashblocks-enabled' | 'flashblocks-url' | 'node-rpc-url' | 'host' | 'port' | 'metrics-port';
  def: string;
}

/** The daemon's default for a setting (one set of ports everywhere). */
function daemonDefault(flag: string): string {
  return SETTINGS.find((s) => s.flag === flag)?.def ?? '';
}

const QUESTIONS: readonly Question[] = [
  { flag: 'flashblocks-enabled', def: 'true' },
  { flag: 'flashblocks-url', def: '' },
  { flag: 'node-rpc-url', def: 'http://127.0.0.1:8545' },
  { flag: 'host', def: '127.0.0.1' },
  { flag: 'port', def: daemonDefault('port') },
  { flag: 'metrics-port', def: daemonDefault('metrics-port') },
];

const MAX_ATTEMPTS = 5;

/** `flashblocksd setup --help`. */
export function setupHelp(): string {
  const lines = [
    'Usage: flashblocksd setup [flags]',
    '',
    'Asks for the settings below (defaults in brackets; Enter keeps them), checks the URLs, writes the environment',
    'file the systemd unit reads (mode 0600) and prints the commands to install (`flashblocksd unit`) and start it.',
    'Every answer can be given as a flag instead; with --yes the remaining ones take their defaults (no questions).',
    '',
  ];
  for (const q of QUESTIONS) lines.push(`  --${q.flag.padEnd(22)} ${envName(q.flag).padEnd(20)} default: ${q.def === '' ? '(none; required when enabled)' : q.def}`);
  lines.push(
    `  --${'env-path <path>'.padEnd(22)} where to write (default ${DEFAULT_ENV_FILE}, the file the unit reads)`,
    `  --${'force'.padEnd(22)} replace an existing file (otherwise it is never overwritten)`,
    `  --${'yes, -y'.padEnd(22)} accept defaults for everything not given as a flag; ask nothing`,
    `  --${'no-check'.padEnd(22)} do not connect to the URLs (e.g. provisioning before the node runs)`,
    `  --${'check-timeout-ms <ms>'.padEnd(22)} connect timeout of the URL checks (default 3000)`,
    '',
    'A URL that cannot be reached is a warning, not an error. Flashblocks URLs are given comma-separated or by',
    'repeating --flashblocks-url.',
    '',
    'Exit codes: 0 file written; 1 nothing written (the file exists without --force, cannot be written, or the',
    'write was declined); 2 invalid flag or answer, or standard input ended before every question was answered.',
  );
  return lines.join('\n');
}

/** The help text of a setting, from the config table. */
function helpOf(flag: string): string {
  return SETTINGS.find((s) => s.flag === flag)?.help ?? '';
}

/** How a value is shown: URLs redacted (they may carry API keys). */
function shown(flag: Question['flag'], value: string): string {
  if (flag === 'flashblocks-url' || flag === 'node-rpc-url') return value === '' ? '(none)' : value.split(',').map(redactUrl).join(',');
  return value;
}

/** Shell-quotes a path for the printed commands. */
function sh(s: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

class InputError extends Error {}

/**
 * Asks a [Y/n] question until the answer is yes (Enter, y, yes) or no (n, no), case-insensitive; anything else is
 * asked again with the accepted answers. `what` names the question when standard input ends before an answer.
 */
async function confirm(prompter: Prompter, question: string, what: string, err: (line: string) => void): Promise<boolean> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const line = await prompter.ask(question);
    if (line === null) throw new InputError(`standard input ended before ${what} was confirmed`);
    const a = line.trim();
    if (a === '' || /^y(es)?$/i.test(a)) return true;
    if (/^no?$/i.test(a)) return false;
    err(`  "${a}" is neither yes nor no: answer y (or Enter) or n`);
  }
  throw new InputError(`no yes-or-no answer for ${what} after ${MAX_ATTEMPTS} attempts`);
}

/**
 * Validates one answer with the daemon's own parser (the config table) plus setup's cross-checks, and returns the
 * value as it is written to the file. Throws InputError with a message that names the setting.
 */
function validate(q: Question, raw: string, answers: ReadonlyMap<string, string>): string {
  const v = raw.trim();
  const name = `--${q.flag} (${envName(q.flag)})`;
  if (v === '') {
    if (q.flag === 'flashblocks-url') throw new InputError(`${name}: required while flashblocks are enabled; give the provider's ws:// or wss:// flashblocks endpoint`);
    if (q.flag === 'node-rpc-url') throw new InputError(`${name}: required; give your node's http:// or https:// JSON-RPC URL`);
    throw new InputError(`${name}: a value is required`);
  }
  let c: Readonly<Config>;
  try {
    c = loadConfig([`--${q.flag}=${v}`], {});
  } catch (e) {
    if (e instanceof StartupError) throw new InputError(e.message.replace(`--${q.flag}:`, `${name}:`));
    throw e;
  }
  switch (q.flag) {
    case 'flashblocks-enabled':
      return String(c.flashblocksEnabled);
    case 'flashblocks-url':
      return c.flashblocksUrls.join(',');
    case 'node-rpc-url':
      return c.nodeRpcUrl;
    case 'host':
      if (isIP(v) === 0 && (!/^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$/.test(v) || /^[\d.]+$/.test(v))) throw new InputError(`${name}: "${v}" is not an IP address or host name (e.g. 127.0.0.1, 0.0.0.0, ::)`);
      return c.host;
    case 'port':
    case 'metrics-port': {
      const port = q.flag === 'port' ? c.port : c.metricsPort;
      if (port === 0) throw new InputError(`${name}: 0 (any free port) cannot be used by a service; pick a fixed port`);
      if (q.flag === 'metrics-port' && answers.get('port') === String(port)) throw new InputError(`${name}: ${port} is already the JSON-RPC port; pick another`);
      const node = answers.get('node-rpc-url');
      if (node !== undefined && node !== '') {
        const u = new URL(node);
        const nodePort = u.port !== '' ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
        const local = ['127.0.0.1', 'localhost', '[::1]', '0.0.0.0'].includes(u.hostname);
        if (local && nodePort === port) throw new InputError(`${name}: ${port} is the port of your node (NODE_RPC_URL); pick another (8547 is customary)`);
      }
      return String(port);
    }
  }
}

/** Warnings that do not stop the write. */
function warnings(q: Question, value: string): string[] {
  const out: string[] = [];
  if ((q.flag === 'port' || q.flag === 'metrics-port') && Number(value) < 1024) {
    out.push(`${envName(q.flag)} ${value} is below 1024: the unit grants no capabilities, so binding it fails unless you add CAP_NET_BIND_SERVICE (see the unit's comment)`);
  }
  if (q.flag === 'host' && (value === '0.0.0.0' || value === '::')) out.push(`HOST ${value} serves other hosts: put a firewall or a proxy in front, and keep METRICS_PORT off the internet`);
  return out;
}

/**
 * Connects to the URLs of an answer; returns warning lines (empty when all were reachable). Prints progress. The
 * node's chain, when it has a preset, goes into `learned.chain` (written as CHAIN=: the daemon then knows its chain
 * even when the node is down at start-up).
 */
async function checkReachable(q: Question, value: string, io: CliIo, timeoutMs: number, learned: { chain?: string }): Promise<string[]> {
  const warn: string[] = [];
  if (q.flag === 'flashblocks-url') {
    for (const u of value.split(',')) {
      const r = await checkFlashblocksUrl(u, timeoutMs);
      if (r.ok) io.stdout.write(`  ok: ${redactUrl(u)}: ${r.detail}\n`);
      else warn.push(`${redactUrl(u)} is not reachable: ${r.detail}`);
    }
  } else if (q.flag === 'node-rpc-url') {
    const r = await checkNodeRpcUrl(value, timeoutMs);
    if (r.ok) io.stdout.write(`  ok: ${redactUrl(value)}: ${r.detail}\n`);
    else warn.push(`${redactUrl(value)} did not answer eth_chainId: ${r.detail}`);
    // A chain that retired flashblocks (Base since Denim): the daemon could only forward; say so before writing.
    const preset = r.chainId === null ? null : presetByChainId(r.chainId);
    if (preset !== null) learned.chain = preset.name;
    else delete learned.chain;
    const retired = preset === null ? null : retirementNotice(preset, Date.now() / 1000);
    if (retired !== null) warn.push(`${retired} (for a pure forwarding proxy answer FLASHBLOCKS_ENABLED=false)`);
  }
  return warn;
}

/**
 * The commands that write the unit with `flashblocksd unit` as this process runs (the binary, or node with the
 * checkout's dist/), preceded by what must exist first (the build; the binary installed out of a directory the unit
 * hides), and a line saying what ExecStart= starts. Every path named exists, or is created by an earlier line.
 */
function unitSteps(): { install: string[]; notes: string[]; self: string } {
  const tee = `| sudo tee ${UNIT_INSTALL_PATH} >/dev/null`;
  let cmd: DaemonCommand;
  try {
    cmd = daemonCommand();
  } catch (e) {
    if (!(e instanceof UnitError)) throw e;
    return { install: [], notes: [`No unit to install from here: ${e.message}.`], self: 'flashblocksd' };
  }
  const install: string[] = [];
  const notes: string[] = [];
  let argv = cmd.argv;
  if (cmd.kind === 'binary' && unitWarnings(cmd).length > 0) {
    // The unit hides /home, /root and /tmp from the service: the binary goes to /usr/local/bin first.
    argv = ['/usr/local/bin/flashblocksd'];
    install.push(`  sudo install -m 0755 ${sh(cmd.argv[0]!)} ${argv[0]}`);
  } else {
    for (const w of unitWarnings(cmd)) notes.push(`warning: ${w}`);
  }
  if (!cmd.built) install.push(`  (cd ${sh(cmd.root!)} && npm run build)`);
  const self = selfArgv({ ...cmd, argv }).map(sh).join(' ');
  install.push(`  ${self} unit ${tee}`);
  notes.unshift(`The unit starts ${argv.map(execArg).join(' ')} (${cmd.kind === 'binary' ? 'this binary' : "node with this checkout's compiled daemon"}).`);
  return { install, notes, self };
}

/** The commands that install and start the unit with this environment file. */
export function nextSteps(envFile: string, answers: ReadonlyMap<string, string>): string[] {
  const host = answers.get('host') ?? '127.0.0.1';
  const local = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '[::1]' : isIP(host) === 6 ? `[${host}]` : host;
  const unit = unitSteps();
  const lines = ['Install and start the unit (as root):', ...unit.install];
  if (envFile !== DEFAULT_ENV_FILE) {
    // The unit reads DEFAULT_ENV_FILE; a drop-in points it at this file instead.
    lines.push(
      '  sudo mkdir -p /etc/systemd/system/flashblocksd.service.d',
      `  printf '[Service]\\nEnvironmentFile=\\nEnvironmentFile=%s\\n' ${sh(envFile)} | sudo tee /etc/systemd/system/flashblocksd.service.d/env-file.conf >/dev/null`,
    );
  }
  lines.push(
    '  sudo systemctl daemon-reload',
    '  sudo systemctl enable --now flashblocksd',
    '  systemctl status flashblocksd --no-pager',
    '  journalctl -u flashblocksd -f',
    ...unit.notes,
    'Then check that it serves preconfirmations:',
    `  ${unit.self} verify http://${local}:${answers.get('port') ?? daemonDefault('port')}/`,
    `  curl -s http://${local}:${answers.get('metrics-port') ?? daemonDefault('metrics-port')}/readyz`,
  );
  return lines;
}

/** Parses setup's flags; throws InputError on an unknown or malformed one. */
function parseSetupArgs(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      allowPositionals: false,
      strict: true,
      options: {
        // Not --env-file: Node 20 claims that flag anywhere on its command line, even after the script.
        'env-path': { type: 'string' },
        force: { type: 'boolean' },
        yes: { type: 'boolean', short: 'y' },
        'no-check': { type: 'boolean' },
        'check-timeout-ms': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        'flashblocks-enabled': { type: 'string' },
        'flashblocks-url': { type: 'string', multiple: true },
        'node-rpc-url': { type: 'string' },
        host: { type: 'string' },
        port: { type: 'string' },
        'metrics-port': { type: 'string' },
      },
    }).values;
  } catch (e) {
    // parseArgs quotes the offending argument; an unexpected positional may be a URL with a key in it.
    throw new InputError((e as Error).message.replace(/'[a-z]+:\/\/[^']*'/gi, (m) => `'${redactUrl(m.slice(1, -1))}'`));
  }
}

/**
 * Runs `flashblocksd setup` with the given arguments (after the word `setup`) and streams; resolves with the exit
 * code (see {@link SetupExit}).
 */
export async function runSetup(argv: string[], io: CliIo): Promise<number> {
  const err = (msg: string): void => void io.stderr.write(msg + '\n');
  let flags: ReturnType<typeof parseSetupArgs>;
  try {
    flags = parseSetupArgs(argv);
  } catch (e) {
    err(`setup: ${(e as Error).message} (see flashblocksd setup --help)`);
    return SetupExit.BAD_INPUT;
  }
  if (flags.help === true) {
    io.stdout.write(setupHelp() + '\n');
    return SetupExit.WRITTEN;
  }
  const envFile = resolvePath(flags['env-path'] ?? DEFAULT_ENV_FILE);
  const force = flags.force === true;
  const interactive = flags.yes !== true;
  const check = flags['no-check'] !== true;
  const timeoutMs = Number(flags['check-timeout-ms'] ?? '3000');
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 100) {
    err(`setup: --check-timeout-ms: expected a whole number of milliseconds >= 100, got "${flags['check-timeout-ms']}"`);
    return SetupExit.BAD_INPUT;
  }
  if (existsSync(envFile) && !force) {
    err(`setup: ${envFile} already exists; not overwritten (re-run with --force to replace it)`);
    return SetupExit.NOT_WRITTEN;
  }
  const given = (q: Question): string | undefined => {
    const v = flags[q.flag];
    return Array.isArray(v) ? v.join(',') : v;
  };

  const prompter = interactive ? new Prompter(io) : null;
  const answers = new Map<string, string>();
  const learned: { chain?: string } = {};
  try {
    if (interactive) io.stdout.write(`flashblocksd setup: writes ${envFile}. Enter keeps the [default].\n`);
    for (const q of QUESTIONS) {
      if (q.flag === 'flashblocks-url' && answers.get('flashblocks-enabled') === 'false') continue;
      const fromFlag = given(q);
      let value: string | null = null;
      if (fromFlag !== undefined || prompter === null) {
        value = validate(q, fromFlag ?? q.def, answers);
        for (const w of warnings(q, value)) err(`warning: ${w}`);
        if (check) for (const w of await checkReachable(q, value, io, timeoutMs, learned)) err(`warning: ${w}`);
      }
      for (let attempt = 1; value === null && prompter !== null; attempt++) {
        if (attempt > MAX_ATTEMPTS) throw new InputError(`${envName(q.flag)}: no valid answer after ${MAX_ATTEMPTS} attempts`);
        const def = q.def === '' ? '' : ` [${q.def}]`;
        const line = await prompter.ask(`${envName(q.flag)} - ${helpOf(q.flag)}${def}: `);
        if (line === null) throw new InputError(`standard input ended before ${envName(q.flag)} was answered; give the remaining answers as flags, or --yes for the defaults`);
        let candidate: string;
        try {
          candidate = validate(q, line === '' ? q.def : line, answers);
        } catch (e) {
          if (!(e instanceof InputError)) throw e;
          err(`  ${e.message}`);
          continue;
        }
        const warn = warnings(q, candidate);
        if (check) warn.push(...(await checkReachable(q, candidate, io, timeoutMs, learned)));
        for (const w of warn) err(`  warning: ${w}`);
        if (warn.length > 0) {
          if (!(await confirm(prompter, '  Keep this value anyway? [Y/n]: ', envName(q.flag), err))) continue;
        }
        value = candidate;
      }
      if (value === null) throw new InputError(`${envName(q.flag)}: no answer`);
      answers.set(q.flag, value);
    }

    io.stdout.write(`\nSettings for ${envFile}:\n`);
    for (const q of QUESTIONS) {
      const v = answers.get(q.flag);
      if (v !== undefined) io.stdout.write(`  ${envName(q.flag).padEnd(20)} ${shown(q.flag, v)}\n`);
    }
    if (learned.chain !== undefined) io.stdout.write(`  ${envName('chain').padEnd(20)} ${learned.chain} (the node's eth_chainId)\n`);
    if (prompter !== null) {
      if (!(await confirm(prompter, `Write ${envFile}? [Y/n]: `, 'the write', err))) {
        err('setup: nothing written');
        return SetupExit.NOT_WRITTEN;
      }
    }
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    err(`setup: ${e.message}`);
    return SetupExit.BAD_INPUT;
  } finally {
    prompter?.close();
  }

  const header = [
    `flashblocksd settings, written by \`flashblocksd setup\` on ${new Date().toISOString()}.`,
    'Read by the systemd unit `flashblocksd unit` prints (EnvironmentFile=). Mode 0600: the URLs may carry API keys.',
    'Each variable twins a flag (`flashblocksd --help` lists all of them). Apply changes with: systemctl restart flashblocksd',
  ];
  const entries = QUESTIONS.filter((q) => answers.has(q.flag)).map((q) => [envName(q.flag), answers.get(q.flag) as string] as const);
  // The chain the node answered for: the daemon runs for it from start-up even if the node is down then.
  if (learned.chain !== undefined) entries.push([envName('chain'), learned.chain]);
  try {
    await writeEnvFile(envFile, formatEnvFile(entries, header), force);
  } catch (e) {
    if (!(e instanceof EnvFileError)) throw e;
    err(`setup: ${e.message}`);
    return SetupExit.NOT_WRITTEN;
  }
  io.stdout.write(`\nWrote ${envFile} (mode 0600).\n\n${nextSteps(envFile, answers).join('\n')}\n`);
  return SetupExit.WRITTEN;
}
