import { availableParallelism } from 'node:os';
import t from 'tap';
import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { checkRunnable, envName, helpText, loadConfig, redactedConfig, SETTINGS } from '../src/config.js';
import { StartupError } from '../src/errors.js';
import { repoRoot, sourceCommand } from './helpers/daemon-process.js';

t.test('defaults apply with no flags and no environment', async (t) => {
  const c = loadConfig([], {});
  t.equal(c.host, '127.0.0.1');
  t.equal(c.port, 8547, 'clear of the node beside it (8545)');
  t.equal(c.metricsPort, 9464);
  t.equal(c.flashblocksEnabled, true);
  t.equal(c.stallTimeoutMs, 1000);
  t.equal(c.maxBodyBytes, 5 * 1024 * 1024);
  t.equal(c.maxBatchItems, 1000);
  t.ok(Object.isFrozen(c));
});

t.test('flags beat environment twins; environment beats defaults', async (t) => {
  const env = { FLASHBLOCKS_URL: 'wss://a.example/flashblocks,ws://127.0.0.1:1/x', NODE_RPC_URL: 'http://127.0.0.1:8545', PORT: '7000', FLASHBLOCKS_ENABLED: 'false' };
  const c = loadConfig(['--port', '0', '--metrics-port=0'], env);
  t.same(c.flashblocksUrls, ['wss://a.example/flashblocks', 'ws://127.0.0.1:1/x']);
  t.equal(c.nodeRpcUrl, 'http://127.0.0.1:8545');
  t.equal(c.port, 0);
  t.equal(c.metricsPort, 0);
  t.equal(c.flashblocksEnabled, false);
  t.equal(envName('node-rpc-url'), 'NODE_RPC_URL');
});

t.test('invalid values say what to fix', async (t) => {
  const bad: Array<[string[], Record<string, string>, RegExp]> = [
    [['--port', '70000'], {}, /--port: 70000 is above the maximum 65535 \(valid: 0 to 65535\)/],
    [['--port', 'abc'], {}, /--port: expected a whole number from 0 to 65535, got "abc"/],
    [['--port', '-1'], {}, /--port: expected a whole number from 0 to 65535, got "-1"/],
    [['--port=-1'], {}, /--port: expected a whole number from 0 to 65535, got "-1"/],
    [[], { PORT: '-1' }, /PORT: expected a whole number from 0 to 65535, got "-1"/],
    [['--port'], {}, /--port needs a value/],
    [['--port', '--host', '::'], {}, /--port needs a value/],
    [['8547'], {}, /unexpected argument "8547"; flags look like --port 8547/],
    [['-p', '1'], {}, /unknown flag -p/],
    [['--host', '999.1.1.1'], {}, /--host: "999\.1\.1\.1" is not an IP address or host name \(e\.g\. 127\.0\.0\.1, 0\.0\.0\.0, ::\)/],
    [[], { HOST: 'bad host' }, /HOST: "bad host" is not an IP address or host name/],
    [['--cors-origins', 'not a origin'], {}, /--cors-origins: "not a origin" is not an origin; expected \* or scheme:\/\/host\[:port\]/],
    [['--cors-origins', 'https://app.example,https://App.example/'], {}, /--cors-origins: "https:\/\/App\.example\/" is not an origin as browsers send it .*use "https:\/\/app\.example"/],
    [['--cors-origins', 'mailto:x@y'], {}, /--cors-origins: "mailto:x@y" is not an origin/],
    [[], { FLASHBLOCKS_URL: 'http://x/y' }, /FLASHBLOCKS_URL: .* must use ws:\/\/ or wss:\/\//],
    [['--node-rpc-url', 'ws://x'], {}, /--node-rpc-url: .* must use http:\/\/ or https:\/\//],
    [['--flashblocks-enabled', 'maybe'], {}, /expected true or false/],
    [['--nope'], {}, /unknown flag --nope/],
    [['--allow-namespaces', 'debug_'], {}, /--allow-namespaces: "debug_" is not a namespace name/],
    [['--forward-methods', 'sendTransaction'], {}, /--forward-methods: "sendTransaction" is not a method name/],
    [['--backoff-initial-ms', '500', '--backoff-max-ms', '100'], {}, /must be ≥/],
    [['--execution-hardfork', 'bogus'], {}, /^--execution-hardfork: "bogus" is not one of auto, bedrock, regolith, canyon, ecotone, fjord, granite, holocene, isthmus, jovian, karst$/],
    [[], { EXECUTION_HARDFORK: 'Isthmus' }, /^EXECUTION_HARDFORK: "Isthmus" is not one of auto, bedrock/],
    [['--log-level', 'verbose'], {}, /^--log-level: "verbose" is not one of debug, info, warn, error$/],
  ];
  for (const [argv, env, re] of bad) {
    let err: unknown = null;
    try {
      loadConfig(argv, env);
    } catch (e) {
      err = e;
    }
    t.ok(err instanceof StartupError && err.code === 'E_CONFIG', `${argv.join(' ') || JSON.stringify(env)} → E_CONFIG`);
    t.match((err as Error).message, re);
  }
});

t.test('accepted forms of flags: --flag value, --flag=value, a bare boolean, hosts and origins', async (t) => {
  t.equal(loadConfig(['--flashblocks-enabled'], {}).flashblocksEnabled, true);
  const c = loadConfig(['--flashblocks-enabled', '--port', '1'], { FLASHBLOCKS_ENABLED: 'false' });
  t.equal(c.flashblocksEnabled, true, 'a bare boolean before another flag is true');
  t.equal(c.port, 1);
  t.equal(loadConfig(['--flashblocks-enabled', 'false'], {}).flashblocksEnabled, false);
  t.equal(loadConfig(['--flashblocks-enabled=no'], {}).flashblocksEnabled, false);
  t.equal(loadConfig(['--port', '1', '--port', '2'], {}).port, 2, 'the last of a repeated flag wins');
  for (const host of ['0.0.0.0', '::', '::1', 'localhost', 'node-1.internal', '10.1.2.3']) t.equal(loadConfig(['--host', host], {}).host, host);
  t.same(loadConfig(['--cors-origins', '*,https://app.example.com,http://127.0.0.1:3000'], {}).corsOrigins, ['*', 'https://app.example.com', 'http://127.0.0.1:3000']);
});

t.test('the timings that used to be constants are settings with the old values as defaults', async (t) => {
  const c = loadConfig([], {});
  t.equal(c.canonicalWsConnectTimeoutMs, 3000);
  t.equal(c.canonicalWsRetryInitialMs, 500);
  t.equal(c.canonicalWsRetryMaxMs, 10000);
  t.equal(c.tickIntervalMs, 50);
  t.equal(c.maxSubscriptionsPerConnection, 100);
  const d = loadConfig(['--tick-interval-ms', '20', '--max-subscriptions-per-connection', '5'], { CANONICAL_WS_RETRY_MAX_MS: '2000' });
  t.equal(d.tickIntervalMs, 20);
  t.equal(d.maxSubscriptionsPerConnection, 5);
  t.equal(d.canonicalWsRetryMaxMs, 2000);
  t.throws(() => loadConfig(['--canonical-ws-retry-initial-ms', '5000', '--canonical-ws-retry-max-ms', '100'], {}), /--canonical-ws-retry-max-ms \(100\) must be ≥/);
});

t.test('a configuration that cannot run says what to add', async (t) => {
  const cases: Array<[string[], RegExp]> = [
    [['--flashblocks-url', 'ws://127.0.0.1:1/fb'], /--flashblocks-url is set but --node-rpc-url \/ NODE_RPC_URL is not.*add --node-rpc-url/],
    [['--flashblocks-enabled', 'false'], /--flashblocks-enabled false forwards everything to the node.*--node-rpc-url/],
    [['--node-rpc-url', 'http://127.0.0.1:1'], /no --flashblocks-url \/ FLASHBLOCKS_URL is set/],
    [['--flashblocks-enabled', 'false', '--node-rpc-url', 'http://127.0.0.1:1', '--port', '9464'], /^--metrics-port: 9464 is also --port \(JSON-RPC\); give the metrics listener its own port, e\.g\. 9465$/],
  ];
  for (const [argv, re] of cases) {
    const err = t.throws(() => checkRunnable(loadConfig(argv, {}))) as unknown;
    t.ok(err instanceof StartupError && err.code === 'E_CONFIG', `${argv.join(' ')} → E_CONFIG`);
    t.match((err as Error).message, re);
  }
  t.doesNotThrow(() => checkRunnable(loadConfig(['--flashblocks-url', 'ws://127.0.0.1:1/fb', '--node-rpc-url', 'http://127.0.0.1:1'], {})));
  t.doesNotThrow(() => checkRunnable(loadConfig(['--flashblocks-enabled', 'false', '--node-rpc-url', 'http://127.0.0.1:1', '--port', '0', '--metrics-port', '0'], {})));
});

/** Runs the daemon from source to its exit; resolves with the exit code and stderr. */
function runDaemon(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const [file, ...pre] = sourceCommand() as [string, ...string[]];
  const proc = spawn(file, [...pre, ...args], { cwd: repoRoot, env: { ...process.env, FLASHBLOCKS_URL: '', NODE_RPC_URL: '' }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  return new Promise((resolve) => proc.once('exit', (code) => resolve({ code, stderr })));
}

t.test('the daemon process: --flashblocks-url without --node-rpc-url exits 2 with E_CONFIG, not a TypeError stack', async (t) => {
  const r = await runDaemon(['--flashblocks-url', 'ws://127.0.0.1:1/flashblocks', '--port', '0', '--metrics-port', '0']);
  t.equal(r.code, 2);
  const line = JSON.parse(r.stderr.trim().split('\n').pop() as string) as { code?: string; msg?: string };
  t.equal(line.code, 'E_CONFIG');
  t.match(line.msg, /add --node-rpc-url/);
  t.notMatch(r.stderr, /TypeError|\n\s+at /, 'no stack');
});

t.test('the daemon process: a taken --metrics-port is E_LISTEN with one message naming the flag once', async (t) => {
  const blocker = createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => blocker.close(() => resolve())));
  const taken = (blocker.address() as AddressInfo).port;
  const r = await runDaemon(['--flashblocks-enabled', 'false', '--node-rpc-url', 'http://127.0.0.1:1', '--port', '0', '--metrics-port', String(taken)]);
  t.equal(r.code, 2);
  const line = JSON.parse(r.stderr.trim().split('\n').pop() as string) as { code?: string; msg?: string };
  t.equal(line.code, 'E_LISTEN');
  t.match(line.msg, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${taken} \\(EADDRINUSE\\); free the port or choose another --metrics-port$`));
  t.equal(line.msg?.split('--metrics-port').length, 2, 'the flag is named once');
  t.equal(line.msg?.split('cannot listen').length, 2, 'the reason is given once');
});

t.test('the daemon process: --host 999.1.1.1 names --host, not --port', async (t) => {
  const r = await runDaemon(['--host', '999.1.1.1', '--flashblocks-enabled', 'false', '--node-rpc-url', 'http://127.0.0.1:1', '--port', '0', '--metrics-port', '0']);
  t.equal(r.code, 2);
  t.match(r.stderr, /--host: \\"999\.1\.1\.1\\" is not an IP address or host name/);
  t.notMatch(r.stderr, /--port/);
});

t.test('credentials never appear in the redacted dump or in error messages', async (t) => {
  const c = loadConfig(['--flashblocks-url', 'wss://user:hunter2@host/flashblocks?apikey=s3cr3t', '--node-rpc-url', 'https://x.example/v2/abcdef0123456789abcdef', '--api-keys', 'k1,k2'], {});
  const dump = JSON.stringify(redactedConfig(c));
  for (const secret of ['hunter2', 's3cr3t', 'abcdef0123456789abcdef', 'k1,k2']) t.notOk(dump.includes(secret), `no ${secret}`);
  try {
    loadConfig(['--node-rpc-url', 'ftp://user:hunter2@host/'], {});
    t.fail('should throw');
  } catch (e) {
    t.notOk((e as Error).message.includes('hunter2'));
  }
});

t.test('--redis-url: off by default, redis:// or rediss://, its password redacted in the dump and in errors', async (t) => {
  t.equal(loadConfig([], {}).redisUrl, '');
  t.equal(loadConfig([], {}).rateLimitRps, 0, 'no rate quota by default');
  const c = loadConfig(['--redis-url', 'rediss://default:hunter2@redis.internal:6380/2', '--rate-limit-rps', '50'], {});
  t.equal(c.redisUrl, 'rediss://default:hunter2@redis.internal:6380/2');
  t.equal(c.rateLimitRps, 50);
  t.notOk(JSON.stringify(redactedConfig(c)).includes('hunter2'));
  t.equal(loadConfig([], { REDIS_URL: 'redis://127.0.0.1:6379' }).redisUrl, 'redis://127.0.0.1:6379', 'REDIS_URL twin');
  t.throws(() => loadConfig(['--redis-url', 'http://user:hunter2@host:6379'], {}), /--redis-url: .* must use redis:\/\/ or rediss:\/\//);
  try {
    loadConfig(['--redis-url', 'http://user:hunter2@host:6379'], {});
  } catch (e) {
    t.notOk((e as Error).message.includes('hunter2'));
  }
});

t.test('--help lists every flag with its environment twin', async (t) => {
  const h = helpText();
  for (const s of SETTINGS) {
    t.ok(h.includes('--' + s.flag), s.flag);
    t.ok(h.includes(envName(s.flag)), envName(s.flag));
  }
});

t.test("pending execution settings: on by default, the chain's hardfork schedule, a wait bound; the sidecar's flags are gone", async (t) => {
  const c = loadConfig([], {});
  t.equal(c.execution, true, 'execution is on for real runs');
  t.equal(c.executionHardfork, 'auto', "the chain's own hardfork schedule");
  t.equal(c.executionWaitMs, 1000);
  const d = loadConfig(['--execution', 'false'], { EXECUTION_WAIT_MS: '250' });
  t.equal(d.execution, false);
  t.equal(d.executionWaitMs, 250);
  for (const flag of ['--execution-engine', '--execution-strategy', '--anvil-binary']) t.throws(() => loadConfig([flag, 'x'], {}), /unknown flag/, `${flag} is not a flag any more`);
});

t.test('enum settings: every allowed value is accepted, --help lists them, nothing enum-like is a free string', async (t) => {
  const enums = SETTINGS.filter((s) => s.kind === 'enum');
  t.same(enums.map((s) => s.flag).sort(), ['execution-hardfork', 'log-level']);
  const help = helpText();
  for (const s of enums) {
    t.ok(s.values!.includes(s.def), `the default of --${s.flag} is one of its values`);
    for (const v of s.values!) t.equal(loadConfig([`--${s.flag}`, v], {})[s.key], v, `--${s.flag} ${v}`);
    t.ok(help.includes(`one of: ${s.values!.join(' | ')}`), `--help lists the values of --${s.flag}`);
  }
  t.equal(loadConfig([], { EXECUTION_HARDFORK: ' jovian ' }).executionHardfork, 'jovian', 'surrounding blanks are trimmed');
  t.equal(loadConfig(['--execution-hardfork', 'karst'], {}).executionHardfork, 'karst', 'karst, the fork OP Mainnet and Unichain run, is a value');
});

t.test('the daemon process: --execution-hardfork bogus exits 2 with E_CONFIG at start-up, listing the allowed values', async (t) => {
  const r = await runDaemon(['--execution-hardfork', 'bogus', '--flashblocks-url', 'ws://127.0.0.1:1/flashblocks', '--node-rpc-url', 'http://127.0.0.1:1', '--port', '0', '--metrics-port', '0']);
  t.equal(r.code, 2);
  const lines = r.stderr.trim().split('\n');
  t.equal(lines.length, 1, 'one line: nothing started before the check', { stderr: r.stderr });
  const line = JSON.parse(lines[0]!) as { code?: string; msg?: string };
  t.equal(line.code, 'E_CONFIG');
  t.match(line.msg, /--execution-hardfork: "bogus" is not one of auto, bedrock, .*, jovian, karst/);
});

t.test('--stream-port: off by default; --stream-threads defaults to cores − 1 within 1–4, 0 allowed; a port of its own', async (t) => {
  const c = loadConfig([], {});
  t.equal(c.streamPort, 0, 'off');
  t.equal(c.streamThreads, Math.min(4, Math.max(1, availableParallelism() - 1)));
  t.match(helpText(), /--stream-threads\s+STREAM_THREADS\s+default: [1-4] \(cores − 1, 1–4\)/);
  t.equal(loadConfig(['--stream-threads', '0'], {}).streamThreads, 0);
  t.throws(() => loadConfig(['--stream-threads', '-1'], {}));
  const base = ['--flashblocks-enabled', 'false', '--node-rpc-url', 'http://127.0.0.1:1'];
  for (const clash of [['--stream-port', '8547'], ['--stream-port', '9464']]) {
    const err = t.throws(() => checkRunnable(loadConfig([...base, ...clash], {}))) as unknown;
    t.ok(err instanceof StartupError && err.code === 'E_CONFIG');
    t.match((err as Error).message, /^--stream-port: \d+ is also --port or --metrics-port; give the stream its own port$/);
  }
  t.doesNotThrow(() => checkRunnable(loadConfig([...base, '--stream-port', '8548'], {})));
});

t.test('chain settings: auto and 0 (= the preset) by default; bad values say what to fix', async (t) => {
  const c = loadConfig([], {});
  t.same([c.chain, c.blockTimeMs, c.flashblockIntervalMs, c.upstreamAbsentMs], ['auto', 0, 0, 600000]);
  t.same([loadConfig(['--chain', 'unichain', '--block-time-ms', '1000', '--flashblock-interval-ms', '250'], {}).chain, loadConfig([], { CHAIN: 'base' }).chain], ['unichain', 'base']);
  const bad = (argv: string[], msg: RegExp): void => {
    t.throws(() => loadConfig(argv, {}), { code: 'E_CONFIG', message: msg }, argv.join(' '));
  };
  bad(['--chain', 'op mainnet'], /--chain: "op mainnet" is not auto or a chain name/);
  bad(['--block-time-ms', '50'], /--block-time-ms: 50 is below 100 \(0 = the chain preset's\)/);
  bad(['--flashblock-interval-ms', '5'], /--flashblock-interval-ms: 5 is below 10/);
  bad(['--block-time-ms', '1000', '--flashblock-interval-ms', '2000'], /--flashblock-interval-ms \(2000\) must be ≤ --block-time-ms \(1000\)/);
});
