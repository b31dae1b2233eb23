// Devnet sequencer against real anvil: flashblocks must be what anvil then seals (txs, receipts, balances, hash),
// and the stream variants (internal receipts, brotli, post-Azul) must change only what they promise to.
import t from 'tap';
import { brotliDecompressSync } from 'node:zlib';
import { keccak256, toHex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import WebSocket from 'ws';
import { rpcBatch, rpcCall } from '../../scripts/devnet/anvil.js';
import { startDevnet, type BuiltFlashblock, type Devnet } from '../../scripts/devnet/sequencer.js';
import { startTraffic } from '../../scripts/devnet/traffic.js';
import { encodeDepositFromRpc } from '../../scripts/devnet/deposit.js';
import { devnetL1Attributes, l1InfoDeposit, nodeChargedFees, nodeL1Attributes } from '../../scripts/devnet/l1block.js';
import { operatorFee, txL1Fee } from '../../src/chain/l1fee.js';

type Frame = { text: string; binary: boolean };

function collect(url: string): { frames: Frame[]; ws: WebSocket; open: Promise<void> } {
  const frames: Frame[] = [];
  const ws = new WebSocket(url);
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    frames.push({ text: isBinary ? brotliDecompressSync(data).toString() : data.toString(), binary: isBinary });
  });
  return { frames, ws, open: new Promise((r) => ws.once('open', () => r())) };
}

/** Groups messages by block number, keeping only blocks seen from index 0 up to the next block's index 0. */
function completeBlocks(msgs: any[]): Map<number, any[]> {
  const out = new Map<number, any[]>();
  for (const m of msgs) {
    const n = m.metadata.block_number as number;
    if (!out.has(n)) {
      if (m.index !== 0) continue;
      out.set(n, []);
    }
    out.get(n)!.push(m);
  }
  const last = Math.max(...out.keys());
  out.delete(last);
  return out;
}

/**
 * Records every flashblock the devnet publishes from now on; `next(pred)` resolves with the first one published after
 * the call that satisfies `pred`.
 */
function watchFlashblocks(devnet: Devnet): { seen: BuiltFlashblock[]; next: (pred: (fb: BuiltFlashblock) => boolean) => Promise<BuiltFlashblock> } {
  const seen: BuiltFlashblock[] = [];
  const arrived = new Set<() => void>();
  devnet.onFlashblock((fb) => {
    seen.push(fb);
    for (const fn of arrived) fn();
  });
  const next = (pred: (fb: BuiltFlashblock) => boolean): Promise<BuiltFlashblock> =>
    new Promise((resolve) => {
      const from = seen.length;
      const check = (): void => {
        const fb = seen.slice(from).find(pred);
        if (fb === undefined) return;
        arrived.delete(check);
        resolve(fb);
      };
      arrived.add(check);
    });
  return { seen, next };
}

t.test('flashblocks equal the canonical blocks anvil seals', async (t) => {
  const devnet = await startDevnet({ blockTimeMs: 1000, flashblockMs: 200 });
  t.teardown(() => devnet.stop());
  const base = devnet.flashblocksUrl;
  const plain = collect(base);
  const internal = collect(`${base}?receipts=internal`);
  const brotli = collect(`${base}?brotli=1`);
  const azul = collect(`${base}?azul=1`);
  const clients = [plain, internal, brotli, azul];
  t.teardown(() => clients.forEach((c) => c.ws.terminate()));
  await Promise.all(clients.map((c) => c.open));

  const traffic = await startTraffic({ rpcUrl: devnet.nodeRpcUrl, chainId: devnet.chainId, accounts: devnet.accounts.slice(0, 5), txPerSec: 60 });
  t.teardown(() => traffic.stop());
  // At least three full blocks after the first index 0 we saw, holding more than 20 transactions of every kind
  // (however slowly a busy machine lets the traffic land).
  const landed = (): boolean => {
    const blocks = completeBlocks(plain.frames.map((f) => JSON.parse(f.text)));
    const fbs = [...blocks.values()].flat();
    const kinds = new Set(fbs.flatMap((f) => Object.values<Record<string, unknown>>(f.metadata.receipts ?? {}).map((r) => Object.keys(r)[0])));
    return blocks.size >= 3 && fbs.reduce((n, f) => n + f.diff.transactions.length, 0) > 20 && kinds.size >= 5;
  };
  const deadline = Date.now() + 60_000;
  while (!landed() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  await traffic.stop();
  const blocks = completeBlocks(plain.frames.map((f) => JSON.parse(f.text)));
  t.ok(blocks.size >= 3, `saw ${blocks.size} complete blocks`);

  let txTotal = 0;
  const types = new Set<string>();
  for (const [n, fbs] of blocks) {
    const ids = new Set(fbs.map((f) => f.payload_id));
    t.equal(ids.size, 1, `block ${n}: one payload_id`);
    t.match([...ids][0], /^0x[0-9a-f]{16}$/, 'payload_id is 8-byte hex');
    t.same(fbs.map((f) => f.index), fbs.map((_, i) => i), `block ${n}: indexes contiguous from 0`);
    t.ok(fbs[0].base, 'index 0 has base');
    t.notOk(fbs.slice(1).some((f) => 'base' in f), 'later indexes have no base');

    const canon = await rpcCall(devnet.anvilUrl, 'eth_getBlockByNumber', [`0x${n.toString(16)}`, true]);
    // Deposits from their fields: anvil 1.7.1 aborts on eth_getRawTransactionByHash of a 0x7e tx.
    const objs: any[] = canon.transactions;
    const raws = await rpcBatch<string>(devnet.anvilUrl, objs.filter((x) => x.type !== '0x7e').map((x) => ['eth_getRawTransactionByHash', [x.hash]]));
    let next = 0;
    const want = objs.map((x) => (x.type === '0x7e' ? encodeDepositFromRpc(x) : ((r) => (r?.ok ? r.value : null))(raws[next++])));
    const txs = fbs.flatMap((f) => f.diff.transactions);
    t.same(txs, want, `block ${n}: concatenated txs equal the canonical block's`);
    txTotal += txs.length;

    const last = fbs[fbs.length - 1];
    t.equal(last.diff.block_hash, canon.hash, `block ${n}: last flashblock hash is the canonical hash`);
    t.same(
      [last.diff.state_root, last.diff.receipts_root, last.diff.logs_bloom, last.diff.gas_used, last.diff.withdrawals_root],
      [canon.stateRoot, canon.receiptsRoot, canon.logsBloom, canon.gasUsed, canon.withdrawalsRoot],
      'cumulative header fields',
    );
    const b = fbs[0].base;
    t.same(
      [b.parent_hash, b.fee_recipient, b.prev_randao, b.gas_limit, b.timestamp, b.extra_data, b.base_fee_per_gas, b.block_number],
      [canon.parentHash, canon.miner, canon.mixHash, canon.gasLimit, canon.timestamp, canon.extraData, canon.baseFeePerGas, canon.number],
      'base fields',
    );

    const receipts = await rpcCall<any[]>(devnet.anvilUrl, 'eth_getBlockReceipts', [canon.number]);
    const wire: Record<string, any> = Object.assign({}, ...fbs.map((f) => f.metadata.receipts));
    t.equal(Object.keys(wire).length, receipts.length, 'one receipt per tx');
    for (const r of receipts) {
      const tagged = wire[r.transactionHash];
      const [tag, body] = Object.entries<any>(tagged ?? {})[0] ?? [];
      types.add(String(tag));
      t.same(
        { status: body?.status, cumulativeGasUsed: body?.cumulativeGasUsed, logs: body?.logs },
        { status: r.status, cumulativeGasUsed: r.cumulativeGasUsed, logs: r.logs.map((l: any) => ({ address: l.address, topics: l.topics, data: l.data })) },
        `receipt of ${r.transactionHash}`,
        { diagnostic: false },
      );
    }
    const balances = last.metadata.new_account_balances as Record<string, string>;
    const addrs = Object.keys(balances);
    const got = await rpcBatch<string>(devnet.anvilUrl, addrs.map((a) => ['eth_getBalance', [a, canon.number]]));
    t.same(addrs.map((a) => balances[a]), got.map((g) => (g.ok ? g.value : null)), `block ${n}: balances`);
  }
  t.ok(txTotal > 20, `${txTotal} txs flashblocked`);
  t.same([...types].sort(), ['Deposit', 'Eip1559', 'Eip2930', 'Eip7702', 'Legacy'], 'every receipt variant appears');
  t.equal(devnet.stats().hashMismatches, 0, 'no sealed block differed from its last flashblock');

  // Variants: same flashblocks, different encodings.
  const key = (m: any): string => `${m.metadata.block_number}/${m.index}`;
  const plainByKey = new Map(plain.frames.map((f) => [key(JSON.parse(f.text)), f.text]));
  t.ok(plain.frames.every((f) => !f.binary), 'default frames are text');
  t.ok(brotli.frames.length > 0 && brotli.frames.every((f) => f.binary), 'brotli frames are binary');
  for (const f of brotli.frames) {
    const p = plainByKey.get(key(JSON.parse(f.text)));
    if (p !== undefined) t.equal(f.text, p, 'brotli frame decompresses to the text frame', { diagnostic: false });
  }
  for (const f of internal.frames) {
    const m = JSON.parse(f.text);
    const p = plainByKey.get(key(m));
    if (p === undefined) continue;
    const pm = JSON.parse(p);
    t.same(m.diff, pm.diff, 'internal: same diff', { diagnostic: false });
    for (const [h, r] of Object.entries<any>(m.metadata.receipts)) {
      const [tag, body] = Object.entries<any>(pm.metadata.receipts[h])[0]!;
      const type = { Legacy: '0x0', Eip2930: '0x1', Eip1559: '0x2', Eip7702: '0x4', Deposit: '0x7e' }[tag];
      t.same(r, { type, ...body }, 'internal receipt = type + external body', { diagnostic: false });
    }
  }
  for (const f of azul.frames) {
    const m = JSON.parse(f.text);
    t.same(Object.keys(m.metadata), ['block_number', 'access_list'], 'azul: metadata has no receipts/balances', { diagnostic: false });
    const p = plainByKey.get(key(m));
    if (p !== undefined) t.same(m.diff, JSON.parse(p).diff, 'azul: same diff', { diagnostic: false });
  }
});

t.test('a held seal waits for its holder: reads are answered, submissions go to the next block, the seal equals the last flashblock', async (t) => {
  const devnet = await startDevnet({ blockTimeMs: 1000, flashblockMs: 200 });
  t.teardown(() => devnet.stop());
  const { seen, next } = watchFlashblocks(devnet);

  let release: () => void = () => undefined;
  let held: (last: BuiltFlashblock) => void = () => undefined;
  const heldLast = new Promise<BuiltFlashblock>((r) => (held = r));
  let calls = 0;
  const remove = devnet.holdSeals((last) => {
    if (calls++ > 0) return Promise.resolve();
    held(last);
    return new Promise<void>((r) => (release = r));
  });
  const last = await heldLast;
  const n = last.blockNumber;
  t.equal(Number(await rpcCall(devnet.nodeRpcUrl, 'eth_blockNumber')), n - 1, `block ${n} is not sealed while held`);

  const account = privateKeyToAccount(devnet.accounts[0]!.privateKey);
  const nonce = Number(await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionCount', [account.address, 'latest']));
  const raw = await account.signTransaction({ chainId: devnet.chainId, nonce, type: 'eip1559', maxFeePerGas: 10n ** 10n, maxPriorityFeePerGas: 1n, gas: 21_000n, to: devnet.accounts[1]!.address, value: 1n });
  let accepted = false;
  const submitted = rpcCall<string>(devnet.nodeRpcUrl, 'eth_sendRawTransaction', [raw]).then((h) => ((accepted = true), h));
  // A read sent after the submission is answered while the submission waits for the seal.
  t.equal(Number(await rpcCall(devnet.nodeRpcUrl, 'eth_blockNumber')), n - 1, 'reads are answered during the hold');
  t.notOk(accepted, 'the submission waits while the seal is held');
  t.equal(seen.at(-1), last, 'nothing is published while the seal is held');

  // Every block opens with its L1-info deposit: the submission is the only other tx.
  const signedOf = (fb: BuiltFlashblock): string[] => fb.receipts.filter((r) => r.type !== 0x7e).map((r) => r.hash);
  const landed = next((fb) => signedOf(fb).length > 0);
  release();
  const hash = await submitted;
  const fb = await landed;
  t.equal(fb.blockNumber, n + 1, `the submission made during the hold landed in block ${n + 1}`);
  t.same(signedOf(fb), [hash], 'and only it');
  const sealed = await rpcCall(devnet.nodeRpcUrl, 'eth_getBlockByNumber', [toHex(n), false]);
  t.equal(sealed.hash, last.diff.block_hash, `block ${n} sealed as its last flashblock`);

  // Without a holder, blocks seal on their own again.
  remove();
  const heldSeals = devnet.stats().heldSeals;
  await next((x) => x.blockNumber >= n + 3);
  t.equal(devnet.stats().heldSeals, heldSeals, 'no seal held after the holder was removed');
  t.equal(devnet.stats().hashMismatches, 0, 'every sealed block equals its last flashblock');

  // A holder past its bound is counted, and the block sealed anyway.
  const forever = devnet.holdSeals(() => new Promise<void>(() => undefined), 100);
  const after = await next((x) => x.index === 0);
  forever();
  t.equal(devnet.stats().sealHoldTimeouts, 1, `the hold of block ${after.blockNumber - 1} expired; the block was sealed anyway`);
  t.equal(Number(await rpcCall(devnet.nodeRpcUrl, 'eth_blockNumber')), after.blockNumber - 1, 'the node shows it');

  // stop() ends a hold that would never end.
  let stuck: () => void = () => undefined;
  const holding = new Promise<void>((r) => (stuck = r));
  devnet.holdSeals(() => {
    stuck();
    return new Promise<void>(() => undefined);
  });
  await holding;
  await devnet.stop();
  t.pass('stop() returned during a hold');
});

t.test('a held build waits for its promise: no flashblock is published until it settles; a hold past its bound is counted', async (t) => {
  const devnet = await startDevnet({ blockTimeMs: 1000, flashblockMs: 200 });
  t.teardown(() => devnet.stop());
  const { seen, next } = watchFlashblocks(devnet);

  let release: () => void = () => undefined;
  const after = await new Promise<BuiltFlashblock>((resolve) => {
    const off = devnet.onFlashblock((fb) => {
      if (fb.index !== 1) return;
      off();
      devnet.holdNext(new Promise<void>((r) => (release = r)));
      resolve(fb);
    });
  });
  // Three flashblock intervals: the build after `after` was due long ago.
  await new Promise((r) => setTimeout(r, 600));
  t.equal(seen.at(-1), after, `nothing is published after ${after.blockNumber}/${after.index} while the build is held`);
  t.throws(() => devnet.holdNext(Promise.resolve()), /already set/, 'one hold at a time');
  const followingNext = next(() => true);
  release();
  const following = await followingNext;
  t.same([following.blockNumber, following.index], [after.blockNumber, after.index + 1], 'the held flashblock comes once released');
  t.equal(devnet.stats().heldBuilds, 1, 'counted as held');

  const afterExpiry = next(() => true);
  devnet.holdNext(new Promise<void>(() => undefined), 100);
  await afterExpiry;
  t.equal(devnet.stats().buildHoldTimeouts, 1, 'a hold past its bound expired; the devnet built anyway');
});

t.test('a tx priced between the block base fee and the base fee a re-mine above the gas target leaves stays in the block (issue 22 soak divergence)', async (t) => {
  // 3 s blocks: room for three flashblocks of the same block after its index 0 on a busy machine.
  const devnet = await startDevnet({ blockTimeMs: 3000, flashblockMs: 200 });
  t.teardown(() => devnet.stop());
  const { seen, next } = watchFlashblocks(devnet);

  const payer = privateKeyToAccount(devnet.accounts[8]!.privateKey);
  const burner = privateKeyToAccount(devnet.accounts[9]!.privateKey);
  const first = await next((fb) => fb.index === 0);
  const n = first.blockNumber;
  const baseFee = BigInt(first.base!.base_fee_per_gas!);
  const nonceOf = async (a: string): Promise<number> => Number(await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionCount', [a, 'pending']));
  // A legacy tx paying just the block's base fee (the soak's 2 gwei legacy txs once the base fee had climbed to
  // 1.997 gwei), then one that burns 8M gas (the gas target is 5M): the re-mine of that flashblock raises anvil's
  // base-fee tracker above the legacy tx's price, and the revert does not lower it again.
  const legacy = await payer.signTransaction({ chainId: devnet.chainId, nonce: await nonceOf(payer.address), type: 'legacy', gasPrice: baseFee + 1n, gas: 21_000n, to: burner.address, value: 1n });
  // Init code JUMPDEST PUSH1 0 JUMP: loops until its gas is gone.
  const heavy = await burner.signTransaction({ chainId: devnet.chainId, nonce: await nonceOf(burner.address), type: 'eip1559', maxFeePerGas: 10n * baseFee, maxPriorityFeePerGas: 1n, gas: 8_000_000n, data: '0x5b600056' });
  const legacyHash = await rpcCall<string>(devnet.nodeRpcUrl, 'eth_sendRawTransaction', [legacy]);
  const heavyHash = await rpcCall<string>(devnet.nodeRpcUrl, 'eth_sendRawTransaction', [heavy]);
  const emitted = await next((fb) => fb.receipts.some((r) => r.hash === heavyHash));
  t.equal(emitted.blockNumber, n, `both txs emitted in block ${n}`);
  t.ok(seen.some((fb) => fb.blockNumber === n && fb.receipts.some((r) => r.hash === legacyHash)), 'the legacy tx was emitted');
  t.ok(BigInt(emitted.diff.gas_used) > 5_000_000n, 'the block so far is above the gas target');
  // A later flashblock of the same block re-mines it: a tx sent now makes the builder do so. (Before the fix the
  // refused legacy tx left the pool as many txs as the builder had emitted, so it did not rebuild, and the seal
  // mined a block without the legacy tx: a canonical block that differed from its last flashblock.)
  const other = privateKeyToAccount(devnet.accounts[7]!.privateKey);
  const later = await other.signTransaction({ chainId: devnet.chainId, nonce: await nonceOf(other.address), type: 'eip1559', maxFeePerGas: 10n * baseFee, maxPriorityFeePerGas: 1n, gas: 21_000n, to: burner.address, value: 1n });
  const laterHash = await rpcCall<string>(devnet.nodeRpcUrl, 'eth_sendRawTransaction', [later]);
  const after = await next((fb) => fb.blockNumber > n || fb.receipts.some((r) => r.hash === laterHash));
  t.equal(after.blockNumber, n, `the later tx landed in block ${n} too`);
  const last = (await next((fb) => fb.blockNumber === n + 1)) && seen.filter((fb) => fb.blockNumber === n).at(-1)!;
  const sealed = await rpcCall(devnet.nodeRpcUrl, 'eth_getBlockByNumber', [toHex(n), false]);
  t.ok((sealed.transactions as string[]).includes(legacyHash), `the sealed block ${n} holds the legacy tx`);
  t.equal(sealed.receiptsRoot, last.diff.receipts_root, 'and its receipts root is the last flashblock\'s');
  t.equal(sealed.hash, last.diff.block_hash, 'and its hash');
  const st = devnet.stats();
  t.equal(st.resendErrors, 0, 'every re-submission after a revert was accepted');
  t.equal(st.prefixViolations, 0, 'every re-mine started with the emitted txs');
  t.equal(st.hashMismatches, 0, 'every sealed block equals its last flashblock');
});

t.test('every block opens with its L1-info deposit (Isthmus): the node stores the attributes and charges every tx both OP fees', async (t) => {
  const devnet = await startDevnet({ blockTimeMs: 1000, flashblockMs: 200 });
  t.teardown(() => devnet.stop());
  const { seen, next } = watchFlashblocks(devnet);
  const first = await next((fb) => fb.index === 0);
  const n = first.blockNumber;
  // Transfers and deploys (incompressible calldata of three sizes: L1 fees above the Fjord minimum) from three senders.
  const noise = (words: number): string => Array.from({ length: words }, (_, j) => keccak256(toHex(`l1-fee-${words}-${j}`)).slice(2)).join('');
  const hashes: string[] = [];
  for (let i = 0; i < 3; i++) {
    const a = privateKeyToAccount(devnet.accounts[i]!.privateKey);
    const nonce = Number(await rpcCall(devnet.nodeRpcUrl, 'eth_getTransactionCount', [a.address, 'pending']));
    const fees = { chainId: devnet.chainId, type: 'eip1559', maxFeePerGas: 10n ** 11n, maxPriorityFeePerGas: 1n } as const;
    const raws = [
      await a.signTransaction({ ...fees, nonce, gas: 21_000n, to: devnet.accounts[9]!.address, value: 1n }),
      await a.signTransaction({ ...fees, nonce: nonce + 1, gas: 200_000n, data: `0x6040600c60003960406000f3${noise(4 * (i + 1))}` }),
    ];
    for (const raw of raws) hashes.push(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_sendRawTransaction', [raw]));
  }
  const blockOf = (h: string): number | undefined => seen.find((fb) => fb.receipts.some((r) => r.hash === h))?.blockNumber;
  // Every tx in a flashblock and its block sealed (the next one has begun).
  await next(() => hashes.every((h) => blockOf(h) !== undefined && (seen.at(-1)?.blockNumber ?? 0) > blockOf(h)!));
  const last = Math.max(...hashes.map((h) => blockOf(h)!));
  t.equal(devnet.stats().l1InfoMisplaced, 0, 'every index 0 started with its L1-info deposit');

  let charged = 0;
  for (let b = n; b <= last; b++) {
    const fbs = seen.filter((fb) => fb.blockNumber === b);
    const want = devnetL1Attributes(b);
    t.equal(fbs[0]?.diff.transactions[0], l1InfoDeposit(want), `block ${b}: index 0 opens with its L1-info deposit`);
    t.equal(fbs[0]?.receipts[0]?.status, '0x1', `block ${b}: the deposit succeeded`);
    t.same(await nodeL1Attributes(devnet.nodeRpcUrl, b), want, `block ${b}: the node's L1Block storage holds its attributes`);
    const fees = await nodeChargedFees(devnet.nodeRpcUrl, b);
    const canon = await rpcCall(devnet.nodeRpcUrl, 'eth_getBlockByNumber', [toHex(b), true]);
    const receipts = await rpcCall<any[]>(devnet.nodeRpcUrl, 'eth_getBlockReceipts', [toHex(b)]);
    const raws = await rpcBatch<string>(devnet.nodeRpcUrl, canon.transactions.filter((x: any) => x.type !== '0x7e').map((x: any) => ['eth_getRawTransactionByHash', [x.hash]]));
    let k = 0;
    canon.transactions.forEach((x: any, i: number) => {
      const got = fees.get(x.hash.toLowerCase());
      if (x.type === '0x7e') {
        t.same(got, { l1Fee: 0n, operatorFee: 0n }, `block ${b} #${i}: the deposit pays no OP fee`);
        return;
      }
      const raw = raws[k++]!;
      const l1Fee = txL1Fee(Buffer.from((raw.ok ? raw.value : '0x').slice(2), 'hex'), want).l1Fee!;
      const op = operatorFee(BigInt(receipts[i].gasUsed), want);
      t.ok(l1Fee > 0n && op > 0n, `block ${b} #${i}: non-zero fees`);
      t.same(got, { l1Fee, operatorFee: op }, `block ${b} #${i}: the node charged l1Fee ${l1Fee} and operator fee ${op}`);
      charged++;
    });
  }
  t.equal(charged, hashes.length, `${charged} txs charged both fees`);
});
