import t from 'tap';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { checkNative, chooseUws, installedUwsBuilds, loadUws, uwsIsNative, type UwsBuild, type UwsRuntime } from '../src/binaries.js';
import { createLogger, silentLogger } from '../src/log.js';
import { StartupError } from '../src/errors.js';

const require = createRequire(import.meta.url);

t.test('the uWebSockets.js native binary loaded on this machine', async (t) => {
  t.ok(uwsIsNative(loadUws()));
  const r = checkNative(loadUws(), silentLogger);
  t.match(r, { uws: true, secp256k1: true, keccak: true }, 'all three native bindings are in use');
  t.match(r.uwsBuild, /^uWebSockets\.js(-recent)? \(@/, `the build in use is reported: ${r.uwsBuild}`);
});

t.test("the package's pure-JS fallback is detected and refused", async (t) => {
  const fallback = require('uWebSockets.js/dist/index') as unknown;
  t.notOk(uwsIsNative(fallback));
  let err: unknown;
  try {
    checkNative(fallback, silentLogger);
  } catch (e) {
    err = e;
  }
  t.ok(err instanceof StartupError && err.code === 'E_NATIVE');
  t.match((err as Error).message, /refusing to run on the slow JS fallback/);
});

t.test('a secp256k1 or keccak binding that did not load is a warning with its load error and the command that fixes it', async (t) => {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({ level: 'info', write: (l) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
  const r = checkNative(loadUws(), log, { secp256k1: "Cannot find module 'secp256k1/bindings'", keccak: 'No native build was found for platform=linux arch=arm64' });
  t.match(r, { uws: true, secp256k1: false, keccak: false });
  t.equal(lines.length, 2);
  t.match(lines[0], { level: 'warn', msg: /^secp256k1 native binding did not load; .*; run `npm rebuild secp256k1 keccak`/, error: "Cannot find module 'secp256k1/bindings'" });
  t.match(lines[1], { level: 'warn', msg: /^keccak native binding did not load; .*; run `npm rebuild secp256k1 keccak`/, error: /No native build was found/ });
  lines.length = 0;
  checkNative(loadUws(), log, { secp256k1: null, keccak: null });
  t.same(lines, [], 'nothing said when both loaded');
});

t.test('npm 11 install scripts: every dependency with one is reviewed in package.json (no warning at npm ci), the native bindings approved', async (t) => {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { allowScripts?: Record<string, boolean> };
  t.match(pkg.allowScripts, { keccak: true, secp256k1: true }, 'the bindings checked above may build where no prebuild matches');
  const out = execFileSync('npm', ['install-scripts', 'ls', '--json'], { cwd: fileURLToPath(new URL('..', import.meta.url)), encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  t.same((JSON.parse(out) as { allowScripts: unknown[] }).allowScripts, [], 'nothing pending review');
});

// The choice between the installed uWebSockets.js builds, with injected builds: the real module stands for a native
// one, the package's JS fallback for a binary that is not native, thrown errors for dlopen failures.
const native = loadUws() as unknown;
const jsFallback = require('uWebSockets.js/dist/index') as unknown;
const GLIBC_ERROR = "/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found (required by /x/uws_linux_x64_137.node)\n    at Module._extensions..node";

function build(label: string, abis: number[] | null, load: (abi: number) => unknown): UwsBuild & { loads: number[] } {
  const loads: number[] = [];
  return { label, abis, worksOn: `${label} works somewhere`, loads, load: (abi) => (loads.push(abi), load(abi)) };
}
function runtime(node: string, abi: number, glibc: string | null = '2.36'): UwsRuntime & { glibcAsked: number } {
  const rt = { node, abi, platform: 'linux', arch: 'x64', glibcAsked: 0, glibc: () => (rt.glibcAsked++, glibc) };
  return rt;
}
const pinned = (): ReturnType<typeof build> => build('pinned', [93, 108, 115], () => native);
const recent = (load: () => unknown = () => native): ReturnType<typeof build> => build('recent', [115, 127, 137, 141], load);

t.test('uWS choice: the pinned build where it has a binary for this Node; the recent one is not even loaded', async (t) => {
  const [a, b] = [pinned(), recent()];
  const rt = runtime('20.20.2', 115);
  const got = chooseUws([a, b], rt);
  t.equal(got.build, a);
  t.equal(got.module, native);
  t.same([a.loads, b.loads], [[115], []]);
  t.equal(rt.glibcAsked, 0, 'glibc is asked only for a refusal');
});

t.test('uWS choice: Node 22 and 24 skip the pinned build without loading it (no JS fallback, no warning) and take the recent one', async (t) => {
  for (const abi of [127, 137]) {
    const [a, b] = [pinned(), recent()];
    const got = chooseUws([a, b], runtime(abi === 127 ? '22.20.0' : '24.22.3', abi));
    t.equal(got.build, b, `ABI ${abi}`);
    t.same([a.loads, b.loads], [[], [abi]], `ABI ${abi}: the recent build loads its binary for ${abi}`);
  }
});

t.test('uWS choice: a binary that fails to load or is not native moves on to the next build', async (t) => {
  const a = build('pinned', [115], () => {
    throw new Error('broken ELF');
  });
  const b = recent();
  t.equal(chooseUws([a, b], runtime('20.20.2', 115)).build, b, 'after a dlopen failure');
  const c = build('pinned', [115], () => jsFallback);
  t.equal(chooseUws([c, recent()], runtime('20.20.2', 115)).build.label, 'recent', 'after a module that is not the native addon');
});

t.test('uWS choice: none loads → E_NATIVE naming Node, ABI, glibc, why each build did not load, and what works', async (t) => {
  const b = recent(() => {
    throw new Error(GLIBC_ERROR);
  });
  let err: unknown;
  try {
    chooseUws([pinned(), b], runtime('24.22.3', 137));
  } catch (e) {
    err = e;
  }
  t.ok(err instanceof StartupError && err.code === 'E_NATIVE', 'a StartupError E_NATIVE');
  const msg = (err as Error).message;
  t.match(msg, /^no uWebSockets\.js build loads natively on node 24\.22\.3 \(ABI 137, linux-x64, glibc 2\.36\): /);
  t.match(msg, 'pinned has binaries for Node 16, 18, 20 only on linux-x64; ');
  t.match(msg, "recent: its binary did not load: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found (required by /x/uws_linux_x64_137.node). ");
  t.notMatch(msg, /Module\._extensions/, "only the first line of dlopen's error");
  t.match(msg, /What works .*: pinned works somewhere, or recent works somewhere; then reinstall with `npm ci`\.$/);

  const notInstalled = build('recent', null, () => native);
  const musl = runtime('22.20.0', 127, null);
  t.throws(() => chooseUws([pinned(), notInstalled], musl), { code: 'E_NATIVE', message: /\(ABI 127, linux-x64, no glibc\): .*recent is not installed \(`npm ci` installs it\)/ });
  t.same(notInstalled.loads, [], 'a build that is not installed is not loaded');
});

t.test('the installed builds: the pinned one up to Node 20, the recent one for Node 20, 22, 24 and 25', async (t) => {
  const [a, b] = installedUwsBuilds();
  t.match(a, { label: /^uWebSockets\.js \(@trufflesuite\/uws-js-unofficial 20\.30\./, worksOn: 'Node 20 on glibc ≥ 2.28' });
  t.match(b, { label: 'uWebSockets.js-recent (@btc-vision/uwebsockets.js 20.57.0)', worksOn: /^Node 20, 22, 24 or 25 on glibc ≥ 2\.38/ });
  if (process.platform === 'linux' && process.arch === 'x64') {
    t.same(a!.abis, [93, 108, 115]);
    t.same(b!.abis, [115, 127, 137, 141]);
  }
});
