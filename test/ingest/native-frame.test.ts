// The native frame decoder (native/src/frame) against the JS decoder it stands in for: on every vector, fixture,
// transaction corpus and random mutation, decodeFrame gives the same verdict, reason and flashblock with either;
// the native decoder takes every valid frame of the fixtures itself; recovered senders equal the JS ones.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { brotliCompressSync, constants as zlibConstants } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { decodeFrame, type DecodeFrameResult } from '../../src/ingest/frame.js';
import { decodeLayout, nativeDecoder } from '../../src/ingest/native-frame.js';
import { NATIVE_WAIT_MS } from '../../src/state/senders.js';
import { decodeTransaction } from '../../src/chain/tx.js';
import { recoverSender } from '../../src/chain/sender.js';
import type { DecodedTx } from '../../src/chain/types.js';
import { generateFlashblocks } from '../../bench/flashblock-gen.js';
import { asOpRbuilder, asSubblocks, asXLayer, postExecTx } from '../helpers/dialects.js';
import { transactionTestBytes, unichainMessages, unichainRpcBlock } from '../helpers/fixtures.js';
import { feed, makePipeline } from '../helpers/ingest.js';
import { fbBalances, fbReceipts, fbTxs } from '../helpers/views.js';
import { lcg } from '../helpers/rand.js';

const native = nativeDecoder();
const fixtures = fileURLToPath(new URL('../fixtures/', import.meta.url));
const json = (rel: string): any => JSON.parse(readFileSync(fixtures + rel, 'utf8'));
const MAX = 1 << 24;

const TX_FIELDS: (keyof DecodedTx)[] = ['type', 'hash', 'raw', 'from', 'executes', 'chainId', 'nonce', 'gasPrice', 'maxPriorityFeePerGas',
  'maxFeePerGas', 'maxFeePerBlobGas', 'gas', 'to', 'value', 'input', 'accessList', 'blobVersionedHashes', 'authorizationList', 'v', 'r',
  's', 'sourceHash', 'mint', 'isSystemTx', 'postExec'];

function txView(tx: DecodedTx, fields: (keyof DecodedTx)[]): unknown {
  const o: Record<string, unknown> = {};
  for (const k of fields) o[k] = tx[k];
  return o;
}

/** Everything a decode result says, as comparable text (Maps as entry lists, bigints as strings). */
function view(r: DecodeFrameResult, fields: (keyof DecodedTx)[] = ['type', 'hash', 'raw', 'from', 'executes']): string {
  let v: unknown = r;
  if (r.ok) {
    const fb = r.fb;
    const b = fb.body;
    const receipts = fbReceipts(fb);
    v = {
      ...fb,
      body: null,
      txs: fbTxs(fb).map((x) => txView(x, fields)),
      // What pending state reads of each transaction without building it (the native layout's own numbers).
      rows: fbTxs(fb).map((_, i) => [b.txType(i), b.txHashKey(i), b.txByteLength(i), b.txSender(i), b.txExecutes(i), b.txNonce(i), b.receiptCumulativeGas(i), b.receiptLogCount(i), b.receiptDepositNonce(i)]),
      diff: { ...fb.diff, postExecTx: fb.diff.postExecTx === null ? null : txView(fb.diff.postExecTx, fields) },
      receipts: receipts === null ? null : [...receipts].map(([k, x]) => [k, { type: x.type, status: x.status, cumulativeGasUsed: x.cumulativeGasUsed, logs: x.logs, depositNonce: x.depositNonce, depositReceiptVersion: x.depositReceiptVersion }]),
      balances: fbBalances(fb) === null ? null : [...fbBalances(fb)!],
      balanceKeys: Array.from({ length: Math.max(0, b.balanceCount) }, (_, e) => b.balanceKey(e)),
      json: r.json,
    };
  }
  return JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? `${x}n` : x));
}

interface Tally {
  cases: number;
  accepted: number;
  /** Valid frames the native decoder took itself (not declined to the JS decoder). */
  native: number;
  mismatches: string[];
}

const tally = (): Tally => ({ cases: 0, accepted: 0, native: 0, mismatches: [] });

/** Decodes `data` with the JS decoder and with the native one; records a mismatch. */
function check(tl: Tally, data: Buffer, isBinary: boolean, label: string, fields?: (keyof DecodedTx)[]): void {
  tl.cases++;
  const js = decodeFrame(data, MAX, isBinary, null);
  const nat = decodeFrame(data, MAX, isBinary, native);
  if (view(js, fields) !== view(nat, fields)) tl.mismatches.push(`${label}: js ${view(js).slice(0, 160)} / native ${view(nat).slice(0, 160)}`);
  if (js.ok) {
    tl.accepted++;
    if (nat.ok && nat.senders !== undefined) tl.native++;
  }
}

function unichain(): any[] {
  return json('flashblocks/unichain-sepolia-block-35535698.messages.json');
}

function corpus(): { name: string; frames: any[] }[] {
  const uni = unichain();
  const gen = generateFlashblocks({ blockNumber: 77, flashblocks: 3, txsPerFlashblock: 20, calldataBytes: 40 }).messages as any[];
  return [
    { name: 'unichain', frames: uni },
    { name: 'base-sepolia', frames: json('flashblocks/base-sepolia-block-33439826.messages.json') },
    { name: 'op-rbuilder', frames: asOpRbuilder(structuredClone(uni)) },
    { name: 'subblocks', frames: asSubblocks(structuredClone(uni)) },
    { name: 'generated', frames: gen },
  ];
}

t.before(() => {
  if (native === null) throw new Error('the native core is not built (npm run build:native): this test needs it');
});

t.test('every fixture frame decodes identically, text and brotli, and the native decoder takes each itself', async (t) => {
  const tl = tally();
  for (const { name, frames } of corpus()) {
    for (const [i, m] of frames.entries()) {
      const text = Buffer.from(JSON.stringify(m));
      check(tl, text, false, `${name}[${i}]`, TX_FIELDS);
      check(tl, brotliCompressSync(text), true, `${name}[${i}] brotli`);
    }
  }
  const golden = json('op-rbuilder/golden-wire.json').frames as Record<string, string>;
  for (const [k, f] of Object.entries(golden)) check(tl, Buffer.from(f), false, `golden ${k}`, TX_FIELDS);
  t.same(tl.mismatches.slice(0, 3), []);
  t.equal(tl.native, tl.accepted, `${tl.accepted} valid frames, all taken natively`);
});

t.test('read first, a transaction\'s nonce and a receipt\'s logs equal the JS decoder\'s (they are read from the layout alone)', async (t) => {
  let nonces = 0;
  let logs = 0;
  for (const { name, frames } of corpus()) {
    for (const [i, m] of frames.entries()) {
      const data = Buffer.from(JSON.stringify(m));
      const js = decodeFrame(data, MAX, false, null);
      const nat = decodeFrame(data, MAX, false, native);
      if (!js.ok || !nat.ok) continue;
      for (const [k, tx] of fbTxs(nat.fb).entries()) {
        if (tx.type === 0x7e) continue;
        t.equal(tx.nonce, fbTxs(js.fb)[k]!.nonce, `${name}[${i}] tx ${k} nonce`);
        nonces++;
      }
      for (const [hash, r] of fbReceipts(nat.fb) ?? []) {
        const want = fbReceipts(js.fb)!.get(hash)!;
        t.equal(r.logCount, want.logs.length, `${name}[${i}] ${hash} log count`);
        t.same(r.logs, want.logs, `${name}[${i}] ${hash} logs`);
        t.equal(r.logs, r.logs, 'built once');
        logs += r.logs.length;
      }
    }
  }
  t.ok(nonces > 50 && logs > 50, `${nonces} nonces, ${logs} logs compared`);
});

t.test('a flashblock\'s own fields (payload id, header fields) do not keep the frame\'s text alive', async (t) => {
  // V8 keeps a substring of 13+ characters as a slice of its parent: a payload id kept by the hedge memory (4,096
  // frames) kept each frame's whole layout text. 100 frames of 200 transactions: ~9 MiB when sliced.
  v8.setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const msg = generateFlashblocks({ blockNumber: 5, flashblocks: 1, txsPerFlashblock: 200, calldataBytes: 100 }).messages[0] as any;
  const all = Array.from({ length: 100 }, (_, i) => {
    const m = structuredClone(msg);
    m.payload_id = '0x' + (i + 1).toString(16).padStart(16, '0');
    return JSON.stringify(m);
  });
  gc();
  const before = process.memoryUsage().heapUsed;
  const kept: string[] = [];
  for (const text of all) {
    const r = decodeFrame(Buffer.from(text), MAX, false, native);
    if (!r.ok || r.senders === undefined) throw new Error('not taken natively');
    kept.push(r.fb.payloadId + ':' + r.fb.index, r.fb.diff.blockHash, r.fb.diff.stateRoot, r.fb.base!.parentHash);
  }
  gc();
  const grew = process.memoryUsage().heapUsed - before;
  t.equal(kept.length, 400);
  t.ok(grew < 2 * 2 ** 20, `heap grew ${(grew / 2 ** 20).toFixed(2)} MiB keeping 4 fields of 100 frames`);
});

t.test('rare shapes (post-exec, withdrawals, X Layer access lists, escapes, duplicate keys) decode identically', async (t) => {
  const tl = tally();
  const uni = unichain();
  const pe = structuredClone(uni[1]);
  pe.diff.post_exec_tx = postExecTx(pe.metadata.block_number, [[0, 100]]);
  check(tl, Buffer.from(JSON.stringify(pe)), false, 'post_exec_tx');
  const taken = decodeFrame(Buffer.from(JSON.stringify(pe)), MAX, false, native);
  t.ok(taken.ok && taken.senders !== undefined && taken.fb.diff.postExecTx !== null, 'a post-exec transaction is taken natively (decoded by the full decoder)');
  for (const [label, bad] of [
    ['post_exec_tx of another block', postExecTx(pe.metadata.block_number + 1, [[0, 100]])],
    ['post_exec_tx of another type', unichain()[1].diff.transactions[0]],
    ['post_exec_tx that does not decode', '0x7d01'],
    ['post_exec_tx upper case', postExecTx(pe.metadata.block_number, [[0, 100]]).toUpperCase().replace('0X', '0x')],
  ] as [string, string][]) {
    const m = structuredClone(pe);
    m.diff.post_exec_tx = bad;
    check(tl, Buffer.from(JSON.stringify(m)), false, label);
  }
  const w = structuredClone(uni[0]);
  w.diff.withdrawals = [{ index: '0x1', validatorIndex: '0x2', address: '0x' + '11'.repeat(20), amount: '0x3' }];
  check(tl, Buffer.from(JSON.stringify(w)), false, 'withdrawals');
  for (const [i, m] of asXLayer(structuredClone(uni), uni.map(() => [{ address: '0x' + '22'.repeat(20), balance: [[0, 5n]], nonce: [[0, 1n]] }])).entries()) {
    check(tl, Buffer.from(JSON.stringify(m)), false, `xlayer[${i}]`);
  }
  const escaped = JSON.stringify(uni[0]).replace('"payload_id":"0x', '"payload_id":"\\u0030x');
  check(tl, Buffer.from(escaped), false, 'escaped hex');
  const dup = JSON.stringify(uni[1]).replace('{"payload_id"', '{"index":99,"payload_id"');
  check(tl, Buffer.from(dup), false, 'duplicate key');
  t.same(tl.mismatches, []);
  t.equal(tl.accepted, tl.cases - 3, 'all valid but the three bad post-exec transactions');
});

/** The frame txFrame copies, read from the fixture once (not once per case). */
let txFrameBase: any = null;

/** A small valid frame (index 1, no base) carrying `txs`. */
function txFrame(txs: unknown[]): Buffer {
  txFrameBase ??= unichain()[1];
  const m = structuredClone(txFrameBase);
  m.diff.transactions = txs;
  m.metadata.receipts = {};
  return Buffer.from(JSON.stringify(m));
}

const txVectors = transactionTestBytes;

function realTransactions(): string[] {
  const chain = json('execution-apis-derived/chain-transactions.json');
  const deposits = json('op-deposit/deposit-vectors.json');
  return [
    ...chain.blocks.flatMap((b: any) => b.transactions.map((x: any) => x.raw as string)),
    ...deposits.rawTransactions.map((v: any) => v.raw as string),
    ...unichain().flatMap((m: any) => m.diff.transactions as string[]),
  ];
}

t.test('every ethereum/tests vector and real transaction, and single-byte mutations of them, in a frame', async (t) => {
  const tl = tally();
  for (const raw of [...txVectors(), ...realTransactions()]) check(tl, txFrame([raw]), false, raw.slice(0, 20), TX_FIELDS);
  const byType = new Map<string, string>();
  for (const raw of realTransactions()) if (!byType.has(raw.slice(0, 4))) byType.set(raw.slice(0, 4), raw);
  const rand = lcg(11);
  for (const raw of byType.values()) {
    const b = Buffer.from(raw.slice(2), 'hex');
    for (let i = 0; i < b.length; i++) {
      for (const v of [0x00, 0x01, 0x80, 0x81, 0xb8, 0xc0, 0xf8, 0xff, (b[i]! + 1) & 255, rand(256)]) {
        const m = Buffer.from(b);
        m[i] = v;
        check(tl, txFrame(['0x' + m.toString('hex')]), false, `${raw.slice(0, 4)} byte ${i}=${v}`);
      }
      check(tl, txFrame(['0x' + b.subarray(0, i).toString('hex')]), false, `${raw.slice(0, 4)} cut ${i}`);
    }
  }
  t.same(tl.mismatches.slice(0, 5), [], `${tl.cases} frames, ${tl.accepted} valid, ${tl.native} taken natively`);
  t.ok(tl.cases > 5000);
});

/** Every [container, key] path of a JSON value, for mutation. */
function paths(v: any, out: [any, string | number][] = []): [any, string | number][] {
  if (Array.isArray(v)) {
    v.forEach((x, i) => {
      out.push([v, i]);
      paths(x, out);
    });
  } else if (typeof v === 'object' && v !== null) {
    for (const k of Object.keys(v)) {
      out.push([v, k]);
      paths(v[k], out);
    }
  }
  return out;
}

/**
 * The stream server's brotli setting (src/stream/server.ts): the decoders see the same inflated bytes at any quality,
 * and the default (11) took ~3 ms a frame.
 */
const FAST_BROTLI = { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 5, [zlibConstants.BROTLI_PARAM_MODE]: zlibConstants.BROTLI_MODE_TEXT } };

t.test('random mutations of fixture frames (values, keys, bytes): the same verdict and reason, never a throw', async (t) => {
  const tl = tally();
  const rand = lcg(12345);
  const values = (old: unknown): unknown[] => [null, true, false, 0, -1, 1.5, 1e300, 2 ** 53, -0, '', '0x', '0x0', '0x00', '0x1', '0xzz', '0X12', [], {}, [old],
    { x: old }, typeof old === 'string' ? old.toUpperCase() : old, typeof old === 'string' ? old.slice(0, -1) : old, typeof old === 'string' ? old + '0' : old,
    typeof old === 'string' ? old + '00' : old, typeof old === 'string' ? '0x' + '0'.repeat(70) : old, '0x' + 'f'.repeat(64), '0x' + 'F'.repeat(40), 'Eip1559', '0-0', '12-3', '1-'];
  const frames = corpus().filter((c) => c.name !== 'base-sepolia').flatMap((c) => c.frames.slice(0, 3));
  // Mutations that keep a frame valid, so that accepted frames vary too.
  const benign = (old: unknown): unknown => (old === '0x1' && rand(2) === 0 ? true : typeof old === 'string' && old.startsWith('0x') ? '0x' + old.slice(2).toUpperCase() : old);
  for (let n = 0; n < 5000; n++) {
    const m = structuredClone(frames[rand(frames.length)]);
    const ps = paths(m);
    const muts = 1 + rand(2);
    for (let j = 0; j < muts; j++) {
      const [c, k] = ps[rand(ps.length)]!;
      const r = rand(10);
      if (r < 6) c[k] = benign(c[k]);
      else if (r === 6 && !Array.isArray(c)) delete c[k];
      else if (r === 7 && !Array.isArray(c)) c[['status', 'type', 'logs', 'Legacy', 'Deposit', 'base', 'index', 'cumulativeGasUsed'][rand(8)]!] = c[k];
      else {
        const vs = values(c[k]);
        c[k] = vs[rand(vs.length)];
      }
    }
    let text = JSON.stringify(m);
    const r = rand(12);
    if (r === 0) {
      const at = rand(text.length);
      text = text.slice(0, at) + String.fromCharCode(rand(128)) + text.slice(at + 1);
    } else if (r === 1) text = text.slice(0, rand(text.length));
    else if (r === 2) text = ' \n' + text + '\t';
    const buf = Buffer.from(text);
    check(tl, buf, rand(2) === 0, `mutation ${n}`);
    if (rand(16) === 0) check(tl, brotliCompressSync(buf, FAST_BROTLI), true, `mutation ${n} brotli`);
  }
  const bytes = [Buffer.alloc(0), Buffer.from('{'), Buffer.from('[1,2]'), Buffer.from('null'), Buffer.from([0xff, 0xfe, 0x7b]), Buffer.from('{"index":0}\u0000')];
  for (const b of bytes) check(tl, b, false, JSON.stringify(b.toString()));
  t.same(tl.mismatches.slice(0, 5), [], `${tl.cases} frames, ${tl.accepted} valid, ${tl.native} of them taken natively`);
});

t.test('senders recovered natively (off the JS thread) equal the JS recovery', async (t) => {
  const gen = generateFlashblocks({ blockNumber: 5, flashblocks: 1, txsPerFlashblock: 40, calldataBytes: 10 }).messages[0] as any;
  const uni = unichain();
  for (const m of [gen, ...uni]) {
    const r = decodeFrame(Buffer.from(JSON.stringify(m)), MAX, false, native);
    if (!r.ok || r.senders == null) continue;
    const out = await native!.recoverSenders(r.senders.txBytes(), r.senders.signed);
    const signed = r.senders.signed;
    for (let k = 0; k < signed.length / 3; k++) {
      const tx = r.fb.body.tx(signed[3 * k]!);
      const js = recoverSender((decodeTransaction(tx.raw) as { tx: DecodedTx }).tx);
      const status = out[21 * k];
      t.equal(status === 1 ? '0x' + out.toString('hex', 21 * k + 1, 21 * k + 21) : status === 0 ? null : 'js', status === 2 ? 'js' : js, tx.hash);
    }
    t.same(native!.recoverNow!(r.senders.txBytes(), r.senders.signed), out, 'recoverNow (on this thread) gives the rows the threads gave');
  }
  const bad = await native!.recoverSenders(Buffer.from([1, 2, 3]), Uint32Array.from([0, 0, 3, 0, 2, 99]));
  t.same([bad[0], bad[21]], [2, 2], 'undecodable bytes and out-of-range bounds are left to the JS recovery');
  t.same(native!.recoverNow!(Buffer.from([1, 2, 3]), Uint32Array.from([0, 0, 3, 0, 2, 99])), bad, 'and recoverNow says the same');
});

t.test('a read that needs a sender before the native batch answers recovers it natively, on this thread', async (t) => {
  const canonical = unichainRpcBlock() as { transactions: { hash: string; from: string; type: string }[] };
  const signed = canonical.transactions.filter((x) => x.type !== '0x7e');
  for (const nativeDecode of [true, false]) {
    const a = makePipeline({ nativeDecode });
    const opts = (a.senders as unknown as { opts: { native: () => Promise<Buffer>; nativeNow: (bytes: Buffer, sig: Uint32Array) => Buffer } }).opts;
    // Recovery threads that never answer, and a count of the native recoveries made on this thread.
    opts.native = () => new Promise<Buffer>(() => undefined);
    let now = 0;
    opts.nativeNow = (bytes, sig) => {
      now++;
      return native!.recoverNow!(bytes, sig);
    };
    for (const m of unichainMessages()) feed(a.pipeline, m);
    const how = nativeDecode ? 'native layout' : 'JS-decoded block';
    for (const x of signed.slice(0, 3)) {
      const rec = a.state.tx(x.hash)!;
      t.equal(a.senders.recoveredSender(rec.block, rec.position), null, `${how}: not known before the read`);
      a.senders.recover([rec]);
      t.equal(a.state.tx(x.hash)!.tx.from, x.from.toLowerCase(), `${how}: the read sees the canonical sender`);
      t.equal(a.senders.recoveredSender(rec.block, rec.position), x.from.toLowerCase(), `${how}: recovered from its own bytes (the engine may take it)`);
    }
    t.equal(now, 3, `${how}: one native recovery on this thread per read`);
  }
});

t.test('native recoveries in flight at once each resolve to their own rows, whatever order the threads end in', async (t) => {
  const frames = [5, 40, 3, 200, 17, 1].map((n, i) => generateFlashblocks({ blockNumber: 10 + i, flashblocks: 1, txsPerFlashblock: n, calldataBytes: 10 }).messages[0]);
  const batches = frames.map((m) => {
    const r = decodeFrame(Buffer.from(JSON.stringify(m)), MAX, false, native);
    if (!r.ok || r.senders == null) throw new Error('the native decoder did not take the frame');
    const signed = Uint32Array.from(r.senders.signed);
    const expected: string[] = [];
    for (let k = 0; k < signed.length / 3; k++) expected.push(recoverSender((decodeTransaction(r.fb.body.tx(signed[3 * k]!).raw) as { tx: DecodedTx }).tx)!);
    // Copied out: the frame pool region goes back before the recoveries end.
    const txBytes = Buffer.from(r.senders.txBytes());
    r.fb.body.release();
    return { txBytes, signed, expected };
  });
  // Each started twice, all before any ends (batches of 16 or more are split over the recovery threads).
  const outs = await Promise.all([...batches, ...batches].map((b) => native!.recoverSenders(b.txBytes, b.signed)));
  outs.forEach((out, i) => {
    const b = batches[i % batches.length]!;
    const got: string[] = [];
    for (let k = 0; k < b.expected.length; k++) got.push(out[21 * k] === 1 ? '0x' + out.toString('hex', 21 * k + 1, 21 * k + 21) : `status ${out[21 * k]}`);
    t.equal(out.length, 21 * b.expected.length, `batch ${i}: one row per signed transaction`);
    t.same(got, b.expected, `batch ${i} (${b.expected.length} txs): every sender as the JS recovery`);
  });
});

t.test('native recovery runs on its own threads at idle priority, never at the event loop\'s', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  const m = generateFlashblocks({ blockNumber: 30, flashblocks: 1, txsPerFlashblock: 40, calldataBytes: 10 }).messages[0];
  const r = decodeFrame(Buffer.from(JSON.stringify(m)), MAX, false, native);
  if (!r.ok || r.senders == null) throw new Error('the native decoder did not take the frame');
  const out = await native!.recoverSenders(Buffer.from(r.senders.txBytes()), Uint32Array.from(r.senders.signed));
  r.fb.body.release();
  t.equal(out[0], 1, 'a sender recovered');
  // /proc/self/task/<tid>/stat: field 2 is (comm), field 41 the scheduling policy (5 = SCHED_IDLE).
  const threads = readdirSync('/proc/self/task').map((tid) => readFileSync(`/proc/self/task/${tid}/stat`, 'utf8'));
  const policies = threads.flatMap((st) => {
    const name = st.slice(st.indexOf('(') + 1, st.lastIndexOf(')'));
    const fields = st.slice(st.lastIndexOf(')') + 2).split(' ');
    // fbd-recover-urgent (comm: 15 characters) is the one default-priority thread, for late batches only.
    return name.startsWith('fbd-recover') && name !== 'fbd-recover-urg' ? [[name, Number(fields[38])] as const] : [];
  });
  t.ok(policies.length >= 1, `recovery threads: ${policies.map((p) => p[0]).join(', ')}`);
  t.same(policies.filter(([, policy]) => policy !== 5), [], 'every recovery thread is SCHED_IDLE');
  const main = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
  t.equal(Number(main.slice(main.lastIndexOf(')') + 2).split(' ')[38]), 0, 'the event loop keeps SCHED_OTHER');
});

t.test('the pipeline decodes natively, recovers senders natively and indexes their nonces', async (t) => {
  const { state, pipeline, senders, observer } = makePipeline();
  for (const m of unichainMessages()) feed(pipeline, m);
  t.equal(observer.appliedN, unichainMessages().length, 'every flashblock applied');
  t.ok(senders.unrecoveredCount > 0, 'senders are being recovered off the JS thread');
  await senders.drained();
  t.equal(senders.unrecoveredCount, 0);
  const canonical = unichainRpcBlock() as { transactions: { hash: string; from: string; nonce: string; type: string }[] };
  t.same(canonical.transactions.filter((x) => state.tx(x.hash)?.tx.from !== x.from.toLowerCase()).map((x) => x.hash), [], "each sender equals the canonical block's `from`");
  const user = canonical.transactions.find((x) => x.type !== '0x7e')!;
  const last = canonical.transactions.filter((x) => x.from === user.from).reduce((a, x) => (BigInt(x.nonce) > a ? BigInt(x.nonce) : a), 0n);
  t.equal(state.nextNonce(user.from.toLowerCase()), last + 1n, 'nonce index filled from the native answers');
});

t.test('a nonce query waits for late native batches at most NATIVE_WAIT_MS, then has them recovered without the idle threads', async (t) => {
  const canonical = unichainRpcBlock() as { transactions: { from: string; nonce: string; type: string }[] };
  const user = canonical.transactions.find((x) => x.type !== '0x7e')!.from;
  const last = canonical.transactions.filter((x) => x.from === user).reduce((a, x) => (BigInt(x.nonce) > a ? BigInt(x.nonce) : a), 0n);
  const a = makePipeline();
  // Recovery threads that never get a core: their answers never come.
  let started = 0;
  (a.senders as unknown as { opts: { native: () => Promise<Buffer> } }).opts.native = () => {
    started++;
    return new Promise<Buffer>(() => undefined);
  };
  for (const m of unichainMessages()) feed(a.pipeline, m);
  t.ok(started > 0, 'the batch went to the (stalled) native core');
  const settled = a.senders.settled(user.toLowerCase());
  t.ok(settled instanceof Promise, 'a possible sender waits first');
  await settled;
  t.equal(a.senders.unrecoveredCount, 0, `after waiting up to ${NATIVE_WAIT_MS} ms, every sender was recovered here (the native answer never came)`);
  t.equal(a.state.nextNonce(user.toLowerCase()), last + 1n, 'then the nonce index is complete');
  t.equal(a.senders.settled(user.toLowerCase()), null, 'and the next query answers at once');
});

t.test('late native batches are recovered on this thread in slices, the loop turning between them, once for all queries', async (t) => {
  // Three 200-transaction flashblocks whose recovery threads never answer (no core for them): 600 senders, ~20 ms of
  // recovery here. Done in one go, that held the event loop; in slices, frames and requests get turns in between.
  const gen = generateFlashblocks({ blockNumber: 9, flashblocks: 3, txsPerFlashblock: 200, calldataBytes: 20 }).messages as any[];
  const a = makePipeline();
  (a.senders as unknown as { opts: { native: () => Promise<Buffer>; sliceMs: number } }).opts.native = () => new Promise<Buffer>(() => undefined);
  (a.senders as unknown as { opts: { sliceMs: number } }).opts.sliceMs = 0.2;
  // No default-priority native thread (an addon that predates it): the slices on this thread do it all.
  (a.senders as unknown as { opts: { nativeUrgent: null } }).opts.nativeUrgent = null;
  for (const m of gen) feed(a.pipeline, m);
  const total = a.senders.unrecoveredCount;
  t.ok(total >= 600, `the signed transactions wait for the stalled native core (${total})`);
  // Any transaction's sender, as the JS decoder recovers it.
  const body = decodeFrame(Buffer.from(JSON.stringify(gen[1])), MAX, false, null);
  const user = recoverSender((body as any).fb.body.tx(3))!.toLowerCase();
  const first = a.senders.settled(user);
  const second = a.senders.settled(user);
  t.ok(first instanceof Promise && second instanceof Promise, 'both queries wait');
  // Between two loop turns, what is still unrecovered: partial counts mean the loop turned mid-recovery.
  const seen: number[] = [];
  let done = false;
  const watch = (): void => {
    const n = a.senders.unrecoveredCount;
    if (n > 0 && n < total) seen.push(n);
    if (!done) setImmediate(watch);
  };
  setImmediate(watch);
  await Promise.all([first, second]);
  done = true;
  t.ok(seen.length >= 3, `the loop turned at least 3 times mid-recovery (${seen.length} turns saw ${seen.slice(0, 5).join(', ')}…)`);
  t.ok(seen.every((n, i) => i === 0 || n <= seen[i - 1]!), 'each turn saw fewer left');
  t.equal(a.senders.unrecoveredCount, 0, 'every sender recovered here');
  const nonce = a.state.nextNonce(user);
  t.ok(nonce !== null && nonce > 0n, 'the nonce index holds the sender');
  t.equal(a.senders.settled(user), null, 'the next query answers at once');
});

t.test('late native batches go to the default-priority native thread: the event loop recovers none of them', async (t) => {
  const gen = generateFlashblocks({ blockNumber: 9, flashblocks: 3, txsPerFlashblock: 200, calldataBytes: 20 }).messages as any[];
  const a = makePipeline();
  type Opts = { native: () => Promise<Buffer>; nativeNow: (b: Buffer, s: Uint32Array) => Buffer; nativeUrgent: (b: Buffer, s: Uint32Array) => Promise<Buffer> };
  const opts = (a.senders as unknown as { opts: Opts }).opts;
  t.ok(typeof opts.nativeUrgent === 'function', 'the addon has the urgent thread');
  opts.native = () => new Promise<Buffer>(() => undefined);
  let onLoop = 0;
  const now = opts.nativeNow;
  opts.nativeNow = (b, s) => {
    onLoop++;
    return now(b, s);
  };
  const urgent = opts.nativeUrgent;
  const sent: number[] = [];
  opts.nativeUrgent = (b, s) => {
    sent.push(s.length / 3);
    return urgent(b, s);
  };
  for (const m of gen) feed(a.pipeline, m);
  const total = a.senders.unrecoveredCount;
  const body = decodeFrame(Buffer.from(JSON.stringify(gen[2])), MAX, false, null);
  const user = recoverSender((body as any).fb.body.tx(7))!.toLowerCase();
  await Promise.all([a.senders.settled(user), a.senders.settled(user)]);
  t.equal(a.senders.unrecoveredCount, 0, 'every sender recovered');
  t.equal(sent.reduce((x, y) => x + y, 0), total, `the urgent thread got each unknown sender once (${sent.join(' + ')})`);
  t.equal(onLoop, 0, 'none was recovered on the event loop');
  if (process.platform === 'linux') {
    const urgentThreads = readdirSync('/proc/self/task')
      .map((tid) => readFileSync(`/proc/self/task/${tid}/stat`, 'utf8'))
      .filter((st) => st.slice(st.indexOf('(') + 1, st.lastIndexOf(')')) === 'fbd-recover-urg');
    t.equal(urgentThreads.length, 1, 'one urgent thread');
    t.equal(Number(urgentThreads[0]!.slice(urgentThreads[0]!.lastIndexOf(')') + 2).split(' ')[38]), 0, 'at the default policy (SCHED_OTHER), not SCHED_IDLE');
  }
  const nonce = a.state.nextNonce(user);
  t.ok(nonce !== null && nonce > 0n, 'the nonce index holds the sender');
  // The answers equal the JS recovery.
  const block = a.state.pendingBlock()!;
  for (const p of [0, 1, 250, 599]) {
    const tx = block.txObject(p);
    if (tx.type === 0x7e) continue;
    t.equal(block.senderAt(p), recoverSender(tx)!.toLowerCase(), `sender ${p} as the JS recovery has it`);
  }
});

t.test('a nonce query waits for the native recovery; recoverQueued() recovers on this thread at once', async (t) => {
  const canonical = unichainRpcBlock() as { transactions: { from: string; type: string }[] };
  const user = canonical.transactions.find((x) => x.type !== '0x7e')!.from.toLowerCase();
  const a = makePipeline();
  for (const m of unichainMessages()) feed(a.pipeline, m);
  t.equal(a.senders.settled('0x000000000000000000000000000000000000dead'), null, 'an address absent from the balances need not wait');
  const settled = a.senders.settled(user);
  t.ok(settled instanceof Promise, 'a possible sender waits for the native batch');
  await settled;
  t.equal(a.senders.unrecoveredCount, 0);
  t.equal(a.senders.settled(user), null, 'afterwards the answer is immediate');
  t.ok(a.state.nextNonce(user) !== null);

  const b = makePipeline();
  for (const m of unichainMessages()) feed(b.pipeline, m);
  b.senders.recoverQueued();
  t.equal(b.senders.unrecoveredCount, 0, 'recovered synchronously while the native answers are still out');
  t.ok(b.state.nextNonce(user) !== null);
  await b.senders.drained();
  t.ok(b.state.nextNonce(user) !== null, 'the late native answers change nothing');
});

t.test('a frame nested millions deep is declined by the native decoder (its parser recurses) and refused by the JS one, as any bad frame', async (t) => {
  // Millions of levels overflowed the native parser's stack: an abort of the daemon, not an error.
  const deep = Buffer.from(`{"index":${'['.repeat(8_000_000)}${']'.repeat(8_000_000)}}`);
  t.equal(decodeLayout(native!, deep), 'nested too deep', 'declined before it is parsed');
  // Past 64 levels every frame goes to the JS decoder, which words the refusal (parsing 8 million levels in JS takes
  // seconds: a shorter one shows it).
  const deeper = Buffer.from(`{"index":${'['.repeat(100)}${']'.repeat(100)}}`);
  const js = decodeFrame(deeper, MAX, false, null);
  t.equal(js.ok, false, 'not a flashblock');
  t.same(decodeFrame(deeper, MAX, false, native), js, 'the same refusal, worded by the JS decoder');
});
