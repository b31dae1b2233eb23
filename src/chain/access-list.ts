// EIP-7928 block-level access lists (RLP) as X Layer streams them in `metadata.access_list` (okx/optimism op-alloy
// `OpFlashblockPayloadMetadata::block_access_list`, alloy-eip7928 types): decoding and post-values. Pure; returns
// values, never throws to callers.
//
// BlockAccessList = [AccountChanges, …]
// AccountChanges  = [address, [SlotChanges, …], [storageRead, …], [BalanceChange, …], [NonceChange, …], [CodeChange, …]]
// SlotChanges     = [slot, [StorageChange, …]]        StorageChange = [blockAccessIndex, newValue]
// BalanceChange   = [blockAccessIndex, postBalance]    NonceChange   = [blockAccessIndex, newNonce]
// CodeChange      = [blockAccessIndex, newCode]
// Slots and values are U256 scalars (alloy-eip7928 ≥ 0.3; a 32-byte key as earlier drafts sent is accepted too).
import { readRlpItem, RLP_OK, rlpItem, rlpProblem } from './rlp.js';

/** One write at a block access index (0 = before the first transaction, i = transaction i−1, n+1 = after the last). */
export interface IndexedChange<T> {
  index: number;
  value: T;
}

/** Everything one access list says of one account. Slots are 32-byte lower-case hex keys. */
export interface AccountChanges {
  address: string;
  storageChanges: { slot: string; changes: IndexedChange<bigint>[] }[];
  storageReads: string[];
  balanceChanges: IndexedChange<bigint>[];
  nonceChanges: IndexedChange<bigint>[];
  codeChanges: IndexedChange<string>[];
}

/** An account's values after the changes seen so far; a field is undefined when no change to it was listed. */
export interface AccountPost {
  balance: bigint | undefined;
  nonce: bigint | undefined;
  code: string | undefined;
  /** Slot (32-byte hex) → value after the last listed write. */
  storage: Map<string, bigint>;
}

export type DecodeAccessListResult = { ok: true; accounts: AccountChanges[] } | { ok: false; reason: string };

class Reject extends Error {}

/** A cursor over the items of one RLP list. */
class Items {
  constructor(
    readonly b: Buffer,
    public pos: number,
    readonly end: number,
  ) {}
}

function item(c: Items, name: string): void {
  const code = readRlpItem(c.b, c.pos, c.end);
  if (code !== RLP_OK) throw new Reject(`${name}: ${rlpProblem(code)} at byte ${c.pos}`);
  c.pos = rlpItem.end;
}

function list(c: Items, name: string): Items {
  item(c, name);
  if (!rlpItem.isList) throw new Reject(`${name} must be a list`);
  return new Items(c.b, rlpItem.start, rlpItem.end);
}

function bytes(c: Items, name: string): Buffer {
  item(c, name);
  if (rlpItem.isList) throw new Reject(`${name} must be a byte string`);
  return c.b.subarray(rlpItem.start, rlpItem.end);
}

function scalar(c: Items, name: string, maxBytes: number): bigint {
  const v = bytes(c, name);
  if (v.length > maxBytes) throw new Reject(`${name} exceeds ${maxBytes * 8} bits`);
  if (v.length > 0 && v[0] === 0) throw new Reject(`${name} has leading zero bytes`);
  return v.length === 0 ? 0n : BigInt('0x' + v.toString('hex'));
}

/** A storage key: a canonical U256 scalar, or exactly 32 bytes; as 32-byte hex. */
function slot(c: Items, name: string): string {
  const v = bytes(c, name);
  if (v.length > 32 || (v.length < 32 && v.length > 0 && v[0] === 0)) throw new Reject(`${name} must be a U256 or a 32-byte key`);
  return '0x' + v.toString('hex').padStart(64, '0');
}

function done(c: Items, name: string): void {
  if (c.pos !== c.end) throw new Reject(`${name} has extra fields`);
}

function changes<T>(c: Items, name: string, value: (c: Items) => T): IndexedChange<T>[] {
  const l = list(c, name);
  const out: IndexedChange<T>[] = [];
  while (l.pos < l.end) {
    const e = list(l, `${name} entry`);
    const index = Number(scalar(e, `${name} blockAccessIndex`, 4));
    const v = value(e);
    done(e, `${name} entry`);
    out.push({ index, value: v });
  }
  return out;
}

function account(c: Items): AccountChanges {
  const a = list(c, 'account changes');
  const addr = bytes(a, 'address');
  if (addr.length !== 20) throw new Reject(`address must be 20 bytes, got ${addr.length}`);
  const sl = list(a, 'storage changes');
  const storageChanges: AccountChanges['storageChanges'] = [];
  while (sl.pos < sl.end) {
    const s = list(sl, 'slot changes');
    const key = slot(s, 'slot');
    storageChanges.push({ slot: key, changes: changes(s, 'storage change', (e) => scalar(e, 'new value', 32)) });
    done(s, 'slot changes');
  }
  const rl = list(a, 'storage reads');
  const storageReads: string[] = [];
  while (rl.pos < rl.end) storageReads.push(slot(rl, 'storage read'));
  const balanceChanges = changes(a, 'balance change', (e) => scalar(e, 'post balance', 32));
  const nonceChanges = changes(a, 'nonce change', (e) => scalar(e, 'new nonce', 8));
  const codeChanges = changes(a, 'code change', (e) => '0x' + bytes(e, 'new code').toString('hex'));
  done(a, 'account changes');
  return { address: '0x' + addr.toString('hex'), storageChanges, storageReads, balanceChanges, nonceChanges, codeChanges };
}

/** Decodes an RLP-encoded EIP-7928 block access list (0x-hex or bytes) that must span the input exactly. */
export function decodeAccessList(input: string | Buffer): DecodeAccessListResult {
  const b = typeof input === 'string' ? Buffer.from(input.startsWith('0x') ? input.slice(2) : input, 'hex') : input;
  try {
    const all = new Items(b, 0, b.length);
    const top = list(all, 'block access list');
    if (all.pos !== b.length) throw new Reject(`trailing bytes after the list at byte ${all.pos}`);
    const accounts: AccountChanges[] = [];
    while (top.pos < top.end) accounts.push(account(top));
    return { ok: true, accounts };
  } catch (e) {
    if (e instanceof Reject) return { ok: false, reason: e.message };
    return { ok: false, reason: `internal decoder error: ${(e as Error).message}` };
  }
}

/** The change with the highest block access index (the value after the last write), or undefined. */
function last<T>(cs: readonly IndexedChange<T>[]): T | undefined {
  let best: IndexedChange<T> | undefined;
  for (const c of cs) if (best === undefined || c.index >= best.index) best = c;
  return best?.value;
}

/**
 * Folds `accounts` into `into` (address → post-values): each field takes the value of its last write; a later call
 * (a later flashblock's list) overrides what it lists and keeps the rest.
 */
export function applyAccessList(into: Map<string, AccountPost>, accounts: readonly AccountChanges[]): void {
  for (const a of accounts) {
    let p = into.get(a.address);
    if (p === undefined) into.set(a.address, (p = { balance: undefined, nonce: undefined, code: undefined, storage: new Map() }));
    const bal = last(a.balanceChanges);
    if (bal !== undefined) p.balance = bal;
    const nonce = last(a.nonceChanges);
    if (nonce !== undefined) p.nonce = nonce;
    const code = last(a.codeChanges);
    if (code !== undefined) p.code = code;
    for (const s of a.storageChanges) {
      const v = last(s.changes);
      if (v !== undefined) p.storage.set(s.slot, v);
    }
  }
}

/** Values read elsewhere (the execution engine) for the fields an access list gives. */
export interface AccountReads {
  balance?: bigint;
  nonce?: bigint;
  code?: string;
  storage?: ReadonlyMap<string, bigint>;
}

/**
 * The fields where `post` (the stream's access lists) and `read` (execution) disagree, for counting as a divergence:
 * only fields both give are compared. The hook for the execution cross-check; [] when they agree.
 */
export function postDiffers(post: Readonly<AccountPost>, read: AccountReads): string[] {
  const out: string[] = [];
  if (post.balance !== undefined && read.balance !== undefined && post.balance !== read.balance) out.push('balance');
  if (post.nonce !== undefined && read.nonce !== undefined && post.nonce !== read.nonce) out.push('nonce');
  if (post.code !== undefined && read.code !== undefined && post.code !== read.code.toLowerCase()) out.push('code');
  if (read.storage !== undefined) {
    for (const [k, v] of post.storage) {
      const r = read.storage.get(k);
      if (r !== undefined && r !== v) out.push('storage ' + k);
    }
  }
  return out;
}
