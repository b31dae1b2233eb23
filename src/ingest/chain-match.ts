// Whether the node beside the daemon is on the stream's chain: the chain id the stream's signed transactions carry
// (EIP-155 v, a typed transaction's chainId; deposits carry none) against the node's eth_chainId, and stream heights
// that stay far from the node's head. Judges only; the pipeline feeds it, the daemon reports (log, metric, /readyz).
import { TX_DEPOSIT } from '../chain/types.js';
import type { Flashblock } from '../chain/flashblock.js';
import type { ChainCheck } from '../metrics/metrics.js';

/** Why the node does not match the stream. */
export type ChainMismatch =
  | { check: 'chain_id'; streamChainId: bigint; nodeChainId: bigint }
  | { check: 'heights'; streamBlock: number; nodeHead: number; forMs: number };

export interface ChainMatchOptions {
  /** Stream block numbers further than this from the node's head count as "not meeting" it. */
  farBlocks: number;
  /** ... when every flashblock for this long stays that far. */
  persistMs: number;
}

/** Defaults: 256 blocks (8.5 min at 2 s) is past any reorder or catch-up bound; 30 s rules out a node still settling. */
export const CHAIN_MATCH_DEFAULTS: ChainMatchOptions = { farBlocks: 256, persistMs: 30_000 };

/** One line saying what is wrong and what to do. */
export function describeMismatch(m: ChainMismatch): string {
  if (m.check === 'chain_id') {
    return (
      `the node is on another chain: the flashblocks stream's transactions are for chain id ${m.streamChainId}, the node (--node-rpc-url) answers eth_chainId ${m.nodeChainId}; ` +
      `every flashblock is stale or refused — point --node-rpc-url at a node of chain ${m.streamChainId}, or --flashblocks-url at chain ${m.nodeChainId}'s stream`
    );
  }
  return (
    `stream heights never meet the node's: flashblocks for block ${m.streamBlock}, the node's head is ${m.nodeHead}, ${Math.abs(m.streamBlock - m.nodeHead)} blocks apart for ${Math.round(m.forMs / 1000)} s; ` +
    'the node is on another chain or far from synced — check --node-rpc-url and --flashblocks-url name the same chain'
  );
}

/**
 * Follows the stream's chain id and heights against the node's. `observe` costs one transaction decode per block
 * at most (the first signed transaction of a block), nothing per flashblock after that.
 */
export class ChainMatch {
  private nodeChainId: bigint | null = null;
  private streamChainId: bigint | null = null;
  /** The block whose chain id was read last (-1: none). */
  private checkedBlock = -1;
  /** Since when every flashblock has been far from the node's head (-1: the last one was near). */
  private farSinceMs = -1;
  private heights: ChainMismatch | null = null;
  private reported: string | null = null;

  constructor(
    private readonly opts: ChainMatchOptions,
    private readonly report: {
      /** Called once each time the node stops matching the stream (and again after it matched in between). */
      mismatch(m: ChainMismatch): void;
      /** Every flashblock observed while the node does not match (for the metric). */
      flashblock(check: ChainCheck): void;
    },
  ) {}

  /** The node's eth_chainId, once it answered. */
  setNodeChainId(id: bigint): void {
    this.nodeChainId = id;
    this.judge();
  }

  /** A decoded flashblock (first copy), with the node's head as settled so far (-1 before the first). */
  observe(fb: Flashblock, nodeHead: number, nowMs: number): void {
    if (fb.blockNumber !== this.checkedBlock) {
      const body = fb.body;
      for (let i = 0; i < body.txCount; i++) {
        if (body.txType(i) === TX_DEPOSIT) continue;
        const id = body.tx(i).chainId;
        if (id === null) continue; // pre-EIP-155 legacy: replayable anywhere, says nothing
        this.checkedBlock = fb.blockNumber;
        this.streamChainId = id;
        break;
      }
    }
    if (nodeHead < 0 || Math.abs(fb.blockNumber - nodeHead) <= this.opts.farBlocks) {
      this.farSinceMs = -1;
      this.heights = null;
    } else {
      if (this.farSinceMs < 0) this.farSinceMs = nowMs;
      const forMs = nowMs - this.farSinceMs;
      this.heights = forMs >= this.opts.persistMs ? { check: 'heights', streamBlock: fb.blockNumber, nodeHead, forMs } : null;
    }
    const m = this.judge();
    if (m !== null) this.report.flashblock(m.check);
  }

  /** What is wrong now, or null (nothing known to be wrong). The chain id, when known, is the stronger evidence. */
  mismatch(): ChainMismatch | null {
    if (this.nodeChainId !== null && this.streamChainId !== null && this.nodeChainId !== this.streamChainId) {
      return { check: 'chain_id', streamChainId: this.streamChainId, nodeChainId: this.nodeChainId };
    }
    return this.heights;
  }

  private judge(): ChainMismatch | null {
    const m = this.mismatch();
    const key = m === null ? null : m.check === 'chain_id' ? `chain_id:${m.streamChainId}:${m.nodeChainId}` : 'heights';
    if (m !== null && key !== this.reported) this.report.mismatch(m);
    this.reported = key;
    return m;
  }
}
