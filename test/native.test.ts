import t from 'tap';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { checkNative, loadUws, uwsIsNative } from '../src/native.js';
import { createLogger, silentLogger } from '../src/log.js';
import { StartupError } from '../src/errors.js';

const require = createRequire(import.meta.url);

t.test('the uWebSockets.js native binary loaded on this machine', async (t) => {
  t.ok(uwsIsNative(loadUws()));
  const r = checkNative(loadUws(), silentLogger);
  t.same(r, { uws: true, secp256k1: true, keccak: true }, 'all three native bindings are in use');
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
  t.same(r, { uws: true, secp256k1: false, keccak: false });
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
