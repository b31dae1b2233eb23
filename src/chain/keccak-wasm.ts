// keccak-256 in WebAssembly over a pooled input area, for the ingest hot path (one hash per transaction). The module
// is assembled here at load (no binary blob, no dependency). Must stay synchronous and single-threaded: one pool.
//
// Why not the native `keccak` addon (src/chain/keccak.ts)? Four N-API calls and a Buffer allocation per hash cost
// ~2.9 µs for a 210-byte transaction; this costs ~1 µs, and the transaction's hex is decoded straight into the pool.

/** Rotation offsets r[x + 5y] of the rho step. */
const ROTATIONS = [0, 1, 62, 28, 27, 36, 44, 6, 55, 20, 3, 10, 43, 25, 39, 41, 45, 15, 21, 8, 18, 2, 61, 56, 14];
const ROUND_CONSTANTS = [
  0x0000000000000001n, 0x0000000000008082n, 0x800000000000808an, 0x8000000080008000n, 0x000000000000808bn,
  0x0000000080000001n, 0x8000000080008081n, 0x8000000000008009n, 0x000000000000008an, 0x0000000000000088n,
  0x0000000080008009n, 0x000000008000000an, 0x000000008000808bn, 0x800000000000008bn, 0x8000000000008089n,
  0x8000000000008003n, 0x8000000000008002n, 0x8000000000000080n, 0x000000000000800an, 0x800000008000000an,
  0x8000000080008081n, 0x8000000000008080n, 0x0000000080000001n, 0x8000000080008008n,
];
const RATE_BYTES = 136;
/** Memory layout: digest at 0, hex digits table at 32, round constants at 64, "0x" + hex digest at 256, input from 384. */
const DIGITS_OFFSET = 32;
const RC_OFFSET = 64;
const HEX_OFFSET = 256;
const HEX_CHARS = 66;
const INPUT_OFFSET = 384;
const MEMORY_PAGES = 8;

function uleb(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
}

function sleb(v: bigint): number[] {
  const out: number[] = [];
  for (;;) {
    const b = Number(v & 0x7fn);
    v >>= 7n;
    if ((v === 0n && (b & 0x40) === 0) || (v === -1n && (b & 0x40) !== 0)) {
      out.push(b);
      return out;
    }
    out.push(b | 0x80);
  }
}

/**
 * The module: memory "m" and `f(ptr, length)`, which pads the `length` bytes at `ptr` (overwriting up to 136 bytes
 * after them), absorbs the padded 136-byte blocks into a zero state (keccak-f[1600], 24 rounds, lanes in i64 locals), stores the first 32 bytes of the state at 0 and their
 * lower-case hex at HEX_OFFSET + 2.
 */
function assemble(): Uint8Array {
  // Locals: 0 ptr, 1 length then blocks (params); 2 round (i32); A 3..27, B 28..52, C 53..57, D 58..62 (i64);
  // 63 END (i32).
  const A = (i: number): number => 3 + i;
  const B = (i: number): number => 28 + i;
  const C = (i: number): number => 53 + i;
  const D = (i: number): number => 58 + i;
  const END = 63;
  const c: number[] = [];
  const get = (l: number): void => void c.push(0x20, ...uleb(l));
  const set = (l: number): void => void c.push(0x21, ...uleb(l));
  const i64 = (v: bigint): void => void c.push(0x42, ...sleb(v));
  const i32 = (v: number): void => void c.push(0x41, ...sleb(BigInt(v)));
  const XOR = 0x85;
  const AND = 0x83;
  const ROTL = 0x89;
  // Padding (pad10*1 with the keccak domain bit): END = ptr + (len / 136 + 1) * 136; zero [ptr + len, END);
  // mem[ptr + len] = 0x01; mem[END - 1] |= 0x80; then `blocks` = (END - ptr) / 136.
  get(0);
  get(1);
  i32(RATE_BYTES);
  c.push(0x6e); // i32.div_u
  i32(1);
  c.push(0x6a);
  i32(RATE_BYTES);
  c.push(0x6c, 0x6a); // i32.mul; i32.add
  set(END);
  get(0);
  get(1);
  c.push(0x6a);
  i32(0);
  get(END);
  get(0);
  get(1);
  c.push(0x6a, 0x6b); // i32.add; i32.sub
  c.push(0xfc, 0x0b, 0x00); // memory.fill
  get(0);
  get(1);
  c.push(0x6a);
  i32(1);
  c.push(0x3a, 0x00, 0x00); // i32.store8
  get(END);
  i32(1);
  c.push(0x6b);
  get(END);
  i32(1);
  c.push(0x6b);
  c.push(0x2d, 0x00, 0x00); // i32.load8_u
  i32(0x80);
  c.push(0x72); // i32.or
  c.push(0x3a, 0x00, 0x00);
  get(END);
  get(0);
  c.push(0x6b);
  i32(RATE_BYTES);
  c.push(0x6e);
  set(1);
  c.push(0x02, 0x40, 0x03, 0x40); // block { loop
  get(1);
  c.push(0x45, 0x0d, 0x01); // i32.eqz; br_if 1 (no blocks left)
  for (let i = 0; i < RATE_BYTES / 8; i++) {
    get(A(i));
    get(0);
    c.push(0x29, 0x03, ...uleb(8 * i)); // i64.load offset=8i
    c.push(XOR);
    set(A(i));
  }
  i32(0);
  set(2);
  c.push(0x03, 0x40); // loop over rounds
  for (let x = 0; x < 5; x++) {
    get(A(x));
    for (let y = 1; y < 5; y++) {
      get(A(x + 5 * y));
      c.push(XOR);
    }
    set(C(x));
  }
  for (let x = 0; x < 5; x++) {
    get(C((x + 4) % 5));
    get(C((x + 1) % 5));
    i64(1n);
    c.push(ROTL, XOR);
    set(D(x));
  }
  for (let x = 0; x < 5; x++) {
    for (let y = 0; y < 5; y++) {
      const i = x + 5 * y;
      get(A(i));
      get(D(x));
      c.push(XOR);
      const r = ROTATIONS[i] as number;
      if (r !== 0) {
        i64(BigInt(r));
        c.push(ROTL);
      }
      set(B(y + 5 * ((2 * x + 3 * y) % 5)));
    }
  }
  for (let y = 0; y < 5; y++) {
    for (let x = 0; x < 5; x++) {
      get(B(x + 5 * y));
      get(B(((x + 1) % 5) + 5 * y));
      i64(-1n);
      c.push(XOR);
      get(B(((x + 2) % 5) + 5 * y));
      c.push(AND, XOR);
      set(A(x + 5 * y));
    }
  }
  get(A(0)); // iota: A0 ^= RC[round]
  get(2);
  i32(3);
  c.push(0x74); // i32.shl
  c.push(0x29, 0x03, ...uleb(RC_OFFSET));
  c.push(XOR);
  set(A(0));
  get(2);
  i32(1);
  c.push(0x6a); // i32.add
  set(2);
  get(2);
  i32(24);
  c.push(0x49, 0x0d, 0x00); // i32.lt_u; br_if 0 (next round)
  c.push(0x0b); // end rounds
  get(0);
  i32(RATE_BYTES);
  c.push(0x6a);
  set(0);
  get(1);
  i32(1);
  c.push(0x6b); // i32.sub
  set(1);
  c.push(0x0c, 0x00, 0x0b, 0x0b); // br 0; end loop; end block
  for (let i = 0; i < 4; i++) {
    i32(0);
    get(A(i));
    c.push(0x37, 0x03, ...uleb(8 * i)); // i64.store offset=8i
  }
  // Digest to hex after "0x": for i in 0..31, two digits of byte i (one flat string for JS, no concatenation).
  i32(0);
  set(2);
  c.push(0x03, 0x40);
  for (const [shift, mask, at] of [[4, 15, HEX_OFFSET + 2], [0, 15, HEX_OFFSET + 3]] as const) {
    get(2);
    i32(1);
    c.push(0x74); // i32.shl → 2i
    get(2);
    c.push(0x2d, 0x00, 0x00); // i32.load8_u digest[i]
    i32(shift);
    c.push(0x76); // i32.shr_u
    i32(mask);
    c.push(0x71); // i32.and
    c.push(0x2d, 0x00, ...uleb(DIGITS_OFFSET)); // i32.load8_u digits[nibble]
    c.push(0x3a, 0x00, ...uleb(at)); // i32.store8
  }
  get(2);
  i32(1);
  c.push(0x6a);
  set(2);
  get(2);
  i32(32);
  c.push(0x49, 0x0d, 0x00, 0x0b); // i32.lt_u; br_if 0; end loop
  c.push(0x0b);
  const body = [0x03, 0x01, 0x7f, 60, 0x7e, 0x01, 0x7f, ...c]; // locals: 1 i32, 60 i64, 1 i32
  const section = (id: number, payload: number[]): number[] => [id, ...uleb(payload.length), ...payload];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, [1, 0x60, 2, 0x7f, 0x7f, 0]), // type (i32, i32) -> ()
    ...section(3, [1, 0]),
    ...section(5, [1, 0x00, MEMORY_PAGES]),
    ...section(7, [2, 1, 0x6d, 0x02, 0, 1, 0x66, 0x00, 0]), // export "m" (memory 0), "f" (func 0)
    ...section(10, [1, ...uleb(body.length), ...body]),
  ]);
}

/** The slice of the WebAssembly API used here (the project's TS lib has no DOM/WebAssembly types). */
interface Wasm {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: { f: (ptr: number, length: number) => void; m: { buffer: ArrayBuffer } } };
}

const wasm = (globalThis as unknown as { WebAssembly: Wasm }).WebAssembly;
const instance = new wasm.Instance(new wasm.Module(assemble()), {});
const absorb = instance.exports.f;
/** The module's whole memory (fixed size: it never grows, so this view never detaches). */
const memory = Buffer.from(instance.exports.m.buffer);
for (let i = 0; i < ROUND_CONSTANTS.length; i++) memory.writeBigUInt64LE(ROUND_CONSTANTS[i] as bigint, RC_OFFSET + 8 * i);
memory.write('0123456789abcdef', DIGITS_OFFSET, 'latin1');
memory.write('0x', HEX_OFFSET, 'latin1');

/** The pooled input area: write up to `KECCAK_POOL_BYTES` bytes here, then call `keccakPool`. */
export const keccakPool: Buffer = memory.subarray(INPUT_OFFSET, memory.length - RATE_BYTES);
/** Capacity of `keccakPool` in bytes. */
export const KECCAK_POOL_BYTES = keccakPool.length;

/** keccak-256 of the first `length` bytes of `keccakPool`, as lower-case 0x-hex. Overwrites the bytes after them. */
export function keccakPoolHex(length: number): string {
  absorb(INPUT_OFFSET, length);
  return memory.toString('latin1', HEX_OFFSET, HEX_OFFSET + HEX_CHARS);
}

/** keccak-256 of the first `length` bytes of `keccakPool`, as 32 fresh bytes. Overwrites the bytes after them. */
export function keccakPoolDigest(length: number): Buffer {
  absorb(INPUT_OFFSET, length);
  return Buffer.from(memory.subarray(0, 32));
}
