// Shapes shared by the chain codecs and the pending state (types only, no logic).

/** EIP-2718 transaction types seen on OP-stack chains. */
export const TX_LEGACY = 0;
export const TX_EIP2930 = 1;
export const TX_EIP1559 = 2;
export const TX_EIP4844 = 3;
export const TX_EIP7702 = 4;
export const TX_DEPOSIT = 0x7e;
/**
 * OP post-execution transaction (Lagoon, specs/protocol/lagoon/post-exec.md; op-alloy `POST_EXEC_TX_TYPE_ID`):
 * `0x7d || rlp([version, blockNumber, ...schema fields])`, unsigned, sender the zero address, last in its block.
 * op-reth's executor short-circuits it before the EVM.
 */
export const TX_POST_EXEC = 0x7d;
/** The sender a post-exec transaction is served with. */
export const ZERO_ADDRESS = '0x0000000000000000000000000000000000000000';

/** The payload of a post-exec transaction (envelope fields; SDM refund entries when the v1 layout has them). */
export interface PostExecPayload {
  version: number;
  /** The L2 block the payload is anchored to (must be the containing block). */
  blockNumber: bigint;
  /** SDM (version 1) `gasRefundEntries` as [tx index, gas refund]; null when the payload has another layout. */
  gasRefunds: { index: bigint; gasRefund: bigint }[] | null;
}

export interface AccessListEntry {
  address: string;
  storageKeys: string[];
}

export interface Authorization {
  chainId: bigint;
  address: string;
  nonce: bigint;
  yParity: number;
  r: bigint;
  s: bigint;
}

/**
 * A decoded EIP-2718 transaction. Hex strings are lower-case and 0x-prefixed. Fields that a type does not have are
 * `null` (never undefined) so every instance has the same shape.
 */
export interface DecodedTx {
  type: number;
  /** keccak256 of the raw bytes. */
  hash: string;
  /** The raw EIP-2718 bytes as lower-case 0x-hex (what eth_getRawTransactionByHash returns). */
  raw: string;
  chainId: bigint | null;
  nonce: bigint;
  gasPrice: bigint | null;
  maxPriorityFeePerGas: bigint | null;
  maxFeePerGas: bigint | null;
  maxFeePerBlobGas: bigint | null;
  gas: bigint;
  /** null for contract creation. */
  to: string | null;
  value: bigint;
  input: string;
  accessList: AccessListEntry[] | null;
  blobVersionedHashes: string[] | null;
  authorizationList: Authorization[] | null;
  /** Signature; for deposits all zero. `v` is the raw legacy v (27/28 or EIP-155), or the y-parity for typed txs. */
  v: bigint;
  r: bigint;
  s: bigint;
  /** The 32-byte hash that was signed (null for deposits). */
  signingHash: Buffer | null;
  /** Deposit fields (type 0x7e), else null. */
  sourceHash: string | null;
  mint: bigint | null;
  isSystemTx: boolean | null;
  /** Sender: known at decode for deposits (and post-exec: zero); recovered (and cached here) for signed txs. */
  from: string | null;
  /** Post-exec (type 0x7d) payload, else null. */
  postExec: PostExecPayload | null;
  /**
   * False when no EVM runs this transaction: op-reth's executor short-circuits post-exec (0x7d) transactions
   * (no gas, no logs, status 1, cumulative gas of the previous receipt). Execution feeds skip these.
   */
  executes: boolean;
}

/** Result of decoding: a value, never an exception. */
export type DecodeTxResult = { ok: true; tx: DecodedTx } | { ok: false; reason: string };
