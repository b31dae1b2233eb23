// `npm run witness-node -- <fixture file> [--port N]`: a JSON-RPC node serving one real block's pre-state from a
// fixture of ../shared/conformance/op-blocks (scripts/witness/); prints its URL like the devnet does. Wiring only.
import { onParentExit } from '../src/child.js';
import { startWitnessNode } from './witness/server.js';

const USAGE = 'usage: npm run witness-node -- <fixture file> [--port N] [--host H]\n' +
  '  <fixture file>: a kona-executor .tar / .tar.gz, or a kona-ecotone .block.json (its .preimages.json.gz beside it)';

/** Exit code for a bad command line or a fixture that does not load. */
const EXIT_BAD_INPUT = 2;

function fail(msg: string): never {
  console.error(`witness-node: ${msg}`);
  process.exit(EXIT_BAD_INPUT);
}

function parseArgs(argv: string[]): { file: string; port: number; host: string } {
  let file: string | null = null;
  let port = 0;
  let host = '127.0.0.1';
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    const [name, inline] = a.startsWith('--') && a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined];
    if (name === '--help' || name === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else if (name === '--port' || name === '--host') {
      const v = inline ?? argv[++i];
      if (v === undefined) fail(`${name} needs a value\n${USAGE}`);
      if (name === '--host') host = v;
      else {
        port = Number(v);
        if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`--port ${v}: expected a port number 0..65535`);
      }
    } else if (a.startsWith('-')) {
      fail(`unknown option ${a}\n${USAGE}`);
    } else if (file !== null) {
      fail(`one fixture file, got ${file} and ${a}\n${USAGE}`);
    } else {
      file = a;
    }
  }
  if (file === null) fail(`no fixture file given\n${USAGE}`);
  return { file, port, host };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  let node;
  try {
    node = await startWitnessNode(args.file, { port: args.port, host: args.host });
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'EADDRINUSE' || err.code === 'EACCES') fail(`cannot listen on ${args.host}:${args.port}: ${err.message}`);
    fail(err.message); // the loader's errors name the file
  }
  const fx = node.fixture;
  const known = fx.header !== null ? 'full header known' : `only the block hash known (${fx.expectedBlockHash ?? 'none'})`;
  console.log(
    [
      `witness node up (chain ${fx.chainId})`,
      `  node RPC      ${node.url}`,
      `  fixture       ${fx.name}: ${fx.chain} (chain ${fx.chainId}), block ${fx.block.number} (state at ${fx.parent.number}), ` +
        `fork ${fx.fork} by timestamp, ${fx.block.transactions.length} txs, ${known}, ${fx.preimages.size} preimages`,
      'Ctrl-C stops it.',
    ].join('\n'),
  );
  let stopping = false;
  const stop = async (sig: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    console.error(`${sig}: stopping witness node`);
    await node.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  // `npm run witness-node`: if npm dies without passing a signal on, stop rather than run on as an orphan.
  if (process.env.npm_lifecycle_event !== undefined) onParentExit(() => void stop('parent exit'));
}

main().catch((e: unknown) => {
  console.error(`witness-node failed: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
