import t from 'tap';
import { readFileSync } from 'node:fs';
import { devAccounts } from '../scripts/devnet/sequencer.js';
import { envName, SETTINGS } from '../src/config.js';
import { SUBSCRIPTION_KINDS } from '../src/rpc/subscriptions.js';
import { ERROR_TABLE } from '../src/errors.js';
import { createMetrics } from '../src/metrics/metrics.js';

const read = (path: string): string => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
const readme = read('README.md');
// The tables live in docs/ (the README links to each); the README keeps a short table of the most used flags.
const configuration = read('docs/configuration.md');
const metricsDoc = read('docs/metrics.md');
const errorsDoc = read('docs/errors.md');
const api = read('docs/api.md');

t.test('the README links to every reference it moved to docs/', async (t) => {
  for (const doc of ['docs/api.md', 'docs/operating.md', 'docs/configuration.md', 'docs/metrics.md', 'docs/errors.md', 'docs/internals.md', 'BENCHMARKS.md']) {
    t.ok(readme.includes(`](${doc})`), `the README links to ${doc}`);
  }
});

t.test('the config table (docs/configuration.md) lists every setting with its default', async (t) => {
  for (const s of SETTINGS) {
    const row = configuration.split('\n').find((l) => l.startsWith('| `--' + s.flag + '` | `'));
    t.ok(row, `row for --${s.flag} in docs/configuration.md`);
    t.ok(row?.includes('`' + envName(s.flag) + '`'), `env twin of --${s.flag}`);
    // A default computed from the machine (defNote) is documented by its rule, not by this machine's value.
    if (s.defNote !== undefined) t.ok(row?.includes(s.defNote), `default rule of --${s.flag}`);
    else if (s.def !== '') t.ok(row?.includes('`' + s.def + '`'), `default of --${s.flag}`);
  }
});

t.test('the README\'s short config table names real flags with their defaults', async (t) => {
  const rows = readme.split('\n').filter((l) => /^\| `--[a-z-]+` \|/.test(l));
  t.ok(rows.length >= 8, `the README lists the most used flags (${rows.length})`);
  for (const row of rows) {
    const [flag, def] = row.split(' | ').map((c) => c.replace(/^\| /, '').trim());
    const s = SETTINGS.find((x) => '`--' + x.flag + '`' === flag);
    t.ok(s, `${flag} is a setting`);
    if (s !== undefined) t.equal(def, s.def === '' ? '—' : '`' + s.def + '`', `${flag}: the default in the README is the daemon's`);
  }
});

t.test('the error table (docs/errors.md) matches the error catalogue', async (t) => {
  for (const e of ERROR_TABLE) t.ok(errorsDoc.includes('| `' + e.code + '` | ' + e.meaning + ' |'), `error ${e.code} in docs/errors.md`);
});

t.test('the metrics table (docs/metrics.md) lists every flashblocksd metric family', async (t) => {
  const text = await createMetrics({ version: 'x', commit: 'y' }).registry.metrics();
  const families = new Set([...text.matchAll(/^# TYPE (flashblocksd_\S+)/gm)].map((m) => m[1]!).filter((n) => !/process_|nodejs_/.test(n)));
  t.ok(families.size > 20);
  for (const f of families) t.ok(metricsDoc.includes('| `' + f + '` |'), `${f} in docs/metrics.md`);
});

t.test('the quick start shows the devnet as npm start prints it; every daemon URL uses the default port', async (t) => {
  const free = devAccounts(10).at(-1)!;
  const quick = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('\n## ', readme.indexOf('## Quick start') + 1));
  t.ok(quick.includes(`account   ${free.address}`), 'the free account (the last dev account; traffic uses the others)');
  t.ok(quick.includes(`key       ${free.privateKey}`), 'and its key');
  t.ok(quick.includes('chain id  901'), 'the devnet chain id');
  t.ok(readme.includes(`privateKeyToAccount('${free.privateKey}')`), 'the viem example signs with the free account');
  const port = SETTINGS.find((s) => s.flag === 'port')!.def;
  // Daemon URLs a user copies: the README's and the API page's (the metrics port's paths are not daemon URLs).
  for (const [name, text] of [['README.md', readme], ['docs/api.md', api]] as const) {
    const ports = [...text.matchAll(/(?:https?|wss?):\/\/127\.0\.0\.1:(\d+)\/(?!metrics|healthz|readyz)/g)].map((m) => m[1]);
    t.ok(ports.length >= 4, `${name} gives the daemon URL`);
    t.same([...new Set(ports)], [port], `every daemon URL in ${name} uses the default --port ${port}`);
  }
});

t.test('every subscription kind and stream option is documented where the README points', async (t) => {
  t.ok(readme.includes('](docs/api.md#streams)'), 'the README points to the streams section of docs/api.md');
  const streams = api.slice(api.indexOf('## Streams'), api.indexOf('\n## ', api.indexOf('## Streams') + 1));
  for (const kind of SUBSCRIPTION_KINDS) t.ok(streams.includes('`' + kind + '`'), `subscription kind ${kind} is listed`);
  for (const opt of ['?replay=block', '?block_number=N&index=I', '?encoding=brotli', '/flashblocks/<key>']) t.ok(streams.includes(opt), opt);
  t.ok(readme.includes('npx flashblocksd'), 'the README names the command (npx flashblocksd)');
});

t.test('the quick start is exactly the two commands', async (t) => {
  t.ok(readme.includes('npm ci && npm start'));
  t.ok(readme.includes('npm test'));
  t.ok(readme.indexOf('## Prerequisites') < readme.indexOf('## Quick start'), 'the prerequisites come first');
});
