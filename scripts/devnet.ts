// `npm run devnet`: anvil + flashblocks sequencer + traffic, prints the node and stream URLs; Ctrl-C stops all.
// Wiring only: no daemon here (`npm start` runs devnet and daemon together). Flags: scripts/devnet/cli.ts (--help).
import { onParentExit } from '../src/child.js';
import { devnetHelp, parseDevnetArgs } from './devnet/cli.js';
import { STREAM_DIALECTS, startDevnet } from './devnet/sequencer.js';
import { startTraffic } from './devnet/traffic.js';

const log = (msg: string, fields?: Record<string, unknown>): void => {
  console.error(fields ? `${msg} ${JSON.stringify(fields)}` : msg);
};

/** Exit code of a command line the devnet cannot run with (bad flag or value); 1 is a failure while starting or running. */
const EXIT_USAGE = 2;

/** Starts everything, prints where to look, and waits for SIGINT/SIGTERM, or for anvil to exit (then exits 1). */
async function main(): Promise<void> {
  const args = parseDevnetArgs(process.argv.slice(2), process.env, Date.now() / 1000);
  if (args.kind === 'help') {
    console.log(devnetHelp());
    return;
  }
  if (args.kind === 'error') {
    console.error(`devnet: ${args.message}`);
    process.exit(EXIT_USAGE);
  }
  const s = args.settings;
  const chain = s.chain;
  const devnet = await startDevnet({
    blockTimeMs: s.blockTimeMs,
    flashblockMs: s.flashblockMs,
    receipts: s.receipts,
    brotli: s.brotli,
    azul: s.azul,
    dialect: s.dialect,
    nodePort: s.nodePort,
    streamPort: s.streamPort,
    anvil: { chainId: chain.chainId, hardfork: chain.hardfork, port: s.anvilPort },
    log,
  });
  // Set once anvil is gone: the traffic's failures after it are its echo, not news.
  let failing = false;
  const traffic = s.txPerSec > 0
    ? await startTraffic({
        rpcUrl: devnet.nodeRpcUrl,
        chainId: devnet.chainId,
        // The last dev account is left to the user (curl, cast, a wallet).
        accounts: devnet.accounts.slice(0, -1),
        txPerSec: s.txPerSec,
        log: (msg, fields) => {
          if (!failing) log(msg, fields);
        },
      })
    : null;
  const user = devnet.accounts[devnet.accounts.length - 1]!;
  const perBlock = Math.round(s.blockTimeMs / s.flashblockMs);
  const timing = s.timingOverridden
    ? `${s.blockTimeMs} ms blocks, ${s.flashblockMs} ms flashblocks (${perBlock} per block), not the ${chain.preset.title} preset's: ` +
      `run the daemon with --block-time-ms ${s.blockTimeMs} --flashblock-interval-ms ${s.flashblockMs}`
    : `${s.blockTimeMs} ms blocks, ${s.flashblockMs} ms flashblocks (${perBlock} per block): the ${chain.preset.title} preset's, ` +
      `which a daemon pointed here picks by eth_chainId ${chain.chainId}`;
  console.log(
    [
      `devnet up (chain ${devnet.chainId}: ${chain.preset.title})`,
      `  node RPC      ${devnet.nodeRpcUrl}   (anvil: ${devnet.anvilUrl}, pid ${devnet.anvilPid})`,
      `  flashblocks   ${devnet.flashblocksUrl}   (dialect ${s.dialect ?? 'default'}; ?dialect=${STREAM_DIALECTS.join('|')}  ?receipts=internal  ?brotli=1  ?azul=1)`,
      `  traffic       ${s.txPerSec} tx/s of the mix from ${devnet.accounts.length - 1} dev accounts, plus a block-env contract call whenever none went out for 150 ms (about 5 more a second)`,
      `  timing        ${timing}`,
      `  fork          ${chain.hardfork}${chain.forkNote === null ? ` (the ${chain.preset.title} preset's now)` : ` (${chain.forkNote})`}`,
      '  preinstalls   Multicall3 0xcA11bde05977b3631167028862bE2a173976CA11, deterministic deployment proxy 0x4e59b44847b379578588920cA78FbF26c0B4956C',
      `  free account  ${user.address}  key ${user.privateKey}`,
      'Ctrl-C stops everything.',
    ].join('\n'),
  );
  const timer = setInterval(() => {
    const st = devnet.stats();
    log(`devnet: block ${st.lastBlockNumber}, ${st.flashblocks} flashblocks, ${st.transactions} txs, sealed=last flashblock ${st.hashMatches}/${st.hashMatches + st.hashMismatches}, subscribers ${st.subscribers}`);
  }, 10_000);
  let stopping = false;
  const stop = async (why: string, code: number): Promise<void> => {
    if (stopping) return;
    stopping = true;
    clearInterval(timer);
    log(why);
    await traffic?.stop();
    await devnet.stop();
    process.exit(code);
  };
  process.on('SIGINT', () => void stop('SIGINT: stopping devnet', 0));
  process.on('SIGTERM', () => void stop('SIGTERM: stopping devnet', 0));
  // anvil gone: its chain is gone with it, so no restart; one line, exit 1 (systemd, a script or a test sees it).
  void devnet.failed.then((why) => {
    failing = true;
    void stop(`devnet: ${why}: the devnet cannot run without its node, stopped (exit code 1); start it again with npm run devnet`, 1);
  });
  // `npm run devnet`: if npm dies without passing a signal on, stop rather than run on as an orphan.
  if (process.env.npm_lifecycle_event !== undefined) onParentExit(() => void stop('parent exit: stopping devnet', 0));
}

main().catch((e: unknown) => {
  console.error(`devnet failed to start: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
