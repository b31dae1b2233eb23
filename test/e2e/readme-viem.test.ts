// The README's viem section, run as written (its URLs pointed at this daemon) against one devnet and one daemon:
// with the README's chain definition, the receipt comes back while its block is still pending (the devnet holds that
// block's seal until the snippet has finished: event order, no timing), and the subscription snippet prints a
// flashblock and a pending log. The snippets run in this process (their imports bound to the viem this test loads).
import t from 'tap';
import { readFileSync } from 'node:fs';
import * as viem from 'viem';
import * as viemAccounts from 'viem/accounts';
import { getContractAddress, type Hex } from 'viem';
import { rpcCall } from '../../scripts/devnet/anvil.js';
import { startDevnet } from '../../scripts/devnet/sequencer.js';
import { presetByName } from '../../src/chain/presets.js';
import { loadConfig, SETTINGS } from '../../src/config.js';
import { startDaemon } from '../../src/daemon.js';
import { createLogger } from '../../src/log.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const defaultPort = SETTINGS.find((s) => s.flag === 'port')!.def;

/** The ```js block that follows the comment `<!-- readme-viem: <name> … -->` in the README, or null. */
function snippet(name: string): string | null {
  const m = new RegExp(`<!-- readme-viem: ${name}\\b[^>]*-->\\s*\`\`\`js\\n([\\s\\S]*?)\`\`\``).exec(readme);
  return m ? m[1]! : null;
}

type Snippet = (modules: Record<string, unknown>, console: { log: (...a: unknown[]) => void }) => Promise<Record<string, unknown>>;
const AsyncFunction = Object.getPrototypeOf(async () => undefined).constructor as new (...args: string[]) => Snippet;
const MODULES: Record<string, unknown> = { viem, 'viem/accounts': viemAccounts };

/**
 * A README snippet as an async function of (modules, console) that returns the named top-level values: its
 * `import { … } from '…'` lines become destructurings of `modules`, its default URLs point at `rpcPort`.
 */
function compile(code: string, rpcPort: number, returns: string[]): Snippet {
  const body = code
    .replace(/^import \{([^}]*)\} from '([^']+)';$/gm, (_, names: string, from: string) => {
      if (!(from in MODULES)) throw new Error(`the snippet imports ${from}, which this test does not provide`);
      return `const {${names}} = __modules[${JSON.stringify(from)}];`;
    })
    .replaceAll(`//127.0.0.1:${defaultPort}/`, `//127.0.0.1:${rpcPort}/`);
  return new AsyncFunction('__modules', 'console', `${body}\nreturn { ${returns.join(', ')} };`);
}

async function until(pred: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const preset = presetByName('devnet')!;
const devnet = await startDevnet({ blockTimeMs: preset.blockTimeMs, flashblockMs: preset.flashblockIntervalMs });
t.teardown(() => devnet.stop());
const log = createLogger({ level: 'warn', write: () => undefined });
const daemon = await startDaemon(
  loadConfig(['--flashblocks-url', devnet.flashblocksUrl, '--node-rpc-url', devnet.nodeRpcUrl, '--port', '0', '--metrics-port', '0', '--log-level', 'warn'], {}),
  { log },
);
t.teardown(() => daemon.stop());
await until(() => daemon.execution?.executed != null, 30_000, 'the engine executes a flashblock');

/**
 * Holds the canonical seal of the block that takes the next user transaction (no other is sent on this devnet: the
 * first non-deposit receipt from now on is it) until `release`, so what a test reads meanwhile is read while that
 * block is only preconfirmed, however slow the machine. Released and removed at the test's teardown.
 */
function holdSealOfNextTx(t: { teardown(fn: () => void): void }): { txBlock(): number | null; release(): void } {
  let txBlock: number | null = null;
  const offFlashblocks = devnet.onFlashblock((fb) => {
    if (txBlock === null && fb.receipts.some((r) => r.type !== 0x7e)) txBlock = fb.blockNumber;
  });
  let release: () => void = () => undefined;
  const released = new Promise<void>((r) => (release = r));
  const stopHolding = devnet.holdSeals((last) => (last.blockNumber === txBlock ? released : Promise.resolve()), 30_000);
  t.teardown(() => {
    release();
    stopHolding();
    offFlashblocks();
  });
  return { txBlock: () => txBlock, release: () => release() };
}

t.test('with the README chain, the receipt comes back while its block is pending', async (t) => {
  const code = snippet('chain');
  t.ok(code, 'the README has the viem chain block (<!-- readme-viem: chain --> before a ```js fence)');
  if (code === null) return;
  t.ok(code.includes(`http://127.0.0.1:${defaultPort}/`), `it targets the daemon at the default port ${defaultPort}`);

  // The snippet's transaction is the next one: its block's seal waits until the snippet has returned.
  const hold = holdSealOfNextTx(t);

  const lines: string[] = [];
  const run = compile(code, daemon.rpcPort, ['devnet', 'client', 'receipt', 'again']);
  const out = await run(MODULES, { log: (...a) => void lines.push(a.join(' ')) });
  const headWhenDone = Number(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_blockNumber', []));
  hold.release();

  const chain = out.devnet as viem.Chain;
  t.equal(chain.id, devnet.chainId, 'the chain id is the devnet\'s');
  t.equal(chain.blockTime, preset.blockTimeMs, 'blockTime is the devnet\'s block time');
  t.equal(chain.experimental_preconfirmationTime, preset.flashblockIntervalMs, 'experimental_preconfirmationTime is its flashblock interval');
  t.equal((out.client as viem.PublicClient).pollingInterval, 1000, 'viem polls every blockTime / 2 = 1 s, as the README says');

  const receipt = out.receipt as viem.TransactionReceipt;
  const again = out.again as viem.TransactionReceipt;
  t.equal(receipt.status, 'success', 'sendTransactionSync returned a successful receipt');
  t.equal(Number(receipt.blockNumber), hold.txBlock(), 'of the block the devnet put the transaction in (its seal held until now)');
  t.ok(headWhenDone < Number(receipt.blockNumber), `the snippet returned while the node's head (${headWhenDone}) was below the receipt's block ${receipt.blockNumber}`);
  t.equal(again.transactionHash, receipt.transactionHash, 'waitForTransactionReceipt resolved with the same (preconfirmed) receipt');
  t.equal(again.blockNumber, receipt.blockNumber, 'in the same pending block');
  t.match(lines.join('\n'), new RegExp(`^receipt in block ${receipt.blockNumber} \\(success\\); latest is ${headWhenDone}$`, 'm'), 'it prints the line the README shows');
});

t.test('the README subscription snippet prints flashblocks and a pending log', async (t) => {
  const code = snippet('subscriptions');
  t.ok(code, 'the README has the subscription block (<!-- readme-viem: subscriptions --> before a ```js fence)');
  if (code === null) return;
  t.ok(code.includes(`ws://127.0.0.1:${defaultPort}/`), `it targets the daemon at the default port ${defaultPort}`);
  const lines: string[] = [];
  const run = compile(code, daemon.rpcPort, ['client']);
  const out = await run(MODULES, { log: (...a) => void lines.push(a.join(' ')) });
  const client = out.client as viem.PublicClient;
  t.teardown(async () => (await (client.transport as unknown as { getRpcClient(): Promise<{ close(): void }> }).getRpcClient()).close());

  // A contract creation whose init code emits one LOG0 (PUSH1 0 PUSH1 0 LOG0 STOP): the log's address is the new contract.
  const sender = devnet.accounts[0]!;
  const nonce = Number(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_getTransactionCount', [sender.address, 'pending']));
  const emitter = getContractAddress({ from: sender.address as Hex, nonce: BigInt(nonce) }).toLowerCase();
  const wallet = viem.createWalletClient({ account: viemAccounts.privateKeyToAccount(sender.privateKey as Hex), transport: viem.http(`http://127.0.0.1:${daemon.rpcPort}/`) });
  const chain = viem.defineChain({ id: devnet.chainId, name: 'devnet', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [] } } });
  const hold = holdSealOfNextTx(t);
  const hash = await wallet.sendTransaction({ chain, data: '0x60006000a000' });

  const flashblockLine = /^flashblock (\d+) of block (\d+): (\d+) txs$/;
  await until(() => lines.some((l) => flashblockLine.test(l)), 20_000, 'a newFlashblocks line');
  await until(() => lines.some((l) => l.toLowerCase().includes(emitter)), 20_000, `a pendingLogs line for ${emitter}`);
  const headWhenSeen = Number(await rpcCall<string>(devnet.nodeRpcUrl, 'eth_blockNumber', []));
  hold.release();
  const logLine = lines.find((l) => l.toLowerCase().includes(emitter))!;
  t.match(logLine, /^pending log of 0x[0-9a-fA-F]{40} in block \d+, tx 0x[0-9a-f]{64}$/, 'the pending log line has the README\'s shape');
  t.ok(logLine.includes(hash), 'naming the transaction that emitted it');
  const block = Number(/in block (\d+)/.exec(logLine)![1]);
  t.equal(block, hold.txBlock(), 'in the block the devnet put the transaction in');
  t.ok(headWhenSeen < block, `printed while the node's head (${headWhenSeen}) was below the log's block ${block}`);
  t.ok(lines.some((l) => flashblockLine.exec(l)?.[2] === String(block)), `a flashblock of the log's block ${block} was printed too`);
});
