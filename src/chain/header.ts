// An OP-stack block header from plain fields: its RLP (whose keccak is the block hash), and the block size (RLP of
// [header, txs, ommers, withdrawals]) from the raw transactions. Pure; knows nothing of flashblocks or pending state.
import { hexToBytes } from './hex.js';
import { encodeRlp } from './rlp.js';
import { EMPTY_TRIE_ROOT } from './trie.js';

/** keccak256(rlp([])): the ommers hash of every post-merge block. */
export const EMPTY_OMMERS_HASH = '0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347';
/** sha256 of nothing: the requestsHash of an OP block since Isthmus (no EL requests on L2). */
export const EMPTY_REQUESTS_HASH = '0xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/** Header fields, hex lower-case 0x-prefixed. `requestsHash` null = pre-Isthmus (the field is absent). */
export interface HeaderFields {
  parentHash: string;
  feeRecipient: string;
  stateRoot: string;
  transactionsRoot: string;
  receiptsRoot: string;
  logsBloom: string;
  number: number;
  gasLimit: bigint;
  gasUsed: bigint;
  timestamp: number;
  extraData: string;
  prevRandao: string;
  baseFeePerGas: bigint;
  withdrawalsRoot: string;
  blobGasUsed: bigint;
  parentBeaconBlockRoot: string;
  requestsHash: string | null;
}

/** The requestsHash an OP block carries: set since Isthmus, which also commits to a non-empty withdrawals root. */
export function requestsHashFor(withdrawalsRoot: string | null): string | null {
  return withdrawalsRoot !== null && withdrawalsRoot !== EMPTY_TRIE_ROOT ? EMPTY_REQUESTS_HASH : null;
}

function scalar(n: bigint): Buffer {
  if (n === 0n) return Buffer.alloc(0);
  let h = n.toString(16);
  if (h.length & 1) h = '0' + h;
  return Buffer.from(h, 'hex');
}

/** The RLP encoding of a post-merge header (difficulty 0, nonce 0, excessBlobGas 0, ommers empty). */
export function headerRlp(h: HeaderFields): Buffer {
  const fields: Buffer[] = [
    hexToBytes(h.parentHash),
    hexToBytes(EMPTY_OMMERS_HASH),
    hexToBytes(h.feeRecipient),
    hexToBytes(h.stateRoot),
    hexToBytes(h.transactionsRoot),
    hexToBytes(h.receiptsRoot),
    hexToBytes(h.logsBloom),
    scalar(0n),
    scalar(BigInt(h.number)),
    scalar(h.gasLimit),
    scalar(h.gasUsed),
    scalar(BigInt(h.timestamp)),
    hexToBytes(h.extraData),
    hexToBytes(h.prevRandao),
    Buffer.alloc(8),
    scalar(h.baseFeePerGas),
    hexToBytes(h.withdrawalsRoot),
    scalar(h.blobGasUsed),
    scalar(0n),
    hexToBytes(h.parentBeaconBlockRoot),
  ];
  if (h.requestsHash !== null) fields.push(hexToBytes(h.requestsHash));
  return encodeRlp(fields);
}

/** RLP length of a byte string of `n` bytes whose first byte is `first`. */
function rlpLengthOfString(n: number, first: number): number {
  if (n === 1 && first < 0x80) return 1;
  return n + lengthPrefix(n);
}

function lengthPrefix(n: number): number {
  if (n < 56) return 1;
  let l = 0;
  for (let x = n; x > 0; x = Math.floor(x / 256)) l++;
  return 1 + l;
}

/**
 * The size of a block (RLP of [header, txs, ommers, withdrawals]) whose header RLP is `headerBytes` long, holding the
 * first `count` transactions, each given by its byte length and first byte. OP blocks carry no ommers and no withdrawals.
 */
export function blockSize(headerBytes: number, count: number, lengthAt: (i: number) => number, firstByteAt: (i: number) => number): number {
  let txPayload = 0;
  for (let i = 0; i < count; i++) {
    // Without decoding: byte length and first byte (a typed tx is an RLP string in the body).
    const len = lengthAt(i);
    const first = firstByteAt(i);
    txPayload += first >= 0xc0 ? len : rlpLengthOfString(len, first);
  }
  const withdrawalsPayload = 0;
  const bodyPayload = headerBytes + (txPayload + lengthPrefix(txPayload)) + 1 + (withdrawalsPayload + 1);
  return bodyPayload + lengthPrefix(bodyPayload);
}
