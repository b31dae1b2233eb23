// Builds dist/ with tsc only when the sources changed: `npm start`, `devnet`, `cluster` and `setup` run this first.
// Plain JavaScript so it runs before anything is compiled; owns dist/.build-stamp, never the compiler's options.
// A no-change start costs one hash of the sources (~0.1 s) instead of tsc (10–25 s here; `tsc -b` with its
// build info still took 1.7 s to find nothing to do).
// Usage: node scripts/build-if-changed.mjs [--always] [--root <dir>]
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const argv = process.argv.slice(2);
const rootArg = argv.indexOf('--root');
const root = path.resolve(rootArg >= 0 ? argv[rootArg + 1] : path.join(path.dirname(fileURLToPath(import.meta.url)), '..'));
const always = argv.includes('--always');
const project = 'tsconfig.build.json';
const stampFile = path.join(root, 'dist', '.build-stamp');

/** Every file under `dir` (relative to root), sorted; missing directories are empty. */
function filesUnder(dir) {
  const out = [];
  const walk = (rel) => {
    let entries;
    try {
      entries = fs.readdirSync(path.join(root, rel), { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const child = path.join(rel, e.name);
      if (e.isDirectory()) walk(child);
      else if (e.isFile()) out.push(child);
    }
  };
  walk(dir);
  return out.sort();
}

/** A hash of what tsc reads for the build: the compiler configs and every file under src/ and scripts/ (names and contents). */
function sourcesHash() {
  const h = createHash('sha256');
  h.update(process.version + '\n');
  for (const rel of ['tsconfig.json', project, ...filesUnder('src'), ...filesUnder('scripts')]) {
    h.update(rel + '\0');
    try {
      h.update(fs.readFileSync(path.join(root, rel)));
    } catch {
      h.update('(missing)');
    }
    h.update('\n');
  }
  return h.digest('hex');
}

const hash = sourcesHash();
const built = () => {
  try {
    return fs.readFileSync(stampFile, 'utf8').trim() === hash && fs.existsSync(path.join(root, 'dist', 'src', 'main.js'));
  } catch {
    return false; // never built
  }
};
if (!always && built()) process.exit(0);

// One build at a time: `npm start` and `npm run devnet` started together (or test files that start them) would
// otherwise each run tsc over the same dist/. The lock is a directory (mkdir is atomic) holding the builder's pid;
// a lock whose builder is gone is taken over. A waiter that finds the build done by the other exits at once.
const lockDir = path.join(root, 'dist', '.build-lock');
const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
};
fs.mkdirSync(path.join(root, 'dist'), { recursive: true });
const waitUntil = Date.now() + 10 * 60_000;
for (;;) {
  try {
    fs.mkdirSync(lockDir);
    fs.writeFileSync(path.join(lockDir, 'pid'), String(process.pid));
    break;
  } catch (e) {
    if (e.code !== 'EEXIST') throw e;
    let owner = NaN;
    try {
      owner = Number(fs.readFileSync(path.join(lockDir, 'pid'), 'utf8'));
    } catch {
      // created, pid not written yet
    }
    if (Number.isInteger(owner) && owner > 0 && !alive(owner)) {
      fs.rmSync(lockDir, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > waitUntil) {
      process.stderr.write(`build: ${lockDir} has been held for 10 minutes (pid ${owner}); remove it if no build runs\n`);
      process.exit(1);
    }
    spawnSync('sleep', ['0.2']);
  }
}
const unlock = () => fs.rmSync(lockDir, { recursive: true, force: true });
if (!always && built()) {
  unlock();
  process.exit(0);
}

let stamp = '';
try {
  stamp = fs.readFileSync(stampFile, 'utf8').trim();
} catch {
  // never built
}
process.stderr.write(`build: ${stamp === '' ? 'no build yet' : always ? 'asked to' : 'sources changed'}; compiling with tsc (takes a few seconds) …\n`);
const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const r = spawnSync(process.execPath, [tsc, '-p', project], { cwd: root, stdio: 'inherit' });
if (r.status !== 0) {
  // A failed build leaves no stamp: the next start compiles again and shows the errors.
  fs.rmSync(stampFile, { force: true });
  unlock();
  process.exit(r.status ?? 1);
}
// The hash taken before compiling: a source edited during the build makes the next start compile again.
fs.writeFileSync(stampFile, hash + '\n');
unlock();
