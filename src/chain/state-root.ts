// A block's state root from its post-state diff (the engine's RevmEngine.blockChanges): the diff applied to the
// parent's account and storage tries with @ethereumjs/mpt, whose nodes are fetched on demand by hash from a
// TrieNodeSource (a node's debug_dbGet, or a witness's preimages). A node the source cannot give is a
// TrieNodeUnavailable naming the account or slot on whose path it lies, never a silently shorter trie.
import { MerklePatriciaTrie } from '@ethereumjs/mpt';
import { ValueEncoding, type BatchDBOp, type DB } from '@ethereumjs/util';
import { bigIntToBytes, bytesToHex, hexToBytes } from './hex.js';
import { encodeRlp, readRlpItem, rlpItem, RLP_OK } from './rlp.js';
import { EMPTY_TRIE_ROOT } from './trie.js';

/** A trie node (or any preimage) by its keccak256 hash (0x-hex, lower-case); null when the source does not hold it. */
export type TrieNodeSource = (hash: string) => Promise<Uint8Array | null>;

/** One account as the block left it (the shape of the engine's diff, src/exec/addon.ts AddonAccountChange). */
export interface AccountAfter {
  address: string;
  /** Destroyed or left empty: not in the post-state trie. */
  deleted: boolean;
  /** Its storage before the block is void: start from the empty trie. */
  storageReset: boolean;
  balance: string;
  nonce: string;
  codeHash: string;
  /** [slot, value] 32-byte words; a zero value deletes the slot. */
  storage: [string, string][];
}

/** A trie node the source cannot give (absent, or the source failed): the state root cannot be computed. */
export class TrieNodeUnavailable extends Error {}

/** The post-state: its root, and a way to read an account's storage root in it (Isthmus's withdrawals root). */
export interface PostState {
  stateRoot: string;
  storageRootOf(address: string): Promise<string>;
}

/** Nodes fetched from the source once each (concurrent asks share one fetch), written nodes kept in memory. */
class FetchingDb implements DB<string, Uint8Array> {
  private readonly held = new Map<string, Promise<Uint8Array | null>>();

  constructor(private readonly source: TrieNodeSource) {}

  async get(key: string): Promise<Uint8Array | undefined> {
    let v = this.held.get(key);
    if (v === undefined) {
      v = this.source('0x' + key.toLowerCase());
      this.held.set(key, v);
    }
    return (await v) ?? undefined;
  }

  async put(key: string, val: Uint8Array): Promise<void> {
    this.held.set(key, Promise.resolve(val));
  }

  // A trie without pruning never deletes; nothing here is persisted anyway.
  async del(): Promise<void> {}

  async batch(ops: BatchDBOp<string, Uint8Array>[]): Promise<void> {
    for (const op of ops) if (op.type === 'put') await this.put(op.key, op.value);
  }

  shallowCopy(): DB<string, Uint8Array> {
    return this;
  }

  async open(): Promise<void> {}
}

function trieAt(db: FetchingDb, root: string): MerklePatriciaTrie {
  return new MerklePatriciaTrie({ db, root: hexToBytes(root), useKeyHashing: true, valueEncoding: ValueEncoding.Bytes });
}

const word = (v: string): Uint8Array => hexToBytes('0x' + BigInt(v).toString(16).padStart(64, '0'));

function unavailable(what: string, e: unknown): TrieNodeUnavailable {
  if (e instanceof TrieNodeUnavailable) return e;
  const msg = (e as Error)?.message ?? String(e);
  return new TrieNodeUnavailable(`no trie node on the path to ${what}${msg === 'Missing node in DB' ? '' : `: ${msg}`}`, { cause: e });
}

/** Reads `key`; a node missing on its path fails (mpt's plain get would answer null). */
async function strictGet(trie: MerklePatriciaTrie, key: Uint8Array, what: string): Promise<Uint8Array | null> {
  // The empty trie has no node to look up (a created account's storage starts there).
  if (bytesToHex(trie.root()) === EMPTY_TRIE_ROOT) return null;
  try {
    return await trie.get(key, true);
  } catch (e) {
    throw unavailable(what, e);
  }
}

async function strictWrite(trie: MerklePatriciaTrie, key: Uint8Array, value: Uint8Array | null, what: string): Promise<void> {
  await strictGet(trie, key, what);
  try {
    if (value === null) await trie.del(key);
    else await trie.put(key, value);
  } catch (e) {
    // Deleting a leaf can collapse its branch onto a sibling, whose node is then needed too.
    throw unavailable(`${what} (updating it)`, e);
  }
}

/** The storage root (third field) of an RLP account leaf [nonce, balance, storageRoot, codeHash]. */
export function storageRootOfLeaf(leaf: Uint8Array): string {
  if (readRlpItem(leaf, 0, leaf.length) !== RLP_OK || !rlpItem.isList) throw new Error('an account leaf is not an RLP list');
  let pos = rlpItem.start;
  const end = rlpItem.end;
  for (let i = 0; i < 3; i++) {
    if (readRlpItem(leaf, pos, end) !== RLP_OK || rlpItem.isList) throw new Error(`an account leaf's field ${i} is malformed`);
    if (i < 2) pos = rlpItem.end;
  }
  if (rlpItem.end - rlpItem.start !== 32) throw new Error("an account leaf's storage root is not 32 bytes");
  return bytesToHex(leaf.subarray(rlpItem.start, rlpItem.end));
}

/** An account's leaf [nonce, balance, storageRoot, codeHash]. */
function accountLeaf(a: AccountAfter, storageRoot: string): Buffer {
  return encodeRlp([bigIntToBytes(BigInt(a.nonce)), bigIntToBytes(BigInt(a.balance)), hexToBytes(storageRoot), hexToBytes(a.codeHash)]);
}

/**
 * The state after a block: `changes` applied to the account trie at `parentStateRoot` (each changed account's storage
 * trie likewise), over the nodes `source` gives. Accounts the block did not change keep their leaves. The paths are
 * read concurrently first (a remote source answers many asks at once), then written in order.
 */
export async function computePostState(parentStateRoot: string, source: TrieNodeSource, changes: readonly AccountAfter[]): Promise<PostState> {
  const db = new FetchingDb(source);
  const accounts = trieAt(db, parentStateRoot);
  const before = await Promise.all(changes.map((c) => strictGet(accounts, hexToBytes(c.address), `account ${c.address}`)));
  const storageRoots = changes.map((c, i) => (c.deleted || c.storageReset || before[i] === null ? EMPTY_TRIE_ROOT : storageRootOfLeaf(before[i]!)));
  const storages = changes.map((c, i) => (c.deleted || c.storage.length === 0 ? null : trieAt(db, storageRoots[i]!)));
  await Promise.all(changes.flatMap((c, i) => (storages[i] === null ? [] : c.storage.map(([s]) => strictGet(storages[i]!, word(s), `account ${c.address} slot ${s}`)))));
  for (let i = 0; i < changes.length; i++) {
    const c = changes[i]!;
    const what = `account ${c.address}`;
    if (c.deleted) {
      await strictWrite(accounts, hexToBytes(c.address), null, what);
      continue;
    }
    const st = storages[i] ?? null;
    if (st !== null) {
      for (const [s, value] of c.storage) {
        const v = BigInt(value);
        await strictWrite(st, word(s), v === 0n ? null : encodeRlp(bigIntToBytes(v)), `${what} slot ${s}`);
      }
      storageRoots[i] = bytesToHex(st.root());
    }
    await strictWrite(accounts, hexToBytes(c.address), accountLeaf(c, storageRoots[i]!), what);
  }
  const stateRoot = bytesToHex(accounts.root());
  return {
    stateRoot,
    async storageRootOf(address) {
      const leaf = await strictGet(accounts, hexToBytes(address), `account ${address}`);
      return leaf === null ? EMPTY_TRIE_ROOT : storageRootOfLeaf(leaf);
    },
  };
}
