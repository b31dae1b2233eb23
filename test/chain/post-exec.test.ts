// Post-exec (0x7d) transactions (specs/protocol/lagoon/post-exec.md; op-alloy-consensus `TxPostExec`): decoded with
// the envelope checked, sender zero, never executed; table of accepted and rejected encodings.
import t from 'tap';
import { decodeTransaction, intrinsicGas, validateTransaction } from '../../src/chain/tx.js';
import { ingestTransaction } from '../../src/chain/lazy-tx.js';
import { encodeRlp, type RlpInput } from '../../src/chain/rlp.js';
import { bigIntToBytes } from '../../src/chain/hex.js';
import { keccak256Hex } from '../../src/chain/keccak.js';
import { TX_POST_EXEC, ZERO_ADDRESS } from '../../src/chain/types.js';

const n = (v: number | bigint): Uint8Array => bigIntToBytes(BigInt(v));
/** 0x7d || rlp(fields), as op-alloy's `encode_2718`. */
const postExec = (fields: RlpInput[]): string => '0x7d' + encodeRlp(fields).toString('hex');
/** op-alloy `build_post_exec_tx(blockNumber, entries)`: [version 1, blockNumber, [[index, gasRefund], …]]. */
const built = (blockNumber: number, entries: [number, number][]): string => postExec([n(1), n(blockNumber), entries.map(([i, g]) => [n(i), n(g)])]);

t.test('the cross-client hash vector: keccak256(0x7d || payload), op-core TestPostExecTxHashGoldenVector', async (t) => {
  // optimism op-core/types post_exec_tx_test.go: data 0xc7012a7bc3c20307, op-reth's TxPostExec::tx_hash.
  const r = decodeTransaction('0x7dc7012a7bc3c20307');
  t.ok(r.ok);
  if (!r.ok) return;
  t.equal(r.tx.hash, '0xdf031dde1c8c591f49866e7877be7e81c86aa4ea4a170f806d21a390c01583bb');
  t.equal(r.tx.type, TX_POST_EXEC);
  t.equal(r.tx.from, ZERO_ADDRESS, 'the recovered sender is the zero address');
  t.equal(r.tx.executes, false, 'never run by the EVM');
  t.same(r.tx.postExec, { version: 1, blockNumber: 42n, gasRefunds: null }, 'envelope read; trailing fields of another layout kept opaque');
  t.equal(r.tx.input, '0xc7012a7bc3c20307', 'input is the RLP payload');
});

t.test('the SDM v1 layout: refund entries read, fields of a signed transaction empty', async (t) => {
  const raw = built(99, [[0, 100], [5, 200]]);
  const r = decodeTransaction(raw);
  t.ok(r.ok);
  if (!r.ok) return;
  t.equal(r.tx.hash, keccak256Hex(Buffer.from(raw.slice(2), 'hex')));
  t.same(r.tx.postExec, { version: 1, blockNumber: 99n, gasRefunds: [{ index: 0n, gasRefund: 100n }, { index: 5n, gasRefund: 200n }] });
  t.equal(r.tx.nonce, 0n);
  t.equal(r.tx.gas, 0n);
  t.equal(r.tx.to, null);
  t.equal(r.tx.chainId, null);
  t.equal(r.tx.signingHash, null);
  t.equal(intrinsicGas(r.tx), 0n);
  t.equal(validateTransaction(r.tx), null);
  const empty = decodeTransaction(built(1, []));
  t.ok(empty.ok && empty.tx.postExec?.gasRefunds?.length === 0, 'an empty entry list decodes (op-alloy round trip)');
});

t.test('ingest decoding gives the same transaction as the full decoder', async (t) => {
  for (const raw of [built(7, [[1, 2500]]), '0x7dc7012a7bc3c20307']) {
    const full = decodeTransaction(raw);
    const lazy = ingestTransaction(raw);
    t.ok(full.ok && lazy.ok);
    if (!full.ok || !lazy.ok) continue;
    for (const k of ['type', 'hash', 'raw', 'from', 'input', 'postExec', 'executes'] as const) t.same(lazy.tx[k], full.tx[k], k);
  }
});

t.test('malformed post-exec transactions are rejected with a reason', async (t) => {
  const cases: [string, string, RegExp][] = [
    ['bare type byte (op-geth: too short)', '0x7d', /no item/],
    ['a byte string, not a list', '0x7d8401020304', /must be a list/],
    ['unknown version 2 (op-alloy: unsupported post-exec payload version)', postExec([n(2), n(42), []]), /unsupported post-exec payload version 2/],
    ['version 0', postExec([n(0), n(42), []]), /unsupported post-exec payload version 0/],
    ['only the version', postExec([n(1)]), /must start with \[version, blockNumber\]/],
    ['block number above 64 bits', postExec([n(1), n(1n << 64n), []]), /exceeds 64 bits/],
    ['trailing bytes after the list', built(5, []) + '00', /trailing bytes/],
    ['a refund entry with three fields', postExec([n(1), n(5), [[n(1), n(2), n(3)]]]), /must be \[index, gasRefund\]/],
    ['a non-canonical block number', '0x7d' + 'c5' + '01' + '8200' + '05' + 'c0', /leading zero/],
  ];
  for (const [name, raw, want] of cases) {
    const r = decodeTransaction(raw);
    t.notOk(r.ok, name);
    if (!r.ok) t.match(r.reason, want, `${name}: ${r.reason}`);
    const lazy = ingestTransaction(raw);
    t.notOk(lazy.ok, `${name} (ingest)`);
  }
});
