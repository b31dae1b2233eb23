// Today's stream dialects applied to a real capture, each transformation named after the rule it follows (the
// sources are in test/fixtures/SOURCES.md): op-rbuilder ≥ v0.4.13's wire shape, OP subblocks' zero-valued fields,
// and the post-exec transaction op-alloy builds. Pure functions over parsed frames.
import { encodeRlp } from '../../src/chain/rlp.js';
import { bigIntToBytes } from '../../src/chain/hex.js';

type Msg = Record<string, any>;

const RECEIPT_TYPES: Record<string, string> = { Legacy: '0x0', Eip2930: '0x1', Eip1559: '0x2', Eip4844: '0x3', Eip7702: '0x4', Deposit: '0x7e', PostExec: '0x7d' };

/** An externally tagged receipt (`{"Eip1559":{…}}`) internally tagged, as op-rbuilder's golden wire tests pin it. */
export function internallyTagged(r: Record<string, any>): Record<string, any> {
  const keys = Object.keys(r);
  const tag = keys.length === 1 ? RECEIPT_TYPES[keys[0]!] : undefined;
  return tag === undefined ? r : { type: tag, ...r[keys[0]!] };
}

/**
 * op-rbuilder ≥ v0.4.13 (`builder/wspub.rs` golden_wire): receipts internally tagged, `metadata.block_number` a JSON
 * number, `diff.blob_gas_used` the cumulative DA footprint (`blobGasUsed`, here the canonical block's).
 */
export function asOpRbuilder(msgs: Msg[], blobGasUsed = '0x0'): Msg[] {
  return msgs.map((m) => {
    const c = structuredClone(m);
    c.metadata.block_number = Number(c.metadata.block_number);
    const r = c.metadata.receipts ?? {};
    for (const k of Object.keys(r)) r[k] = internallyTagged(r[k]);
    c.diff.blob_gas_used = blobGasUsed;
    if (c.base === null) delete c.base;
    return c;
  });
}

/** OP subblocks (specs/protocol/subblocks.md "Zero-valued fields"): state_root, block_hash, withdrawals_root zero, withdrawals []. */
export function asSubblocks(msgs: Msg[]): Msg[] {
  const zero = '0x' + '00'.repeat(32);
  return msgs.map((m) => {
    const c = structuredClone(m);
    c.diff.state_root = zero;
    c.diff.block_hash = zero;
    c.diff.withdrawals_root = zero;
    c.diff.withdrawals = [];
    return c;
  });
}

const n = (v: number | bigint): Uint8Array => bigIntToBytes(BigInt(v));

/** op-alloy-consensus `build_post_exec_tx(blockNumber, entries)` EIP-2718 encoded: 0x7d || rlp([1, blockNumber, entries]). */
export function postExecTx(blockNumber: number, entries: [index: number, gasRefund: number][]): string {
  return '0x7d' + encodeRlp([n(1), n(blockNumber), entries.map(([i, g]) => [n(i), n(g)])]).toString('hex');
}

/** One account's changes for `accessListHex`: [block access index, value] pairs per field. */
export interface ListedAccount {
  address: string;
  storage?: [slot: number, changes: [index: number, value: bigint][]][];
  reads?: number[];
  balance?: [index: number, value: bigint][];
  nonce?: [index: number, value: bigint][];
  code?: [index: number, code: string][];
}

/** An EIP-7928 block access list, RLP as alloy-eip7928 encodes it (okx/optimism `OpFlashblockPayloadMetadata::new`). */
export function accessListHex(accounts: ListedAccount[]): string {
  const h = (s: string): Buffer => Buffer.from(s.replace(/^0x/, ''), 'hex');
  const pairs = <T>(xs: [number, T][] | undefined, v: (x: T) => Uint8Array) => (xs ?? []).map(([i, x]) => [n(i), v(x)]);
  return '0x' + encodeRlp(accounts.map((a) => [
    h(a.address),
    (a.storage ?? []).map(([slot, cs]) => [n(slot), pairs(cs, n)]),
    (a.reads ?? []).map(n),
    pairs(a.balance, n),
    pairs(a.nonce, n),
    pairs(a.code, h),
  ])).toString('hex');
}

/**
 * X Layer (okx/optimism op-alloy `metadata.rs`): receipts and balances left out (both optional there), an access list
 * per flashblock in `metadata.access_list` (`lists[i]` for flashblock i; an empty list where none is given).
 */
export function asXLayer(msgs: Msg[], lists: ListedAccount[][]): Msg[] {
  return msgs.map((m, i) => {
    const c = structuredClone(m);
    c.metadata = { block_number: Number(c.metadata.block_number), access_list: accessListHex(lists[i] ?? []) };
    return c;
  });
}
