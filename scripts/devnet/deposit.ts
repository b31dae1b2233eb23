// EIP-2718 bytes of a deposit transaction rebuilt from its JSON-RPC fields: anvil 1.7.1 aborts on
// eth_getRawTransactionByHash of a deposit, so the devnet's sequencer (and its tests) encode deposits themselves.
import { bigIntToBytes, hexToBytes } from '../../src/chain/hex.js';
import { encodeRlp } from '../../src/chain/rlp.js';

/** EIP-2718 bytes of a deposit from its JSON-RPC fields (0x7e ‖ rlp[sourceHash, from, to, mint, value, gas, isSystemTx, data]). */
export function encodeDepositFromRpc(t: Record<string, any>): string {
  const q = (v: unknown): Buffer => bigIntToBytes(BigInt((v as string | undefined) ?? 0));
  const body = encodeRlp([
    hexToBytes(String(t.sourceHash)),
    hexToBytes(String(t.from)),
    t.to == null ? Buffer.alloc(0) : hexToBytes(String(t.to)),
    q(t.mint),
    q(t.value),
    q(t.gas),
    t.isSystemTx === true ? Buffer.from([1]) : Buffer.alloc(0),
    hexToBytes(String(t.input ?? '0x')),
  ]);
  return '0x7e' + body.toString('hex');
}
