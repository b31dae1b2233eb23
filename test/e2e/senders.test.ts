// One sender recovery for ingest and the engine, end to end on the devnet (real anvil, real signed flashblocks, the
// native decoder and engine): each flashblock handed to the engine carries the senders the native core recovered at
// ingest — each the real signer, deposits left to the engine (their `from` is in their bytes) — and every flashblock
// still executes and verifies against its receipts root; a daemon whose frames the native core decodes starts no
// sender-recovery worker thread (the JS fallback's, test/state/recover-worker.test.ts, starts at its first batch).
import t from 'tap';
import { keccak256, type Hex } from 'viem';
import { startDevnet } from '../../scripts/devnet/sequencer.js';
import { startTraffic } from '../../scripts/devnet/traffic.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon } from '../../src/daemon.js';
import { SENDER_ROW, senderOfRow, txHexes, type ApplyOutcome, type FlashblockWork } from '../../src/exec/engine.js';
import { createLogger } from '../../src/log.js';

const log = createLogger({ level: 'warn', write: () => undefined });

async function until(pred: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

t.test('the engine is handed the senders ingest recovered, and no recovery worker thread runs', async (t) => {
  const devnet = await startDevnet({ blockTimeMs: 2000, flashblockMs: 200 });
  t.teardown(() => devnet.stop());
  const signer = new Map<string, string>();
  const traffic = await startTraffic({
    rpcUrl: devnet.nodeRpcUrl,
    chainId: devnet.chainId,
    accounts: devnet.accounts.slice(0, 5),
    txPerSec: 40,
    onSent: (s) => void signer.set(s.hash.toLowerCase(), s.from.toLowerCase()),
  });
  t.teardown(() => traffic.stop());
  // Worker threads of this process before the daemon (the test runner may hold one).
  const workersBefore = (process.report.getReport() as { workers: unknown[] }).workers.length;

  const config = loadConfig(['--flashblocks-url', devnet.flashblocksUrl, '--node-rpc-url', devnet.nodeRpcUrl, '--port', '0', '--metrics-port', '0', '--block-time-ms', '2000', '--log-level', 'warn'], {});
  const daemon = await startDaemon(config, { log });
  t.teardown(() => daemon.stop());
  await until(() => daemon.execution?.executed != null, 30_000, 'the engine executes a flashblock');

  // Every flashblock the feed hands over from now on, with its outcome (the real engine, observed).
  const engine = daemon.execution!.engine;
  const handed: { work: FlashblockWork; out: ApplyOutcome }[] = [];
  const apply = engine.applyFlashblock.bind(engine);
  engine.applyFlashblock = async (work) => {
    const out = await apply(work);
    handed.push({ work, out });
    return out;
  };
  t.teardown(() => void (engine.applyFlashblock = apply));
  const signedTxs = (): number => handed.reduce((n, h) => n + txHexes(h.work.txs).filter((raw) => !raw.startsWith('0x7e')).length, 0);
  await until(() => signedTxs() >= 150 && handed.length >= 20, 60_000, '150 signed transactions executed');

  let given = 0;
  let deposits = 0;
  const wrong: string[] = [];
  for (const { work, out } of handed) {
    t.ok(out.ok && out.verified !== false, `${work.blockNumber}/${work.index} executed${out.ok ? '' : `: ${out.reason}: ${out.message}`}`);
    t.equal(work.senders?.length, SENDER_ROW * (work.txs.bounds.length - 1), `${work.blockNumber}/${work.index}: one sender row per transaction`);
    txHexes(work.txs).forEach((raw, i) => {
      const s = work.senders == null ? null : senderOfRow(work.senders, i);
      const hash = keccak256(raw as Hex);
      if (raw.startsWith('0x7e')) {
        deposits++;
        if (s !== null) wrong.push(`${hash}: a deposit was given a sender`);
        return;
      }
      if (s === null) return;
      given++;
      const want = signer.get(hash);
      if (want !== undefined && want !== s) wrong.push(`${hash}: given ${s}, signed by ${want}`);
    });
  }
  t.same(wrong, [], 'every sender given is the signer; deposits get none');
  t.ok(deposits > 0, `${deposits} deposits (their from is the engine's own reading)`);
  t.ok(given > 0, `${given} of ${signedTxs()} signed transactions' senders handed over from ingest's recovery`);

  t.equal((process.report.getReport() as { workers: unknown[] }).workers.length, workersBefore, 'the daemon added no worker thread: natively decoded frames need no recovery worker');
});
