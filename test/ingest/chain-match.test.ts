// Is the node on the stream's chain? src/ingest/chain-match.ts on real flashblocks (the Unichain Sepolia capture,
// chain id 1301), then the real daemon process under a replayed stream with a real anvil on another chain id and on
// the same one: one error line naming both ids, a /readyz reason, the metric.
import t from 'tap';
import { startAnvil } from '../../scripts/devnet/anvil.js';
import type { Flashblock } from '../../src/chain/flashblock.js';
import { ChainMatch, describeMismatch, type ChainMismatch } from '../../src/ingest/chain-match.js';
import { decodeFrame } from '../../src/ingest/frame.js';
import { sourceCommand, spawnDaemon } from '../helpers/daemon-process.js';
import { unichainMessages } from '../helpers/fixtures.js';
import { startReplayServer } from '../helpers/replay-server.js';
import { fbTxs } from '../helpers/views.js';
import { ObjectBody } from '../../src/chain/object-body.js';

const CAPTURE_CHAIN_ID = 1301;

function captureFlashblocks(): Flashblock[] {
  return unichainMessages().map((m) => {
    const r = decodeFrame(Buffer.from(JSON.stringify(m)), 1 << 24, false);
    if (!r.ok) throw new Error(r.reason);
    return r.fb;
  });
}

function recorder() {
  const reports: ChainMismatch[] = [];
  const counted: string[] = [];
  return { reports, counted, report: { mismatch: (m: ChainMismatch) => reports.push(m), flashblock: (c: string) => counted.push(c) } };
}

t.test('the chain id of the first signed transaction against eth_chainId: another chain is reported once, with both ids', async (t) => {
  const fbs = captureFlashblocks();
  const head = fbs[0]!.blockNumber - 1;
  const r = recorder();
  const m = new ChainMatch({ farBlocks: 256, persistMs: 30_000 }, r.report);
  const deposits = { ...fbs[0]!, body: new ObjectBody(fbTxs(fbs[0]!).filter((tx) => tx.type === 0x7e), null, null) };
  t.ok(deposits.body.txCount > 0, 'the L1-info deposit (and any other) of index 0');
  m.observe(deposits, head, 0);
  m.setNodeChainId(31337n);
  t.same(r.reports, [], 'deposits carry no chain id: nothing known yet');
  for (const fb of fbs) m.observe(fb, head, 0);
  t.same(r.reports, [{ check: 'chain_id', streamChainId: 1301n, nodeChainId: 31337n }], 'reported once, not per flashblock');
  t.ok(r.counted.length > 0 && r.counted.every((c) => c === 'chain_id'), 'every later flashblock counted');
  t.match(describeMismatch(r.reports[0]!), /chain id 1301, the node \(--node-rpc-url\) answers eth_chainId 31337; .*point --node-rpc-url at a node of chain 1301/);

  const same = recorder();
  const ok = new ChainMatch({ farBlocks: 256, persistMs: 30_000 }, same.report);
  ok.setNodeChainId(1301n);
  for (const fb of fbs) ok.observe(fb, head, 0);
  t.same(same.reports, [], 'the same chain: nothing');
  t.equal(ok.mismatch(), null);
});

t.test('heights that never meet: reported once they stayed far for the persistence time; cleared when they meet', async (t) => {
  const fbs = captureFlashblocks();
  const n = fbs[0]!.blockNumber;
  const r = recorder();
  const m = new ChainMatch({ farBlocks: 100, persistMs: 1000 }, r.report);
  m.setNodeChainId(1301n);
  m.observe(fbs[0]!, n - 100, 0);
  t.equal(m.mismatch(), null, 'at the bound: near');
  m.observe(fbs[0]!, -1, 0);
  t.equal(m.mismatch(), null, 'no node head yet: nothing to compare');
  m.observe(fbs[0]!, n - 5000, 10);
  m.observe(fbs[0]!, n - 5000, 1009);
  t.equal(m.mismatch(), null, 'far, but not for long enough');
  m.observe(fbs[0]!, n - 5000, 1010);
  t.same(r.reports, [{ check: 'heights', streamBlock: n, nodeHead: n - 5000, forMs: 1000 }]);
  m.observe(fbs[0]!, n + 5000, 1500);
  t.equal(r.reports.length, 1, 'still far (now behind the node): not reported again');
  m.observe(fbs[0]!, n - 1, 1600);
  t.equal(m.mismatch(), null, 'met');
  m.observe(fbs[0]!, n - 5000, 2000);
  m.observe(fbs[0]!, n - 5000, 3000);
  t.equal(r.reports.length, 2, 'reported again after meeting in between');
  t.match(describeMismatch(r.reports[1]!), /blocks apart for 1 s; the node is on another chain or far from synced/);
});

async function scrape(port: number): Promise<string> {
  return await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}

t.test('the daemon process: a node on another chain is one error line naming both chain ids, a /readyz reason and a metric', async (t) => {
  const anvil = await startAnvil({ chainId: 31337 });
  t.teardown(() => anvil.stop());
  const upstream = await startReplayServer();
  t.teardown(() => upstream.close());
  // Default --max-ahead-ms: the capture is ~35 M blocks ahead of anvil, so nothing applies, as on a real mix-up.
  const d = await spawnDaemon(sourceCommand(), ['--port', '0', '--metrics-port', '0', '--flashblocks-url', upstream.url, '--node-rpc-url', anvil.url, '--execution', 'false']);
  t.teardown(() => d.close());
  await upstream.waitForClients(1);
  const messages = unichainMessages();
  for (const m of messages.slice(0, 2)) upstream.send(JSON.stringify(m)); // index 1 carries a signed transaction
  let errors: Record<string, unknown>[] = [];
  for (let i = 0; i < 400 && errors.length === 0; i++) {
    errors = d.logs().filter((l) => l.level === 'error');
    if (errors.length === 0) await new Promise((r) => setTimeout(r, 25));
  }
  t.equal(errors.length, 1, 'one error line', { errors });
  t.match(errors[0]?.msg, /the node is on another chain: the flashblocks stream's transactions are for chain id 1301, the node \(--node-rpc-url\) answers eth_chainId 31337/);
  t.match(errors[0], { streamChainId: CAPTURE_CHAIN_ID, nodeChainId: 31337 });
  const r = await fetch(`http://127.0.0.1:${d.metricsPort}/readyz`);
  t.equal(r.status, 503);
  const report = (await r.json()) as { checks: Record<string, { ok: boolean; detail: string }> };
  t.equal(report.checks.chain?.ok, false);
  t.match(report.checks.chain?.detail, /chain id 1301.*eth_chainId 31337/);
  // The rest of the capture, received while the mismatch is known: counted, not logged again.
  for (const m of messages.slice(2)) upstream.send(JSON.stringify(m));
  // Counted from the flashblock that revealed it (index 1, or index 0 when the node's chain id was known first) on.
  let counted = 0;
  for (let i = 0; i < 400 && counted < messages.length - 2; i++) {
    counted = Number(/flashblocksd_chain_mismatch_flashblocks_total\{check="chain_id"\} (\d+)/.exec(await scrape(d.metricsPort))?.[1] ?? 0);
    if (counted < messages.length - 2) await new Promise((r) => setTimeout(r, 25));
  }
  t.ok(counted >= messages.length - 2 && counted <= messages.length, `every flashblock received after it is known is counted (${counted} of ${messages.length})`);
  t.equal(d.logs().filter((l) => l.level === 'error').length, 1, 'said once');
});

t.test('the daemon process: a node on the stream chain is not reported', async (t) => {
  const anvil = await startAnvil({ chainId: CAPTURE_CHAIN_ID });
  t.teardown(() => anvil.stop());
  const upstream = await startReplayServer();
  t.teardown(() => upstream.close());
  const d = await spawnDaemon(sourceCommand(), ['--port', '0', '--metrics-port', '0', '--flashblocks-url', upstream.url, '--node-rpc-url', anvil.url, '--execution', 'false', '--max-ahead-ms', '0', '--block-time-ms', '1000', '--ready-max-age-ms', '600000']);
  t.teardown(() => d.close());
  await upstream.waitForClients(1);
  for (const m of unichainMessages()) upstream.send(JSON.stringify(m));
  type Ready = { ready: boolean; checks: Record<string, { ok: boolean; detail: string }> };
  let report: Ready | null = null;
  for (let i = 0; i < 400; i++) {
    report = (await (await fetch(`http://127.0.0.1:${d.metricsPort}/readyz`)).json()) as Ready;
    if (report.ready) break;
    await new Promise((r) => setTimeout(r, 25));
  }
  t.equal(report?.ready, true, JSON.stringify(report));
  t.same(report?.checks.chain, { ok: true, detail: 'no sign of another chain' });
  t.same(d.logs().filter((l) => l.level === 'error'), []);
  t.match(await scrape(d.metricsPort), /flashblocksd_chain_mismatch_flashblocks_total\{check="chain_id"\} 0/);
});
