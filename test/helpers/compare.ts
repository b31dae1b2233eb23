// Comparing a daemon's pending answers with the node's canonical ones: the fields that may differ, and the first
// differing path. Used by the devnet differential and execution end-to-end tests.

/** The OP fee fields of a non-deposit receipt (op-reth's names). */
export const OP_FEE_FIELDS: readonly string[] = [
  'l1GasPrice', 'l1GasUsed', 'l1Fee', 'l1FeeScalar', 'l1BaseFeeScalar', 'l1BlobBaseFee', 'l1BlobBaseFeeScalar',
  'operatorFeeScalar', 'operatorFeeConstant', 'daFootprintGasScalar',
];

/** Drops the fields that may differ between a pending and a canonical answer; normalises anvil's number forms. */
export function strip(v: any): any {
  if (Array.isArray(v)) return v.map(strip);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  // A deposit transaction object (receipts have no sourceHash): anvil 1.7 writes nonce 0 and no gasPrice or
  // depositReceiptVersion; op-geth (and flashblocksd) the depositNonce, 0x0 and the receipt's version. The deposit
  // nonce and version are compared through the receipt, where anvil reports them.
  const depositTx = typeof v.sourceHash === 'string';
  // anvil 1.7.1 serves none of a receipt's OP fee fields although it charges both fees (the devnet's blocks open with
  // an L1-info deposit): test/e2e/differential.test.ts compares them with what the node stored and charged.
  const receipt = typeof v.transactionHash === 'string' && typeof v.cumulativeGasUsed === 'string';
  for (const [k, x] of Object.entries(v)) {
    if (k === 'blockHash') continue;
    if (receipt && OP_FEE_FIELDS.includes(k)) continue;
    if (depositTx && (k === 'nonce' || k === 'gasPrice' || k === 'depositReceiptVersion')) continue;
    // anvil reports blobGasPrice on some non-blob receipts; op-reth sets it only for blob txs, and the flashblock
    // metadata does not carry it. Compared only for type-0x3 receipts.
    if (k === 'blobGasPrice' && v.type !== '0x3') continue;
    // anvil 1.7 writes a deposit receipt's type as "0x7E"; JSON-RPC quantities (geth, flashblocksd) are lower case.
    if (k === 'type' && typeof x === 'string') {
      out[k] = x.toLowerCase();
      continue;
    }
    // anvil 1.7 writes a deposit's r and s as 32-byte zero words; geth and op-geth (and flashblocksd) as quantities.
    if ((k === 'r' || k === 's') && typeof x === 'string' && /^0x[0-9a-fA-F]+$/.test(x)) {
      out[k] = `0x${BigInt(x).toString(16)}`;
      continue;
    }
    // anvil 1.7 writes a receipt's blockTimestamp as a JSON number; geth (and flashblocksd) as a hex quantity.
    if (k === 'blockTimestamp' && typeof x === 'number') {
      out[k] = `0x${x.toString(16)}`;
      continue;
    }
    out[k] = strip(x);
  }
  return out;
}

/** The first differing path between two JSON values, or null. */
export function firstDiff(a: any, b: any, path = ''): string | null {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) {
    return a === b ? null : `${path || '.'}: daemon ${JSON.stringify(a)} vs node ${JSON.stringify(b)}`;
  }
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
    const d = firstDiff(a[k], b[k], `${path}.${k}`);
    if (d) return d;
  }
  return null;
}
