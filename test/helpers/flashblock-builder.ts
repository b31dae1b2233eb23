// Test helper: flashblock messages that correspond to real anvil transactions. Mines anvil's pool inside a snapshot,
// records block, receipts and balances, reverts (so anvil has not mined them yet) and re-submits the raw txs.
// Small on purpose; a full devnet sequencer is a later issue.
import type { Anvil } from './rpc-harness.js';

interface RpcLog {
  address: string;
  topics: string[];
  data: string;
}
interface RpcReceipt {
  type: string;
  status: string;
  cumulativeGasUsed: string;
  logs: RpcLog[];
  transactionHash: string;
}
interface RpcBlock {
  number: string;
  hash: string;
  parentHash: string;
  parentBeaconBlockRoot?: string;
  miner: string;
  mixHash: string;
  gasLimit: string;
  gasUsed: string;
  timestamp: string;
  extraData: string;
  baseFeePerGas: string;
  stateRoot: string;
  receiptsRoot: string;
  logsBloom: string;
  withdrawalsRoot?: string;
  transactions: string[];
}

/** What anvil would mine next, captured and rolled back. */
export interface PreviewBlock {
  block: RpcBlock;
  raws: string[];
  receipts: RpcReceipt[];
  balances: Record<string, string>;
}

const TAGS: Record<string, string> = { '0x0': 'Legacy', '0x1': 'Eip2930', '0x2': 'Eip1559', '0x3': 'Eip4844', '0x4': 'Eip7702', '0x7e': 'Deposit' };
const ZERO32 = '0x' + '00'.repeat(32);

/**
 * Mines anvil's pool in a snapshot and reverts; the transactions are sent back to anvil's pool so a later
 * `evm_mine` includes them for real. `addresses` get their post-block balances recorded.
 */
export async function previewNextBlock(anvil: Anvil, addresses: string[]): Promise<PreviewBlock> {
  const snap = await anvil.rpc<string>('evm_snapshot');
  await anvil.rpc('evm_mine');
  const block = await anvil.rpc<RpcBlock>('eth_getBlockByNumber', ['latest', false]);
  const raws: string[] = [];
  const receipts: RpcReceipt[] = [];
  for (const h of block.transactions) {
    raws.push(await anvil.rpc<string>('eth_getRawTransactionByHash', [h]));
    receipts.push(await anvil.rpc<RpcReceipt>('eth_getTransactionReceipt', [h]));
  }
  const balances: Record<string, string> = {};
  for (const a of addresses) balances[a.toLowerCase()] = await anvil.rpc<string>('eth_getBalance', [a, block.number]);
  await anvil.rpc('evm_revert', [snap]);
  for (const raw of raws) {
    try {
      await anvil.rpc('eth_sendRawTransaction', [raw]);
    } catch {
      // still in the pool after the revert: fine
    }
  }
  return { block, raws, receipts, balances };
}

/**
 * The block as flashblock messages: index 0 carries the base and the first `firstCount` transactions, index 1 the
 * rest. The last flashblock's block_hash is the previewed block's hash; earlier ones get distinct synthetic hashes.
 */
export function flashblocksOf(p: PreviewBlock, firstCount = p.raws.length, payloadId = '0x0a0b0c0d0e0f0102'): Record<string, unknown>[] {
  const b = p.block;
  const cuts = firstCount >= p.raws.length ? [p.raws.length] : [firstCount, p.raws.length];
  const out: Record<string, unknown>[] = [];
  let from = 0;
  for (let index = 0; index < cuts.length; index++) {
    const to = cuts[index]!;
    const last = index === cuts.length - 1;
    const receipts: Record<string, unknown> = {};
    for (let i = from; i < to; i++) {
      const r = p.receipts[i]!;
      receipts[r.transactionHash] = { [TAGS[r.type] ?? 'Eip1559']: { status: r.status, cumulativeGasUsed: r.cumulativeGasUsed, logs: r.logs.map((l) => ({ address: l.address, topics: l.topics, data: l.data })) } };
    }
    const gasUsed = to === 0 ? '0x0' : p.receipts[to - 1]!.cumulativeGasUsed;
    out.push({
      payload_id: payloadId,
      index,
      base: index !== 0 ? null : {
        parent_beacon_block_root: b.parentBeaconBlockRoot ?? ZERO32,
        parent_hash: b.parentHash,
        fee_recipient: b.miner,
        prev_randao: b.mixHash,
        block_number: b.number,
        gas_limit: b.gasLimit,
        timestamp: b.timestamp,
        extra_data: b.extraData,
        base_fee_per_gas: b.baseFeePerGas,
      },
      diff: {
        state_root: b.stateRoot,
        receipts_root: b.receiptsRoot,
        logs_bloom: b.logsBloom,
        gas_used: gasUsed,
        block_hash: last ? b.hash : '0x' + 'fb'.repeat(31) + index.toString(16).padStart(2, '0'),
        transactions: p.raws.slice(from, to),
        withdrawals: [],
        withdrawals_root: b.withdrawalsRoot ?? null,
      },
      metadata: { block_number: Number.parseInt(b.number, 16), new_account_balances: last ? p.balances : {}, receipts },
    });
    from = to;
  }
  return out;
}
