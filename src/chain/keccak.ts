// keccak-256: small inputs (trie nodes, signing payloads, hashes of hashes) through the WebAssembly keccak's pool,
// larger ones through the native `keccak` addon, used directly: the package's public API wraps every hash in a
// stream object (~16 µs per 250 B here); one reused native state costs ~3 µs for 220 B, the WebAssembly one ~1.5 µs
// (N-API call overhead dominates up to ~4 KB, where the two meet). Must not fall back silently: src/binaries.ts checks
// at start-up that the binding loaded.
import { createRequire } from 'node:module';
import path from 'node:path';
import { keccak_256 } from '@noble/hashes/sha3.js';
import { keccakPool, keccakPoolDigest } from './keccak-wasm.js';

interface KeccakState {
  initialize(rate: number, capacity: number): void;
  absorb(data: Uint8Array): void;
  absorbLastFewBits(bits: number): void;
  squeeze(length: number): Buffer;
}

/** Why the native binding did not load (for the start-up warning), or null. */
let loadError: string | null = null;

function loadNativeState(): KeccakState | null {
  try {
    const require = createRequire(import.meta.url);
    const dir = path.dirname(require.resolve('keccak/package.json'));
    const build = createRequire(path.join(dir, 'package.json'))('node-gyp-build') as (d: string) => unknown;
    const Addon = build(dir);
    if (typeof Addon !== 'function') {
      loadError = 'the keccak addon is not a constructor';
      return null;
    }
    return new (Addon as new () => KeccakState)();
  } catch (e) {
    loadError = (e as Error).message;
    return null;
  }
}

const state = loadNativeState();

/** True when the native keccak binding loaded (start-up refuses or warns otherwise). */
export const keccakIsNative = state !== null;
/** Why the native keccak binding did not load; null when it did. */
export const keccakLoadError: string | null = loadError;

/** Inputs up to this size go through the WebAssembly pool (faster below ~4 KB, measured). */
const WASM_MAX_BYTES = 2048;

/**
 * keccak-256 of `data`, 32 fresh bytes. Both the pool and the native state are reused: synchronous, never
 * re-entered. Callers that hash straight from `keccakPool` (src/chain/lazy-tx.ts) must not call this in between
 * writing the pool and hashing it.
 */
export function keccak256(data: Uint8Array): Buffer {
  if (data.length <= WASM_MAX_BYTES) {
    keccakPool.set(data);
    return keccakPoolDigest(data.length);
  }
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
