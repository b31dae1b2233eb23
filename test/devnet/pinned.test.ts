// The devnet's node proxy lets reads pinned to a sealed block pass while flashblocks are built: which bodies count as
// such, and that every answer is the sealed block's true state while builds keep changing the accounts read.
import t from 'tap';
import { toHex } from 'viem';
import { rpcBatch } from '../../scripts/devnet/anvil.js';
import { sealedPin, startDevnet, type SealedChain } from '../../scripts/devnet/sequencer.js';
import { startTraffic } from '../../scripts/devnet/traffic.js';

const H5 = `0x${'55'.repeat(32)}`;
const H9 = `0x${'99'.repeat(32)}`;
const chain: SealedChain = { head: 7, hashes: new Map([[H5, 5], [H9, 9]]) };
const A = '0x' + '11'.repeat(20);
const call = (method: string, params: unknown[]): object => ({ jsonrpc: '2.0', id: 1, method, params });
const body = (v: unknown): Buffer => Buffer.from(JSON.stringify(v));

t.test('a body counts as pinned to a sealed block only when every call reads a sealed block by number or hash', async (t) => {
  const cases: [string, unknown, number | null][] = [
    ['balance at the sealed head', call('eth_getBalance', [A, '0x7']), 7],
    ['nonce below the head', call('eth_getTransactionCount', [A, '0x2']), 2],
    ['code at block 0', call('eth_getCode', [A, '0x0']), 0],
    ['storage: the block is the third parameter', call('eth_getStorageAt', [A, '0x0', '0x6']), 6],
    ['storage with a slot that looks like a block, no block', call('eth_getStorageAt', [A, '0x3']), null],
    ['call at a sealed number', call('eth_call', [{ to: A }, '0x7']), 7],
    ['header by number', call('eth_getBlockByNumber', ['0x4', false]), 4],
    ['EIP-1898 blockNumber', call('eth_getBalance', [A, { blockNumber: '0x3' }]), 3],
    ['EIP-1898 blockHash of a sealed block', call('eth_getBalance', [A, { blockHash: H5, requireCanonical: true }]), 5],
    ['EIP-1898 blockHash, upper-case hex', call('eth_getBalance', [A, { blockHash: H5.toUpperCase().replace('0X', '0x') }]), 5],
    ['the block in build', call('eth_getBalance', [A, '0x8']), null],
    ['a known hash above the head', call('eth_getBalance', [A, { blockHash: H9 }]), null],
    ['an unknown hash', call('eth_getBalance', [A, { blockHash: `0x${'ab'.repeat(32)}` }]), null],
    ['latest', call('eth_getBalance', [A, 'latest']), null],
    ['pending', call('eth_getTransactionCount', [A, 'pending']), null],
    ['no block parameter', call('eth_getBalance', [A]), null],
    ['call without a block', call('eth_call', [{ to: A }]), null],
    ['a quantity too long to be a block number', call('eth_getBalance', [A, '0x' + 'f'.repeat(17)]), null],
    ['a submission', call('eth_sendRawTransaction', ['0x07']), null],
    ['a pool read', call('txpool_status', []), null],
    ['a method named like an Object property', call('constructor', [A, '0x1']), null],
    ['batch, all sealed: the newest', [call('eth_getBalance', [A, '0x2']), call('eth_getCode', [A, '0x7'])], 7],
    ['batch with one latest', [call('eth_getBalance', [A, '0x2']), call('eth_getCode', [A, 'latest'])], null],
    ['empty batch', [], null],
    ['batch with a non-object', [call('eth_getBalance', [A, '0x2']), 3], null],
    ['params not an array', { jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: { a: 1 } }, null],
  ];
  for (const [name, v, want] of cases) t.equal(sealedPin(body(v), chain), want, name);
  t.equal(sealedPin(Buffer.from('{"method":"eth_getBalance",'), chain), null, 'not JSON');
  t.equal(sealedPin(Buffer.alloc(0), chain), null, 'empty body');
});

t.test('reads pinned to the sealed head, by number and by hash, answer its true state while builds change those accounts', async (t) => {
  const devnet = await startDevnet({ blockTimeMs: 1000, flashblockMs: 200 });
  t.teardown(() => devnet.stop());
  const senders = devnet.accounts.slice(0, 4);
  // The senders and the fee vaults change in every block with traffic.
  const accounts = [...senders.map((a) => a.address.toLowerCase()), '0x4200000000000000000000000000000000000011', '0x4200000000000000000000000000000000000019'];
  let head = -1;
  const hashOf = new Map<number, string>();
  devnet.onFlashblock((fb) => {
    if (fb.index !== 0) return;
    hashOf.set(fb.blockNumber - 1, fb.base!.parent_hash!);
    head = fb.blockNumber - 1;
  });
  const traffic = await startTraffic({ rpcUrl: devnet.nodeRpcUrl, chainId: devnet.chainId, accounts: senders, txPerSec: 60 });
  t.teardown(() => traffic.stop());

  // Every answer, by `number|method|address|by`, as read through the proxy while the devnet builds.
  const answers = new Map<string, Set<string>>();
  let reads = 0;
  let stop = false;
  const reader = async (byHash: boolean): Promise<void> => {
    while (!stop) {
      const n = head;
      const tag = byHash ? { blockHash: hashOf.get(n) } : toHex(n);
      const calls = accounts.flatMap((a): [string, unknown[]][] => [
        ['eth_getBalance', [a, tag]],
        ['eth_getTransactionCount', [a, tag]],
      ]);
      const res = await rpcBatch(devnet.nodeRpcUrl, calls);
      res.forEach((r, i) => {
        const key = `${n}|${calls[i]![0]}|${calls[i]![1][0]}|${byHash ? 'hash' : 'number'}`;
        const v = r.ok ? String(r.value) : `error: ${r.error.message}`;
        let seen = answers.get(key);
        if (seen === undefined) answers.set(key, (seen = new Set()));
        seen.add(v);
        reads++;
      });
      // A breath between batches: two readers still read every ~200 ms build many times over, without spending two
      // cores of the suite's time on it.
      await new Promise((r) => setTimeout(r, 3));
    }
  };
  const first = devnet.stats().blocks;
  while (head < 1) await new Promise((r) => setTimeout(r, 20));
  const readers = [reader(false), reader(true)];
  // At least 7 sealed blocks of traffic (≈ 5 builds each) under the readers, however slow the machine.
  while (devnet.stats().blocks < first + 9) await new Promise((r) => setTimeout(r, 100));
  stop = true;
  await Promise.all(readers);
  await traffic.stop();
  // The truth, once every block read is below anvil's best block (no build can touch its state any more).
  const last = head;
  while (head < last + 2) await new Promise((r) => setTimeout(r, 50));
  const keys = [...answers.keys()];
  const truth = await rpcBatch(
    devnet.anvilUrl,
    keys.map((k): [string, unknown[]] => {
      const [n, method, a] = k.split('|');
      return [method!, [a, toHex(Number(n))]];
    }),
  );
  const truthOf = new Map<string, string>();
  const wrong: string[] = [];
  const noTruth = keys.filter((_, i) => !truth[i]!.ok);
  t.same(noTruth, [], 'anvil still answers every block read');
  keys.forEach((k, i) => {
    const r = truth[i]!;
    const want = r.ok ? String(r.value) : '';
    truthOf.set(k.split('|').slice(0, 3).join('|'), want);
    for (const v of answers.get(k)!) if (v !== want) wrong.push(`${k}: ${v}, sealed ${want}`);
  });
  t.same(wrong.slice(0, 10), [], `every pinned read answered the sealed state (${wrong.length} of ${reads} differ)`);
  // The blocks under the readers did change what they read: the senders' nonces moved from block to block.
  const numbers = [...new Set(keys.map((k) => Number(k.split('|')[0])))].sort((a, b) => a - b);
  let changed = 0;
  for (const n of numbers) {
    if (!numbers.includes(n + 1)) continue;
    const moved = senders.some((s) => {
      const k = (m: number): string => `${m}|eth_getTransactionCount|${s.address.toLowerCase()}`;
      return truthOf.get(k(n)) !== truthOf.get(k(n + 1));
    });
    if (moved) changed++;
  }
  t.ok(changed >= 5, `blocks that changed the accounts read: ${changed} of ${numbers.length - 1}`);
  t.ok(keys.some((k) => k.endsWith('|hash')), 'reads by hash were made');
  const st = devnet.stats();
  t.equal(st.cycleErrors + st.prefixViolations + st.hashMismatches, 0, 'the devnet stayed consistent');
});
