// Test fixture loading: the recorded flashblock captures under test/fixtures (see test/fixtures/SOURCES.md).
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Absolute path of a file under test/fixtures. */
export function fixturePath(rel: string): string {
  return fileURLToPath(new URL('../fixtures/' + rel, import.meta.url));
}

/** Parsed JSON of a fixture file. */
export function loadJson<T = unknown>(rel: string): T {
  return JSON.parse(readFileSync(fixturePath(rel), 'utf8')) as T;
}

/** The Unichain Sepolia block 35535698 capture: 5 flashblock messages. */
export function unichainMessages(): Record<string, unknown>[] {
  return loadJson('flashblocks/unichain-sepolia-block-35535698.messages.json');
}

/** The canonical eth_getBlockByNumber(35535698, true) result beside the capture. */
export function unichainRpcBlock(): Record<string, unknown> {
  const j = loadJson<Record<string, unknown>>('flashblocks/unichain-sepolia-block-35535698.rpc-block.json');
  return (j.result as Record<string, unknown> | undefined) ?? j;
}

/** The Base Sepolia block 33439826 capture: 11 flashblock messages. */
export function baseSepoliaMessages(): Record<string, unknown>[] {
  return loadJson('flashblocks/base-sepolia-block-33439826.messages.json');
}

/** The Unichain capture (5 flashblocks) moved to height n with its own payload id and block hashes. */
export function unichainAtHeight(n: number): Record<string, any>[] {
  return unichainMessages().map((m) => {
    const c = structuredClone(m) as Record<string, any>;
    c.metadata.block_number = n;
    c.payload_id = '0x' + n.toString(16).padStart(16, '0');
    c.diff.block_hash = '0x' + n.toString(16).padStart(8, '0') + (c.diff.block_hash as string).slice(10);
    if (c.base) c.base.block_number = '0x' + n.toString(16);
    return c;
  });
}

/** Every `txbytes` of the ethereum/tests TransactionTests vectors (valid and invalid), in file order. */
export function transactionTestBytes(): string[] {
  const out: string[] = [];
  const root = fixturePath('ethereum-tests/TransactionTests/');
  for (const folder of readdirSync(root).sort()) {
    for (const file of readdirSync(`${root}/${folder}`).sort()) {
      const suite = JSON.parse(readFileSync(`${root}/${folder}/${file}`, 'utf8')) as Record<string, { txbytes?: unknown }>;
      for (const vec of Object.values(suite)) if (typeof vec.txbytes === 'string') out.push(vec.txbytes);
    }
  }
  return out;
}
