// Executed data through the same shapes as stream data, caches included: on a post-Azul stream (no receipts in
// metadata) a deposit's transaction object (alone, in a full block, in newFlashblockTransactions) and every receipt
// equal, byte for byte, those of the same flashblocks with receipts once the engine executed them — even when the
// pre-execution answer was read (and cached) first; a receipt the engine lacked is never served stale afterwards,
// nor one of a block whose execution diverged. The Unichain capture's receipts stand in for the engine's (its
// chain's state cannot run here).
import t from 'tap';
import { TX_DEPOSIT } from '../../../src/chain/types.js';
import type { ExecutedReceipt } from '../../../src/exec/receipts.js';
import { silentLogger } from '../../../src/log.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import { NodeClient } from '../../../src/node/client.js';
import type { ExecutionReads, PendingExecution } from '../../../src/rpc/execution.js';
import { executionReceiptSource } from '../../../src/rpc/methods/executed.js';
import { ETH_METHODS } from '../../../src/rpc/methods/eth.js';
import { FromState, RawJson, type MethodContext } from '../../../src/rpc/methods/types.js';
import { methodContext } from '../../../src/rpc/server.js';
import { Shapes } from '../../../src/rpc/shapes/json.js';
import { transactionWithReceipt } from '../../../src/rpc/shapes/subscription.js';
import type { BlockView } from '../../../src/state/view.js';
import { loadConfig } from '../../../src/config.js';
import { captureReceipts, opGethDepositNonce } from '../../helpers/capture-execution.js';
import { unichainMessages } from '../../helpers/fixtures.js';
import { feed, makePipeline } from '../../helpers/ingest.js';
import { txsOf } from '../../helpers/views.js';

/**
 * The capture fed as is (receipts in metadata), or post-Azul (metadata `{block_number}` only), or with the receipts
 * of the flashblocks in `without` left out (a stream carrying receipts for only some transactions).
 */
function run(azul: boolean, without: number[] = []) {
  const p = makePipeline();
  for (const m of unichainMessages()) {
    const c = structuredClone(m) as { index: number; metadata: Record<string, unknown> };
    if (azul) c.metadata = { block_number: c.metadata.block_number };
    if (without.includes(c.index)) c.metadata.receipts = {};
    feed(p.pipeline, c as unknown as Record<string, unknown>);
  }
  p.senders.recoverQueued();
  return { ...p, block: p.state.pendingBlock()! };
}

/**
 * An engine that executes the capture's flashblocks when the test says so: before, it has no receipt of them;
 * readyFor answers from how far it got (false when behind: the bounded wait ran out). `diverge` marks the block's
 * executed receipts as disagreeing with its receipts_root, as the feed does after executing a flashblock.
 */
class SteppedEngine implements PendingExecution {
  private readonly all: ExecutedReceipt[] = captureReceipts();
  private executedTxs = 0;
  private done = -1;
  private verified = true;
  private readonly listeners = new Set<(block: BlockView, index: number) => void>();
  readonly engine: ExecutionReads;

  constructor(private readonly block: BlockView) {
    const known = (): ExecutedReceipt[] => this.all.slice(0, this.executedTxs);
    this.engine = {
      receipt: (h: string) => known().find((r) => r.transactionHash === h) ?? null,
      blockReceipts: (n: number) => (n === this.block.number && this.executedTxs > 0 ? known() : null),
      chainDepositNonce: opGethDepositNonce,
    } as unknown as ExecutionReads;
  }

  readyFor(n: number, index: number): boolean {
    return n === this.block.number && index <= this.done;
  }

  receiptsVerified(): boolean {
    return this.verified;
  }

  onExecuted(fn: (block: BlockView, index: number) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Executes flashblocks up to `index` (its receipts readable), then tells the listeners. */
  execute(index: number): void {
    this.executedTxs = this.block.txCountAt[index] as number;
    this.done = index;
    for (const fn of this.listeners) fn(this.block, index);
  }

  /** The next executed flashblock disagreed with its receipts_root. */
  diverge(): void {
    this.verified = false;
    for (const fn of this.listeners) fn(this.block, this.done);
  }
}

const strip = (json: string | undefined, ...hashes: string[]): string | undefined => {
  let s = json;
  for (const h of hashes) s = s?.replaceAll(h, 'H');
  return s;
};

t.test('a deposit transaction object from execution is byte-identical to the stream one, after a cached read before execution', async (t) => {
  const ref = run(false);
  const azul = run(true);
  const engine = new SteppedEngine(azul.block);
  const fromStream = new Shapes(ref.senders);
  const fromExecution = new Shapes(azul.senders, executionReceiptSource(engine));
  const hashes = [ref.block.hash, azul.block.hash];
  const deposits = txsOf(azul.block).filter((r) => r.tx.type === TX_DEPOSIT);
  t.ok(deposits.length > 0, 'the capture holds a deposit');

  // Before the engine ran the block: no receipt to take the deposit's nonce from (read, and cached, like this).
  for (const rec of deposits) {
    const before = JSON.parse(fromExecution.txJson(rec).json) as Record<string, unknown>;
    t.notOk('nonce' in before, 'before execution: no nonce yet');
    t.notOk('depositReceiptVersion' in before, 'before execution: no receipt version yet');
  }
  const blockBefore = fromExecution.blockJson(azul.block, true).json;

  engine.execute(azul.block.lastIndex);
  for (const rec of deposits) {
    const want = fromStream.txJson(ref.block.txAt(rec.position)!).json;
    t.match(JSON.parse(want), { nonce: /^0x[0-9a-f]+$/, depositReceiptVersion: '0x1' }, 'the stream shows nonce and receipt version');
    t.equal(strip(fromExecution.txJson(rec).json, ...hashes), strip(want, ...hashes), `eth_getTransactionByHash ${rec.tx.hash.slice(0, 10)}: byte-identical once executed`);
    t.equal(strip(JSON.stringify(fromExecution.txObject(rec, rec.flashblockIndex)), ...hashes), strip(JSON.stringify(fromStream.txObject(ref.block.txAt(rec.position)!, rec.flashblockIndex)), ...hashes), 'as of its own flashblock too');
  }
  const blockAfter = fromExecution.blockJson(azul.block, true).json;
  t.not(blockAfter, blockBefore, 'the cached full block of before execution is not served after it');
  t.equal(strip(blockAfter, ...hashes), strip(fromStream.blockJson(ref.block, true).json, ...hashes), "eth_getBlockByNumber('pending', true): byte-identical");
  // newFlashblockTransactions full objects (built as the subscriptions hub builds them).
  for (let i = 0; i < azul.block.txCount; i++) {
    const a = azul.block.txAt(i)!;
    const b = ref.block.txAt(i)!;
    const got = JSON.stringify(transactionWithReceipt(fromExecution.txObject(a, a.flashblockIndex), fromExecution.receiptObject(a, a.flashblockIndex)));
    const want = JSON.stringify(transactionWithReceipt(fromStream.txObject(b, b.flashblockIndex), fromStream.receiptObject(b, b.flashblockIndex)));
    t.equal(strip(got, ...hashes), strip(want, ...hashes), `newFlashblockTransactions payload ${i}`);
  }
});

t.test('a receipt the engine lacked is served from the moment it has it (the null is not cached)', async (t) => {
  const ref = run(false);
  const azul = run(true);
  const engine = new SteppedEngine(azul.block);
  const shapes = new Shapes(azul.senders, executionReceiptSource(engine));
  const stream = new Shapes(ref.senders);
  const hashes = [ref.block.hash, azul.block.hash];
  const rec = azul.block.txAt(azul.block.txCount - 1)!;
  t.equal(shapes.receiptJson(rec), null, 'not executed: no receipt');
  t.equal(shapes.receiptJson(rec), null, 'polled again: still none');
  engine.execute(azul.block.lastIndex);
  const got = shapes.receiptJson(rec);
  t.ok(got, 'executed: the receipt, with no new flashblock in between');
  t.equal(strip(got?.json, ...hashes), strip(stream.receiptJson(ref.block.txAt(rec.position)!)?.json, ...hashes), 'byte-identical to the stream one');
  t.equal(shapes.receiptJson(rec), got, 'then cached');
});

t.test("a cached executed receipt is dropped when the block's execution diverges", async (t) => {
  const azul = run(true);
  const engine = new SteppedEngine(azul.block);
  const shapes = new Shapes(azul.senders, executionReceiptSource(engine));
  engine.execute(azul.block.lastIndex);
  const rec = azul.block.txAt(1)!;
  t.ok(shapes.receiptJson(rec), 'served (and cached) while verified');
  t.ok(shapes.txJson(azul.block.txAt(0)!).json.includes('"nonce"'), 'the deposit object shows its nonce');
  engine.diverge();
  t.equal(shapes.receiptJson(rec), null, 'not served once its block diverged');
  t.notOk(shapes.txJson(azul.block.txAt(0)!).json.includes('"nonce"'), 'nor the nonce taken from it');
});

/** The eth_ handlers over the post-Azul run with the stepped engine; the node is a closed port (never asked here). */
function handlers(azul: ReturnType<typeof run>, engine: SteppedEngine): MethodContext {
  const config = loadConfig([], {});
  return methodContext({
    options: config,
    view: azul.state,
    senders: azul.senders,
    events: azul.pipeline.events,
    node: new NodeClient({ url: 'http://127.0.0.1:9', timeoutMs: 500, maxSockets: 1 }),
    metrics: createMetrics({ version: 't', commit: 't' }),
    log: silentLogger,
    pendingUsable: () => true,
    execution: engine,
  });
}

async function answer(ctx: MethodContext, method: string, params: unknown[]): Promise<unknown> {
  const v = await ETH_METHODS.get(method)!(ctx, params, null);
  return v instanceof FromState ? v.value : v;
}

const text = (v: unknown): string => (v instanceof RawJson ? v.json : JSON.stringify(v));

t.test('eth_getTransactionReceipt, eth_getBlockReceipts, eth_getLogs(pending): forwarded while the engine is behind, from execution as soon as it has run', async (t) => {
  const ref = run(false);
  const azul = run(true);
  const engine = new SteppedEngine(azul.block);
  const ctx = handlers(azul, engine);
  t.teardown(() => ctx.subscriptions.close());
  const stream = new Shapes(ref.senders);
  const hashes = [ref.block.hash, azul.block.hash];
  const last = azul.block.txAt(azul.block.txCount - 1)!;
  const logsFilter = [{ fromBlock: 'pending', toBlock: 'pending' }];

  // The engine is behind (readyFor false: the wait ran out): answered by the node, i.e. forwarded.
  const fwd = (v: unknown): boolean => (v as { constructor: { name: string } }).constructor.name === 'Forward';
  t.ok(fwd(await answer(ctx, 'eth_getTransactionReceipt', [last.tx.hash])), 'receipt: forwarded before execution');
  t.ok(fwd(await answer(ctx, 'eth_getBlockReceipts', ['pending'])), 'block receipts: forwarded before execution');
  t.ok(fwd(await answer(ctx, 'eth_getLogs', logsFilter)), 'logs: forwarded before execution');

  engine.execute(azul.block.lastIndex);
  const receipt = await answer(ctx, 'eth_getTransactionReceipt', [last.tx.hash]);
  t.equal(strip(text(receipt), ...hashes), strip(stream.receiptJson(ref.block.txAt(last.position)!)!.json, ...hashes), 'receipt: from execution at once, byte-identical to the stream one');
  const all = await answer(ctx, 'eth_getBlockReceipts', ['pending']);
  const want = '[' + txsOf(ref.block).map((r) => stream.receiptJson(r)!.json).join(',') + ']';
  t.equal(strip(text(all), ...hashes), strip(want, ...hashes), 'block receipts: from execution at once, byte-identical');
  const logs = await answer(ctx, 'eth_getLogs', logsFilter);
  const wantLogs = txsOf(ref.block).flatMap((r) => stream.logObjects(r) ?? []);
  t.ok(wantLogs.length > 0, 'the capture has logs');
  t.equal(strip(text(logs), ...hashes), strip(JSON.stringify(wantLogs), ...hashes), 'logs: from execution at once, byte-identical');
  const tx = await answer(ctx, 'eth_getTransactionByHash', [azul.block.txAt(0)!.tx.hash]);
  t.equal(strip(text(tx), ...hashes), strip(stream.txJson(ref.block.txAt(0)!).json, ...hashes), 'the deposit via eth_getTransactionByHash: byte-identical');
});

t.test('a stream with receipts for only some transactions: those at once, the others (and what they hide) from execution', async (t) => {
  const ref = run(false);
  const part = run(false, [3]);
  const engine = new SteppedEngine(part.block);
  const shapes = new Shapes(part.senders, executionReceiptSource(engine));
  const stream = new Shapes(ref.senders);
  const hashes = [ref.block.hash, part.block.hash];
  const missing = part.block.txCountAt[2]!; // flashblock 3's transaction
  t.equal(part.block.txAt(missing)!.receipt, null, 'no receipt carried for it');
  const after = part.block.txAt(missing + 1)!;
  t.ok(after.receipt, 'the receipt after the missing one is kept');
  t.equal(after.gasUsed, null, 'its gasUsed needs the missing cumulative gas');
  for (let i = 0; i < missing; i++) {
    t.equal(strip(shapes.receiptJson(part.block.txAt(i)!)?.json, ...hashes), strip(stream.receiptJson(ref.block.txAt(i)!)?.json, ...hashes), `receipt ${i} served at once`);
  }
  t.equal(shapes.receiptJson(part.block.txAt(missing)!), null, 'the missing one waits for execution');
  t.equal(shapes.receiptJson(after), null, 'so does the one whose gasUsed and logIndex depend on it');
  engine.execute(part.block.lastIndex);
  for (const i of [missing, missing + 1]) {
    t.equal(strip(shapes.receiptJson(part.block.txAt(i)!)?.json, ...hashes), strip(stream.receiptJson(ref.block.txAt(i)!)?.json, ...hashes), `receipt ${i} from execution, as the full stream gives it`);
  }
});
