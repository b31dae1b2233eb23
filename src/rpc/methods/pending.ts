// When `pending` may be answered from state, which held block a block argument names (tags, numbers, EIP-1898
// hashes), and the fallback metric when `pending` may not be answered. Reads the view only.
import { RpcCode, RpcError } from '../../errors.js';
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
  if (b.txCount > 0) return b;
  const prev = ctx.view.block(b.number - 1);
  if (prev !== undefined && !prev.broken) return prev.txCount > 0 ? prev : b;
  return ctx.view.canonical === b.number - 1 && ctx.view.settledTxCount === 0 ? b : null;
}

/** A held, unbroken block at height `n` above the canonical head, else null. */
export function heldAbove(ctx: MethodContext, n: number): BlockView | null {
  const b = ctx.view.block(n);
  return b !== undefined && !b.broken && n > ctx.view.canonical ? b : null;
}

/**
 * The held block a state read's block argument names (EIP-1898 included): `pending` → usablePending (null when it
 * cannot be answered from state, counted); the number of a held block (a string or `{blockNumber}`); the hash of a
 * held block's flashblock (a 32-byte string or `{blockHash}`). undefined: not a pending block (the node answers).
 * A pending hash with `requireCanonical: true` is refused as geth refuses a non-canonical block; the hash of an
 * older flashblock whose block has taken transactions since is refused too (its state is not kept: only the
 * newest flashblock's state is executed).
 */
export function heldStateBlock(ctx: MethodContext, v: unknown): BlockView | null | undefined {
  if (v === 'pending') return usablePending(ctx);
  if (typeof v === 'string') {
    if (v.length === 66 && v.startsWith('0x')) return heldByHash(ctx, v.toLowerCase(), false);
    if (v.length > 2 && v.length < 16 && v.startsWith('0x')) return heldAbove(ctx, Number.parseInt(v.slice(2), 16)) ?? undefined;
    return undefined;
  }
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    const o = v as { blockHash?: unknown; blockNumber?: unknown; requireCanonical?: unknown };
    if (typeof o.blockHash === 'string') return heldByHash(ctx, o.blockHash.toLowerCase(), o.requireCanonical === true);
    if (o.blockNumber !== undefined) return heldStateBlock(ctx, o.blockNumber);
  }
  return undefined;
}

/** The held block of flashblock hash `h` as a state read sees it (see heldStateBlock); undefined when not held. */
function heldByHash(ctx: MethodContext, h: string, requireCanonical: boolean): BlockView | undefined {
  const f = ctx.view.blockByFlashblockHash(h);
  if (f === undefined || f.block.broken) return undefined;
  if (requireCanonical) {
    throw new RpcError(
      RpcCode.SERVER_ERROR,
      `hash is not currently canonical: ${h} is pending block ${f.block.number} (flashblock ${f.index}); drop requireCanonical to read its state`,
    );
  }
  const b = f.block;
  if ((b.txCountAt[f.index] as number) !== (b.txCountAt[b.lastIndex] as number)) {
    throw new RpcError(
      RpcCode.SERVER_ERROR,
      `state of ${h} (pending block ${b.number}, flashblock ${f.index}) is superseded: flashblock ${b.lastIndex} added transactions; ` +
        `state is kept only as of the newest flashblock, ask with its hash ${b.hash} or "pending"`,
    );
  }
  return b;
}
