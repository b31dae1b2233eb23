// Test helper: the execution engine's answers for the Unichain Sepolia capture (block 35535698), read from the
// capture's metadata as ExecutedReceipt values. The captured chain's state is not here to execute, so this stands in
// for anvil's receipts; readyFor is the test's to answer (at once, or when it says a flashblock was executed).
import { keccak256 } from 'viem';
import type { ExecutedReceipt } from '../../src/exec/receipts.js';
import type { ExecutionReads, PendingExecution } from '../../src/rpc/execution.js';
import { unichainMessages } from './fixtures.js';

const TYPES: Record<string, number> = { Legacy: 0, Eip2930: 1, Eip1559: 2, Eip7702: 4, Deposit: 0x7e };

/** The capture's receipts in block order, as the engine reports them (a deposit's nonce after execution). */
export function captureReceipts(): ExecutedReceipt[] {
  const out: ExecutedReceipt[] = [];
  let prev = 0n;
  for (const m of unichainMessages()) {
    const meta = (m.metadata as { receipts: Record<string, Record<string, Record<string, any>>> }).receipts;
    for (const raw of (m.diff as { transactions: string[] }).transactions) {
      const hash = keccak256(raw as `0x${string}`);
      const [tag, r] = Object.entries(meta[hash]!)[0]!;
      const cum = BigInt(r.cumulativeGasUsed);
      out.push({
        transactionHash: hash, type: TYPES[tag]!, status: r.status === '0x1', cumulativeGasUsed: cum, gasUsed: cum - prev, logs: r.logs,
        depositNonce: r.depositNonce === undefined ? null : BigInt(r.depositNonce) + 1n,
        depositReceiptVersion: r.depositReceiptVersion === undefined ? null : BigInt(r.depositReceiptVersion),
        contractAddress: null, effectiveGasPrice: 0n, from: '0x' + '00'.repeat(20), to: null,
      });
      prev = cum;
    }
  }
  return out;
}

/** What an engine that learned op-geth's convention (the capture's chain) answers: the nonce before the deposit. */
export function opGethDepositNonce(r: ExecutedReceipt): bigint | null {
  return r.depositNonce === null || r.depositNonce === 0n ? r.depositNonce : r.depositNonce - 1n;
}

/** A PendingExecution over the capture's receipts; `readyFor` defaults to "executed already". */
export function captureExecution(readyFor: PendingExecution['readyFor'] = () => true): PendingExecution {
  const receipts = captureReceipts();
  const byHash = new Map(receipts.map((r) => [r.transactionHash, r]));
  const engine = {
    receipt: (h: string) => byHash.get(h) ?? null,
    blockReceipts: (n: number) => (n === 35535698 ? receipts : null),
    chainDepositNonce: opGethDepositNonce,
  } as unknown as ExecutionReads;
  return { readyFor, engine, receiptsVerified: () => true, onExecuted: () => () => {} };
}
