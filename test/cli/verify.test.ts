// `flashblocksd verify`: against the daemon on the devnet with traffic (preconfirmations, exit 0), against plain
// anvil (pending equals latest, exit 1), against anvil whose pending block is its mempool (transactions ahead of
// latest but no early receipt, exit 1), against nothing (exit 2), and through the real CLI process.
import t from 'tap';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startAnvil } from '../../scripts/devnet/anvil.js';
import { devAccounts, startDevnet } from '../../scripts/devnet/sequencer.js';
import { startTraffic } from '../../scripts/devnet/traffic.js';
import { runVerify, VerifyExit, type VerifyReport } from '../../src/cli/verify.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon } from '../../src/daemon.js';
import { createLogger } from '../../src/log.js';
import { captureIo } from '../helpers/cli-io.js';
import { freePort } from '../helpers/rpc-harness.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

async function verify(argv: string[]) {
  const c = captureIo();
  const code = await runVerify(argv, c.io);
  const out = c.out();
  const err = c.err();
  return { code, out, err };
}

t.test('the daemon on the devnet serves preconfirmations: exit 0 with heights, interval, txs and receipts', async (t) => {
  const devnet = await startDevnet({ blockTimeMs: 1000, flashblockMs: 200 });
  t.teardown(() => devnet.stop());
  const config = loadConfig(
    ['--flashblocks-url', devnet.flashblocksUrl, '--node-rpc-url', devnet.nodeRpcUrl, '--port', '0', '--metrics-port', '0', '--block-time-ms', '1000', '--log-level', 'error', '--execution', 'false'],
    {},
  );
  const daemon = await startDaemon(config, { log: createLogger({ level: 'error', write: () => undefined }) });
  t.teardown(() => daemon.stop());
  const traffic = await startTraffic({ rpcUrl: devnet.nodeRpcUrl, chainId: devnet.chainId, accounts: devnet.accounts.slice(0, 4), txPerSec: 20 });
  t.teardown(() => traffic.stop());
  const rpc = `http://127.0.0.1:${daemon.rpcPort}/`;

  const json = await verify([rpc, '--duration-ms', '3000', '--json']);
  t.equal(json.code, VerifyExit.PRECONFIRMING, 'exit 0', { output: json.out + json.err });
  const r = JSON.parse(json.out) as VerifyReport;
  t.equal(r.servesPreconfirmations, true);
  t.equal(r.url, rpc);
  t.ok(r.polls > 0 && r.pending.aheadPolls > 0, `pending ahead of latest in ${r.pending.aheadPolls} of ${r.polls} polls`);
  t.ok((r.pending.last ?? 0) > r.latest.first, 'pending height above the first latest');
  t.ok(r.transactions.seenInPending > 0 && r.transactions.reachedLatest > 0, `${r.transactions.reachedLatest} of ${r.transactions.seenInPending} txs reached latest after pending`);
  t.ok(r.receipts.beforeLatest > 0, `${r.receipts.beforeLatest} of ${r.receipts.checked} receipts before latest`);
  t.ok(r.flashblockIntervalMs !== null && r.flashblockIntervalMs.samples > 0, `flashblock interval ${JSON.stringify(r.flashblockIntervalMs)}`);
  t.match(r.summary, /^preconfirmations observed: \d+ transaction\(s\) were in pending before they reached latest/);

  const text = await verify([rpc, '--duration-ms', '2500']);
  t.equal(text.code, VerifyExit.PRECONFIRMING, 'exit 0 (text)', { output: text.out + text.err });
  t.match(text.out, /heights: +pending \d+ vs latest \d+/);
  t.match(text.out, /flashblocks: +pending changed \d+ times; interval median \d+ ms/);
  t.match(text.out, /receipts: +\d+ of \d+ looked up were served before latest/);
  t.match(text.out, /^OK: preconfirmations observed/m);

  // A busy machine: the first 10 receipt lookups answer only once the node's latest block has the transaction (or
  // verify gives up on them first). Those prove nothing either way: their places go to later transactions (more than
  // verify's 20 are looked up), and the verdict is still OK.
  const post = async (url: string, body: string): Promise<Response> => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const latestNumber = async (): Promise<number> =>
    Number(((await (await post(devnet.nodeRpcUrl, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }))).json()) as { result: string }).result);
  let held = 0;
  const slow = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const hold = body.includes('eth_getTransactionReceipt') && held++ < 10;
      void (async () => {
        const r = await post(rpc, body);
        const text = await r.text();
        const block = hold ? (JSON.parse(text) as { result?: { blockNumber?: string } | null }).result?.blockNumber : undefined;
        if (block !== undefined) while ((await latestNumber()) < Number(block)) await new Promise((w) => setTimeout(w, 50));
        res.writeHead(r.status, { 'content-type': 'application/json' }).end(text);
      })().catch(() => res.writeHead(502).end());
    });
  });
  await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => {
    slow.closeAllConnections();
    slow.close(() => resolve());
  }));
  const late = await verify([`http://127.0.0.1:${(slow.address() as AddressInfo).port}/`, '--duration-ms', '5000', '--json']);
  const lr = JSON.parse(late.out) as VerifyReport;
  t.equal(late.code, VerifyExit.PRECONFIRMING, `late receipts are inconclusive, later ones decide: ${lr.summary}`);
  t.ok(lr.receipts.inconclusive >= 10, `the held lookups counted as inconclusive (${lr.receipts.inconclusive})`);
  t.ok(lr.receipts.beforeLatest > 0 && lr.receipts.checked > 20, `${lr.receipts.beforeLatest} of ${lr.receipts.checked} before latest`);
});

t.test('plain anvil (no flashblocks): exit 1, "pending equals latest"', async (t) => {
  const anvil = await startAnvil();
  t.teardown(() => anvil.stop());
  const r = await verify([anvil.url, '--duration-ms', '1000']);
  t.equal(r.code, VerifyExit.NOT_PRECONFIRMING, 'exit 1', { output: r.out + r.err });
  t.match(r.out, /^NO: pending equals latest: in \d+ polls over 1\.\d s the pending block never held a transaction that latest did not/m);
  const j = await verify([anvil.url, '--duration-ms', '500', '--json']);
  t.equal(j.code, VerifyExit.NOT_PRECONFIRMING);
  const report = JSON.parse(j.out) as VerifyReport;
  t.equal(report.servesPreconfirmations, false);
  t.equal(report.transactions.seenInPending, 0);
  t.match(report.summary, /pending equals latest/);
});

t.test('a node whose chain id is Base\'s (anvil --chain-id 8453): exit 1, explained by Base retiring flashblocks', async (t) => {
  const anvil = await startAnvil({ chainId: 8453 });
  t.teardown(() => anvil.stop());
  const r = await verify([anvil.url, '--duration-ms', '500']);
  t.equal(r.code, VerifyExit.NOT_PRECONFIRMING, 'exit 1', { output: r.out + r.err });
  t.match(r.out, /^ {2}chain: +8453 \(Base\)$/m);
  t.match(r.out, /^NO: Base \(chain 8453\) streamed from 2025-07 until 2026-11-05 18:00 UTC; retired flashblocks with its Denim upgrade/m);
  t.match(r.out, /`pending` has no equivalent any more — point clients at latest \(the node\), and run flashblocksd with --flashblocks-enabled false or remove it \(observed: pending equals latest/);
  const j = await verify([anvil.url, '--duration-ms', '300', '--json']);
  const report = JSON.parse(j.out) as VerifyReport & { chain: { id: number; name: string; retired: string | null } };
  t.same([report.chain.id, report.chain.name], [8453, 'Base']);
  t.match(report.chain.retired ?? '', /2026-11-05 18:00 UTC/);
});

t.test('a node of a chain that streams (anvil --chain-id 130): named, and the summary is the observation', async (t) => {
  const anvil = await startAnvil({ chainId: 130 });
  t.teardown(() => anvil.stop());
  const r = await verify([anvil.url, '--duration-ms', '300']);
  t.equal(r.code, VerifyExit.NOT_PRECONFIRMING);
  t.match(r.out, /^ {2}chain: +130 \(Unichain\)$/m);
  t.match(r.out, /^NO: pending equals latest/m);
});

t.test('plain anvil with a mempool and traffic (pending ahead of latest, no early receipts): exit 1', async (t) => {
  // Interval mining: anvil's pending block holds its mempool, so transactions show up in pending before latest, as
  // on any node that builds pending itself; only a receipt served before latest proves a preconfirmation.
  const anvil = await startAnvil({ automine: true, extraArgs: ['--block-time', '1'] });
  t.teardown(() => anvil.stop());
  const traffic = await startTraffic({ rpcUrl: anvil.url, chainId: anvil.chainId, accounts: devAccounts(4), txPerSec: 20 });
  t.teardown(() => traffic.stop());
  const j = await verify([anvil.url, '--duration-ms', '3000', '--json']);
  const report = JSON.parse(j.out) as VerifyReport;
  t.ok(report.transactions.reachedLatest > 0, `the node does show transactions in pending first (${report.transactions.reachedLatest} reached latest)`);
  t.ok(report.receipts.checked > 0, `receipts were looked up (${report.receipts.checked})`);
  t.equal(report.receipts.beforeLatest, 0, 'none was served before latest');
  t.equal(j.code, VerifyExit.NOT_PRECONFIRMING, 'exit 1', { output: j.out + j.err });
  t.equal(report.servesPreconfirmations, false);
  t.match(report.summary, /^no preconfirmations: \d+ transaction\(s\) were in pending ahead of latest .* but none of the \d+ receipt\(s\) looked up was served before latest/);
});

t.test('an unreachable endpoint or bad arguments: exit 2 with a clear message, no secret printed', async (t) => {
  const dead = await freePort();
  const r = await verify([`http://user:verysecret@127.0.0.1:${dead}/?apikey=abc123`, '--duration-ms', '500']);
  t.equal(r.code, VerifyExit.CANNOT_VERIFY);
  t.match(r.err, /^verify: cannot verify http:\/\/redacted@127\.0\.0\.1:\d+\/\?apikey=redacted: endpoint unreachable \(ECONNREFUSED\) \(eth_getBlockByNumber\)/);
  t.notMatch(r.out + r.err, /verysecret|abc123/);
  const j = await verify([`http://127.0.0.1:${dead}/`, '--json']);
  t.equal(j.code, VerifyExit.CANNOT_VERIFY);
  t.match(JSON.parse(j.out), { error: /unreachable/ });
  const cases: [string[], RegExp][] = [
    [[], /give exactly one <rpc-url>/],
    [['wss://user:wsssecret@x.example/'], /wss:\/\/redacted@x\.example\/ must use http:\/\/ or https:\/\//],
    [['nonsense'], /"<invalid url>" is not a URL/],
    [['http://127.0.0.1:1/', '--duration-ms', 'x'], /--duration-ms: expected a whole number from 200 to 600000, got "x"/],
    [['http://127.0.0.1:1/', '--nope'], /Unknown option '--nope'/],
  ];
  for (const [args, message] of cases) {
    const c = await verify(args);
    t.equal(c.code, VerifyExit.CANNOT_VERIFY, `exit 2: ${message}`);
    t.match(c.err, message);
    t.notMatch(c.err, /wsssecret/);
  }
});

t.test('the real CLI: `flashblocksd verify` against anvil exits 1', async (t) => {
  const anvil = await startAnvil();
  t.teardown(() => anvil.stop());
  const child = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'src/main.ts'), 'verify', anvil.url, '--duration-ms', '500'], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  t.equal(code, 1, 'exit 1', { output: out });
  t.match(out, /pending equals latest/);
});
