// Builds a realistic flashblock for benchmarks: ~200 signed EIP-1559 transactions with calldata, receipts with
// logs, ~400 balances — about 150 KB of JSON, shaped like a busy Base flashblock. Deterministic keys; cached.
import { privateKeyToAccount } from 'viem/accounts';
import { keccak256, type Hex } from 'viem';

export interface GeneratedFlashblock {
  /** Message objects: index 0 (with base) and following indexes of the same block. */
  messages: Record<string, unknown>[];
  /** Hashes of all transactions, in order. */
  txHashes: string[];
}

const pad = (n: number | bigint, bytes: number): string => n.toString(16).padStart(bytes * 2, '0');

/**
 * Generates `flashblocks` messages of `txsPerFlashblock` signed transactions each for block `blockNumber`.
 * Signing uses viem; this is set-up cost, not measured.
 */
export async function generateFlashblocks(opts: { blockNumber: number; flashblocks: number; txsPerFlashblock: number; calldataBytes?: number }): Promise<GeneratedFlashblock> {
  const messages: Record<string, unknown>[] = [];
  const txHashes: string[] = [];
  let cumulative = 0n;
  const balances: Record<string, string> = {};
  for (let f = 0; f < opts.flashblocks; f++) {
    const transactions: string[] = [];
    const receipts: Record<string, unknown> = {};
    for (let i = 0; i < opts.txsPerFlashblock; i++) {
      const k = f * opts.txsPerFlashblock + i;
      const account = privateKeyToAccount(('0x' + pad(BigInt(k) + 1n, 32)) as Hex);
      const to = ('0x' + pad(0xc0ffee0000n + BigInt(k % 50), 20)) as Hex;
      const data = ('0xa9059cbb' + pad(BigInt(k) * 7919n, 32) + pad(BigInt(k) * 1000003n, 32) + 'ab'.repeat(Math.max(0, (opts.calldataBytes ?? 300) - 68))) as Hex;
      const raw = await account.signTransaction({ type: 'eip1559', chainId: 8453, nonce: k % 17, to, data, gas: 120_000n, maxFeePerGas: 2_000_000n, maxPriorityFeePerGas: 1_000n, value: 0n });
      const hash = keccak256(raw);
      transactions.push(raw);
      txHashes.push(hash);
      cumulative += 45_000n + BigInt(k % 1000);
      receipts[hash] = {
        Eip1559: {
          status: '0x1',
          cumulativeGasUsed: '0x' + cumulative.toString(16),
          logs: [
            {
              address: to,
              topics: ['0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef', '0x' + pad(BigInt(account.address), 32), '0x' + pad(BigInt(to), 32)],
              data: '0x' + pad(BigInt(k) * 1000003n, 32),
            },
          ],
        },
      };
      balances[account.address.toLowerCase()] = '0x' + (10n ** 18n - BigInt(k) * 1000n).toString(16);
      balances[to.toLowerCase()] = '0x' + (BigInt(k) * 12345n).toString(16);
    }
    const msg: Record<string, unknown> = {
      payload_id: '0x' + pad(opts.blockNumber, 8),
      index: f,
      diff: {
        state_root: '0x' + pad(BigInt(f) + 1n, 32),
        receipts_root: '0x' + pad(BigInt(f) + 2n, 32),
        logs_bloom: '0x' + '00'.repeat(256),
        gas_used: '0x' + cumulative.toString(16),
        block_hash: '0x' + pad(BigInt(opts.blockNumber) * 100n + BigInt(f), 32),
        transactions,
        withdrawals: [],
        withdrawals_root: '0x' + pad(9n, 32),
        blob_gas_used: '0x0',
      },
      metadata: { block_number: opts.blockNumber, new_account_balances: { ...balances }, receipts },
    };
    if (f === 0) {
      msg.base = {
        parent_beacon_block_root: '0x' + pad(1n, 32),
        parent_hash: '0x' + pad(2n, 32),
        fee_recipient: '0x4200000000000000000000000000000000000011',
        prev_randao: '0x' + pad(3n, 32),
        block_number: '0x' + opts.blockNumber.toString(16),
        gas_limit: '0x8f0d180',
        timestamp: '0x690be89e',
        extra_data: '0x00000000320000000c',
        base_fee_per_gas: '0x33',
      };
    }
    messages.push(msg);
  }
  return { messages, txHashes };
}
