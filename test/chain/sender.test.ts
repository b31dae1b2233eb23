// Sender/authority recovery and CREATE addresses against ethers vectors, the execution-apis chain and ethers itself.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { computeAddress, getCreateAddress } from 'ethers';
import { decodeTransaction } from '../../src/chain/tx.js';
import { contractAddress, recoverAuthority, recoverSender, secp256k1IsNative } from '../../src/chain/sender.js';
import { keccak256Hex } from '../../src/chain/keccak.js';
import type { DecodedTx } from '../../src/chain/types.js';

const fixtures = fileURLToPath(new URL('../fixtures/', import.meta.url));
const json = (rel: string): any => JSON.parse(readFileSync(fixtures + rel, 'utf8'));
const chainTxs = (): any[] => json('execution-apis-derived/chain-transactions.json').blocks.flatMap((b: any) => b.transactions);

function decodeOk(raw: string): DecodedTx {
  const r = decodeTransaction(raw);
  if (!r.ok) throw new Error(`decode failed: ${r.reason}`);
  return r.tx;
}

t.test('the native secp256k1 binding is loaded here', async (t) => {
  t.equal(secp256k1IsNative, true);
});

t.test('ethers vectors: every signed legacy, EIP-155, Berlin, London and Cancun tx gives its hash and sender', async (t) => {
  const cases = JSON.parse(gunzipSync(readFileSync(fixtures + 'ethers-testcases/transactions.json.gz')).toString());
  const kinds = ['Legacy', 'Eip155', 'Berlin', 'London', 'Cancun'];
  const passed: Record<string, number> = {};
  const total: Record<string, number> = {};
  const failures: string[] = [];
  for (const c of cases) {
    const want = computeAddress(c.privateKey).toLowerCase();
    for (const k of kinds) {
      const raw: string = c[`signed${k}`];
      if (raw === '') continue; // not expressible for this random tx (no chain id, or no `to` for a blob tx)
      total[k] = (total[k] ?? 0) + 1;
      const r = decodeTransaction(raw);
      const ok = r.ok && recoverSender(r.tx) === want && r.tx.hash === keccak256Hex(Buffer.from(raw.slice(2), 'hex'));
      if (ok) passed[k] = (passed[k] ?? 0) + 1;
      else failures.push(`${c.name} ${k}: ${r.ok ? `sender ${r.tx.from}` : r.reason}`);
    }
  }
  t.same(failures.slice(0, 10), [], 'no mismatching vector');
  t.equal(failures.length, 0);
  t.comment(`ethers: ${kinds.map((k) => `${k} ${passed[k] ?? 0}/${total[k] ?? 0}`).join(', ')} ` +
    `(of ${cases.length} random txs; the rest have no chain id or no \`to\` for that type)`);
});

t.test('execution-apis chain: every transaction gives its sender, and the 7702 authority recovers', async (t) => {
  let passed = 0;
  let authorities = 0;
  const txs = chainTxs();
  for (const v of txs) {
    const tx = decodeOk(v.raw);
    const ok = recoverSender(tx) === v.sender;
    t.ok(ok, `${v.hash} (${v.type}) sender`);
    if (ok) passed++;
    for (const [i, a] of (v.authorizations ?? []).entries()) {
      t.equal(recoverAuthority((tx.authorizationList ?? [])[i]!), a.authority, `${v.hash} authorization ${i}`);
      authorities++;
    }
  }
  t.ok(authorities >= 1, 'the set-code transaction was seen');
  t.comment(`chain-transactions senders: ${passed}/${txs.length} passed; 7702 authorities: ${authorities}`);
});

t.test('native and @noble/curves recovery agree on real transactions', async (t) => {
  const txs = chainTxs().filter((_, i) => i % 5 === 0);
  for (const v of txs) {
    const native = recoverSender(decodeOk(v.raw), 'native');
    const noble = recoverSender(decodeOk(v.raw), 'noble');
    t.equal(noble, native, `${v.hash}`);
  }
});

t.test('recoverSender caches into tx.from and returns the cached value', async (t) => {
  const v = chainTxs()[0];
  const tx = decodeOk(v.raw);
  t.equal(tx.from, null, 'not recovered during decode');
  t.equal(recoverSender(tx), v.sender);
  t.equal(tx.from, v.sender, 'cached');
  tx.from = '0x000000000000000000000000000000000000beef';
  t.equal(recoverSender(tx), '0x000000000000000000000000000000000000beef', 'the cached value wins');
});

t.test('a deposit needs no recovery; an unrecoverable signature gives null', async (t) => {
  const dep = decodeOk(json('op-deposit/deposit-vectors.json').rawTransactions[0].raw);
  t.equal(recoverSender(dep), '0xdeaddeaddeaddeaddeaddeaddeaddeaddead0001');
  // ttRSValue/TransactionWithRvalueHigh: r is in range but is no curve point's x (EC_RECOVERY_FAIL).
  const vec = json('ethereum-tests/TransactionTests/ttRSValue/TransactionWithRvalueHigh.json');
  const tx = decodeOk((Object.values(vec)[0] as any).txbytes);
  t.equal(recoverSender(tx, 'native'), null);
  t.equal(recoverSender(tx, 'noble'), null);
  t.equal(tx.from, null, 'nothing cached on failure');
});

t.test('recoverAuthority rejects what EIP-7702 rejects', async (t) => {
  const tx = decodeOk(chainTxs().find((v) => v.type === '0x4').raw);
  const auth = (tx.authorizationList ?? [])[0]!;
  t.equal(recoverAuthority({ ...auth, yParity: 2 }), null, 'yParity 2');
  t.equal(recoverAuthority({ ...auth, s: 2n ** 255n }), null, 'high s');
  t.equal(recoverAuthority({ ...auth, r: 0n }), null, 'r = 0');
  t.not(recoverAuthority({ ...auth, nonce: auth.nonce + 1n }), recoverAuthority(auth), 'the nonce is signed');
});

t.test('contractAddress matches ethers getCreateAddress across nonce encodings', async (t) => {
  const from = '0x7435ed30a8b4aeb0877cef0c6e8cffe834eb865f';
  for (const nonce of [0n, 1n, 0x7fn, 0x80n, 0xffn, 0x100n, 0xc7n, 2n ** 32n, 2n ** 64n - 2n]) {
    t.equal(contractAddress(from, nonce), getCreateAddress({ from, nonce }).toLowerCase(), `nonce ${nonce}`);
  }
});
