// When `pending` may be answered from state, and the fallback metric when it may not. Reads the view only.
import type { PendingFallbackReason } from '../../metrics/metrics.js';
import type { BlockView } from '../../state/view.js';
import type { MethodContext } from './types.js';

/** Why `pending` cannot be answered from state right now (metric label). */
export function fallbackReason(ctx: MethodContext): PendingFallbackReason {
  if (!ctx.options.flashblocksEnabled) return 'disabled';
  if (ctx.upstreamRetired?.() === true) return 'retired';
  const top = ctx.view.block(ctx.view.highestNumber);
  return top !== undefined && top.broken ? 'broken' : 'stale';
}

/**
 * The block `pending` means when it may be answered from state; else counts a fallback and returns null (the caller
 * answers as `latest`). A pending block without transactions yet (an index 0 without deposits, as on the devnet)
 * must not hide the block before it: serving it made `pending` drop to [] at every block boundary. So an empty
 * block is served only when the block before it was empty too; else the block before while held, or null (as
 * `latest`, which holds it once settled).
 */
export function usablePending(ctx: MethodContext): BlockView | null {
  const b = ctx.pendingUsable() ? ctx.view.pendingBlock() : null;
  if (b === null) {
    ctx.metrics.pendingFallbacks[fallbackReason(ctx)].inc();
    return null;
  }
  if (b.txs.length > 0) return b;
  const prev = ctx.view.block(b.number - 1);
  if (prev !== undefined && !prev.broken) return prev.txs.length > 0 ? prev : b;
  return ctx.view.canonical === b.number - 1 && ctx.view.settledTxCount === 0 ? b : null;
}

/** A held, unbroken block at height `n` above the canonical head, else null. */
export function heldAbove(ctx: MethodContext, n: number): BlockView | null {
  const b = ctx.view.block(n);
  return b !== undefined && !b.broken && n > ctx.view.canonical ? b : null;
}
