// When `pending` may be answered from state, and the fallback metric when it may not. Reads the view only.
import type { PendingFallbackReason } from '../../metrics/metrics.js';
import type { BlockView } from '../../state/view.js';
import type { MethodContext } from './types.js';

/** Why `pending` cannot be answered from state right now (metric label). */
export function fallbackReason(ctx: MethodContext): PendingFallbackReason {
  if (!ctx.options.flashblocksEnabled) return 'disabled';
  const top = ctx.view.block(ctx.view.highestNumber);
  return top !== undefined && top.broken ? 'broken' : 'stale';
}

/** The pending block when `pending` may be answered from state; else counts a fallback and returns null. */
export function usablePending(ctx: MethodContext): BlockView | null {
  const b = ctx.pendingUsable() ? ctx.view.pendingBlock() : null;
  if (b === null) ctx.metrics.pendingFallbacks[fallbackReason(ctx)].inc();
  return b;
}

/** A held, unbroken block at height `n` above the canonical head, else null. */
export function heldAbove(ctx: MethodContext, n: number): BlockView | null {
  const b = ctx.view.block(n);
  return b !== undefined && !b.broken && n > ctx.view.canonical ? b : null;
}
