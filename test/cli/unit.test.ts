// `flashblocksd unit`: the systemd unit with ExecStart= naming what runs it — node and dist/src/main.js from source
// (spawned through tsx like the other CLI tests), the binary's own path as the single-file binary (when CI gives one
// in $FLASHBLOCKSD_BINARY: scripts/ci-binary.sh) — accepted by `systemd-analyze verify`; and `setup` printing it as
// the install step, naming no path that does not exist.
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runSetup } from '../../src/cli/setup.js';
import { execArg, renderUnit, runUnit, unitWarnings, type DaemonCommand } from '../../src/cli/unit.js';
import { captureIo } from '../helpers/cli-io.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const shipped = fs.readFileSync(path.join(repoRoot, 'systemd', 'flashblocksd.service'), 'utf8');
const distMain = path.join(repoRoot, 'dist', 'src', 'main.js');
const hasAnalyze = spawnSync('systemd-analyze', ['--version'], { stdio: 'ignore' }).status === 0;
const NO_ANALYZE = 'systemd-analyze is not installed (apt-get install systemd)';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'flashblocksd-unit-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** Runs `command` to completion; resolves with its exit code and both outputs. */
function run(command: string[], opts: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<{ code: number | null; out: string; err: string }> {
  const [file, ...args] = command as [string, ...string[]];
  const child = spawn(file, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, out, err })));
}

/** `systemd-analyze verify` of `unit` (written to a temp file): exit code and whatever it printed (silent = valid). */
function analyze(unit: string): { status: number | null; output: string } {
  const dir = fs.mkdtempSync(path.join(tmp, 'verify-'));
  const file = path.join(dir, 'flashblocksd.service');
  fs.writeFileSync(file, unit);
  const r = spawnSync('systemd-analyze', ['verify', '--man=no', file], { encoding: 'utf8' });
  return { status: r.status, output: (r.stdout + r.stderr).trim() };
}

/** The ExecStart= lines of a unit. */
function execStarts(unit: string): string[] {
  return unit.split('\n').filter((l) => l.startsWith('ExecStart='));
}

/** The unit's settings (non-comment lines) other than ExecStart=: what `unit` must leave as shipped. */
function settingsBesidesExecStart(unit: string): string[] {
  return unit.split('\n').filter((l) => !l.startsWith('#') && !l.startsWith('ExecStart='));
}

t.test('renderUnit replaces the one ExecStart= and the comment above it, and nothing else', async (t) => {
  const cmd: DaemonCommand = { argv: ['/usr/local/bin/flashblocksd'], kind: 'binary', root: null, built: true };
  const out = renderUnit(shipped, cmd);
  t.same(execStarts(out), ['ExecStart=/usr/local/bin/flashblocksd']);
  t.same(settingsBesidesExecStart(out), settingsBesidesExecStart(shipped), 'every other setting as shipped');
  t.notMatch(out, /\/opt\/flashblocksd\/dist/, "the shipped comment's source-checkout example is gone");
  t.match(out, /# Printed by `flashblocksd unit`: the single-file binary it ran as/);
  t.throws(() => renderUnit(shipped.replace(/^ExecStart=.*$/m, ''), cmd), { name: 'UnitError', message: /has 0 ExecStart= lines, expected one/ }, 'no ExecStart= is an error');
  t.throws(() => renderUnit(shipped + '\nExecStart=/bin/true\n', cmd), { name: 'UnitError', message: /has 2 ExecStart= lines/ }, 'two are an error');
});

t.test('ExecStart= arguments are written in systemd syntax', async (t) => {
  const cases: [string, string][] = [
    ['/usr/local/bin/flashblocksd', '/usr/local/bin/flashblocksd'],
    ['/opt/flash blocks/main.js', '"/opt/flash blocks/main.js"'],
    ['/opt/100%/main.js', '/opt/100%%/main.js'],
    ['/opt/$HOME/main.js', '/opt/$$HOME/main.js'],
    ['/opt/say "hi"/m.js', '"/opt/say \\"hi\\"/m.js"'],
    ['/opt/a\\b', '"/opt/a\\\\b"'],
  ];
  for (const [arg, want] of cases) t.equal(execArg(arg), want, arg);
  t.throws(() => execArg('/opt/new\nline'), { name: 'UnitError', message: /control character/ }, 'a newline cannot be carried');
});

t.test('a path the unit hides from the service is warned about, with the fix', async (t) => {
  const binary = (p: string): DaemonCommand => ({ argv: [p], kind: 'binary', root: null, built: true });
  t.same(unitWarnings(binary('/usr/local/bin/flashblocksd')), []);
  t.match(unitWarnings(binary('/tmp/x/flashblocksd')), [/PrivateTmp=yes.*sudo install -m 0755 \/tmp\/x\/flashblocksd \/usr\/local\/bin\/flashblocksd/]);
  t.match(unitWarnings(binary('/home/op/Downloads/flashblocksd')), [/ProtectHome=yes/]);
  const source: DaemonCommand = { argv: ['/usr/bin/node', '--enable-source-maps', '/root/fb/dist/src/main.js'], kind: 'source', root: '/root/fb', built: true };
  t.match(unitWarnings(source), [/\/root\/fb\/dist\/src\/main\.js.*ProtectHome=yes.*\/opt\/flashblocksd/]);
});

t.test('systemd-analyze verify rejects an ExecStart= that does not exist (so the checks below mean something)', { skip: hasAnalyze ? false : NO_ANALYZE }, async (t) => {
  const r = analyze(renderUnit(shipped, { argv: ['/nonexistent/flashblocksd'], kind: 'binary', root: null, built: true }));
  t.ok(r.status !== 0 || r.output !== '', 'reported', r);
  t.match(r.output, /\/nonexistent\/flashblocksd/);
});

t.test('from source, `flashblocksd unit` prints the unit starting node with this checkout\'s dist/src/main.js', async (t) => {
  const builtBefore = fs.existsSync(distMain);
  const r = await run([process.execPath, '--import', 'tsx', path.join(repoRoot, 'src', 'main.ts'), 'unit'], { cwd: repoRoot });
  if (builtBefore !== fs.existsSync(distMain)) return void t.comment('dist/ was being built by another test meanwhile: nothing to assert');
  if (!builtBefore) {
    // A fresh clone before `npm run build`: no unit names a file that is not there.
    t.equal(r.code, 2, 'exit 2', r);
    t.equal(r.out, '', 'nothing on stdout');
    t.match(r.err, /dist\/src\/main\.js is not built, and the unit would start it: run `npm run build` in /);
    return;
  }
  t.equal(r.code, 0, 'exit 0', { err: r.err });
  t.same(execStarts(r.out), [`ExecStart=${process.execPath} --enable-source-maps ${distMain}`], 'node and the compiled daemon, absolute paths');
  t.ok(path.isAbsolute(process.execPath) && fs.existsSync(process.execPath));
  t.same(settingsBesidesExecStart(r.out), settingsBesidesExecStart(shipped), 'every other setting as in systemd/flashblocksd.service');
  if (!hasAnalyze) return void t.comment(`systemd-analyze verify skipped: ${NO_ANALYZE}`);
  t.same(analyze(r.out), { status: 0, output: '' }, 'systemd-analyze verify accepts it as printed');
});

t.test('unit --help, and an unknown flag is exit 2', async (t) => {
  const help = captureIo();
  t.equal(await runUnit(['--help'], help.io), 0);
  t.match(help.out(), /^Usage: flashblocksd unit\n/);
  const bad = captureIo();
  t.equal(await runUnit(['--bogus'], bad.io), 2);
  t.match(bad.err(), /^unit: Unknown option '--bogus'/);
  t.equal(bad.out(), '');
});

t.test('setup from source prints `unit` as the install step and names no path that does not exist', async (t) => {
  const envFile = path.join(tmp, 'setup', 'flashblocksd.env');
  const c = captureIo();
  const code = await runSetup(['--yes', '--no-check', '--flashblocks-enabled', 'false', '--env-path', envFile], c.io);
  t.equal(code, 0, 'written', { err: c.err() });
  const out = c.out();
  t.notMatch(out + fs.readFileSync(envFile, 'utf8'), /systemd\/flashblocksd\.service/, 'no unit file path that exists only in a checkout');
  if (fs.existsSync(distMain)) {
    t.match(out, `\n  ${process.execPath} ${distMain} unit | sudo tee /etc/systemd/system/flashblocksd.service >/dev/null\n`);
    t.match(out, `The unit starts ${process.execPath} --enable-source-maps ${distMain} (node with this checkout's compiled daemon).`);
    t.match(out, `  ${process.execPath} ${distMain} verify http://127.0.0.1:`);
  } else {
    t.match(out, `\n  (cd ${repoRoot.replace(/\/$/, '')} && npm run build)\n  ${process.execPath} ${distMain} unit | sudo tee`, 'the build first');
  }
  // Every absolute path on an install line outside /etc/systemd (which the lines create) exists here; a line that
  // suggests another place ("e.g. /opt/flashblocksd", when the checkout lies where the unit cannot see it, as under
  // /tmp) names no path to use as it is.
  const instructions = out.split('\n').filter((l) => !/\be\.g\./.test(l)).join('\n');
  const named = (instructions.match(/(?<=\s)\/[^\s'|:]+/g) ?? []).map((p) => p.replace(/[.,;)]+$/, ''));
  const hereNow = named.filter((p) => !p.startsWith('/etc/systemd/') && p !== envFile && p !== distMain);
  t.ok(hereNow.length > 0, 'some paths were named', { named });
  for (const p of hereNow) t.ok(fs.existsSync(p), `${p} exists`);
});

const binarySkip = process.env.FLASHBLOCKSD_BINARY ? false : 'set FLASHBLOCKSD_BINARY to a built binary (scripts/ci-binary.sh does) to run the binary cases';

t.test('the binary, from an empty directory, prints the unit with ExecStart= its own path; setup prints that', { skip: binarySkip }, async (t) => {
  const dir = fs.mkdtempSync(path.join(tmp, 'bin-'));
  const binary = path.join(dir, 'flashblocksd');
  fs.copyFileSync(path.resolve(repoRoot, process.env.FLASHBLOCKSD_BINARY!), binary);
  fs.chmodSync(binary, 0o755);
  const real = fs.realpathSync(binary);
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, XDG_RUNTIME_DIR: fs.mkdtempSync(path.join(tmp, 'xdg-')) };
  const cwd = fs.mkdtempSync(path.join(tmp, 'empty-'));

  const r = await run([binary, 'unit'], { cwd, env });
  t.equal(r.code, 0, 'exit 0', { err: r.err });
  t.same(execStarts(r.out), [`ExecStart=${execArg(real)}`], "the binary's own absolute path");
  t.same(settingsBesidesExecStart(r.out), settingsBesidesExecStart(shipped), 'the embedded unit is the shipped one');
  const hidden = /^\/(tmp|var\/tmp|home|root|run\/user)\//.test(real);
  if (hidden) t.match(r.err, /^warning: ExecStart= names .*which the service cannot see.*sudo install -m 0755 /, 'warned: the service cannot see it there');
  else t.equal(r.err, '', 'no warning');
  t.same(fs.readdirSync(cwd), [], 'nothing written to the working directory');
  if (hasAnalyze) t.same(analyze(r.out), { status: 0, output: '' }, 'systemd-analyze verify accepts it');

  const envFile = path.join(dir, 'flashblocksd.env');
  const s = await run([binary, 'setup', '--yes', '--no-check', '--flashblocks-enabled', 'false', '--env-path', envFile], { cwd, env });
  t.equal(s.code, 0, 'setup wrote the file', { err: s.err });
  t.notMatch(s.out, /systemd\/flashblocksd\.service/, 'no unit path from a checkout');
  if (hidden) {
    t.match(s.out, `\n  sudo install -m 0755 ${real} /usr/local/bin/flashblocksd\n  /usr/local/bin/flashblocksd unit | sudo tee /etc/systemd/system/flashblocksd.service >/dev/null\n`);
  } else {
    t.match(s.out, `\n  ${real} unit | sudo tee /etc/systemd/system/flashblocksd.service >/dev/null\n`);
  }
});
