// Test helper: a block's state root from the engine's post-state diff over a witness (a preimage store keyed by node
// hash), through the daemon's own src/chain/state-root.ts (@ethereumjs/mpt) with the witness as its trie-node source.
import { computePostState, type AccountAfter, type PostState, type TrieNodeSource } from '../../src/chain/state-root.js';

export type { PostState } from '../../src/chain/state-root.js';

/** The witness as a trie-node source: each preimage by its 0x-hex hash (lower-case). */
export function witnessSource(preimages: ReadonlyMap<string, Uint8Array>): TrieNodeSource {
  const byHash = new Map<string, Uint8Array>();
  for (const [k, v] of preimages) byHash.set(k.toLowerCase(), v);
  return async (hash) => byHash.get(hash) ?? null;
}

/** The state after the block: `changes` applied to the parent's tries at `parentStateRoot` over the witness. */
export function postState(parentStateRoot: string, preimages: ReadonlyMap<string, Uint8Array>, changes: readonly AccountAfter[]): Promise<PostState> {
  return computePostState(parentStateRoot, witnessSource(preimages), changes);
}
