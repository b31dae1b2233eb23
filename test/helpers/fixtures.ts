// Test fixture loading: the recorded flashblock captures under test/fixtures (see test/fixtures/SOURCES.md).
import { readFileSync } from 'node:fs';
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
