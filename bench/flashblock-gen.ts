// Builds realistic flashblocks for benchmarks: signed EIP-1559 transactions with calldata, receipts with a Transfer
// log each, balances of senders and recipients — a 200-tx flashblock is ~150-200 KB of JSON, shaped like a busy Base
// flashblock. Signing uses the native secp256k1 binding (~0.1 ms per tx), so a minute of a Base-shaped stream
// (60,000 transactions) is generated in seconds. Deterministic: the same options give the same bytes.
import secp256k1 from 'secp256k1';
import { encodeRlp } from '../src/chain/rlp.js';
import { keccak256 } from '../src/chain/keccak.js';
import { bigIntToBytes } from '../src/chain/hex.js';

export interface GeneratedFlashblock {
  /** Message objects: index 0 (with base) and following indexes of the same block. */
  messages: Record<string, unknown>[];
  /** Hashes of all transactions, in order. */
  txHashes: string[];
}

/** One flashblock of a generated stream, with what a load generator needs to ask about it. */
export interface StreamFlashblock {
  message: Record<string, unknown>;
  blockNumber: number;
  index: number;
  /** diff.block_hash: what a newFlashblocks notification carries as `hash`. */
  blockHash: string;
  txHashes: string[];
  /** Sender address of each transaction (lower-case). */
  senders: string[];
}

const pad = (n: number | bigint, bytes: number): string => n.toString(16).padStart(bytes * 2, '0');
const TRANSFER_TOPIC = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';

export interface Signer {
  key: Buffer;
  address: string;
}
const signers = new Map<number, Signer>();

/** Deterministic signer number `k` (private key k + 1). */
export function signer(k: number): Signer {
  let s = signers.get(k);
  if (s === undefined) {
    const key = Buffer.from(pad(BigInt(k) + 1n, 32), 'hex');
    const pub = secp256k1.publicKeyCreate(key, false);
    s = { key, address: '0x' + keccak256(pub.subarray(1)).subarray(12).toString('hex') };
    signers.set(k, s);
  }
  return s;
}

const big = (n: bigint | number): Buffer => bigIntToBytes(BigInt(n));

/** A signed EIP-1559 transaction (raw 0x-hex) and its hash. */
export function signTx(from: Signer, nonce: number, to: string, data: Buffer): { raw: string; hash: string } {
  const fields = [big(8453), big(nonce), big(1_000), big(2_000_000), big(120_000), Buffer.from(to.slice(2), 'hex'), big(0), data, []];
  const unsigned = Buffer.concat([Buffer.from([2]), encodeRlp(fields)]);
  const sig = secp256k1.ecdsaSign(keccak256(unsigned), from.key);
  const r = Buffer.from(sig.signature.subarray(0, 32));
  const s = Buffer.from(sig.signature.subarray(32, 64));
  const raw = Buffer.concat([Buffer.from([2]), encodeRlp([...fields, big(sig.recid), big(BigInt('0x' + r.toString('hex'))), big(BigInt('0x' + s.toString('hex')))])]);
  return { raw: '0x' + raw.toString('hex'), hash: '0x' + keccak256(raw).toString('hex') };
}

export interface StreamOptions {
  firstBlock: number;
  blocks: number;
  /** Flashblocks per block (Base: 10 per 2 s block). */
  flashblocksPerBlock: number;
  /** Transactions in flashblock `i` of the stream (0-based over the whole stream). */
  txs: (i: number) => number;
  /** Calldata bytes per transaction (≥ 68; default 300). */
  calldataBytes?: number;
  /** Signer numbers start here; transactions of different streams/blocks never repeat. */
  firstSigner?: number;
}

/** Generates a stream of consecutive blocks of flashblocks; every transaction is distinct and validly signed. */
export function generateStream(opts: StreamOptions): StreamFlashblock[] {
  const out: StreamFlashblock[] = [];
  let k = opts.firstSigner ?? 0;
  let i = 0;
  for (let b = 0; b < opts.blocks; b++) {
    const blockNumber = opts.firstBlock + b;
    let cumulative = 0n;
    for (let f = 0; f < opts.flashblocksPerBlock; f++, i++) {
      const transactions: string[] = [];
      const txHashes: string[] = [];
      const senders: string[] = [];
      const receipts: Record<string, unknown> = {};
      const balances: Record<string, string> = {};
      const n = opts.txs(i);
      for (let t = 0; t < n; t++, k++) {
        const from = signer(k);
        const to = '0x' + pad(0xc0ffee0000n + BigInt(k % 50), 20);
        const data = Buffer.from('a9059cbb' + pad(BigInt(k) * 7919n, 32) + pad(BigInt(k) * 1000003n, 32) + 'ab'.repeat(Math.max(0, (opts.calldataBytes ?? 300) - 68)), 'hex');
        const { raw, hash } = signTx(from, k % 17, to, data);
        transactions.push(raw);
        txHashes.push(hash);
        senders.push(from.address);
        cumulative += 45_000n + BigInt(k % 1000);
        receipts[hash] = {
          Eip1559: {
            status: '0x1',
            cumulativeGasUsed: '0x' + cumulative.toString(16),
            logs: [{ address: to, topics: [TRANSFER_TOPIC, '0x' + pad(BigInt(from.address), 32), '0x' + pad(BigInt(to), 32)], data: '0x' + pad(BigInt(k) * 1000003n, 32) }],
          },
        };
        balances[from.address] = '0x' + (10n ** 18n - BigInt(k) * 1000n).toString(16);
        balances[to] = '0x' + (BigInt(k) * 12345n).toString(16);
      }
      const blockHash = '0x' + pad(BigInt(blockNumber) * 100n + BigInt(f), 32);
      const message: Record<string, unknown> = {
        payload_id: '0x' + pad(blockNumber, 8),
        index: f,
        diff: {
          state_root: '0x' + pad(BigInt(f) + 1n, 32),
          receipts_root: '0x' + pad(BigInt(f) + 2n, 32),
          logs_bloom: '0x' + '00'.repeat(256),
          gas_used: '0x' + cumulative.toString(16),
          block_hash: blockHash,
          transactions,
          withdrawals: [],
          withdrawals_root: '0x' + pad(9n, 32),
          blob_gas_used: '0x0',
        },
        metadata: { block_number: blockNumber, new_account_balances: balances, receipts },
      };
      if (f === 0) {
        message.base = {
          parent_beacon_block_root: '0x' + pad(1n, 32),
          parent_hash: '0x' + pad(BigInt(blockNumber) * 100n - 100n + BigInt(opts.flashblocksPerBlock - 1), 32),
          fee_recipient: '0x4200000000000000000000000000000000000011',
          prev_randao: '0x' + pad(3n, 32),
          block_number: '0x' + blockNumber.toString(16),
          gas_limit: '0x8f0d180',
          timestamp: '0x' + (0x690be89e + 2 * b).toString(16),
          extra_data: '0x00000000320000000c',
          base_fee_per_gas: '0x33',
        };
      }
      out.push({ message, blockNumber, index: f, blockHash, txHashes, senders });
    }
  }
  return out;
}

/**
 * Generates `flashblocks` messages of `txsPerFlashblock` signed transactions each for block `blockNumber`
 * (the ingest benchmark's single-block shape).
 */
export function generateFlashblocks(opts: { blockNumber: number; flashblocks: number; txsPerFlashblock: number; calldataBytes?: number }): GeneratedFlashblock {
  const fbs = generateStream({ firstBlock: opts.blockNumber, blocks: 1, flashblocksPerBlock: opts.flashblocks, txs: () => opts.txsPerFlashblock, calldataBytes: opts.calldataBytes });
  return { messages: fbs.map((f) => f.message), txHashes: fbs.flatMap((f) => f.txHashes) };
}
