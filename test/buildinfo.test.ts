// Build identity: the git commit read from a checkout's files (a worktree, a fresh clone with packed refs, a detached
// HEAD, no git at all) equals what git says; a real daemon started from a clone labels flashblocksd_build_info with
// that commit and the package version; `npx flashblocksd` (bin/) without a build says how to build.
import t from 'tap';
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildInfo, gitCommit, packageRoot } from '../src/buildinfo.js';
import { repoRoot, spawnDaemon } from './helpers/daemon-process.js';

const HAVE_GIT = spawnSync('git', ['--version'], { stdio: 'ignore' }).status === 0;
const { NODE_OPTIONS: _tapLoaders, ...childEnv } = process.env;
const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string };
const git = (cwd: string, ...args: string[]): string => execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...childEnv, GIT_CONFIG_NOSYSTEM: '1' } }).trim();

const work = mkdtempSync(join(tmpdir(), 'fbd-buildinfo-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));

/**
 * A git repository holding this checkout's current sources (committed, so the test runs the code under test even
 * when the working tree is dirty), and a `git clone` of it: packed refs, a normal .git directory.
 */
let cloned: { origin: string; clone: string; sha: string } | null = null;
function makeClone(): { origin: string; clone: string; sha: string } {
  if (cloned !== null) return cloned;
  const origin = join(work, 'origin');
  mkdirSync(origin);
  for (const f of ['src', 'package.json', 'tsconfig.json']) cpSync(join(repoRoot, f), join(origin, f), { recursive: true });
  git(origin, 'init', '-q', '-b', 'main');
  git(origin, 'add', '.');
  git(origin, '-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'snapshot');
  const clone = join(work, 'clone');
  git(work, 'clone', '-q', origin, clone);
  git(clone, 'pack-refs', '--all', '--prune');
  symlinkSync(join(repoRoot, 'node_modules'), join(clone, 'node_modules'), 'dir');
  cloned = { origin, clone, sha: git(origin, 'rev-parse', 'HEAD') };
  return cloned;
}

t.test('the commit is read from the files of a checkout as git reports it', { skip: !HAVE_GIT && 'git is not installed' }, async (t) => {
  const inRepo = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: repoRoot, encoding: 'utf8' });
  if (inRepo.status === 0) t.equal(gitCommit(repoRoot), inRepo.stdout.trim(), 'this checkout (a clone or a worktree)');
  const { origin, clone, sha } = makeClone();
  t.equal(gitCommit(origin), sha, 'a repository with a loose branch ref');
  t.equal(gitCommit(clone), sha, 'a fresh clone (packed refs)');
  t.match(readFileSync(join(clone, '.git', 'packed-refs'), 'utf8'), `${sha} refs/heads/main`, '(whose branch ref is packed)');
  const worktree = join(work, 'wt');
  git(origin, 'worktree', 'add', '-q', '--detach', worktree);
  t.equal(gitCommit(worktree), sha, 'a worktree on a detached HEAD (.git is a file)');
  const plain = join(work, 'plain');
  mkdirSync(plain);
  t.equal(gitCommit(plain), null, 'no checkout: null');
  t.equal(packageRoot(join(clone, 'src')), clone, 'the package root is found from src/');
  t.same(buildInfo(pathToFileURL(join(clone, 'src', 'main.ts')).href), { version: pkg.version, commit: sha });
});

t.test('a recorded commit (the single binary) is used outside a checkout', async (t) => {
  const dir = join(work, 'sea');
  mkdirSync(join(dir, 'dist', 'src'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'flashblocksd', version: '9.9.9', commit: 'ab'.repeat(20) }));
  t.same(buildInfo(pathToFileURL(join(dir, 'dist', 'src', 'main.js')).href), { version: '9.9.9', commit: 'ab'.repeat(20) });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'flashblocksd', version: '9.9.9' }));
  t.same(buildInfo(pathToFileURL(join(dir, 'dist', 'src', 'main.js')).href), { version: '9.9.9', commit: 'unknown' });
});

t.test('the daemon started from a git clone shows its commit in flashblocksd_build_info', { skip: !HAVE_GIT && 'git is not installed' }, async (t) => {
  const { clone, sha } = makeClone();
  const d = await spawnDaemon(
    [process.execPath, '--import', 'tsx', join(clone, 'src', 'main.ts')],
    ['--port', '0', '--metrics-port', '0', '--flashblocks-enabled', 'false', '--node-rpc-url', 'http://127.0.0.1:9'],
    { cwd: clone, env: childEnv },
  );
  t.teardown(() => d.close());
  const text = await (await fetch(`http://127.0.0.1:${d.metricsPort}/metrics`)).text();
  const line = /^flashblocksd_build_info\{[^}]*\} 1$/m.exec(text)?.[0] ?? '';
  t.match(line, `commit="${sha}"`, `the commit label is the clone's HEAD: ${line}`);
  t.match(line, `version="${pkg.version}"`, 'and the version label is the package version');
});

t.test('`npx flashblocksd` (bin/) without a build says to run npm run build', async (t) => {
  const dir = join(work, 'nobuild');
  mkdirSync(join(dir, 'bin'), { recursive: true });
  cpSync(join(repoRoot, 'bin', 'flashblocksd.js'), join(dir, 'bin', 'flashblocksd.js'));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'flashblocksd', type: 'module' }));
  const r = spawnSync(process.execPath, [join(dir, 'bin', 'flashblocksd.js'), '--version'], { encoding: 'utf8', env: childEnv });
  t.equal(r.status, 2);
  t.match(r.stderr, 'run `npm run build` in this checkout first');
});
