// The devnet speaking each stream dialect (?dialect=…, `npm run devnet -- --dialect …`), fed through the ingest
// pipeline: op-rbuilder's blocks hash as anvil seals them, OP subblocks' zero hashes are never kept and their
// transactions are the sealed block's, X Layer's access lists give the accounts' values the node then has.
import t from 'tap';
import WebSocket from 'ws';
import { rpcCall } from '../../scripts/devnet/anvil.js';
import { startDevnet } from '../../scripts/devnet/sequencer.js';
import { startTraffic } from '../../scripts/devnet/traffic.js';
import { feed, makePipeline } from '../helpers/ingest.js';
import { txsOf } from '../helpers/views.js';

const ZERO_HASH = '0x' + '00'.repeat(32);

function collect(url: string): { msgs: any[]; ws: WebSocket; open: Promise<void> } {
  const msgs: any[] = [];
  const ws = new WebSocket(url);
  ws.on('message', (data: Buffer) => msgs.push(JSON.parse(data.toString())));
  return { msgs, ws, open: new Promise((r) => ws.once('open', () => r())) };
}

/** Block numbers seen from their index 0 and followed by the next block's index 0 (so complete). */
function completeBlocks(msgs: any[]): number[] {
  const started = new Set<number>();
  for (const m of msgs) if (m.index === 0) started.add(m.metadata.block_number as number);
  const nums = [...started].sort((a, b) => a - b);
  return nums.slice(0, -1);
}

t.test('each dialect from the devnet replays as the blocks anvil seals', async (t) => {
  const devnet = await startDevnet({ blockTimeMs: 1000, flashblockMs: 250 });
  t.teardown(() => devnet.stop());
  const streams = {
    'op-rbuilder': collect(`${devnet.flashblocksUrl}?dialect=op-rbuilder`),
    'op-subblocks': collect(`${devnet.flashblocksUrl}?dialect=op-subblocks`),
    xlayer: collect(`${devnet.flashblocksUrl}?dialect=xlayer`),
  };
  t.teardown(() => Object.values(streams).forEach((c) => c.ws.terminate()));
  await Promise.all(Object.values(streams).map((c) => c.open));
  const traffic = await startTraffic({ rpcUrl: devnet.nodeRpcUrl, chainId: devnet.chainId, accounts: devnet.accounts.slice(0, 4), txPerSec: 30 });
  t.teardown(() => traffic.stop());
  const deadline = Date.now() + 20_000;
  while (completeBlocks(streams.xlayer.msgs).length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  await traffic.stop();
  // The sealed block lands on anvil shortly after the next block's index 0.
  await new Promise((r) => setTimeout(r, 300));

  for (const [dialect, c] of Object.entries(streams)) {
    const blocks = completeBlocks(c.msgs);
    t.ok(blocks.length >= 2, `${dialect}: ${blocks.length} complete blocks`);
    for (const n of blocks) {
      const p = makePipeline({ dialect });
      for (const m of c.msgs) if (m.metadata.block_number === n) feed(p.pipeline, m);
      t.same(Object.fromEntries(p.observer.decodeErrors), {}, `${dialect} block ${n}: every frame decodes`);
      t.equal(p.observer.verdicts.get('sequence_discarded'), undefined, `${dialect} block ${n}: no discard`);
      const b = p.state.block(n)!;
      const sealed = await rpcCall<any>(devnet.anvilUrl, 'eth_getBlockByNumber', ['0x' + n.toString(16), false]);
      t.same(txsOf(b).map((r) => r.tx.hash), sealed.transactions, `${dialect} block ${n}: the sealed block's transactions`);
      if (dialect === 'op-rbuilder') t.equal(b.hash, sealed.hash, `block ${n}: the builder's hash is the sealed hash`);
      if (dialect === 'op-subblocks') {
        for (const d of b.diffs) t.not(d.blockHash, ZERO_HASH, `block ${n}: no zero hash kept`);
        t.ok(b.localHash);
      }
      if (dialect === 'xlayer') {
        t.equal(b.noMetadata, true, 'no receipts in metadata');
        let checked = 0;
        for (const [addr, post] of b.accountPost) {
          const [bal, nonce, code] = await Promise.all([
            rpcCall<string>(devnet.anvilUrl, 'eth_getBalance', [addr, '0x' + n.toString(16)]),
            rpcCall<string>(devnet.anvilUrl, 'eth_getTransactionCount', [addr, '0x' + n.toString(16)]),
            rpcCall<string>(devnet.anvilUrl, 'eth_getCode', [addr, '0x' + n.toString(16)]),
          ]);
          t.equal(post.balance, BigInt(bal), `block ${n} ${addr.slice(0, 10)}: balance as the node has it`);
          t.equal(post.nonce, BigInt(nonce), `block ${n} ${addr.slice(0, 10)}: nonce`);
          t.equal(post.code ?? '0x', code.toLowerCase(), `block ${n} ${addr.slice(0, 10)}: code`);
          checked++;
        }
        t.ok(checked > 0, `block ${n}: ${checked} accounts listed`);
      }
    }
  }
});
