// Start-up checks that the native binaries loaded: uWebSockets.js (which silently falls back to a slow pure-JS
// server), secp256k1 and keccak (which silently fall back to JS). Refuses to start when uWS is not native.
// Two uWebSockets.js builds are installed: the pinned one (binaries up to Node 20's ABI, glibc >= 2.28) and a recent
// one (optional dependency uWebSockets.js-recent: Node 20, 22, 24, 25, glibc >= 2.38); loadUws takes the first whose
// binary for this Node loads. Inside the single-file binary, uWS is the addon scripts/sea-entry.ts extracted, loaded
// with process.dlopen.
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { isSea } from 'node:sea';
import { StartupCode, StartupError } from './errors.js';
import { keccakIsNative, keccakLoadError } from './chain/keccak.js';
import { secp256k1IsNative, secp256k1LoadError } from './chain/sender.js';
import type { Logger } from './log.js';

const require = createRequire(import.meta.url);

/** What loaded natively. */
export interface NativeReport {
  uws: boolean;
  /** The uWebSockets.js build in use ("uWebSockets.js-recent (@btc-vision/uwebsockets.js 20.57.0)"); null when loadUws did not load this module. */
  uwsBuild: string | null;
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
  const report: NativeReport = { uws: uwsIsNative(uwsModule), uwsBuild: loadedBuilds.get(uwsModule as object) ?? null, secp256k1: bindings.secp256k1 === null, keccak: bindings.keccak === null };
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

/** One installed uWebSockets.js build the loader may use, as chooseUws sees it. */
export interface UwsBuild {
  /** "uWebSockets.js (@trufflesuite/uws-js-unofficial 20.30.0-unofficial.0)": the installed name and what it is. */
  readonly label: string;
  /** The Node ABIs (process.versions.modules) it has a binary for on this platform and arch; null = not installed. */
  readonly abis: readonly number[] | null;
  /** Where it runs, for the refusal: "Node 20 on glibc ≥ 2.28". */
  readonly worksOn: string;
  /** Loads its binary for `abi`; throws what dlopen said. */
  load(abi: number): unknown;
}

/** The running Node as the choice needs it. */
export interface UwsRuntime {
  node: string;
  abi: number;
  platform: string;
  arch: string;
  /** The C library's version ("2.36"), null when not glibc (musl, macOS, Windows); asked only for a refusal. */
  glibc(): string | null;
}

/** Node's release line of each module ABI the builds carry (nodejs.org/en/download/releases, NODE_MODULE_VERSION). */
const NODE_OF_ABI: Readonly<Record<number, string>> = { 93: '16', 108: '18', 115: '20', 127: '22', 137: '24', 141: '25' };
const nodeOfAbi = (abi: number): string => NODE_OF_ABI[abi] ?? `ABI ${abi}`;

/**
 * The first build whose binary for this Node loads and is native, in order (the pinned build first). A build with
 * no binary for this ABI is not loaded at all (the pinned package would print a warning and fall back to JS).
 * None → StartupError E_NATIVE naming Node, ABI, platform, glibc, why each build did not load and what works.
 */
export function chooseUws(builds: readonly UwsBuild[], rt: UwsRuntime): { module: unknown; build: UwsBuild } {
  const why: string[] = [];
  for (const build of builds) {
    if (build.abis === null) {
      why.push(`${build.label} is not installed (\`npm ci\` installs it)`);
      continue;
    }
    if (!build.abis.includes(rt.abi)) {
      const nodes = build.abis.map(nodeOfAbi);
      why.push(`${build.label} has binaries for Node ${nodes.length > 0 ? nodes.join(', ') : 'none'} only on ${rt.platform}-${rt.arch}`);
      continue;
    }
    let module: unknown;
    try {
      module = build.load(rt.abi);
    } catch (e) {
      why.push(`${build.label}: its binary did not load: ${firstLine(e)}`);
      continue;
    }
    if (uwsIsNative(module)) return { module, build };
    why.push(`${build.label}: its binary loaded but is not the native addon`);
  }
  const glibc = rt.glibc();
  throw new StartupError(
    StartupCode.NATIVE_MISSING,
    `no uWebSockets.js build loads natively on node ${rt.node} (ABI ${rt.abi}, ${rt.platform}-${rt.arch}, ${glibc === null ? 'no glibc' : `glibc ${glibc}`}): ` +
      `${why.join('; ')}. Refusing to run on the slow JS fallback. ` +
      `What works (x64/arm64 Linux, macOS): ${builds.map((b) => b.worksOn).join(', or ')}; then reinstall with \`npm ci\`.`,
  );
}

/** The first line of an error's message, the part that says why (dlopen's "version `GLIBC_2.38' not found"). */
function firstLine(e: unknown): string {
  const msg = e instanceof Error ? e.message : String(e);
  return msg.split('\n').find((l) => l.trim() !== '')?.trim() ?? 'unknown error';
}

/**
 * An installed build by package name: its binaries are `uws_<platform>_<arch>_<abi>.node` in `binDir` (relative to
 * the package root). Loads the binary itself, as each package's own loader does, without its JS fallback.
 */
function installedBuild(name: string, binDir: string, worksOn: string): UwsBuild {
  let root: string | null;
  let label = name;
  try {
    root = packageRoot(require.resolve(name));
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name?: string; version?: string };
    label = `${name} (${pkg.name ?? '?'} ${pkg.version ?? '?'})`;
  } catch {
    root = null;
  }
  const prefix = `uws_${process.platform}_${process.arch}_`;
  let abis: number[] | null = null;
  if (root !== null) {
    try {
      abis = readdirSync(join(root, binDir))
        .filter((f) => f.startsWith(prefix) && f.endsWith('.node'))
        .map((f) => Number(f.slice(prefix.length, -'.node'.length)))
        .filter((n) => Number.isInteger(n))
        .sort((a, b) => a - b);
    } catch {
      abis = [];
    }
  }
  const dir = root === null ? '' : join(root, binDir);
  return { label, abis, worksOn, load: (abi) => require(join(dir, `${prefix}${abi}.node`)) as unknown };
}

/** The directory holding the package.json of the package whose main file is `main`. */
function packageRoot(main: string): string {
  let dir = dirname(main);
  for (let i = 0; i < 4; i++) {
    try {
      readFileSync(join(dir, 'package.json'));
      return dir;
    } catch {
      dir = dirname(dir);
    }
  }
  throw new Error(`no package.json above ${main}`);
}

/** The installed builds, in the order loadUws tries them. */
export function installedUwsBuilds(): UwsBuild[] {
  return [
    installedBuild('uWebSockets.js', 'binaries', 'Node 20 on glibc ≥ 2.28'),
    installedBuild('uWebSockets.js-recent', '.', 'Node 20, 22, 24 or 25 on glibc ≥ 2.38 (Debian 13, Ubuntu 24.04)'),
  ];
}

/** This process's Node for chooseUws. */
export function currentRuntime(): UwsRuntime {
  return {
    node: process.versions.node,
    abi: Number(process.versions.modules),
    platform: process.platform,
    arch: process.arch,
    glibc: () => {
      const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
      return header?.glibcVersionRuntime ?? null;
    },
  };
}

/** Each module loadUws returned, with the build it came from (checkNative reports it). */
const loadedBuilds = new WeakMap<object, string>();
let chosen: typeof import('uWebSockets.js') | null = null;

/**
 * Loads uWebSockets.js: the first installed build whose native binary loads on this Node (chooseUws), once per
 * thread; in the single-file binary, the embedded addon itself (there is no JS fallback to fall to).
 */
export function loadUws(): typeof import('uWebSockets.js') {
  if (chosen !== null) return chosen;
  if (isSea()) {
    chosen = loadEmbeddedUws();
    loadedBuilds.set(chosen, 'embedded in this binary');
    return chosen;
  }
  const { module, build } = chooseUws(installedUwsBuilds(), currentRuntime());
  chosen = module as typeof import('uWebSockets.js');
  loadedBuilds.set(chosen, build.label);
  return chosen;
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
