// Every real block of ../shared/conformance/op-blocks through the engine (RevmEngine over the block's witness node),
// then further than a flashblock stream can go: the post-state diff the engine exports (blockChanges) applied to the
// parent's tries with @ethereumjs/mpt over the witness, the header rebuilt from it, and its hash compared with the
// real block's. Where the fixture has the full header, every field is compared (the diagnosis when the hash differs).
import t, { type Test } from 'tap';
import { loadWitnessFixture, type WitnessFixture } from '../../scripts/witness/fixture.js';
import { startWitnessNode } from '../../scripts/witness/server.js';
import type { HeaderFields } from '../../src/chain/header.js';
import { OP_BLOCKS_ABSENT, opBlockFixtures } from '../helpers/op-blocks.js';
import { engineFor, executeBlock, rebuildHeader, specOf } from '../helpers/real-block.js';

const fixtures = opBlockFixtures();
if (fixtures.length === 0) t.plan(0, OP_BLOCKS_ABSENT);

/** The header fields compared with the real header, each as a lower-case string. */
function fieldsOf(h: HeaderFields): Record<string, string> {
  return {
    parentHash: h.parentHash, miner: h.feeRecipient, stateRoot: h.stateRoot, transactionsRoot: h.transactionsRoot, receiptsRoot: h.receiptsRoot,
    logsBloom: h.logsBloom, number: String(h.number), gasLimit: String(h.gasLimit), gasUsed: String(h.gasUsed), timestamp: String(h.timestamp),
    extraData: h.extraData, mixHash: h.prevRandao, baseFeePerGas: String(h.baseFeePerGas), withdrawalsRoot: h.withdrawalsRoot,
    blobGasUsed: String(h.blobGasUsed), parentBeaconBlockRoot: h.parentBeaconBlockRoot, requestsHash: String(h.requestsHash),
  };
}

function realFields(fx: WitnessFixture): Record<string, string> | null {
  const h = fx.header;
  if (h === null) return null;
  return {
    parentHash: h.parentHash, miner: h.miner, stateRoot: h.stateRoot, transactionsRoot: h.transactionsRoot, receiptsRoot: h.receiptsRoot,
    logsBloom: h.logsBloom, number: String(h.number), gasLimit: String(h.gasLimit), gasUsed: String(h.gasUsed), timestamp: String(h.timestamp),
    extraData: h.extraData, mixHash: h.mixHash, baseFeePerGas: String(h.baseFeePerGas), withdrawalsRoot: String(h.withdrawalsRoot),
    blobGasUsed: String(h.blobGasUsed), parentBeaconBlockRoot: String(h.parentBeaconBlockRoot), requestsHash: String(h.requestsHash),
  };
}

const table: string[] = [];

async function check(t: Test, file: string, name: string): Promise<void> {
  const fx = await loadWitnessFixture(file);
  const node = await startWitnessNode(fx);
  t.teardown(() => node.close());
  t.equal(specOf(fx), fx.fork, `${name}: the daemon's preset runs it under ${fx.fork}`);
  const e = await engineFor(fx, node.url);
  t.teardown(() => e.stop());
  const ex = await executeBlock(e, fx);
  if (ex.failure !== null) {
    t.fail(`${name}: the engine failed the block: ${ex.failure}`);
    table.push(`${name} | ${fx.chain} | ${fx.fork} | ${fx.block.transactions.length} | engine failed: ${ex.failure}`);
    return;
  }
  t.equal(ex.receipts.length, fx.block.transactions.length, `${name}: one receipt per transaction`);
  const { header, hash } = await rebuildHeader(e, fx, ex.receipts);
  const matched: string[] = [];
  const real = realFields(fx);
  if (real !== null) {
    const mine = fieldsOf(header);
    for (const k of Object.keys(real)) {
      const same = mine[k]!.toLowerCase() === real[k]!.toLowerCase();
      t.ok(same, `${name}: header ${k} ${same ? 'matches' : `differs: computed ${mine[k]}, real ${real[k]}`}`);
      if (same && ['receiptsRoot', 'gasUsed', 'logsBloom', 'stateRoot'].includes(k)) matched.push(k);
    }
  }
  const want = fx.expectedBlockHash ?? fx.header?.hash ?? null;
  t.ok(want !== null, `${name}: the fixture names its block hash`);
  t.equal(hash, want, `${name}: the block hash rebuilt from execution and the recomputed state root is the real block's`);
  if (hash === want) matched.push('block hash');
  table.push(`${name} | ${fx.chain} | ${fx.fork} | ${fx.block.transactions.length} | ${matched.join(', ') || 'nothing'}`);
}

for (const f of fixtures) t.test(`${f.name}: executed, its state root recomputed over the witness, its block hash the real one`, (t) => check(t, f.file, f.name));

t.teardown(() => {
  if (table.length > 0) console.log(`# block | chain | fork | txs | matched\n# ${table.join('\n# ')}`);
});
