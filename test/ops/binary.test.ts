// The single-file binary (npm run build:binary) run from an empty directory with no node_modules: it serves the
// replayed Unichain capture through real uWS and forwards to a real anvil; with the devnet (anvil + flashblocks) it
// executes with its embedded native core and answers pending eth_call from executed state. A second build without
// the native core (and the binary given a broken one) says so once and is not ready. Uses $FLASHBLOCKSD_BINARY when
// set (CI builds it once), else builds one into a temp dir (about 10 s); the build without the core always (10 s).
import t from 'tap';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { getContractAddress, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { unichainMessages } from '../helpers/fixtures.js';
import { repoRoot, spawnDaemon } from '../helpers/daemon-process.js';
import { startReplayServer } from '../helpers/replay-server.js';
import { rpcCall, startAnvil } from '../../scripts/devnet/anvil.js';
import { startDevnet } from '../../scripts/devnet/sequencer.js';

/** The capture is Unichain Sepolia's: a node on its chain id, so the daemon sees no chain mix-up. */
const CAPTURE_CHAIN_ID = 1301;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'flashblocksd-bin-test-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));

function buildBinary(out: string, extra: string[] = []): void {
  execFileSync(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'scripts', 'build-binary.ts'), '--out', out, ...extra], { cwd: repoRoot, stdio: 'pipe' });
}

let built = process.env.FLASHBLOCKSD_BINARY;
if (built === undefined || built === '') {
  built = path.join(tmp, 'build', 'flashblocksd');
  buildBinary(built);
}

// The empty directory: the binary and nothing else. Its runtime directory is fresh too, so the addons get extracted.
const runDir = fs.mkdtempSync(path.join(tmp, 'run-'));
const binary = path.join(runDir, 'flashblocksd');
fs.copyFileSync(path.resolve(repoRoot, built), binary);
fs.chmodSync(binary, 0o755);
const runtimeBase = fs.mkdtempSync(path.join(tmp, 'xdg-'));
// No NODE_OPTIONS, NODE_PATH or tap loaders: only what a service manager would pass.
const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: runDir, XDG_RUNTIME_DIR: runtimeBase };

const PENDING_HEIGHT = '0x' + (35535698).toString(16);

async function rpc(url: string, method: string, params: unknown[] = []): Promise<{ result?: unknown; error?: { code: number; message: string } }> {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  return (await r.json()) as { result?: unknown; error?: { code: number; message: string } };
}

t.test('--version answers from an empty directory', async (t) => {
  const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string };
  t.equal(execFileSync(binary, ['--version'], { cwd: runDir, env, encoding: 'utf8' }).trim(), pkg.version);
});

t.test('with no upstream and no node it refuses clearly instead of starting a devnet', async (t) => {
  let status: number | null = null;
  let stderr = '';
  try {
    execFileSync(binary, ['--port', '0', '--metrics-port', '0'], { cwd: runDir, env, encoding: 'utf8', stdio: 'pipe' });
  } catch (e) {
    status = (e as { status: number | null }).status;
    stderr = String((e as { stderr: string }).stderr);
  }
  t.equal(status, 2, 'exit code 2 (start-up error)');
  const lines = stderr.trim().split('\n');
  t.equal(lines.length, 1, 'one line, said once', { stderr });
  const line = JSON.parse(lines[0]!) as { code?: string; msg?: string };
  t.equal(line.code, 'E_CONFIG');
  t.match(line.msg, /this binary has no embedded devnet: it needs --flashblocks-url .* and --node-rpc-url /);
  t.notMatch(stderr, /starting the embedded devnet/, 'never says it starts one');
  t.notMatch(stderr, /npm/, 'no npm advice from a binary');
  t.notMatch(stderr, /Warning/, 'no SEA loader warnings');
});

t.test('serves the replayed stream: eth_blockNumber is the pending height, other calls reach anvil', async (t) => {
  const anvil = await startAnvil({ chainId: CAPTURE_CHAIN_ID });
  t.teardown(() => anvil.stop());
  const upstream = await startReplayServer();
  t.teardown(() => upstream.close());
  const spawnedAt = performance.now();
  const d = await spawnDaemon(
    [binary],
    ['--port', '0', '--metrics-port', '0', '--flashblocks-enabled', 'true', '--flashblocks-url', upstream.url, '--node-rpc-url', anvil.url, '--block-time-ms', '1000', '--max-ahead-ms', '0', '--execution', 'false'], // anvil is ~35 M blocks behind the capture: nothing to execute on
    { cwd: runDir, env },
  );
  t.teardown(() => d.close());
  const health = await fetch(`http://127.0.0.1:${d.metricsPort}/healthz`);
  t.equal(health.status, 200);
  t.comment(`start-up (exec → listening line, /healthz answered): ${(performance.now() - spawnedAt).toFixed(0)} ms`);

  const listening = d.logs().find((l) => typeof l.rpcPort === 'number');
  t.same(listening?.native, { uws: true, secp256k1: true, keccak: true, uwsBuild: 'embedded in this binary' }, 'uWS (the one embedded), secp256k1 and keccak all native');
  t.same(fs.readdirSync(runDir), ['flashblocksd'], 'nothing written next to the binary');
  const [rt] = fs.readdirSync(runtimeBase);
  t.ok(rt !== undefined && /^flashblocksd-\d+-[0-9a-f]{16}$/.test(rt), 'one content-hashed runtime directory');
  t.equal(fs.statSync(path.join(runtimeBase, rt!)).mode & 0o777, 0o700, 'private (0700)');
  const core = fs.statSync(path.join(runtimeBase, rt!, 'native', 'flashblocksd-native.node'));
  t.equal(core.mode & 0o777, 0o500, 'the native core is extracted beside the other addons, read-only for its owner (0500)');
  t.same(d.logs().filter((l) => /execution engine|anvil/.test(String(l.msg))), [], 'with --execution false: no engine and no anvil advice');

  await upstream.waitForClients(1);
  for (const m of unichainMessages()) upstream.send(JSON.stringify(m));
  let height: unknown;
  for (let i = 0; i < 200 && height !== PENDING_HEIGHT; i++) {
    height = (await rpc(d.rpcUrl, 'eth_blockNumber', ['pending'])).result;
    if (height !== PENDING_HEIGHT) await new Promise((r) => setTimeout(r, 25));
  }
  t.equal(height, PENDING_HEIGHT, 'eth_blockNumber("pending") answers the replayed pending height');
  t.equal((await rpc(d.rpcUrl, 'eth_chainId')).result, '0x515', 'eth_chainId is forwarded to anvil (1301)');
  const block = (await rpc(d.rpcUrl, 'eth_getBlockByNumber', ['pending', false])).result as { number: string; transactions: string[] };
  t.equal(block.number, PENDING_HEIGHT);
  t.ok(block.transactions.length > 0, 'the pending block carries the replayed transactions');
  t.same(d.logs().filter((l) => l.level === 'warn' || l.level === 'error'), [], 'no warnings (native bindings loaded)');
  t.equal(d.stderr(), '', 'nothing on stderr');

  d.proc.kill('SIGTERM');
  t.same(await d.exited, { code: 0, signal: null }, 'SIGTERM stops it with exit code 0');
});

t.test('a second start reuses the extracted files', async (t) => {
  const [rt] = fs.readdirSync(runtimeBase);
  const dir = path.join(runtimeBase, rt!);
  const addon = fs.readdirSync(dir).find((f) => f.endsWith('.node'))!;
  const core = path.join(dir, 'native', 'flashblocksd-native.node');
  const before = fs.statSync(path.join(dir, addon)).mtimeMs;
  const coreBefore = fs.statSync(core).mtimeMs;
  execFileSync(binary, ['--version'], { cwd: runDir, env });
  t.equal(fs.statSync(path.join(dir, addon)).mtimeMs, before, 'the uWS addon was not rewritten');
  t.equal(fs.statSync(core).mtimeMs, coreBefore, 'the native core was not rewritten');
  // A damaged copy (same size, other bytes) is replaced, not loaded.
  fs.chmodSync(core, 0o700);
  const fd = fs.openSync(core, 'r+');
  fs.writeSync(fd, Buffer.from('damaged'), 0, 7, 4096);
  fs.closeSync(fd);
  execFileSync(binary, ['--version'], { cwd: runDir, env });
  const again = fs.statSync(core);
  t.not(again.mtimeMs, coreBefore, 'a damaged native core is written again');
  t.equal(again.mode & 0o777, 0o500, 'read-only again');
  t.same(fs.readdirSync(runtimeBase), [rt], 'still one runtime directory');
});

/** Runtime: with calldata, SSTORE(0, calldata[0:32]); always returns SLOAD(0) (as in test/e2e/execution.test.ts). */
const RUNTIME = '3615600b576000356000555b60005460005260206000f3';
const INIT = `0x60${(RUNTIME.length / 2).toString(16)}600c60003960${(RUNTIME.length / 2).toString(16)}6000f3${RUNTIME}` as Hex;
const word = (n: bigint): Hex => `0x${n.toString(16).padStart(64, '0')}`;

async function until(pred: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

type Ready = { ready: boolean; checks: Record<string, { ok: boolean; detail: string }> };

t.test('with execution on (the default engine): /readyz is ready and a pending eth_call answers from executed state', async (t) => {
  const devnet = await startDevnet({ blockTimeMs: 2000, flashblockMs: 200 });
  t.teardown(() => devnet.stop());
  const d = await spawnDaemon(
    [binary],
    ['--port', '0', '--metrics-port', '0', '--flashblocks-url', devnet.flashblocksUrl, '--node-rpc-url', devnet.nodeRpcUrl, '--block-time-ms', '2000'],
    { cwd: runDir, env },
  );
  t.teardown(() => d.close());
  let ready: Ready | null = null;
  let status = 0;
  await until(async () => {
    const r = await fetch(`http://127.0.0.1:${d.metricsPort}/readyz`);
    status = r.status;
    ready = (await r.json()) as Ready;
    return status === 200;
  }, 30_000, '/readyz 200');
  t.equal(status, 200, '/readyz is ready');
  t.match(ready!.checks.execution?.detail, /^up: /, `execution: ${ready!.checks.execution?.detail}`);

  // Deploy and write with two preconfirmed transactions sent just after a block started, then read while the
  // canonical block does not exist yet: only executed state can answer.
  const acct = devnet.accounts[4]!;
  const account = privateKeyToAccount(acct.privateKey);
  const nonce = Number(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getTransactionCount', [acct.address, 'latest']));
  const contract = getContractAddress({ from: acct.address, nonce: BigInt(nonce) });
  const fees = { chainId: devnet.chainId, maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000n, type: 'eip1559' } as const;
  const value = 0xc0ffeen;
  const deploy = await account.signTransaction({ data: INIT, nonce, gas: 200_000n, ...fees });
  const write = await account.signTransaction({ to: contract, data: word(value), nonce: nonce + 1, gas: 100_000n, ...fees });
  await new Promise<void>((resolve) => {
    const off = devnet.onFlashblock((fb) => {
      if (fb.index === 1) {
        off();
        resolve();
      }
    });
  });
  await rpcCall(d.rpcUrl, 'eth_sendRawTransaction', [deploy]);
  const writeHash = await rpcCall<string>(d.rpcUrl, 'eth_sendRawTransaction', [write]);
  await until(async () => (await rpcCall<{ blockNumber: string | null } | null>(d.rpcUrl, 'eth_getTransactionReceipt', [writeHash]))?.blockNumber != null, 5000, 'the preconfirmed receipt of the write');
  const called = await rpcCall<string>(d.rpcUrl, 'eth_call', [{ to: contract }, 'pending']);
  const nodeReceipt = await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionReceipt', [writeHash]);
  t.equal(nodeReceipt, null, 'the node had no receipt yet: the call ran before the canonical block existed');
  t.equal(called, word(value), 'eth_call(pending) returns the preconfirmed write');
  const after = (await (await fetch(`http://127.0.0.1:${d.metricsPort}/readyz`)).json()) as Ready;
  t.match(after.checks.execution?.detail, /^up: executed up to \d+\/\d+/, `/readyz after: ${after.checks.execution?.detail}`);

  const errors = d.logs().filter((l) => l.level === 'error');
  t.same(errors, [], 'no errors');
  t.same(fs.readdirSync(runDir), ['flashblocksd'], 'nothing written next to the binary');
});

// The binary built without the native core, and the binary given a broken one: one error saying so, /readyz not
// ready with that reason, and pending state still served from the stream.
const noCoreBuilt = path.join(tmp, 'build-no-core', 'flashblocksd');
const brokenCore = path.join(tmp, 'broken-native.node');
fs.writeFileSync(brokenCore, 'not an ELF file');
const cases = [
  { name: 'built without the native core', bin: () => noCoreBuilt, env: {}, detail: /^down: .*this binary was built without the native core .*--execution false/ },
  { name: 'given a broken native core (FLASHBLOCKSD_NATIVE)', bin: () => binary, env: { FLASHBLOCKSD_NATIVE: brokenCore }, detail: /^down: .*the native core at .*broken-native\.node did not load: .*FLASHBLOCKSD_NATIVE must name/ },
];
for (const c of cases) {
  t.test(`${c.name}: one error saying so, and /readyz is not ready with that reason`, async (t) => {
    if (c.bin() === noCoreBuilt && !fs.existsSync(noCoreBuilt)) buildBinary(noCoreBuilt, ['--without-native']);
    const dir = fs.mkdtempSync(path.join(tmp, 'run-'));
    const bin = path.join(dir, 'flashblocksd');
    fs.copyFileSync(c.bin(), bin);
    fs.chmodSync(bin, 0o755);
    const anvil = await startAnvil({ chainId: CAPTURE_CHAIN_ID });
    t.teardown(() => anvil.stop());
    const upstream = await startReplayServer();
    t.teardown(() => upstream.close());
    const d = await spawnDaemon(
      [bin],
      ['--port', '0', '--metrics-port', '0', '--flashblocks-url', upstream.url, '--node-rpc-url', anvil.url, '--block-time-ms', '1000', '--max-ahead-ms', '0', '--ready-max-age-ms', '600000'],
      { cwd: dir, env: { ...env, HOME: dir, ...c.env } },
    );
    t.teardown(() => d.close());
    await upstream.waitForClients(1);
    for (const m of unichainMessages()) upstream.send(JSON.stringify(m));
    let report: Ready | null = null;
    let status = 0;
    await until(async () => {
      const r = await fetch(`http://127.0.0.1:${d.metricsPort}/readyz`);
      status = r.status;
      report = (await r.json()) as Ready;
      return report.checks.pending!.ok && report.checks.node!.ok && report.checks.execution!.detail.startsWith('down');
    }, 10_000, 'pending and node ok, execution down');
    t.equal(status, 503, '/readyz is not ready');
    t.equal(report!.checks.execution!.ok, false);
    t.match(report!.checks.execution!.detail, c.detail, report!.checks.execution!.detail);
    const errors = d.logs().filter((l) => l.level === 'error');
    t.equal(errors.length, 1, 'one error line', { errors });
    t.match(errors[0]?.msg, /^execution engine cannot run; pending state reads answer as latest: /);
    t.notMatch(JSON.stringify(d.logs()) + d.stderr(), /npm/, 'no npm advice from a binary');
    t.equal((await rpc(d.rpcUrl, 'eth_blockNumber', ['pending'])).result, PENDING_HEIGHT, 'pending state is still served');
  });
}

t.test('with no writable place for its runtime directory it refuses clearly (HOME is never written)', async (t) => {
  let status: number | null = null;
  let stderr = '';
  try {
    execFileSync(binary, ['--version'], { cwd: runDir, env: { PATH: env.PATH, HOME: '/proc', XDG_RUNTIME_DIR: '/proc', TMPDIR: '/proc' }, encoding: 'utf8', stdio: 'pipe' });
  } catch (e) {
    status = (e as { status: number | null }).status;
    stderr = String((e as { stderr: string }).stderr);
  }
  t.equal(status, 2, 'exit code 2 (start-up error)');
  const lines = stderr.trim().split('\n');
  t.equal(lines.length, 1, 'one line', { stderr });
  const line = JSON.parse(lines[0]!) as { code?: string; msg?: string };
  t.equal(line.code, 'E_NATIVE');
  t.match(line.msg, /cannot create a private runtime directory .*set RUNTIME_DIRECTORY or XDG_RUNTIME_DIR to a writable directory/);
});
