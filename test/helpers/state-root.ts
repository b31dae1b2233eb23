// Test helper: a block's state root recomputed from the engine's post-state diff (RevmEngine.blockChanges) over the
// parent's tries in a witness (a preimage store keyed by node hash), with @ethereumjs/mpt — an implementation we did
// not write. A trie node the witness lacks is an error naming the account, never a silently shorter trie.
import { MapDB, ValueEncoding } from '@ethereumjs/util';
import { MerklePatriciaTrie } from '@ethereumjs/mpt';
import { encodeRlp } from '../../src/chain/rlp.js';
import { bigIntToBytes, hexToBytes } from '../../src/chain/hex.js';
import { EMPTY_TRIE_ROOT } from '../../src/chain/trie.js';
import type { AddonAccountChange } from '../../src/exec/addon.js';
import { decodeRlp } from './rlp-oracle.js';

/** One account of the engine's block diff (RevmEngine.blockChanges): its state after the block. */
export type AccountChange = AddonAccountChange;

/** The parent's state as a trie store: every witness preimage under its hash (unprefixed hex, as MapDB keys them). */
function storeOf(preimages: ReadonlyMap<string, Uint8Array>): Map<string, Uint8Array> {
  const db = new Map<string, Uint8Array>();
  for (const [k, v] of preimages) db.set(k.replace(/^0x/, '').toLowerCase(), v);
  return db;
}

function trieAt(db: Map<string, Uint8Array>, root: string): MerklePatriciaTrie {
  return new MerklePatriciaTrie({ db: new MapDB<string, Uint8Array>(db) as never, root: hexToBytes(root), useKeyHashing: true, valueEncoding: ValueEncoding.Bytes });
}

const hex = (b: Uint8Array): string => '0x' + Buffer.from(b).toString('hex');
const word = (v: string): Uint8Array => hexToBytes('0x' + BigInt(v).toString(16).padStart(64, '0'));

/** Reads `key` and fails when the path to it runs through a node the witness lacks (mpt's get would answer null). */
async function strictGet(trie: MerklePatriciaTrie, key: Uint8Array, what: string): Promise<Uint8Array | null> {
  // The empty trie has no node to look up (a created account's storage starts there).
  if (hex(trie.root()) === EMPTY_TRIE_ROOT) return null;
  try {
    return await trie.get(key, true);
  } catch (e) {
    throw new Error(`witness lacks a trie node on the path to ${what}: ${(e as Error).message}`, { cause: e });
  }
}

async function strictWrite(trie: MerklePatriciaTrie, key: Uint8Array, value: Uint8Array | null, what: string): Promise<void> {
  await strictGet(trie, key, what);
  try {
    if (value === null) await trie.del(key);
    else await trie.put(key, value);
  } catch (e) {
    throw new Error(`witness lacks a trie node needed to update ${what} (a sibling of a deleted leaf?): ${(e as Error).message}`, { cause: e });
  }
}

/** The account fields [nonce, balance, storageRoot, codeHash] of an RLP account leaf. */
function accountFields(rlp: Uint8Array): { storageRoot: string } {
  const f = decodeRlp(rlp) as Buffer[];
  return { storageRoot: hex(f[2]!) };
}

/** The post-state: its root, and each changed account's storage root after the block (Isthmus: the withdrawals root is L2ToL1MessagePasser's). */
export interface PostState {
  stateRoot: string;
  storageRoots: Map<string, string>;
}

/**
 * The state after the block: `changes` applied to the account trie at `parentStateRoot` (storage tries likewise),
 * over the witness `preimages`. Accounts the block did not change keep their leaves.
 */
export async function postState(parentStateRoot: string, preimages: ReadonlyMap<string, Uint8Array>, changes: readonly AccountChange[]): Promise<PostState> {
  const db = storeOf(preimages);
  const accounts = trieAt(db, parentStateRoot);
  const storageRoots = new Map<string, string>();
  for (const c of changes) {
    const addr = hexToBytes(c.address);
    const what = `account ${c.address}`;
    if (c.deleted) {
      await strictWrite(accounts, addr, null, what);
      storageRoots.set(c.address.toLowerCase(), EMPTY_TRIE_ROOT);
      continue;
    }
    const before = await strictGet(accounts, addr, what);
    let storageRoot = c.storageReset || before === null ? EMPTY_TRIE_ROOT : accountFields(before).storageRoot;
    if (c.storage.length > 0) {
      const st = trieAt(db, storageRoot);
      for (const [slot, value] of c.storage) {
        const v = BigInt(value);
        await strictWrite(st, word(slot), v === 0n ? null : encodeRlp(bigIntToBytes(v)), `${what} slot ${slot}`);
      }
      storageRoot = hex(st.root());
    }
    storageRoots.set(c.address.toLowerCase(), storageRoot);
    const leaf = encodeRlp([bigIntToBytes(BigInt(c.nonce)), bigIntToBytes(BigInt(c.balance)), hexToBytes(storageRoot), hexToBytes(c.codeHash)]);
    await strictWrite(accounts, addr, leaf, what);
  }
  return { stateRoot: hex(accounts.root()), storageRoots };
}
