// Watches an endpoint's pending and latest blocks for a while and describes, in plain words, whether it serves
// preconfirmations. Read-only (sends no transaction); the URL appears in results only redacted.
import { performance } from 'node:perf_hooks';
import { redactUrl } from '../log.js';
import { NodeClient, NodeError } from '../node/client.js';

export interface VerifyOptions {
  url: string;
  /** How long to watch. */
  durationMs: number;
  /** Poll period of pending and latest. */
  pollIntervalMs: number;
  /** Per-request timeout. */
  timeoutMs: number;
  /**
   * Transactions whose receipts are looked up while they are only in pending. A lookup that gets no answer (a timeout,
   * an error) or a receipt only once latest has the transaction (a slow answer on a busy machine) proves nothing either
   * way: its place goes to another transaction, up to RECEIPT_LOOKUPS_PER_TX times this many transactions in all.
   */
  maxReceiptTxs: number;
}

/** Median, minimum and maximum of a sample, or null when empty. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  samples: number;
}

/** What verify observed; `--json` prints exactly this. */
export interface VerifyReport {
  url: string;
  servesPreconfirmations: boolean;
  /** The verdict in plain words. */
  summary: string;
  durationMs: number;
  polls: number;
  /** Polls after the first that failed (timeout, error answer); they are skipped. */
  failedPolls: number;
  latest: { first: number; last: number };
  pending: { first: number | null; last: number | null; aheadPolls: number; withNewTxsPolls: number; nullPolls: number };
  /** Distinct pending states seen (a new flashblock or block); the interval is between updates of one block. */
  pendingUpdates: number;
  flashblockIntervalMs: Spread | null;
  transactions: { seenInPending: number; reachedLatest: number; leadMs: Spread | null };
  /**
   * `inconclusive`: lookups answered only once latest had the transaction, or not at all (see
   * VerifyOptions.maxReceiptTxs).
   */
  receipts: { checked: number; beforeLatest: number; inconclusive: number; delayMs: Spread | null };
}

/** See VerifyOptions.maxReceiptTxs. */
const RECEIPT_LOOKUPS_PER_TX = 5;

/** The endpoint could not be asked (unreachable, timed out, not JSON-RPC, or an error answer). */
export class VerifyError extends Error {}

interface Block {
  number: string;
  hash: string | null;
  transactions: (string | { hash: string })[];
}

interface Tracked {
  firstSeenMs: number;
  latestAtMs: number | null;
  receiptAtMs: number | null;
  receiptBeforeLatest: boolean | null;
  receiptInFlight: boolean;
  /** Counted against maxReceiptTxs. */
  receiptTracked: boolean;
  /** Its lookup got no answer, or a receipt only once latest had it: not looked up again. */
  inconclusive: boolean;
}

const round = (x: number): number => Math.round(x);

function spread(xs: number[]): Spread | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return { median: round(s[Math.floor(s.length / 2)] as number), min: round(s[0] as number), max: round(s[s.length - 1] as number), samples: s.length };
}

const num = (hex: string): number => Number.parseInt(hex, 16);
const hashOf = (t: string | { hash: string }): string => (typeof t === 'string' ? t : t.hash).toLowerCase();

/** Watches an endpoint's pending and latest blocks and reports whether it preconfirms. Throws VerifyError. */
export async function observePreconfirmations(opts: VerifyOptions): Promise<VerifyReport> {
  const client = new NodeClient({ url: opts.url, timeoutMs: opts.timeoutMs, maxSockets: 8 });
  // Receipt lookups on connections of their own: slow ones never hold up the polls of pending and latest.
  const lookups = new NodeClient({ url: opts.url, timeoutMs: opts.timeoutMs, maxSockets: 4 });
  const call = async <T>(method: string, params: unknown[], over = client): Promise<T> => {
    try {
      return await over.call<T>(method, params);
    } catch (e) {
      if (e instanceof NodeError && e.reason === 'rpc') throw new VerifyError(`${method} answered with an error: ${e.message} (${e.rpcCode ?? '?'})`);
      if (e instanceof NodeError) throw new VerifyError(`cannot verify ${redactUrl(opts.url)}: ${e.message.replace(/^node /, 'endpoint ')} (${method})`);
      throw e;
    }
  };
  const getBlock = (tag: string, full: boolean): Promise<Block | null> => call<Block | null>('eth_getBlockByNumber', [tag, full]);

  const tracked = new Map<string, Tracked>();
  const inLatest = new Set<string>();
  let pendingUpdates = 0;
  let lastChangeMs = -1;
  let lastChangeNumber = -1;
  const intervals: number[] = [];
  let polls = 0;
  let failedPolls = 0;
  let aheadPolls = 0;
  let withNewTxsPolls = 0;
  let nullPolls = 0;
  let firstLatest = -1;
  let lastLatest = -1;
  let firstPending: number | null = null;
  let lastPending: number | null = null;
  let prevKey = '';
  let receiptsChecked = 0;
  let receiptsInconclusive = 0;
  const inflight = new Set<Promise<void>>();

  const lookUpReceipt = (hash: string, tr: Tracked): void => {
    tr.receiptInFlight = true;
    const p = (async () => {
      const receipt = await call<{ blockNumber?: string } | null>('eth_getTransactionReceipt', [hash], lookups).catch(() => undefined);
      const atMs = performance.now();
      if (receipt === undefined) {
        tr.inconclusive = true;
        receiptsInconclusive++;
      } else if (receipt !== null && tr.receiptAtMs === null) {
        // Latest asked after the receipt arrived: a receipt for a block above it was served before latest had it.
        const latest = await getBlock('latest', false).catch(() => null);
        tr.receiptAtMs = atMs;
        tr.receiptBeforeLatest = latest !== null && receipt.blockNumber !== undefined && num(receipt.blockNumber) > num(latest.number);
        if (!tr.receiptBeforeLatest) {
          tr.inconclusive = true;
          receiptsInconclusive++;
        }
      }
      tr.receiptInFlight = false;
    })();
    inflight.add(p);
    void p.finally(() => inflight.delete(p));
  };

  const notePending = (latestNumber: number, pending: Block | null, nowMs: number): void => {
    if (pending === null) {
      nullPolls++;
      return;
    }
    const n = num(pending.number);
    firstPending ??= n;
    lastPending = n;
    const key = `${pending.number}|${pending.hash ?? ''}|${pending.transactions.length}`;
    if (prevKey !== '' && key !== prevKey) {
      pendingUpdates++;
      // The interval is measured between updates of the same pending block: a new block's first flashblock may
      // follow the previous block's last one closely.
      if (lastChangeNumber === n) intervals.push(nowMs - lastChangeMs);
      lastChangeMs = nowMs;
      lastChangeNumber = n;
    }
    prevKey = key;
    if (n <= latestNumber) return;
    aheadPolls++;
    let newTxs = false;
    for (const t of pending.transactions) {
      const h = hashOf(t);
      if (inLatest.has(h)) continue;
      newTxs = true;
      if (!tracked.has(h)) tracked.set(h, { firstSeenMs: nowMs, latestAtMs: null, receiptAtMs: null, receiptBeforeLatest: null, receiptInFlight: false, receiptTracked: false, inconclusive: false });
    }
    if (newTxs) withNewTxsPolls++;
  };

  const noteLatest = async (latest: Block, nowMs: number): Promise<void> => {
    const n = num(latest.number);
    const blocks = [latest];
    // Blocks skipped between two polls still count: fetch them (bounded).
    if (lastLatest >= 0) for (let k = lastLatest + 1; k < n && k < lastLatest + 16; k++) {
      const b = await getBlock('0x' + k.toString(16), false);
      if (b !== null) blocks.push(b);
    }
    for (const b of blocks) {
      for (const t of b.transactions) {
        const h = hashOf(t);
        inLatest.add(h);
        const tr = tracked.get(h);
        if (tr !== undefined && tr.latestAtMs === null) tr.latestAtMs = nowMs;
      }
    }
    if (firstLatest < 0) firstLatest = n;
    lastLatest = Math.max(lastLatest, n);
  };

  const t0 = performance.now();
  try {
    for (let tick = 0; ; tick++) {
      try {
        const [pending, latest] = await Promise.all([getBlock('pending', true), getBlock('latest', false)]);
        const nowMs = performance.now();
        if (latest === null) throw new VerifyError('eth_getBlockByNumber("latest") answered null; is this an Ethereum JSON-RPC endpoint?');
        await noteLatest(latest, nowMs);
        notePending(num(latest.number), pending, nowMs);
        polls++;
      } catch (e) {
        // The first poll decides whether the endpoint can be verified at all; later failures are counted.
        if (polls === 0 || !(e instanceof VerifyError)) throw e;
        failedPolls++;
      }
      for (const [h, tr] of tracked) {
        if (tr.latestAtMs !== null || tr.receiptAtMs !== null || tr.receiptInFlight || tr.inconclusive) continue;
        if (!tr.receiptTracked) {
          if (receiptsChecked - receiptsInconclusive >= opts.maxReceiptTxs || receiptsChecked >= RECEIPT_LOOKUPS_PER_TX * opts.maxReceiptTxs) continue;
          receiptsChecked++;
          tr.receiptTracked = true;
        }
        lookUpReceipt(h, tr);
      }
      const elapsed = performance.now() - t0;
      if (elapsed >= opts.durationMs) break;
      const next = t0 + (tick + 1) * opts.pollIntervalMs;
      const wait = Math.min(next - performance.now(), opts.durationMs - elapsed);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    await Promise.all([...inflight]);
  } finally {
    client.close();
    lookups.close();
  }

  const all = [...tracked.values()];
  const reached = all.filter((t) => t.latestAtMs !== null);
  const receipted = all.filter((t) => t.receiptAtMs !== null && t.receiptBeforeLatest === true);
  const report: VerifyReport = {
    url: redactUrl(opts.url),
    // Only a receipt served before latest had the transaction proves preconfirmation: a node that builds `pending`
    // from its own mempool also shows transactions in pending before they reach latest, but has no receipts for them.
    servesPreconfirmations: receipted.length > 0,
    summary: '',
    durationMs: round(performance.now() - t0),
    polls,
    failedPolls,
    latest: { first: firstLatest, last: lastLatest },
    pending: { first: firstPending, last: lastPending, aheadPolls, withNewTxsPolls, nullPolls },
    pendingUpdates,
    flashblockIntervalMs: spread(intervals),
    transactions: { seenInPending: all.length, reachedLatest: reached.length, leadMs: spread(reached.map((t) => (t.latestAtMs as number) - t.firstSeenMs)) },
    receipts: { checked: receiptsChecked, beforeLatest: receipted.length, inconclusive: receiptsInconclusive, delayMs: spread(receipted.map((t) => (t.receiptAtMs as number) - t.firstSeenMs)) },
  };
  report.summary = summarize(report);
  return report;
}

export const secs = (ms: number): string => (ms / 1000).toFixed(1) + ' s';

/** The verdict in plain words. */
function summarize(r: VerifyReport): string {
  const window = `in ${r.polls} polls over ${secs(r.durationMs)}`;
  if (r.servesPreconfirmations) {
    const parts = [`preconfirmations observed: ${r.transactions.reachedLatest} transaction(s) were in pending before they reached latest`];
    if (r.receipts.beforeLatest > 0) parts.push(`${r.receipts.beforeLatest} receipt(s) were served before latest had the transaction`);
    if (r.flashblockIntervalMs !== null) parts.push(`pending changed every ~${r.flashblockIntervalMs.median} ms`);
    return parts.join('; ') + '.';
  }
  if (r.pending.nullPolls === r.polls) return `pending equals latest: the endpoint answered null for the pending block ${window}; it does not serve preconfirmations.`;
  if (r.transactions.seenInPending === 0) {
    const height = r.pending.aheadPolls > 0 ? ` (it reports pending as block ${r.pending.last}, latest + 1, but with no transactions in it)` : '';
    return `pending equals latest: ${window} the pending block never held a transaction that latest did not${height}; this endpoint does not serve preconfirmations.`;
  }
  if (r.receipts.checked > 0 && r.transactions.reachedLatest > 0) {
    return (
      `no preconfirmations: ${r.transactions.seenInPending} transaction(s) were in pending ahead of latest (${r.transactions.reachedLatest} reached latest ${window}), ` +
      `but none of the ${r.receipts.checked} receipt(s) looked up was served before latest had the transaction; a node that builds pending from its ` +
      'own transaction pool looks like this (so does a flashblocks stream without receipts in its metadata).'
    );
  }
  return (
    `not confirmed: ${r.transactions.seenInPending} transaction(s) were in pending but none reached latest ${window}, and no receipt was ` +
    'served before latest; a node that builds pending from its own transaction pool looks like this. Watch longer with --duration-ms.'
  );
}
