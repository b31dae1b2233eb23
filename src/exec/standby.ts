// A standby anvil forked at the node's newest canonical block C, brought to exactly the engine's held pending blocks
// (> C) in the background, so the engine can swap it in: BLOCKHASH(k ≤ C) inside pending blocks then comes from the
// node, not from blocks the engine mined itself. Owns the standby process until the engine adopts it; knows nothing
// of the apply queue, verification or reads.
import { toQuantity } from '../chain/hex.js';
import type { BlockEnv } from './engine.js';
import { receiptFromRpc, type ExecutedReceipt } from './receipts.js';
import type { Sidecar } from './sidecar.js';

/** A held pending block as the standby replays it (the engine's HeldBlock satisfies it; identity matters). */
export interface ReplayInput {
  readonly number: number;
  readonly env: BlockEnv;
  readonly raws: readonly string[];
  readonly broken: boolean;
}

/** One block the standby has mined: which input (object and tx count), its pre-block snapshot, its receipts. */
export interface Replayed {
  block: ReplayInput;
  count: number;
  /** evm_snapshot id on the standby taken right before this block was mined (the state at its parent). */
  snap: string;
  receipts: ExecutedReceipt[];
}

/** Env pins, txs and evm_mine after `prefix`, as one pipelined write (the shape every mine of the engine has). */
export function mineCalls(prefix: readonly [string, unknown[]][], env: BlockEnv, raws: readonly string[]): [string, unknown[]][] {
  const calls: [string, unknown[]][] = [
    ...prefix,
    ['anvil_setNextBlockBaseFeePerGas', [toQuantity(env.baseFeePerGas)]],
    ['anvil_setCoinbase', [env.feeRecipient]],
    ['evm_setBlockGasLimit', [toQuantity(env.gasLimit)]],
  ];
  for (const r of raws) calls.push(['eth_sendRawTransaction', [r]]);
  calls.push(['evm_mine', [env.timestamp]]);
  return calls;
}

/** A forked process being brought to the engine's held blocks. */
export class Standby {
  /** Blocks mined on the standby, at heights fork + 1, fork + 2, … */
  readonly done: Replayed[] = [];

  /**
   * @param warm addresses read through the fork before the first snapshot: evm_revert restores the fork cache of
   *   the snapshot, so accounts cached before it are not fetched from the node again on every rebuild.
   */
  constructor(
    readonly side: Sidecar,
    private warm: readonly string[],
  ) {}

  get fork(): number {
    return this.side.forkBlock;
  }

  /** True when the standby holds exactly `held` (ascending, all > fork), every tx of each. */
  matches(held: readonly ReplayInput[]): boolean {
    return this.firstDifference(held) === held.length && held.length === this.done.length;
  }

  private firstDifference(held: readonly ReplayInput[]): number {
    let k = 0;
    while (k < this.done.length && k < held.length && this.done[k]!.block === held[k] && this.done[k]!.count === held[k]!.raws.length) k++;
    return k;
  }

  /**
   * Brings the standby to `held`: from the first block that differs, goes back to the snapshot before it and mines
   * the rest, one anvil block per pending block at its own height. Throws when a block cannot be replayed.
   */
  async sync(held: readonly ReplayInput[]): Promise<void> {
    const k = this.firstDifference(held);
    if (k === held.length && k === this.done.length) return;
    let prefix: [string, unknown[]][] = [];
    if (k < this.done.length) prefix.push(['evm_revert', [this.done[k]!.snap]]);
    else if (this.done.length === 0 && this.warm.length > 0) {
      for (const a of this.warm) prefix.push(['eth_getBalance', [a, 'latest']]);
      this.warm = [];
    }
    this.done.length = k;
    for (let i = k; i < held.length; i++) {
      const b = held[i]!;
      const height = this.fork + 1 + i;
      if (b.number !== height) throw new Error(`standby: held block ${b.number} is not at height ${height}`);
      if (b.broken) throw new Error(`standby: held block ${b.number} is broken`);
      const count = b.raws.length;
      const calls = mineCalls([...prefix, ['evm_snapshot', []]], b.env, b.raws.slice(0, count));
      const snapAt = prefix.length;
      prefix = [];
      const res = await this.side.ctl.callMany(calls);
      if (snapAt > 0 && calls[0]![0] === 'evm_revert' && !(res[0]?.status === 'fulfilled' && res[0].value === true)) {
        throw new Error(`standby: evm_revert refused`);
      }
      const bad = res.findIndex((r, j) => r.status === 'rejected' && calls[j]![0] !== 'eth_getBalance');
      if (bad >= 0) throw new Error(`standby: replay of block ${b.number}: ${calls[bad]![0]}: ${((res[bad] as PromiseRejectedResult).reason as Error).message}`);
      const snap = String((res[snapAt] as PromiseFulfilledResult<unknown>).value);
      const rs = (await this.side.ctl.call<Record<string, unknown>[]>('eth_getBlockReceipts', [toQuantity(height)])) ?? [];
      if (rs.length !== count) throw new Error(`standby: block ${b.number} holds ${rs.length} of ${count} txs`);
      this.done.push({ block: b, count, snap, receipts: rs.map(receiptFromRpc) });
    }
  }
}
