// The spec a block is executed with (src/exec/spec.ts, shared by the daemon and check-execution): a fixed fork, the
// chain's schedule by timestamp, and no guess for a chain without a preset.
import t from 'tap';
import { presetByName } from '../../src/chain/presets.js';
import { executionSpecAt } from '../../src/exec/spec.js';

t.test('a fixed --execution-hardfork is used for every block, preset or not', async (t) => {
  t.equal(executionSpecAt('bedrock', null)(0), 'bedrock');
  t.equal(executionSpecAt('karst', presetByName('xlayer'))(1_900_000_000), 'karst');
});

t.test("auto follows the chain's schedule, one second either side of an activation", async (t) => {
  const op = presetByName('op-mainnet')!;
  const specAt = executionSpecAt('auto', op);
  t.equal(specAt(op.forks.isthmus! - 1), 'holocene');
  t.equal(specAt(op.forks.isthmus!), 'isthmus');
  t.equal(specAt(op.forks.jovian!), 'jovian');
  t.equal(specAt(1783526401 - 1), 'jovian', 'OP Mainnet before Karst');
  t.equal(specAt(1783526401), 'karst', 'OP Mainnet from Karst (2026-07-08 16:00:01 UTC)');
  t.equal(executionSpecAt('auto', presetByName('xlayer'))(1_900_000_000), 'jovian', 'X Layer stays on Jovian');
});

t.test('auto without a preset is refused, never guessed', async (t) => {
  t.throws(() => executionSpecAt('auto', null), /give --execution-hardfork/);
});
