// `npm run devnet`: anvil + flashblocks sequencer + traffic, prints the node and stream URLs; Ctrl-C stops all.
// Wiring only: no daemon here (`npm start` runs devnet and daemon together).
import { onParentExit } from '../src/child.js';
import { PRESET_NAMES, presetByName } from '../src/chain/presets.js';
import { STREAM_DIALECTS, startDevnet, type ReceiptShape, type StreamDialect } from './devnet/sequencer.js';
import { startTraffic } from './devnet/traffic.js';

const env = process.env;
const num = (v: string | undefined, d: number): number => (v !== undefined && v !== '' && Number.isFinite(Number(v)) ? Number(v) : d);
const flag = (v: string | undefined): boolean => v === '1' || v === 'true';

const log = (msg: string, fields?: Record<string, unknown>): void => {
  console.error(fields ? `${msg} ${JSON.stringify(fields)}` : msg);
};

/** `--dialect <name>` (or DEVNET_DIALECT): the stream dialect every subscriber gets unless it asks ?dialect=. */
function dialectArg(): StreamDialect | null {
  const argv = process.argv.slice(2);
  const at = argv.findIndex((a) => a === '--dialect' || a.startsWith('--dialect='));
  const v = at < 0 ? env.DEVNET_DIALECT : argv[at]!.includes('=') ? argv[at]!.split('=')[1] : argv[at + 1];
  if (v === undefined || v === '') return null;
  if (!(STREAM_DIALECTS as readonly string[]).includes(v)) throw new Error(`--dialect ${v}: expected one of ${STREAM_DIALECTS.join(', ')}`);
  return v as StreamDialect;
}

/** Starts everything, prints where to look, and waits for SIGINT/SIGTERM. */
async function main(): Promise<void> {
  // DEVNET_CHAIN=<preset> runs the devnet at that chain's block time and flashblock interval (e.g. unichain: 1 s
  // blocks, 5 flashblocks each); the daemon then needs the same, e.g. --block-time-ms 1000 (its node is chain 901).
  const chainName = env.DEVNET_CHAIN ?? 'devnet';
  const chain = presetByName(chainName);
  if (chain === null) throw new Error(`DEVNET_CHAIN=${chainName} is not a chain preset (${PRESET_NAMES.join(', ')})`);
  const timing = { blockTimeMs: chain.blockTimeMs, flashblockIntervalMs: chain.flashblockIntervalMs };
  const dialect = dialectArg();
  const devnet = await startDevnet({
    blockTimeMs: num(env.DEVNET_BLOCK_TIME_MS, timing.blockTimeMs),
    flashblockMs: num(env.DEVNET_FLASHBLOCK_MS, timing.flashblockIntervalMs),
    receipts: (env.DEVNET_RECEIPTS === 'internal' ? 'internal' : 'external') as ReceiptShape,
    brotli: flag(env.DEVNET_BROTLI),
    azul: flag(env.DEVNET_AZUL),
    dialect,
    log,
  });
  const rate = num(env.DEVNET_TX_PER_SEC, 10);
  // The last dev account is left to the user (curl, cast, a wallet).
  const traffic = rate > 0
    ? await startTraffic({ rpcUrl: devnet.nodeRpcUrl, chainId: devnet.chainId, accounts: devnet.accounts.slice(0, -1), txPerSec: rate, log })
    : null;
  const user = devnet.accounts[devnet.accounts.length - 1]!;
  console.log(
    [
      `devnet up (chain ${devnet.chainId})`,
      `  node RPC      ${devnet.nodeRpcUrl}   (anvil: ${devnet.anvilUrl})`,
      `  flashblocks   ${devnet.flashblocksUrl}   (dialect ${dialect ?? 'default'}; ?dialect=${STREAM_DIALECTS.join('|')}  ?receipts=internal  ?brotli=1  ?azul=1)`,
      `  traffic       ${rate} tx/s of the mix from ${devnet.accounts.length - 1} dev accounts, plus a block-env contract call whenever none went out for 150 ms (about 5 more a second)`,
      `  timing        ${chain.title} preset: ${num(env.DEVNET_BLOCK_TIME_MS, timing.blockTimeMs)} ms blocks, ${num(env.DEVNET_FLASHBLOCK_MS, timing.flashblockIntervalMs)} ms flashblocks` +
        ` (daemon: --block-time-ms ${num(env.DEVNET_BLOCK_TIME_MS, timing.blockTimeMs)} --flashblock-interval-ms ${num(env.DEVNET_FLASHBLOCK_MS, timing.flashblockIntervalMs)})`,
      `  free account  ${user.address}  key ${user.privateKey}`,
      'Ctrl-C stops everything.',
    ].join('\n'),
  );
  const timer = setInterval(() => {
    const s = devnet.stats();
    log(`devnet: block ${s.lastBlockNumber}, ${s.flashblocks} flashblocks, ${s.transactions} txs, sealed=last flashblock ${s.hashMatches}/${s.hashMatches + s.hashMismatches}, subscribers ${s.subscribers}`);
  }, 10_000);
  let stopping = false;
  const stop = async (sig: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    clearInterval(timer);
    log(`${sig}: stopping devnet`);
    await traffic?.stop();
    await devnet.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  // `npm run devnet`: if npm dies without passing a signal on, stop rather than run on as an orphan.
  if (process.env.npm_lifecycle_event !== undefined) onParentExit(() => void stop('parent exit'));
}

main().catch((e: unknown) => {
  console.error(`devnet failed to start: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
