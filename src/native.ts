// Start-up checks that the native binaries loaded: uWebSockets.js (which silently falls back to a slow pure-JS
// server), secp256k1 and keccak (which silently fall back to JS). Refuses to start when uWS is not native.
// Inside the single-file binary, uWS is the addon scripts/sea-entry.ts extracted, loaded with process.dlopen.
import { createRequire } from 'node:module';
import { isSea } from 'node:sea';
import { StartupCode, StartupError } from './errors.js';
import { keccakIsNative, keccakLoadError } from './chain/keccak.js';
import { secp256k1IsNative, secp256k1LoadError } from './chain/sender.js';
import type { Logger } from './log.js';

const require = createRequire(import.meta.url);

/** What loaded natively. */
export interface NativeReport {
  uws: boolean;
  secp256k1: boolean;
  keccak: boolean;
}

/** True when the uWebSockets.js module in use is the native addon, not the package's JS fallback. */
export function uwsIsNative(mod: unknown): boolean {
  const m = mod as { App?: unknown; getParts?: unknown };
  return typeof m.getParts === 'function' && typeof m.App === 'function' && /\[native code\]/.test(String(m.App));
}

/**
 * Checks the native modules. uWS not native → StartupError E_NATIVE (the fallback is an order of magnitude slower);
 * secp256k1/keccak not native → a loud warning (correct, but slower sender recovery and hashing).
 */
export function checkNative(
  uwsModule: unknown,
  log: Logger,
  /** Why each JS-fallback binding did not load (null = loaded); the modules' own answers unless a test gives them. */
  bindings: { secp256k1: string | null; keccak: string | null } = { secp256k1: secp256k1IsNative ? null : secp256k1LoadError, keccak: keccakIsNative ? null : keccakLoadError },
): NativeReport {
  const report: NativeReport = { uws: uwsIsNative(uwsModule), secp256k1: bindings.secp256k1 === null, keccak: bindings.keccak === null };
  if (!report.uws) {
    throw new StartupError(
      StartupCode.NATIVE_MISSING,
      `uWebSockets.js native binary did not load for node ${process.versions.node} (ABI ${process.versions.modules}, ${process.platform}-${process.arch}); ` +
        'refusing to run on the slow JS fallback. ' +
        (isSea() ? 'Build the binary on the platform it runs on (glibc ≥ 2.28, x64/arm64).' : 'Reinstall with `npm ci` on a supported platform (glibc ≥ 2.28, x64/arm64).'),
    );
  }
  const missing = (['secp256k1', 'keccak'] as const).filter((k) => !report[k]);
  // The binary embeds the builds of the machine it was built on; a checkout gets them from npm (a prebuild, else
  // a compile by the package's install script, which npm 11 runs only as package.json's allowScripts approves).
  const fix = isSea()
    ? 'build the binary on this platform (npm run build:binary)'
    : `run \`npm rebuild ${missing.join(' ')}\` (a C++ toolchain is needed where no prebuild matches this platform)`;
  if (!report.secp256k1) log.warn(`secp256k1 native binding did not load; sender recovery uses @noble/curves (about 20x slower); ${fix}`, { error: bindings.secp256k1 });
  if (!report.keccak) log.warn(`keccak native binding did not load; hashing uses @noble/hashes (about 2.5x slower); ${fix}`, { error: bindings.keccak });
  return report;
}

/** Where scripts/sea-entry.ts leaves the path of the extracted uWebSockets.js addon. */
const SEA_UWS_KEY = Symbol.for('flashblocksd.sea.uwsAddonPath');

/**
 * Loads uWebSockets.js (CommonJS) through require so the fallback check sees the real module object; in the
 * single-file binary, the embedded addon itself (there is no JS fallback to fall to).
 */
export function loadUws(): typeof import('uWebSockets.js') {
  if (isSea()) return loadEmbeddedUws();
  return require('uWebSockets.js') as typeof import('uWebSockets.js');
}

function loadEmbeddedUws(): typeof import('uWebSockets.js') {
  const file = (globalThis as Record<symbol, unknown>)[SEA_UWS_KEY];
  if (typeof file !== 'string') {
    throw new StartupError(StartupCode.NATIVE_MISSING, 'this binary did not extract its uWebSockets.js addon (scripts/sea-entry.ts must be the entry); rebuild with `npm run build:binary`');
  }
  const mod = { exports: {} as unknown };
  try {
    process.dlopen(mod, file);
  } catch (e) {
    throw new StartupError(
      StartupCode.NATIVE_MISSING,
      `cannot load the embedded uWebSockets.js addon from ${file}: ${(e as Error).message}. ` +
        'Its directory must allow executable mappings (not mounted noexec): set RUNTIME_DIRECTORY or XDG_RUNTIME_DIR to another directory.',
    );
  }
  return mod.exports as typeof import('uWebSockets.js');
}

/** uWS's LIBUS_LISTEN_EXCLUSIVE_PORT: bind without SO_REUSEPORT (the typings lack the host+options overload). */
const LISTEN_EXCLUSIVE_PORT = 1;

/** `app.listen(host, port, options, cb)` with the exclusive-port option: `cb(false)` when the port is taken. */
export function listenExclusive(app: unknown, host: string, port: number, cb: (socket: unknown) => void): void {
  (app as { listen(host: string, port: number, options: number, cb: (s: unknown) => void): unknown }).listen(host, port, LISTEN_EXCLUSIVE_PORT, cb);
}
