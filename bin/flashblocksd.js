#!/usr/bin/env node
// The `flashblocksd` command: runs the compiled daemon (npm run build produces dist/); in a checkout `npx flashblocksd`
// runs this file too, so say how to build instead of failing on a missing module.
import { existsSync } from 'node:fs';

const main = new URL('../dist/src/main.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write('flashblocksd: dist/src/main.js is missing; run `npm run build` in this checkout first\n');
  process.exit(2);
}
await import(main.href);
