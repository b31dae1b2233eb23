// `npm run build:binary`: one executable, dist-bin/flashblocksd, that runs with no node_modules. esbuild bundles
// scripts/sea-entry.ts (→ src/main.ts) into one CommonJS file; Node's single-executable-application (SEA) support
// turns it into a blob with the native addons as assets; postject injects the blob into a copy of this node binary.
// Also embeds systemd/flashblocksd.service, which `flashblocksd unit` prints with ExecStart= set to the binary's path.
// Embeds only the addon builds this node loads (platform, arch, ABI, libc), so build on the target platform, and
// the native core (native/flashblocksd-native.node, built by `npm ci`): without it the build stops, unless
// --without-native asks for a binary that runs only with --execution false.
// Usage: tsx scripts/build-binary.ts [--out <path>] [--without-native]
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { gitCommit } from '../src/buildinfo.js';
import { tiedCommand } from '../src/child.js';
import { UNIT_ASSET } from '../src/cli/unit.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(root, 'package.json'));
const outArg = process.argv.indexOf('--out');
const out = path.resolve(outArg >= 0 && process.argv[outArg + 1] !== undefined ? process.argv[outArg + 1]! : path.join(root, 'dist-bin', 'flashblocksd'));
const work = path.join(path.dirname(out), '.sea');
const withoutNative = process.argv.includes('--without-native');
/** The native core's asset name: the path addon.ts would find it at in a checkout, relative to the runtime directory. */
const NATIVE_ASSET = 'native/flashblocksd-native.node';

/** The package directory of `name` as resolved from the project root. */
function pkgDir(name: string): string {
  return path.dirname(require.resolve(`${name}/package.json`));
}

/** The prebuilt addon node-gyp-build would load for package `name` on this machine (same platform/libc rules). */
function prebuild(name: string): string {
  const resolve = (require('node-gyp-build') as { resolve(dir: string): string }).resolve;
  return resolve(pkgDir(name));
}

/**
 * Files written to the runtime directory, by path relative to it. The keccak and secp256k1 loaders stay as they
 * are in node_modules (src/chain resolves them with createRequire), with only this platform's prebuild beside them.
 */
function embeddedFiles(): Map<string, string> {
  const files = new Map<string, string>();
  const uwsName = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  const uwsFile = path.join(pkgDir('uWebSockets.js'), 'binaries', uwsName);
  if (!fs.existsSync(uwsFile)) throw new Error(`uWebSockets.js has no ${uwsName} for this node (${process.version}); build on a supported platform`);
  files.set(uwsName, uwsFile);
  const addPkg = (name: string, rels: string[]): void => {
    const dir = pkgDir(name);
    for (const rel of rels) files.set(`node_modules/${name}/${rel}`, path.join(dir, rel));
  };
  addPkg('node-gyp-build', ['package.json', 'index.js', 'node-gyp-build.js']);
  for (const name of ['keccak', 'secp256k1']) {
    const addon = prebuild(name);
    addPkg(name, ['package.json', path.relative(pkgDir(name), addon)]);
  }
  addPkg('secp256k1', ['bindings.js', 'lib/index.js', 'lib/uint8array.js']);
  if (!withoutNative) {
    const core = path.join(root, NATIVE_ASSET);
    if (!fs.existsSync(core)) {
      throw new Error(`${NATIVE_ASSET} is not built: run \`npm ci\` (or \`npm run build:native\`) first, or pass --without-native for a binary without the execution engine`);
    }
    files.set(NATIVE_ASSET, core);
  }
  return files;
}

/**
 * ws's optional accelerators (bufferutil, utf-8-validate) as modules that throw on load: ws catches that and uses
 * its JS code. (Left external, they would reach the SEA's builtin-only require, which prints a warning.)
 */
const absentOptionalModules: Plugin = {
  name: 'absent-optional-modules',
  setup(b) {
    b.onResolve({ filter: /^(bufferutil|utf-8-validate)$/ }, (args) => ({ path: args.path, namespace: 'absent' }));
    b.onLoad({ filter: /.*/, namespace: 'absent' }, (args) => ({ contents: `throw new Error(${JSON.stringify(args.path + ' is not bundled')});`, loader: 'js' }));
  },
};

function sha256(data: Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

async function main(): Promise<void> {
  const started = Date.now();
  fs.rmSync(work, { recursive: true, force: true });
  fs.mkdirSync(work, { recursive: true });

  const bundle = path.join(work, 'flashblocksd.cjs');
  const result = await build({
    entryPoints: [path.join(root, 'scripts', 'sea-entry.ts')],
    outfile: bundle,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    // Set by sea-entry.ts to a file under the runtime directory before any other module runs.
    define: { 'import.meta.url': 'globalThis.__flashblocksdMetaUrl' },
    plugins: [absentOptionalModules],
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'none',
    logLevel: 'warning',
    // main.ts imports the devnet with computed paths on purpose: it stays out of the bundle.
    logOverride: { 'unsupported-dynamic-import': 'silent' },
  });
  if (result.errors.length > 0) throw new Error('esbuild failed');

  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { name: string; version: string };
  const files = embeddedFiles();
  const assets: Record<string, string> = {};
  const listed: { path: string; bytes: number; sha256: string }[] = [];
  const hash = createHash('sha256');
  // main.ts reads the version from ../../package.json relative to import.meta.url (<dir>/dist/src/main.js).
  const pkgJson = path.join(work, 'package.json');
  // The commit too: the binary runs outside any checkout (src/buildinfo.ts reads it for the build-info metric).
  fs.writeFileSync(pkgJson, JSON.stringify({ name: pkg.name, version: pkg.version, private: true, commit: gitCommit(root) ?? undefined }) + '\n');
  files.set('package.json', pkgJson);
  for (const [rel, src] of [...files].sort(([a], [b]) => a.localeCompare(b))) {
    const data = fs.readFileSync(src);
    assets[rel] = src;
    const digest = sha256(data);
    listed.push({ path: rel, bytes: data.length, sha256: digest });
    hash.update(rel + '\0' + digest + '\n');
  }
  const uws = [...files.keys()].find((k) => k.startsWith('uws_'))!;
  const manifest = { hash: hash.digest('hex').slice(0, 16), files: listed, uws, native: files.has(NATIVE_ASSET) ? NATIVE_ASSET : null };
  const manifestFile = path.join(work, 'manifest.json');
  fs.writeFileSync(manifestFile, JSON.stringify(manifest));
  assets['manifest.json'] = manifestFile;
  // Read in place by src/cli/unit.ts (getAsset), never extracted: not in the manifest.
  const unitFile = path.join(root, 'systemd', 'flashblocksd.service');
  if (!fs.existsSync(unitFile)) throw new Error(`${unitFile} is missing: \`flashblocksd unit\` prints it`);
  assets[UNIT_ASSET] = unitFile;

  const bundleBytes = fs.statSync(bundle).size;
  const blob = path.join(work, 'sea.blob');
  const seaConfig = path.join(work, 'sea-config.json');
  fs.writeFileSync(seaConfig, JSON.stringify({ main: bundle, output: blob, disableExperimentalSEAWarning: true, useCodeCache: true, assets }, null, 2));
  // Tied (src/child.ts): a build killed with -9 leaves no node/postject behind.
  const sea = tiedCommand(process.execPath, ['--experimental-sea-config', seaConfig]);
  execFileSync(sea.file, sea.args, { stdio: 'inherit' });

  fs.rmSync(out, { force: true });
  fs.copyFileSync(process.execPath, out);
  fs.chmodSync(out, 0o755);
  const postject = path.join(pkgDir('postject'), 'dist', 'cli.js');
  const inject = tiedCommand(process.execPath, [postject, out, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2']);
  execFileSync(inject.file, inject.args, { stdio: ['ignore', 'ignore', 'pipe'] });
  fs.rmSync(work, { recursive: true, force: true });

  const mib = (n: number): string => (n / 1024 / 1024).toFixed(1);
  const embedded = listed.reduce((s, f) => s + f.bytes, 0);
  process.stdout.write(
    `built ${path.relative(process.cwd(), out) || out}: ${mib(fs.statSync(out).size)} MiB (node ${process.version} ${mib(fs.statSync(process.execPath).size)} MiB, ` +
      `bundle ${mib(bundleBytes)} MiB, ${listed.length} embedded files ${mib(embedded)} MiB, ` +
      `${manifest.native === null ? 'WITHOUT the native core' : `native core ${mib(fs.statSync(path.join(root, NATIVE_ASSET)).size)} MiB`}) in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
  );
}

main().catch((e: unknown) => {
  process.stderr.write(`build-binary: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
