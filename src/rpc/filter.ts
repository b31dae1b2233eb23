// The one log filter: parsing of `{address, topics}` and matching with go-ethereum's semantics (eth/filters), for
// eth_getLogs over pending blocks and for the pendingLogs and logs subscriptions. Pure; throws RpcError(-32602).
//
// geth: an address list matches any of its addresses (empty = any). Topics are positional: a position that is null,
// an empty list, or a list holding null matches anything; otherwise the log's topic there must be one of the list.
// A log with fewer topics than the filter has positions never matches, even when the extra positions are wildcards
// (`[A, null]` needs a second topic). At most 4 positions.
import { RpcCode, RpcError } from '../errors.js';

/** A parsed filter, lower-case. */
export interface LogFilter {
  /** Any of these; empty = any address. */
  addresses: string[];
  /** Per position: null = wildcard, else the accepted topics. */
  topics: (string[] | null)[];
}

/** A log as the matcher reads it (lower-case hex). */
export interface LogLike {
  readonly address: string;
  readonly topics: readonly string[];
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const TOPIC = /^0x[0-9a-fA-F]{64}$/;
/** geth's maxTopics. */
export const MAX_TOPIC_POSITIONS = 4;
/** Addresses in one filter, and alternatives in one topic position (reth's and geth's limit). */
export const MAX_FILTER_ALTERNATIVES = 1000;

/** How messages name the filter: the whole parameter, and the prefix of its members. */
export interface FilterParamName {
  /** e.g. "params[1]: " or "invalid argument 0: ". */
  whole: string;
  /** e.g. "params[1]." or "invalid argument 0: ". */
  member: string;
}

/** The filter of eth_subscribe("logs" | "pendingLogs", filter). */
export const SUBSCRIPTION_FILTER: FilterParamName = { whole: 'params[1]: ', member: 'params[1].' };
/** The filter of eth_getLogs(filter). */
export const GETLOGS_FILTER: FilterParamName = { whole: 'invalid argument 0: ', member: 'invalid argument 0: ' };

const shown = (x: unknown): string => JSON.stringify(x)?.slice(0, 80) ?? String(x);

/**
 * Parses the `address` and `topics` members of `v` (other members are the caller's). Undefined or null = match
 * everything.
 */
export function parseLogFilter(v: unknown, name: FilterParamName): LogFilter {
  if (v === undefined || v === null) return { addresses: [], topics: [] };
  if (typeof v !== 'object' || Array.isArray(v)) throw invalid(`${name.whole}expected a filter object {address, topics}`);
  const o = v as { address?: unknown; topics?: unknown };
  const p = name.member;
  const addresses: string[] = [];
  if (o.address !== undefined && o.address !== null) {
    const list = alternatives(o.address, `${p}address`);
    for (const a of list) {
      if (typeof a !== 'string' || !ADDRESS.test(a)) throw invalid(`${p}address: expected a 20-byte hex address, got ${shown(a)}`);
      addresses.push(a.toLowerCase());
    }
  }
  const topics: (string[] | null)[] = [];
  if (o.topics !== undefined && o.topics !== null) {
    if (!Array.isArray(o.topics)) throw invalid(`${p}topics: expected an array of at most ${MAX_TOPIC_POSITIONS} topic positions`);
    if (o.topics.length > MAX_TOPIC_POSITIONS) throw invalid(`${p}topics: at most ${MAX_TOPIC_POSITIONS} topic positions, got ${o.topics.length}`);
    for (let i = 0; i < o.topics.length; i++) topics.push(parsePosition(o.topics[i], `${p}topics[${i}]`));
  }
  return { addresses, topics };
}

/** One value or a list of them, at most MAX_FILTER_ALTERNATIVES. */
function alternatives(v: unknown, where: string): unknown[] {
  const list = Array.isArray(v) ? (v as unknown[]) : [v];
  if (list.length > MAX_FILTER_ALTERNATIVES) throw invalid(`${where}: ${list.length} values, at most ${MAX_FILTER_ALTERNATIVES} allowed`);
  return list;
}

function parsePosition(v: unknown, where: string): string[] | null {
  if (v === null) return null;
  const out: string[] = [];
  for (const x of alternatives(v, where)) {
    // geth stops at a null inside the list: the whole position is a wildcard.
    if (x === null) return null;
    if (typeof x !== 'string' || !TOPIC.test(x)) throw invalid(`${where}: expected null or a 32-byte hex topic, got ${shown(x)}`);
    out.push(x.toLowerCase());
  }
  return out.length === 0 ? null : out;
}

function invalid(message: string): RpcError {
  return new RpcError(RpcCode.INVALID_PARAMS, message);
}

/** Whether a log (lower-case address and topics) matches `f` (see the file comment). */
export function logMatches(f: LogFilter, log: LogLike): boolean {
  if (f.addresses.length > 0 && !f.addresses.includes(log.address)) return false;
  const topics = log.topics;
  if (f.topics.length > topics.length) return false;
  for (let i = 0; i < f.topics.length; i++) {
    const want = f.topics[i];
    if (want != null && !want.includes(topics[i]!)) return false;
  }
  return true;
}
