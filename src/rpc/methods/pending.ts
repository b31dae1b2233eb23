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

/** The pending block when `pending` may be answered from state; else counts a fallback and returns null. */
export function usablePending(ctx: ServiceContext): PendingBlock | null {
  const b = ctx.pendingUsable() ? ctx.state.pendingBlock() : null;
  if (b === null) ctx.metrics.pendingFallbacks[fallbackReason(ctx)].inc();
  return b;
}

/** A held, unbroken block at height `n` above the canonical head, else null. */
export function heldAbove(ctx: ServiceContext, n: number): PendingBlock | null {
  const b = ctx.state.block(n);
  return b !== undefined && !b.broken && n > ctx.state.canonical ? b : null;
}
