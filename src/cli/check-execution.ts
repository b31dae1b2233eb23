// `flashblocksd check-execution --node-rpc-url URL --blocks N[-M]`: re-executes canonical blocks from the node's state
// at their parents, as flashblocks through the daemon's own engine (RevmEngine.applyFlashblock), and prints per block
// whether receipts root, gas used and logs bloom equal the node's header. Read-only towards the node; never prints
// the URL unredacted.
import { parseArgs } from 'node:util';
import { logsBloom } from '../chain/bloom.js';
import { forkFromEthConfig } from '../chain/eth-config.js';
import { PRESET_NAMES, presetByChainId, presetByName, type ChainPreset } from '../chain/presets.js';
import { blockHashOf, buildHeader, L2_TO_L1_MESSAGE_PASSER } from '../chain/header-build.js';
import { computePostState, TrieNodeUnavailable } from '../chain/state-root.js';
import { EMPTY_TRIE_ROOT } from '../chain/trie.js';
import { TX_DEPOSIT } from '../chain/types.js';
import { OP_HARDFORKS, type ExecutionHardfork } from '../config.js';
import { executionSpecAt } from '../exec/spec.js';
import { txBatch, type ExecutionEngine } from '../exec/engine.js';
import { receiptsRootOf, type ExecutedReceipt } from '../exec/receipts.js';
import { RevmEngine } from '../exec/revm.js';
import { redactUrl } from '../log.js';
import { NodeClient } from '../node/client.js';
import { NodeBlockError, readBlock, readRawTxs, readReceipts, trieNodesOf, type NodeBlock } from './node-block.js';
import type { CliIo } from './prompt.js';
import { splitBlock } from './split-block.js';

export { splitBlock } from './split-block.js';

/** Exit codes of `flashblocksd check-execution`. */
export const CheckExit = { MATCH: 0, MISMATCH: 1, CANNOT_CHECK: 2 } as const;

/** At most this many blocks in one run. */
const MAX_BLOCKS = 10_000;
/** Slices after index 0 when the chain has no preset to say how many flashblocks a block has. */
const DEFAULT_SLICES = 4;

/** A usage or node problem: the check cannot say anything (exit 2). */
class CheckError extends Error {}

/** `flashblocksd check-execution --help`. */
export function checkExecutionHelp(): string {
  return [
    'Usage: flashblocksd check-execution --node-rpc-url URL --blocks N[-M] [--execution-hardfork auto|<fork>] [--chain auto|<name>]',
    '                                   [--slices K] [--node-timeout-ms 10000]',
    '',
    "Re-executes canonical blocks N..M from the node's state at their parents, as flashblocks through the daemon's own",
    'engine (index 0 the deposits, the rest in K slices; K defaults to the chain preset\'s flashblocks per block - 1),',
    "with each block's env from its header and the spec the daemon would choose, and prints one line per block: chain,",
    "block, spec, transactions, and whether receipts root, gas used and logs bloom equal the node's header. When one",
    "differs, the line names the first differing transaction and field (from the node's receipts). A range runs in",
    "order, each block on the engine's own execution of the one before (settled against the node like the daemon does).",
    "The block hash is checked too where the node serves its trie nodes (debug_dbGet): the engine's post-state applied",
    "to the parent's tries gives the state root, the header is rebuilt and hashed (what a node that knows a block only",
    'by its hash is checked against); a node without debug_dbGet gets "block hash not checked".',
    `Forks: ${OP_HARDFORKS.join(', ')}. Chains: ${PRESET_NAMES.join(', ')}.`,
    '',
    'Exit codes: 0 everything that could be compared matched; 1 a block differs (or the engine rejects a transaction',
    'the chain included); 2 could not check (bad arguments, node unreachable or missing a block or state, engine down).',
  ].join('\n');
}

/** One compared header field. */
interface Compared {
  field: 'receipts root' | 'gas used' | 'logs bloom';
  node: string;
  executed: string;
}

/** What checking one block found. */
interface BlockVerdict {
  block: NodeBlock;
  spec: string;
  deposits: number;
  flashblocks: number;
  compared: Compared[];
  executedGas: bigint;
  /** A transaction the engine rejected: its index and the engine's message. */
  rejected: { index: number; message: string } | null;
  /** Set when something differs: the first differing transaction and field, or why none could be named. */
  firstDifference: string | null;
  /** The block hash recomputed from execution, or why it was not (null: a transaction was rejected). */
  hash: HashCheck | null;
}

/** The block hash check: the header rebuilt with the state root computed over the node's trie nodes. */
type HashCheck =
  | { checked: true; hash: string; stateRoot: string }
  | { checked: false; why: string };

/** The forks in order, to tell which header fields a spec's blocks carry. */
const forkIndex = (spec: string): number => (OP_HARDFORKS as readonly string[]).indexOf(spec);

/** The first of `fields` ([name, node's, executed]) whose values differ, as "name node A, executed B"; null when none. */
function firstUnequal(fields: [string, unknown, unknown][]): string | null {
  for (const [field, a, b] of fields) if (a !== b) return `${field} node ${String(a)}, executed ${String(b)}`;
  return null;
}

/** The first field where executed receipt `x` differs from the node's `c`; null when none. */
function receiptDifference(x: ExecutedReceipt, c: ExecutedReceipt, engine: ExecutionEngine): string | null {
  const head = firstUnequal([
    ['transactionHash', c.transactionHash, x.transactionHash],
    ['type', c.type, x.type],
    ['status', c.status ? 1 : 0, x.status ? 1 : 0],
    ['gasUsed', c.gasUsed, x.gasUsed],
    ['cumulativeGasUsed', c.cumulativeGasUsed, x.cumulativeGasUsed],
    ['logs count', c.logs.length, x.logs.length],
  ]);
  if (head !== null) return head;
  for (let j = 0; j < c.logs.length; j++) {
    const l = c.logs[j]!;
    const e = x.logs[j]!;
    const d = firstUnequal([
      [`log ${j} address`, l.address, e.address],
      [`log ${j} topics count`, l.topics.length, e.topics.length],
      ...l.topics.map((topic, k): [string, unknown, unknown] => [`log ${j} topic ${k}`, topic, e.topics[k]]),
      [`log ${j} data`, l.data, e.data],
    ]);
    if (d !== null) return d;
  }
  // Nodes commit a deposit's nonce before (op-geth, op-reth) or after it (anvil): either is the same execution.
  if (c.depositNonce !== null && x.depositNonce !== null && c.depositNonce !== x.depositNonce && c.depositNonce !== x.depositNonce + 1n) {
    return `depositNonce node ${c.depositNonce}, executed ${engine.chainDepositNonce(x)}`;
  }
  if (c.contractAddress !== null && c.contractAddress !== x.contractAddress) return `contractAddress node ${c.contractAddress}, executed ${x.contractAddress}`;
  return null;
}

/** The first differing transaction and field, from the node's receipts (or, without them, the differing header fields). */
async function explain(node: NodeClient, engine: ExecutionEngine, v: BlockVerdict, executed: ExecutedReceipt[]): Promise<string> {
  const canon = await readReceipts(node, v.block);
  if (typeof canon === 'string') {
    const differing = v.compared.filter((c) => c.node !== c.executed).map((c) => c.field);
    return `the node serves no receipts to name the first differing transaction (${canon}); differing header fields: ${differing.join(', ') || 'none'}`;
  }
  for (let i = 0; i < canon.length; i++) {
    const x = executed[i];
    const tx = `first differing tx ${i} (${canon[i]!.transactionHash})`;
    if (x === undefined) return `${tx}: ${v.rejected !== null && v.rejected.index === i ? `rejected by the engine: ${v.rejected.message}` : 'not executed'}`;
    const d = receiptDifference(x, canon[i]!, engine);
    if (d !== null) return `${tx}: ${d}`;
  }
  if (executed.length !== canon.length) return `transaction count: node ${canon.length}, executed ${executed.length}`;
  return 'every transaction\'s receipt equals the node\'s (status, gas, logs): only the header differs';
}

/** The engine's receipts root of a block, with deposit nonces as the chain commits them. */
function executedRoot(engine: ExecutionEngine, rs: ExecutedReceipt[]): string {
  return receiptsRootOf(rs.length, (i) => (rs[i]!.type === TX_DEPOSIT ? { ...rs[i]!, depositNonce: engine.chainDepositNonce(rs[i]!) } : rs[i]!));
}

/** Executes block `b` as flashblocks on the open engine and compares it with the node's header. */
async function checkBlock(node: NodeClient, engine: ExecutionEngine, b: NodeBlock, spec: string, slices: number): Promise<BlockVerdict> {
  const txs = await readRawTxs(node, b);
  const parts = splitBlock(txs, slices);
  const executed: ExecutedReceipt[] = [];
  const deposits = b.txs.filter((x) => Number(x.type) === TX_DEPOSIT).length;
  const v: BlockVerdict = { block: b, spec, deposits, flashblocks: parts.length, compared: [], executedGas: 0n, rejected: null, firstDifference: null, hash: null };
  for (let i = 0; i < parts.length; i++) {
    const last = i === parts.length - 1;
    // The header's root on the last flashblock: the engine learns the chain's deposit-nonce convention from it.
    const out = await engine.applyFlashblock({ blockNumber: b.number, index: i, env: b.env, txs: txBatch(parts[i]!), receiptsRoot: last ? b.receiptsRoot : null });
    if (!out.ok) {
      if (out.reason !== 'tx_rejected') throw new CheckError(`block ${b.number}, flashblock ${i}: the engine could not execute it (${out.reason}): ${out.message}`);
      const hash = /0x[0-9a-f]{64}/i.exec(out.message)?.[0]?.toLowerCase();
      const index = hash === undefined ? executed.length : Math.max(executed.length, b.txHashes.indexOf(hash));
      v.rejected = { index, message: out.message };
      break;
    }
    executed.push(...out.receipts);
  }
  v.executedGas = executed.length === 0 ? 0n : executed[executed.length - 1]!.cumulativeGasUsed;
  if (b.receiptsRoot !== null) v.compared.push({ field: 'receipts root', node: b.receiptsRoot, executed: executedRoot(engine, executed) });
  if (b.gasUsed !== null) v.compared.push({ field: 'gas used', node: String(b.gasUsed), executed: String(v.executedGas) });
  if (b.logsBloom !== null) v.compared.push({ field: 'logs bloom', node: b.logsBloom, executed: logsBloom(executed.flatMap((r) => r.logs)) });
  if (v.rejected === null) v.hash = await checkHash(node, engine, b, spec, txs, executed);
  if (v.rejected !== null || v.compared.some((c) => c.node !== c.executed)) v.firstDifference = await explain(node, engine, v, executed);
  else if (v.hash?.checked === true && v.hash.hash !== b.hash) v.firstDifference = hashDifference(b, v.hash, v.compared.length);
  return v;
}

/**
 * The block's hash from its execution: the engine's post-state diff (asked before the block settles) applied to the
 * parent's tries over the node's trie nodes (debug_dbGet) gives the state root; the header is rebuilt around it.
 */
async function checkHash(node: NodeClient, engine: ExecutionEngine, b: NodeBlock, spec: string, txs: string[], executed: ExecutedReceipt[]): Promise<HashCheck> {
  if (b.env.parentBeaconBlockRoot === null) return { checked: false, why: 'headers before Ecotone are not rebuilt' };
  const jovian = forkIndex(spec) >= forkIndex('jovian');
  if (jovian && b.blobGasUsed === null) return { checked: false, why: "a Jovian header commits to the block's DA footprint (blobGasUsed), which the node does not give" };
  if (b.extraData === null) return { checked: false, why: 'the node gives no extraData for the block' };
  if (!(engine instanceof RevmEngine)) return { checked: false, why: 'the engine gives no post-state' };
  const changes = await engine.blockChanges(b.number);
  if (changes === null) return { checked: false, why: `the engine holds no post-state of block ${b.number}` };
  let parentStateRoot: string | null;
  try {
    const parent = await node.call<Record<string, unknown> | null>('eth_getBlockByNumber', ['0x' + (b.number - 1).toString(16), false]);
    parentStateRoot = typeof parent?.stateRoot === 'string' ? parent.stateRoot.toLowerCase() : null;
  } catch (e) {
    return { checked: false, why: `the node's parent block ${b.number - 1}: ${(e as Error).message}` };
  }
  if (parentStateRoot === null) return { checked: false, why: `the node gives no state root of the parent block ${b.number - 1}` };
  // Nothing of the node's would be read (and a dev node's genesis may claim the empty root over a funded state).
  if (parentStateRoot === EMPTY_TRIE_ROOT) return { checked: false, why: `the node gives the empty trie's root as the state root of the parent block ${b.number - 1}: no trie node to read` };
  try {
    const post = await computePostState(parentStateRoot, trieNodesOf(node), changes.accounts);
    const isthmus = forkIndex(spec) >= forkIndex('isthmus');
    const header = buildHeader({
      ...b.env,
      parentBeaconBlockRoot: b.env.parentBeaconBlockRoot ?? null,
      extraData: b.extraData,
      transactions: txs,
      receiptsRoot: executedRoot(engine, executed),
      logsBloom: logsBloom(executed.flatMap((r) => r.logs)),
      gasUsed: executed.length === 0 ? 0n : executed[executed.length - 1]!.cumulativeGasUsed,
      stateRoot: post.stateRoot,
      withdrawalsRoot: isthmus ? await post.storageRootOf(L2_TO_L1_MESSAGE_PASSER) : undefined,
      blobGasUsed: jovian ? b.blobGasUsed! : 0n,
    });
    return { checked: true, hash: blockHashOf(header), stateRoot: post.stateRoot };
  } catch (e) {
    if (e instanceof TrieNodeUnavailable) return { checked: false, why: `the node does not serve trie nodes (debug_dbGet): ${e.message}` };
    throw e;
  }
}

/** Why the computed hash differs when every compared field matched: the state root where the node gives one. */
function hashDifference(b: NodeBlock, h: { hash: string; stateRoot: string }, compared: number): string {
  if (b.stateRoot !== null && b.stateRoot !== h.stateRoot) return `state root node ${b.stateRoot}, computed ${h.stateRoot}`;
  const known = compared === 0 ? 'the node gives only the hash to tell which commitment differs' : "the compared fields match, so another header commitment differs (state root, transactions root, the fork's header fields)";
  return `computed state root ${h.stateRoot}: ${known}`;
}

/** One line for a block: chain, block, spec, transactions, and what matched. */
function formatVerdict(chain: string, v: BlockVerdict): string {
  const n = v.block.txHashes.length;
  const head = `chain ${chain} block ${v.block.number} spec ${v.spec} txs ${n} (${v.deposits} deposit${v.deposits === 1 ? '' : 's'}, ${v.flashblocks} flashblock${v.flashblocks === 1 ? '' : 's'})`;
  if (v.firstDifference !== null) {
    const fields = v.compared.map((c) => (c.node === c.executed ? `${c.field} matches` : `${c.field} differs (node ${c.node.length > 80 ? c.node.slice(0, 18) + '…' : c.node}, executed ${c.executed.length > 80 ? c.executed.slice(0, 18) + '…' : c.executed})`));
    if (v.rejected !== null) fields.unshift(`the engine rejects transaction ${v.rejected.index}`);
    if (v.hash?.checked === true) fields.push(v.hash.hash === v.block.hash ? 'block hash matches' : `block hash differs (node ${v.block.hash}, computed ${v.hash.hash})`);
    return `${head}: MISMATCH: ${fields.join('; ')}; ${v.firstDifference}`;
  }
  const hashLine =
    v.hash === null ? ''
    : v.hash.checked ? `block hash matches (state root computed over the node's trie nodes: ${v.hash.stateRoot})`
    : `block hash not checked: ${v.hash.why}`;
  if (v.compared.length === 3) return `${head}: match: receipts root, gas used (${v.executedGas}) and logs bloom equal the node's header${hashLine === '' ? '' : `; ${hashLine}`}`;
  if (v.hash?.checked === true) return `${head}: match: ${hashLine}; every transaction executed (gas used ${v.executedGas})`;
  const missing = (['receipts root', 'gas used', 'logs bloom'] as const).filter((f) => !v.compared.some((c) => c.field === f));
  const matched = v.compared.length === 0 ? '' : `${v.compared.map((c) => c.field).join(', ')} equal the node's header; `;
  return (
    `${head}: match of what is known: ${matched}every transaction executed (gas used ${v.executedGas}); the node gives no ${missing.join(', ').replace(/, ([^,]+)$/, ' or $1')} for this block ` +
    `(only its hash ${v.block.hash} is known); ${hashLine === '' ? 'block hash not checked' : hashLine}`
  );
}

function intFlag(name: string, raw: string | undefined, def: number, min: number, max: number): number {
  if (raw === undefined) return def;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) throw new CheckError(`--${name}: expected a whole number from ${min} to ${max}, got "${raw}"`);
  return Number(raw);
}

/** `--blocks N` or `N-M` (decimal or 0x), N ≥ 1 (its parent's state is the start). */
export function parseBlocks(raw: string): { first: number; last: number } {
  const m = /^\s*(0x[0-9a-f]+|\d+)\s*(?:-\s*(0x[0-9a-f]+|\d+)\s*)?$/i.exec(raw);
  const first = m === null ? NaN : Number(m[1]);
  const last = m === null ? NaN : m[2] === undefined ? first : Number(m[2]);
  if (!Number.isSafeInteger(first) || !Number.isSafeInteger(last) || first < 1 || last < first) {
    throw new CheckError(`--blocks: expected N or N-M with 1 <= N <= M (e.g. 1200 or 1200-1205), got "${raw}"`);
  }
  if (last - first + 1 > MAX_BLOCKS) throw new CheckError(`--blocks: at most ${MAX_BLOCKS} blocks in one run, got ${last - first + 1}`);
  return { first, last };
}

/** The chain's preset: --chain when it names one (it must be the node's chain), else the node's chain id's. */
function choosePreset(chainFlag: string, chainId: number): ChainPreset | null {
  if (chainFlag === 'auto') return presetByChainId(chainId);
  const p = presetByName(chainFlag);
  if (p === null) throw new CheckError(`--chain: "${chainFlag}" is not auto or a known chain (${PRESET_NAMES.join(', ')})`);
  if (p.chainId !== chainId) throw new CheckError(`--chain ${p.name} is chain ${p.chainId}, but the node answers eth_chainId ${chainId}`);
  return p;
}

/**
 * For a chain without a preset, as the daemon does: the fork the node's EIP-7910 eth_config names unambiguously; else
 * the check refuses (never a guessed fork).
 */
async function forkOfNode(node: NodeClient, chainId: number): Promise<ExecutionHardfork> {
  let why: string;
  try {
    const named = forkFromEthConfig(await node.call<unknown>('eth_config', []));
    if (named.ok) return named.fork;
    why = named.why;
  } catch (e) {
    why = `the node's eth_config failed (${(e as Error).message})`;
  }
  throw new CheckError(`chain ${chainId} has no preset and ${why}: give --execution-hardfork <fork> (${OP_HARDFORKS.join(', ')})`);
}

/** Runs `flashblocksd check-execution` with the arguments after its name; resolves with the exit code. */
export async function runCheckExecution(argv: string[], io: Pick<CliIo, 'stdout' | 'stderr'>): Promise<number> {
  let node: NodeClient | null = null;
  let engine: RevmEngine | null = null;
  try {
    let values: ReturnType<typeof parseCheckArgs>['values'];
    try {
      values = parseCheckArgs(argv).values;
    } catch (e) {
      throw new CheckError(`${(e as Error).message.replace(/'[a-z]+:\/\/[^']*'/gi, (m) => `'${redactUrl(m.slice(1, -1))}'`)} (see flashblocksd check-execution --help)`);
    }
    if (values.help === true) {
      io.stdout.write(checkExecutionHelp() + '\n');
      return CheckExit.MATCH;
    }
    const url = values['node-rpc-url'];
    if (url === undefined || url === '') throw new CheckError('give --node-rpc-url (the node whose canonical blocks to re-execute, http:// or https://)');
    if (!/^https?:\/\//i.test(url)) throw new CheckError(`--node-rpc-url ${redactUrl(url)}: expected an http:// or https:// URL`);
    if (values.blocks === undefined) throw new CheckError('give --blocks N or N-M (the canonical blocks to re-execute)');
    const { first, last } = parseBlocks(values.blocks);
    const hardfork = (values['execution-hardfork'] ?? 'auto').toLowerCase();
    if (hardfork !== 'auto' && !(OP_HARDFORKS as readonly string[]).includes(hardfork)) {
      throw new CheckError(`--execution-hardfork: "${hardfork}" is not auto or one of ${OP_HARDFORKS.join(', ')}`);
    }
    const timeoutMs = intFlag('node-timeout-ms', values['node-timeout-ms'], 10_000, 10, 600_000);
    node = new NodeClient({ url, timeoutMs, maxSockets: 8 });
    const client = node;
    const where = `the node at ${redactUrl(url)}`;
    let chainId: number;
    try {
      chainId = Number(await client.call<string>('eth_chainId', []));
    } catch (e) {
      throw new CheckError(`${where} did not answer eth_chainId: ${(e as Error).message}`);
    }
    if (!Number.isSafeInteger(chainId)) throw new CheckError(`${where} answered eth_chainId with something other than a chain id`);
    const preset = choosePreset((values.chain ?? 'auto').toLowerCase(), chainId);
    const specAt = executionSpecAt(preset === null && hardfork === 'auto' ? await forkOfNode(client, chainId) : (hardfork as ExecutionHardfork), preset);
    const slices = intFlag('slices', values.slices, preset === null ? DEFAULT_SLICES : Math.max(1, preset.flashblocksPerBlock - 1), 1, 1000);
    const chain = preset === null ? String(chainId) : `${chainId} (${preset.title})`;
    engine = new RevmEngine({
      node: { url, ...(process.env.NODE_EXTRA_CA_CERTS ? { caFile: process.env.NODE_EXTRA_CA_CERTS } : {}) },
      specAt,
      nodeTimeoutMs: timeoutMs,
      log: (msg, fields, level) => {
        if (level === 'error') io.stderr.write(`check-execution: engine: ${msg} ${JSON.stringify(fields)}\n`);
      },
    });
    try {
      await engine.start(first - 1);
    } catch (e) {
      throw new CheckError(`the execution engine cannot start on ${where} at block ${first - 1}: ${(e as Error).message}`);
    }
    let mismatches = 0;
    for (let n = first; n <= last; n++) {
      const block = await readBlock(client, n);
      // Block n runs on the engine's execution of n-1, settled against the node's header (dropped when it differs).
      if (n > first) engine.noteCanonical(n - 1);
      const v = await checkBlock(client, engine, block, specAt(block.env.timestamp), slices);
      if (v.firstDifference !== null) mismatches++;
      io.stdout.write(formatVerdict(chain, v) + '\n');
    }
    const count = last - first + 1;
    io.stdout.write(`check-execution: ${count} block${count === 1 ? '' : 's'}, ${mismatches === 0 ? 'all match' : `${mismatches} differ`}\n`);
    return mismatches === 0 ? CheckExit.MATCH : CheckExit.MISMATCH;
  } catch (e) {
    const known = e instanceof CheckError || e instanceof NodeBlockError || (e as Error)?.name === 'NodeError';
    io.stderr.write(`check-execution: ${known ? (e as Error).message : `unexpected error: ${(e as Error)?.stack ?? String(e)}`}\n`);
    return CheckExit.CANNOT_CHECK;
  } finally {
    await engine?.stop();
    node?.close();
  }
}

function parseCheckArgs(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: false,
    strict: true,
    options: {
      help: { type: 'boolean', short: 'h' },
      'node-rpc-url': { type: 'string' },
      blocks: { type: 'string' },
      'execution-hardfork': { type: 'string' },
      chain: { type: 'string' },
      slices: { type: 'string' },
      'node-timeout-ms': { type: 'string' },
    },
  });
}
