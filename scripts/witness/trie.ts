// Reads the Merkle-Patricia tries of a preimage store: an account or a storage slot at a root, with the nodes along
// the path (EIP-1186 proofs). A path that ends in a proven absence is a real answer (null); a node the store lacks is
// a MissingWitness error, never a zero. Pure; read-only over the store.
import { keccak256 } from '../../src/chain/keccak.js';
import { bytesToBigInt, bytesToHex } from '../../src/chain/hex.js';
import { readRlpItem, RLP_OK, rlpItem, rlpProblem } from '../../src/chain/rlp.js';
import { EMPTY_TRIE_ROOT } from '../../src/chain/trie.js';

/** keccak256 of nothing: the code hash of an account without code. */
export const EMPTY_CODE_HASH = '0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470';

/** A preimage the witness does not hold: the answer is unknown (served as a JSON-RPC error). */
export class MissingWitness extends Error {
  constructor(readonly hash: string, what: string) {
    super(`${what}: preimage ${hash} is not in the witness`);
  }
}

/** An account as the state trie stores it. */
export interface TrieAccount {
  nonce: bigint;
  balance: bigint;
  storageRoot: string;
  codeHash: string;
}

/** The items of one RLP list (each the full encoding of the item, header included) or an Error. */
function listItems(b: Uint8Array, what: string): Uint8Array[] {
  let code = readRlpItem(b, 0, b.length);
  if (code !== RLP_OK || !rlpItem.isList || rlpItem.end !== b.length) throw new Error(`${what}: not an RLP list (${code === RLP_OK ? 'a string or trailing bytes' : rlpProblem(code)})`);
  const out: Uint8Array[] = [];
  for (let pos = rlpItem.start, end = rlpItem.end; pos < end; ) {
    code = readRlpItem(b, pos, end);
    if (code !== RLP_OK) throw new Error(`${what}: item ${out.length}: ${rlpProblem(code)}`);
    out.push(b.subarray(pos, rlpItem.end));
    pos = rlpItem.end;
  }
  return out;
}

/** The payload of an RLP string item (`item` is its full encoding). */
function stringPayload(item: Uint8Array, what: string): Uint8Array {
  const code = readRlpItem(item, 0, item.length);
  if (code !== RLP_OK || rlpItem.isList) throw new Error(`${what}: expected an RLP string`);
  return item.subarray(rlpItem.start, rlpItem.end);
}

function nibblesOf(key: Uint8Array): number[] {
  const out: number[] = [];
  for (const b of key) out.push(b >> 4, b & 15);
  return out;
}

/** Hex-prefix decoding of a leaf/extension path: its nibbles and whether it is a leaf. */
function hexPrefix(path: Uint8Array, what: string): { nibbles: number[]; leaf: boolean } {
  if (path.length === 0) throw new Error(`${what}: empty hex-prefix path`);
  const flag = (path[0] as number) >> 4;
  if (flag > 3) throw new Error(`${what}: hex-prefix flag ${flag} is not 0..3`);
  const all = nibblesOf(path);
  return { nibbles: flag & 1 ? all.slice(1) : all.slice(2), leaf: flag >= 2 };
}

/** Trie reads over one preimage store. */
export class WitnessTrie {
  constructor(readonly preimages: ReadonlyMap<string, Uint8Array>) {}

  /** The bytes whose keccak256 is `hash`, or a MissingWitness naming `what`. */
  preimage(hash: string, what: string): Uint8Array {
    const v = this.preimages.get(hash);
    if (v === undefined) throw new MissingWitness(hash, what);
    return v;
  }

  /**
   * The value stored under `key` (32 bytes, already hashed) in the trie at `root`: the leaf's value bytes, or null
   * when the path proves the key absent. Every node fetched by hash is appended to `proof` when given.
   */
  get(root: string, key: Uint8Array, what: string, proof?: string[]): Uint8Array | null {
    if (root === EMPTY_TRIE_ROOT) return null;
    const path = nibblesOf(key);
    let depth = 0;
    let node = this.preimage(root, `${what}: trie root`);
    proof?.push(bytesToHex(node));
    for (;;) {
      const items = listItems(node, `${what}: trie node at depth ${depth}`);
      let child: Uint8Array;
      if (items.length === 17) {
        if (depth === path.length) {
          const v = stringPayload(items[16] as Uint8Array, what);
          return v.length === 0 ? null : v;
        }
        child = items[path[depth] as number] as Uint8Array;
        depth++;
      } else if (items.length === 2) {
        const hp = hexPrefix(stringPayload(items[0] as Uint8Array, what), `${what}: trie node at depth ${depth}`);
        const rest = path.length - depth;
        if (hp.nibbles.length > rest) return null;
        for (let i = 0; i < hp.nibbles.length; i++) if (hp.nibbles[i] !== path[depth + i]) return null;
        depth += hp.nibbles.length;
        if (hp.leaf) return depth === path.length ? stringPayload(items[1] as Uint8Array, what) : null;
        child = items[1] as Uint8Array;
      } else {
        throw new Error(`${what}: a trie node has 2 or 17 items, this one ${items.length}`);
      }
      // A child is empty (absent), a 32-byte hash, or a node under 32 bytes embedded as a list.
      if ((child[0] as number) >= 0xc0) {
        node = child;
        continue;
      }
      const ref = stringPayload(child, what);
      if (ref.length === 0) return null;
      if (ref.length !== 32) throw new Error(`${what}: a child reference is ${ref.length} bytes (not a 32-byte hash)`);
      node = this.preimage(bytesToHex(ref), `${what}: trie node at depth ${depth}`);
      proof?.push(bytesToHex(node));
    }
  }

  /** The account at `address` in the state trie at `stateRoot`, or null when the trie proves there is none. */
  account(stateRoot: string, address: string, proof?: string[]): TrieAccount | null {
    const what = `account ${address}`;
    const v = this.get(stateRoot, keccak256(Buffer.from(address.slice(2), 'hex')), what, proof);
    if (v === null) return null;
    const f = listItems(v, `${what}: account value`);
    if (f.length !== 4) throw new Error(`${what}: an account has 4 fields, this one ${f.length}`);
    return {
      nonce: bytesToBigInt(stringPayload(f[0] as Uint8Array, what)),
      balance: bytesToBigInt(stringPayload(f[1] as Uint8Array, what)),
      storageRoot: bytesToHex(stringPayload(f[2] as Uint8Array, what)),
      codeHash: bytesToHex(stringPayload(f[3] as Uint8Array, what)),
    };
  }

  /** The value of storage slot `slot` (32 bytes) under `storageRoot`; 0 when the trie proves it unset. */
  storage(storageRoot: string, slot: Uint8Array, what: string, proof?: string[]): bigint {
    const v = this.get(storageRoot, keccak256(slot), what, proof);
    if (v === null) return 0n;
    return bytesToBigInt(stringPayload(v, `${what}: slot value`));
  }

  /** The code of an account with `codeHash`: empty for EMPTY_CODE_HASH, else the preimage or MissingWitness. */
  code(codeHash: string, what: string): Uint8Array {
    if (codeHash === EMPTY_CODE_HASH) return new Uint8Array(0);
    return this.preimage(codeHash, `${what}: code`);
  }
}
