// scripts/build-if-changed.mjs, the build step of `npm start`, `devnet`, `cluster` and `setup`: tsc runs when the
// sources changed and only then. A throwaway project (its own src/, the repository's TypeScript) for the rules;
// the real `npm start` for the acceptance: a second start reaches its banner without compiling.
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from '../helpers/daemon-process.js';

const script = path.join(repoRoot, 'scripts', 'build-if-changed.mjs');
const COMPILING = /compiling with tsc/;

function build(root: string, extra: string[] = []): { code: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [script, '--root', root, ...extra], { encoding: 'utf8' });
  return { code: r.status, stderr: r.stderr + r.stdout };
}

t.test('tsc runs for a first build, a changed, added or removed source, and a failed last build; never for no change', async (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'flashblocksd-build-'));
  t.teardown(() => fs.rmSync(root, { recursive: true, force: true }));
  fs.symlinkSync(path.join(repoRoot, 'node_modules'), path.join(root, 'node_modules'));
  fs.writeFileSync(path.join(root, 'package.json'), '{"type":"module"}\n');
  // lib es5 only: the default lib for ES2022 pulls in the DOM declarations, ~5 s of tsc per build on a busy 2-core
  // machine against ~1 s; the rules under test do not depend on what tsc type-checks against.
  fs.writeFileSync(path.join(root, 'tsconfig.json'), JSON.stringify({ compilerOptions: { target: 'ES2022', lib: ['es5'], module: 'NodeNext', strict: true, types: [], rootDir: '.', outDir: 'dist' } }));
  fs.writeFileSync(path.join(root, 'tsconfig.build.json'), JSON.stringify({ extends: './tsconfig.json', include: ['src', 'scripts'] }));
  fs.mkdirSync(path.join(root, 'src'));
  const main = path.join(root, 'src', 'main.ts');
  fs.writeFileSync(main, 'export const answer: number = 42;\n');

  const first = build(root);
  t.equal(first.code, 0, 'built', first);
  t.match(first.stderr, /no build yet; compiling with tsc/);
  const out = path.join(root, 'dist', 'src', 'main.js');
  t.match(fs.readFileSync(out, 'utf8'), /answer = 42/);
  const builtAt = fs.statSync(out).mtimeMs;

  const again = build(root);
  t.equal(again.code, 0);
  t.equal(again.stderr, '', 'nothing changed: no tsc, nothing printed');
  t.equal(fs.statSync(out).mtimeMs, builtAt, 'dist untouched');

  fs.utimesSync(main, new Date(), new Date());
  t.equal(build(root).stderr, '', 'a touched but unchanged file is no change');

  fs.writeFileSync(main, 'export const answer: number = 43;\n');
  t.match(build(root).stderr, /sources changed; compiling/, 'an edited source');
  t.match(fs.readFileSync(out, 'utf8'), /answer = 43/);

  fs.writeFileSync(path.join(root, 'src', 'extra.ts'), 'export const x = 1;\n');
  t.match(build(root).stderr, /sources changed; compiling/, 'an added source');
  fs.rmSync(path.join(root, 'src', 'extra.ts'));
  t.match(build(root).stderr, /sources changed; compiling/, 'a removed source');

  fs.writeFileSync(main, 'export const answer: number = "not a number";\n');
  const broken = build(root);
  t.not(broken.code, 0, 'a type error fails the start');
  t.match(broken.stderr, /TS2322/, "with tsc's message");
  t.match(build(root).stderr, /compiling/, 'and the next start compiles again (no stamp for a failed build)');

  fs.writeFileSync(main, 'export const answer: number = 44;\n');
  t.equal(build(root).code, 0);
  t.match(build(root, ['--always']).stderr, /asked to; compiling/, '--always (npm run build) compiles regardless');

  // Three starts at once over changed sources (npm start, npm run devnet, …): one tsc, the others wait for it.
  fs.writeFileSync(main, 'export const answer: number = 45;\n');
  const runs = await Promise.all(
    [0, 1, 2].map(
      () =>
        new Promise<{ code: number | null; stderr: string }>((resolve) => {
          const p = spawn(process.execPath, [script, '--root', root], { stdio: ['ignore', 'pipe', 'pipe'] });
          let err = '';
          p.stderr.on('data', (d: Buffer) => (err += d.toString()));
          p.on('close', (code) => resolve({ code, stderr: err }));
        }),
    ),
  );
  t.same(runs.map((r) => r.code), [0, 0, 0], 'all three succeed');
  t.equal(runs.filter((r) => /compiling/.test(r.stderr)).length, 1, 'one of them compiled');
  t.match(fs.readFileSync(out, 'utf8'), /answer = 45/);
  t.notOk(fs.existsSync(path.join(root, 'dist', '.build-lock')), 'the lock is gone');
});

t.test('`npm start` a second time reaches its banner without running tsc', async (t) => {
  const prepared = build(repoRoot);
  t.equal(prepared.code, 0, 'the checkout builds', prepared);
  const proc = spawn('npm', ['start', '--', '--port', '0', '--metrics-port', '0'], {
    cwd: repoRoot,
    env: { ...process.env, FLASHBLOCKS_URL: '', NODE_RPC_URL: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  t.teardown(() => {
    if (proc.exitCode === null) process.kill(-proc.pid!, 'SIGKILL');
  });
  let output = '';
  const banner = new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer): void => {
      output += d.toString('utf8');
      if (/flashblocksd is running on the embedded devnet/.test(output)) resolve();
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', onData);
    proc.once('exit', (code) => reject(new Error(`npm start exited (${code}) before its banner:\n${output}`)));
  });
  await banner;
  t.notMatch(output, COMPILING, 'no tsc before the banner');
  t.notMatch(output, /> tsc /, 'npm ran no tsc script');
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  process.kill(-proc.pid!, 'SIGINT');
  await exited;
});
