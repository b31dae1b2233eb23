// A standby anvil forked at the node's newest canonical block C, brought to exactly the engine's held pending blocks
// (> C) in the background, so the engine can swap it in: BLOCKHASH(k ≤ C) inside pending blocks then comes from the
// node, not from blocks the engine mined itself. Owns the standby process until the engine adopts it; knows nothing
// of the apply queue, verification or reads.
import { hexToBytes, toQuantity } from '../chain/hex.js';
import { keccak256Hex } from '../chain/keccak.js';
import type { BlockEnv } from './engine.js';
import { receiptFromRpc, type ExecutedReceipt } from './receipts.js';
import { PipelinedRpc } from './pipe.js';
import type { Sidecar } from './sidecar.js';

/** Connections the warm-up reads are spread over. */
const WARM_CONNECTIONS = 4;

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
   * @param warm reads (eth_getBalance, eth_call of recent txs) run through the fork before the first snapshot:
   *   evm_revert restores the fork cache the snapshot holds, so accounts and slots cached before it are not fetched
   *   from the node again on every rebuild of the first block after the fork.
   */
  constructor(
    readonly side: Sidecar,
    private warm: readonly [string, unknown[]][],
  ) {}

  get fork(): number {
    return this.side.forkBlock;
  }

  /** Runs the warm-up reads (before anything is mined or snapshotted); their failures (a call reverting) are ignored. */
  async warmUp(): Promise<void> {
    const calls = this.warm;
    this.warm = [];
    if (calls.length === 0 || this.done.length > 0) return;
    // Spread over a few connections: anvil serves connections concurrently and most of the time is spent waiting on
    // the node's answers (one connection: ~140 ms for 200 reads at 20 tx/flashblock; /tmp scratch measurement).
    const extra = await Promise.all(
      Array.from({ length: WARM_CONNECTIONS - 1 }, () => PipelinedRpc.open('127.0.0.1', this.side.port, 5000, true).catch(() => null)),
    );
    const conns = [this.side.ctl, ...extra.filter((c): c is PipelinedRpc => c !== null)];
    try {
      await Promise.all(conns.map((c, i) => c.callMany(calls.filter((_, j) => j % conns.length === i))));
    } finally {
      for (const c of conns) if (c !== this.side.ctl) c.close();
    }
  }

  /** True when the standby holds exactly `held` (ascending, all > fork), every tx of each. */
  matches(held: readonly ReplayInput[]): boolean {
    return this.firstDifference(held) === held.length && held.length === this.done.length;
  }

  /** True when `held` differs from what the standby holds only in more txs of its newest block. */
  onlyLastGrew(held: readonly ReplayInput[]): boolean {
    const k = this.firstDifference(held);
    return k === held.length - 1 && k === this.done.length - 1 && this.done[k]!.block === held[k];
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
    // The same block with more txs: its earlier receipts stay (same txs, same env, same parent state).
    const kept = k < this.done.length && k < held.length && this.done[k]!.block === held[k] ? this.done[k]!.receipts : [];
    if (k < this.done.length) prefix.push(['evm_revert', [this.done[k]!.snap]]);
    this.done.length = k;
    for (let i = k; i < held.length; i++) {
      const b = held[i]!;
      const height = this.fork + 1 + i;
      if (b.number !== height) throw new Error(`standby: held block ${b.number} is not at height ${height}`);
      if (b.broken) throw new Error(`standby: held block ${b.number} is broken`);
      const count = b.raws.length;
      const raws = b.raws.slice(0, count);
      const calls = mineCalls([...prefix, ['evm_snapshot', []]], b.env, raws);
      const snapAt = prefix.length;
      prefix = [];
      // Receipts of the txs not known yet, by hash in the same write (eth_getBlockReceipts is O(n²) on anvil 1.7.1).
      const keep = i === k && kept.length < count ? kept.length : 0;
      const mined = calls.length;
      for (let j = keep; j < count; j++) calls.push(['eth_getTransactionReceipt', [keccak256Hex(hexToBytes(raws[j]!))]]);
      const res = await this.side.ctl.callMany(calls);
      if (snapAt > 0 && !(res[0]?.status === 'fulfilled' && res[0].value === true)) throw new Error('standby: evm_revert refused');
      const bad = res.findIndex((r) => r.status === 'rejected');
      if (bad >= 0) throw new Error(`standby: replay of block ${b.number}: ${calls[bad]![0]}: ${((res[bad] as PromiseRejectedResult).reason as Error).message}`);
      const snap = String((res[snapAt] as PromiseFulfilledResult<unknown>).value);
      const receipts = kept.slice(0, keep);
      for (let j = mined; j < res.length; j++) {
        const v = (res[j] as PromiseFulfilledResult<Record<string, unknown> | null>).value;
        if (v === null || Number(v.blockNumber) !== height) throw new Error(`standby: block ${b.number} does not hold tx ${keep + j - mined} of ${count}`);
        receipts.push(receiptFromRpc(v));
      }
      this.done.push({ block: b, count, snap, receipts });
    }
  }
}
