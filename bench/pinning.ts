// Flashblock pinning: the pinned read path (X-Flashblock-Min at the current flashblock, so every request is let
// through at once) against the same requests unpinned, same server, same run. eth_getTransactionReceipt and
// eth_getBlockByNumber("pending"): req/s and p50/p99 under autocannon load (interleaved rounds), and p50/p99 of
// sequential keep-alive round trips. Load generator: autocannon (bench/lib.ts postLoad) in a worker thread.
import { unichainMessages, unichainRpcBlock } from '../test/helpers/fixtures.js';
import { feed } from '../test/helpers/ingest.js';
import { startRpc } from '../test/helpers/rpc-harness.js';
import { fmt, percentile, postLoad, runStandalone, sequentialPosts, type BenchOptions, type BenchResult, type BenchRow } from './lib.js';

const JSON_TYPE = { 'content-type': 'application/json' };

interface Case {
  method: string;
  body: string;
  pinned: boolean;
  rps: number[];
  p50: number[];
  p99: number[];
  trips: number[];
}

const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Runs the suite; `quick` keeps it under ~40 s. */
export async function run(opts: BenchOptions): Promise<BenchResult> {
  const seconds = opts.quick ? 3 : 6;
  const rounds = opts.quick ? 2 : 3;
  const trips = opts.quick ? 2000 : 5000;
  const connections = 32;
  const h = await startRpc();
  try {
    const msgs = unichainMessages();
    for (const m of msgs) feed(h.pipeline, m);
    const at = `${(msgs[0]!.metadata as { block_number: number }).block_number}-${msgs.length - 1}`;
    const pinHeaders = { ...JSON_TYPE, 'x-flashblock-min': at };
    const txHash = (unichainRpcBlock() as { transactions: { hash: string }[] }).transactions[1]!.hash;
    const bodies: [string, string][] = [
      ['eth_getTransactionReceipt', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getTransactionReceipt', params: [txHash] })],
      ['eth_getBlockByNumber(pending)', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBlockByNumber', params: ['pending', false] })],
    ];
    const cases: Case[] = [];
    for (const [method, body] of bodies) {
      // Both paths answer the same bytes, and the pinned one is let through at once (not waiting, not refused).
      const plain = await fetch(h.url, { method: 'POST', headers: JSON_TYPE, body });
      const pinned = await fetch(h.url, { method: 'POST', headers: pinHeaders, body });
      const [a, b] = [await plain.text(), await pinned.text()];
      if (a !== b || !a.includes('"result":{') || pinned.headers.get('x-flashblock') !== at) {
        throw new Error(`${method}: pinned answer differs or is not a result (X-Flashblock ${pinned.headers.get('x-flashblock')})`);
      }
      for (const p of [false, true]) cases.push({ method, body, pinned: p, rps: [], p50: [], p99: [], trips: [] });
    }
    const immediateBefore = h.deps.metrics.pinWaits.immediate.value;
    // Interleaved rounds so that drift on the shared cores hits pinned and unpinned alike.
    for (let r = 0; r < rounds; r++) {
      for (const c of cases) {
        const res = await postLoad(h.url, c.body, seconds, connections, { workers: 1, headers: c.pinned ? pinHeaders : JSON_TYPE });
        c.rps.push(res.requests.average);
        c.p50.push(res.latency.p50);
        c.p99.push(res.latency.p99);
      }
      for (const c of cases) c.trips.push(...(await sequentialPosts(h.url, c.body, trips / rounds, { headers: c.pinned ? pinHeaders : JSON_TYPE })));
    }
    const m = h.deps.metrics.pinWaits;
    if (m.waited.value + m.timeout.value + m.refused.value > 0) throw new Error('a pinned request waited or was refused: not the immediate path');
    const pinnedCount = m.immediate.value - immediateBefore;

    const rows: BenchRow[] = [];
    for (let i = 0; i < cases.length; i += 2) {
      const u = cases[i]!;
      const p = cases[i + 1]!;
      const [ur, pr] = [mean(u.rps), mean(p.rps)];
      rows.push({
        name: `${u.method}, pinned (X-Flashblock-Min at the current flashblock) vs unpinned, req/s`,
        value: pr,
        unit: 'req/s',
        baseline: { label: 'unpinned', value: ur },
        verdict: `${fmt((pr / ur) * 100)} % of unpinned; under load p50 / p99 ${fmt(mean(p.p50))} / ${fmt(mean(p.p99))} ms pinned vs ${fmt(mean(u.p50))} / ${fmt(mean(u.p99))} ms unpinned`,
      });
      const [u50, u99, p50, p99] = [percentile(u.trips, 50), percentile(u.trips, 99), percentile(p.trips, 50), percentile(p.trips, 99)];
      rows.push({
        name: `${u.method}, pinned vs unpinned, sequential round trip p50 / p99`,
        value: p50,
        unit: 'µs',
        display: `${fmt(p50)} / ${fmt(p99)} µs`,
        baseline: { label: 'unpinned', value: u50, display: `${fmt(u50)} / ${fmt(u99)} µs` },
        verdict: `p50 ${p50 >= u50 ? '+' : ''}${fmt(p50 - u50)} µs, p99 ${p99 >= u99 ? '+' : ''}${fmt(p99 - u99)} µs`,
      });
    }
    return {
      title: 'Flashblock pinning (X-Flashblock-Min)',
      rows,
      notes:
        `Same RPC server (uWS, real pending state: the Unichain capture, ${msgs.length} flashblocks), pinned requests carry ` +
        `X-Flashblock-Min: ${at} (the current flashblock), so each is let through at once; ${pinnedCount} pinned requests, ` +
        `all counted immediate. autocannon ${connections} connections, pipelining 16, ${seconds} s per case, ${rounds} interleaved ` +
        `rounds (req/s and latency are means over rounds), in a worker thread of the same process; then ${trips} sequential ` +
        `keep-alive round trips per case, split over the rounds (200 warm-up each). The cost measured is the header read, ` +
        `parse and position check per request and the X-Flashblock header every answer carries (pinned and unpinned alike).`,
    };
  } finally {
    await h.close();
  }
}

runStandalone(import.meta.url, run);
