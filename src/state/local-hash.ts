// A pending block's hash where the stream gives zero (OP subblocks zero `block_hash`, `state_root` and
// `withdrawals_root`): keccak256 of the header RLP built from base + cumulative diff + the transactions so far.
// Pure over its inputs; owns no state beyond the block's transaction trie. Never used when the stream gives a hash.
//
// What cannot be exact: the header commits to the state root and (since Isthmus) the withdrawals root, which the
// stream zeroes, so the result is a local identifier for "this block as of this flashblock", not the hash the sealed
// block will have. It is stable, distinct per flashblock (gas used, receipts root or transactions move), and what
// `blockHash` fields and flashblock-hash lookups use until the canonical block replaces the pending one.
import { headerRlp, requestsHashFor } from '../chain/header.js';
import { hexToBytes } from '../chain/hex.js';
import { keccak256Hex } from '../chain/keccak.js';
import { EMPTY_TRIE_ROOT, orderedTrieRootOf, TrieCache } from '../chain/trie.js';
import type { FlashblockBase, FlashblockDiff } from '../chain/flashblock.js';

/**
 * The transactions root of `count` transactions (EIP-2718 bytes by `bytesAt`) followed by `postExecRaw` when given. The kept
 * trie assumes a list that only grows; the post-exec leaf is replaced by the next flashblock, so it is hashed on a
 * copy of the trie and never cached.
 */
export function transactionsRootWith(count: number, bytesAt: (i: number) => Uint8Array, postExecRaw: string | null, trie: TrieCache): string {
  if (postExecRaw === null) return orderedTrieRootOf(count, bytesAt, trie);
  // Inner nodes are keyed by the range they cover; one that reaches the post-exec leaf is rebuilt on the copy.
  const scratch = trie.copyBelow(count);
  const postExec = hexToBytes(postExecRaw);
  return orderedTrieRootOf(count + 1, (i) => (i < count ? bytesAt(i) : postExec), scratch);
}

/** The zero hash a subblock stream puts where a commitment is unavailable. */
export const ZERO_HASH = '0x' + '00'.repeat(32);

/** Computes local block hashes for one pending block; keeps its transactions trie across flashblocks. */
export class LocalBlockHasher {
  private readonly trie = new TrieCache();

  /**
   * The hash of the header of block `number` with `base`, `diff` and the first `count` of `txs`, then `postExecRaw`
   * (the block's post-exec transaction as of now) when given: as op-alloy materialises a flashblock sequence.
   */
  hash(number: number, base: FlashblockBase, diff: FlashblockDiff, txs: { txBytes(i: number): Uint8Array }, count: number, postExecRaw: string | null = null): string {
    const transactionsRoot = transactionsRootWith(count, (i) => txs.txBytes(i), postExecRaw, this.trie);
    return keccak256Hex(
      headerRlp({
        parentHash: base.parentHash,
        feeRecipient: base.feeRecipient,
        stateRoot: diff.stateRoot,
        transactionsRoot,
        receiptsRoot: diff.receiptsRoot,
        logsBloom: diff.logsBloom,
        number,
        gasLimit: base.gasLimit,
        gasUsed: diff.gasUsed,
        timestamp: base.timestamp,
        extraData: base.extraData,
        prevRandao: base.prevRandao,
        baseFeePerGas: base.baseFeePerGas,
        withdrawalsRoot: diff.withdrawalsRoot ?? EMPTY_TRIE_ROOT,
        blobGasUsed: diff.blobGasUsed ?? 0n,
        parentBeaconBlockRoot: base.parentBeaconBlockRoot,
        requestsHash: requestsHashFor(diff.withdrawalsRoot),
      }),
    );
  }
}
