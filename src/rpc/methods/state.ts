// eth_getCode, eth_getStorageAt and eth_getProof at `pending`: code and storage from the stream's access lists where
// they are exact (X Layer), else the execution engine at the newest executed flashblock (executed.ts decides when, and
// falls back to the node's `latest` otherwise); the engine side is native/src/read.rs. eth_getProof is refused there.
import { RpcCode, RpcError } from '../../errors.js';
import { atNewestState, executedRead } from './executed.js';
import { heldStateBlock } from './pending.js';
import { address, arity, checkBlockTag, withLatest } from './params.js';
import { FORWARD_AS_IS, Forward, type Handler } from './types.js';

function slot(params: unknown[], i: number): string {
  const v = params[i];
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]{1,64}$/.test(v)) throw new RpcError(RpcCode.INVALID_PARAMS, `invalid argument ${i}: expected a storage slot (0x-prefixed hex, at most 32 bytes)`);
  return v;
}

export const eth_getCode: Handler = executedRead(
  1,
  (p) => {
    arity(p, 1, 2);
    address(p, 0);
  },
  (e, p) => e.getCode(address(p, 0)),
  (post) => post.code,
  (p) => ({ method: 'getCode', address: address(p, 0) }),
);

export const eth_getStorageAt: Handler = executedRead(
  2,
  (p) => {
    arity(p, 2, 3);
    address(p, 0);
    slot(p, 1);
  },
  (e, p) => e.getStorageAt(address(p, 0), slot(p, 1)),
  (post, p) => {
    const v = post.storage.get('0x' + slot(p, 1).slice(2).toLowerCase().padStart(64, '0'));
    return v === undefined ? undefined : '0x' + v.toString(16).padStart(64, '0');
  },
  (p) => ({ method: 'getStorageAt', address: address(p, 0), slot: slot(p, 1) }),
);

/**
 * eth_getProof: `pending` (or the pending height) is refused while execution is on — the engine's state trie is
 * not the chain's, and the node's `latest` is older than the receipts served; never forwarded as `pending`. With
 * execution off it answers as `latest`, like every pending state read then.
 */
export const eth_getProof: Handler = (ctx, params) => {
  const tag = params[2];
  const held = tag === 'pending' ? undefined : heldStateBlock(ctx, tag);
  if (ctx.execution !== null && (tag === 'pending' || (held != null && atNewestState(ctx, held)))) {
    throw new RpcError(
      RpcCode.INVALID_PARAMS,
      'invalid argument 2: eth_getProof does not answer at "pending" (the executed pending state has no proof against the chain\'s state root); ask for "latest" or a canonical block number',
    );
  }
  if (tag === 'pending') return new Forward(withLatest(params, 2));
  checkBlockTag(params, 2, true);
  return held != null ? new Forward(withLatest(params, 2)) : FORWARD_AS_IS;
};
