// Builds real blocks on an anvil node and cuts them into flashblocks for the execution engine's bench and tests:
// real signed txs (viem), an env probe (stores NUMBER, TIMESTAMP, BASEFEE, COINBASE, BLOCKHASH(NUMBER-1),
// PREVRANDAO), refund-heavy txs (SSTORE then clear), the devnet's L1-info deposit (Isthmus, to the L1Block code it
// installs, so every signed tx pays an L1 fee and an operator fee) and a user deposit with mint. Each flashblock's
// receipts_root is the root of the canonical block's receipts so far. Devnet only.
import { getContractAddress, toHex, type Hex } from 'viem';
import { privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { txBatch, type BlockEnv, type FlashblockWork } from '../../src/exec/engine.js';
import { receiptFromRpc, receiptsRoot } from '../../src/exec/receipts.js';
import { PipelinedRpc } from './pipe.js';
import type { Anvil } from './anvil.js';
import { depositTx, initOf, REFUND_RUNTIME } from './contracts.js';
import { devnetL1Attributes, installL1Block, l1InfoDeposit } from './l1block.js';
import { devAccounts } from './sequencer.js';

/** Stores NUMBER, TIMESTAMP, BASEFEE, COINBASE, BLOCKHASH(NUMBER-1), PREVRANDAO in slots 0..5. */
const PROBE_RUNTIME = '4360005542600155486002554160035560014303406004554460055500';
/** Returns the balance of SINK (the bench's visibility check: every flashblock pays SINK). */
export const SINK = '0x00000000000000000000000000000000005e1e55';
const READER_RUNTIME = `73${SINK.slice(2)}3160005260206000f3`;
/** The L1Block predeploy, the system depositor, and a gwei: shared with bench/engine-blocks.ts. */
export const L1_BLOCK = '0x4200000000000000000000000000000000000015';
export const DEPOSITOR = '0xdeaddeaddeaddeaddeaddeaddeaddeaddead0001';
export const GWEI = 1_000_000_000n;

/** Contracts deployed by {@link setupContracts}. */
export interface ExecContracts {
  probe: Hex;
  refund: Hex;
  reader: Hex;
}

/** A block cut into flashblocks, with the canonical answers to compare against. */
export interface BuiltBlock {
  number: number;
  env: BlockEnv;
  flashblocks: FlashblockWork[];
  /** SINK's balance after each flashblock (what the reader contract returns). */
  sinkBalances: bigint[];
}

/** The execution env of a mined block (eth_getBlockByNumber's answer), as the block's index 0 `base` would give it. */
export function envOfBlock(block: Record<string, any>): BlockEnv {
  return {
    number: Number(block.number),
    timestamp: Number(block.timestamp),
    baseFeePerGas: BigInt(block.baseFeePerGas),
    feeRecipient: String(block.miner).toLowerCase(),
    gasLimit: BigInt(block.gasLimit),
    prevRandao: String(block.mixHash),
    parentHash: String(block.parentHash),
  };
}

/** Generates blocks of real transactions on `node` (mining off). */
export class BlockFactory {
  private readonly signers: PrivateKeyAccount[];
  private readonly nonces: number[];
  private seq = 0;
  contracts: ExecContracts | null = null;

  constructor(
    private readonly node: Anvil,
    private readonly rpc: PipelinedRpc,
    accounts: number,
  ) {
    this.signers = devAccounts(accounts).map((a) => privateKeyToAccount(a.privateKey));
    this.nonces = this.signers.map(() => 0);
  }

  static async open(node: Anvil, accounts: number): Promise<BlockFactory> {
    const u = new URL(node.url);
    return new BlockFactory(node, await PipelinedRpc.open(u.hostname, Number(u.port)), accounts);
  }

  close(): void {
    this.rpc.close();
  }

  /** Installs the L1Block code and deploys the probe, refund and reader contracts in one canonical block. */
  async setupContracts(): Promise<ExecContracts> {
    await installL1Block(this.node.url);
    const s = this.signers[0]!;
    const out: Hex[] = [];
    const raws: string[] = [];
    for (const rt of [PROBE_RUNTIME, REFUND_RUNTIME, READER_RUNTIME]) {
      const nonce = this.nonces[0]!++;
      out.push(getContractAddress({ from: s.address, nonce: BigInt(nonce) }));
      raws.push(await s.signTransaction({ chainId: this.node.chainId, nonce, type: 'eip1559', maxFeePerGas: 10n * GWEI, maxPriorityFeePerGas: 1n, gas: 300_000n, data: initOf(rt) }));
    }
    await this.rpc.callMany(raws.map((r) => ['eth_sendRawTransaction', [r]]));
    await this.rpc.call('evm_mine');
    this.contracts = { probe: out[0]!, refund: out[1]!, reader: out[2]! };
    return this.contracts;
  }

  private async signed(kind: 'transfer' | 'sink' | 'probe' | 'refund'): Promise<string> {
    const i = this.seq++ % this.signers.length;
    const s = this.signers[i]!;
    const nonce = this.nonces[i]!++;
    const c = this.contracts!;
    const base = { chainId: this.node.chainId, nonce, maxFeePerGas: 10n * GWEI, maxPriorityFeePerGas: BigInt(1 + (this.seq % 7)) } as const;
    switch (kind) {
      case 'transfer':
        return s.signTransaction({ ...base, type: 'eip1559', gas: 21_000n, to: this.signers[(i + 1) % this.signers.length]!.address, value: 1n });
      case 'sink':
        return s.signTransaction({ ...base, type: 'eip1559', gas: 21_000n, to: SINK, value: 1n });
      case 'probe':
        return s.signTransaction({ ...base, type: 'eip1559', gas: 200_000n, to: c.probe });
      case 'refund':
        return s.signTransaction({ chainId: this.node.chainId, nonce, type: 'legacy', gasPrice: 10n * GWEI, gas: 200_000n, to: c.refund });
    }
  }

  /**
   * Mines one canonical block of `perFlashblock` txs × `count` flashblocks on the node (index 0 also holds the
   * L1-info deposit, first, and a user deposit) and returns it cut into flashblocks. With `probes`, every flashblock
   * has one env-probe tx; every flashblock has one refund tx and one payment to SINK.
   */
  async buildBlock(count: number, perFlashblock: number, probes: boolean): Promise<BuiltBlock> {
    const head = await this.rpc.call<Record<string, string>>('eth_getBlockByNumber', ['latest', false]);
    const number = Number(head.number) + 1;
    const timestamp = Number(head.timestamp) + 2;
    const baseFee = BigInt(head.baseFeePerGas ?? '0x3b9aca00');
    const groups: string[][] = [];
    for (let k = 0; k < count; k++) {
      const g: string[] = [];
      if (k === 0) {
        g.push(l1InfoDeposit(devnetL1Attributes(number)));
        g.push(depositTx(toHex(number + 2 ** 40, { size: 32 }), '0x000000000000000000000000000000000000d00d', SINK, 10n ** 15n, 10n ** 15n, 100_000n));
      }
      g.push(await this.signed('sink'));
      g.push(await this.signed('refund'));
      if (probes) g.push(await this.signed('probe'));
      while (g.length < perFlashblock) g.push(await this.signed('transfer'));
      groups.push(g);
    }
    const feeRecipient = '0x4200000000000000000000000000000000000011';
    const all = groups.flat();
    const res = await this.rpc.callMany([
      ['anvil_setNextBlockBaseFeePerGas', [toHex(baseFee)]],
      ['anvil_setCoinbase', [feeRecipient]],
      ...all.map((r): [string, unknown[]] => ['eth_sendRawTransaction', [r]]),
      ['evm_mine', [timestamp]],
    ]);
    const bad = res.find((r) => r.status === 'rejected');
    if (bad !== undefined) throw new Error(`block ${number}: ${String((bad as PromiseRejectedResult).reason)}`);
    const block = await this.rpc.call<Record<string, any>>('eth_getBlockByNumber', [toHex(number), false]);
    if (block.transactions.length !== all.length) throw new Error(`block ${number} holds ${block.transactions.length} of ${all.length} txs (gas limit?)`);
    const receipts = (await this.rpc.call<Record<string, unknown>[]>('eth_getBlockReceipts', [toHex(number)])).map(receiptFromRpc);
    if (receiptsRoot(receipts) !== block.receiptsRoot) throw new Error(`block ${number}: receipts encoding disagrees with the node's receiptsRoot`);
    const env = envOfBlock(block);
    const flashblocks: FlashblockWork[] = [];
    const sinkBalances: bigint[] = [];
    let n = 0;
    let sink = BigInt(await this.rpc.call<string>('eth_getBalance', [SINK, toHex(number - 1)]));
    for (let k = 0; k < groups.length; k++) {
      n += groups[k]!.length;
      sink += (k === 0 ? 10n ** 15n : 0n) + 1n;
      flashblocks.push({ blockNumber: number, index: k, env, txs: txBatch(groups[k]!), receiptsRoot: receiptsRoot(receipts, n) });
      sinkBalances.push(sink);
    }
    const final = BigInt(await this.rpc.call<string>('eth_getBalance', [SINK, toHex(number)]));
    if (final !== sink) throw new Error(`block ${number}: SINK balance ${final}, expected ${sink}`);
    return { number, env, flashblocks, sinkBalances };
  }
}
