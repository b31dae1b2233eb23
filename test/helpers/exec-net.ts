// A real anvil node with the execution tests' contracts (env probe, refund, SINK reader) and canonical blocks of real
// signed transactions cut into flashblocks, for the engines' unit tests (test/exec/); and a native engine reading such
// a node directly. Test-only.
import type { Test } from 'tap';
import { startAnvil, type Anvil } from '../../scripts/devnet/anvil.js';
import { BlockFactory, type BuiltBlock, type ExecContracts } from '../../scripts/devnet/exec-blocks.js';
import { RevmEngine, type RevmEngineOptions } from '../../src/exec/revm.js';

export interface Net {
  node: Anvil;
  c: ExecContracts;
  blocks: BuiltBlock[];
}

/** A node with the probe/refund/reader contracts and `count` canonical blocks cut into flashblocks. */
export async function net(t: Test, count: number, flashblocks: number, perFlashblock: number): Promise<Net> {
  const node = await startAnvil({ accounts: 30, extraArgs: ['--gas-limit', '1000000000'] });
  t.teardown(() => node.stop());
  const f = await BlockFactory.open(node, 30);
  const c = await f.setupContracts();
  const blocks: BuiltBlock[] = [];
  for (let i = 0; i < count; i++) blocks.push(await f.buildBlock(flashblocks, perFlashblock, true));
  f.close();
  return { node, c, blocks };
}

/** One JSON-RPC call to the node; its result. */
export async function nodeCall(node: Anvil, method: string, params: unknown[]): Promise<string> {
  const r = await fetch(node.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  return ((await r.json()) as { result: string }).result;
}

/** A native engine reading `node` directly (isthmus, 3 s node timeout), stopped at `t`'s teardown; `o` adds options. */
export function anvilEngine(t: Test, node: Anvil, o: Partial<RevmEngineOptions> = {}): RevmEngine {
  const e = new RevmEngine({
    node: { url: node.url },
    specAt: () => 'isthmus',
    nodeTimeoutMs: 3000,
    ...o,
  });
  t.teardown(() => e.stop());
  return e;
}
