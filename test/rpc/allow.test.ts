// The forwarding allow-list against a real anvil: node-signed, dev and admin methods are refused with -32601 and a
// message naming --forward-methods, never reaching the node (anvil's state does not change); the standard read and
// submit methods are forwarded, singly and in batches; --forward-methods and --allow-namespaces widen the list.
import t from 'tap';
import { privateKeyToAccount } from 'viem/accounts';
import { parseEther } from 'viem';
import { RpcCode } from '../../src/errors.js';
import { DEFAULT_FORWARD_METHODS, ForwardPolicy } from '../../src/rpc/allow.js';
import { startAnvil, startRpc } from '../helpers/rpc-harness.js';

const anvil = await startAnvil();
t.teardown(() => anvil.stop());
/** anvil's first dev account (the default mnemonic). */
const DEV = privateKeyToAccount('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80');
const OTHER = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8';

type Env = { id: unknown; result?: unknown; error?: { code: number; message: string } };

/** Methods that sign with the node's keys, change a dev node, or administer it. */
const REFUSED: [string, unknown[]][] = [
  ['eth_accounts', []],
  ['eth_sendTransaction', [{ from: DEV.address, to: OTHER, value: '0x1' }]],
  ['eth_sign', [DEV.address, '0xdeadbeef']],
  ['eth_signTransaction', [{ from: DEV.address, to: OTHER, value: '0x1' }]],
  ['eth_signTypedData_v4', [DEV.address, '{}']],
  ['personal_sign', ['0xdeadbeef', DEV.address]],
  ['anvil_setBalance', [OTHER, '0x1']],
  ['anvil_impersonateAccount', [OTHER]],
  ['anvil_mine', ['0x5']],
  ['hardhat_setBalance', [OTHER, '0x1']],
  ['evm_mine', []],
  ['evm_snapshot', []],
  ['admin_nodeInfo', []],
  ['debug_traceTransaction', ['0x' + '00'.repeat(32)]],
  ['miner_start', []],
  ['engine_newPayloadV3', []],
  ['txpool_content', []],
  ['eth_noSuchMethod', []],
];

t.test('the default list holds the standard methods and none of the dangerous ones', async (tt) => {
  const p = new ForwardPolicy([]);
  for (const m of ['eth_chainId', 'eth_call', 'eth_getLogs', 'eth_sendRawTransaction', 'eth_sendRawTransactionSync', 'eth_feeHistory', 'net_version', 'web3_clientVersion']) {
    tt.ok(p.allows(m), `${m} is forwarded`);
  }
  for (const [m] of REFUSED) tt.notOk(p.allows(m), `${m} is refused`);
  tt.notOk(DEFAULT_FORWARD_METHODS.some((m) => /^eth_(accounts|sendTransaction|sign)/.test(m)), 'no node-signed method in the list');
});

t.test('node-signed, dev and admin methods are refused with the flag to allow them, and never reach the node', async (tt) => {
  const h = await startRpc({ nodeUrl: anvil.url });
  tt.teardown(() => h.close());
  const heightBefore = await anvil.rpc<string>('eth_blockNumber');
  const balanceBefore = await anvil.rpc<string>('eth_getBalance', [OTHER, 'latest']);
  const requestsBefore = h.nodeRequests();
  for (const [m, params] of REFUSED) {
    const r = await h.call(m, params);
    tt.equal(r.error?.code, RpcCode.METHOD_NOT_FOUND, `${m} → -32601`);
    tt.match(r.error?.message, `--forward-methods ${m}`, `${m}: the message names the flag and the method`);
  }
  tt.equal(h.nodeRequests(), requestsBefore, 'no refused call reached the node');
  tt.equal(await anvil.rpc<string>('eth_blockNumber'), heightBefore, 'anvil mined nothing');
  tt.equal(await anvil.rpc<string>('eth_getBalance', [OTHER, 'latest']), balanceBefore, 'no balance changed');
});

t.test('standard read and submit methods are still forwarded', async (tt) => {
  const h = await startRpc({ nodeUrl: anvil.url });
  tt.teardown(() => h.close());
  tt.equal((await h.call('eth_chainId')).result, '0x7a69');
  tt.equal((await h.call('net_version')).result, '31337');
  tt.match((await h.call('web3_clientVersion')).result, /anvil/i);
  tt.type((await h.call('eth_gasPrice')).result, 'string');
  tt.type((await h.call('eth_maxPriorityFeePerGas')).result, 'string');
  tt.match((await h.call('eth_feeHistory', ['0x1', 'latest', []])).result, { oldestBlock: String });
  tt.equal((await h.call('eth_getCode', [OTHER, 'latest'])).result, '0x');
  const nonce = Number((await h.call('eth_getTransactionCount', [DEV.address, 'latest'])).result);
  const raw = await DEV.signTransaction({ chainId: 31337, type: 'eip1559', to: OTHER, value: parseEther('0.001'), nonce, gas: 21000n, maxFeePerGas: 10n ** 10n, maxPriorityFeePerGas: 1n });
  const sent = await h.call('eth_sendRawTransaction', [raw]);
  tt.match(sent.result, /^0x[0-9a-f]{64}$/, 'eth_sendRawTransaction (client-signed) is forwarded');
  // anvil's automine answers the send before the block is sealed: wait for the receipt (bounded), then check it.
  let receipt: { status?: string } | null = null;
  for (let i = 0; i < 200 && receipt === null; i++) {
    receipt = (await h.call('eth_getTransactionReceipt', [sent.result])).result as { status?: string } | null;
    if (receipt === null) await new Promise((r) => setTimeout(r, 10));
  }
  tt.equal(receipt?.status, '0x1', 'and anvil mined it');
});

t.test('a batch: refused items answered locally, the standard ones forwarded as one upstream batch', async (tt) => {
  const h = await startRpc({ nodeUrl: anvil.url });
  tt.teardown(() => h.close());
  const before = h.nodeRequests();
  const body = [
    { jsonrpc: '2.0', id: 1, method: 'eth_chainId' },
    { jsonrpc: '2.0', id: 2, method: 'eth_accounts' },
    { jsonrpc: '2.0', id: 3, method: 'net_version' },
    { jsonrpc: '2.0', id: 4, method: 'anvil_setBalance', params: [OTHER, '0x1'] },
    { jsonrpc: '2.0', id: 5, method: 'web3_clientVersion' },
  ];
  const r = JSON.parse((await h.post(JSON.stringify(body))).text) as Env[];
  tt.same(r.map((x) => x.id), [1, 2, 3, 4, 5], 'request order kept');
  tt.equal(r[0]!.result, '0x7a69');
  tt.equal(r[1]!.error?.code, RpcCode.METHOD_NOT_FOUND);
  tt.match(r[1]!.error?.message, '--forward-methods eth_accounts');
  tt.equal(r[2]!.result, '31337');
  tt.equal(r[3]!.error?.code, RpcCode.METHOD_NOT_FOUND);
  tt.match(r[3]!.error?.message, '--forward-methods anvil_setBalance');
  tt.type(r[4]!.result, 'string');
  tt.equal(h.nodeRequests() - before, 1, 'one upstream request for the three forwarded items');
});

t.test('--forward-methods and --allow-namespaces forward more', async (tt) => {
  const h = await startRpc({ nodeUrl: anvil.url, config: { forwardMethods: ['eth_accounts', 'evm_*'], allowNamespaces: ['txpool'] } });
  tt.teardown(() => h.close());
  tt.ok(((await h.call('eth_accounts')).result as string[]).length > 0, 'eth_accounts by name');
  tt.match((await h.call('evm_snapshot')).result, /^0x/, 'evm_* as a namespace pattern');
  tt.same((await h.call('txpool_status')).result, { pending: '0x0', queued: '0x0' }, 'txpool by --allow-namespaces');
  tt.equal((await h.call('anvil_setBalance', [OTHER, '0x1'])).error?.code, RpcCode.METHOD_NOT_FOUND, 'anything else stays refused');
  tt.equal((await h.call('eth_sendTransaction', [{ from: DEV.address, to: OTHER, value: '0x1' }])).error?.code, RpcCode.METHOD_NOT_FOUND);

  const all = await startRpc({ nodeUrl: anvil.url, config: { forwardMethods: ['*'] } });
  tt.teardown(() => all.close());
  tt.type((await all.call('anvil_nodeInfo')).result, 'object', '* forwards everything');
});
