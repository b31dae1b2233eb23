import t from 'tap';
import { createRequire } from 'node:module';
import { checkNative, loadUws, uwsIsNative } from '../src/native.js';
import { silentLogger } from '../src/log.js';
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
