// Test helper: one real block through a real daemon (src/daemon.ts startDaemon, in this process) in every stream dialect, its node
// the block's witness node (scripts/witness/server.ts) and its upstream a replay server. Asserts what the daemon
// verified (its metrics), the pending block's receipts as served (shape, values; their receipts root, gas and bloom
// the real block's) and the pending state of every account and slot the block changed (the post-state whose root
// gives the real block hash). Used by test/e2e/real-blocks-*.test.ts, which pick the fixtures.
//
// Daemon starts: one per fixture, and all four dialects through it. After the first dialect's frames, each next
// dialect streams the same block again under a new payload_id: an index 0 with a new payload at a held height is a
// builder that restarted the block, so the daemon replaces the build and the engine executes it again from its
// first flashblock. That is 19 starts (in process: a child process through tsx cost ≈2 s of CPU each here) for 76 (fixture, dialect) runs, instead of 76 starts.
import type { Test } from 'tap';
import { Ajv, type ValidateFunction } from 'ajv';
import type { WitnessFixture } from '../../scripts/witness/fixture.js';
import { startWitnessNode } from '../../scripts/witness/server.js';
import type { HeaderFields } from '../../src/chain/header.js';
import type { AddonAccountChange } from '../../src/exec/addon.js';
import { receiptFromRpc, receiptsRoot, type ExecutedReceipt } from '../../src/exec/receipts.js';
import { TX_DEPOSIT } from '../../src/chain/types.js';
import { loadConfig } from '../../src/config.js';
import { startDaemon } from '../../src/daemon.js';
import { createLogger } from '../../src/log.js';
import { loadJson } from './fixtures.js';
import type { OpBlockFixture } from './op-blocks.js';
import { bloomOf, DIALECTS, engineFor, executeBlock, framesOf, rebuildHeader, specOf, type Dialect, type Executed, type RealBlock, type Rebuilt } from './real-block.js';
import { startReplayServer } from './replay-server.js';
import { metricValue } from './metrics-text.js';

interface OpenRpc {
  methods: { name: string; result: { schema: unknown } }[];
}
const ajv = new Ajv({ strict: false, allErrors: true });
const receiptSchema: ValidateFunction = ajv.compile(
  loadJson<OpenRpc>('execution-apis-derived/result-schemas.json').methods.find((m) => m.name === 'eth_getTransactionReceipt')!.result.schema as object,
);
/** OP fields the execution-apis schema does not list (additionalProperties: false): removed before validation. */
const OP_FIELDS = ['depositNonce', 'depositReceiptVersion', 'l1GasPrice', 'l1GasUsed', 'l1Fee', 'l1FeeScalar', 'l1BaseFeeScalar', 'l1BlobBaseFee', 'l1BlobBaseFeeScalar', 'operatorFeeScalar', 'operatorFeeConstant', 'blockTimestamp'];
/** Ecotone's L1-fee receipt fields (op-geth / op-reth), on every non-deposit receipt of these blocks. */
const L1_FEE_FIELDS = ['l1Fee', 'l1GasPrice', 'l1GasUsed', 'l1BaseFeeScalar', 'l1BlobBaseFee', 'l1BlobBaseFeeScalar'];

type Rpc = Record<string, any>;

/** The daemon under test: src/daemon.ts startDaemon in this process (what src/main.ts runs), its log kept. */
interface DaemonProcess {
  rpcUrl: string;
  metricsPort: number;
  logs(): Record<string, unknown>[];
  close(): Promise<void>;
}

async function bootDaemon(args: string[]): Promise<DaemonProcess> {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({ level: 'info', write: (line) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  const daemon = await startDaemon(loadConfig(args, {}), { log });
  return { rpcUrl: `http://127.0.0.1:${daemon.rpcPort}/`, metricsPort: daemon.metricsPort, logs: () => lines, close: () => daemon.stop() };
}

/** The real block's roots the daemon's answers must equal, and where they come from (for messages). */
interface Anchor {
  receiptsRoot: string;
  gasUsed: bigint;
  logsBloom: string;
  source: string;
}

async function rpc<T>(url: string, method: string, params: unknown[]): Promise<T> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  const body = (await res.json()) as { result?: T; error?: { message: string } };
  if (body.error !== undefined) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}

interface Counts {
  handled: number;
  executed: number;
  verified: number;
  divergences: number;
}

async function counts(d: DaemonProcess): Promise<Counts> {
  const text = await (await fetch(`http://127.0.0.1:${d.metricsPort}/metrics`)).text();
  return {
    handled: metricValue(text, 'flashblocksd_execution_flashblocks_total'),
    executed: metricValue(text, 'flashblocksd_execution_flashblocks_total{outcome="executed"}'),
    verified: metricValue(text, 'flashblocksd_execution_verified_total'),
    divergences: metricValue(text, 'flashblocksd_execution_divergences_total'),
  };
}

async function until<T>(f: () => Promise<T>, ok: (v: T) => boolean, ms: number, what: string): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (ok(v)) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what} (last: ${JSON.stringify(v)})`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** What one fixture matched, for the per-block table. */
export interface RealBlockRow {
  name: string;
  chainId: number;
  fork: string;
  txs: number;
  headerKnown: boolean;
  dialects: string[];
}

/**
 * Runs `f` through a fresh daemon in every dialect and asserts it; returns the table row. The receipts the frames
 * carry (a builder's own execution, and its roots in the earlier flashblocks) come from the engine over the same
 * witness; the last flashblock carries the real block's receipts root, which the daemon must verify: the header's,
 * or where the fixture has only the block hash, the root of a header rebuilt from execution whose hash is the real one.
 */
/** The header fields compared with the real header, each as a string. */
function fieldsOf(h: HeaderFields): Record<string, string> {
  return {
    parentHash: h.parentHash, miner: h.feeRecipient, stateRoot: h.stateRoot, transactionsRoot: h.transactionsRoot, receiptsRoot: h.receiptsRoot,
    logsBloom: h.logsBloom, number: String(h.number), gasLimit: String(h.gasLimit), gasUsed: String(h.gasUsed), timestamp: String(h.timestamp),
    extraData: h.extraData, mixHash: h.prevRandao, baseFeePerGas: String(h.baseFeePerGas), withdrawalsRoot: h.withdrawalsRoot,
    blobGasUsed: String(h.blobGasUsed), parentBeaconBlockRoot: h.parentBeaconBlockRoot, requestsHash: String(h.requestsHash),
  };
}

/** The same fields of the fixture's real header, or null when it carries only the block hash. */
function realFields(fx: WitnessFixture): Record<string, string> | null {
  const h = fx.header;
  if (h === null) return null;
  return {
    parentHash: h.parentHash, miner: h.miner, stateRoot: h.stateRoot, transactionsRoot: h.transactionsRoot, receiptsRoot: h.receiptsRoot,
    logsBloom: h.logsBloom, number: String(h.number), gasLimit: String(h.gasLimit), gasUsed: String(h.gasUsed), timestamp: String(h.timestamp),
    extraData: h.extraData, mixHash: h.mixHash, baseFeePerGas: String(h.baseFeePerGas), withdrawalsRoot: String(h.withdrawalsRoot),
    blobGasUsed: String(h.blobGasUsed), parentBeaconBlockRoot: String(h.parentBeaconBlockRoot), requestsHash: String(h.requestsHash),
  };
}

export async function throughDaemon(t: Test, f: OpBlockFixture, dialects: readonly Dialect[] = DIALECTS): Promise<RealBlockRow> {
  const witness = await startWitnessNode(f.file);
  t.teardown(() => witness.close());
  const fx: RealBlock = witness.fixture;
  const n = Number(fx.block.number);
  const row: RealBlockRow = { name: f.name, chainId: fx.chainId, fork: specOf(fx), txs: fx.block.transactions.length, headerKnown: fx.header !== null, dialects: [] };

  // The builder's execution (the frames carry its receipts), and the real block's roots to anchor on: the header's
  // where the fixture has it, else the header rebuilt from this execution once its hash is the real block's.
  const e = await engineFor(fx, witness.url);
  let ref: Executed;
  let rebuilt: Rebuilt | null = null;
  try {
    ref = await executeBlock(e, fx);
    if (ref.failure === null) rebuilt = await rebuildHeader(e, fx, ref.receipts);
  } finally {
    await e.stop();
  }
  if (ref.failure !== null || rebuilt === null) {
    t.fail(`${f.name}: the engine failed the block: ${ref.failure}`);
    return row;
  }
  t.equal(specOf(fx), witness.fixture.fork, `${f.name}: the daemon's preset runs it under ${witness.fixture.fork}`);
  t.equal(ref.receipts.length, fx.block.transactions.length, `${f.name}: one receipt per transaction`);
  // Where the fixture has the full header, every field rebuilt from execution is compared (the diagnosis when the
  // hash differs).
  const real = realFields(witness.fixture);
  if (real !== null) {
    const mine = fieldsOf(rebuilt.header);
    for (const k of Object.keys(real)) {
      const same = mine[k]!.toLowerCase() === real[k]!.toLowerCase();
      t.ok(same, `${f.name}: header ${k} ${same ? 'matches' : `differs: computed ${mine[k]}, real ${real[k]}`}`);
    }
  }
  const realHash = fx.expectedBlockHash ?? fx.header?.hash ?? null;
  t.ok(realHash !== null, `${f.name}: the fixture names its block hash`);
  t.equal(rebuilt.hash, realHash, `${f.name}: the builder's execution is the real block (the header rebuilt from it hashes to the block's hash)`);
  if (fx.header === null && rebuilt.hash !== realHash) return row;
  const anchor: Anchor = fx.header !== null
    ? { receiptsRoot: fx.header.receiptsRoot.toLowerCase(), gasUsed: BigInt(fx.header.gasUsed), logsBloom: fx.header.logsBloom.toLowerCase(), source: "the real header's" }
    : { receiptsRoot: rebuilt.header.receiptsRoot, gasUsed: rebuilt.header.gasUsed, logsBloom: rebuilt.header.logsBloom, source: 'the real block\'s (its hash proves it)' };

  const upstream = await startReplayServer();
  t.teardown(() => upstream.close());
  const daemon = await bootDaemon([
    '--flashblocks-url', upstream.url, '--node-rpc-url', witness.url, '--port', '0', '--metrics-port', '0',
    '--pending-max-age-ms', '600000',
  ]);
  t.teardown(() => daemon.close());
  await upstream.waitForClients(1, 30_000);
  await until(() => rpc<string>(daemon.rpcUrl, 'eth_blockNumber', []), (h) => Number(h) === n - 1, 30_000, 'the daemon to see the parent as its head');

  for (const [k, dialect] of dialects.entries()) {
    const frames = framesOf(fx, ref.receipts, dialect, {
      finalReceiptsRoot: anchor.receiptsRoot,
      finalLogsBloom: anchor.logsBloom,
      finalStateRoot: rebuilt.header.stateRoot,
      payloadId: '0x' + (0x5ea10000n + BigInt(k)).toString(16).padStart(16, '0'),
    });
    const before = await counts(daemon);
    for (const frame of frames) upstream.send(frame);
    const after = await until(() => counts(daemon), (c) => c.handled - before.handled >= frames.length, 60_000, `${f.name} (${dialect}): ${frames.length} flashblocks handled by execution`);
    const label = `${f.name} ${dialect}`;
    t.equal(after.executed - before.executed, frames.length, `${label}: every flashblock executed`);
    t.equal(after.divergences - before.divergences, 0, `${label}: no divergence`);
    // op-subblocks keeps the builder's receipts roots; only zero roots go unverified (none here).
    t.equal(after.verified - before.verified, frames.length, `${label}: every flashblock verified, the last against ${anchor.source} receipts root`);
    if (after.divergences !== before.divergences) t.comment(daemon.logs().filter((l) => /differs|disagree/.test(String(l.msg))).slice(-3).map((l) => JSON.stringify(l)).join('\n'));
    const ok = (await pendingMatches(t, label, daemon, fx, ref.receipts, anchor)) && (await pendingStateMatches(t, label, daemon, n, rebuilt.changes));
    if (ok && after.verified - before.verified === frames.length && after.divergences === before.divergences) row.dialects.push(dialect);
  }
  return row;
}

/** The pending block and each receipt as the daemon serves them; true when all matched. */
async function pendingMatches(t: Test, label: string, daemon: DaemonProcess, fx: RealBlock, ref: readonly ExecutedReceipt[], anchor: Anchor): Promise<boolean> {
  let ok = true;
  const check = (cond: boolean, what: string): void => {
    t.ok(cond, `${label}: ${what}`);
    ok &&= cond;
  };
  const n = Number(fx.block.number);
  const block = await rpc<Rpc | null>(daemon.rpcUrl, 'eth_getBlockByNumber', ['pending', false]);
  check(block !== null && Number(block.number) === n, `the pending block is ${n}`);
  const hashes = ref.map((r) => r.transactionHash);
  check(JSON.stringify(block?.transactions ?? []) === JSON.stringify(hashes), `it lists the block's ${hashes.length} transactions in order`);
  const served: ExecutedReceipt[] = [];
  const wrong: string[] = [];
  let logIndex = 0;
  for (let i = 0; i < ref.length; i++) {
    const r = await rpc<Rpc | null>(daemon.rpcUrl, 'eth_getTransactionReceipt', [hashes[i]]).catch((e: unknown) => (e as Error).message);
    if (r === null || typeof r === 'string') {
      wrong.push(`receipt ${i} (${hashes[i]}): not served at pending${r === null ? '' : ` (${r})`}`);
      continue;
    }
    const x = ref[i]!;
    const s = receiptFromRpc(r);
    served.push(s);
    const stripped = Object.fromEntries(Object.entries(r).filter(([k]) => !OP_FIELDS.includes(k)));
    const bad: string[] = [];
    if (!receiptSchema(stripped)) bad.push(`schema: ${ajv.errorsText(receiptSchema.errors).slice(0, 300)}`);
    if (Number(r.blockNumber) !== n || Number(r.transactionIndex) !== i) bad.push(`blockNumber/transactionIndex ${r.blockNumber}/${r.transactionIndex}`);
    if (s.status !== x.status) bad.push(`status ${r.status}`);
    if (s.cumulativeGasUsed !== x.cumulativeGasUsed) bad.push(`cumulativeGasUsed ${r.cumulativeGasUsed} (executed ${x.cumulativeGasUsed})`);
    if (s.gasUsed !== x.gasUsed) bad.push(`gasUsed ${r.gasUsed} (executed ${x.gasUsed})`);
    if (s.effectiveGasPrice !== x.effectiveGasPrice) bad.push(`effectiveGasPrice ${r.effectiveGasPrice} (executed ${x.effectiveGasPrice})`);
    if (s.logs.length !== x.logs.length) bad.push(`${s.logs.length} logs (executed ${x.logs.length})`);
    for (const l of r.logs as Rpc[]) {
      if (Number(l.logIndex) !== logIndex++ || Number(l.transactionIndex) !== i || l.transactionHash !== hashes[i]) bad.push(`log ${l.logIndex}: logIndex/transactionIndex/transactionHash`);
    }
    if (x.type === TX_DEPOSIT) {
      if (r.depositNonce === undefined || BigInt(r.depositNonce) !== x.depositNonce) bad.push(`depositNonce ${r.depositNonce} (executed ${x.depositNonce})`);
      if (r.depositReceiptVersion !== '0x1') bad.push(`depositReceiptVersion ${r.depositReceiptVersion}`);
    } else {
      const missing = L1_FEE_FIELDS.filter((k) => typeof r[k] !== 'string');
      if (missing.length > 0) bad.push(`no ${missing.join(', ')}`);
    }
    if (bad.length > 0) wrong.push(`receipt ${i} (${x.type === TX_DEPOSIT ? 'deposit' : `type ${x.type}`}, ${hashes[i]}): ${bad.join('; ')}`);
  }
  const kinds = [...new Set(ref.map((r) => (r.type === TX_DEPOSIT ? 'deposit' : `type ${r.type}`)))].join(', ');
  check(wrong.length === 0, `all ${ref.length} receipts (${kinds}) served at pending with the spec's fields and the executed values${wrong.length ? ':\n' + wrong.join('\n') : ''}`);
  if (served.length === ref.length) {
    const gas = served.length === 0 ? 0n : served[served.length - 1]!.cumulativeGasUsed;
    check(receiptsRoot(served) === anchor.receiptsRoot, `the served receipts' root is ${anchor.source} (${anchor.receiptsRoot.slice(0, 12)}…)`);
    check(gas === anchor.gasUsed, `gas used ${gas} is ${anchor.source}`);
    check(bloomOf(served) === anchor.logsBloom, `the logs bloom is ${anchor.source}`);
    check(block !== null && BigInt(block.gasUsed) === gas, `the pending block's gasUsed is its receipts' (${gas})`);
  }
  return ok;
}

/**
 * Every account and slot the block changed, read at pending from the daemon (one JSON-RPC batch): the post-state
 * whose root gave the real block hash. Code the engine never got (a witness without it) is not asked for.
 */
async function pendingStateMatches(t: Test, label: string, daemon: DaemonProcess, blockNumber: number, changes: readonly AddonAccountChange[]): Promise<boolean> {
  const height = '0x' + blockNumber.toString(16);
  const calls: { method: string; params: unknown[]; want: bigint | string; what: string }[] = [];
  let slots = 0;
  for (const c of changes) {
    const a = c.address;
    calls.push({ method: 'eth_getBalance', params: [a, 'pending'], want: c.deleted ? 0n : BigInt(c.balance), what: `${a} balance` });
    // The nonce at the pending block's number: `pending` also asks the node's mempool, which a witness node has not.
    calls.push({ method: 'eth_getTransactionCount', params: [a, height], want: c.deleted ? 0n : BigInt(c.nonce), what: `${a} nonce` });
    if (c.deleted || c.code !== null) calls.push({ method: 'eth_getCode', params: [a, 'pending'], want: c.deleted ? '0x' : c.code!.toLowerCase(), what: `${a} code` });
    for (const [slot, value] of c.storage) {
      calls.push({ method: 'eth_getStorageAt', params: [a, slot, 'pending'], want: BigInt(value), what: `${a} slot ${slot}` });
      slots++;
    }
  }
  const wrong: string[] = [];
  for (let from = 0; from < calls.length; from += 500) {
    const part = calls.slice(from, from + 500);
    const res = await fetch(daemon.rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(part.map((c, i) => ({ jsonrpc: '2.0', id: i, method: c.method, params: c.params }))),
    });
    const answers = (await res.json()) as { id: number; result?: string; error?: { message: string } }[];
    for (const ans of answers) {
      const c = part[ans.id]!;
      if (ans.result === undefined) wrong.push(`${c.what}: ${ans.error?.message ?? 'no result'}`);
      else if (typeof c.want === 'bigint' ? BigInt(ans.result) !== c.want : ans.result.toLowerCase() !== c.want) wrong.push(`${c.what}: ${ans.result.slice(0, 70)}, post-state ${String(c.want).slice(0, 70)}`);
    }
  }
  const ok = wrong.length === 0;
  t.ok(ok, `${label}: pending state reads of the ${changes.length} changed accounts and ${slots} slots are the post-state${ok ? '' : ':\n' + wrong.slice(0, 10).join('\n')}`);
  return ok;
}
