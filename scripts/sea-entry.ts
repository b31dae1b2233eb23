// Entry of the single-file binary (bundled by scripts/build-binary.ts; never run from source). Before any daemon
// module loads, writes the embedded native addons (uWS, keccak, secp256k1, the native core) and their loaders to a
// private runtime directory and points the bundle's import.meta.url there; then starts src/main.ts. Must not import
// daemon modules statically, and loads no addon itself (src/binaries.ts, src/chain and src/exec/addon.ts do).
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { getAsset, isSea } from 'node:sea';

/** What scripts/build-binary.ts embeds under the asset name `manifest.json`. */
interface Manifest {
  /** Content hash of all embedded files (names the runtime directory, so a new build never reuses old files). */
  hash: string;
  /** Embedded files: asset name = path relative to the runtime directory, size and SHA-256 (hex) of the content. */
  files: { path: string; bytes: number; sha256: string }[];
  /** Relative path of the uWebSockets.js addon, loaded with process.dlopen by src/binaries.ts. */
  uws: string;
  /** Relative path of the native core (loaded by src/exec/addon.ts), or null: built with --without-native. */
  native: string | null;
}

/** Where src/binaries.ts finds the extracted uWebSockets.js addon (see SEA_UWS_KEY there). */
const SEA_UWS_KEY = Symbol.for('flashblocksd.sea.uwsAddonPath');
/** Where src/exec/addon.ts finds the extracted native core, null when the binary has none (see SEA_NATIVE_KEY there). */
const SEA_NATIVE_KEY = Symbol.for('flashblocksd.sea.nativeAddonPath');

function fail(msg: string): never {
  process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level: 'error', msg, code: 'E_NATIVE' }) + '\n');
  process.exit(2);
}

/** A directory only this user can use: created 0700, or an existing one we own that nobody else can write to. */
function privateDir(dir: string): boolean {
  try {
    fs.mkdirSync(dir, { mode: 0o700 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') return false;
  }
  const st = fs.lstatSync(dir);
  return st.isDirectory() && st.uid === process.getuid?.() && (st.mode & 0o077) === 0;
}

/** The first of systemd's RuntimeDirectory, $XDG_RUNTIME_DIR, the temp dir that can hold a private directory. */
function runtimeDir(hash: string): string {
  const uid = process.getuid?.() ?? 0;
  const bases = [process.env.RUNTIME_DIRECTORY?.split(':')[0], process.env.XDG_RUNTIME_DIR, os.tmpdir()].filter(
    (b): b is string => b !== undefined && b !== '' && path.isAbsolute(b),
  );
  for (const base of bases) {
    const dir = path.join(base, `flashblocksd-${uid}-${hash}`);
    try {
      if (privateDir(dir)) return dir;
    } catch {
      // try the next base
    }
  }
  // Every shared name is taken by someone else (or not private): a fresh directory (mkdtemp creates it 0700).
  try {
    return fs.mkdtempSync(path.join(os.tmpdir(), 'flashblocksd-'));
  } catch (e) {
    fail(`cannot create a private runtime directory for the native addons: ${(e as Error).message}; set RUNTIME_DIRECTORY or XDG_RUNTIME_DIR to a writable directory`);
  }
}

/** True when `file` is a regular file (not a link) of `bytes` bytes whose SHA-256 is `sha256`. */
function identical(file: string, bytes: number, sha256: string): boolean {
  try {
    const st = fs.lstatSync(file);
    return st.isFile() && st.size === bytes && createHash('sha256').update(fs.readFileSync(file)).digest('hex') === sha256;
  } catch {
    return false;
  }
}

/**
 * Writes each embedded file unless an earlier start already wrote it identically (same content-hashed directory,
 * same bytes: checked, about 10 ms for all of them). Read-only for its owner: addons 0500, the rest 0400.
 */
function extract(dir: string, m: Manifest): void {
  for (const f of m.files) {
    const target = path.join(dir, f.path);
    if (identical(target, f.bytes, f.sha256)) continue;
    fs.mkdirSync(path.dirname(target), { recursive: true, mode: 0o700 });
    // Write then rename: a concurrent start never sees, and never dlopens, a half-written file.
    const tmp = `${target}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    fs.writeFileSync(tmp, new Uint8Array(getAsset(f.path)), { mode: f.path.endsWith('.node') ? 0o500 : 0o400 });
    fs.renameSync(tmp, target);
  }
}

if (!isSea()) fail('this bundle runs only inside the flashblocksd single executable (npm run build:binary); from source use `npm start`');
const manifest = JSON.parse(getAsset('manifest.json', 'utf8')) as Manifest;
const dir = runtimeDir(manifest.hash);
try {
  extract(dir, manifest);
} catch (e) {
  fail(`cannot write the native addons to ${dir}: ${(e as Error).message}; set RUNTIME_DIRECTORY or XDG_RUNTIME_DIR to a writable directory`);
}
// The bundle's import.meta.url (an esbuild define): createRequire() in src/ then resolves keccak and secp256k1 from
// <dir>/node_modules, and main.ts reads the version from <dir>/package.json.
(globalThis as Record<string, unknown>).__flashblocksdMetaUrl = pathToFileURL(path.join(dir, 'dist', 'src', 'main.js')).href;
(globalThis as Record<symbol, unknown>)[SEA_UWS_KEY] = path.join(dir, manifest.uws);
(globalThis as Record<symbol, unknown>)[SEA_NATIVE_KEY] = manifest.native === null || manifest.native === undefined ? null : path.join(dir, manifest.native);
void import('../src/main.js');
