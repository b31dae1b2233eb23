// Hand-assembled contracts and raw deposits shared by the devnet's traffic and the execution engine's block factory:
// runtimes that read the block env or earn gas refunds, their init code, and 0x7e deposit encoding. Devnet only.
import { bigIntToBytes, hexToBytes } from '../../src/chain/hex.js';
import { encodeRlp } from '../../src/chain/rlp.js';

/**
 * Env contract (58 bytes): stores NUMBER, TIMESTAMP, BASEFEE, COINBASE, BLOCKHASH(NUMBER-1), PREVRANDAO in slots 0..5
 * and emits them as one LOG0 of 6 words, so a receipt (and the receipts root) commits to every value the tx saw.
 *   00 NUMBER DUP1 PUSH1 0 SSTORE PUSH1 00 MSTORE
 *   08 TIMESTAMP DUP1 PUSH1 1 SSTORE PUSH1 20 MSTORE
 *   10 BASEFEE DUP1 PUSH1 2 SSTORE PUSH1 40 MSTORE
 *   18 COINBASE DUP1 PUSH1 3 SSTORE PUSH1 60 MSTORE
 *   20 PUSH1 1 NUMBER SUB BLOCKHASH DUP1 PUSH1 4 SSTORE PUSH1 80 MSTORE
 *   2c PREVRANDAO DUP1 PUSH1 5 SSTORE PUSH1 a0 MSTORE
 *   34 PUSH1 c0 PUSH1 00 LOG0 STOP
 */
export const ENV_RUNTIME =
  '4380600055600052428060015560205248806002556040524180600355606052600143034080600455608052' + '448060055560a052' + '60c06000a000';

/** Slots the env contract writes, in order: NUMBER, TIMESTAMP, BASEFEE, COINBASE, BLOCKHASH(NUMBER-1), PREVRANDAO. */
export const ENV_SLOTS = 6;

/**
 * Refund contract (40 bytes): sets slots 0..2 from zero to 1 and clears them again in the same call (three refunds of
 * a restored zero slot), then increments a call counter in slot 3 so its storage still changes with every tx.
 *   00 (PUSH1 1 PUSH1 k SSTORE) for k = 0..2; (PUSH1 0 PUSH1 k SSTORE) for k = 0..2
 *   1e PUSH1 3 SLOAD PUSH1 1 ADD PUSH1 3 SSTORE STOP
 */
export const REFUND_RUNTIME = '600160005560016001556001600255600060005560006001556000600255' + '60035460010160035500';

/** Slots the refund contract touches (0..2 end at zero, 3 counts calls). */
export const REFUND_SLOTS = 4;

/** Init code that deploys `runtime` (hex without 0x, at most 255 bytes) as is. */
export function initOf(runtime: string): `0x${string}` {
  const n = (runtime.length / 2).toString(16).padStart(2, '0');
  if (runtime.length / 2 > 0xff) throw new Error('initOf: runtime longer than 255 bytes');
  return `0x60${n}600c60003960${n}6000f3${runtime}`;
}

/** A deposit (0x7e) as EIP-2718 hex; `mint` is credited to `from`, which sends `value` to `to`. */
export function depositTx(sourceHash: string, from: string, to: string, mint: bigint, value: bigint, gas: bigint, data = '0x'): `0x${string}` {
  const body = encodeRlp([
    hexToBytes(sourceHash), hexToBytes(from), hexToBytes(to), bigIntToBytes(mint), bigIntToBytes(value), bigIntToBytes(gas),
    Buffer.alloc(0), hexToBytes(data),
  ]);
  return `0x7e${body.toString('hex')}`;
}
