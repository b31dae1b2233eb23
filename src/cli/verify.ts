// `flashblocksd verify <rpc-url>`: polls eth_getBlockByNumber("pending", true) against "latest" for a few flashblock
// intervals and says in plain words whether the endpoint serves preconfirmations. Read-only: sends no transaction,
// and never prints the URL unredacted.
import { parseArgs } from 'node:util';
import { presetByChainId, retirementNotice } from '../chain/presets.js';
import { redactUrl } from '../log.js';
import { checkNodeRpcUrl } from './checks.js';
import { observePreconfirmations, secs, VerifyError, type Spread, type VerifyReport } from './observe.js';
import type { CliIo } from './prompt.js';

export { VerifyError, type VerifyReport } from './observe.js';

/** Exit codes of `flashblocksd verify`. */
export const VerifyExit = { PRECONFIRMING: 0, NOT_PRECONFIRMING: 1, CANNOT_VERIFY: 2 } as const;

/** The endpoint's chain, as eth_chainId named it: its preset's title, and why it does not stream when retired. */
export interface VerifiedChain {
  id: number;
  name: string | null;
  /** Set when the chain retired flashblocks: what happened and what to do. */
  retired: string | null;
}

/** The human-readable report. */
export function formatReport(r: VerifyReport & { chain?: VerifiedChain | null }): string {
  const s = (x: Spread | null, unit = 'ms'): string => (x === null ? 'n/a' : `median ${x.median} ${unit} (min ${x.min}, max ${x.max}, ${x.samples} samples)`);
  return [
    `flashblocksd verify ${r.url}: ${r.polls} polls over ${secs(r.durationMs)}${r.failedPolls > 0 ? ` (${r.failedPolls} more failed and were skipped)` : ''}`,
    `  heights:       pending ${r.pending.last ?? 'null'} vs latest ${r.latest.last}; pending ahead of latest in ${r.pending.aheadPolls} of ${r.polls} polls`,
    `  flashblocks:   pending changed ${r.pendingUpdates} times; interval ${s(r.flashblockIntervalMs)}`,
    `  transactions:  ${r.transactions.seenInPending} seen in pending ahead of latest; ${r.transactions.reachedLatest} of them reached latest while watched, ${s(r.transactions.leadMs)} later`,
    `  receipts:      ${r.receipts.beforeLatest} of ${r.receipts.checked} looked up were served before latest had the transaction` +
      `${r.receipts.inconclusive > 0 ? ` (${r.receipts.inconclusive} answered only once latest had it, or not at all: inconclusive)` : ''}; ${s(r.receipts.delayMs)} after it first appeared in pending`,
    ...(r.chain === undefined || r.chain === null ? [] : [`  chain:         ${r.chain.id}${r.chain.name === null ? '' : ` (${r.chain.name})`}`]),
    (r.servesPreconfirmations ? 'OK: ' : 'NO: ') + r.summary,
  ].join('\n');
}

/** `flashblocksd verify --help`. */
export function verifyHelp(): string {
  return [
    'Usage: flashblocksd verify <rpc-url> [--duration-ms 4000] [--poll-interval-ms 50] [--timeout-ms 2000] [--json]',
    '',
    'POSTs eth_getBlockByNumber ["pending", true] and ["latest", false] to <rpc-url> every --poll-interval-ms for',
    '--duration-ms and reports: pending height vs latest, transactions seen in pending before they reach latest,',
    'the observed flashblock interval (how often pending changes), and how soon a preconfirmed transaction has a',
    'receipt. Sends no transactions. --json prints the same report as one JSON object.',
    '',
    'Exit codes: 0 preconfirmations observed (a receipt served before latest had its transaction); 1 not observed',
    '(e.g. "pending equals latest", or a pending block built from the node\'s mempool); 2 could not verify',
    '(bad arguments, endpoint unreachable, timed out, or answered with an error).',
  ].join('\n');
}

function intFlag(name: string, raw: string | undefined, def: number, min: number, max: number): number {
  if (raw === undefined) return def;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) throw new VerifyError(`--${name}: expected a whole number from ${min} to ${max}, got "${raw}"`);
  return Number(raw);
}

/** Runs `flashblocksd verify` with the arguments after the word `verify`; resolves with the exit code. */
export async function runVerify(argv: string[], io: CliIo): Promise<number> {
  let json = false;
  try {
    let parsed: ReturnType<typeof parseVerifyArgs>;
    try {
      parsed = parseVerifyArgs(argv);
    } catch (e) {
      throw new VerifyError(`${(e as Error).message.replace(/'[a-z]+:\/\/[^']*'/gi, (m) => `'${redactUrl(m.slice(1, -1))}'`)} (see flashblocksd verify --help)`);
    }
    const { values, positionals } = parsed;
    json = values.json === true;
    if (values.help === true) {
      io.stdout.write(verifyHelp() + '\n');
      return VerifyExit.PRECONFIRMING;
    }
    if (positionals.length !== 1) throw new VerifyError('give exactly one <rpc-url>, e.g. flashblocksd verify http://127.0.0.1:8547/');
    const url = positionals[0] as string;
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw new VerifyError(`"${redactUrl(url)}" is not a URL; expected http://host:port/ or https://...`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new VerifyError(`${redactUrl(url)} must use http:// or https:// (verify speaks JSON-RPC over HTTP)`);
    const report = await observePreconfirmations({
      url,
      durationMs: intFlag('duration-ms', values['duration-ms'], 4000, 200, 600_000),
      pollIntervalMs: intFlag('poll-interval-ms', values['poll-interval-ms'], 50, 10, 10_000),
      timeoutMs: intFlag('timeout-ms', values['timeout-ms'], 2000, 100, 60_000),
      maxReceiptTxs: 20,
    });
    // The chain explains a missing preconfirmation when it retired flashblocks (Base since Denim): say that, not
    // only "pending equals latest".
    const timeoutMs = intFlag('timeout-ms', values['timeout-ms'], 2000, 100, 60_000);
    const node = await checkNodeRpcUrl(url, timeoutMs);
    const preset = node.chainId === null ? null : presetByChainId(node.chainId);
    const chain: VerifiedChain | null = node.chainId === null ? null : { id: node.chainId, name: preset?.title ?? null, retired: preset === null ? null : retirementNotice(preset, Date.now() / 1000) };
    const out = { ...report, chain };
    if (!report.servesPreconfirmations && chain?.retired != null) out.summary = `${chain.retired} (observed: ${report.summary})`;
    io.stdout.write((json ? JSON.stringify(out) : formatReport(out)) + '\n');
    return report.servesPreconfirmations ? VerifyExit.PRECONFIRMING : VerifyExit.NOT_PRECONFIRMING;
  } catch (e) {
    if (!(e instanceof VerifyError)) throw e;
    if (json) io.stdout.write(JSON.stringify({ error: e.message }) + '\n');
    else io.stderr.write(`verify: ${e.message}\n`);
    return VerifyExit.CANNOT_VERIFY;
  }
}

function parseVerifyArgs(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      'duration-ms': { type: 'string' },
      'poll-interval-ms': { type: 'string' },
      'timeout-ms': { type: 'string' },
    },
  });
}
