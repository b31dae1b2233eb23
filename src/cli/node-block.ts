// A canonical block as a node serves it, for `flashblocksd check-execution`: its header (the execution env and the
// fields to compare), its transactions as EIP-2718 bytes checked against their hashes, and its receipts. Reads only;
// a node problem is a NodeBlockError with what to look at.
import { bigIntToBytes, hexToBytes } from '../chain/hex.js';
import { keccak256Hex } from '../chain/keccak.js';
import { encodeRlp } from '../chain/rlp.js';
import { TX_DEPOSIT } from '../chain/types.js';
import type { BlockEnv } from '../exec/engine.js';
import { receiptFromRpc, type ExecutedReceipt } from '../exec/receipts.js';
import type { NodeClient } from '../node/client.js';
import { TrieNodeUnavailable, type TrieNodeSource } from '../chain/state-root.js';

/** Raw transactions asked for in one JSON-RPC batch. */
const BATCH_CALLS = 200;

/** The node lacks something the check needs, or answered it wrongly. */
export class NodeBlockError extends Error {}

/** A block as the node's header gives it; the fields a witness of only the block hash lacks are null. */
export interface NodeBlock {
  number: number;
  hash: string;
  env: BlockEnv;
  receiptsRoot: string | null;
  gasUsed: bigint | null;
  logsBloom: string | null;
  stateRoot: string | null;
  extraData: string | null;
  /** Jovian puts the block's DA footprint here; null when the node leaves it out. */
  blobGasUsed: bigint | null;
  /** The transactions as the node lists them (full objects), in block order. */
  txs: Record<string, unknown>[];
  txHashes: string[];
}

const hex = (n: number | bigint): string => '0x' + n.toString(16);

function need<T>(v: T | undefined | null, n: number, field: string): T {
  if (v === undefined || v === null) throw new NodeBlockError(`the node's block ${n} has no ${field}`);
  return v;
}

/** The node's block `n`: its header and transaction objects. */
export async function readBlock(node: NodeClient, n: number): Promise<NodeBlock> {
  let b: Record<string, unknown> | null;
  try {
    b = await node.call<Record<string, unknown> | null>('eth_getBlockByNumber', [hex(n), true]);
  } catch (e) {
    throw new NodeBlockError(`eth_getBlockByNumber ${n}: ${(e as Error).message}`);
  }
  if (b === null || typeof b !== 'object') throw new NodeBlockError(`the node has no block ${n}`);
  const str = (k: string): string | null => (typeof b[k] === 'string' ? (b[k] as string).toLowerCase() : null);
  const txs = (Array.isArray(b.transactions) ? b.transactions : []) as unknown[];
  if (txs.some((x) => x === null || typeof x !== 'object')) throw new NodeBlockError(`the node's block ${n} lists its transactions without their objects (asked with full transactions)`);
  const objects = txs as Record<string, unknown>[];
  return {
    number: n,
    hash: need(str('hash'), n, 'hash'),
    env: {
      number: n,
      timestamp: Number(need(str('timestamp'), n, 'timestamp')),
      baseFeePerGas: BigInt(need(str('baseFeePerGas'), n, 'baseFeePerGas')),
      feeRecipient: need(str('miner'), n, 'miner'),
      gasLimit: BigInt(need(str('gasLimit'), n, 'gasLimit')),
      prevRandao: need(str('mixHash'), n, 'mixHash'),
      parentHash: need(str('parentHash'), n, 'parentHash'),
      parentBeaconBlockRoot: str('parentBeaconBlockRoot'),
    },
    receiptsRoot: str('receiptsRoot'),
    gasUsed: str('gasUsed') === null ? null : BigInt(str('gasUsed')!),
    logsBloom: str('logsBloom'),
    stateRoot: str('stateRoot'),
    extraData: str('extraData'),
    blobGasUsed: str('blobGasUsed') === null ? null : BigInt(str('blobGasUsed')!),
    txs: objects,
    txHashes: objects.map((x) => String(x.hash).toLowerCase()),
  };
}

/** A deposit's EIP-2718 bytes from its object (sourceHash, from, to, mint, value, gas, isSystemTx, input). */
function encodeDeposit(tx: Record<string, unknown>, isSystemTx: boolean): string {
  const q = (k: string): Buffer => bigIntToBytes(BigInt(typeof tx[k] === 'string' ? (tx[k] as string) : '0x0'));
  const body = encodeRlp([
    hexToBytes(String(tx.sourceHash)), hexToBytes(String(tx.from)), tx.to == null ? Buffer.alloc(0) : hexToBytes(String(tx.to)),
    q('mint'), q('value'), q('gas'), isSystemTx ? Buffer.from([1]) : Buffer.alloc(0), hexToBytes(String(tx.input ?? '0x')),
  ]);
  return '0x7e' + body.toString('hex');
}

/** Answers of a JSON-RPC batch, in call order (an error or a missing answer is null); null when batches are refused. */
async function batch(node: NodeClient, calls: [string, unknown[]][]): Promise<unknown[] | null> {
  const body = JSON.stringify(calls.map(([method, params], id) => ({ jsonrpc: '2.0', id, method, params })));
  const answer = JSON.parse((await node.postRaw(body, undefined, true)).toString('utf8')) as unknown;
  if (!Array.isArray(answer)) return null;
  const out: unknown[] = calls.map(() => null);
  for (const a of answer as { id?: unknown; result?: unknown }[]) if (typeof a?.id === 'number' && a.id < out.length) out[a.id] = a.result ?? null;
  return out;
}

/**
 * The block's transactions as EIP-2718 bytes (0x-hex), each checked against its hash. Deposits are encoded from their
 * objects (anvil 1.7.1 exits on eth_getRawTransactionBy* for a deposit); the rest are the node's raw bytes.
 */
export async function readRawTxs(node: NodeClient, b: NodeBlock): Promise<string[]> {
  const out: (string | null)[] = b.txs.map((tx) => {
    if (Number(tx.type) !== TX_DEPOSIT) return null;
    const plain = encodeDeposit(tx, tx.isSystemTx === true);
    // A node that leaves isSystemTx out (anvil): the hash says which it was.
    return keccak256Hex(hexToBytes(plain)) === String(tx.hash).toLowerCase() || tx.isSystemTx !== undefined ? plain : encodeDeposit(tx, true);
  });
  const wanted = out.flatMap((raw, i) => (raw === null ? [i] : []));
  for (let k = 0; k < wanted.length; k += BATCH_CALLS) {
    const idx = wanted.slice(k, k + BATCH_CALLS);
    const answers = (await batch(node, idx.map((i): [string, unknown[]] => ['eth_getRawTransactionByBlockNumberAndIndex', [hex(b.number), hex(i)]])).catch(() => null)) ?? [];
    idx.forEach((i, j) => (out[i] = typeof answers[j] === 'string' ? (answers[j] as string) : null));
  }
  return Promise.all(
    out.map(async (raw, i) => {
      const hash = b.txHashes[i]!;
      let tx: unknown = raw;
      if (tx === null) tx = await node.call<string | null>('eth_getRawTransactionByHash', [hash]).catch(() => null);
      if (typeof tx !== 'string' || !/^0x[0-9a-fA-F]+$/.test(tx)) throw new NodeBlockError(`the node serves no raw bytes of transaction ${i} (${hash}) of block ${b.number}`);
      if (keccak256Hex(hexToBytes(tx)) !== hash) throw new NodeBlockError(`transaction ${i} of block ${b.number} as the node serves it does not hash to ${hash}`);
      return tx.toLowerCase();
    }),
  );
}

/** The node's receipts of block `b`: eth_getBlockReceipts, else eth_getTransactionReceipt per transaction; else why not. */
export async function readReceipts(node: NodeClient, b: NodeBlock): Promise<ExecutedReceipt[] | string> {
  let whyNot: string;
  try {
    const rs = await node.call<Record<string, unknown>[] | null>('eth_getBlockReceipts', [hex(b.number)]);
    if (Array.isArray(rs)) return rs.map(receiptFromRpc);
    whyNot = 'eth_getBlockReceipts answered null';
  } catch (e) {
    whyNot = `eth_getBlockReceipts: ${(e as Error).message}`;
  }
  try {
    const rs = await Promise.all(b.txHashes.map((h) => node.call<Record<string, unknown> | null>('eth_getTransactionReceipt', [h])));
    if (rs.every((r) => r !== null)) return rs.map((r) => receiptFromRpc(r!));
    return `${whyNot}; eth_getTransactionReceipt answered null`;
  } catch (e) {
    return `${whyNot}; eth_getTransactionReceipt: ${(e as Error).message}`;
  }
}

/**
 * The node's trie nodes by hash through geth's debug_dbGet (the raw database value of a key), each checked to hash to
 * its key. A node without the method, or without the key, fails with TrieNodeUnavailable naming the hash.
 */
export function trieNodesOf(node: NodeClient): TrieNodeSource {
  return async (hash) => {
    let v: unknown;
    try {
      v = await node.call<unknown>('debug_dbGet', [hash]);
    } catch (e) {
      throw new TrieNodeUnavailable(`debug_dbGet ${hash}: ${(e as Error).message}`, { cause: e });
    }
    if (v === null) return null;
    if (typeof v !== 'string' || !/^0x[0-9a-fA-F]*$/.test(v) || v.length % 2 !== 0) throw new TrieNodeUnavailable(`debug_dbGet ${hash} answered something other than 0x-hex bytes`);
    const bytes = hexToBytes(v);
    if (keccak256Hex(bytes) !== hash) throw new TrieNodeUnavailable(`debug_dbGet ${hash} answered bytes that hash to ${keccak256Hex(bytes)}`);
    return bytes;
  };
}
