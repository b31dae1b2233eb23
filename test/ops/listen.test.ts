// Exclusive ports with real daemon processes: a second daemon started on the RPC port or the metrics port of one
// already serving exits 2 with E_LISTEN (uWS would otherwise share the port and the kernel split connections), and
// the first one keeps answering alone.
import t from 'tap';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { repoRoot, sourceCommand, spawnDaemon } from '../helpers/daemon-process.js';

const { NODE_OPTIONS: _tapLoaders, ...childEnv } = process.env;
/** No upstream and a node nobody listens on: enough to serve and to bind both ports. */
const BASE_ARGS = ['--flashblocks-enabled', 'false', '--node-rpc-url', 'http://127.0.0.1:9'];

/** Runs the daemon to its exit; resolves with its exit code and stderr. Kills it if it is still up after 30 s. */
function runToExit(args: string[]): Promise<{ code: number | null; stderr: string; stdout: string }> {
  const [file, ...pre] = sourceCommand() as [string, ...string[]];
  const p = spawn(file, [...pre, ...args], { cwd: repoRoot, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  let stdout = '';
  p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  const timer = setTimeout(() => p.kill('SIGKILL'), 30_000);
  return new Promise((resolve) => p.once('exit', (code) => {
    clearTimeout(timer);
    resolve({ code, stderr, stdout });
  }));
}

/**
 * A port free right now. The first daemon must bind a fixed port: uWS shares a port only when it was bound by
 * number (a socket bound to port 0 gets an ephemeral port the kernel does not share), which is how operators run it.
 */
async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

async function rpcStatus(url: string): Promise<number> {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":7,"method":"web3_sha3","params":["0x"]}' });
  return r.status;
}

t.test('a second daemon on a port already serving exits 2 with E_LISTEN (RPC port and metrics port)', async (t) => {
  const port = await freePort();
  const first = await spawnDaemon(sourceCommand(), ['--port', String(port), '--metrics-port', '0', ...BASE_ARGS], { env: childEnv });
  t.teardown(() => first.close());

  const onRpc = await runToExit(['--port', String(first.rpcPort), '--metrics-port', '0', ...BASE_ARGS]);
  t.equal(onRpc.code, 2, 'exit code 2 when the RPC port is taken');
  t.match(onRpc.stderr, /"code":"E_LISTEN"/, 'the error code is E_LISTEN');
  t.match(onRpc.stderr, new RegExp(`:${first.rpcPort}\\b`), 'the message names the port');
  t.notMatch(onRpc.stdout, /"rpcPort"/, 'it never logged that it listens');

  const onMetrics = await runToExit(['--port', '0', '--metrics-port', String(first.metricsPort), ...BASE_ARGS]);
  t.equal(onMetrics.code, 2, 'exit code 2 when the metrics port is taken');
  t.match(onMetrics.stderr, /"code":"E_LISTEN"/, 'the error code is E_LISTEN');
  t.match(onMetrics.stderr, new RegExp(`:${first.metricsPort}\\b`), 'the message names the metrics port');

  // The metrics port of one daemon is not free for another daemon's RPC either.
  const rpcOnMetrics = await runToExit(['--port', String(first.metricsPort), '--metrics-port', '0', ...BASE_ARGS]);
  t.equal(rpcOnMetrics.code, 2, 'exit code 2 when the RPC port is the other daemon\'s metrics port');

  t.equal(first.proc.exitCode, null, 'the first daemon still runs');
  t.equal(await rpcStatus(first.rpcUrl), 200, 'and still answers on its RPC port');
  const metrics = await fetch(`http://127.0.0.1:${first.metricsPort}/healthz`);
  t.equal(metrics.status, 200, 'and on its metrics port');
});
