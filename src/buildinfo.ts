// Build identity for --version and the build-info metric: the package version and the git commit of the checkout
// (or of the build, for the single binary) it runs from. Reads files only: no git binary, no child process. A leaf.
import { readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** What this build is. `commit` is 'unknown' outside a git checkout when none was recorded at build time. */
export interface BuildInfo {
  readonly version: string;
  readonly commit: string;
}

const PACKAGE_NAME = 'flashblocksd';
const SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

/**
 * The directory holding this package's package.json, searched upwards from `fromDir` (src/ under tsx, dist/src/
 * when built, the extraction directory's dist/src/ in the single binary); null when not found within 5 levels.
 */
export function packageRoot(fromDir: string): string | null {
  let dir = fromDir;
  for (let i = 0; i < 5; i++) {
    const text = readText(join(dir, 'package.json'));
    if (text !== null) {
      try {
        if ((JSON.parse(text) as { name?: unknown }).name === PACKAGE_NAME) return dir;
      } catch {
        // not ours; keep looking
      }
    }
    const up = dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return null;
}

/** The git directory of a checkout at `root`: `.git` itself, or where a worktree's `.git` file points. */
function gitDir(root: string): string | null {
  const dotGit = join(root, '.git');
  try {
    if (statSync(dotGit).isDirectory()) return dotGit;
  } catch {
    return null;
  }
  const m = /^gitdir:\s*(.+?)\s*$/m.exec(readText(dotGit) ?? '');
  return m === null ? null : resolve(root, m[1] as string);
}

/** Resolves a ref (`refs/heads/main`) in `dir` and its common directory (worktrees), loose first, then packed. */
function resolveRef(dir: string, ref: string): string | null {
  const common = readText(join(dir, 'commondir'));
  const dirs = common === null ? [dir] : [dir, resolve(dir, common.trim())];
  for (const d of dirs) {
    const loose = readText(join(d, ref))?.trim();
    if (loose !== undefined && SHA.test(loose)) return loose;
  }
  for (const d of dirs) {
    for (const line of (readText(join(d, 'packed-refs')) ?? '').split('\n')) {
      const [sha, name] = line.trim().split(' ');
      if (name === ref && sha !== undefined && SHA.test(sha)) return sha;
    }
  }
  return null;
}

/** The commit checked out at `root` (a clone or a worktree; HEAD on a branch or detached), or null. */
export function gitCommit(root: string): string | null {
  const dir = gitDir(root);
  if (dir === null) return null;
  const head = readText(join(dir, 'HEAD'))?.trim();
  if (head === undefined) return null;
  if (SHA.test(head)) return head;
  const m = /^ref:\s*(\S+)$/.exec(head);
  return m === null ? null : resolveRef(dir, m[1] as string);
}

/**
 * The version from package.json and the commit: the checkout's HEAD, else a `commit` field the single-binary build
 * writes into its package.json, else 'unknown'. `moduleUrl` is the caller's import.meta.url.
 */
export function buildInfo(moduleUrl: string): BuildInfo {
  const root = packageRoot(dirname(fileURLToPath(moduleUrl)));
  if (root === null) return { version: '0.0.0', commit: 'unknown' };
  let pkg: { version?: unknown; commit?: unknown } = {};
  try {
    pkg = JSON.parse(readText(join(root, 'package.json')) ?? '{}') as typeof pkg;
  } catch {
    // keep the defaults
  }
  const recorded = typeof pkg.commit === 'string' && SHA.test(pkg.commit) ? pkg.commit : null;
  return {
    version: typeof pkg.version === 'string' ? pkg.version : '0.0.0',
    commit: gitCommit(root) ?? recorded ?? 'unknown',
  };
}
