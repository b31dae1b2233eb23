// The native engine on the devnet sequencer's real flashblocks (real signed txs of every type, 7702 and deploys
// included, built every 200 ms): every applied flashblock's executed receipts root equals its diff.receipts_root.
import t from 'tap';
import { startDevnet, type BuiltFlashblock } from '../../scripts/devnet/sequencer.js';
import { startTraffic } from '../../scripts/devnet/traffic.js';
import { txBatch, type BlockEnv, type FlashblockWork } from '../../src/exec/engine.js';
import { RevmEngine } from '../../src/exec/revm.js';

const BLOCKS = 3;
/** Traffic is sent at 40 txs a second but a busy machine sends fewer: the run goes on (up to this many blocks) until it has 20. */
const MAX_BLOCKS = 30;
const MIN_TXS = 20;

t.test('the native engine verifies every devnet flashblock against its receipts root', async (t) => {
  const devnet = await startDevnet({ blockTimeMs: 1000, flashblockMs: 200 });
  t.teardown(() => devnet.stop());
  const traffic = await startTraffic({ rpcUrl: devnet.nodeRpcUrl, chainId: devnet.chainId, accounts: devnet.accounts.slice(0, 5), txPerSec: 40 });
  t.teardown(() => traffic.stop());

  const seen: BuiltFlashblock[] = [];
  let wake: (() => void) | null = null;
  devnet.onFlashblock((fb) => {
    seen.push(fb);
    wake?.();
  });
  const next = async (): Promise<BuiltFlashblock> => {
    while (seen.length === 0) await new Promise<void>((r) => (wake = r));
    return seen.shift()!;
  };
  // Start at a block boundary: the node has sealed N-1 when index 0 of N is out.
  let fb = await next();
  while (fb.index !== 0 || fb.blockNumber < 3) fb = await next();
  const url = devnet.nodeRpcUrl;
  const engine = new RevmEngine({
    node: { url },
    specAt: () => 'isthmus',
  });
  t.teardown(() => engine.stop());
  await engine.start(fb.blockNumber - 1);

  const first = fb.blockNumber;
  let env: BlockEnv | null = null;
  let applied = 0;
  let txs = 0;
  for (;;) {
    if (fb.index === 0) {
      if (fb.blockNumber >= first + BLOCKS && (txs > MIN_TXS || fb.blockNumber >= first + MAX_BLOCKS)) break;
      const b = fb.base!;
      env = {
        number: fb.blockNumber, timestamp: Number(b.timestamp), baseFeePerGas: BigInt(b.base_fee_per_gas!),
        feeRecipient: String(b.fee_recipient), gasLimit: BigInt(b.gas_limit!), prevRandao: String(b.prev_randao), parentHash: String(b.parent_hash),
        parentBeaconBlockRoot: b.parent_beacon_block_root ?? null,
      };
      // The node sealed the block before this one: the engine settles it (the feed does this on canonical heads).
      if (fb.blockNumber > first) engine.noteCanonical(fb.blockNumber - 1);
    }
    const work: FlashblockWork = { blockNumber: fb.blockNumber, index: fb.index, env: env!, txs: txBatch(fb.diff.transactions), receiptsRoot: fb.diff.receipts_root };
    const out = await engine.applyFlashblock(work);
    if (!out.ok) {
      t.fail(`${fb.blockNumber}/${fb.index}: ${out.message}`);
      break;
    }
    t.equal(out.verified, true, `${fb.blockNumber}/${fb.index} (${fb.diff.transactions.length} txs) verified`);
    applied++;
    txs += fb.diff.transactions.length;
    fb = await next();
  }
  t.ok(applied >= BLOCKS * 3, `applied ${applied} flashblocks`);
  t.ok(txs > MIN_TXS, `with ${txs} transactions`);
  t.equal(engine.status().divergences, 0, 'no divergence');
});
