// The 2048-bit logs bloom (yellow paper §4.3.1), pure. Used for per-receipt logsBloom.
import { keccak256 } from './keccak.js';
import { hexToBytes } from './hex.js';

/** Adds one value (an address or topic, as bytes) to a 256-byte bloom. */
export function bloomAdd(bloom: Uint8Array, value: Uint8Array): void {
  const h = keccak256(value);
  for (let i = 0; i < 6; i += 2) {
    const bit = (((h[i] as number) << 8) | (h[i + 1] as number)) & 2047;
    const pos = 255 - (bit >> 3);
    bloom[pos] = (bloom[pos] as number) | (1 << (bit & 7));
  }
}

/** The bloom of a list of logs, as lower-case 0x-hex. */
export function logsBloom(logs: ReadonlyArray<{ address: string; topics: readonly string[] }>): string {
  const bloom = new Uint8Array(256);
  for (const log of logs) {
    bloomAdd(bloom, hexToBytes(log.address));
    for (const t of log.topics) bloomAdd(bloom, hexToBytes(t));
  }
  return '0x' + Buffer.from(bloom).toString('hex');
}

/** The empty bloom (all zero), as 0x-hex. */
export const EMPTY_BLOOM = '0x' + '00'.repeat(256);
