// JSON-RPC transaction objects (eth_getTransactionByHash and friends) in the field set reth/op-reth return.
// Pure formatting of a DecodedTx plus block context; knows nothing of pending state or transport.
import type { AccessListEntry, Authorization, DecodedTx } from './types.js';
import { TX_DEPOSIT, TX_EIP2930, TX_EIP4844, TX_EIP7702, TX_LEGACY } from './types.js';
import { toQuantity } from './hex.js';
import { recoverSender } from './sender.js';

/** Where a transaction sits, and the receipt-derived extras a deposit shows. Nulls mean "pending / unknown". */
export interface RpcTxContext {
  blockHash: string | null;
  blockNumber: bigint | null;
  transactionIndex: number | null;
  baseFeePerGas: bigint | null;
  /** Deposit only: the receipt's depositReceiptVersion (e.g. "0x1"), shown when given. */
  depositReceiptVersion?: string | null;
  /** Deposit only: the receipt's depositNonce, shown as `nonce` when given (op-reth omits it otherwise). */
  depositNonce?: bigint | null;
  /** The block's timestamp; shown as `blockTimestamp` when given (newer execution-apis; reth omits it). */
  blockTimestamp?: bigint | null;
}

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
export function effectiveGasPrice(tx: DecodedTx, baseFeePerGas: bigint | null): bigint {
  if (tx.type === TX_DEPOSIT) return 0n;
  if (tx.maxFeePerGas === null) return tx.gasPrice ?? 0n;
  if (baseFeePerGas === null) return tx.maxFeePerGas;
  const tipped = baseFeePerGas + (tx.maxPriorityFeePerGas ?? 0n);
  return tipped < tx.maxFeePerGas ? tipped : tx.maxFeePerGas;
}

function depositObject(tx: DecodedTx, ctx: RpcTxContext, out: Record<string, unknown>): Record<string, unknown> {
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
 * `gasPrice`; deposits show `sourceHash`, `mint`, zero signature and receipt extras. Quantities are canonical hex.
 */
export function toRpcTransaction(tx: DecodedTx, ctx: RpcTxContext): Record<string, unknown> {
  const out: Record<string, unknown> = {
    blockHash: ctx.blockHash,
    blockNumber: q(ctx.blockNumber),
    transactionIndex: q(ctx.transactionIndex),
  };
  if (ctx.blockTimestamp !== undefined && ctx.blockTimestamp !== null) out.blockTimestamp = toQuantity(ctx.blockTimestamp);
  out.hash = tx.hash;
  out.type = toQuantity(tx.type);
  out.from = recoverSender(tx);
  if (tx.type === TX_DEPOSIT) return depositObject(tx, ctx, out);

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
