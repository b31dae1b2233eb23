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
import type { DecodedTx } from '../chain/types.js';

/** The zero hash a subblock stream puts where a commitment is unavailable. */
export const ZERO_HASH = '0x' + '00'.repeat(32);

/** Computes local block hashes for one pending block; keeps its transactions trie across flashblocks. */
export class LocalBlockHasher {
  private readonly trie = new TrieCache();

  /** The hash of the header of block `number` with `base`, `diff` and the first `count` of `txs`. */
  hash(number: number, base: FlashblockBase, diff: FlashblockDiff, txs: readonly { tx: DecodedTx }[], count: number): string {
    const transactionsRoot = orderedTrieRootOf(count, (i) => hexToBytes(txs[i]!.tx.raw), this.trie);
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
