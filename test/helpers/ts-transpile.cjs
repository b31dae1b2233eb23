// The TypeScript transpiler of the test runner (tap's ts-node loader, see test/tsconfig.tap.json): esbuild's
// per-file transform instead of TypeScript's transpileModule, which cost each test process ~2 s of CPU for the src/
// tree (89 files, two at a time on 2 cores). Neither checks types (`npm run typecheck` does); esbuild keeps the lines,
// so stack traces and coverage map back exactly. Must not change what the code does: same target and class fields
// semantics as tsconfig.json.
/* global require, exports */
'use strict';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { transformSync } = require('esbuild');

const tsconfigRaw = { compilerOptions: { target: 'ES2022', useDefineForClassFields: true } };

/** ts-node's transpiler factory: `transpile(source, { fileName })` → ES module code and its source map. */
exports.create = function create() {
  return {
    transpile(input, { fileName }) {
      const r = transformSync(input, { loader: 'ts', format: 'esm', target: 'es2022', sourcemap: 'external', sourcefile: fileName, tsconfigRaw });
      return { outputText: r.code, sourceMapText: r.map };
    },
  };
};
