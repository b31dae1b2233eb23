// Static scan of EVM bytecode for the opcodes whose result depends on the block number the engine cannot pin in
// its fast path: NUMBER (0x43) and BLOCKHASH (0x40). Pure. Conservative: a match inside data that is not PUSH
// immediate (e.g. metadata) counts too, which only costs an unneeded exact rebuild.

const NUMBER = 0x43;
const BLOCKHASH = 0x40;
const PUSH1 = 0x60;
const PUSH32 = 0x7f;

/** True when `code` may execute NUMBER or BLOCKHASH (PUSH immediates are skipped). */
export function readsBlockNumber(code: Uint8Array): boolean {
  for (let i = 0; i < code.length; i++) {
    const op = code[i] as number;
    if (op === NUMBER || op === BLOCKHASH) return true;
    if (op >= PUSH1 && op <= PUSH32) i += op - PUSH1 + 1;
  }
  return false;
}

/** The delegate of an EIP-7702 delegated account (code 0xef0100 ‖ address), else null. */
export function delegateOf(code: Uint8Array): string | null {
  if (code.length !== 23 || code[0] !== 0xef || code[1] !== 0x01 || code[2] !== 0x00) return null;
  return '0x' + Buffer.from(code.subarray(3)).toString('hex');
}
