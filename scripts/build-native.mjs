#!/usr/bin/env node
// Builds the native core (native/, a Rust crate: op-revm behind N-API) from source with the committed Cargo.lock and
// puts the addon at native/flashblocksd-native.node. Run by `npm ci` / `npm install` (the package's install script)
// and by `npm run build:native`. A first build takes about a minute of cargo on 2 cores (62 s measured, crates already downloaded); later builds reuse
// native/target/. Without cargo it says what to install and leaves the daemon to refuse execution at start-up.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { typingsOf } from './native-typings.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const crate = join(root, 'native');
const out = join(crate, 'flashblocksd-native.node');

if (process.env.FLASHBLOCKSD_SKIP_NATIVE === '1') {
  console.log('flashblocksd: FLASHBLOCKSD_SKIP_NATIVE=1, native core not built');
  process.exit(0);
}
const probe = spawnSync('cargo', ['--version'], { encoding: 'utf8' });
if (probe.error || probe.status !== 0) {
  console.error(
    'flashblocksd: cargo (the Rust toolchain, ≥ 1.94) was not found, so the native execution engine was not built.\n' +
      '  Install Rust (https://rustup.rs) and run `npm run build:native`; until then the daemon refuses to start with\n' +
      '  execution on (run it with --execution false to serve pending from the stream alone).',
  );
  process.exit(0);
}
const t0 = Date.now();
console.log(`flashblocksd: building the native core with ${probe.stdout.trim()} (the first build takes a minute or two)…`);
// napi-derive writes the #[napi] items' TypeScript here whenever it compiles the crate (a fixed path: a new one would
// make cargo compile the crate again on every build).
const typeDefs = join(crate, 'target', 'napi-typedefs');
mkdirSync(typeDefs, { recursive: true });
const build = spawnSync('cargo', ['build', '--release', '--locked', '--manifest-path', join(crate, 'Cargo.toml')], {
  stdio: 'inherit',
  env: { ...process.env, NAPI_TYPE_DEF_TMP_FOLDER: typeDefs },
});
const defs = join(typeDefs, 'flashblocksd-native');
if (build.status === 0 && existsSync(defs)) writeFileSync(join(crate, 'index.d.ts'), typingsOf(readFileSync(defs, 'utf8')));
if (build.status !== 0) {
  console.error('flashblocksd: the native core failed to build (see cargo\'s output above).');
  process.exit(1);
}
const lib = join(crate, 'target', 'release', process.platform === 'darwin' ? 'libflashblocksd_native.dylib' : 'libflashblocksd_native.so');
if (!existsSync(lib)) {
  console.error(`flashblocksd: cargo succeeded but ${lib} is missing`);
  process.exit(1);
}
mkdirSync(crate, { recursive: true });
// Copy then rename: a running daemon keeps the old file mapped; the new one replaces it atomically.
copyFileSync(lib, out + '.tmp');
renameSync(out + '.tmp', out);
console.log(`flashblocksd: native core built in ${((Date.now() - t0) / 1000).toFixed(0)} s → native/flashblocksd-native.node`);
