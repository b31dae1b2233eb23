// The L1 fee calculator against a real EVM: anvil --optimism (op-revm) charges the L1 data fee (and the operator fee)
// from its L1Block storage. The L1Block slots are set (with anvil_setStorageAt, or as the devnet does, by an Isthmus
// L1-info deposit to the L1Block code it installs), read back with eth_getStorageAt and fed to the calculator;
// for each signed transaction, the sender's balance drop minus value minus gasUsed × effectiveGasPrice must equal
// the calculator's l1Fee (+ operator fee) exactly. (anvil 1.7.1 charges the Fjord cost under every OP hardfork name,
// `--hardfork ecotone` included, so the Ecotone rules are checked against op-geth's vectors only: l1fee.test.ts.)
import t, { type Test } from 'tap';
import { bytesToHex, hexToBytes, toHex, type Hex, type TransactionSerializable } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { rpcCall, startAnvil, type Anvil } from '../../scripts/devnet/anvil.js';
import { devAccounts } from '../../scripts/devnet/sequencer.js';
import { devnetL1Attributes, installL1Block, l1InfoDeposit } from '../../scripts/devnet/l1block.js';
import { L1_BLOCK_ADDRESS, operatorFee, txL1Fee, type L1Attributes } from '../../src/chain/l1fee.js';

const CHAIN_ID = 901;

/** Storage of the L1Block predeploy (op-geth rollup_cost.go, op-revm constants): slot → 32-byte word. */
interface Slots {
  l1BaseFee: bigint;
  l1BlobBaseFee: bigint;
  baseFeeScalar: bigint;
  blobBaseFeeScalar: bigint;
  operatorFeeScalar: bigint;
  operatorFeeConstant: bigint;
}

function word(parts: [bigint, number][]): Hex {
  // parts: [value, byte width] from the right end of the slot
  let hex = '';
  for (const [v, width] of parts) hex = v.toString(16).padStart(width * 2, '0') + hex;
  return ('0x' + hex.padStart(64, '0')) as Hex;
}

async function setSlots(node: Anvil, s: Slots): Promise<void> {
  const set = (slot: number, value: Hex) => rpcCall(node.url, 'anvil_setStorageAt', [L1_BLOCK_ADDRESS, toHex(slot), value]);
  await set(1, word([[s.l1BaseFee, 32]]));
  await set(7, word([[s.l1BlobBaseFee, 32]]));
  // Slot 3: sequenceNumber bytes [24,32), blobBaseFeeScalar [20,24), baseFeeScalar [16,20).
  await set(3, word([[0n, 8], [s.blobBaseFeeScalar, 4], [s.baseFeeScalar, 4]]));
  // Slot 8: operatorFeeConstant bytes [24,32), operatorFeeScalar [20,24).
  await set(8, word([[s.operatorFeeConstant, 8], [s.operatorFeeScalar, 4]]));
}

/** The attributes the calculator gets, read back from anvil's L1Block storage (not from what the test wrote). */
async function attributesFromStorage(node: Anvil): Promise<L1Attributes> {
  const get = async (slot: number) => hexToBytes((await rpcCall<Hex>(node.url, 'eth_getStorageAt', [L1_BLOCK_ADDRESS, toHex(slot), 'latest'])));
  const uint = (b: Uint8Array, from: number, to: number) => BigInt(bytesToHex(b.subarray(from, to)));
  const s1 = await get(1);
  const s3 = await get(3);
  const s7 = await get(7);
  const s8 = await get(8);
  return {
    layout: 'isthmus',
    baseFeeScalar: uint(s3, 16, 20),
    blobBaseFeeScalar: uint(s3, 20, 24),
    sequenceNumber: uint(s3, 24, 32),
    l1BlockTimestamp: 0n,
    l1BlockNumber: 0n,
    l1BaseFee: uint(s1, 0, 32),
    l1BlobBaseFee: uint(s7, 0, 32),
    l1BlockHash: '0x' + '00'.repeat(32),
    batcherHash: '0x' + '00'.repeat(32),
    operatorFeeScalar: uint(s8, 20, 24),
    operatorFeeConstant: uint(s8, 24, 32),
    daFootprintGasScalar: null,
  };
}

/** Deterministic pseudo-random bytes (xorshift), so every run signs the same transactions. */
function noise(n: number, seed: number): Hex {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return bytesToHex(out);
}

const SINK = '0x000000000000000000000000000000000000beef' as Hex;
const FEES = { maxFeePerGas: 5_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n };

type Case = [string, Omit<TransactionSerializable, 'nonce' | 'chainId'>];

/** Transactions of every type and of very different sizes and compressibility. */
async function cases(node: Anvil): Promise<Case[]> {
  const rows: Case[] = [
    ['legacy transfer (EIP-155)', { type: 'legacy', to: SINK, value: 7n, gas: 30_000n, gasPrice: 4_000_000_000n }],
    ['EIP-2930 with an access list', { type: 'eip2930', to: SINK, value: 1n, gas: 60_000n, gasPrice: 4_000_000_000n, accessList: [{ address: SINK, storageKeys: [toHex(1, { size: 32 }), toHex(2, { size: 32 })] }] }],
    ['EIP-1559 transfer (at the Fjord minimum size)', { type: 'eip1559', to: SINK, value: 3n, gas: 30_000n, ...FEES }],
    ['EIP-1559, 300 bytes of random calldata', { type: 'eip1559', to: SINK, value: 0n, gas: 100_000n, data: noise(300, 11), ...FEES }],
    ['EIP-1559, 2 KB of random calldata', { type: 'eip1559', to: SINK, value: 0n, gas: 200_000n, data: noise(2048, 7), ...FEES }],
    ['EIP-1559, 4 KB of zero calldata (compresses well)', { type: 'eip1559', to: SINK, value: 0n, gas: 200_000n, data: ('0x' + '00'.repeat(4096)) as Hex, ...FEES }],
    ['EIP-1559, 600 bytes of repeating text', { type: 'eip1559', to: SINK, value: 0n, gas: 100_000n, data: bytesToHex(Buffer.from('flashblocks '.repeat(50))), ...FEES }],
  ];
  // Initcode that returns 64 bytes of runtime code: PUSH1 0x40 PUSH1 0x0c PUSH1 0 CODECOPY PUSH1 0x40 PUSH1 0 RETURN.
  rows.push(['contract creation', { type: 'eip1559', value: 0n, gas: 300_000n, data: ('0x6040600c60003960406000f3' + noise(64, 3).slice(2)) as Hex, ...FEES }]);
  // EIP-7702: another dev account delegates to SINK (its authorization signed at its current nonce).
  const authority = privateKeyToAccount(devAccounts(2)[1]!.privateKey as Hex);
  const authNonce = Number(await rpcCall<Hex>(node.url, 'eth_getTransactionCount', [authority.address, 'latest']));
  const authorization = await authority.signAuthorization({ contractAddress: SINK, chainId: CHAIN_ID, nonce: authNonce });
  rows.push(['EIP-7702 with one authorization', { type: 'eip7702', to: authority.address, value: 0n, gas: 100_000n, authorizationList: [authorization], ...FEES }]);
  return rows;
}

/**
 * Writes the slots as the devnet does: a real Isthmus L1-info deposit (scripts/devnet/l1block.ts) to the L1Block code
 * the devnet installs, mined in a block of its own; the slots it wrote then hold for the blocks after it.
 */
async function depositSlots(node: Anvil, s: Slots): Promise<void> {
  const head = Number(await rpcCall<Hex>(node.url, 'eth_blockNumber'));
  const attrs = { ...devnetL1Attributes(head + 1), ...s };
  const hash = await rpcCall<Hex>(node.url, 'eth_sendRawTransaction', [l1InfoDeposit(attrs)]);
  await rpcCall(node.url, 'evm_mine');
  const r = await rpcCall<{ status: Hex } | null>(node.url, 'eth_getTransactionReceipt', [hash]);
  if (r?.status !== '0x1') throw new Error(`the L1-info deposit failed: ${JSON.stringify(r)}`);
}

/** Sends each case in its own block and compares what anvil charged with the calculator's answer. */
async function crossCheck(t: Test, node: Anvil, slots: Slots, write: (node: Anvil, s: Slots) => Promise<void> = setSlots): Promise<void> {
  await write(node, slots);
  const attrs = await attributesFromStorage(node);
  t.match(attrs, slots, 'the slots read back hold the parameters written');
  const account = privateKeyToAccount(devAccounts(1)[0]!.privateKey as Hex);
  let nonce = Number(await rpcCall<Hex>(node.url, 'eth_getTransactionCount', [account.address, 'latest']));
  for (const [name, fields] of await cases(node)) {
    const raw = await account.signTransaction({ ...fields, nonce, chainId: CHAIN_ID } as TransactionSerializable);
    nonce++;
    const before = BigInt(await rpcCall<Hex>(node.url, 'eth_getBalance', [account.address, 'latest']));
    const hash = await rpcCall<Hex>(node.url, 'eth_sendRawTransaction', [raw]);
    await rpcCall(node.url, 'evm_mine');
    const r = await rpcCall<{ status: Hex; gasUsed: Hex; effectiveGasPrice: Hex } | null>(node.url, 'eth_getTransactionReceipt', [hash]);
    if (r === null) {
      t.fail(`${name}: not mined`);
      continue;
    }
    t.equal(r.status, '0x1', `${name}: succeeded`);
    const after = BigInt(await rpcCall<Hex>(node.url, 'eth_getBalance', [account.address, 'latest']));
    const charged = before - after - (fields.value ?? 0n) - BigInt(r.gasUsed) * BigInt(r.effectiveGasPrice);
    const f = txL1Fee(hexToBytes(raw), attrs);
    const op = operatorFee(BigInt(r.gasUsed), attrs);
    t.ok(f.l1Fee! > 0n, `${name}: a non-zero L1 fee (${f.l1Fee} wei, l1GasUsed ${f.l1GasUsed}, ${(raw.length - 2) / 2} bytes)`);
    t.equal(charged, f.l1Fee! + op, `${name}: anvil charged l1Fee ${f.l1Fee} + operator fee ${op}`);
  }
}

// Base mainnet block 21713817's attributes (op-reth's vector) and the Unichain Sepolia capture's (tiny L1 prices).
const BASE: Slots = { l1BaseFee: 14_121_491_676n, l1BlobBaseFee: 1_324_954_204n, baseFeeScalar: 2269n, blobBaseFeeScalar: 1_055_762n, operatorFeeScalar: 0n, operatorFeeConstant: 0n };
const UNICHAIN: Slots = { l1BaseFee: 9n, l1BlobBaseFee: 1n, baseFeeScalar: 2000n, blobBaseFeeScalar: 900_000n, operatorFeeScalar: 0n, operatorFeeConstant: 0n };

t.test('isthmus (Fjord L1 cost): anvil charges exactly the computed l1Fee', async (t) => {
  const node = await startAnvil({ hardfork: 'isthmus', chainId: CHAIN_ID });
  t.teardown(() => node.stop());
  await t.test('Base mainnet parameters', (t) => crossCheck(t, node, BASE));
  await t.test('Unichain Sepolia capture parameters', (t) => crossCheck(t, node, UNICHAIN));
  await t.test('with an operator fee (Isthmus formula)', (t) => crossCheck(t, node, { ...BASE, operatorFeeScalar: 1_500_000n, operatorFeeConstant: 1_000_000n }));
});

t.test('isthmus, the devnet way: an L1-info deposit to the devnet L1Block code sets what anvil charges', async (t) => {
  const node = await startAnvil({ hardfork: 'isthmus', chainId: CHAIN_ID });
  t.teardown(() => node.stop());
  await installL1Block(node.url);
  await t.test('with an operator fee (Isthmus formula)', (t) => crossCheck(t, node, { ...BASE, operatorFeeScalar: 1_500_000n, operatorFeeConstant: 1_000_000n }, depositSlots));
});
