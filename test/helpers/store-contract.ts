// A tiny storage contract the e2e tests deploy through the daemon: a call with a 32-byte argument stores it in slot
// 0, any call returns slot 0. Hand-assembled (no compiler here).
//   CALLDATASIZE ISZERO PUSH1 0b JUMPI PUSH1 0 CALLDATALOAD PUSH1 0 SSTORE JUMPDEST PUSH1 0 SLOAD PUSH1 0 MSTORE
//   PUSH1 20 PUSH1 0 RETURN
import type { Hex } from 'viem';

export const STORE_RUNTIME = '3615600b576000356000555b60005460005260206000f3';
/** Init code that deploys STORE_RUNTIME as is. */
export const STORE_INIT = `0x60${(STORE_RUNTIME.length / 2).toString(16)}600c60003960${(STORE_RUNTIME.length / 2).toString(16)}6000f3${STORE_RUNTIME}` as Hex;
/** `n` as one 32-byte ABI word. */
export const word = (n: bigint): Hex => `0x${n.toString(16).padStart(64, '0')}`;
