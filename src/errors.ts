// The error catalogue: stable codes for start-up failures and the JSON-RPC error type with EIP-1474 codes.
// Leaf module: imports nothing from the project.

/** JSON-RPC error codes used by the daemon (EIP-1474, the revert code 3, EIP-7966's timeout code 4). */
export const RpcCode = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  SERVER_ERROR: -32000,
  RESOURCE_NOT_FOUND: -32001,
  RESOURCE_UNAVAILABLE: -32002,
  LIMIT_EXCEEDED: -32005,
  TIMEOUT: -32008,
  EXECUTION_REVERTED: 3,
  /** EIP-7966: eth_sendRawTransactionSync submitted the transaction but saw no receipt within the timeout. */
  TX_SYNC_TIMEOUT: 4,
} as const;

/** An error a JSON-RPC handler throws; only the dispatcher turns it into an error envelope. */
export class RpcError extends Error {
  readonly code: number;
  readonly data: unknown;
  constructor(code: number, message: string, data?: unknown) {
    super(message);
    this.name = 'RpcError';
    this.code = code;
    this.data = data;
  }
}

/** Start-up error codes: stable strings operators can grep for; `main` exits non-zero on any of them. */
export const StartupCode = {
  CONFIG_INVALID: 'E_CONFIG',
  NATIVE_MISSING: 'E_NATIVE',
  PORT_IN_USE: 'E_LISTEN',
} as const;
export type StartupCode = (typeof StartupCode)[keyof typeof StartupCode];

/** A start-up failure: bad configuration, a port that cannot be bound, a native binary that did not load. */
export class StartupError extends Error {
  readonly code: StartupCode;
  constructor(code: StartupCode, message: string) {
    super(message);
    this.name = 'StartupError';
    this.code = code;
  }
}

/** The error table docs/errors.md documents; test/readme.test.ts keeps it and this list in sync. */
export const ERROR_TABLE: ReadonlyArray<{ code: number | string; meaning: string }> = [
  { code: RpcCode.PARSE_ERROR, meaning: 'body is not valid JSON (or nested deeper than the limit)' },
  { code: RpcCode.INVALID_REQUEST, meaning: 'not a JSON-RPC 2.0 request object; empty batch; batch too large' },
  { code: RpcCode.METHOD_NOT_FOUND, meaning: 'unknown method, or a method not forwarded by default (node-signed, dev, admin: `eth_sendTransaction`, `anvil_*`, `debug_*`, ...); the message names `--forward-methods`' },
  { code: RpcCode.INVALID_PARAMS, meaning: 'wrong parameter count, type or hex shape; the message names the parameter; with HTTP 400: a malformed `X-Flashblock-Min` header (`invalid X-Flashblock-Min`); `eth_simulateV1` with `validation`: a call whose priority fee is above its max fee (as geth)' },
  { code: RpcCode.INTERNAL_ERROR, meaning: 'unexpected failure inside the daemon (details in the log, never in the reply); `eth_simulateV1` with `validation`: a call that is no valid transaction for a reason without a code of its own (the message says which, as geth)' },
  { code: RpcCode.SERVER_ERROR, meaning: 'the node answered with an error, or could not be reached; `execution aborted (timeout = 5s)`: a pending `eth_call`, `eth_estimateGas`, `eth_createAccessList` or `eth_simulateV1` ran past `--execution-read-timeout-ms` (counted in `flashblocksd_execution_read_timeouts_total`); `flashblock not yet applied: …`: the flashblock `X-Flashblock-Min` asks for was not applied within `--pin-wait-ms` (`data`: `{asked, current}`); `hash is not currently canonical`: `requireCanonical` with a pending block\'s hash; `… is superseded`: an older flashblock\'s hash whose block has taken transactions since; `filter not found`: an unknown, uninstalled or expired filter id (as geth)' },
  { code: RpcCode.LIMIT_EXCEEDED, meaning: 'response larger than the configured cap; or `rate limit exceeded` (HTTP 429 over HTTP) when a client IP or API key is over --rate-limit-rps; `too many filters …`: a filter install over the per-client (100) or total (1,000) cap' },
  { code: RpcCode.TIMEOUT, meaning: 'the node did not answer within the timeout' },
  { code: RpcCode.EXECUTION_REVERTED, meaning: 'execution reverted (passed through from the node with its data)' },
  { code: RpcCode.TX_SYNC_TIMEOUT, meaning: 'eth_sendRawTransactionSync: submitted, but no receipt within the timeout; `data` is the transaction hash (EIP-7966)' },
  { code: StartupCode.CONFIG_INVALID, meaning: 'start-up: a flag or environment variable is invalid; the message says which' },
  { code: StartupCode.NATIVE_MISSING, meaning: 'start-up: a native binary (uWebSockets.js, secp256k1, keccak) did not load' },
  { code: StartupCode.PORT_IN_USE, meaning: 'start-up: a port could not be bound' },
];
