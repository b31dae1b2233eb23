// The native core (the Rust crate in native/, built by `npm ci`): finds and loads its N-API addon once. The only
// place that loads it; src/exec/revm.ts wraps it. Knows nothing of flashblocks.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The addon's engine class (native/src/lib.rs), as N-API exposes it: JSON strings in, Promises of JSON out. */
export interface AddonEngine {
  reset(height: number): Promise<string>;
  apply(work: string): Promise<string>;
  settle(number: number, hash: string, keep: boolean): Promise<string>;
  read(req: string): Promise<string>;
  stats(): string;
  panicNextApply(): void;
  close(): void;
}

export interface Addon {
  Engine: new (nodeUrl: string, cacheCapBytes: number, readThreads: number, timeoutMs: number) => AddonEngine;
}

/** The addon file's name, under native/ in the package (or beside the single binary). */
export const ADDON_FILE = 'flashblocksd-native.node';

/** Where the addon is looked for: FLASHBLOCKSD_NATIVE, then native/ of the package this file belongs to. */
export function addonCandidates(): string[] {
  const out: string[] = [];
  if (process.env.FLASHBLOCKSD_NATIVE) out.push(resolve(process.env.FLASHBLOCKSD_NATIVE));
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    out.push(join(dir, 'native', ADDON_FILE));
    dir = dirname(dir);
  }
  return out;
}

let loaded: Addon | Error | null = null;

/** The addon, or an Error saying why it could not be loaded (missing, or built for another platform). */
export function loadAddon(): Addon | Error {
  if (loaded !== null) return loaded;
  const path = addonCandidates().find((p) => existsSync(p));
  if (path === undefined) {
    loaded = new Error(`the native core (${ADDON_FILE}) is not built: run \`npm ci\` (needs the Rust toolchain, cargo ≥ 1.94) or \`npm run build:native\``);
    return loaded;
  }
  try {
    loaded = createRequire(import.meta.url)(path) as Addon;
    if (typeof loaded.Engine !== 'function') loaded = new Error(`${path} is not flashblocksd's native core`);
  } catch (e) {
    loaded = new Error(`the native core at ${path} did not load: ${(e as Error).message}; rebuild it with \`npm run build:native\``);
  }
  return loaded;
}
