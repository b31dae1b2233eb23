// The JSON-RPC methods of the witness node: chain id and head (the parent), blocks (the parent, the block, ancestors
// whose headers the store holds), the block's transactions, and state at the parent read from the witness tries.
// Answers from one loaded fixture; knows nothing of HTTP (server.ts). A key the witness lacks is an error, never a zero.
import { decodeTransaction } from '../../src/chain/tx.js';
import { recoverSender } from '../../src/chain/sender.js';
import { blockSize } from '../../src/chain/header.js';
import { bytesToHex, toQuantity } from '../../src/chain/hex.js';
import { TX_DEPOSIT, type DecodedTx } from '../../src/chain/types.js';
import { EMPTY_TRIE_ROOT } from '../../src/chain/trie.js';
import { toRpcTransaction } from '../../src/rpc/shapes/transaction.js';
import { decodeHeader, type WitnessHeader } from './header.js';
import type { WitnessFixture } from './fixture.js';
import { EMPTY_CODE_HASH, MissingWitness, WitnessTrie } from './trie.js';

/** A JSON-RPC error answer (EIP-1474 code). */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** What a state method was asked for (lower-case), for tests. */
export interface Touched {
  accounts: Set<string>;
  slots: Map<string, Set<string>>;
}

const INVALID_PARAMS = -32602;
/** Server error: the witness does not hold what the answer needs (or the state asked for is not the parent's). */
const NOT_IN_WITNESS = -32000;

function invalid(msg: string): never {
  throw new RpcError(INVALID_PARAMS, msg);
}

function address(v: unknown, what = 'address'): string {
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]{40}$/.test(v)) invalid(`${what} must be a 20-byte 0x-hex address, got ${JSON.stringify(v)}`);
  return v.toLowerCase();
}

function hash32(v: unknown, what: string): string {
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(v)) invalid(`${what} must be a 32-byte 0x-hex hash, got ${JSON.stringify(v)}`);
  return v.toLowerCase();
}

function quantity(v: unknown, what: string): number {
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]{1,16}$/.test(v)) invalid(`${what} must be a 0x-hex quantity, got ${JSON.stringify(v)}`);
  const n = Number.parseInt(v.slice(2), 16);
  if (!Number.isSafeInteger(n)) invalid(`${what} ${v} is too large`);
  return n;
}

/** A storage slot as 32 bytes (0x-hex of up to 32 bytes, left-padded), and its canonical 0x-64 form. */
function slot(v: unknown): { bytes: Buffer; key: string } {
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]{1,64}$/.test(v)) invalid(`storage slot must be 0x-hex of at most 32 bytes, got ${JSON.stringify(v)}`);
  const key = '0x' + v.slice(2).toLowerCase().padStart(64, '0');
  return { bytes: Buffer.from(key.slice(2), 'hex'), key };
}

function word(n: bigint): string {
  return '0x' + n.toString(16).padStart(64, '0');
}

/** One transaction of the block with its sender and position. */
interface BlockTx {
  tx: DecodedTx;
  index: number;
}

/** The methods over one fixture; `call` answers one request's method and params, or throws RpcError. */
export class WitnessMethods {
  readonly touched: Touched = { accounts: new Set(), slots: new Map() };
  private readonly trie: WitnessTrie;
  private readonly txs: BlockTx[];
  private readonly byHash = new Map<string, BlockTx>();
  private readonly blockHash: string | null;
  /** Headers below the parent, by number, as walked from the parent through the store. */
  private readonly ancestors = new Map<number, WitnessHeader>();
  private depositNonces: Map<number, bigint | null> | null = null;
  private readonly table: Record<string, (p: unknown[]) => unknown>;

  constructor(readonly fx: WitnessFixture) {
    this.trie = new WitnessTrie(fx.preimages);
    this.blockHash = fx.header?.hash ?? fx.expectedBlockHash;
    this.txs = fx.block.transactions.map((raw, index) => {
      const d = decodeTransaction(raw);
      if (!d.ok) throw new Error(`${fx.name}: transaction ${index} does not decode: ${d.reason}`);
      if (recoverSender(d.tx) === null) throw new Error(`${fx.name}: transaction ${index} (${d.tx.hash}): the sender does not recover`);
      return { tx: d.tx, index };
    });
    for (const t of this.txs) this.byHash.set(t.tx.hash, t);
    this.table = {
      eth_chainId: () => toQuantity(fx.chainId),
      net_version: () => String(fx.chainId),
      web3_clientVersion: () => `flashblocksd-witness-node/${fx.name}`,
      eth_blockNumber: () => toQuantity(fx.parent.number),
      eth_getBlockByNumber: (p) => this.blockJson(this.blockAtTag(p[0]), p[1] === true),
      eth_getBlockByHash: (p) => this.blockJson(this.blockAtHash(hash32(p[0], 'block hash')), p[1] === true),
      eth_getBlockTransactionCountByNumber: (p) => this.countOf(this.blockAtTag(p[0])),
      eth_getBlockTransactionCountByHash: (p) => this.countOf(this.blockAtHash(hash32(p[0], 'block hash'))),
      eth_getTransactionByHash: (p) => this.txJson(this.byHash.get(hash32(p[0], 'transaction hash')) ?? null),
      eth_getRawTransactionByHash: (p) => this.byHash.get(hash32(p[0], 'transaction hash'))?.tx.raw ?? null,
      eth_getTransactionByBlockNumberAndIndex: (p) => this.txJson(this.txAt(this.blockAtTag(p[0]), p[1])),
      eth_getTransactionByBlockHashAndIndex: (p) => this.txJson(this.txAt(this.blockAtHash(hash32(p[0], 'block hash')), p[1])),
      eth_getRawTransactionByBlockNumberAndIndex: (p) => this.txAt(this.blockAtTag(p[0]), p[1])?.tx.raw ?? null,
      eth_getRawTransactionByBlockHashAndIndex: (p) => this.txAt(this.blockAtHash(hash32(p[0], 'block hash')), p[1])?.tx.raw ?? null,
      eth_getBalance: (p) => toQuantity(this.accountAt(p[0], p[1])?.balance ?? 0n),
      eth_getTransactionCount: (p) => toQuantity(this.accountAt(p[0], p[1])?.nonce ?? 0n),
      eth_getCode: (p) => this.codeAt(p[0], p[1]),
      eth_getStorageAt: (p) => this.storageAt(p[0], p[1], p[2]),
      eth_getProof: (p) => this.proof(p[0], p[1], p[2]),
      debug_dbGet: (p) => this.dbGet(p[0]),
    };
  }

  /** Answers `method` with `params`; RpcError for what the caller got wrong or the witness lacks. */
  call(method: string, params: unknown): unknown {
    const f = Object.hasOwn(this.table, method) ? this.table[method] : undefined;
    if (f === undefined) throw new RpcError(-32601, `the method ${method} does not exist on the witness node`);
    if (params !== undefined && !Array.isArray(params)) invalid('params must be an array');
    try {
      return f((params ?? []) as unknown[]);
    } catch (e) {
      if (e instanceof MissingWitness) throw new RpcError(NOT_IN_WITNESS, e.message);
      throw e;
    }
  }

  /** geth's debug_dbGet: the raw value of a database key; here any preimage the witness holds (a trie node, code, a header) by its hash. */
  private dbGet(key: unknown): string {
    const h = hash32(key, 'database key (a preimage hash)');
    const pre = this.fx.preimages.get(h);
    if (pre === undefined) throw new RpcError(NOT_IN_WITNESS, `key ${h} is not in the witness`);
    return bytesToHex(pre);
  }

  // ---- blocks ----------------------------------------------------------------------------------------------------

  /** The block a tag or number names: the parent (also "latest"), the block (N), an ancestor, or null past N. */
  private blockAtTag(tag: unknown): WitnessHeader | 'block' | null {
    const fx = this.fx;
    if (tag === 'latest') return fx.parent;
    if (tag === 'earliest' || tag === 'pending' || tag === 'safe' || tag === 'finalized') {
      throw new RpcError(NOT_IN_WITNESS, `block "${tag}" is not in the witness (its head is the parent, block ${fx.parent.number})`);
    }
    const n = quantity(tag, 'block number');
    if (n === fx.parent.number) return fx.parent;
    if (n === fx.block.number) return 'block';
    if (n > fx.block.number) return null;
    return this.ancestor(n);
  }

  private blockAtHash(h: string): WitnessHeader | 'block' {
    if (h === this.fx.parent.hash) return this.fx.parent;
    if (h === this.blockHash) return 'block';
    const pre = this.fx.preimages.get(h);
    if (pre !== undefined) {
      try {
        return decodeHeader(Buffer.from(pre), `block ${h}`);
      } catch {
        // a trie node or code, not a header
      }
    }
    throw new RpcError(NOT_IN_WITNESS, `block ${h} is not in the witness`);
  }

  /** Block `n` below the parent, walking parentHash through header preimages in the store. */
  private ancestor(n: number): WitnessHeader {
    let h = this.fx.parent;
    while (h.number > n) {
      const next = this.ancestors.get(h.number - 1);
      if (next !== undefined) {
        h = next;
        continue;
      }
      const pre = this.fx.preimages.get(h.parentHash);
      if (pre === undefined) throw new RpcError(NOT_IN_WITNESS, `block ${n} is not in the witness (the store has no header for block ${h.number - 1}, ${h.parentHash})`);
      h = decodeHeader(Buffer.from(pre), `block ${h.number - 1}`);
      this.ancestors.set(h.number, h);
    }
    return h;
  }

  private countOf(b: WitnessHeader | 'block' | null): string | null {
    if (b === null) return null;
    if (b !== 'block') throw new RpcError(NOT_IN_WITNESS, `the transactions of block ${b.number} are not in the witness`);
    return toQuantity(this.txs.length);
  }

  private blockJson(b: WitnessHeader | 'block' | null, fullTx: boolean): Record<string, unknown> | null {
    if (b === null) return null;
    // A header without its body: no transactions, no size (the body is not in the witness).
    if (b !== 'block') return { ...b.json, uncles: [] };
    const fx = this.fx;
    const txs = fullTx ? this.txs.map((t) => this.txJson(t)) : this.txs.map((t) => t.tx.hash);
    if (fx.header !== null) {
      const raw = this.txs.map((t) => Buffer.from(t.tx.raw.slice(2), 'hex'));
      const size = blockSize(fx.header.rlp.length, raw.length, (i) => (raw[i] as Buffer).length, (i) => (raw[i] as Buffer)[0] as number);
      return { ...fx.header.json, size: toQuantity(size), transactions: txs, uncles: [], withdrawals: [] };
    }
    // Only the hash is known: the header's commitments (state, receipts, transactions roots, bloom, gas used) are omitted.
    const k = fx.block;
    const out: Record<string, unknown> = {
      number: toQuantity(k.number),
      hash: this.blockHash,
      parentHash: fx.parent.hash,
      sha3Uncles: fx.parent.sha3Uncles,
      miner: k.feeRecipient,
      difficulty: '0x0',
      gasLimit: toQuantity(k.gasLimit),
      timestamp: toQuantity(k.timestamp),
      extraData: k.extraData,
      mixHash: k.prevRandao,
      nonce: '0x0000000000000000',
      baseFeePerGas: toQuantity(k.baseFeePerGas),
    };
    if (k.parentBeaconBlockRoot !== null) out.parentBeaconBlockRoot = k.parentBeaconBlockRoot;
    out.transactions = txs;
    out.uncles = [];
    out.withdrawals = [];
    return out;
  }

  // ---- transactions ----------------------------------------------------------------------------------------------

  private txAt(b: WitnessHeader | 'block' | null, index: unknown): BlockTx | null {
    const i = quantity(index, 'transaction index');
    if (b === null) return null;
    if (b !== 'block') throw new RpcError(NOT_IN_WITNESS, `the transactions of block ${b.number} are not in the witness`);
    return this.txs[i] ?? null;
  }

  private txJson(t: BlockTx | null): Record<string, unknown> | null {
    if (t === null) return null;
    const deposit = t.tx.type === TX_DEPOSIT;
    return toRpcTransaction(t.tx, {
      blockHash: this.blockHash,
      blockNumber: BigInt(this.fx.block.number),
      transactionIndex: t.index,
      baseFeePerGas: this.fx.block.baseFeePerGas,
      depositNonce: deposit ? this.depositNonce(t.index) : null,
      depositReceiptVersion: deposit && this.fx.fork !== 'bedrock' && this.fx.fork !== 'regolith' ? '0x1' : null,
    });
  }

  /**
   * A deposit's nonce (its receipt's depositNonce): the sender's nonce at the parent plus the block's earlier
   * transactions from it; null (the field omitted) when the witness lacks the sender's account.
   */
  private depositNonce(index: number): bigint | null {
    if (this.depositNonces === null) {
      this.depositNonces = new Map();
      const seen = new Map<string, bigint>();
      for (const t of this.txs) {
        const from = t.tx.from as string;
        let n = seen.get(from);
        if (n === undefined) {
          try {
            n = this.trie.account(this.fx.parent.stateRoot, from)?.nonce ?? 0n;
          } catch (e) {
            if (!(e instanceof MissingWitness)) throw e;
            n = -1n;
          }
        }
        if (t.tx.type === TX_DEPOSIT) this.depositNonces.set(t.index, n < 0n ? null : n);
        seen.set(from, n < 0n ? n : n + 1n);
      }
    }
    return this.depositNonces.get(index) ?? null;
  }

  // ---- state at the parent ---------------------------------------------------------------------------------------

  /** Checks a state tag names the parent: "latest", its number, or EIP-1898 {blockHash} / {blockNumber}. */
  private stateTag(tag: unknown): void {
    const p = this.fx.parent;
    if (tag === undefined || tag === 'latest') return;
    if (typeof tag === 'string' && /^0x[0-9a-fA-F]+$/.test(tag) && BigInt(tag) === BigInt(p.number)) return;
    if (typeof tag === 'object' && tag !== null) {
      const o = tag as Record<string, unknown>;
      if (typeof o.blockHash === 'string' && o.blockHash.toLowerCase() === p.hash) return;
      if (typeof o.blockNumber === 'string' && /^0x[0-9a-fA-F]+$/.test(o.blockNumber) && BigInt(o.blockNumber) === BigInt(p.number)) return;
    }
    throw new RpcError(NOT_IN_WITNESS, `state at ${JSON.stringify(tag)} is not in the witness (it holds the state at block ${p.number}, ${p.hash}: "latest")`);
  }

  private touch(addr: string): void {
    this.touched.accounts.add(addr);
  }

  private accountAt(a: unknown, tag: unknown) {
    const addr = address(a);
    this.stateTag(tag);
    this.touch(addr);
    return this.trie.account(this.fx.parent.stateRoot, addr);
  }

  private codeAt(a: unknown, tag: unknown): string {
    const acct = this.accountAt(a, tag);
    if (acct === null) return '0x';
    return bytesToHex(this.trie.code(acct.codeHash, `account ${address(a)}`));
  }

  private storageAt(a: unknown, s: unknown, tag: unknown): string {
    const addr = address(a);
    const k = slot(s);
    this.stateTag(tag);
    this.touch(addr);
    let set = this.touched.slots.get(addr);
    if (set === undefined) this.touched.slots.set(addr, (set = new Set()));
    set.add(k.key);
    const acct = this.trie.account(this.fx.parent.stateRoot, addr);
    if (acct === null) return word(0n);
    return word(this.trie.storage(acct.storageRoot, k.bytes, `storage ${k.key} of ${addr}`));
  }

  /** EIP-1186: the account's proof from the state root and each slot's from its storage root. */
  private proof(a: unknown, slotsParam: unknown, tag: unknown): Record<string, unknown> {
    const addr = address(a);
    if (!Array.isArray(slotsParam)) invalid('storage keys must be an array');
    const slots = slotsParam.map((s: unknown) => ({ given: s as string, ...slot(s) }));
    this.stateTag(tag);
    this.touch(addr);
    if (slots.length > 0) {
      let set = this.touched.slots.get(addr);
      if (set === undefined) this.touched.slots.set(addr, (set = new Set()));
      for (const s of slots) set.add(s.key);
    }
    const accountProof: string[] = [];
    const acct = this.trie.account(this.fx.parent.stateRoot, addr, accountProof);
    const storageHash = acct?.storageRoot ?? EMPTY_TRIE_ROOT;
    const storageProof = slots.map((s) => {
      const proof: string[] = [];
      const value = acct === null ? 0n : this.trie.storage(storageHash, s.bytes, `storage ${s.key} of ${addr}`, proof);
      return { key: s.given, value: toQuantity(value), proof };
    });
    return {
      address: addr,
      accountProof,
      balance: toQuantity(acct?.balance ?? 0n),
      codeHash: acct?.codeHash ?? EMPTY_CODE_HASH,
      nonce: toQuantity(acct?.nonce ?? 0n),
      storageHash,
      storageProof,
    };
  }
}
