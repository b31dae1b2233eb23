// keccak-256 through the native `keccak` addon, used directly: the package's public API wraps every hash in a
// stream object (~16 µs per 250 B here); one reused native state costs 2.4 µs (bench/ingest.ts, keccak rows).
// Must not fall back silently: src/native.ts checks at start-up that the binding loaded.
import { createRequire } from 'node:module';
import path from 'node:path';
import { keccak_256 } from '@noble/hashes/sha3.js';

interface KeccakState {
  initialize(rate: number, capacity: number): void;
  absorb(data: Uint8Array): void;
  absorbLastFewBits(bits: number): void;
  squeeze(length: number): Buffer;
}

function loadNativeState(): KeccakState | null {
  try {
    const require = createRequire(import.meta.url);
    const dir = path.dirname(require.resolve('keccak/package.json'));
    const build = createRequire(path.join(dir, 'package.json'))('node-gyp-build') as (d: string) => unknown;
    const Addon = build(dir);
    if (typeof Addon !== 'function') return null;
    return new (Addon as new () => KeccakState)();
  } catch {
    return null;
  }
}

const state = loadNativeState();

/** True when the native keccak binding loaded (start-up refuses or warns otherwise). */
export const keccakIsNative = state !== null;

/** keccak-256 of `data`, 32 bytes. The native state is reused: the call is synchronous and not re-entrant-unsafe. */
export function keccak256(data: Uint8Array): Buffer {
  if (state !== null) {
    state.initialize(1088, 512);
    state.absorb(Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    state.absorbLastFewBits(0x01);
    return state.squeeze(32);
  }
  const d = keccak_256(data);
  return Buffer.from(d.buffer, d.byteOffset, d.byteLength);
}

/** keccak-256 as lower-case 0x-hex. */
export function keccak256Hex(data: Uint8Array): string {
  return '0x' + keccak256(data).toString('hex');
}
