// eth_call, eth_estimateGas, eth_createAccessList and eth_simulateV1 at `pending`: answered by the execution engine
// at the newest executed flashblock (executed.ts decides when it may answer and falls back to the node's `latest`
// otherwise); the engine side of the same word is RevmEngine.call (src/exec/revm.ts) and native/src/call.rs.
import { EngineUnavailableError } from '../../exec/engine.js';
import { toQuantity } from '../../chain/hex.js';
import { RpcCode, RpcError } from '../../errors.js';
import { executedRead } from './executed.js';
import { arity } from './params.js';
import type { Handler } from './types.js';

function callObject(params: unknown[], i: number): Record<string, unknown> {
  const v = params[i];
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new RpcError(RpcCode.INVALID_PARAMS, `invalid argument ${i}: expected a transaction call object`);
  return v as Record<string, unknown>;
}

function optionalObject(params: unknown[], i: number): Record<string, unknown> | undefined {
  const v = params[i];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw new RpcError(RpcCode.INVALID_PARAMS, `invalid argument ${i}: expected an object`);
  return v as Record<string, unknown>;
}

/** eth_call / eth_estimateGas params: the call object, the block, then geth's state and block overrides. */
function checkCallParams(p: unknown[]): void {
  arity(p, 1, 4);
  callObject(p, 0);
  optionalObject(p, 2);
  optionalObject(p, 3);
}

export const eth_call: Handler = executedRead(
  1,
  checkCallParams,
  (e, p) => e.call(callObject(p, 0), optionalObject(p, 2), optionalObject(p, 3)),
  undefined,
  (p) => ({ method: 'call', tx: callObject(p, 0), stateOverrides: optionalObject(p, 2) ?? null, blockOverrides: optionalObject(p, 3) ?? null }),
);

export const eth_estimateGas: Handler = executedRead(
  1,
  checkCallParams,
  async (e, p) => toQuantity(await e.estimateGas(callObject(p, 0), optionalObject(p, 2), optionalObject(p, 3))),
);

/**
 * eth_simulateV1 with `pending`: the blocks of calls run on the newest executed flashblock, the first with the pending
 * block's own env (viem's simulateBlocks / simulateCalls). An engine without it answers as latest through the node.
 */
export const eth_simulateV1: Handler = executedRead(
  1,
  (p) => {
    arity(p, 1, 2);
    const o = callObject(p, 0);
    if (!Array.isArray(o.blockStateCalls)) throw new RpcError(RpcCode.INVALID_PARAMS, 'invalid argument 0: blockStateCalls must be a list');
  },
  (e, p) => {
    if (e.simulateV1 === undefined) return Promise.reject(new EngineUnavailableError('this engine does not simulate'));
    return e.simulateV1(callObject(p, 0));
  },
);

export const eth_createAccessList: Handler = executedRead(
  1,
  (p) => {
    arity(p, 1, 2);
    callObject(p, 0);
  },
  (e, p) => e.createAccessList(callObject(p, 0)),
);
