// `flashblocksd unit`: prints the systemd unit with ExecStart= naming what is running — the single-file binary's own
// absolute path, or node and dist/src/main.js of this checkout — so `flashblocksd unit > /etc/systemd/system/...`
// installs it as is. The one source of the unit for `setup` too. Never names a file that does not exist.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { getAsset, isSea } from 'node:sea';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { CliIo } from './prompt.js';

/** The asset name scripts/build-binary.ts embeds systemd/flashblocksd.service under. */
export const UNIT_ASSET = 'flashblocksd.service';
/** Where the printed unit is installed. */
export const UNIT_INSTALL_PATH = '/etc/systemd/system/flashblocksd.service';

/** Exit codes of `flashblocksd unit`. */
export const UnitExit = { PRINTED: 0, CANNOT_PRINT: 2 } as const;

/** The unit cannot be produced (no template, no build to point at, a path systemd cannot express). */
export class UnitError extends Error {
  override name = 'UnitError';
}

/** What runs the daemon: the argv of ExecStart= and where it came from. */
export interface DaemonCommand {
  /** Absolute paths first: the executable, then its arguments. */
  argv: string[];
  /** The single-file binary, or node with a checkout's (or package's) dist/src/main.js. */
  kind: 'binary' | 'source';
  /** The package root when kind is 'source' (holds systemd/ and dist/). */
  root: string | null;
  /** False when kind is 'source' and dist/src/main.js is not built yet (`npm run build`): no unit can name it. */
  built: boolean;
}

/** `flashblocksd unit --help`. */
export function unitHelp(): string {
  return [
    'Usage: flashblocksd unit',
    '',
    'Prints the systemd unit (hardened, Type=notify; it reads /etc/flashblocksd/flashblocksd.env, which',
    '`flashblocksd setup` writes) with ExecStart= naming what ran this command: the single-file binary at its own',
    'absolute path, or from a checkout node and dist/src/main.js (run `npm run build` first). Install it with:',
    `  flashblocksd unit | sudo tee ${UNIT_INSTALL_PATH} >/dev/null && sudo systemctl daemon-reload`,
    'Run it as the binary (or from the checkout) the service should start: the unit hides /home, /root and /tmp from',
    'the service, so a path there is warned about on standard error.',
    '',
    'Exit codes: 0 printed; 2 cannot print (invalid flag, no unit file beside this install, dist/ not built).',
  ].join('\n');
}

/** The package root of a source install: the nearest of ../../ and ../../../ (src/cli or dist/src/cli) with the unit. */
function packageRoot(): string {
  const tried: string[] = [];
  for (const rel of ['../../', '../../../']) {
    const dir = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(path.join(dir, 'systemd', 'flashblocksd.service')) && existsSync(path.join(dir, 'package.json'))) return path.resolve(dir);
    tried.push(path.join(dir, 'systemd'));
  }
  throw new UnitError(`systemd/flashblocksd.service is not beside this install (looked in ${tried.join(' and ')}); use the checkout or package it came with`);
}

/**
 * The command systemd should start: this binary, or node with this checkout's compiled entry point (which may not be
 * built yet: see `built`). Throws UnitError when a source install has no systemd/ beside it.
 */
export function daemonCommand(): DaemonCommand {
  // process.execPath is the resolved absolute path of the running executable (the binary itself under SEA).
  if (isSea()) return { argv: [process.execPath], kind: 'binary', root: null, built: true };
  const root = packageRoot();
  const main = path.join(root, 'dist', 'src', 'main.js');
  return { argv: [process.execPath, '--enable-source-maps', main], kind: 'source', root, built: existsSync(main) };
}

/** The unit file as shipped: embedded in the binary, or systemd/flashblocksd.service of this checkout. */
export function unitTemplate(cmd: DaemonCommand): string {
  if (cmd.kind === 'binary') {
    try {
      return getAsset(UNIT_ASSET, 'utf8');
    } catch (e) {
      throw new UnitError(`this binary embeds no unit (${(e as Error).message}); rebuild it with \`npm run build:binary\``);
    }
  }
  return readFileSync(path.join(cmd.root!, 'systemd', 'flashblocksd.service'), 'utf8');
}

/**
 * One ExecStart= argument in systemd's syntax: `%` and `$` doubled (specifiers, variables), double-quoted with C
 * escapes when it holds a space, quote, backslash or semicolon. Control characters are refused.
 */
export function execArg(arg: string): string {
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(arg)) throw new UnitError(`${JSON.stringify(arg)} holds a control character, which ExecStart= cannot carry; move it to a plain path`);
  const v = arg.replace(/%/g, '%%').replace(/\$/g, '$$$$');
  return /[\s"'\\;]/.test(v) ? `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"` : v;
}

/**
 * The unit with its ExecStart= set to `cmd`. The comment block directly above ExecStart= (which describes the
 * shipped default) is replaced by one saying what was chosen. Throws UnitError unless there is exactly one ExecStart=.
 */
export function renderUnit(template: string, cmd: DaemonCommand): string {
  const lines = template.split('\n');
  const at = lines.flatMap((l, i) => (l.startsWith('ExecStart=') ? [i] : []));
  if (at.length !== 1) throw new UnitError(`the unit file has ${at.length} ExecStart= lines, expected one`);
  const exec = at[0]!;
  let from = exec;
  while (from > 0 && lines[from - 1]!.startsWith('#')) from--;
  const note =
    cmd.kind === 'binary'
      ? ['# Printed by `flashblocksd unit`: the single-file binary it ran as. Moved the binary? Run `flashblocksd unit` again.']
      : [
          '# Printed by `flashblocksd unit`: node and the compiled daemon of the checkout it ran from (after changing the',
          '# sources run `npm run build` there, then `systemctl restart flashblocksd`).',
        ];
  lines.splice(from, exec - from + 1, ...note, `ExecStart=${cmd.argv.map(execArg).join(' ')}`);
  return lines.join('\n');
}

/** Directories the unit hides from the service (ProtectHome=yes, PrivateTmp=yes), with the setting that does it. */
const HIDDEN_DIRS: readonly [string, string][] = [
  ['/home/', 'ProtectHome=yes'],
  ['/root/', 'ProtectHome=yes'],
  ['/run/user/', 'ProtectHome=yes'],
  ['/tmp/', 'PrivateTmp=yes'],
  ['/var/tmp/', 'PrivateTmp=yes'],
];

/** Warnings about paths in `cmd` the service would not see; empty when it can start as printed. */
export function unitWarnings(cmd: DaemonCommand): string[] {
  const out: string[] = [];
  for (const p of cmd.argv.filter((a) => path.isAbsolute(a))) {
    const hidden = HIDDEN_DIRS.find(([dir]) => p.startsWith(dir));
    if (hidden === undefined) continue;
    const fix =
      cmd.kind === 'binary'
        ? `install it first (sudo install -m 0755 ${p} /usr/local/bin/flashblocksd) and run \`/usr/local/bin/flashblocksd unit\``
        : 'move the checkout (and node) elsewhere, e.g. /opt/flashblocksd, and run `flashblocksd unit` from there';
    out.push(`ExecStart= names ${p}, which the service cannot see (${hidden[1]} in the unit): ${fix}`);
  }
  return out;
}

/** The unit for what is running now, with its warnings. Throws UnitError. */
export function currentUnit(): { text: string; command: DaemonCommand; warnings: string[] } {
  const command = daemonCommand();
  if (!command.built) throw new UnitError(`${command.argv.at(-1)} is not built, and the unit would start it: run \`npm run build\` in ${command.root} first`);
  return { text: renderUnit(unitTemplate(command), command), command, warnings: unitWarnings(command) };
}

/** The argv that runs `flashblocksd <subcommand>` the way this process runs (the binary, or node with dist/). */
export function selfArgv(cmd: DaemonCommand): string[] {
  return cmd.kind === 'binary' ? cmd.argv : [cmd.argv[0]!, cmd.argv[cmd.argv.length - 1]!];
}

/** Runs `flashblocksd unit` with the arguments after the word `unit`; resolves with the exit code. */
export async function runUnit(argv: string[], io: Pick<CliIo, 'stdout' | 'stderr'>): Promise<number> {
  let help: boolean;
  try {
    help = parseArgs({ args: argv, strict: true, allowPositionals: false, options: { help: { type: 'boolean', short: 'h' } } }).values.help === true;
  } catch (e) {
    io.stderr.write(`unit: ${(e as Error).message} (see flashblocksd unit --help)\n`);
    return UnitExit.CANNOT_PRINT;
  }
  if (help) {
    io.stdout.write(unitHelp() + '\n');
    return UnitExit.PRINTED;
  }
  try {
    const unit = currentUnit();
    for (const w of unit.warnings) io.stderr.write(`warning: ${w}\n`);
    io.stdout.write(unit.text.endsWith('\n') ? unit.text : unit.text + '\n');
    return UnitExit.PRINTED;
  } catch (e) {
    if (!(e instanceof UnitError)) throw e;
    io.stderr.write(`unit: ${e.message}\n`);
    return UnitExit.CANNOT_PRINT;
  }
}
