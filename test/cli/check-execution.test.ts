// `flashblocksd check-execution`: the devnet's canonical blocks re-executed as flashblocks through the engine match
// the node's headers (exit 0, also through the real command line); under a deliberately wrong --execution-hardfork they
// do not (exit 1, first differing tx and field named); every real OP block served by the witness node executes, the
// seven with a full header match its receipts root, gas used and logs bloom, and every block's hash recomputed over the
// node's trie nodes (debug_dbGet) matches — a forged hash does not (exit 1); bad input exits 2. And splitBlock.
import t from 'tap';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDevnet } from '../../scripts/devnet/sequencer.js';
import { startTraffic } from '../../scripts/devnet/traffic.js';
import { startWitnessNode } from '../../scripts/witness/server.js';
import { loadWitnessFixture } from '../../scripts/witness/fixture.js';
import { CheckExit, parseBlocks, runCheckExecution, splitBlock } from '../../src/cli/check-execution.js';
import { captureIo } from '../helpers/cli-io.js';
import { OP_BLOCKS_ABSENT, opBlockFixtures } from '../helpers/op-blocks.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

async function check(argv: string[]) {
  const c = captureIo();
  const code = await runCheckExecution(argv, c.io);
  return { code, out: c.out(), err: c.err() };
}

async function rpc<T>(url: string, method: string, params: unknown[]): Promise<T> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  const body = (await res.json()) as { result?: T; error?: { message: string } };
  if (body.error !== undefined) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}

t.test('splitBlock: the opening deposits in index 0, the rest in non-empty, even slices, in block order', async (t) => {
  const dep = (n: number) => '0x7e' + n.toString(16).padStart(4, '0');
  const tx = (n: number) => '0x02' + n.toString(16).padStart(4, '0');
  const cases: [string, string[], number, number[]][] = [
    ['deposits then 7 txs in 3 slices', [dep(0), dep(1), ...[0, 1, 2, 3, 4, 5, 6].map(tx)], 3, [2, 3, 2, 2]],
    ['fewer txs than slices: one a slice', [dep(0), tx(0), tx(1)], 5, [1, 1, 1]],
    ['no deposits: index 0 is empty', [tx(0), tx(1), tx(2), tx(3)], 2, [0, 2, 2]],
    ['only deposits', [dep(0)], 4, [1]],
    ['an empty block', [], 3, [0]],
    ['one slice', [dep(0), tx(0), tx(1), tx(2)], 1, [1, 3]],
    ['legacy (no type byte) is not a deposit', [dep(0), '0xf86c0a'], 2, [1, 1]],
    ['a deposit after a transaction stays in its place', [dep(0), tx(0), dep(1), tx(1)], 2, [1, 2, 1]],
  ];
  for (const [name, txs, slices, sizes] of cases) {
    const parts = splitBlock(txs, slices);
    t.same(parts.map((p) => p.length), sizes, name);
    t.same(parts.flat(), txs, `${name}: every tx once, in order`);
    t.ok(parts.slice(1).every((p) => p.length > 0), `${name}: no empty slice after index 0`);
  }
  t.throws(() => splitBlock([tx(0)], 0), /slices must be/, 'zero slices');
});

t.test('parseBlocks: N, N-M, hex; N >= 1 and N <= M', async (t) => {
  t.same(parseBlocks('12'), { first: 12, last: 12 });
  t.same(parseBlocks('12-15'), { first: 12, last: 15 });
  t.same(parseBlocks('0x10-0x11'), { first: 16, last: 17 });
  for (const bad of ['0', '5-4', 'x', '1-', '-3', '1-20000']) t.throws(() => parseBlocks(bad), /--blocks/, `"${bad}" refused`);
});

t.test('bad input and an unreachable node: exit 2 with a clear message', async (t) => {
  const none = await check(['--blocks', '3']);
  t.equal(none.code, CheckExit.CANNOT_CHECK);
  t.match(none.err, /give --node-rpc-url/);
  const noBlocks = await check(['--node-rpc-url', 'http://127.0.0.1:9/']);
  t.equal(noBlocks.code, CheckExit.CANNOT_CHECK);
  t.match(noBlocks.err, /give --blocks/);
  const fork = await check(['--node-rpc-url', 'http://127.0.0.1:9/', '--blocks', '3', '--execution-hardfork', 'shanghai']);
  t.equal(fork.code, CheckExit.CANNOT_CHECK);
  t.match(fork.err, /--execution-hardfork: "shanghai" is not auto or one of bedrock/);
  const unknown = await check(['--node-rpc-url', 'http://127.0.0.1:9/', '--blocks', '3', '--frobnicate']);
  t.equal(unknown.code, CheckExit.CANNOT_CHECK);
  t.match(unknown.err, /frobnicate.*see flashblocksd check-execution --help/);
  const secret = await check(['--node-rpc-url', 'http://user:hunter2secret@127.0.0.1:9/', '--blocks', '3']);
  t.equal(secret.code, CheckExit.CANNOT_CHECK);
  t.match(secret.err, /did not answer eth_chainId/);
  t.notMatch(secret.err, /hunter2secret/, 'the URL is redacted');
  const help = await check(['--help']);
  t.equal(help.code, 0);
  t.match(help.out, /^Usage: flashblocksd check-execution --node-rpc-url URL --blocks N\[-M\]/);
});

t.test('the devnet: a range of blocks with transactions matches; under bedrock it does not', async (t) => {
  const devnet = await startDevnet({ blockTimeMs: 1000, flashblockMs: 200 });
  t.teardown(() => devnet.stop());
  const traffic = await startTraffic({ rpcUrl: devnet.nodeRpcUrl, chainId: devnet.chainId, accounts: devnet.accounts.slice(0, 5), txPerSec: 40 });
  t.teardown(() => traffic.stop());
  const url = devnet.nodeRpcUrl;

  // Three consecutive sealed blocks with transactions besides their deposits, one of them an EIP-7702 transaction
  // (bedrock has no type 4: the wrong spec must differ there at the latest).
  type Block = { number: string; transactions: { type: string }[] };
  const found: Block[] = [];
  let n = 1;
  while (found.length < 3 || !found.some((b) => b.transactions.some((x) => x.type === '0x4'))) {
    const head = Number(await rpc<string>(url, 'eth_blockNumber', []));
    if (n > head) {
      await new Promise<void>((resolve) => {
        const off = devnet.onFlashblock((fb) => {
          if (fb.blockNumber > n) {
            off();
            resolve();
          }
        });
      });
      continue;
    }
    const b = await rpc<Block>(url, 'eth_getBlockByNumber', ['0x' + n.toString(16), true]);
    if (b.transactions.filter((x) => x.type !== '0x7e').length >= 2) found.push(b);
    else found.length = 0;
    if (found.length > 3) found.shift();
    n++;
  }
  await traffic.stop();
  const first = Number(found[0]!.number);
  const last = Number(found[2]!.number);
  const txs = found.reduce((s, b) => s + b.transactions.length, 0);

  const ok = await check(['--node-rpc-url', url, '--blocks', `${first}-${last}`, '--slices', '3']);
  t.equal(ok.code, CheckExit.MATCH, `blocks ${first}-${last} (${txs} txs) match: exit 0`, { out: ok.out, err: ok.err });
  const lines = ok.out.trim().split('\n');
  t.equal(lines.length, 4, 'one line per block and a summary');
  for (let i = 0; i < 3; i++) {
    t.match(lines[i], new RegExp(`^chain 901 \\(Devnet\\) block ${first + i} spec isthmus txs ${found[i]!.transactions.length} \\(\\d+ deposits?, \\d+ flashblocks?\\): match: receipts root, gas used \\(\\d+\\) and logs bloom equal the node's header(; block hash .+)?$`));
  }
  t.match(lines[3], /^check-execution: 3 blocks, all match$/);

  // The same through the real command line (src/main.ts wires the subcommand; the single binary bundles it).
  const child = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'src/main.ts'), 'check-execution', '--node-rpc-url', url, '--blocks', String(last)], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  t.equal(code, 0, 'flashblocksd check-execution: exit 0', { output: out });
  t.match(out, new RegExp(`^chain 901 \\(Devnet\\) block ${last} spec isthmus .*: match: `, 'm'));

  const wrong = await check(['--node-rpc-url', url, '--blocks', `${first}-${last}`, '--execution-hardfork', 'bedrock']);
  t.equal(wrong.code, CheckExit.MISMATCH, 'under bedrock: exit 1', { out: wrong.out, err: wrong.err });
  const bad = wrong.out.split('\n').find((l) => l.includes('MISMATCH'));
  t.ok(bad !== undefined, 'a block is reported as a mismatch');
  t.match(bad, /^chain 901 \(Devnet\) block \d+ spec bedrock txs \d+ .*: MISMATCH: .*receipts root differs \(node 0x[0-9a-f]{64}, executed 0x[0-9a-f]{64}\)/);
  t.match(bad, /first differing tx \d+ \(0x[0-9a-f]{64}\): (rejected by the engine: .+|[a-zA-Z][a-zA-Z0-9 ]* node \S+, executed \S+)$/, 'names the first differing tx and field');
  t.match(wrong.out, /check-execution: 3 blocks, [123] differ/);
});

/** Real blocks whose own full header the witness node serves (the Ecotone ones; op-sepolia 26207960-62 by the next fixture's parent header). */
const WITH_HEADER = /^(op-mainnet-block-1(20794432|21003241|21049889|21057303)|op-sepolia-block-2620796[012])$/;

/**
 * Which of them the operator's check runs here: one of each chain and layout (every fixture goes through the engine
 * and the daemon, its block hash rebuilt, in test/e2e/real-blocks-*.test.ts; this file tests the command, and the
 * suite's time is bounded).
 */
const CHECKED = /^(op-mainnet-block-121003241|op-sepolia-block-26207962|op-mainnet-block-132796100|op-sepolia-block-26208927|unichain-block-10215000)$/;

const withHeader = opBlockFixtures().filter((f) => WITH_HEADER.test(f.name) && CHECKED.test(f.name));
const hashOnly = opBlockFixtures().filter((f) => !WITH_HEADER.test(f.name) && CHECKED.test(f.name));

t.test('real blocks through the witness node: receipts root, gas used, logs bloom and the recomputed block hash equal the real header', { skip: withHeader.length === 0 ? OP_BLOCKS_ABSENT : false }, async (t) => {
  const fixtures = withHeader;
  t.equal(fixtures.length, 2, 'an Ecotone OP Mainnet block and a Holocene OP Sepolia block with a full header are there');
  for (const f of fixtures) {
    const w = await startWitnessNode(f.file);
    try {
      t.not(w.fixture.header, null, `${f.name}: the witness knows the header`);
      const n = w.fixture.block.number;
      const r = await check(['--node-rpc-url', w.url, '--blocks', String(n)]);
      t.equal(r.code, CheckExit.MATCH, `${f.name}: exit 0`, { out: r.out, err: r.err });
      const txs = w.fixture.block.transactions.length;
      t.match(r.out, new RegExp(`^chain ${w.fixture.chainId} \\([^)]+\\) block ${n} spec [a-z]+ txs ${txs} \\(\\d+ deposits?, \\d+ flashblocks?\\): match: receipts root, gas used \\(${w.fixture.header!.gasUsed}\\) and logs bloom equal the node's header; block hash matches \\(state root computed over the node's trie nodes: ${w.fixture.header!.stateRoot}\\)$`, 'm'), `${f.name}: ${txs} txs and the block hash match`);
    } finally {
      await w.close();
    }
  }
});

t.test("real blocks whose witness carries only their hash: the block hash recomputed over the node's trie nodes matches", { skip: hashOnly.length === 0 ? OP_BLOCKS_ABSENT : false }, async (t) => {
  t.equal(hashOnly.length, 3, 'an OP Mainnet, an OP Sepolia (with an SST file) and a Unichain block without a full header are there');
  for (const f of hashOnly) {
    const w = await startWitnessNode(f.file);
    try {
      t.equal(w.fixture.header, null, `${f.name}: no header in this fixture`);
      const n = w.fixture.block.number;
      const r = await check(['--node-rpc-url', w.url, '--blocks', String(n)]);
      t.equal(r.code, CheckExit.MATCH, `${f.name}: exit 0`, { out: r.out, err: r.err });
      t.match(
        r.out,
        new RegExp(
          `^chain ${w.fixture.chainId} \\([^)]+\\) block ${n} spec [a-z]+ txs ${w.fixture.block.transactions.length} .*: match: ` +
            `block hash matches \\(state root computed over the node's trie nodes: 0x[0-9a-f]{64}\\); every transaction executed \\(gas used \\d+\\)$`,
          'm',
        ),
        `${f.name}: the hash ${w.fixture.expectedBlockHash} matches`,
      );
    } finally {
      await w.close();
    }
  }
});

/** A proxy to the node at `target` that refuses debug_dbGet as a node without the method does (-32601). */
async function withoutDbGet(target: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const asked = JSON.parse(body.toString('utf8')) as { id?: unknown; method?: string };
      const answer =
        !Array.isArray(asked) && asked.method === 'debug_dbGet'
          ? Promise.resolve(JSON.stringify({ jsonrpc: '2.0', id: asked.id, error: { code: -32601, message: 'the method debug_dbGet does not exist/is not available' } }))
          : fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then((r) => r.text());
      void answer.then((text) => res.writeHead(200, { 'content-type': 'application/json' }).end(text));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

// Any block whose witness carries only its hash (the node then serves that hash, which the test forges).
const tamperable = hashOnly[0];

t.test('a hash-only block whose hash the node gives wrong: exit 1; a node without debug_dbGet: hash not checked, exit 0', { skip: tamperable === undefined ? OP_BLOCKS_ABSENT : false }, async (t) => {
  const fx = await loadWitnessFixture(tamperable!.file);
  const real = fx.expectedBlockHash!;
  const forged = '0x' + 'ab'.repeat(32);
  const w = await startWitnessNode({ ...fx, expectedBlockHash: forged });
  t.teardown(() => w.close());
  const n = fx.block.number;
  const r = await check(['--node-rpc-url', w.url, '--blocks', String(n)]);
  t.equal(r.code, CheckExit.MISMATCH, 'a forged hash: exit 1', { out: r.out, err: r.err });
  t.match(r.out, new RegExp(`block ${n} .*: MISMATCH: block hash differs \\(node ${forged}, computed ${real}\\); computed state root 0x[0-9a-f]{64}: the node gives only the hash`));
  t.match(r.out, /check-execution: 1 block, 1 differ/);

  const honest = await startWitnessNode(fx);
  t.teardown(() => honest.close());
  t.equal(await rpc<string>(honest.url, 'debug_dbGet', [fx.parent.stateRoot]), '0x' + Buffer.from(fx.preimages.get(fx.parent.stateRoot)!).toString('hex'), 'debug_dbGet: the state root node');
  await t.rejects(rpc(honest.url, 'debug_dbGet', ['0x' + '12'.repeat(32)]), /debug_dbGet: key 0x(12){32} is not in the witness/, 'debug_dbGet: a key the witness lacks is an error');
  const proxy = await withoutDbGet(honest.url);
  t.teardown(() => proxy.close());
  const u = await check(['--node-rpc-url', proxy.url, '--blocks', String(n)]);
  t.equal(u.code, CheckExit.MATCH, 'without debug_dbGet: exit 0 (everything compared matched)', { out: u.out, err: u.err });
  t.match(
    u.out,
    /: match of what is known: every transaction executed \(gas used \d+\); the node gives no receipts root, gas used or logs bloom for this block \(only its hash 0x[0-9a-f]{64} is known\); block hash not checked: the node does not serve trie nodes \(debug_dbGet\): debug_dbGet 0x[0-9a-f]{64}: .*does not exist/,
  );
});
