// Part (b) of suite `exec` (bench/exec.ts): the daemon with pending execution on the devnet, post-Azul stream (no
// receipts or balances in metadata: receipts come from execution). Send → receipt as a client polling the daemon
// sees it, next to the node's canonical receipt; then pending eth_call req/s and p99 through the daemon (answered by
// the native engine) next to anvil, the devnet's node, answering the same eth_call at `latest` (same state once the
// traffic stopped), same load generator, same concurrency, same duration. Measures only; no assertion beyond "both
// answers are equal".
import type { ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { getContractAddress, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { rpcBatch, rpcCall } from '../scripts/devnet/anvil.js';
import { startDevnet } from '../scripts/devnet/sequencer.js';
import { startTraffic } from '../scripts/devnet/traffic.js';
import { loadConfig } from '../src/config.js';
import { startDaemon, type Daemon } from '../src/daemon.js';
import { silentLogger } from '../src/log.js';
import { fmt, forkTs, hasWrk, percentile, postLoad, request, scrapeMetrics, sleep, waitExit, wrkLoad, WRK_COUNTER, type AutocannonResult, type BenchOptions, type BenchRow } from './lib.js';

const TX_PER_S = 30;
const POLL_MS = 10;
const CONNECTIONS = 32;
/** Seconds of the same load before each measured one. */
const WARM_S = 2;
/** Largest receipt batch per poll (the daemon's --max-batch-items is 1000). */
const BATCH = 100;

/** Resolves once `ok()` holds; throws `what` after `ms`. */
async function until(ok: () => boolean, ms: number, what: string): Promise<void> {
  const end = performance.now() + ms;
  while (!ok()) {
    if (performance.now() > end) throw new Error(`${what} within ${ms} ms`);
    await sleep(50);
  }
}

/** Polls `url` for the receipts of `sentAt`'s hashes every POLL_MS until all are seen or `until()` ends; ms from send. */
/** Polls the daemon (or node) for the receipts of sent transactions, in batches; ms from submission to the answer. */
export class ReceiptPoller {
  readonly ms: number[] = [];
  private readonly seen = new Set<string>();
  constructor(private readonly url: string, private readonly sentAt: Map<string, number>) {}
  get missing(): number {
    return this.sentAt.size - this.seen.size;
  }
  async poll(): Promise<void> {
    const todo = [...this.sentAt.keys()].filter((h) => !this.seen.has(h));
    for (let i = 0; i < todo.length; i += BATCH) {
      const hashes = todo.slice(i, i + BATCH);
      const res = await rpcBatch<{ blockNumber: string } | null>(this.url, hashes.map((h) => ['eth_getTransactionReceipt', [h]]));
      const now = performance.now();
      for (let k = 0; k < hashes.length; k++) {
        const r = res[k];
        if (r?.ok === true && r.value !== null) {
          this.seen.add(hashes[k]!);
          this.ms.push(now - this.sentAt.get(hashes[k]!)!);
        }
      }
    }
  }
}

/** Runtime returning BALANCE(`who`) as one word; its init code copies it (12-byte prefix) and returns it. */
function readerInit(who: string): Hex {
  const runtime = `73${who.slice(2).toLowerCase()}3160005260206000f3`;
  const n = (runtime.length / 2).toString(16).padStart(2, '0');
  return `0x60${n}600c60003960${n}6000f3${runtime}`;
}

const lat = (r: AutocannonResult): string => `p50 ${r.latency.p50} / p99 ${r.latency.p99} ms`;
/** Runs part (b); about 30 s in `quick`, 60 s in full. */
export async function measureDaemon(o: BenchOptions): Promise<{ rows: BenchRow[]; notes: string }> {
  const trafficS = o.quick ? 6 : 15;
  const loadS = o.quick ? 4 : 10;
  const devnet = await startDevnet({ blockTimeMs: 2000, flashblockMs: 200 });
  let d: Daemon | null = null;
  let child: ChildProcess | null = null;
  let ceiling: ChildProcess | null = null;
  try {
    const config = loadConfig(['--flashblocks-url', `${devnet.flashblocksUrl}?azul=1`, '--node-rpc-url', devnet.nodeRpcUrl, '--port', '0', '--metrics-port', '0',
      '--block-time-ms', '2000', '--log-level', 'error'], {});
    d = await startDaemon(config, { log: silentLogger });
    const rpc = `http://127.0.0.1:${d.rpcPort}`;
    const metricsUrl = `http://127.0.0.1:${d.metricsPort}/metrics`;
    const feed = d.execution;
    if (feed === null) throw new Error('the daemon runs without execution');
    await until(() => feed.executed !== null, 30_000, 'the engine executed no flashblock');

    // The contract the load calls: it reads the balance of a traffic sender (deployed from an account traffic does not use).
    const deployer = privateKeyToAccount(devnet.accounts[4]!.privateKey);
    const holder = devnet.accounts[1]!.address;
    const nonce = Number(await rpcCall<string>(rpc, 'eth_getTransactionCount', [deployer.address, 'pending']));
    const reader = getContractAddress({ from: deployer.address, nonce: BigInt(nonce) });
    await rpcCall(rpc, 'eth_sendRawTransaction', [await deployer.signTransaction({ chainId: devnet.chainId, nonce, type: 'eip1559', maxFeePerGas: 3_000_000_000n, maxPriorityFeePerGas: 1n, gas: 100_000n, data: readerInit(holder) })]);

    // Send → receipt: traffic submitted through the daemon, polled on the daemon and on the node side by side.
    const sentAt = new Map<string, number>();
    const traffic = await startTraffic({ rpcUrl: rpc, chainId: devnet.chainId, accounts: devnet.accounts.slice(0, 4), txPerSec: TX_PER_S, onSent: (x) => void sentAt.set(x.hash, x.sentAtMs) });
    const viaDaemon = new ReceiptPoller(rpc, sentAt);
    const viaNode = new ReceiptPoller(devnet.nodeRpcUrl, sentAt);
    const stopAt = performance.now() + trafficS * 1000;
    let stopped = false;
    // After the traffic stops, up to two blocks for the last receipts to land on the node.
    while (!stopped || ((viaDaemon.missing > 0 || viaNode.missing > 0) && performance.now() < stopAt + 4500)) {
      if (!stopped && performance.now() >= stopAt) {
        await traffic.stop();
        stopped = true;
      }
      await Promise.all([viaDaemon.poll(), viaNode.poll()]);
      await sleep(POLL_MS);
    }
    const m = await scrapeMetrics(metricsUrl);
    const executed = m.get('flashblocksd_execution_flashblocks_total{outcome="executed"}') ?? 0;
    // Every outcome but executed is a flashblock not executed (by reason since issue 22).
    let failedFb = 0;
    for (const [k, v] of m) if (k.startsWith('flashblocksd_execution_flashblocks_total{') && !k.endsWith('{outcome="executed"}')) failedFb += v;
    const verified = m.get('flashblocksd_execution_verified_total') ?? 0;
    const diverged = m.get('flashblocksd_execution_divergences_total{source="receipts_root"}') ?? 0;

    // Pending eth_call throughput: the daemon at `pending` (the native engine) vs anvil itself (the devnet's node,
    // direct) at `latest`: the same state, since the traffic stopped (the stream goes on with empty flashblocks: the
    // L1-info deposit only). The daemon under load runs in its own process (bench/daemon-child.ts), as in production:
    // the one above shares this process's event loop with the devnet's sequencer and the bench. A bare uWS app
    // answering the daemon's own answer bytes (the same child, --static) is the ceiling of this generator here.
    const call = { to: reader };
    const body = (tag: string): string => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_call', params: [call, tag] });
    // The same call with calldata of its own per request (the reader ignores it): no two are the same, so the daemon's
    // read memo never answers one (wrk only: autocannon sends one body).
    const distinctBody = (tag: string): string => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_call', params: [{ ...call, data: '0x' + WRK_COUNTER }, tag] });
    const [ours, theirs] = await Promise.all([rpcCall<string>(rpc, 'eth_call', [call, 'pending']), rpcCall<string>(devnet.anvilUrl, 'eth_call', [call, 'latest'])]);
    if (ours !== theirs || BigInt(ours) === 0n) throw new Error(`pending eth_call ${ours} differs from anvil's latest ${theirs} (or is 0)`);
    await d.stop();
    d = null;
    child = forkTs('daemon-child.ts', ['--flashblocks-url', `${devnet.flashblocksUrl}?azul=1`, '--node-rpc-url', devnet.nodeRpcUrl, '--port', '0', '--metrics-port', '0',
      '--block-time-ms', '2000', '--log-level', 'error']);
    const ready = await request<{ rpcPort: number; metricsPort: number }>(child, {}, 'ready', 60_000);
    const childRpc = `http://127.0.0.1:${ready.rpcPort}`;
    const childMetrics = `http://127.0.0.1:${ready.metricsPort}/metrics`;
    // Ready once its engine answers from executed state, as anvil does: a daemon that joined the stream mid-block
    // answers `pending` as latest (forwarded to the node) until the next block starts.
    const readyBy = performance.now() + 30_000;
    const fromState = async (): Promise<number> => (await scrapeMetrics(childMetrics)).get('flashblocksd_rpc_requests_total{method="eth_call",source="state"}') ?? 0;
    for (;;) {
      if (performance.now() > readyBy) throw new Error('the daemon child never answered the pending eth_call from executed state as anvil does');
      const before = await fromState();
      const got = await rpcCall<string>(childRpc, 'eth_call', [call, 'pending']).catch(() => '');
      if (got === ours && (await fromState()) > before) break;
      await sleep(100);
    }
    const answerBytes = await (await fetch(childRpc, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body('pending') })).text();
    const fallbacks = (): Promise<number> => scrapeMetrics(childMetrics).then((x) => x.get('flashblocksd_pending_fallbacks_total{reason="execution"}') ?? 0);
    const fb0 = await fallbacks();
    const reads = async (): Promise<{ inline: number; threads: number; memo: number }> => {
      const m = await scrapeMetrics(childMetrics);
      const r = (t: string): number => m.get(`flashblocksd_execution_reads_total{thread="${t}"}`) ?? 0;
      return { inline: r('inline'), threads: r('threads'), memo: r('memo') };
    };
    // Pipelining 1: uWS closes a connection that pipelines a request behind an asynchronous answer (bench/rpc.ts).
    const wrk = hasWrk();
    const run = (url: string, b: string, seconds: number): Promise<AutocannonResult> =>
      wrk ? wrkLoad(url, b, seconds, CONNECTIONS) : postLoad(url, b, seconds, CONNECTIONS, { workers: 1, pipelining: 1 });
    // Each server is warmed up with WARM_S of the same load first (JIT, connection set-up), then measured.
    const load = async (url: string, b: string): Promise<AutocannonResult> => {
      await run(url, b, WARM_S);
      return run(url, b, loadS);
    };
    // The engine's counters follow its status on the feed's timer (250 ms).
    const readsDuring = async (run: () => Promise<AutocannonResult>): Promise<{ res: AutocannonResult; share: string }> => {
      const r0 = await reads();
      const res = await run();
      await sleep(600);
      const r1 = await reads();
      const [inl, thr, memo] = [r1.inline - r0.inline, r1.threads - r0.threads, r1.memo - r0.memo];
      const all = inl + thr + memo;
      const pct = (n: number): string => `${fmt((n / all) * 100)} %`;
      const share = all === 0 ? 'no engine read counted' : `${pct(memo)} from the read memo, ${pct(inl)} executed inline on the RPC thread, ${pct(thr)} on the read threads`;
      return { res, share };
    };
    const { res: daemonRun, share: inlineShare } = await readsDuring(() => load(childRpc, body('pending')));
    const distinct = wrk ? await readsDuring(() => load(childRpc, distinctBody('pending'))) : null;
    const fellBack = (await fallbacks()) - fb0;
    const ours2 = await rpcCall<string>(childRpc, 'eth_call', [call, 'pending']);
    const same = ours2 === ours ? 'the answer was unchanged after the load' : `**the answer changed during the load** (${ours} → ${ours2})`;
    child.send({ stop: true });
    await waitExit(child);
    child = null;
    const anvilRun = await load(devnet.anvilUrl, body('latest'));
    const anvilDistinct = distinct === null ? null : await load(devnet.anvilUrl, distinctBody('latest'));
    ceiling = forkTs('daemon-child.ts', ['--static']);
    const c = await request<{ rpcPort: number }>(ceiling, { constant: answerBytes }, 'ready', 30_000);
    const ceilingRun = await load(`http://127.0.0.1:${c.rpcPort}/`, body('pending'));
    // The generator makes every distinct body anew (wrk's Lua): the ceiling for the distinct row, measured the same way.
    const ceilingDistinct = distinct === null ? null : await load(`http://127.0.0.1:${c.rpcPort}/`, distinctBody('pending'));

    const [r50, r99, n50, n99] = [percentile(viaDaemon.ms, 50), percentile(viaDaemon.ms, 99), percentile(viaNode.ms, 50), percentile(viaNode.ms, 99)];
    const lost = `${viaDaemon.missing} of ${sentAt.size} never seen on the daemon, ${viaNode.missing} on the node`;
    const rows: BenchRow[] = [
      {
        name: 'pending eth_call req/s through flashblocksd (answered by the engine)',
        value: daemonRun.requests.average,
        unit: 'req/s',
        baseline: { label: "anvil's own eth_call at latest (the devnet's node, same state)", value: anvilRun.requests.average },
        verdict: `${fmt(daemonRun.requests.average / anvilRun.requests.average)}× anvil (target ≥ 3×); the same call every time; ${inlineShare}; ${fellBack} answered as latest (engine unavailable) over both runs`,
        met: daemonRun.requests.average >= 3 * anvilRun.requests.average,
      },
      ...(distinct === null || anvilDistinct === null
        ? []
        : [
            {
              name: 'pending eth_call req/s through flashblocksd, every call distinct (executed each time, the read memo never answers)',
              value: distinct.res.requests.average,
              unit: 'req/s',
              baseline: { label: "anvil's own eth_call at latest, the same distinct calls", value: anvilDistinct.requests.average },
              verdict: `${fmt(distinct.res.requests.average / anvilDistinct.requests.average)}× anvil; ${distinct.share}; p50 ${distinct.res.latency.p50} / p99 ${distinct.res.latency.p99} ms (anvil ${lat(anvilDistinct)})`,
            },
          ]),
      {
        name: 'uWS constant response (the daemon\'s answer bytes, no work) req/s, same generator: the ceiling here',
        value: ceilingRun.requests.average,
        unit: 'req/s',
        baseline: { label: "anvil's own eth_call at latest", value: anvilRun.requests.average },
        verdict: `${fmt(ceilingRun.requests.average / anvilRun.requests.average)}× anvil; flashblocksd reaches ${fmt((daemonRun.requests.average / ceilingRun.requests.average) * 100)} % of it; ${lat(ceilingRun)}`,
      },
      ...(distinct === null || anvilDistinct === null || ceilingDistinct === null
        ? []
        : [
            {
              name: "uWS constant response to the distinct calls (the daemon's answer bytes, no work) req/s: the ceiling of the distinct row here",
              value: ceilingDistinct.requests.average,
              unit: 'req/s',
              baseline: { label: "anvil's own eth_call at latest, the same distinct calls", value: anvilDistinct.requests.average },
              verdict: `${fmt(ceilingDistinct.requests.average / anvilDistinct.requests.average)}× anvil; 3× anvil is ${fmt(((3 * anvilDistinct.requests.average) / ceilingDistinct.requests.average) * 100)} % of it, flashblocksd reaches ${fmt((distinct.res.requests.average / ceilingDistinct.requests.average) * 100)} %`,
            },
          ]),
      {
        name: 'pending eth_call p99 under that load, flashblocksd',
        value: daemonRun.latency.p99,
        unit: 'ms',
        baseline: { label: 'anvil at latest', value: anvilRun.latency.p99 },
        verdict: `flashblocksd ${lat(daemonRun)}, anvil ${lat(anvilRun)}`,
      },
      {
        name: 'send → receipt via flashblocksd, post-Azul stream (receipts from execution), p50',
        value: r50,
        unit: 'ms',
        baseline: { label: "the node's canonical receipt", value: n50 },
        verdict: `${fmt(n50 - r50)} ms sooner; ${lost}`,
      },
      {
        name: 'send → receipt via flashblocksd, post-Azul stream (receipts from execution), p99',
        value: r99,
        unit: 'ms',
        baseline: { label: "the node's canonical receipt", value: n99 },
        verdict: `${viaDaemon.ms.length} receipts`,
      },
      {
        name: 'devnet flashblocks executed by the daemon whose receipts root = diff.receipts_root',
        value: executed === 0 ? NaN : (verified / executed) * 100,
        unit: '%',
        display: `${verified}/${executed} (${fmt(executed === 0 ? NaN : (verified / executed) * 100)} %)`,
        verdict: `${diverged} receipts-root divergences, ${failedFb} flashblocks failed to apply`,
      },
    ];
    const generator = wrk
      ? 'wrk (C, its own process, one thread)'
      : 'autocannon in a worker thread of this process (wrk not installed: `apt install wrk` for a generator that costs the servers less CPU)';
    const notes =
      `**(b) The daemon on the devnet.** devnet sequencer (2 s blocks, 10 flashblocks), the daemon in process (native engine) on ` +
      `the post-Azul stream (?azul=1). ${trafficS} s of traffic at ${TX_PER_S} tx/s (all devnet tx types) sent through the daemon; receipts polled ` +
      `every ${POLL_MS} ms on the daemon and on the node (batched; latency from submission to the poll answer that held it). Then eth_call ` +
      `of a contract returning a traffic sender's balance: ${generator}, ${CONNECTIONS} connections, pipelining 1, ${loadS} s each after ${WARM_S} s of the same load to warm up, first at \`pending\` ` +
      `through a fresh daemon in its own process (bench/daemon-child.ts, as in production: the daemon above shares this process with the devnet's ` +
      `sequencer), then at \`latest\` on anvil (the devnet's node, direct), then a bare uWS app answering the daemon's own answer bytes (the ` +
      `ceiling of this generator on this machine); both answers equal before the load, ${same}. The daemon adds ` +
      `its RPC hop and the pending block env to every call; the stream goes on during the load (empty flashblocks, executed by the engine). ` +
      `A call the engine can answer from memory within --execution-inline-read-us (500 µs) runs at once on the RPC thread; the others on ` +
      `its read threads; a read asked again at the same executed flashblock is answered from the read memo (--execution-read-memo; ` +
      `flashblocksd_execution_reads_total{thread} counts the three). The first row repeats one call, as a backend polling one view ` +
      `does: after the first of each flashblock, the memo answers it. The distinct row gives every request calldata of its own ` +
      `(${distinct === null ? 'not run: it needs wrk' : 'the reader ignores it'}), so each one is executed; anvil gets the same distinct calls. ` +
      `The generator shares the 2 cores.`;
    return { rows, notes };
  } finally {
    await d?.stop();
    if (child !== null) {
      child.send({ stop: true });
      await waitExit(child);
    }
    if (ceiling !== null) {
      ceiling.send({ stop: true });
      await waitExit(ceiling);
    }
    await devnet.stop();
  }
}
