import t from 'tap';
import { readFileSync } from 'node:fs';
import { envName, SETTINGS } from '../src/config.js';
import { ERROR_TABLE } from '../src/errors.js';
import { createMetrics } from '../src/metrics/metrics.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

t.test('the README config table lists every setting with its default', async (t) => {
  for (const s of SETTINGS) {
    const row = readme.split('\n').find((l) => l.startsWith('| `--' + s.flag + '` | `'));
    t.ok(row, `row for --${s.flag}`);
    t.ok(row?.includes('`' + envName(s.flag) + '`'), `env twin of --${s.flag}`);
    if (s.def !== '') t.ok(row?.includes('`' + s.def + '`'), `default of --${s.flag}`);
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

t.test('the quick start is exactly the two commands', async (t) => {
  t.ok(readme.includes('npm ci && npm start'));
  t.ok(readme.includes('npm test'));
});
