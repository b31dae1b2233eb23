// `npm start` with no flags, as a newcomer runs it: the daemon starts the embedded devnet, prints a curl, that curl
// returns preconfirmed receipts (a block the node does not have yet), and Ctrl-C stops everything it started.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { rpcCall } from '../../scripts/devnet/anvil.js';
import { sourceCommand, spawnDaemon } from '../helpers/daemon-process.js';

/** Child pids of `pid` (from /proc). */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

t.test('no flags: embedded devnet, the printed curl shows preconfirmed receipts, SIGINT stops everything', async (t) => {
  const d = await spawnDaemon(sourceCommand(), ['--port', '0', '--metrics-port', '0'], { startTimeoutMs: 60_000 });
  t.teardown(() => d.close());
  // The printed curl: its --data body and URL.
  const deadline = Date.now() + 10_000;
  while (!/curl .*--data '(.+)' (http\S+)/.test(d.stderr()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const m = /curl .*--data '(.+)' (http\S+)/.exec(d.stderr());
  t.ok(m, 'a curl command is printed');
  if (!m) return;
  const [, body, url] = m as unknown as [string, string, string];
  t.equal(url, d.rpcUrl, 'the curl targets the daemon');
  const config = d.logs().find((l) => l.msg === 'configuration')?.config as { nodeRpcUrl?: string } | undefined;
  t.ok(config?.nodeRpcUrl, 'the devnet node URL is logged');

  // Within 30 s the curl's answer holds receipts of a block the node has not sealed yet.
  let preconfirmed: { blockNumber: string; transactionHash: string } | null = null;
  const until = Date.now() + 30_000;
  while (preconfirmed === null && Date.now() < until) {
    const res = (await (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).json()) as { result?: { blockNumber: string; transactionHash: string }[] };
    const latest = Number(await rpcCall<string>(config!.nodeRpcUrl!, 'eth_blockNumber', []));
    const r = res.result?.find((x) => Number(x.blockNumber) > latest);
    if (r !== undefined) preconfirmed = r;
    else await new Promise((r) => setTimeout(r, 100));
  }
  t.ok(preconfirmed, `a receipt above the node's latest block was returned (${preconfirmed?.transactionHash ?? 'none'})`);

  const kids = childrenOf(d.proc.pid!);
  t.ok(kids.length >= 1, `the daemon started anvil as a child (${kids.join(', ')})`);
  d.proc.kill('SIGINT');
  const exit = await d.exited;
  t.same(exit, { code: 0, signal: null }, 'exit code 0 after SIGINT');
  await new Promise((r) => setTimeout(r, 200));
  t.same(kids.filter(alive), [], 'no process it started is left behind');
});
