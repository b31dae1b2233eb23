// Which methods may be forwarded to the node: an allow-list of the standard read and submit methods, widened only by
// configuration. Pure: no sockets, no state; the dispatcher asks it once per forwarded item.
//
// The default is what reth and op-reth serve on their default public HTTP modules (eth, net, web3) minus everything
// that signs with the node's keys or changes the node: no eth_accounts / eth_sendTransaction / eth_sign*, no anvil_,
// hardhat_, evm_, admin_, debug_, personal_, miner_, engine_, txpool_. OP-stack execution clients add no public
// namespace of their own (optimism_* is op-node's rollup RPC, not the node's).
// The polling filters (eth_newFilter, eth_getFilterChanges, …) are not forwarded: the daemon serves them from the
// pending state (src/rpc/filters.ts).

/** Standard methods forwarded by default (execution-apis plus the read extensions reth serves publicly). */
export const DEFAULT_FORWARD_METHODS: readonly string[] = [
  // eth_: reads
  'eth_blobBaseFee', 'eth_blockNumber', 'eth_call', 'eth_callMany', 'eth_chainId', 'eth_config', 'eth_createAccessList',
  'eth_estimateGas', 'eth_feeHistory', 'eth_gasPrice', 'eth_getAccount', 'eth_getAccountInfo', 'eth_getBalance',
  'eth_getBlockByHash', 'eth_getBlockByNumber', 'eth_getBlockReceipts', 'eth_getBlockTransactionCountByHash',
  'eth_getBlockTransactionCountByNumber', 'eth_getCode', 'eth_getHeaderByHash', 'eth_getHeaderByNumber', 'eth_getLogs',
  'eth_getProof', 'eth_getRawTransactionByBlockHashAndIndex', 'eth_getRawTransactionByBlockNumberAndIndex',
  'eth_getRawTransactionByHash', 'eth_getStorageAt', 'eth_getTransactionByBlockHashAndIndex',
  'eth_getTransactionByBlockNumberAndIndex', 'eth_getTransactionByHash', 'eth_getTransactionBySenderAndNonce',
  'eth_getTransactionCount', 'eth_getTransactionReceipt', 'eth_getUncleByBlockHashAndIndex',
  'eth_getUncleByBlockNumberAndIndex', 'eth_getUncleCountByBlockHash', 'eth_getUncleCountByBlockNumber',
  'eth_maxPriorityFeePerGas', 'eth_protocolVersion', 'eth_simulateV1', 'eth_syncing',
  // eth_: submitting transactions the client signed itself
  'eth_sendRawTransaction', 'eth_sendRawTransactionSync',
  // net_, web3_
  'net_listening', 'net_peerCount', 'net_version', 'web3_clientVersion', 'web3_sha3',
];

/** The flag that widens the list (named in every refusal). */
export const FORWARD_FLAG = '--forward-methods';

/** Decides whether a method not answered by the daemon itself may go to the node. */
export class ForwardPolicy {
  private readonly methods: Set<string>;
  private readonly namespaces: Set<string>;
  private readonly all: boolean;

  /**
   * `extra`: `--forward-methods` entries (exact names, `ns_*`, or `*`; src/config.ts validates them);
   * `namespaces`: `--allow-namespaces` entries (whole namespaces, the same as `ns_*`).
   */
  constructor(extra: readonly string[], namespaces: readonly string[] = []) {
    this.methods = new Set(DEFAULT_FORWARD_METHODS);
    this.namespaces = new Set(namespaces);
    this.all = extra.includes('*');
    for (const e of extra) {
      if (e.endsWith('_*')) this.namespaces.add(e.slice(0, -2));
      else this.methods.add(e);
    }
  }

  /** True when `method` may be forwarded. */
  allows(method: string): boolean {
    if (this.all || this.methods.has(method)) return true;
    const us = method.indexOf('_');
    return us > 0 && this.namespaces.has(method.slice(0, us));
  }

  /** The error message for a refused method: what happened and the flag that allows it. */
  refusal(method: string): string {
    return (
      `the method ${method} does not exist/is not available: flashblocksd forwards only standard read and ` +
      `submit methods to the node by default (node-signed, dev and admin methods are refused); ` +
      `start it with ${FORWARD_FLAG} ${method} to forward it`
    );
  }
}
