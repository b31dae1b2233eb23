// `flashblocksd setup`: non-interactive (flags, --yes) and interactive (answers on standard input) runs against a
// real anvil node and a real WebSocket upstream; the written file, refusal to overwrite, validation messages,
// redaction of secrets, and the real CLI process.
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startAnvil } from '../../scripts/devnet/anvil.js';
import { DEFAULT_ENV_FILE, formatEnvFile, quoteEnvValue } from '../../src/cli/envfile.js';
import { runSetup, SetupExit } from '../../src/cli/setup.js';
import { loadConfig } from '../../src/config.js';
import { captureIo } from '../helpers/cli-io.js';
import { freePort } from '../helpers/rpc-harness.js';
import { startReplayServer } from '../helpers/replay-server.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/** Runs setup in-process with `answers` (lines) on its standard input; returns exit code and both outputs. */
async function setup(argv: string[], answers: string[] = []) {
  const c = captureIo(answers);
  const code = await runSetup(argv, c.io);
  const out = c.out();
  const err = c.err();
  return { code, out, err, all: out + err };
}

/** A minimal reader of the written file: KEY=value, double quotes with backslash escapes, # comments. */
function readEnv(path: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const m = /^([A-Z_]+)=(.*)$/.exec(line);
    if (!m) continue;
    const raw = m[2]!;
    env[m[1]!] = raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw;
  }
  return env;
}

function tmp(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'flashblocksd-setup-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function endpoints(t: Test) {
  const anvil = await startAnvil();
  t.teardown(() => anvil.stop());
  const upstream = await startReplayServer();
  t.teardown(() => upstream.close());
  return { anvil, upstream };
}

t.test('--yes with flags writes the environment file the daemon reads, mode 0600, after checking the URLs', async (t) => {
  const { anvil, upstream } = await endpoints(t);
  const file = join(tmp(t), 'etc', 'flashblocksd', 'flashblocksd.env'); // parent directories are created
  const secretUrl = upstream.url.replace('ws://', 'ws://operator:s3cr3t-pass@') + 'flashblocks?key=k3y-value-42';
  const r = await setup(['--yes', '--env-path', file, '--flashblocks-url', secretUrl, '--node-rpc-url', anvil.url, '--port', '8600', '--metrics-port', '9600']);
  t.equal(r.code, SetupExit.WRITTEN, 'exit code', { output: r.all });
  t.equal(statSync(file).mode & 0o777, 0o600, 'mode 0600');
  const env = readEnv(file);
  t.same(env, {
    FLASHBLOCKS_ENABLED: 'true',
    FLASHBLOCKS_URL: secretUrl,
    NODE_RPC_URL: anvil.url,
    HOST: '127.0.0.1',
    PORT: '8600',
    METRICS_PORT: '9600',
    CHAIN: 'devnet',
  }, "CHAIN is the preset of the node's eth_chainId: the daemon knows its chain even if the node is down at start-up");
  const config = loadConfig([], env);
  t.same([config.flashblocksUrls, config.nodeRpcUrl, config.port, config.metricsPort, config.chain], [[secretUrl], anvil.url, 8600, 9600, 'devnet'], 'round trip through the config loader');
  t.match(readFileSync(file, 'utf8'), /^# flashblocksd settings/, 'header comment');
  t.match(r.out, /chain id 901 \(Devnet: preset devnet, 2000 ms blocks, 200 ms flashblocks, 10 per block, dialect base\), head block 0/, 'node check shows chain id, its preset and head');
  t.match(r.out, /ok: ws:\/\/redacted@127\.0\.0\.1:\d+\/flashblocks\?key=redacted: connected in \d+ ms/, 'upstream reachable');
  t.notMatch(r.all, /s3cr3t|k3y-value|operator/, 'no secret printed');
  t.match(r.out, /sudo systemctl enable --now flashblocksd/);
  t.match(r.out, /\n {2}\S.* unit \| sudo tee \/etc\/systemd\/system\/flashblocksd\.service >\/dev\/null\n/, 'the unit from `flashblocksd unit` (test/cli/unit.test.ts)');
  t.match(r.out, /EnvironmentFile=%s/, 'a non-default path gets a drop-in');
  t.match(r.out, /\S+ verify http:\/\/127\.0\.0\.1:8600\//);
  t.equal(r.err, '', 'no warnings');
});

t.test('--yes takes the defaults for everything not given; unreachable URLs are warnings, not errors', async (t) => {
  const dead = await freePort();
  const file = join(tmp(t), 'fb.env');
  const r = await setup(['-y', '--env-path', file, '--flashblocks-url', `ws://127.0.0.1:${dead}/flashblocks`, '--node-rpc-url', `http://127.0.0.1:${dead}`, '--check-timeout-ms', '1000']);
  t.equal(r.code, SetupExit.WRITTEN, 'exit code', { output: r.all });
  t.match(r.err, /warning: ws:\/\/127\.0\.0\.1:\d+\/flashblocks is not reachable: cannot connect \(ECONNREFUSED\)/);
  t.match(r.err, /warning: http:\/\/127\.0\.0\.1:\d+\/ did not answer eth_chainId: node unreachable \(ECONNREFUSED\)/);
  t.same(readEnv(file), { FLASHBLOCKS_ENABLED: 'true', FLASHBLOCKS_URL: `ws://127.0.0.1:${dead}/flashblocks`, NODE_RPC_URL: `http://127.0.0.1:${dead}`, HOST: '127.0.0.1', PORT: '8547', METRICS_PORT: '9464' });
});

t.test('a node whose chain id is Base\'s: setup warns that Base retired flashblocks and says what to answer', async (t) => {
  const anvil = await startAnvil({ chainId: 8453 });
  t.teardown(() => anvil.stop());
  const dead = await freePort();
  const file = join(tmp(t), 'fb.env');
  const r = await setup(['-y', '--env-path', file, '--flashblocks-url', `ws://127.0.0.1:${dead}/flashblocks`, '--node-rpc-url', anvil.url, '--check-timeout-ms', '1000']);
  t.equal(r.code, SetupExit.WRITTEN, 'a warning, not an error', { output: r.all });
  t.match(r.out, /chain id 8453 \(Base: preset base, 2000 ms blocks, 200 ms flashblocks, 10 per block, dialect base\)/);
  t.match(r.err, /warning: Base \(chain 8453\) streamed from 2025-07 until 2026-11-05 18:00 UTC; retired flashblocks .*--flashblocks-enabled false or remove it \(for a pure forwarding proxy answer FLASHBLOCKS_ENABLED=false\)/);
});

t.test('an existing file is never overwritten without --force', async (t) => {
  const file = join(tmp(t), 'fb.env');
  writeFileSync(file, 'PORT=1234\n');
  const args = ['--yes', '--no-check', '--env-path', file, '--flashblocks-url', 'wss://a.example/flashblocks'];
  const refused = await setup(args);
  t.equal(refused.code, SetupExit.NOT_WRITTEN);
  t.match(refused.err, /already exists; not overwritten \(re-run with --force to replace it\)/);
  t.equal(readFileSync(file, 'utf8'), 'PORT=1234\n', 'untouched');
  // Interactive too: refused before any question is asked.
  const asked = await setup(['--env-path', file], ['', 'wss://a.example/flashblocks']);
  t.equal(asked.code, SetupExit.NOT_WRITTEN);
  t.notMatch(asked.out, /FLASHBLOCKS_URL/);
  const forced = await setup([...args, '--force']);
  t.equal(forced.code, SetupExit.WRITTEN, 'exit code', { output: forced.all });
  t.equal(readEnv(file).FLASHBLOCKS_URL, 'wss://a.example/flashblocks');
  t.equal(statSync(file).mode & 0o777, 0o600);
});

t.test('bad values are refused with a message naming the setting, and secrets stay hidden', async (t) => {
  const file = join(tmp(t), 'fb.env');
  const cases: [string[], RegExp][] = [
    [['--flashblocks-url', 'https://user:hunter2secret@fb.example/flashblocks'], /--flashblocks-url \(FLASHBLOCKS_URL\): https:\/\/redacted@fb\.example\/flashblocks must use ws:\/\/ or wss:\/\//],
    [['--flashblocks-url', 'not a url'], /--flashblocks-url \(FLASHBLOCKS_URL\): "<invalid url>" is not a URL; expected ws: or wss:\/\/host:port\/path/],
    [['--flashblocks-url', 'wss://ok.example/fb', '--node-rpc-url', 'ws://127.0.0.1:8546'], /--node-rpc-url \(NODE_RPC_URL\): ws:\/\/127\.0\.0\.1:8546\/ must use http:\/\/ or https:\/\//],
    [[], /--flashblocks-url \(FLASHBLOCKS_URL\): required while flashblocks are enabled/],
    [['--flashblocks-url', 'wss://ok.example/fb', '--port', '70000'], /--port \(PORT\): 70000 is above the maximum 65535/],
    [['--flashblocks-url', 'wss://ok.example/fb', '--port', '8545'], /--port \(PORT\): 8545 is the port of your node \(NODE_RPC_URL\)/],
    [['--flashblocks-url', 'wss://ok.example/fb', '--metrics-port', '8547'], /--metrics-port \(METRICS_PORT\): 8547 is already the JSON-RPC port/],
    [['--flashblocks-url', 'wss://ok.example/fb', '--host', '8545'], /--host \(HOST\): "8545" is not an IP address or host name/],
    [['--flashblocks-enabled', 'maybe'], /--flashblocks-enabled \(FLASHBLOCKS_ENABLED\): expected true or false, got "maybe"/],
    [['--bogus'], /setup: Unknown option '--bogus'/],
    [['http://user:pw1234@x.example/'], /Unexpected argument 'http:\/\/redacted@x\.example\/'/],
  ];
  for (const [flags, message] of cases) {
    const r = await setup(['--yes', '--no-check', '--env-path', file, ...flags]);
    t.equal(r.code, SetupExit.BAD_INPUT, `exit 2: ${message}`);
    t.match(r.err, message);
    t.notMatch(r.all, /hunter2secret|pw1234/, 'no secret printed');
  }
  t.throws(() => statSync(file), 'nothing written');
});

t.test('interactive: answers on standard input, bad URLs re-asked with the reason, defaults on Enter', async (t) => {
  const { anvil, upstream } = await endpoints(t);
  const dead = await freePort();
  const file = join(tmp(t), 'fb.env');
  const r = await setup(['--env-path', file, '--check-timeout-ms', '1000'], [
    '', // FLASHBLOCKS_ENABLED [true]
    'http://wrong-scheme.example/flashblocks', // refused: scheme
    `ws://127.0.0.1:${dead}/flashblocks`, // unreachable: warning
    'n', // ... do not keep it
    `${upstream.url}flashblocks, ${upstream.url}`, // two upstreams, both reachable
    'ftp://node', // refused
    anvil.url,
    '0.0.0.0', // HOST: a warning ...
    '', // ... kept [Y]
    '', // PORT [8547]
    '9100',
    'y', // write
  ]);
  t.equal(r.code, SetupExit.WRITTEN, 'exit code', { output: r.all });
  t.match(r.out, /FLASHBLOCKS_ENABLED - false = pure forwarding proxy .* \[true\]: /, 'question shows the default');
  t.match(r.err, /FLASHBLOCKS_URL\): http:\/\/wrong-scheme\.example\/flashblocks must use ws:\/\/ or wss:\/\//);
  t.match(r.err, /warning: ws:\/\/127\.0\.0\.1:\d+\/flashblocks is not reachable: cannot connect \(ECONNREFUSED\)/);
  t.match(r.out, /Keep this value anyway\? \[Y\/n\]/);
  t.match(r.err, /NODE_RPC_URL\): ftp:\/\/node\/ must use http:\/\/ or https:\/\//);
  t.match(r.out, /chain id 901/);
  t.match(r.err, /HOST 0\.0\.0\.0 serves other hosts/);
  t.match(r.out, new RegExp(`Write ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\? \\[Y/n\\]`));
  t.same(readEnv(file), {
    FLASHBLOCKS_ENABLED: 'true',
    FLASHBLOCKS_URL: `${upstream.url}flashblocks,${upstream.url}`,
    NODE_RPC_URL: anvil.url,
    HOST: '0.0.0.0',
    PORT: '8547',
    METRICS_PORT: '9100',
    CHAIN: 'devnet',
  });
  t.match(r.out, /\S+ verify http:\/\/127\.0\.0\.1:8547\//, 'verify command uses loopback for 0.0.0.0');
});

t.test('interactive: a [Y/n] answer that is neither yes nor no is asked again, never taken as yes', async (t) => {
  const file = join(tmp(t), 'fb.env');
  const r = await setup(['--env-path', file, '--no-check', '--flashblocks-enabled', 'false', '--node-rpc-url', 'http://10.0.0.5:8545'], [
    '0.0.0.0', // HOST: a warning ...
    'maybe', // ... neither yes nor no: asked again
    'n', // ... not kept: HOST asked again
    '127.0.0.1',
    '', // PORT
    '', // METRICS_PORT
    'sure', // Write? neither: asked again
    'no',
  ]);
  t.equal(r.code, SetupExit.NOT_WRITTEN, 'exit code', { output: r.all });
  t.equal(r.out.match(/Keep this value anyway\? \[Y\/n\]/g)?.length, 2, 'the keep question is asked twice');
  t.match(r.err, /"maybe" is neither yes nor no: answer y \(or Enter\) or n/);
  t.equal(r.out.match(/HOST - /g)?.length, 2, 'HOST is asked again after the value was not kept');
  t.equal(r.out.match(/Write .*\? \[Y\/n\]/g)?.length, 2, 'the write question is asked twice');
  t.match(r.err, /"sure" is neither yes nor no/);
  t.throws(() => statSync(file), 'nothing written');
});

t.test('interactive: five answers that are neither yes nor no end setup without writing', async (t) => {
  const file = join(tmp(t), 'fb.env');
  const r = await setup(['--env-path', file, '--no-check', '--flashblocks-enabled', 'false', '--node-rpc-url', 'http://10.0.0.5:8545'], ['', '', '', 'a', 'b', 'c', 'd', 'e']);
  t.equal(r.code, SetupExit.BAD_INPUT, 'exit code', { output: r.all });
  t.match(r.err, /no yes-or-no answer for the write after 5 attempts/);
  t.throws(() => statSync(file), 'nothing written');
});

t.test('interactive: flashblocks disabled skips the upstream question; declining the write writes nothing', async (t) => {
  const file = join(tmp(t), 'fb.env');
  const declined = await setup(['--env-path', file, '--no-check'], ['false', '', '', '', '', 'n']);
  t.equal(declined.code, SetupExit.NOT_WRITTEN, 'exit code', { output: declined.all });
  t.notMatch(declined.out, /FLASHBLOCKS_URL/);
  t.match(declined.err, /nothing written/);
  t.throws(() => statSync(file));
  const written = await setup(['--env-path', file, '--no-check', '--node-rpc-url', 'http://10.0.0.5:8545'], ['false', '', '8545', '', '']);
  t.equal(written.code, SetupExit.WRITTEN, 'exit code', { output: written.all });
  t.same(readEnv(file), { FLASHBLOCKS_ENABLED: 'false', NODE_RPC_URL: 'http://10.0.0.5:8545', HOST: '127.0.0.1', PORT: '8545', METRICS_PORT: '9464' }, 'flag answers are not asked; 8545 is fine when the node is remote');
});

t.test('interactive: standard input ending early is an error and writes nothing', async (t) => {
  const file = join(tmp(t), 'fb.env');
  const r = await setup(['--env-path', file, '--no-check'], ['true']);
  t.equal(r.code, SetupExit.BAD_INPUT);
  t.match(r.err, /standard input ended before FLASHBLOCKS_URL was answered; give the remaining answers as flags, or --yes for the defaults/);
  t.throws(() => statSync(file));
});

t.test('values are quoted for systemd and the shell only when needed', async (t) => {
  for (const v of ['wss://host.example/flashblocks', 'http://127.0.0.1:8545', '']) t.equal(quoteEnvValue(v), v, `${v} stays as it is`);
  t.equal(quoteEnvValue('wss://a/fb?key=x&y=1'), '"wss://a/fb?key=x&y=1"', '& is quoted');
  t.equal(quoteEnvValue('has space'), '"has space"', 'a space is quoted');
  t.equal(quoteEnvValue('q"uote$and`tick\\'), '"q\\"uote\\$and\\`tick\\\\"', 'quote, dollar, backtick and backslash are escaped');
  t.throws(() => quoteEnvValue('a\nb'), /line break/);
  t.equal(formatEnvFile([['A', '1']], ['head']), '# head\n\nA=1\n');
});

t.test('the default path is the EnvironmentFile the unit reads', async (t) => {
  const unit = readFileSync(new URL('../../systemd/flashblocksd.service', import.meta.url), 'utf8');
  t.match(unit, new RegExp(`^EnvironmentFile=-?${DEFAULT_ENV_FILE}$`, 'm'));
});

/** Runs the real CLI (src/main.ts through tsx) with `input` on standard input. */
function cli(args: string[], input: string): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'src/main.ts'), ...args], { cwd: repoRoot, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(killer);
      resolve({ code, out, err });
    });
    child.stdin.end(input);
  });
}

t.test('the real CLI: `flashblocksd setup` reads answers piped to it; --help lists the subcommands', async (t) => {
  const file = join(tmp(t), 'fb.env');
  const r = await cli(['setup', '--env-path', file, '--no-check'], ['', 'wss://user:pipesecret@fb.example/flashblocks', '', '', '', '', ''].join('\n') + '\n');
  t.equal(r.code, 0, 'exit code', { output: r.out + r.err });
  t.equal(readEnv(file).FLASHBLOCKS_URL, 'wss://user:pipesecret@fb.example/flashblocks');
  t.notMatch(r.out + r.err, /pipesecret/);
  t.match(r.out, /FLASHBLOCKS_URL +wss:\/\/redacted@fb\.example\/flashblocks/);
  const again = await cli(['setup', '--env-path', file, '--yes', '--no-check'], '');
  t.equal(again.code, 1, 'exists: exit 1');
  const help = await cli(['--help'], '');
  t.equal(help.code, 0);
  t.match(help.out, /flashblocksd setup/);
  t.match(help.out, /flashblocksd verify <rpc-url>/);
  const setupHelp = await cli(['setup', '--help'], '');
  t.match(setupHelp.out, /Usage: flashblocksd setup/);
  t.match(setupHelp.out, /Exit codes: 0 file written/);
});
