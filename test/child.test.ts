// src/child.ts: a process notices that the parent it started with is gone, even when the parent died before the
// process asked to be told (a daemon under `npm start` whose npm is killed while the daemon is still starting).
import t from 'tap';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const childScript = fileURLToPath(new URL('./helpers/parent-exit-child.ts', import.meta.url));

t.test('onParentExit fires for a parent that died between start-up and the call', async (t) => {
  // The intermediate parent: starts the child, exits as soon as the child has loaded src/child.ts.
  const parentCode =
    `const c = require('node:child_process').spawn(process.execPath, ['--import', 'tsx', ${JSON.stringify(childScript)}], ` +
    `{ stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }); c.on('message', () => process.exit(0));`;
  const { NODE_OPTIONS: _tapLoaders, ...env } = process.env;
  const parent = spawn(process.execPath, ['-e', parentCode], { stdio: ['ignore', 'pipe', 'inherit'], env });
  let out = '';
  parent.stdout.on('data', (c: Buffer) => (out += c.toString()));
  // The pipe stays open until the child (which inherited it) exits.
  await new Promise<void>((resolve) => parent.stdout.on('close', resolve));
  t.equal(out.trim(), 'noticed', 'the re-parented child noticed that its first parent was gone');
});
