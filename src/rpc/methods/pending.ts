// When `pending` may be answered from state, and the fallback metric when it may not. Reads context only.
import type { ServiceContext } from '../../context.js';
import type { PendingFallbackReason } from '../../metrics/metrics.js';
import type { PendingBlock } from '../../state/block.js';

/** Why `pending` cannot be answered from state right now (metric label). */
export function fallbackReason(ctx: ServiceContext): PendingFallbackReason {
  if (!ctx.config.flashblocksEnabled) return 'disabled';
  const top = ctx.state.block(ctx.state.highestNumber);
  return top !== undefined && top.broken ? 'broken' : 'stale';
}

/**
 * The block `pending` means when it may be answered from state; else counts a fallback and returns null (the caller
 * answers as `latest`). A pending block without transactions yet (an index 0 without deposits, as on the devnet)
 * says nothing the block before it does not: the block before, while held, else null (as `latest`, which holds it
 * once it is settled). Serving the empty block made `pending` drop to [] at every block boundary.
 */
export function usablePending(ctx: ServiceContext): PendingBlock | null {
  const b = ctx.pendingUsable() ? ctx.state.pendingBlock() : null;
  if (b === null) {
    ctx.metrics.pendingFallbacks[fallbackReason(ctx)].inc();
    return null;
  }
  if (b.txs.length > 0) return b;
  const prev = ctx.state.block(b.number - 1);
  return prev !== undefined && !prev.broken && prev.number > ctx.state.canonical ? prev : null;
}

/** A held, unbroken block at height `n` above the canonical head, else null. */
export function heldAbove(ctx: ServiceContext, n: number): PendingBlock | null {
  const b = ctx.state.block(n);
  return b !== undefined && !b.broken && n > ctx.state.canonical ? b : null;
}
