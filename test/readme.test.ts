import t from 'tap';
import { readFileSync } from 'node:fs';
import { devAccounts } from '../scripts/devnet/sequencer.js';
import { envName, SETTINGS } from '../src/config.js';
import { SUBSCRIPTION_KINDS } from '../src/rpc/subscriptions.js';
import { ERROR_TABLE } from '../src/errors.js';
import { createMetrics } from '../src/metrics/metrics.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

t.test('the README config table lists every setting with its default', async (t) => {
  for (const s of SETTINGS) {
    const row = readme.split('\n').find((l) => l.startsWith('| `--' + s.flag + '` | `'));
    t.ok(row, `row for --${s.flag}`);
    t.ok(row?.includes('`' + envName(s.flag) + '`'), `env twin of --${s.flag}`);
    // A default computed from the machine (defNote) is documented by its rule, not by this machine's value.
    if (s.defNote !== undefined) t.ok(row?.includes(s.defNote), `default rule of --${s.flag}`);
    else if (s.def !== '') t.ok(row?.includes('`' + s.def + '`'), `default of --${s.flag}`);
  }
});

t.test('the README error table matches the error catalogue', async (t) => {
  for (const e of ERROR_TABLE) t.ok(readme.includes('| `' + e.code + '` | ' + e.meaning + ' |'), `error ${e.code}`);
});

t.test('the README metrics table lists every flashblocksd metric family', async (t) => {
  const text = await createMetrics({ version: 'x', commit: 'y' }).registry.metrics();
  const families = new Set([...text.matchAll(/^# TYPE (flashblocksd_\S+)/gm)].map((m) => m[1]!).filter((n) => !/process_|nodejs_/.test(n)));
  t.ok(families.size > 20);
  for (const f of families) t.ok(readme.includes('| `' + f + '` |'), f);
});

t.test('the quick start shows the devnet as npm start prints it, at the default port', async (t) => {
  const free = devAccounts(10).at(-1)!;
  t.ok(readme.includes(`account   ${free.address}`), 'the free account (the last dev account; traffic uses the others)');
  t.ok(readme.includes(`key       ${free.privateKey}`), 'and its key');
  t.ok(readme.includes('chain id  901'), 'the devnet chain id');
  const port = SETTINGS.find((s) => s.flag === 'port')!.def;
  const quick = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('## What it serves'));
  const ports = [...quick.matchAll(/127\.0\.0\.1:(\d+)\/(?!metrics)/g)].map((m) => m[1]);
  t.ok(ports.length >= 4, 'the examples give the daemon URL');
  t.same([...new Set(ports)], [port], `every daemon URL in the quick start uses the default --port ${port}`);
  for (const kind of SUBSCRIPTION_KINDS) t.ok(quick.includes('`' + kind + '`'), `subscription kind ${kind} is listed`);
  for (const opt of ['?replay=block', '?block_number=N&index=I', '?encoding=brotli', '/flashblocks/<key>', 'npx flashblocksd']) t.ok(quick.includes(opt), opt);
});

t.test('the quick start is exactly the two commands', async (t) => {
  t.ok(readme.includes('npm ci && npm start'));
  t.ok(readme.includes('npm test'));
});
