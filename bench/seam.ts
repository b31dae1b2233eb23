// The native seam (issue 40), suite `seam` of bench/run.ts: the engine before the change (commit SEAM_BASE, checked
// out and built beside this one) and after it (this checkout), on the same blocks in the same run: (1) execution cost
// per transaction, warm, for plain transfers, ERC-20 transfers and a swap-like contract; (2) the RPC thread's event-loop
// delay while 200-tx flashblocks execute every 200 ms, next to the same pacing with nothing executed; (3) arrival →
// executed at 200 tx per flashblock; (4) a pending eth_call that differs on every request, through the daemon, next to
// anvil (bench/execution-rpc.ts of each checkout, wrk). Measures; changes nothing in src/.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { startAnvil, type Anvil } from '../scripts/devnet/anvil.js';
import { BlockFactory } from '../scripts/devnet/exec-blocks.js';
import { senderOfRow, txHexes, type ApplyOutcome, type FlashblockWork } from '../src/exec/engine.js';
import { RevmEngine } from '../src/exec/revm.js';
import { nativeDecoder, type NativeDecoder } from '../src/ingest/native-frame.js';
import { COST_KINDS, KindBlockFactory, type CostKind } from './engine-blocks.js';
import { layout, sendersFrom } from './engine-senders.js';
import { loopDelay } from './engine.js';
import { fmt, hasWrk, percentile, runStandalone, sleep, type BenchOptions, type BenchResult, type BenchRow } from './lib.js';

/** The commit before issue 40's binary apply (the engine took its transactions and senders as hex in JSON). */
export const SEAM_BASE = 'b6462b8';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const PER_BLOCK = 10;
const FLASHBLOCK_MS = 200;
const ACCOUNTS = 40;
const progress = (what: string): void => void process.stderr.write(`bench seam: ${what}\n`);

/** The same interface on both sides; the old one takes hex strings where the new one takes bytes. */
interface Side {
  name: 'before' | 'after';
  engine: (node: Anvil) => Promise<RevmEngine>;
  work: (fb: FlashblockWork) => FlashblockWork;
}

/**
 * The checkout of SEAM_BASE the "before" side runs: a git worktree under the temp dir (BENCH_SEAM_BASE_DIR to use
 * another), this checkout's node_modules linked in, its native core built there once (a few minutes the first time).
 */
function baseCheckout(): string {
  const dir = process.env.BENCH_SEAM_BASE_DIR ?? join(tmpdir(), `flashblocksd-seam-${SEAM_BASE}`);
  const git = (...args: string[]): string => execFileSync('git', ['-C', ROOT, ...args], { encoding: 'utf8' });
  if (!existsSync(join(dir, 'package.json'))) {
    progress(`checking out ${SEAM_BASE} at ${dir}`);
    git('worktree', 'add', '--detach', '--force', dir, SEAM_BASE);
  }
  if (!existsSync(join(dir, 'node_modules'))) symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  if (!existsSync(join(dir, 'native', 'flashblocksd-native.node'))) {
    progress(`building ${SEAM_BASE}'s native core (once)`);
    mkdirSync(join(dir, 'native'), { recursive: true });
    execFileSync(process.execPath, [join(dir, 'scripts', 'build-native.mjs')], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
  }
  return dir;
}

/** FlashblockWork as SEAM_BASE's engine takes it: transactions and senders as 0x-hex lists (its feed built them so). */
function oldWork(fb: FlashblockWork): FlashblockWork {
  const n = fb.txs.bounds.length - 1;
  const rows = fb.senders;
  const senders = rows == null ? undefined : Array.from({ length: n }, (_, i) => senderOfRow(rows, i));
  return { ...fb, txs: txHexes(fb.txs), senders } as unknown as FlashblockWork;
}

async function sides(base: string): Promise<Side[]> {
  const mod = (await import(pathToFileURL(join(base, 'src', 'exec', 'revm.ts')).href)) as { RevmEngine: typeof RevmEngine };
  const start = async (E: typeof RevmEngine, node: Anvil): Promise<RevmEngine> => new E({ node: { url: node.url }, specAt: () => 'isthmus' });
  return [
    { name: 'before', engine: (node) => start(mod.RevmEngine, node), work: oldWork },
    { name: 'after', engine: (node) => start(RevmEngine, node), work: (fb) => fb },
  ];
}

/** `fb` with the senders ingest's native recovery gives (as FlashblockWork.senders rows). */
async function withSenders(native: NativeDecoder, fb: FlashblockWork): Promise<FlashblockWork> {
  const { txBytes, signed } = layout(fb);
  return { ...fb, senders: sendersFrom(signed, await native.recoverSenders(txBytes, signed), new Uint8Array(21 * (fb.txs.bounds.length - 1))) };
}

/** Part 1: µs per transaction of each side, warm flashblocks, blocks of one kind replayed back to back, sides alternating per round. */
async function cost(o: BenchOptions, ss: Side[], native: NativeDecoder): Promise<{ rows: BenchRow[]; lines: string[] }> {
  const perFb = o.quick ? 100 : 200;
  const blocksN = o.quick ? 2 : 4;
  const rounds = o.quick ? 1 : 2;
  const node = await startAnvil({ accounts: ACCOUNTS, extraArgs: ['--gas-limit', '2000000000'] });
  const rows: BenchRow[] = [];
  const lines: string[] = [];
  try {
    const f = await KindBlockFactory.open(node, ACCOUNTS);
    const byKind = new Map<CostKind, { number: number; flashblocks: FlashblockWork[] }[]>();
    try {
      for (const kind of COST_KINDS) {
        progress(`building ${blocksN} ${kind} blocks`);
        const bs = [];
        for (let k = 0; k < blocksN; k++) {
          const b = await f.buildBlock(kind, PER_BLOCK, perFb);
          bs.push({ number: b.number, flashblocks: await Promise.all(b.flashblocks.map((fb) => withSenders(native, fb))) });
        }
        byKind.set(kind, bs);
      }
    } finally {
      f.close();
    }
    const replay = async (s: Side, blocks: { number: number; flashblocks: FlashblockWork[] }[]): Promise<{ us: number[]; verified: number; total: number; failed: string[] }> => {
      const e = await s.engine(node);
      const out = { us: [] as number[], verified: 0, total: 0, failed: [] as string[] };
      try {
        await e.start(blocks[0]!.number - 1);
        e.noteCanonical(blocks[0]!.number - 1);
        for (let k = 0; k < blocks.length; k++) {
          if (k > 0) e.noteCanonical(blocks[k]!.number - 1);
          for (const fb of blocks[k]!.flashblocks) {
            const w = s.work(fb);
            const r = await e.applyFlashblock(w);
            out.total++;
            if (!r.ok) {
              out.failed.push(`${fb.blockNumber}/${fb.index}: ${r.message}`);
              continue;
            }
            if (r.verified === true) out.verified++;
            if (k > 0) out.us.push((r.applyMs * 1000) / (fb.txs.bounds.length - 1));
          }
        }
      } finally {
        await e.stop();
      }
      return out;
    };
    // Untimed: both sides' JS compiled before the first kind is timed.
    for (const s of ss) await replay(s, byKind.get(COST_KINDS[0]!)!);
    for (const kind of COST_KINDS) {
      progress(`replaying ${kind} blocks, before and after`);
      const got = new Map(ss.map((s) => [s.name, { us: [] as number[], verified: 0, total: 0, failed: [] as string[] }]));
      for (let r = 0; r < rounds; r++) {
        for (const s of r % 2 === 0 ? ss : [...ss].reverse()) {
          const x = await replay(s, byKind.get(kind)!);
          const g = got.get(s.name)!;
          g.us.push(...x.us);
          g.verified += x.verified;
          g.total += x.total;
          g.failed.push(...x.failed);
        }
      }
      const before = got.get('before')!;
      const after = got.get('after')!;
      const p = (g: typeof after, q: number): number => percentile(g.us, q);
      const target = kind === 'transfer' ? 15 : kind === 'erc20' ? 25 : null;
      const failed = [...before.failed, ...after.failed];
      lines.push(
        `${kind.padEnd(9)} ${perFb} tx/flashblock, senders given: before p50 ${fmt(p(before, 50))} / p99 ${fmt(p(before, 99))} µs, after p50 ${fmt(p(after, 50))} / p99 ${fmt(p(after, 99))} µs ` +
          `(${after.us.length} warm flashblocks a side); roots verified before ${before.verified}/${before.total}, after ${after.verified}/${after.total}${failed.length > 0 ? `; not applied: ${failed[0]}` : ''}`,
      );
      rows.push({
        name: `execution cost per transaction, ${kind === 'transfer' ? 'plain ETH transfers' : kind === 'erc20' ? 'ERC-20 transfers' : 'swap-like contract'}, warm, senders given (apply time of a ${perFb}-tx flashblock / its txs), p50`,
        value: p(after, 50),
        unit: 'µs',
        display: `${fmt(p(after, 50))} µs (p99 ${fmt(p(after, 99))} µs)`,
        baseline: { label: `before (${SEAM_BASE}), same blocks, same run`, value: p(before, 50), display: `${fmt(p(before, 50))} µs (p99 ${fmt(p(before, 99))} µs)` },
        verdict: `${fmt(p(before, 50) / p(after, 50))}× faster than before${target === null ? '' : `; target ≤ ${target} µs`}; receipts roots verified ${after.verified}/${after.total} (before ${before.verified}/${before.total})`,
        ...(target === null ? {} : { met: p(after, 50) <= target }),
      });
    }
  } finally {
    await node.stop();
  }
  return { rows, lines };
}

/**
 * Parts 2 and 3: mixed 200-tx flashblocks (deposits, env probe, refunds, transfers) replayed one every 200 ms; each
 * flashblock's sender recovery starts natively at its due time (its arrival) and the engine waits for it, as the
 * daemon's feed does. Event-loop delay of this thread for nothing executed, before, after; arrival → executed.
 */
async function paced(o: BenchOptions, ss: Side[], native: NativeDecoder): Promise<{ rows: BenchRow[]; lines: string[] }> {
  const blocksN = o.quick ? 3 : 8;
  const node = await startAnvil({ accounts: ACCOUNTS, extraArgs: ['--gas-limit', '2000000000'] });
  try {
    const f = await BlockFactory.open(node, ACCOUNTS);
    const blocks: { number: number; flashblocks: FlashblockWork[] }[] = [];
    try {
      await f.setupContracts();
      for (let k = 0; k < blocksN; k++) blocks.push(await f.buildBlock(PER_BLOCK, 200, true));
    } finally {
      f.close();
    }
    // The max of a loop-delay sample is one event (a GC, a preemption on 2 shared cores): each side is sampled in
    // every round, off included, the order turned each round; a row gives the median over rounds and every sample.
    // Each sample starts from a collected heap: this process's own garbage (building the blocks, the previous
    // sample) is not collected during the next one.
    const rounds = o.quick ? 1 : 3;
    type Delay = { p50: number; p99: number; max: number };
    const offs: Delay[] = [];
    const res = new Map<string, { delays: Delay[]; ms: number[]; verified: number; total: number }>(ss.map((s) => [s.name, { delays: [], ms: [], verified: 0, total: 0 }]));
    for (let round = 0; round < rounds; round++) {
      progress(`paced 200-tx replay, round ${round + 1} of ${rounds}: nothing executed, then ${(round % 2 === 0 ? ss : [...ss].reverse()).map((s) => s.name).join(', then ')}`);
      gc();
      offs.push(
        await loopDelay(async () => {
          let due = performance.now();
          for (let i = 0; i < blocksN * PER_BLOCK; i++) {
            due += FLASHBLOCK_MS;
            await sleep(due - performance.now());
          }
        }),
      );
      for (const s of round % 2 === 0 ? ss : [...ss].reverse()) {
        const r = res.get(s.name)!;
        const e = await s.engine(node);
        await e.start(blocks[0]!.number - 1);
        e.noteCanonical(blocks[0]!.number - 1);
        gc();
        try {
          r.delays.push(
            await loopDelay(async () => {
              let due = performance.now();
              for (let k = 0; k < blocks.length; k++) {
                if (k > 0) e.noteCanonical(blocks[k]!.number - 1);
                for (const fb of blocks[k]!.flashblocks) {
                  due += FLASHBLOCK_MS;
                  await sleep(due - performance.now());
                  const t0 = performance.now();
                  const { txBytes, signed } = layout(fb);
                  const rows = new Uint8Array(21 * (fb.txs.bounds.length - 1));
                  const work = s.work({ ...fb, senders: rows });
                  const recovered = native.recoverSenders(txBytes, signed).then((out) => {
                    sendersFrom(signed, out, rows);
                    // The old engine takes a list, filled in the same way when recovery answers.
                    if (Array.isArray(work.senders)) for (let i = 0; i < work.senders.length; i++) (work.senders as unknown as (string | null)[])[i] = senderOfRow(rows, i);
                  });
                  const out: ApplyOutcome = await e.applyFlashblock({ ...work, sendersRecovered: recovered });
                  r.total++;
                  if (out.ok && out.verified === true) r.verified++;
                  if (k > 0) r.ms.push(performance.now() - t0);
                }
              }
            }),
          );
        } finally {
          await e.stop();
        }
      }
    }
    const median = (xs: number[]): number => percentile(xs, 50);
    const at = (ds: Delay[], k: keyof Delay): number => median(ds.map((d) => d[k]));
    const each = (ds: Delay[]): string => ds.map((d) => fmt(d.max)).join(' / ');
    const b = res.get('before')!;
    const a = res.get('after')!;
    const lines = [
      `off: loop delay p50/p99/max ${fmt(at(offs, 'p50'))}/${fmt(at(offs, 'p99'))}/${fmt(at(offs, 'max'))} ms (medians of ${rounds}; max per round ${each(offs)})`,
      ...[...res].map(
        ([n, r]) =>
          `${n}: loop delay p50/p99/max ${fmt(at(r.delays, 'p50'))}/${fmt(at(r.delays, 'p99'))}/${fmt(at(r.delays, 'max'))} ms (max per round ${each(r.delays)}); ` +
          `arrival → executed p50/p99/max ${fmt(percentile(r.ms, 50))}/${fmt(percentile(r.ms, 99))}/${fmt(Math.max(...r.ms))} ms; roots ${r.verified}/${r.total}`,
      ),
    ];
    const [offP99, aP99, bP99] = [at(offs, 'p99'), at(a.delays, 'p99'), at(b.delays, 'p99')];
    const [offMax, aMax, bMax] = [at(offs, 'max'), at(a.delays, 'max'), at(b.delays, 'max')];
    const rows: BenchRow[] = [
      {
        name: `event-loop delay of the RPC thread while 200-tx flashblocks execute (every 200 ms), p99 (median of ${rounds} rounds)`,
        value: aP99,
        unit: 'ms',
        display: `${fmt(aP99)} ms (off ${fmt(offP99)} ms)`,
        baseline: { label: `before (${SEAM_BASE}), same flashblocks`, value: bP99 },
        verdict: `after ${aP99 - offP99 >= 0 ? '+' : '−'}${fmt(Math.abs(aP99 - offP99))} ms against off (before ${bP99 - offP99 >= 0 ? '+' : '−'}${fmt(Math.abs(bP99 - offP99))} ms); target within 1 ms of off`,
        met: aP99 - offP99 <= 1,
      },
      {
        name: `event-loop delay of the RPC thread while 200-tx flashblocks execute, max (median of ${rounds} rounds)`,
        value: aMax,
        unit: 'ms',
        display: `${fmt(aMax)} ms (off ${fmt(offMax)} ms)`,
        baseline: { label: `before (${SEAM_BASE})`, value: bMax },
        verdict: `max per round: after ${each(a.delays)}, before ${each(b.delays)}, off ${each(offs)} ms; target ≤ 10 ms`,
        met: aMax <= 10,
      },
      {
        name: 'arrival → executed, 200-tx flashblock (sender recovery started at arrival, the engine waits for it), p99',
        value: percentile(a.ms, 99),
        unit: 'ms',
        display: `${fmt(percentile(a.ms, 99))} ms (p50 ${fmt(percentile(a.ms, 50))} ms)`,
        baseline: { label: `before (${SEAM_BASE})`, value: percentile(b.ms, 99), display: `${fmt(percentile(b.ms, 99))} ms (p50 ${fmt(percentile(b.ms, 50))} ms)` },
        verdict: `target ≤ 25 ms; ${a.ms.length} flashblocks over ${rounds} round(s); roots verified after ${a.verified}/${a.total}, before ${b.verified}/${b.total}`,
        met: percentile(a.ms, 99) <= 25,
      },
    ];
    return { rows, lines };
  } finally {
    await node.stop();
  }
}

/** Part 4: the distinct pending eth_call row of bench/execution-rpc.ts, run from each checkout (needs wrk). */
async function distinctCalls(o: BenchOptions, base: string): Promise<{ rows: BenchRow[]; lines: string[] }> {
  if (!hasWrk()) return { rows: [], lines: ['pending eth_call, every call distinct: not run (needs wrk: `apt install wrk`)'] };
  const measure = async (dir: string): Promise<BenchRow[]> => {
    const m = (await import(pathToFileURL(join(dir, 'bench', 'execution-rpc.ts')).href)) as { measureDaemon: (o: BenchOptions) => Promise<{ rows: BenchRow[] }> };
    return (await m.measureDaemon(o)).rows;
  };
  const distinct = (rows: BenchRow[]): BenchRow | undefined => rows.find((r) => r.name.includes('every call distinct'));
  progress('pending eth_call, every call distinct: before');
  const before = distinct(await measure(base));
  progress('pending eth_call, every call distinct: after');
  const afterRows = await measure(ROOT);
  const after = distinct(afterRows);
  if (before === undefined || after === undefined) return { rows: [], lines: ['pending eth_call, every call distinct: a side gave no row'] };
  const ratio = (r: BenchRow): number => r.value / r.baseline!.value;
  // What the generator reaches against a bare uWS app giving the same answer to the same distinct calls (after's run).
  const ceiling = afterRows.find((r) => r.name.includes('ceiling of the distinct row'));
  return {
    rows: [
      {
        name: 'pending eth_call req/s through flashblocksd, every call distinct (executed each time, no read memo)',
        value: after.value,
        unit: 'req/s',
        display: `${fmt(after.value)} req/s (${fmt(ratio(after))}× anvil)`,
        baseline: { label: `before (${SEAM_BASE}), its own run against anvil`, value: before.value, display: `${fmt(before.value)} req/s (${fmt(ratio(before))}× anvil)` },
        verdict: `after: ${after.verdict ?? ''}; target ≥ 3× anvil`,
        met: ratio(after) >= 3,
      },
      ...(ceiling === undefined ? [] : [ceiling]),
    ],
    lines: [`before: ${before.display ?? before.value} — ${before.verdict}`, `after: ${after.display ?? after.value} — ${after.verdict}`],
  };
}

export async function run(o: BenchOptions): Promise<BenchResult> {
  const native = nativeDecoder();
  if (native === null) throw new Error('the native core is not built (npm run build:native)');
  const base = baseCheckout();
  const ss = await sides(base);
  // BENCH_SEAM_PARTS=cost,paced,calls (the default: all) to run some of them again.
  const parts = (process.env.BENCH_SEAM_PARTS ?? 'cost,paced,calls').split(',');
  const none = { rows: [] as BenchRow[], lines: [] as string[] };
  const c = parts.includes('cost') ? await cost(o, ss, native) : none;
  const p = parts.includes('paced') ? await paced(o, ss, native) : none;
  const d = parts.includes('calls') ? await distinctCalls(o, base) : none;
  return {
    title: 'The native seam (issue 40): before and after',
    rows: [...c.rows, ...p.rows, ...d.rows],
    notes:
      `Before = commit ${SEAM_BASE} (transactions and senders crossed to the engine as 0x-hex in a JSON document, the receipts root was computed in TypeScript), ` +
      `checked out beside this one and built with its own native core; after = this checkout (transactions as bytes with their bounds, senders as 21-byte rows, ` +
      `the receipts root and the canonical check in the engine). Both sides get the same flashblocks in the same run; the old side gets them converted to its ` +
      `hex lists before its apply is timed (its feed built those strings itself, untimed here). ` +
      `(1) One anvil node (gas limit 2e9, ${ACCOUNTS} senders); per kind ${o.quick ? 2 : 4} blocks of ${PER_BLOCK} × ${o.quick ? 100 : 200} txs, replayed into a fresh engine per side, ` +
      `sides alternating (${o.quick ? 1 : 2} round(s)); the first block warms the cache and is not timed; senders given as ingest's native recovery gives them (the daemon's path); ` +
      `cost = ApplyOutcome.applyMs / txs. Base's published 35 µs/tx (../shared/research/pending-execution.md) is the reference the targets beat. ` +
      `(2, 3) ${o.quick ? 3 : 8} mixed blocks (BlockFactory) × ${PER_BLOCK} × 200 txs, one flashblock every ${FLASHBLOCK_MS} ms, in ${o.quick ? 1 : 3} round(s) of off, before, after (order turned each round); monitorEventLoopDelay (1 ms resolution) of this thread, medians over rounds; ` +
      `arrival = the flashblock's due time, when its native sender recovery starts; executed = applyFlashblock resolved; the first block not timed. ` +
      `(4) bench/execution-rpc.ts's measureDaemon of each checkout (devnet, daemon in a child process, wrk, 32 connections; distinct calldata per request).\n\n` +
      '```\n' + [...c.lines, ...p.lines, ...d.lines].join('\n') + '\n```',
  };
}

runStandalone(import.meta.url, run);
