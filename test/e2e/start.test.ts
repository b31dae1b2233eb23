// `npm start` with no flags, as a newcomer runs it: the daemon starts the embedded devnet, prints a curl, that curl
// returns preconfirmed receipts (a block the node does not have yet), and Ctrl-C stops everything it started.
// Children never outlive their parent: `kill -9` of the daemon leaves no anvil; SIGINT to the `npm start` process
// (not its process group) stops the daemon cleanly and leaves no process behind; `kill -9` of npm does too.
import t, { type Test } from 'tap';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { privateKeyToAccount } from 'viem/accounts';
import { rpcCall } from '../../scripts/devnet/anvil.js';
import { SETTINGS } from '../../src/config.js';
import { repoRoot, sourceCommand, spawnDaemon } from '../helpers/daemon-process.js';

/** Child pids of `pid` (from /proc). */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Every descendant of `pid` (depth first), from /proc. */
function descendantsOf(pid: number): number[] {
  const out: number[] = [];
  for (const c of childrenOf(pid)) out.push(c, ...descendantsOf(c));
  return out;
}

/** Resolves with the pids of `pids` still alive once none is, or after `maxMs` (polled every 50 ms). */
async function waitGone(pids: number[], maxMs: number): Promise<number[]> {
  const until = Date.now() + maxMs;
  while (pids.some(alive) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  return pids.filter(alive);
}

/** The command name of a pid (from /proc), '' once it is gone. */
function commOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

/** Each thread of `pid` as "name state wchan" (/proc), for a diagnosis of a process that did not exit. */
function threadStates(pid: number): string {
  try {
    return readdirSync(`/proc/${pid}/task`)
      .map((tid) => {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
        const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
        let wchan = '';
        try {
          wchan = readFileSync(`/proc/${pid}/task/${tid}/wchan`, 'utf8');
        } catch {
          // not readable here
        }
        return `${name} ${state} ${wchan}`;
      })
      .join('; ');
  } catch {
    return 'gone';
  }
}

const { NODE_OPTIONS: _tapLoaders, ...childEnv } = process.env;

// Four real process trees, two of them through `npm start` (which compiles first): 2.5 min with a CPU hog beside the
// suite, near the runner's 240 s for a file.
t.setTimeout(360_000);

/** True while `pid` runs. A zombie has exited (its reaper, once npm is gone, may be slow to collect it): not alive. */
const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
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

  // The banner: chain id, node URL, a free funded account and its key, all true, and the same as the README's.
  const banner = d.stderr();
  const chainId = /^ {2}chain id {2}(\d+)$/m.exec(banner)?.[1];
  const nodeUrl = /^ {2}node {6}(http\S+)/m.exec(banner)?.[1];
  const account = /^ {2}account {3}(0x[0-9a-fA-F]{40})\b/m.exec(banner)?.[1];
  const key = /^ {2}key {7}(0x[0-9a-f]{64})$/m.exec(banner)?.[1];
  t.ok(chainId && nodeUrl && account && key, 'the banner shows chain id, node, account and key', { banner });
  if (!chainId || !nodeUrl || !account || !key) return;
  t.equal(Number(await rpcCall<string>(d.rpcUrl, 'eth_chainId')), Number(chainId), 'the chain id is the one the daemon answers');
  t.equal(nodeUrl.replace(/\/$/, ''), config!.nodeRpcUrl!.replace(/\/$/, ''), 'the node URL is the one the daemon forwards to');
  t.equal(Number(await rpcCall<string>(nodeUrl, 'eth_chainId')), Number(chainId), 'and it answers');
  t.equal(privateKeyToAccount(key as `0x${string}`).address, account, 'the key is the account\'s');
  t.ok(BigInt(await rpcCall<string>(d.rpcUrl, 'eth_getBalance', [account, 'latest'])) > 10n ** 18n, 'the account is funded');
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  t.ok(readme.includes(account) && readme.includes(key) && readme.includes(`chain id  ${chainId}`), 'the README quick start shows the same chain id, account and key');

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

  // The viem and ethers examples of docs/api.md (the README links there), verbatim but for the URL, against this devnet.
  const defaultUrl = `http://127.0.0.1:${SETTINGS.find((x) => x.flag === 'port')!.def}/`;
  const api = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
  const snippets = [...api.matchAll(/```js\n([\s\S]*?)```/g)].map((x) => x[1]!.replaceAll(defaultUrl, d.rpcUrl));
  t.equal(snippets.length, 2, 'docs/api.md has a viem and an ethers example');
  // Each prints when the preconfirmed receipt came and how much later `latest` reached its block (a few ms when the
  // transaction landed in its block's last flashblock, so only >= 0 is certain).
  const expected = /^receipt: (?:status )?(success|1) in block (\d+), (\d+) ms after sending\nlatest reached block (\d+) (\d+) ms after the receipt$/;
  for (let i = 0; i < snippets.length; i++) {
    t.ok(snippets[i]!.includes(d.rpcUrl), `example ${i + 1} targets the daemon at the default port's URL`);
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', snippets[i]!], { cwd: repoRoot, env: childEnv, encoding: 'utf8', timeout: 60_000 });
    const out = r.stdout.trim();
    const mm = expected.exec(out);
    t.ok(mm, `example ${i + 1} prints its receipt, then latest reaching its block: ${out} ${r.stderr.slice(-500)}`);
    if (mm) t.equal(mm[4], mm[2], 'latest reached the receipt\'s block');
  }

  const kids = childrenOf(d.proc.pid!);
  t.ok(kids.length >= 1, `the daemon started anvil as a child (${kids.join(', ')})`);
  d.proc.kill('SIGINT');
  const exit = await d.exited;
  t.same(exit, { code: 0, signal: null }, 'exit code 0 after SIGINT');
  await new Promise((r) => setTimeout(r, 200));
  t.same(kids.filter(alive), [], 'no process it started is left behind');
});

t.test('kill -9 of the daemon running the devnet leaves no anvil', async (t) => {
  const d = await spawnDaemon(sourceCommand(), ['--port', '0', '--metrics-port', '0'], { env: childEnv, startTimeoutMs: 60_000 });
  t.teardown(() => d.close());
  const kids = descendantsOf(d.proc.pid!);
  t.ok(kids.some((p) => commOf(p) === 'anvil'), `anvil runs as the daemon's child (${kids.map((p) => `${p} ${commOf(p)}`).join(', ')})`);
  d.proc.kill('SIGKILL');
  t.same(await d.exited, { code: null, signal: 'SIGKILL' });
  t.same(await waitGone(kids, 10_000), [], 'every process the daemon started is gone (the kernel killed anvil with it)');
});

/** `npm start -- <args>` as a real process tree: npm → node dist/src/main.js → anvil. */
async function npmStart(t: Test): Promise<{ d: Awaited<ReturnType<typeof spawnDaemon>>; tree: number[] }> {
  const d = await spawnDaemon(['npm', 'start', '--'], ['--port', '0', '--metrics-port', '0'], { env: childEnv, startTimeoutMs: 180_000 });
  const tree = descendantsOf(d.proc.pid!);
  t.teardown(async () => {
    for (const p of tree) if (alive(p)) process.kill(p, 'SIGKILL');
    await d.close();
  });
  return { d, tree };
}

t.test('SIGINT to the `npm start` process stops the daemon cleanly and leaves no process behind', async (t) => {
  const { d, tree } = await npmStart(t);
  const daemonPid = tree.find((p) => commOf(p) === 'node');
  t.ok(daemonPid, `npm runs the daemon (${tree.map((p) => `${p} ${commOf(p)}`).join(', ')})`);
  t.ok(tree.some((p) => commOf(p) === 'anvil'), 'and the daemon runs anvil');
  const t0 = Date.now();
  process.kill(d.proc.pid!, 'SIGINT'); // npm only, as `kill -INT <pid>` does: not the process group
  const exit = await d.exited;
  t.comment(`npm exited ${Date.now() - t0} ms after SIGINT (${JSON.stringify(exit)})`);
  t.ok(exit.signal === 'SIGINT' || exit.code === 130 || exit.code === 0, `npm ends on the signal (${JSON.stringify(exit)})`);
  t.ok(d.logs().some((l) => l.msg === 'SIGINT received: draining (up to 5000 ms); send again to exit at once'), 'the daemon itself received the SIGINT');
  t.ok(d.logs().some((l) => l.msg === 'stopped cleanly'), 'and stopped cleanly');
  t.same(await waitGone(tree, 5_000), [], 'no process of the tree is left');
});

t.test('kill -9 of the `npm start` process: the daemon notices, stops, and leaves no process behind', async (t) => {
  const { d, tree } = await npmStart(t);
  t.ok(tree.length >= 2, `npm's tree: ${tree.map((p) => `${p} ${commOf(p)}`).join(', ')}`);
  d.proc.kill('SIGKILL');
  await d.exited;
  const killedAt = Date.now();
  const left = await waitGone(tree, 30_000);
  t.same(left, [], 'the daemon and anvil exited after npm died');
  t.ok(d.logs().some((l) => l.msg === 'stopped cleanly'), 'the daemon stopped cleanly (its output still reaches us)');
  if (left.length > 0 || !d.logs().some((l) => l.msg === 'stopped cleanly')) {
    // What the daemon said last, and what its threads were doing, for a failure that only a busy machine shows.
    t.comment(`${Date.now() - killedAt} ms after npm died; the daemon's last log lines: ${JSON.stringify(d.logs().slice(-8))}`);
    for (const pid of left) t.comment(`${pid} ${commOf(pid)}: ${threadStates(pid)}`);
  }
});
