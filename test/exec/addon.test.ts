// The addon's face (src/exec/addon.ts): its declarations are generated from the crate's #[napi] items and match the
// file that loads (nothing declared that it lacks, nothing it exports undeclared); a file from other sources is
// refused whole, with what it lacks; the one error convention (a rejection's CODE: message, a read's code string)
// and its JSON-RPC mapping.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { engineErrorOf, loadAddon, rpcCodeOf } from '../../src/exec/addon.js';
import { typingsOf } from '../../scripts/native-typings.mjs';

const root = join(import.meta.dirname, '..', '..');

const built = loadAddon();

t.test('native/index.d.ts declares exactly what the built addon exports', { skip: built instanceof Error ? `the native core is not built here: ${String(built)}` : false }, async (t) => {
  const addon = built as Exclude<typeof built, Error>;
  const declared = [...readFileSync(join(root, 'native', 'index.d.ts'), 'utf8').matchAll(/^export declare (?:function|class) (\w+)/gm)].map((m) => m[1]!).sort();
  const exported = Object.keys(addon)
    .filter((k) => typeof (addon as unknown as Record<string, unknown>)[k] === 'function')
    .sort();
  t.same(declared, exported, `declared: ${declared.join(', ')}`);
  const engine = Object.getOwnPropertyNames(addon.Engine.prototype).filter((k) => k !== 'constructor').sort();
  const methods = /export declare class Engine \{([\s\S]*?)\n\}/.exec(readFileSync(join(root, 'native', 'index.d.ts'), 'utf8'))![1]!;
  const declaredMethods = [...methods.matchAll(/^ {2}(\w+)\(/gm)].map((m) => m[1]!).filter((k) => k !== 'constructor').sort();
  t.same(declaredMethods, engine, "the Engine class's methods as declared");
});

t.test("typingsOf turns napi-derive's lines into declarations; an item it does not know is an error", async (t) => {
  const line = (o: Record<string, string>): string => JSON.stringify(o);
  const out = typingsOf(
    [
      line({ kind: 'struct', name: 'Thing', js_doc: '/** A thing. */\n', def: '' }),
      line({ kind: 'impl', name: 'Thing', js_doc: '', def: 'constructor(n: number)\n/** Its size. */\nsize(): number' }),
      line({ kind: 'fn', name: 'make', js_doc: '', def: 'function make(n: number): Thing' }),
      line({ kind: 'interface', name: 'Shape', js_doc: '', def: 'size: number' }),
    ].join('\n'),
  );
  t.match(out, /\/\*\* A thing\. \*\/\nexport declare class Thing \{\n {2}constructor\(n: number\)\n {2}\/\*\* Its size\. \*\/\n {2}size\(\): number\n\}/);
  t.match(out, /export declare function make\(n: number\): Thing/);
  t.match(out, /export interface Shape \{\n {2}size: number\n\}/);
  t.throws(() => typingsOf(line({ kind: 'enum', name: 'E', js_doc: '', def: '' })), /kind enum \(E\) is not handled/);
});

t.test('an addon file that lacks an export is refused whole, saying what it lacks', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'fbd-addon-'));
  const fake = join(dir, 'fake.cjs');
  writeFileSync(fake, 'module.exports = { Engine: function Engine() {}, decodeFlashblock() {} };\n');
  const probe = `import { loadAddon } from ${JSON.stringify(join(root, 'src', 'exec', 'addon.ts'))}; const a = loadAddon(); console.log(a instanceof Error ? a.message : 'loaded');`;
  const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', probe], { env: { ...process.env, FLASHBLOCKSD_NATIVE: fake }, encoding: 'utf8' }).trim();
  t.match(out, /is not this version's native core \(it lacks takeLayout, recoverInit, recoverStart, recoverStartUrgent, recoverNow\): rebuild it with `npm run build:native`/);
});

t.test('one error convention: CODE: message of a rejection, code strings of reads mapped to JSON-RPC once', async (t) => {
  t.same(engineErrorOf(new Error('E_NODE: node unreachable: timed out')), { code: 'E_NODE', message: 'node unreachable: timed out' });
  t.same(engineErrorOf(new Error('E_TX: transaction 0x12 rejected:\nnonce too low')), { code: 'E_TX', message: 'transaction 0x12 rejected:\nnonce too low' });
  t.same(engineErrorOf(new Error('something else')), { code: 'E_UNKNOWN', message: 'something else' });
  t.same(engineErrorOf('a string'), { code: 'E_UNKNOWN', message: 'a string' });
  t.same(
    ['E_INPUT', 'E_UNSUPPORTED', 'E_REVERT', 'E_TOO_LARGE', 'E_SIM_NUMBER', 'E_SIM_TIMESTAMP', 'E_FAILED', 'E_NODE', 'E_WHATEVER'].map(rpcCodeOf),
    [-32602, -32601, 3, -32005, -38020, -38021, -32000, -32000, -32000],
  );
  // eth_simulateV1 with validation: execution-apis' codes, geth's for the rest (native/src/simulate.rs).
  const sim = { E_SIM_NONCE_LOW: -38010, E_SIM_NONCE_HIGH: -38011, E_SIM_FEE_LOW: -38012, E_SIM_INTRINSIC_GAS: -38013, E_SIM_FUNDS: -38014, E_SIM_BLOCK_GAS: -38015, E_SIM_NOT_EOA: -38024, E_SIM_INITCODE: -38025, E_SIM_FEE_PARAMS: -32602, E_SIM_INTERNAL: -32603 };
  t.same(Object.keys(sim).map(rpcCodeOf), Object.values(sim));
  // The same refusals in eth_call / eth_estimateGas: -32000 with the message, as geth.
  t.same(['E_NONCE_LOW', 'E_NONCE_HIGH', 'E_FEE_LOW', 'E_INTRINSIC_GAS', 'E_FUNDS', 'E_BLOCK_GAS', 'E_NOT_EOA', 'E_INITCODE', 'E_FEE_PARAMS'].map(rpcCodeOf), Array(9).fill(-32000));
});
