// Devnet traffic generator: signs a steady mix of every tx type with anvil's dev accounts (viem, local nonces), adds
// user deposits (0x7e), and submits them to one JSON-RPC URL. Must not wait for mining (anvil mines only when the
// sequencer seals).
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { concatHex, getContractAddress, keccak256, numberToHex, pad, toHex, type Hex } from 'viem';
import { privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { rpcCall } from './anvil.js';
import { depositTx, ENV_RUNTIME, initOf, REFUND_RUNTIME } from './contracts.js';
import type { DevAccount } from './sequencer.js';

/**
 * What a generated transaction does; the EIP-2718 type follows from it. 'env' calls a contract that stores and logs
 * NUMBER, TIMESTAMP, BASEFEE, COINBASE and BLOCKHASH(NUMBER-1); 'refund' sets storage and clears it again; 'deposit'
 * is a user deposit (0x7e) minting ETH to a depositor that sends part of it on.
 */
export type TxKind = 'legacy' | 'eip2930' | 'eip1559' | 'eip7702' | 'deploy' | 'transfer' | 'revert' | 'env' | 'refund' | 'deposit';

/** Every kind, in a stable order (for per-kind tables). */
export const TX_KINDS: readonly TxKind[] = ['legacy', 'eip2930', 'eip1559', 'eip7702', 'deploy', 'transfer', 'revert', 'env', 'refund', 'deposit'];

/**
 * The default order of kinds, repeated: every kind appears within any 24 consecutive txs, and every other tx is an
 * 'env' call, so that at 10 tx/s or more one lands in (nearly) every 200 ms flashblock.
 */
export const DEFAULT_MIX: TxKind[] = [
  'eip1559', 'transfer', 'legacy', 'eip2930', 'refund', 'transfer', 'eip7702', 'revert', 'eip1559', 'deploy', 'legacy', 'deposit',
].flatMap((k): TxKind[] => ['env', k as TxKind]);

export interface TrafficOptions {
  /** Where to submit (anvil, the devnet's nodeRpcUrl, or flashblocksd). */
  rpcUrl: string;
  chainId: number;
  /**
   * Senders; the first deploys the token, env and refund contracts and funds the others with the token. Use accounts
   * nobody else signs for.
   */
  accounts: DevAccount[];
  /** Target rate in transactions per second. */
  txPerSec?: number;
  /** Stop after this many txs (the setup txs included); default unbounded. */
  maxTxs?: number;
  mix?: TxKind[];
  /**
   * Sends an extra 'env' call whenever none went out for this long (0: only where the mix puts them). Default 150 ms:
   * with the devnet's 200 ms flashblocks one lands in (nearly) every flashblock even at rates where the mix alone
   * gives one every other flashblock (`npm start`'s 5 tx/s); at 10 tx/s and more the mix alone does it.
   */
  envEveryMs?: number;
  /** Called for every accepted submission. */
  onSent?: (tx: SentTx) => void;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
}

/** One accepted submission. */
export interface SentTx {
  hash: Hex;
  kind: TxKind;
  /** The signer, or for a deposit its depositor. */
  from: Hex;
  /** The signed nonce; -1 for a deposit (it takes the depositor's account nonce when it executes). */
  nonce: number;
  /** performance.now() when the submission was started. */
  sentAtMs: number;
}

export interface TrafficStats {
  sent: number;
  byKind: Record<TxKind, number>;
  errors: number;
  lastError: string | null;
}

/** A running generator. */
export interface Traffic {
  /** The token every 'transfer'/'revert' tx calls. */
  readonly token: Hex;
  /** The env contract every 'env' tx calls, and the refund contract every 'refund' tx calls. */
  readonly env: Hex;
  readonly refund: Hex;
  /** Addresses deposits come from (each gets a share of them). */
  readonly depositors: readonly Hex[];
  /** The key-less 7702 authority every 'eip7702' tx delegates to the token. */
  readonly authority: Hex;
  stats(): TrafficStats;
  /** Stops sending and waits for in-flight submissions. */
  stop(): Promise<void>;
  /** Resolves when maxTxs have been submitted (never when unbounded). */
  done(): Promise<void>;
}

/** keccak256("Transfer(address,address,uint256)") */
const TRANSFER_TOPIC = 'ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';

/**
 * Hand-assembled token runtime (76 bytes). Any call is transfer(to = calldata[4:36], amount = calldata[36:68]):
 * balances live at storage slot = holder address; reverts when the caller's balance is short; emits
 * Transfer(caller, to, amount) with the amount as data.
 *   00 PUSH1 24 CALLDATALOAD CALLER SLOAD DUP2 DUP2 LT PUSH1 47 JUMPI   ; amt bal, revert if bal < amt
 *   0b DUP2 SWAP1 SUB CALLER SSTORE                                      ; bal[caller] -= amt
 *   10 PUSH1 04 CALLDATALOAD DUP1 SLOAD DUP3 ADD SWAP1 SSTORE            ; bal[to] += amt
 *   19 PUSH1 00 MSTORE PUSH1 04 CALLDATALOAD CALLER PUSH32 topic PUSH1 20 PUSH1 00 LOG3 STOP
 *   47 JUMPDEST PUSH1 00 DUP1 REVERT
 */
const TOKEN_RUNTIME = `0x60243533548181106047578190033355600435805482019055600052600435337f${TRANSFER_TOPIC}60206000a3005b600080fd` as Hex;
/**
 * Init code: bal[caller] = 2^128 - 1, then CODECOPY the runtime (at offset 0x1e) and RETURN it.
 *   00 PUSH16 ff..ff CALLER SSTORE PUSH1 4c DUP1 PUSH1 1e PUSH1 00 CODECOPY PUSH1 00 RETURN
 */
const TOKEN_INIT = `0x6f${'ff'.repeat(16)}3355604c80601e6000396000f3${TOKEN_RUNTIME.slice(2)}` as Hex;

/** Calldata of transfer(to, amount) as the token reads it. */
function transferData(to: Hex, amount: bigint): Hex {
  return concatHex(['0xa9059cbb', pad(to), pad(numberToHex(amount))]);
}

/** The token's init code (exported for tests that deploy it themselves). */
export const tokenInitCode: Hex = TOKEN_INIT;

const GWEI = 1_000_000_000n;

/**
 * Depositors deposits rotate over. anvil 1.7 pools every deposit under nonce 0 of its `from`, so two pooled deposits
 * from one address collide ("replacement transaction underpriced"); a depositor comes back only after 63 others,
 * by then its earlier deposit has been sealed (at 200 tx/s that is 7 s, several blocks). Deposits never come from a
 * signer: a deposit bumps its sender's nonce and would strand the signer's pooled txs.
 */
const DEPOSITORS = 64;

/**
 * Starts submitting signed transactions at `txPerSec`. The first account deploys the token and gives every other
 * account a share, so transfers from any sender succeed and 'revert' txs fail only for the amount they ask.
 */
export async function startTraffic(opts: TrafficOptions): Promise<Traffic> {
  const log = opts.log ?? (() => undefined);
  const mix = opts.mix ?? DEFAULT_MIX;
  const rate = opts.txPerSec ?? 20;
  const maxTxs = opts.maxTxs ?? Infinity;
  if (opts.accounts.length === 0) throw new Error('traffic needs at least one account');
  const signers: PrivateKeyAccount[] = opts.accounts.map((a) => privateKeyToAccount(a.privateKey));
  const nonces = await Promise.all(
    signers.map(async (s) => Number(await rpcCall<string>(opts.rpcUrl, 'eth_getTransactionCount', [s.address, 'pending']))),
  );
  const deployer = signers[0]!;
  const token = getContractAddress({ from: deployer.address, nonce: BigInt(nonces[0]!) });
  const envContract = getContractAddress({ from: deployer.address, nonce: BigInt(nonces[0]! + 1) });
  const refundContract = getContractAddress({ from: deployer.address, nonce: BigInt(nonces[0]! + 2) });
  // A fresh salt per generator: deposit hashes (from sourceHash) never repeat across runs on one chain.
  const salt = randomBytes(8).toString('hex');
  const depositors = Array.from({ length: DEPOSITORS }, (_, i) => keccak256(toHex(`devnet-depositor-${opts.chainId}-${i}`)).slice(0, 42) as Hex);
  let deposits = 0;
  let envCalls = 0;
  /** performance.now() of the last 'env' submission (see envEveryMs). */
  let lastEnvMs = 0;
  const st: TrafficStats = {
    sent: 0,
    byKind: Object.fromEntries(TX_KINDS.map((k) => [k, 0])) as Record<TxKind, number>,
    errors: 0,
    lastError: null,
  };
  const authority = privateKeyToAccount(keccak256(toHex(`devnet-7702-authority-${opts.chainId}`)));
  let authNonce = Number(await rpcCall<string>(opts.rpcUrl, 'eth_getTransactionCount', [authority.address, 'pending']));
  const inflight = new Set<Promise<void>>();
  let seq = 0;
  let stopped = false;

  const sink = (i: number): Hex => keccak256(toHex(`sink-${i}`)).slice(0, 42) as Hex;

  /** A user deposit: mints to a depositor, which pays part of it to a sink. */
  async function sendDeposit(): Promise<void> {
    const from = depositors[deposits % depositors.length]!;
    const sourceHash = keccak256(toHex(`devnet-deposit-${salt}-${deposits}`));
    const raw = depositTx(sourceHash, from, sink(seq), 10n ** 15n + BigInt(seq), 10n ** 14n + BigInt(seq), 100_000n);
    deposits++;
    seq++;
    const sentAtMs = performance.now();
    try {
      const hash = await rpcCall<Hex>(opts.rpcUrl, 'eth_sendRawTransaction', [raw]);
      st.sent++;
      st.byKind.deposit++;
      opts.onSent?.({ hash, kind: 'deposit', from, nonce: -1, sentAtMs });
    } catch (e) {
      st.errors++;
      st.lastError = e instanceof Error ? e.message : String(e);
      log('traffic: submission failed', { kind: 'deposit', from, error: st.lastError });
    }
  }

  async function send(kind: TxKind, who: number): Promise<void> {
    if (kind === 'deposit') return sendDeposit();
    const s = signers[who]!;
    const nonce = nonces[who]!;
    const fees = { maxFeePerGas: 3n * GWEI, maxPriorityFeePerGas: BigInt(1 + (seq % 1000)) };
    const peer = signers[(who + 1) % signers.length]!.address;
    const base = { chainId: opts.chainId, nonce };
    let signed: Hex;
    switch (kind) {
      case 'legacy':
        signed = await s.signTransaction({ ...base, type: 'legacy', gasPrice: 2n * GWEI, gas: 21_000n, to: sink(seq), value: 1000n + BigInt(seq) });
        break;
      case 'eip2930':
        signed = await s.signTransaction({
          ...base, type: 'eip2930', gasPrice: 2n * GWEI, gas: 60_000n, to: token, data: transferData(peer, 1n),
          accessList: [{ address: token, storageKeys: [pad(s.address), pad(peer)] }],
        });
        break;
      case 'eip1559':
        signed = await s.signTransaction({ ...base, type: 'eip1559', ...fees, gas: 21_000n, to: sink(seq), value: 7n });
        break;
      case 'eip7702': {
        // The authority is a key that never sends txs: a self-sponsored authorization (nonce + 1) leaves anvil's
        // pool waiting for a nonce that no pooled tx provides, stalling the sender (anvil 1.7).
        const auth = await authority.signAuthorization({ address: token, chainId: opts.chainId, nonce: authNonce });
        signed = await s.signTransaction({ ...base, type: 'eip7702', ...fees, gas: 100_000n, to: sink(seq), value: 1n, authorizationList: [auth] });
        break;
      }
      case 'deploy':
        signed = await s.signTransaction({ ...base, type: 'eip1559', ...fees, gas: 200_000n, data: TOKEN_INIT });
        break;
      case 'env':
        lastEnvMs = performance.now();
        // Alternating tx types: legacy and 1559 gas pricing both see the env.
        signed = envCalls++ % 3 === 0
          ? await s.signTransaction({ ...base, type: 'legacy', gasPrice: 2n * GWEI, gas: 200_000n, to: envContract })
          : await s.signTransaction({ ...base, type: 'eip1559', ...fees, gas: 200_000n, to: envContract });
        break;
      case 'refund':
        signed = await s.signTransaction({ ...base, type: 'eip1559', ...fees, gas: 150_000n, to: refundContract });
        break;
      case 'transfer':
        signed = await s.signTransaction({ ...base, type: 'eip1559', ...fees, gas: 60_000n, to: token, data: transferData(peer, BigInt(1 + (seq % 97))) });
        break;
      case 'revert':
        signed = await s.signTransaction({ ...base, type: 'eip1559', ...fees, gas: 60_000n, to: token, data: transferData(peer, 1n << 200n) });
        break;
    }
    nonces[who] = nonces[who]! + 1;
    seq++;
    const sentAtMs = performance.now();
    try {
      const hash = await rpcCall<Hex>(opts.rpcUrl, 'eth_sendRawTransaction', [signed]);
      st.sent++;
      st.byKind[kind]++;
      if (kind === 'eip7702') authNonce++;
      opts.onSent?.({ hash, kind, from: s.address, nonce, sentAtMs });
    } catch (e) {
      st.errors++;
      st.lastError = e instanceof Error ? e.message : String(e);
      log('traffic: submission failed', { kind, from: s.address, nonce, error: st.lastError });
      // The local nonce ran ahead of a rejected tx: take the pool's view again (kept when the node does not answer
      // either: the next submission's failure is logged).
      try {
        nonces[who] = Number(await rpcCall<string>(opts.rpcUrl, 'eth_getTransactionCount', [s.address, 'pending']));
      } catch {
        // the node is gone or stopping
      }
    }
  }

  // Setup, in nonce order of the deployer: the token, then a share for every other account.
  const track = (p: Promise<void>): void => {
    inflight.add(p);
    void p.finally(() => inflight.delete(p));
  };
  /** One setup tx from the deployer (EIP-1559, its next nonce), awaited so setup txs stay in nonce order. */
  const setupTx = async (kind: 'deploy' | 'transfer', gas: bigint, call: { to?: Hex; data: Hex; value?: bigint }): Promise<void> => {
    const nonce = nonces[0]!;
    const signed = await deployer.signTransaction({ chainId: opts.chainId, nonce, type: 'eip1559', maxFeePerGas: 3n * GWEI, maxPriorityFeePerGas: 1n, gas, ...call });
    nonces[0] = nonce + 1;
    const sentAtMs = performance.now();
    const hash = await rpcCall<Hex>(opts.rpcUrl, 'eth_sendRawTransaction', [signed]);
    st.sent++;
    st.byKind[kind]++;
    opts.onSent?.({ hash, kind, from: deployer.address, nonce, sentAtMs });
  };
  await send('deploy', 0);
  for (const runtime of [ENV_RUNTIME, REFUND_RUNTIME]) await setupTx('deploy', 200_000n, { data: initOf(runtime) });
  for (let i = 1; i < signers.length; i++) await setupTx('transfer', 60_000n, { to: token, data: transferData(signers[i]!.address, 1n << 100n) });
  // The 7702 authority gets 1 wei first, so it exists in the state before its first authorization. EIP-7702 refunds
  // 12,500 gas only for an authority that exists; anvil 1.7.1 refunds every one (its database reports missing
  // accounts as empty ones), so a fresh authority would make the devnet's canonical block differ from the spec's.
  if (authNonce === 0 && BigInt(await rpcCall<string>(opts.rpcUrl, 'eth_getBalance', [authority.address, 'pending'])) === 0n) {
    await setupTx('transfer', 21_000n, { to: authority.address, data: '0x', value: 1n });
  }

  let resolveDone: () => void = () => undefined;
  const donePromise = new Promise<void>((r) => (resolveDone = r));
  const envEveryMs = opts.envEveryMs ?? 150;
  const tickMs = Math.max(10, Math.min(200, 1000 / rate, envEveryMs > 0 ? envEveryMs / 3 : Infinity));
  let credit = 0;
  let ticks = 0;
  let extraEnv = 0;
  let last = performance.now();
  let busy = false;
  const timer = setInterval(() => {
    if (busy || stopped) return;
    const now = performance.now();
    credit += ((now - last) * rate) / 1000;
    last = now;
    const envDue = envEveryMs > 0 && now - lastEnvMs >= envEveryMs;
    if (credit < 1 && !envDue) return;
    busy = true;
    const run = (async () => {
      // Sequential per tick: one sender's nonces must reach the pool in order.
      if (envDue && !stopped && st.sent + st.errors < maxTxs) await send('env', extraEnv++ % signers.length);
      while (credit >= 1 && !stopped && st.sent + st.errors < maxTxs) {
        credit--;
        // The kinds follow the mix exactly (so its spacing holds, 'env' every other tx); the senders shift by one
        // every round of the mix so that every sender sends every kind. (Shifting the mix instead skipped some
        // positions for good whenever the mix length was a multiple of senders + 1.)
        const kind = mix[ticks % mix.length]!;
        const who = ((ticks % mix.length) + Math.floor(ticks / mix.length)) % signers.length;
        ticks++;
        await send(kind, who);
      }
      if (st.sent + st.errors >= maxTxs) {
        stopped = true;
        clearInterval(timer);
        resolveDone();
      }
    })()
      .catch((e: unknown) => log('traffic: tick failed', { error: e instanceof Error ? e.message : String(e) }))
      .finally(() => (busy = false));
    track(run);
  }, tickMs);

  return {
    token,
    env: envContract,
    refund: refundContract,
    depositors,
    authority: authority.address,
    stats: () => ({ ...st, byKind: { ...st.byKind } }),
    async stop() {
      stopped = true;
      clearInterval(timer);
      await Promise.allSettled([...inflight]);
      resolveDone();
    },
    done: () => donePromise,
  };
}
