// The native core (the Rust crate in native/, built by `npm ci`): finds and loads its N-API addon once. The only
// place that loads it (in the single binary too: the copy scripts/sea-entry.ts extracted); src/exec/revm.ts wraps
// it. Knows nothing of flashblocks.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { isSea } from 'node:sea';
import { fileURLToPath } from 'node:url';

/**
 * The addon's engine class (native/src/engine.rs), as N-API exposes it: JSON strings and transaction bytes in, Promises
 * of JSON out. A call that fails rejects with `CODE: message` (engineErrorOf); a read or trace that fails resolves
 * with `{"error": {code, message, data}}` — the same codes, mapped to JSON-RPC by rpcCodeOf.
 */
export interface AddonEngine {
  reset(height: number): Promise<string>;
  /** `env`: the block env, number, index and receiptsRoot as JSON; `txs`/`bounds`: see TxBatch; `senders`: 21-byte rows. */
  apply(env: string, txs: Uint8Array, bounds: Uint32Array, senders: Uint8Array | null): Promise<string>;
  /** `hash`/`receiptsRoot`: the canonical header's, or '' when unknown. Resolves `{matched, dropped}`. */
  settle(number: number, hash: string, receiptsRoot: string): Promise<string>;
  read(req: string): Promise<string>;
  /** A trace (native/src/trace.rs), on the engine's trace thread (lower priority); answered as `read`. */
  trace(req: string): Promise<string>;
  /** The same read on the calling thread when it can be answered from memory within `budgetUs`, else null. */
  readInline(req: string, budgetUs: number): string | null;
  stats(): string;
  /**
   * Block `number`'s post-state diff so far (every account its applied flashblocks changed, merged): JSON of
   * {@link AddonBlockChanges}, or `null` when the engine does not hold the block. Ordered after earlier applies.
   */
  blockChanges(number: number): Promise<string>;
  panicNextApply(): void;
  close(): void;
}

/** A failed native call: its stable code (E_NODE, E_TX, E_NOT_NEXT, E_PANIC, …) and message. */
export interface EngineFailure {
  code: string;
  message: string;
}

/** The code and message of a native call's rejection (`CODE: message`); E_UNKNOWN for anything else. */
export function engineErrorOf(e: unknown): EngineFailure {
  const text = String((e as Error)?.message ?? e);
  const m = /^(E_[A-Z_]+): ([\s\S]*)$/.exec(text);
  return m === null ? { code: 'E_UNKNOWN', message: text } : { code: m[1]!, message: m[2]! };
}

/**
 * The JSON-RPC error code of an engine read's failure code (native/src/error.rs ReadError): invalid params, method
 * not found, a revert (3, with its data), a response over the limit, eth_simulateV1's own codes; else -32000.
 */
export function rpcCodeOf(code: string): number {
  return RPC_CODES[code] ?? -32000;
}

const RPC_CODES: Record<string, number> = {
  E_INPUT: -32602,
  E_UNSUPPORTED: -32601,
  E_REVERT: 3,
  E_TOO_LARGE: -32005,
  E_SIM_CALL: -38014,
  E_SIM_NUMBER: -38020,
  E_SIM_TIMESTAMP: -38021,
};

/** One account of a block's post-state diff (native/src/changes.rs); quantities and words are 0x-hex. */
export interface AddonAccountChange {
  address: string;
  /** Destroyed, or left empty (EIP-161): not in the post-state trie. */
  deleted: boolean;
  /** Its storage before the block is void (created or destroyed in it): start from an empty storage trie. */
  storageReset: boolean;
  balance: string;
  nonce: string;
  codeHash: string;
  /** Null when the engine never got the bytes (a node that lacked them: only its code hash is known). */
  code: string | null;
  /** [slot, value] as 32-byte words, sorted by slot; a zero value deletes the slot. */
  storage: [string, string][];
}

/** A block's post-state diff, as `blockChanges` gives it (accounts sorted by address). */
export interface AddonBlockChanges {
  accounts: AddonAccountChange[];
}

export interface Addon {
  /** `nodeHeadersJson`: a JSON object of extra headers; `nodeCaPem`: a CA trusted besides the Mozilla roots. */
  Engine: new (nodeUrl: string, nodeHeadersJson: string, nodeCaPem: string | null, cacheCapBytes: number, readThreads: number, timeoutMs: number) => AddonEngine;
  /** Frame decoding (native/src/frame), read by src/ingest/native-frame.ts; absent from an older build. */
  decodeFlashblock?(json: Buffer, mem: Buffer, at: number, room: number): AddonDecodeOutcome;
  takeLayout?(mem: Buffer, at: number): boolean;
  /** Sender recovery on the native recovery threads: `recoverStart` returns at once, `done(id, rows)` follows. */
  recoverInit?(done: (id: number, rows: Buffer) => void): void;
  recoverStart?(id: number, txBytes: Buffer, signed: Uint32Array): void;
  /** The same on one thread at the default priority (a late batch a query waits for); the same `done` follows. */
  recoverStartUrgent?(id: number, txBytes: Buffer, signed: Uint32Array): void;
  /** The same recovery on the calling thread: 21 bytes per triple of `signed`. */
  recoverNow?(txBytes: Buffer, signed: Uint32Array): Buffer;
}

/**
 * What native/src/frame `decodeFlashblock` returns: declined (with the reason) or accepted, its layout (format:
 * native/src/frame/layout.rs, read by src/chain/layout-body.ts) `size` bytes, written at the offset given when it fit
 * the room offered, else kept for `takeLayout`.
 */
export interface AddonDecodeOutcome {
  declined: string;
  size: number;
  written: boolean;
}

/** The addon file's name, under native/ in the package (or beside the single binary). */
export const ADDON_FILE = 'flashblocksd-native.node';

/**
 * Where scripts/sea-entry.ts leaves the path of the native core it extracted to the binary's private runtime
 * directory: a string, or null when the binary was built without it (build-binary.ts --without-native).
 */
const SEA_NATIVE_KEY = Symbol.for('flashblocksd.sea.nativeAddonPath');

/** In the single binary: the extracted native core's path, null when it has none, undefined when nothing was extracted. */
function embeddedPath(): string | null | undefined {
  const v = (globalThis as Record<symbol, unknown>)[SEA_NATIVE_KEY];
  return typeof v === 'string' || v === null ? v : undefined;
}

/**
 * Where the addon is looked for: FLASHBLOCKSD_NATIVE, then native/ of the package this file belongs to. In the
 * single binary only the copy it extracted: never a directory above its runtime directory (a shared temp dir).
 */
export function addonCandidates(): string[] {
  const out: string[] = [];
  if (process.env.FLASHBLOCKSD_NATIVE) out.push(resolve(process.env.FLASHBLOCKSD_NATIVE));
  if (isSea()) {
    const p = embeddedPath();
    if (typeof p === 'string') out.push(p);
    return out;
  }
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    out.push(join(dir, 'native', ADDON_FILE));
    dir = dirname(dir);
  }
  return out;
}

let loaded: Addon | Error | null = null;

/** The addon, or an Error saying why it could not be loaded (missing, or built for another platform). */
export function loadAddon(): Addon | Error {
  if (loaded !== null) return loaded;
  const sea = isSea();
  const path = addonCandidates().find((p) => existsSync(p));
  if (path === undefined) {
    loaded = new Error(
      !sea
        ? `the native core (${ADDON_FILE}) is not built: run \`npm ci\` (needs the Rust toolchain, cargo ≥ 1.94) or \`npm run build:native\``
        : embeddedPath() === null
          ? 'this binary was built without the native core (build-binary --without-native): use a binary built with it, or pass --execution false (pending state from the stream alone)'
          : `this binary did not extract its native core (${ADDON_FILE}); scripts/sea-entry.ts must be the entry`,
    );
    return loaded;
  }
  try {
    loaded = createRequire(import.meta.url)(path) as Addon;
    if (typeof loaded.Engine !== 'function') loaded = new Error(`${path} is not flashblocksd's native core`);
  } catch (e) {
    const fix = !sea
      ? 'rebuild it with `npm run build:native`'
      : path === embeddedPath()
        ? 'its directory must allow executable mappings (not mounted noexec): set RUNTIME_DIRECTORY or XDG_RUNTIME_DIR to another directory, or pass --execution false'
        : 'FLASHBLOCKSD_NATIVE must name a native core built for this binary (or be unset: the binary carries its own)';
    loaded = new Error(`the native core at ${path} did not load: ${(e as Error).message}; ${fix}`);
  }
  return loaded;
}
