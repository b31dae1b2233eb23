import t from 'tap';
import { envName, helpText, loadConfig, redactedConfig, SETTINGS } from '../src/config.js';
import { StartupError } from '../src/errors.js';

t.test('defaults apply with no flags and no environment', async (t) => {
  const c = loadConfig([], {});
  t.equal(c.host, '127.0.0.1');
  t.equal(c.port, 8545);
  t.equal(c.metricsPort, 9000);
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
    [['--port', '70000'], {}, /--port: 70000 is above the maximum 65535/],
    [['--port', 'abc'], {}, /--port: expected a whole number/],
    [[], { FLASHBLOCKS_URL: 'http://x/y' }, /FLASHBLOCKS_URL: .* must use ws:\/\/ or wss:\/\//],
    [['--node-rpc-url', 'ws://x'], {}, /--node-rpc-url: .* must use http:\/\/ or https:\/\//],
    [['--flashblocks-enabled', 'maybe'], {}, /expected true or false/],
    [['--nope'], {}, /unknown flag --nope/],
    [['--allow-namespaces', 'debug_'], {}, /--allow-namespaces: "debug_" is not a namespace name/],
    [['--forward-methods', 'sendTransaction'], {}, /--forward-methods: "sendTransaction" is not a method name/],
    [['--backoff-initial-ms', '500', '--backoff-max-ms', '100'], {}, /must be ≥/],
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

t.test('--help lists every flag with its environment twin', async (t) => {
  const h = helpText();
  for (const s of SETTINGS) {
    t.ok(h.includes('--' + s.flag), s.flag);
    t.ok(h.includes(envName(s.flag)), envName(s.flag));
  }
});
