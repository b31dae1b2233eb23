// A block's header rebuilt from its execution: the payload attributes a node or builder gives (env, extra data, the
// transactions), what executing them yields (receipts root, logs bloom, gas used, the post-state root) — and its hash.
// Pure. Ecotone and later (the header carries parentBeaconBlockRoot and the blob fields).
import { headerRlp, requestsHashFor, type HeaderFields } from './header.js';
import { hexToBytes } from './hex.js';
import { keccak256Hex } from './keccak.js';
import { EMPTY_TRIE_ROOT, orderedTrieRoot } from './trie.js';

/** L2ToL1MessagePasser: since Isthmus an OP header's withdrawals root is this contract's storage root. */
export const L2_TO_L1_MESSAGE_PASSER = '0x4200000000000000000000000000000000000016';

/** What rebuilding a header takes (hex lower-case, 0x-prefixed). */
export interface ExecutedHeaderInput {
  parentHash: string;
  feeRecipient: string;
  number: number;
  gasLimit: bigint;
  timestamp: number;
  extraData: string;
  prevRandao: string;
  baseFeePerGas: bigint;
  /** Null before Ecotone: such a header is not rebuilt here. */
  parentBeaconBlockRoot: string | null;
  /** The block's transactions, EIP-2718 bytes in order. */
  transactions: readonly string[];
  receiptsRoot: string;
  logsBloom: string;
  gasUsed: bigint;
  stateRoot: string;
  /** The empty trie's root before Isthmus; L2ToL1MessagePasser's storage root since. */
  withdrawalsRoot?: string;
  /** 0 before Jovian (which puts the block's DA footprint here). */
  blobGasUsed?: bigint;
}

/** The header fields of the block as executed; throws for a header shape this does not rebuild (pre-Ecotone). */
export function buildHeader(b: ExecutedHeaderInput): HeaderFields {
  if (b.parentBeaconBlockRoot === null) throw new Error(`block ${b.number} has no parentBeaconBlockRoot: headers before Ecotone are not rebuilt`);
  const withdrawalsRoot = b.withdrawalsRoot ?? EMPTY_TRIE_ROOT;
  return {
    parentHash: b.parentHash.toLowerCase(),
    feeRecipient: b.feeRecipient.toLowerCase(),
    stateRoot: b.stateRoot,
    transactionsRoot: orderedTrieRoot(b.transactions.map((t) => hexToBytes(t))),
    receiptsRoot: b.receiptsRoot,
    logsBloom: b.logsBloom,
    number: b.number,
    gasLimit: b.gasLimit,
    gasUsed: b.gasUsed,
    timestamp: b.timestamp,
    extraData: b.extraData.toLowerCase(),
    prevRandao: b.prevRandao.toLowerCase(),
    baseFeePerGas: b.baseFeePerGas,
    withdrawalsRoot,
    blobGasUsed: b.blobGasUsed ?? 0n,
    parentBeaconBlockRoot: b.parentBeaconBlockRoot.toLowerCase(),
    requestsHash: requestsHashFor(withdrawalsRoot),
  };
}

/** keccak256 of the header's RLP: the block hash. */
export function blockHashOf(h: HeaderFields): string {
  return keccak256Hex(headerRlp(h));
}
