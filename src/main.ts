// Entry point, wiring only: config → daemon → signals → exit code. With no upstream and no node configured it
// starts the embedded devnet first, so `npm start` shows flashblocks flowing with no setup.
import { isSea } from 'node:sea';
import { buildInfo, type BuildInfo } from './buildinfo.js';
import { onParentExit } from './child.js';
import { checkRunnable, helpText, loadConfig, redactedConfig, type Config } from './config.js';
import { startDaemon, type Daemon } from './daemon.js';
import { runCheckExecution } from './cli/check-execution.js';
import { runSetup } from './cli/setup.js';
import { runUnit } from './cli/unit.js';
import { runVerify } from './cli/verify.js';
import { StartupError } from './errors.js';
import { createLogger, type Logger } from './log.js';
import { notifyReady, notifyStopping, startWatchdog } from './metrics/sdnotify.js';

/** Version and git commit (read once; the checkout's HEAD in a clone, see src/buildinfo.ts). */
let build: BuildInfo | null = null;
function buildOf(): BuildInfo {
  build ??= buildInfo(import.meta.url);
  return build;
}
const version = (): string => buildOf().version;

/** The same signal within this long after the first is the same stop request delivered twice (see onSignal). */
const REPEATED_SIGNAL_MS = 500;

interface DevnetHandle {
  nodeRpcUrl: string;
  flashblocksUrl: string;
  chainId: number;
  /** A funded dev account the traffic generator never uses: the user's to send from. */
  freeAccount: { address: string; privateKey: string };
  /** Settles with one sentence if the devnet's anvil exits while it runs (the devnet has then stopped itself). */
  failed: Promise<string>;
  stop(): Promise<void>;
}

/** What to give instead of the devnet, where there is none (the single binary, a production install). */
const NEEDS_ENDPOINTS =
  'it needs --flashblocks-url (the flashblocks WebSocket, ws:// or wss://) and --node-rpc-url (the node beside it, http:// or https://), ' +
  'or --flashblocks-enabled false with --node-rpc-url alone; see --help';

/**
 * Starts the embedded devnet (anvil + flashblocks sequencer + traffic); only for `npm start` without flags. Says
 * it starts one only once its code is found: without it, one E_CONFIG saying what to give instead.
 */
async function startEmbeddedDevnet(log: Logger): Promise<DevnetHandle> {
  // The single-file binary cannot import from disk at all: no devnet, whatever is next to it.
  if (isSea()) throw new StartupError('E_CONFIG', `no --flashblocks-url and no --node-rpc-url given, and this binary has no embedded devnet: ${NEEDS_ENDPOINTS}`);
  // Dynamic imports: the devnet (anvil, viem) is development tooling, absent from a production install.
  const seqPath = '../scripts/devnet/sequencer.js';
  const trafficPath = '../scripts/devnet/traffic.js';
  type Devnet = Omit<DevnetHandle, 'freeAccount'> & { accounts: { address: string; privateKey: string }[] };
  let seq: { startDevnet(opts: Record<string, unknown>): Promise<Devnet> };
  let traffic: { startTraffic(opts: Record<string, unknown>): Promise<{ stop(): Promise<void> | void }> };
  try {
    seq = (await import(seqPath)) as typeof seq;
    traffic = (await import(trafficPath)) as typeof traffic;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING') throw e;
    throw new StartupError('E_CONFIG', `no --flashblocks-url and no --node-rpc-url given, and the embedded devnet (development tooling) is not part of this install: ${NEEDS_ENDPOINTS}`);
  }
  log.info('no --flashblocks-url and no --node-rpc-url given: starting the embedded devnet (anvil + flashblocks sequencer)');
  const devnet = await seq.startDevnet({});
  const gen = await traffic.startTraffic({
    rpcUrl: devnet.nodeRpcUrl,
    chainId: devnet.chainId,
    accounts: devnet.accounts.slice(0, -1),
    // 5 tx/s of the mix, plus the extra 'env' call traffic.ts sends whenever none went out for 150 ms (about one per
    // 200 ms flashblock): ~10 tx/s in all, ~20 per 2 s block (measured: 399 transactions in 20 blocks). The banner says so.
    txPerSec: 5,
    log: (msg: string, fields?: Record<string, unknown>) => log.debug('devnet traffic: ' + msg, fields),
  });
  return {
    nodeRpcUrl: devnet.nodeRpcUrl,
    flashblocksUrl: devnet.flashblocksUrl,
    chainId: devnet.chainId,
    freeAccount: devnet.accounts[devnet.accounts.length - 1]!,
    failed: devnet.failed,
    stop: async () => {
      await gen.stop();
      await devnet.stop();
    },
  };
}

async function run(argv: string[]): Promise<number> {
  // Operator subcommands (src/cli/): they return their own exit codes and never start the daemon.
  if (argv[0] === 'setup') return await runSetup(argv.slice(1), { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
  if (argv[0] === 'verify') return await runVerify(argv.slice(1), { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
  if (argv[0] === 'check-execution') return await runCheckExecution(argv.slice(1), { stdout: process.stdout, stderr: process.stderr });
  if (argv[0] === 'unit') return await runUnit(argv.slice(1), { stdout: process.stdout, stderr: process.stderr });
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(helpText() + '\n');
    return 0;
  }
  if (argv.includes('--version')) {
    process.stdout.write(version() + '\n');
    return 0;
  }
  let config: Readonly<Config> = loadConfig(argv, process.env);
  const log = createLogger({ level: config.logLevel });
  let devnet: DevnetHandle | null = null;
  if (config.flashblocksUrls.length === 0 && config.nodeRpcUrl === '' && config.flashblocksEnabled) {
    devnet = await startEmbeddedDevnet(log);
    config = loadConfig([...argv, '--flashblocks-url', devnet.flashblocksUrl, '--node-rpc-url', devnet.nodeRpcUrl], process.env);
  }
  checkRunnable(config);
  log.info('configuration', { config: redactedConfig(config) });
  const daemon: Daemon = await startDaemon(config, { log, version: version(), commit: buildOf().commit });
  log.info(`flashblocksd listening: rpc http://${config.host}:${daemon.rpcPort}/, stream ws://${config.host}:${daemon.rpcPort}/flashblocks, metrics http://${config.host}:${daemon.metricsPort}/metrics`, {
    rpcPort: daemon.rpcPort,
    metricsPort: daemon.metricsPort,
    native: daemon.native,
  });
  if (devnet !== null) {
    const rpc = `http://${config.host}:${daemon.rpcPort}/`;
    process.stderr.write(
      [
        '',
        '  flashblocksd is running on the embedded devnet (anvil + a flashblocks sequencer, 200 ms flashblocks).',
        `  JSON-RPC  ${rpc}   (point viem, ethers, curl here)`,
        `  stream    ws://${config.host}:${daemon.rpcPort}/flashblocks`,
        `  metrics   http://${config.host}:${daemon.metricsPort}/metrics`,
        `  chain id  ${devnet.chainId}`,
        `  node      ${devnet.nodeRpcUrl}   (the devnet's anvil, which flashblocksd forwards to)`,
        `  account   ${devnet.freeAccount.address}   (funded; the devnet's traffic never uses it)`,
        `  key       ${devnet.freeAccount.privateKey}`,
        '  Preconfirmed receipts of the pending block (the devnet sends ~10 tx/s; a flashblock every 200 ms):',
        `    curl -s -X POST -H 'Content-Type: application/json' --data '{"jsonrpc":"2.0","id":1,"method":"eth_getBlockReceipts","params":["pending"]}' ${rpc}`,
        '  Ctrl-C stops everything.',
        '',
      ].join('\n') + '\n',
    );
  }
  void notifyReady(log, `serving on ${daemon.rpcPort}`);
  // WatchdogSec= in the unit: pets while the event loop runs (kept up through draining; exit ends it).
  startWatchdog(log);

  return await new Promise<number>((resolve) => {
    let firstSignalMs = -1;
    let firstSignal = '';
    const onSignal = (sig: NodeJS.Signals | 'parent exit'): void => {
      if (firstSignalMs >= 0) {
        // One Ctrl-C under `npm start` arrives twice: from the terminal (to the whole process group) and forwarded
        // by npm a moment later. Only another signal, or the same one sent again later, is the user's "exit now".
        if (sig === firstSignal && performance.now() - firstSignalMs < REPEATED_SIGNAL_MS) return;
        log.info(`second ${sig}: exiting now`);
        process.exit(130);
      }
      firstSignalMs = performance.now();
      firstSignal = sig;
      log.info(`${sig} received: draining (up to ${config.shutdownGraceMs} ms); send again to exit at once`);
      void notifyStopping(log);
      void (async () => {
        try {
          await daemon.stop();
          await devnet?.stop();
          log.info('stopped cleanly');
          resolve(0);
        } catch (e) {
          log.error('error while stopping', { error: (e as Error).message });
          resolve(1);
        }
      })();
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    // The embedded devnet's anvil exited: the chain flashblocksd follows is gone, so it stops too (one line, exit 1).
    void devnet?.failed.then((why) => {
      if (firstSignalMs >= 0) return;
      firstSignalMs = performance.now();
      firstSignal = 'devnet';
      log.error(`the embedded devnet stopped: ${why}; flashblocksd stops with it (exit code 1): start it again with npm start`);
      void (async () => {
        try {
          await daemon.stop();
          await devnet.stop();
        } catch (e) {
          log.error('error while stopping', { error: (e as Error).message });
        }
        resolve(1);
      })();
    });
    // Under `npm start` npm is our parent: if it dies without passing a signal on (kill -9), stop as on SIGTERM
    // rather than run on as an orphan with the devnet. Elsewhere (systemd, nohup) being re-parented is normal.
    if (process.env.npm_lifecycle_event !== undefined) onParentExit(() => onSignal('parent exit'));
  });
}

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    if (e instanceof StartupError) {
      process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level: 'error', msg: e.message, code: e.code }) + '\n');
      process.exit(2);
    }
    process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level: 'error', msg: 'fatal start-up error', error: (e as Error).stack }) + '\n');
    process.exit(1);
  },
);
