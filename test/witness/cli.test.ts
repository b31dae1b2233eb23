// `npm run witness-node -- <fixture>` as a process (scripts/witness-node.ts under tsx): prints its node RPC line like
// the devnet does, answers there, stops cleanly on SIGTERM and SIGINT; a bad fixture is a clear message and exit 2.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { OP_BLOCKS_ABSENT, opBlockFixtures } from '../helpers/op-blocks.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = [process.execPath, '--import', 'tsx', fileURLToPath(new URL('../../scripts/witness-node.ts', import.meta.url))];

/** Runs the CLI on `file` until it prints its URL; returns the process, its URL and what it printed. */
async function startCli(file: string): Promise<{ child: ReturnType<typeof spawn>; url: string; out: () => string; err: () => string }> {
  const child = spawn(CLI[0]!, [...CLI.slice(1), file, '--port', '0'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const look = (): void => {
      const m = /node RPC\s+(http:\/\/127\.0\.0\.1:\d+\/)/.exec(out);
      if (m !== null && out.includes('Ctrl-C')) resolve(m[1]!);
    };
    child.stdout!.on('data', look);
    child.once('exit', (code) => reject(new Error(`witness-node exited ${code} before listening:\n${out}\n${err}`)));
  });
  return { child, url, out: () => out, err: () => err };
}

const fixtures = opBlockFixtures();
if (fixtures.length === 0) {
  t.test('prints its node RPC line for a real fixture', { skip: OP_BLOCKS_ABSENT }, async () => {});
} else {
  // One with a known header (tar), one with only its hash (tar.gz).
  const picks = [fixtures.find((f) => f.name === 'op-sepolia-block-26207960') ?? fixtures[0]!, fixtures.find((f) => f.file.endsWith('.tar.gz')) ?? fixtures[0]!];
  for (const [i, f] of picks.entries()) {
    const signal = i === 0 ? 'SIGTERM' : 'SIGINT';
    t.test(`${f.name}: prints its node RPC line and a line on the fixture, answers, stops on ${signal}`, async (t) => {
      const cli = await startCli(f.file);
      t.match(cli.out(), /^witness node up \(chain \d+\)\n {2}node RPC {6}http:\/\/127\.0\.0\.1:\d+\/\n/, 'the devnet-style URL line');
      t.match(cli.out(), new RegExp(`fixture {7}${f.name}: (op-mainnet|op-sepolia|unichain) \\(chain \\d+\\), block \\d+ \\(state at \\d+\\), fork \\w+ by timestamp, \\d+ txs, (full header known|only the block hash known)`));
      const res = await fetch(cli.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }) });
      t.match(await res.json(), { result: /^0x[0-9a-f]+$/ });
      const exited = once(cli.child, 'exit');
      cli.child.kill(signal);
      const [code] = await exited;
      t.equal(code, 0, `exits 0 on ${signal}`);
      t.match(cli.err(), new RegExp(`${signal}: stopping witness node`));
    });
  }
}

t.test('a bad fixture file is a clear message and exit 2', async (t) => {
  for (const [args, says] of [
    [['/nonexistent/fixture.tar'], /witness-node: \/nonexistent\/fixture\.tar: no such file/],
    [[fileURLToPath(new URL('../../package.json', import.meta.url))], /not a fixture \(expected a kona-executor \.tar/],
    [[], /no fixture file given/],
    [['a.tar', '--port', 'x'], /--port x: expected a port number/],
  ] as const) {
    const r = spawnSync(CLI[0]!, [...CLI.slice(1), ...args], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    t.equal(r.status, 2, `${args.join(' ') || '(no args)'}: exit 2`);
    t.match(r.stderr, says);
  }
});
