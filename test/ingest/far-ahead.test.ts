// The far-future flashblock of issue 17 against the real daemon: anvil as the node (canonical head 0), frames handed
// to the daemon's own pipeline, answers read over JSON-RPC. One well-formed index 0 a million blocks ahead must not
// become `pending`; the real blocks after it must.
import t from 'tap';
import { performance } from 'node:perf_hooks';
import { loadConfig } from '../../src/config.js';
import { startDaemon } from '../../src/daemon.js';
import { silentLogger } from '../../src/log.js';
import { rpcCall, startAnvil } from '../../scripts/devnet/anvil.js';
import { unichainAtHeight } from '../helpers/fixtures.js';

const atHeight = unichainAtHeight;

t.test('a far-future index 0 is refused; eth_blockNumber and eth_getBlockByNumber("pending") follow the real blocks', async (t) => {
  const anvil = await startAnvil({ chainId: 31337, automine: true });
  t.teardown(() => anvil.stop());
  const config = { ...loadConfig([], {}), port: 0, metricsPort: 0, host: '127.0.0.1', flashblocksUrls: [], nodeRpcUrl: anvil.url, canonicalPollMs: 20 };
  const d = await startDaemon(config, { log: silentLogger });
  t.teardown(() => d.stop());
  for (let i = 0; i < 500 && d.view.canonical < 0; i++) await new Promise((r) => setTimeout(r, 10));
  t.equal(d.view.canonical, 0, "the node's head (anvil's genesis) is known");

  const url = `http://127.0.0.1:${d.rpcPort}/`;
  const send = (m: Record<string, unknown>): void =>
    d.pipeline.handleFrame({ data: Buffer.from(JSON.stringify(m)), isBinary: false, upstream: 0, receivedAtMs: performance.now() });
  for (const m of atHeight(1)) send(m);
  t.equal(await rpcCall(url, 'eth_blockNumber', ['pending']), '0x1');

  send(atHeight(1_000_001)[0]!);
  t.equal(d.metrics.sequenceVerdicts.too_far_ahead.value, 1, 'refused and counted');
  t.equal(await rpcCall(url, 'eth_blockNumber', ['pending']), '0x1', 'pending did not jump');

  // Anvil does not mine here, so the head stays 0: blocks up to 1 + 20 s / 2 s ahead are within the bound.
  for (let n = 2; n <= 9; n++) {
    for (const m of atHeight(n)) send(m);
    t.equal(await rpcCall(url, 'eth_blockNumber', ['pending']), '0x' + n.toString(16), `pending height follows block ${n}`);
    const b = await rpcCall<{ number: string }>(url, 'eth_getBlockByNumber', ['pending', false]);
    t.equal(b.number, '0x' + n.toString(16), `pending block is block ${n}`);
  }
  t.equal(d.metrics.sequenceVerdicts.too_far_ahead.value, 1, 'real blocks are never refused');
});
