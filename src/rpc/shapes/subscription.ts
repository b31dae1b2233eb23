// eth_subscription notification payloads: the envelope prefix of a subscription, the pending block as of a
// flashblock (newFlashblocks), a full transaction with its receipt (newFlashblockTransactions), and a newHeads header
// from the node's block. Pure.

/** `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"<id>","result":` — close with `}}`. */
export function notificationPrefix(id: string): string {
  return '{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"' + id + '","result":';
}

/** A notification: the subscription's prefix, a payload already serialised once for every subscriber, the close. */
export function notification(prefix: string, payloadJson: string): string {
  return prefix + payloadJson + '}}';
}

/**
 * newFlashblocks: the block object as of flashblock `index`, plus `flashblockIndex` (hex quantity) so a subscriber
 * can pin HTTP reads to it (`X-Flashblock-Min: <number>-<flashblockIndex>`, hex accepted). An extra field: viem
 * keeps unknown block fields as they are, ethers ignores them.
 */
export function flashblockPayload(block: Record<string, unknown>, index: number): Record<string, unknown> {
  block.flashblockIndex = '0x' + index.toString(16);
  return block;
}

/** flashblockPayload on the block object's JSON text: the same bytes as JSON.stringify of flashblockPayload(block). */
export function flashblockPayloadJson(blockJson: string, index: number): string {
  return blockJson.slice(0, -1) + ',"flashblockIndex":"0x' + index.toString(16) + '"}';
}

/** newFlashblockTransactions with full objects: the transaction object with its receipt (null when unknown). */
export function transactionWithReceipt(tx: Record<string, unknown>, receipt: Record<string, unknown> | null): Record<string, unknown> {
  tx.receipt = receipt;
  return tx;
}

/** newHeads: the node's block object without its transactions and uncles (geth's header shape). */
export function headOfBlock(block: Record<string, unknown>): Record<string, unknown> {
  const { transactions: _t, uncles: _u, ...head } = block;
  return head;
}
