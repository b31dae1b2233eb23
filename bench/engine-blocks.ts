// Blocks of one transaction kind (plain transfers, ERC-20 transfers, a swap-like contract) mined on an anvil node and
// cut into flashblocks, for the per-transaction cost rows of bench/engine.ts. Bench only: the canonical block is the
// truth each flashblock's receipts root comes from; nothing here executes anything itself.
import { concatHex, getContractAddress, numberToHex, pad, toHex, type Hex } from 'viem';
import { privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { Anvil } from '../scripts/devnet/anvil.js';
import { envOfBlock, GWEI } from '../scripts/devnet/exec-blocks.js';
import { devnetL1Attributes, installL1Block, l1InfoDeposit } from '../scripts/devnet/l1block.js';
import { devAccounts } from '../scripts/devnet/sequencer.js';
import { tokenInitCode } from '../scripts/devnet/traffic.js';
import { txBatch, type FlashblockWork } from '../src/exec/engine.js';
import { PipelinedRpc } from '../scripts/devnet/pipe.js';
import { receiptFromRpc, receiptsRoot } from '../src/exec/receipts.js';

/** What every transaction of a block does. */
export type CostKind = 'transfer' | 'erc20' | 'swap';
export const COST_KINDS: readonly CostKind[] = ['transfer', 'erc20', 'swap'];

/**
 * Swap-like runtime (58 bytes): amountIn = calldata[0:32]; reads reserves A (slot 0) and B (slot 1), out =
 * rB·in / (rA + in) (constant product), writes rA + in and rB − out back, credits out to the caller's B balance (slot
 * caller + 2^160) and debits in from its A balance (slot caller, wrapping: no check), logs out (LOG0). Four SLOAD +
 * four SSTORE + one log: the storage shape of a Uniswap-v2 swap without its token calls.
 *   00 PUSH1 0 CALLDATALOAD PUSH1 0 SLOAD PUSH1 1 SLOAD          ; rB rA in
 *   09 DUP3 DUP2 MUL DUP4 DUP4 ADD SWAP1 DIV                      ; out rB rA in
 *   11 DUP4 DUP4 ADD PUSH1 0 SSTORE                               ; rA' = rA + in
 *   17 DUP1 DUP3 SUB PUSH1 1 SSTORE                               ; rB' = rB − out
 *   1d CALLER PUSH1 1 PUSH1 a0 SHL ADD DUP1 SLOAD DUP3 ADD SWAP1 SSTORE   ; balB[caller] += out
 *   2a CALLER SLOAD DUP5 SWAP1 SUB CALLER SSTORE                  ; balA[caller] −= in
 *   31 PUSH1 0 MSTORE PUSH1 20 PUSH1 0 LOG0 STOP
 */
export const SWAP_RUNTIME = '600035600054600154828102838301900483830160005580820360015533600160a01b018054820190553354849003335560005260206000a000';

/** Init code: reserves A and B = 2^128 − 1, then the runtime copied and returned. */
function swapInit(): Hex {
  // PUSH16 r DUP1 PUSH1 0 SSTORE PUSH1 1 SSTORE (24 bytes), then PUSH1 len DUP1 PUSH1 off PUSH1 0 CODECOPY PUSH1 0 RETURN (11).
  const len = (SWAP_RUNTIME.length / 2).toString(16).padStart(2, '0');
  return `0x6f${'ff'.repeat(16)}8060005560015560${len}8060236000396000f3${SWAP_RUNTIME}`;
}


/** A block of one kind cut into flashblocks (index 0 starts with an L1-info-style system deposit). */
export interface KindBlock {
  number: number;
  kind: CostKind;
  flashblocks: FlashblockWork[];
}

/** Mines blocks of one transaction kind on `node` (mining off: evm_mine) with `accounts` dev accounts as senders. */
export class KindBlockFactory {
  private readonly signers: PrivateKeyAccount[];
  private readonly nonces: number[];
  private seq = 0;
  private token: Hex | null = null;
  private swap: Hex | null = null;

  private constructor(private readonly node: Anvil, private readonly rpc: PipelinedRpc, accounts: number) {
    this.signers = devAccounts(accounts).map((a) => privateKeyToAccount(a.privateKey));
    this.nonces = this.signers.map(() => 0);
  }

  /** Opens the factory and deploys the token and the swap contract, every sender funded with tokens (one block). */
  static async open(node: Anvil, accounts: number): Promise<KindBlockFactory> {
    const u = new URL(node.url);
    await installL1Block(node.url);
    const f = new KindBlockFactory(node, await PipelinedRpc.open(u.hostname, Number(u.port)), accounts);
    const nonces = await f.rpc.callMany(f.signers.map((s): [string, unknown[]] => ['eth_getTransactionCount', [s.address, 'latest']]));
    nonces.forEach((r, i) => {
      if (r.status === 'fulfilled') f.nonces[i] = Number(r.value);
    });
    await f.setup();
    return f;
  }

  close(): void {
    this.rpc.close();
  }

  private async setup(): Promise<void> {
    const s = this.signers[0]!;
    const raws: string[] = [];
    const sign = async (call: { to?: Hex; data: Hex }, gas: bigint): Promise<void> => {
      const nonce = this.nonces[0]!++;
      raws.push(await s.signTransaction({ chainId: this.node.chainId, nonce, type: 'eip1559', maxFeePerGas: 10n * GWEI, maxPriorityFeePerGas: 1n, gas, ...call }));
    };
    this.token = getContractAddress({ from: s.address, nonce: BigInt(this.nonces[0]!) });
    await sign({ data: tokenInitCode }, 300_000n);
    this.swap = getContractAddress({ from: s.address, nonce: BigInt(this.nonces[0]!) });
    await sign({ data: swapInit() }, 300_000n);
    for (let i = 1; i < this.signers.length; i++) await sign({ to: this.token, data: transferData(this.signers[i]!.address, 1n << 100n) }, 80_000n);
    const res = await this.rpc.callMany([...raws.map((r): [string, unknown[]] => ['eth_sendRawTransaction', [r]]), ['evm_mine', []]]);
    const bad = res.find((r) => r.status === 'rejected');
    if (bad !== undefined) throw new Error(`setup block: ${String((bad as PromiseRejectedResult).reason)}`);
    const code = await this.rpc.call<string>('eth_getCode', [this.swap, 'latest']);
    if (code.slice(2) !== SWAP_RUNTIME) throw new Error(`swap contract not deployed as assembled (code ${code.slice(0, 20)}…)`);
  }

  private async signed(kind: CostKind): Promise<string> {
    const i = this.seq++ % this.signers.length;
    const s = this.signers[i]!;
    const nonce = this.nonces[i]!++;
    const base = { chainId: this.node.chainId, nonce, type: 'eip1559', maxFeePerGas: 10n * GWEI, maxPriorityFeePerGas: BigInt(1 + (this.seq % 7)) } as const;
    const peer = this.signers[(i + 1) % this.signers.length]!.address;
    switch (kind) {
      case 'transfer':
        return s.signTransaction({ ...base, gas: 21_000n, to: peer, value: 1n });
      case 'erc20':
        return s.signTransaction({ ...base, gas: 80_000n, to: this.token!, data: transferData(peer, BigInt(1 + (this.seq % 97))) });
      case 'swap':
        return s.signTransaction({ ...base, gas: 150_000n, to: this.swap!, data: pad(numberToHex(1_000_000n + BigInt(this.seq % 1000))) });
    }
  }

  /** Mines one block of `count` flashblocks × `perFlashblock` txs of `kind` and returns it cut into flashblocks. */
  async buildBlock(kind: CostKind, count: number, perFlashblock: number): Promise<KindBlock> {
    const head = await this.rpc.call<Record<string, string>>('eth_getBlockByNumber', ['latest', false]);
    const number = Number(head.number) + 1;
    const timestamp = Number(head.timestamp) + 2;
    const groups: string[][] = [];
    for (let k = 0; k < count; k++) {
      const g: string[] = [];
      // The devnet's Isthmus L1-info deposit (non-zero scalars and operator fee): every tx pays an L1 and an operator fee.
      if (k === 0) g.push(l1InfoDeposit(devnetL1Attributes(number)));
      while (g.length < perFlashblock) g.push(await this.signed(kind));
      groups.push(g);
    }
    const all = groups.flat();
    const res = await this.rpc.callMany([
      ['anvil_setCoinbase', ['0x4200000000000000000000000000000000000011']],
      ...all.map((r): [string, unknown[]] => ['eth_sendRawTransaction', [r]]),
      ['evm_mine', [timestamp]],
    ]);
    const bad = res.find((r) => r.status === 'rejected');
    if (bad !== undefined) throw new Error(`block ${number}: ${String((bad as PromiseRejectedResult).reason)}`);
    const block = await this.rpc.call<Record<string, any>>('eth_getBlockByNumber', [toHex(number), false]);
    if (block.transactions.length !== all.length) throw new Error(`block ${number} holds ${block.transactions.length} of ${all.length} txs (gas limit?)`);
    const raw = await this.rpc.call<Record<string, unknown>[]>('eth_getBlockReceipts', [toHex(number)]);
    const failed = raw.filter((r) => r.status !== '0x1').length;
    if (failed > 0) throw new Error(`block ${number}: ${failed} ${kind} txs reverted (the bench measures successful ones)`);
    const receipts = raw.map(receiptFromRpc);
    const env = envOfBlock(block);
    const flashblocks: FlashblockWork[] = [];
    let n = 0;
    for (let k = 0; k < groups.length; k++) {
      n += groups[k]!.length;
      flashblocks.push({ blockNumber: number, index: k, env, txs: txBatch(groups[k]!), receiptsRoot: receiptsRoot(receipts, n) });
    }
    return { number, kind, flashblocks };
  }
}

/** Calldata of transfer(to, amount) as the devnet token reads it. */
function transferData(to: Hex, amount: bigint): Hex {
  return concatHex(['0xa9059cbb', pad(to), pad(numberToHex(amount))]);
}
