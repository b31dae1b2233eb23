// The native engine's OP fees with non-zero parameters, against the OP spec formulas computed here: an anvil node
// (--optimism) whose L1Block contract storage is written directly (Ecotone fee scalars, the L1 base and blob base
// fees, Isthmus/Jovian operator fee scalar and constant), then one flashblock of a signed transaction executed by
// RevmEngine under 'isthmus' and under 'jovian'. anvil 1.7.1 charges the pre-Jovian operator fee, so it cannot be
// the oracle here: the sender pays gasUsed × effectiveGasPrice + L1 fee + operator fee, and the base fee, L1 fee and
// operator fee vaults (0x…19, 0x…1a, 0x…1b) and the fee recipient receive exactly their parts.
import t from 'tap';
import { toHex, type Hex } from 'viem';
import { mnemonicToAccount } from 'viem/accounts';
import { DEV_MNEMONIC, rpcCall, startAnvil } from '../../scripts/devnet/anvil.js';
import { flzCompressLen, fjordSizeScaled, L1_BLOCK_ADDRESS } from '../../src/chain/l1fee.js';
import { RevmEngine } from '../../src/exec/revm.js';
import { txBatch } from '../../src/exec/engine.js';

const BASE_FEE_VAULT = '0x4200000000000000000000000000000000000019';
const L1_FEE_VAULT = '0x420000000000000000000000000000000000001a';
const OPERATOR_FEE_VAULT = '0x420000000000000000000000000000000000001b';
const COINBASE = '0x00000000000000000000000000000000000c0b5e';
const TO = '0x000000000000000000000000000000000000f00d';

// The L1Block parameters (op-revm l1block.rs / constants.rs slots and offsets).
const L1_BASE_FEE = 7_000_000_123n; // slot 1
const BASE_FEE_SCALAR = 1_368n; // slot 3, bytes 16..20
const BLOB_BASE_FEE_SCALAR = 810_949n; // slot 3, bytes 20..24
const L1_BLOB_BASE_FEE = 3_000_000_007n; // slot 7
const DA_FOOTPRINT_GAS_SCALAR = 400n; // slot 8, bytes 18..20 (Jovian; no fee of its own)
const OPERATOR_FEE_SCALAR = 2_500_000n; // slot 8, bytes 20..24
const OPERATOR_FEE_CONSTANT = 1_234_567_890n; // slot 8, bytes 24..32

/** A 32-byte word with `fields` (value, byte offset, byte length) packed big-endian. */
function packed(fields: [bigint, number, number][]): Hex {
  const b = Buffer.alloc(32);
  for (const [v, off, len] of fields) b.set(Buffer.from(v.toString(16).padStart(len * 2, '0'), 'hex'), off);
  return `0x${b.toString('hex')}`;
}

const node = await startAnvil({ accounts: 3 });
t.teardown(() => node.stop());
const slots: [number, Hex][] = [
  [1, toHex(L1_BASE_FEE, { size: 32 })],
  [3, packed([[BASE_FEE_SCALAR, 16, 4], [BLOB_BASE_FEE_SCALAR, 20, 4]])],
  [7, toHex(L1_BLOB_BASE_FEE, { size: 32 })],
  [8, packed([[DA_FOOTPRINT_GAS_SCALAR, 18, 2], [OPERATOR_FEE_SCALAR, 20, 4], [OPERATOR_FEE_CONSTANT, 24, 8]])],
];
for (const [slot, value] of slots) await rpcCall(node.url, 'anvil_setStorageAt', [L1_BLOCK_ADDRESS, toHex(slot, { size: 32 }), value]);
await rpcCall(node.url, 'evm_mine', []);

const sender = mnemonicToAccount(DEV_MNEMONIC, { addressIndex: 1 });
const head = await rpcCall<{ number: Hex; hash: Hex; timestamp: Hex }>(node.url, 'eth_getBlockByNumber', ['latest', false]);
const chainId = Number(await rpcCall<string>(node.url, 'eth_chainId', []));
const baseFee = 1_000_000_000n;
const tip = 3_000_000n;
const nonce = Number(await rpcCall<string>(node.url, 'eth_getTransactionCount', [sender.address, 'latest']));
// Calldata with zero and non-zero bytes, so the L1 fee's compressed size is above Fjord's 100-byte floor.
const data = `0x${Buffer.from(Array.from({ length: 400 }, (_, i) => (i % 3 === 0 ? 0 : (i * 37) & 0xff))).toString('hex')}` as Hex;
const raw = await sender.signTransaction({
  type: 'eip1559',
  chainId,
  nonce,
  to: TO,
  value: 5n,
  data,
  gas: 200_000n,
  maxFeePerGas: 2n * baseFee,
  maxPriorityFeePerGas: tip,
});

/** What the test expects the EVM to charge, by the OP spec formulas. */
function l1Fee(): bigint {
  // Fjord (implied by Isthmus and Jovian): estimatedSize × (16·l1BaseFee·baseFeeScalar + l1BlobBaseFee·blobBaseFeeScalar) / 1e12.
  const size = fjordSizeScaled(flzCompressLen(Buffer.from(raw.slice(2), 'hex')));
  return (size * (16n * L1_BASE_FEE * BASE_FEE_SCALAR + L1_BLOB_BASE_FEE * BLOB_BASE_FEE_SCALAR)) / 1_000_000_000_000n;
}

function operatorFee(spec: 'isthmus' | 'jovian', gasUsed: bigint): bigint {
  return spec === 'jovian' ? gasUsed * OPERATOR_FEE_SCALAR * 100n + OPERATOR_FEE_CONSTANT : (gasUsed * OPERATOR_FEE_SCALAR) / 1_000_000n + OPERATOR_FEE_CONSTANT;
}

async function nodeBalance(a: string): Promise<bigint> {
  return BigInt(await rpcCall<string>(node.url, 'eth_getBalance', [a, head.number]));
}

for (const spec of ['isthmus', 'jovian'] as const) {
  t.test(`${spec}: the sender pays gasUsed × effectiveGasPrice + L1 fee + the ${spec} operator fee, and each fee vault gets its part`, async (t) => {
    const e = new RevmEngine({
      node: { url: node.url },
      specAt: () => spec,
    });
    t.teardown(() => e.stop());
    const number = Number(head.number);
    await e.start(number);
    const out = await e.applyFlashblock({
      blockNumber: number + 1,
      index: 0,
      env: {
        number: number + 1,
        timestamp: Number(head.timestamp) + 2,
        baseFeePerGas: baseFee,
        feeRecipient: COINBASE,
        gasLimit: 30_000_000n,
        prevRandao: `0x${'ab'.repeat(32)}`,
        parentHash: head.hash,
        parentBeaconBlockRoot: `0x${'00'.repeat(32)}`,
      },
      txs: txBatch([raw]),
      receiptsRoot: null,
    });
    if (!out.ok) throw new Error(`not executed: ${out.reason}: ${out.message}`);
    const r = out.receipts[0]!;
    t.equal(r.status, true, 'the transaction succeeded');
    const gasUsed = BigInt(r.gasUsed);
    const l1 = l1Fee();
    const op = operatorFee(spec, gasUsed);
    t.ok(l1 > 0n && op > 0n, `non-zero L1 fee (${l1}) and operator fee (${op})`);
    const paid = (await nodeBalance(sender.address)) - (await e.getBalance(sender.address));
    t.equal(paid, 5n + gasUsed * (baseFee + tip) + l1 + op, `sender: value + ${gasUsed} gas × ${baseFee + tip} + ${l1} + ${op}`);
    t.equal((await e.getBalance(BASE_FEE_VAULT)) - (await nodeBalance(BASE_FEE_VAULT)), gasUsed * baseFee, 'base fee vault: gasUsed × base fee');
    t.equal((await e.getBalance(L1_FEE_VAULT)) - (await nodeBalance(L1_FEE_VAULT)), l1, 'L1 fee vault: the L1 fee');
    t.equal((await e.getBalance(OPERATOR_FEE_VAULT)) - (await nodeBalance(OPERATOR_FEE_VAULT)), op, 'operator fee vault: the operator fee');
    t.equal((await e.getBalance(COINBASE)) - (await nodeBalance(COINBASE)), gasUsed * tip, 'fee recipient: gasUsed × tip');
  });
}
