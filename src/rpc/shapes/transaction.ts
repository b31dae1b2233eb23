// JSON-RPC transaction objects (eth_getTransactionByHash and friends) in the field set reth/op-reth return.
// Pure formatting of a DecodedTx plus its context; the sender is read from `tx.from` (recovered before, never here).
import type { AccessListEntry, Authorization, DecodedTx } from '../../chain/types.js';
import { TX_DEPOSIT, TX_EIP2930, TX_EIP4844, TX_EIP7702, TX_LEGACY, TX_POST_EXEC } from '../../chain/types.js';
import { toQuantity } from '../../chain/hex.js';
import type { TxContext } from './context.js';

/** The context a transaction object is built from (see context.ts). */
export type RpcTxContext = TxContext;

function q(n: bigint | number | null): string | null {
  return n === null ? null : toQuantity(n);
}

function rpcAccessList(list: AccessListEntry[] | null): { address: string; storageKeys: string[] }[] {
  if (list === null) return [];
  return list.map((e) => ({ address: e.address, storageKeys: e.storageKeys.slice() }));
}

function rpcAuthorization(a: Authorization): Record<string, string> {
  return {
    chainId: toQuantity(a.chainId),
    address: a.address,
    nonce: toQuantity(a.nonce),
    yParity: toQuantity(a.yParity),
    r: toQuantity(a.r),
    s: toQuantity(a.s),
  };
}

/** gasPrice for fee-market types: the effective price in a block with a base fee, else the fee cap. */
export function effectiveGasPrice(tx: Readonly<DecodedTx>, baseFeePerGas: bigint | null): bigint {
  if (tx.type === TX_DEPOSIT || tx.type === TX_POST_EXEC) return 0n;
  if (tx.maxFeePerGas === null) return tx.gasPrice ?? 0n;
  if (baseFeePerGas === null) return tx.maxFeePerGas;
  const tipped = baseFeePerGas + (tx.maxPriorityFeePerGas ?? 0n);
  return tipped < tx.maxFeePerGas ? tipped : tx.maxFeePerGas;
}

function depositObject(tx: Readonly<DecodedTx>, ctx: RpcTxContext, out: Record<string, unknown>): Record<string, unknown> {
  out.sourceHash = tx.sourceHash;
  if (tx.to !== null) out.to = tx.to;
  out.mint = toQuantity(tx.mint ?? 0n);
  out.value = toQuantity(tx.value);
  out.gas = toQuantity(tx.gas);
  if (tx.isSystemTx === true) out.isSystemTx = '0x1';
  out.input = tx.input;
  out.r = '0x0';
  out.s = '0x0';
  out.v = '0x0';
  out.gasPrice = '0x0';
  if (ctx.depositNonce !== undefined && ctx.depositNonce !== null) out.nonce = toQuantity(ctx.depositNonce);
  if (ctx.depositReceiptVersion !== undefined && ctx.depositReceiptVersion !== null) {
    out.depositReceiptVersion = ctx.depositReceiptVersion;
  }
  return out;
}

/**
 * The JSON-RPC object for `tx` at `ctx`: legacy keeps raw `v` (and `chainId` only when EIP-155); typed txs show
 * `yParity` with `v` equal to it, `chainId` and `accessList`; fee-market types put the effective price in
 * `gasPrice`; deposits show `sourceHash`, `mint`, zero signature and receipt extras; post-exec (0x7d) shows only
 * type, hash, from (zero), gas 0, value 0 and input. Quantities are canonical hex.
 */
export function toRpcTransaction(tx: Readonly<DecodedTx>, ctx: RpcTxContext): Record<string, unknown> {
  const out: Record<string, unknown> = {
    blockHash: ctx.blockHash,
    blockNumber: q(ctx.blockNumber),
    transactionIndex: q(ctx.transactionIndex),
  };
  if (ctx.blockTimestamp !== undefined && ctx.blockTimestamp !== null) out.blockTimestamp = toQuantity(ctx.blockTimestamp);
  out.hash = tx.hash;
  out.type = toQuantity(tx.type);
  out.from = tx.from;
  if (tx.type === TX_DEPOSIT) return depositObject(tx, ctx, out);
  if (tx.type === TX_POST_EXEC) {
    // lagoon/post-exec.md "Generic Transaction Interface Representation": only these; no nonce, fees, to, signature.
    out.gas = '0x0';
    out.value = '0x0';
    out.input = tx.input;
    return out;
  }

  out.nonce = toQuantity(tx.nonce);
  out.to = tx.to;
  out.gas = toQuantity(tx.gas);
  out.value = toQuantity(tx.value);
  out.input = tx.input;
  out.gasPrice = toQuantity(effectiveGasPrice(tx, ctx.baseFeePerGas));
  if (tx.type === TX_LEGACY) {
    if (tx.chainId !== null) out.chainId = toQuantity(tx.chainId);
    out.v = toQuantity(tx.v);
  } else {
    out.chainId = q(tx.chainId);
    out.accessList = rpcAccessList(tx.accessList);
    if (tx.type !== TX_EIP2930) {
      out.maxFeePerGas = q(tx.maxFeePerGas);
      out.maxPriorityFeePerGas = q(tx.maxPriorityFeePerGas);
    }
    if (tx.type === TX_EIP4844) {
      out.maxFeePerBlobGas = q(tx.maxFeePerBlobGas);
      out.blobVersionedHashes = (tx.blobVersionedHashes ?? []).slice();
    }
    if (tx.type === TX_EIP7702) out.authorizationList = (tx.authorizationList ?? []).map(rpcAuthorization);
    out.yParity = toQuantity(tx.v);
    out.v = toQuantity(tx.v);
  }
  out.r = toQuantity(tx.r);
  out.s = toQuantity(tx.s);
  return out;
}
