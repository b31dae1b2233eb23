// JSON-RPC transaction objects: the Unichain canonical block, OP deposit RPC captures, geth's execution-apis answers
// and the execution-apis TransactionInfo schema.
import t from 'tap';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import AjvImport from 'ajv';
import { decodeTransaction } from '../../../src/chain/tx.js';
import { effectiveGasPrice, toRpcTransaction, type RpcTxContext } from '../../../src/rpc/shapes/transaction.js';
import { recoverSender } from '../../../src/chain/sender.js';
import { decodeRlp, type RlpItem } from '../../helpers/rlp-oracle.js';
import type { DecodedTx } from '../../../src/chain/types.js';
import { unichainMessages, unichainRpcBlock } from '../../helpers/fixtures.js';

const fixtures = fileURLToPath(new URL('../../fixtures/', import.meta.url));
const json = (rel: string): any => JSON.parse(readFileSync(fixtures + rel, 'utf8'));
const chainBlocks = (): any[] => json('execution-apis-derived/chain-transactions.json').blocks;

/** A decoded transaction with its sender recovered (the shapes read `tx.from`, they never recover it). */
function decodeOk(raw: string): DecodedTx {
  const r = decodeTransaction(raw);
  if (!r.ok) throw new Error(`decode failed: ${r.reason}`);
  recoverSender(r.tx);
  return r.tx;
}

/** Fixtures not copied into test/fixtures are read from the shared conformance folder when mounted, else skipped. */
function locate(rel: string): string | null {
  for (const p of [fixtures + rel]) if (existsSync(p)) return p;
  return null;
}

/** baseFeePerGas (null before London) and timestamp of each block of execution-apis chain.rlp, by block number. */
function chainHeaders(path: string): Map<number, { baseFee: bigint | null; timestamp: bigint }> {
  const data = readFileSync(path);
  const out = new Map<number, { baseFee: bigint | null; timestamp: bigint }>();
  const big = (b: RlpItem | undefined): bigint => BigInt('0x' + ((b as Buffer).toString('hex') || '0'));
  for (let pos = 0; pos < data.length;) {
    const n = (data[pos] as number) - 0xf7;
    const end = pos + 1 + n + data.subarray(pos + 1, pos + 1 + n).readUIntBE(0, n);
    const header = (decodeRlp(data.subarray(pos, end)) as RlpItem[])[0] as RlpItem[];
    // Pre-London headers have 15 fields and no base fee.
    const baseFee = header.length > 15 ? big(header[15]) : null;
    out.set(Number(big(header[8])), { baseFee, timestamp: big(header[11]) });
    pos = end;
  }
  return out;
}

t.test('the Unichain capture\'s 6 transactions equal the canonical rpc-block objects (blockHash aside)', async (t) => {
  const block = unichainRpcBlock() as any;
  const receipts: Record<string, any> = {};
  const raws: string[] = [];
  for (const m of unichainMessages() as any[]) {
    raws.push(...m.diff.transactions);
    for (const [hash, r] of Object.entries<any>(m.metadata.receipts)) receipts[hash] = Object.values(r)[0];
  }
  t.equal(raws.length, block.transactions.length);
  raws.forEach((raw, i) => {
    const tx = decodeOk(raw);
    const receipt = receipts[tx.hash] ?? {};
    const got = toRpcTransaction(tx, {
      blockHash: null,
      blockNumber: BigInt(block.number),
      transactionIndex: i,
      baseFeePerGas: BigInt(block.baseFeePerGas),
      depositReceiptVersion: receipt.depositReceiptVersion ?? null,
      depositNonce: receipt.depositNonce === undefined ? null : BigInt(receipt.depositNonce),
    });
    const want = { ...block.transactions[i] };
    delete want.blockHash;
    delete got.blockHash;
    t.same(got, want, `transaction ${i} (${tx.type === 0x7e ? 'deposit' : 'type ' + tx.type})`);
  });
});

t.test('OP deposit RPC captures are reproduced from their raw bytes', async (t) => {
  for (const v of json('op-deposit/deposit-vectors.json').rpcTransactions) {
    const rpc = v.rpc;
    const ctx: RpcTxContext = {
      blockHash: rpc.blockHash,
      blockNumber: BigInt(rpc.blockNumber),
      transactionIndex: Number(rpc.transactionIndex),
      baseFeePerGas: null,
      depositReceiptVersion: rpc.depositReceiptVersion,
      depositNonce: BigInt(rpc.nonce),
    };
    const want = { ...rpc };
    // Older op-reth also printed yParity "0x0" on deposits; current op-reth (the Unichain block) does not.
    delete want.yParity;
    t.same(toRpcTransaction(decodeOk(v.derivedRaw), ctx), want, v.name);
  }
});

t.test('geth\'s eth_getTransactionByHash answers on the execution-apis chain are reproduced', async (t) => {
  const dir = locate('execution-apis/tests/eth_getTransactionByHash');
  const rlpPath = locate('execution-apis/tests/chain.rlp');
  if (dir === null || rlpPath === null) {
    t.fail('execution-apis .io tests not available');
    return;
  }
  const headers = chainHeaders(rlpPath);
  const byHash = new Map<string, { raw: string; index: number; number: number; blockHash: string }>();
  for (const b of chainBlocks()) {
    for (const x of b.transactions) byHash.set(x.hash, { raw: x.raw, index: x.index, number: b.number, blockHash: b.hash });
  }
  let compared = 0;
  for (const file of readdirSync(dir).sort()) {
    const lines = readFileSync(`${dir}/${file}`, 'utf8').split('\n');
    const req = JSON.parse((lines.find((l) => l.startsWith('>>')) as string).slice(3));
    const res = JSON.parse((lines.find((l) => l.startsWith('<<')) as string).slice(3));
    const loc = byHash.get(req.params[0]);
    if (res.result === null || loc === undefined) continue;
    const h = headers.get(loc.number)!;
    const got = toRpcTransaction(decodeOk(loc.raw), {
      blockHash: loc.blockHash, blockNumber: BigInt(loc.number), transactionIndex: loc.index,
      baseFeePerGas: h.baseFee, blockTimestamp: h.timestamp,
    });
    t.same(got, res.result, file);
    compared++;
  }
  t.ok(compared >= 6, `${compared} answers compared`);
  t.comment(`geth eth_getTransactionByHash answers: ${compared} reproduced exactly`);
});

t.test('every execution-apis chain transaction satisfies the TransactionInfo schema', async (t) => {
  const path = locate('execution-apis-derived/result-schemas.json');
  if (path === null) {
    t.fail('result-schemas.json not available');
    return;
  }
  const spec = JSON.parse(readFileSync(path, 'utf8'));
  const method = spec.methods.find((m: any) => m.name === 'eth_getTransactionByHash');
  const schema = method.result.schema.oneOf.find((s: any) => s.type !== 'null');
  const Ajv = ((AjvImport as any).default ?? AjvImport) as new (o: object) => any;
  const validate = new Ajv({ strict: false, allErrors: true }).compile(schema);
  let passed = 0;
  let total = 0;
  for (const b of chainBlocks()) {
    for (const x of b.transactions) {
      total++;
      const obj = toRpcTransaction(decodeOk(x.raw), {
        blockHash: b.hash, blockNumber: BigInt(b.number), transactionIndex: x.index, baseFeePerGas: 7n,
        blockTimestamp: BigInt(b.number * 10),
      });
      const ok = validate(obj) as boolean;
      if (ok) passed++;
      else t.fail(`${x.hash} (${x.type}): ${JSON.stringify(validate.errors?.slice(0, 3))}`);
    }
  }
  t.equal(passed, total);
  t.comment(`TransactionInfo schema: ${passed}/${total} chain transactions valid`);
});

t.test('gasPrice of fee-market transactions: effective price in a block, fee cap when pending', async (t) => {
  const tx = decodeOk(chainBlocks().flatMap((b) => b.transactions).find((x: any) => x.type === '0x2').raw);
  const cap = tx.maxFeePerGas as bigint;
  const tip = tx.maxPriorityFeePerGas as bigint;
  t.equal(effectiveGasPrice(tx, null), cap, 'pending: the fee cap');
  t.equal(effectiveGasPrice(tx, 0n), tip < cap ? tip : cap, 'zero base fee: the tip');
  t.equal(effectiveGasPrice(tx, cap), cap, 'base fee at the cap: capped');
  const pending = toRpcTransaction(tx, { blockHash: null, blockNumber: null, transactionIndex: null, baseFeePerGas: null });
  t.same([pending.blockHash, pending.blockNumber, pending.transactionIndex], [null, null, null]);
  t.equal(pending.gasPrice, '0x' + cap.toString(16));
  t.notOk('blockTimestamp' in pending, 'blockTimestamp only when given');
});

t.test('legacy objects: chainId only with EIP-155, raw v, no yParity; creation has to: null', async (t) => {
  const legacy = chainBlocks().flatMap((b) => b.transactions).filter((x: any) => x.type === '0x0');
  const ctx = { blockHash: null, blockNumber: null, transactionIndex: null, baseFeePerGas: null };
  const pre155 = legacy.map((x: any) => decodeOk(x.raw)).find((tx: DecodedTx) => tx.chainId === null)!;
  const eip155 = legacy.map((x: any) => decodeOk(x.raw)).find((tx: DecodedTx) => tx.chainId !== null)!;
  const a = toRpcTransaction(pre155, ctx);
  t.notOk('chainId' in a);
  t.notOk('yParity' in a);
  t.match(a.v, /^0x1[bc]$/);
  const b = toRpcTransaction(eip155, ctx);
  t.equal(b.chainId, '0xc72dd9d5e883e');
  t.equal(b.v, '0x' + eip155.v.toString(16));
  t.equal(toRpcTransaction(decodeOk(chainBlocks()[0].transactions[0].raw), ctx).to, null, 'contract creation');
});
