// Pending execution through the daemon on the devnet (standalone, not in `npm run bench`): 20 s of traffic (30 tx/s,
// 2 s blocks of 10 flashblocks), then send → receipt p50 as a client polling the daemon sees it (with `azul`: a
// stream without receipts, so receipts come from execution), pending eth_call answered by the engine next to
// eth_call latest forwarded to the node (same daemon, same load: 300 sequential calls each), and the engine's own
// metrics (apply seconds, executed / verified / diverged flashblocks). Usage: npx tsx bench/execution-rpc.ts [azul]
import { performance } from 'node:perf_hooks';
import { rpcCall } from '../scripts/devnet/anvil.js';
import { startDevnet } from '../scripts/devnet/sequencer.js';
import { startTraffic } from '../scripts/devnet/traffic.js';
import { loadConfig } from '../src/config.js';
import { startDaemon } from '../src/daemon.js';
import { silentLogger } from '../src/log.js';
const azul = process.argv[2] === 'azul';
const devnet = await startDevnet({ blockTimeMs: 2000, flashblockMs: 200 });
const config = loadConfig(['--flashblocks-url', devnet.flashblocksUrl + (azul ? '?azul=1' : ''), '--node-rpc-url', devnet.nodeRpcUrl, '--port', '0', '--metrics-port', '0', '--block-time-ms', '2000', '--log-level', 'error'], {});
const d = await startDaemon(config, { log: silentLogger });
const rpc = `http://127.0.0.1:${d.rpcPort}`;
const sentAt = new Map<string, number>();
const traffic = await startTraffic({ rpcUrl: rpc, chainId: devnet.chainId, accounts: devnet.accounts.slice(0, 4), txPerSec: 30, onSent: (x) => void sentAt.set(x.hash, x.sentAtMs) });
const receiptMs: number[] = [];
const end = performance.now() + 20_000;
const seen = new Set<string>();
while (performance.now() < end) {
  for (const [h, t0] of sentAt) {
    if (seen.has(h)) continue;
    const r = await rpcCall<{ blockNumber: string } | null>(rpc, 'eth_getTransactionReceipt', [h]);
    if (r !== null) { seen.add(h); receiptMs.push(performance.now() - t0); }
  }
  await new Promise((r) => setTimeout(r, 5));
}
await traffic.stop();
const q = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]!; };
const call = async (tag: string) => {
  const ts: number[] = [];
  for (let i = 0; i < 300; i++) { const t0 = performance.now(); await rpcCall(rpc, 'eth_call', [{ to: traffic.token, data: '0x18160ddd' }, tag]); ts.push(performance.now() - t0); }
  return ts;
};
const p = await call('pending'); const l = await call('latest');
const m = await (await fetch(`http://127.0.0.1:${d.metricsPort}/metrics`)).text();
const pick = (n: string) => m.split('\n').filter((x) => x.startsWith(n)).join('\n');
console.log(`stream ${azul ? 'azul' : 'receipts'}: receipts polled: ${receiptMs.length}, send→receipt p50 ${q(receiptMs, 0.5).toFixed(1)} ms p99 ${q(receiptMs, 0.99).toFixed(1)} ms`);
console.log(`eth_call pending (engine) p50 ${q(p, 0.5).toFixed(2)} ms p99 ${q(p, 0.99).toFixed(2)} ms; latest (node) p50 ${q(l, 0.5).toFixed(2)} ms p99 ${q(l, 0.99).toFixed(2)} ms`);
console.log(pick('flashblocksd_execution_apply_seconds_sum'), pick('flashblocksd_execution_apply_seconds_count'));
console.log(pick('flashblocksd_execution_flashblocks_total'), '\n', pick('flashblocksd_execution_verified_total'), '\n', pick('flashblocksd_execution_divergences_total'), '\n', pick('flashblocksd_execution_rebuilds_total'), '\n', pick('flashblocksd_pending_fallbacks_total'));
console.log(pick('flashblocksd_execution_apply_seconds_bucket'));
await d.stop(); await devnet.stop();
