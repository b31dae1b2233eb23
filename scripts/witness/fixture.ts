// Loads one real-block fixture of ../shared/conformance/op-blocks as it is (a kona-executor tar / tar.gz, or a
// kona-ecotone .block.json with its .preimages.json.gz beside it) into headers, payload and a verified preimage store.
// Reads files only; serves nothing (server.ts does) and never writes next to the fixture.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { keccak256 } from '../../src/chain/keccak.js';
import { hexToBytes } from '../../src/chain/hex.js';
import { forkAt, presetByChainId } from '../../src/chain/presets.js';
import { decodeHeader, headerFromJson, holoceneExtraData, holoceneParams, nextBaseFee, type BaseFeeParams, type WitnessHeader } from './header.js';
import { readSst, readWal, type KvSink } from './rocksdb.js';
import { readTar, type TarEntry } from './tar.js';

export type { WitnessHeader } from './header.js';

/** The chains the fixtures come from, by chain id. */
const CHAINS: ReadonlyMap<number, WitnessFixture['chain']> = new Map([
  [10, 'op-mainnet'],
  [11155420, 'op-sepolia'],
  [130, 'unichain'],
]);

/** Post-Canyon EIP-1559 parameters of OP chains (used when a fixture carries no chain_op_config). */
const OP_CANYON_PARAMS: BaseFeeParams = { denominator: 250n, elasticity: 6n };

/** One real block and the state its parent left, as far as the witness holds it. */
export interface WitnessFixture {
  name: string;
  layout: 'kona-executor' | 'kona-ecotone';
  chainId: number;
  chain: 'op-mainnet' | 'op-sepolia' | 'unichain';
  /** The newest fork active at the block's timestamp on this chain's schedule (e.g. "holocene", "karst"). */
  fork: string;
  /** The parent's full header: the state served is the state at the parent. */
  parent: WitnessHeader;
  /** The block's own full header when known (ecotone: headerRlp; kona: the next consecutive fixture's parent). */
  header: WitnessHeader | null;
  /** kona's expected_block_hash (or header.hash). */
  expectedBlockHash: string | null;
  block: {
    number: number;
    timestamp: number;
    prevRandao: string;
    feeRecipient: string;
    parentBeaconBlockRoot: string | null;
    gasLimit: bigint;
    baseFeePerGas: bigint;
    extraData: string;
    eip1559Params: string | null;
    /** Raw EIP-2718 transactions, 0x lower-case, the L1-attributes deposit first. */
    transactions: string[];
  };
  /** The block's base fee computed from the parent (EIP-1559 with the chain's parameters), known header or not. */
  computedBaseFee: bigint;
  /** 0x-lower keccak256 → bytes; every entry checked: key == keccak256(value). */
  preimages: Map<string, Uint8Array>;
}

/** A preimage store that refuses any entry whose key is not the keccak256 of its value. */
class PreimageSink implements KvSink {
  readonly map = new Map<string, Uint8Array>();
  constructor(readonly what: string) {}

  put(key: Buffer, value: Buffer): void {
    const hash = keccak256(value);
    if (key.length !== 32 || !hash.equals(key)) {
      throw new Error(`${this.what}: entry ${key.toString('hex')} is not the keccak256 of its value (${hash.toString('hex')}); not a preimage store`);
    }
    this.map.set('0x' + hash.toString('hex'), value);
  }

  delete(key: Buffer): void {
    this.map.delete('0x' + key.toString('hex'));
  }
}

/** Whether a tar entry is one of macOS's `._*` resource-fork companions. */
function isAppleDouble(e: TarEntry): boolean {
  return basename(e.name).startsWith('._');
}

/** The number in a RocksDB file name (000004.log → 4), for ordering. */
function fileNumber(name: string): number {
  return parseInt(/(\d+)\.\w+$/.exec(name)?.[1] ?? '0', 10);
}

interface KonaJson {
  rollup_config: Record<string, unknown>;
  parent_header: Record<string, unknown>;
  executing_payload: Record<string, unknown>;
  expected_block_hash: string;
}

function konaJson(entries: TarEntry[], file: string): KonaJson {
  const fx = entries.find((e) => basename(e.name) === 'fixture.json');
  if (fx === undefined) throw new Error(`${file}: no fixture.json in the archive (not a kona-executor fixture)`);
  const j = JSON.parse(fx.data.toString('utf8')) as KonaJson;
  for (const k of ['rollup_config', 'parent_header', 'executing_payload', 'expected_block_hash'] as const) {
    if (j[k] === undefined) throw new Error(`${file}: fixture.json has no ${k}`);
  }
  return j;
}

function hexField(o: Record<string, unknown>, k: string, what: string): string {
  const v = o[k];
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]*$/.test(v)) throw new Error(`${what}: ${k} is not hex: ${JSON.stringify(v)}`);
  return v.toLowerCase();
}

function numberField(o: Record<string, unknown>, k: string, what: string): number | null {
  const v = o[k];
  if (v === undefined || v === null) return null;
  // Rollup configs write numbers either way: 6 or "0x6".
  const n = typeof v === 'string' && /^0x[0-9a-fA-F]+$/.test(v) ? Number(BigInt(v)) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n)) throw new Error(`${what}: ${k} is not a number: ${JSON.stringify(v)}`);
  return n;
}

function chainOf(chainId: number, what: string): WitnessFixture['chain'] {
  const c = CHAINS.get(chainId);
  if (c === undefined) throw new Error(`${what}: chain id ${chainId} is not one the witness node knows (OP Mainnet, OP Sepolia, Unichain)`);
  return c;
}

/** The newest fork at `timestampSec` on the chain preset's schedule. */
function forkName(chainId: number, timestampSec: number): string {
  const p = presetByChainId(chainId);
  if (p === null) return 'unknown';
  return forkAt(p, timestampSec);
}

/** The chain's EIP-1559 rules: Holocene activation and the Canyon defaults (from the rollup config when it has them). */
interface FeeRules {
  holoceneTime: number | null;
  canyonTime: number | null;
  canyon: BaseFeeParams;
  preCanyon: BaseFeeParams;
}

/** The parameters the block after `parent` uses: Holocene reads them from the parent's extraData. */
function paramsFor(parent: WitnessHeader, timestamp: number, rules: FeeRules, what: string): BaseFeeParams {
  if (rules.holoceneTime !== null && parent.timestamp >= rules.holoceneTime) {
    const p = holoceneParams(parent.extraData);
    if (p === null) throw new Error(`${what}: parent extraData ${parent.extraData} is not Holocene's version-0 EIP-1559 parameters`);
    return p.denominator === 0n && p.elasticity === 0n ? rules.canyon : p;
  }
  return rules.canyonTime !== null && timestamp < rules.canyonTime ? rules.preCanyon : rules.canyon;
}

async function loadKona(file: string): Promise<WitnessFixture> {
  const entries = readTar(await readFile(file)).filter((e) => !isAppleDouble(e));
  const j = konaJson(entries, file);
  const cfg = j.rollup_config;
  const chainId = numberField(cfg, 'l2_chain_id', `${file} rollup_config`);
  if (chainId === null) throw new Error(`${file}: rollup_config has no l2_chain_id`);
  const op = (cfg.chain_op_config ?? {}) as Record<string, unknown>;
  const elasticity = BigInt(numberField(op, 'eip1559Elasticity', `${file} chain_op_config`) ?? 6);
  const rules: FeeRules = {
    holoceneTime: numberField(cfg, 'holocene_time', `${file} rollup_config`),
    canyonTime: numberField(cfg, 'canyon_time', `${file} rollup_config`),
    canyon: { denominator: BigInt(numberField(op, 'eip1559DenominatorCanyon', `${file} chain_op_config`) ?? 250), elasticity },
    preCanyon: { denominator: BigInt(numberField(op, 'eip1559Denominator', `${file} chain_op_config`) ?? 50), elasticity },
  };
  const parent = headerFromJson(j.parent_header, `${file} parent_header`);
  const p = j.executing_payload;
  const what = `${file} executing_payload`;
  const timestamp = Number(BigInt(hexField(p, 'timestamp', what)));
  const expectedBlockHash = hexField(j as unknown as Record<string, unknown>, 'expected_block_hash', file);
  const header = nextFixtureHeader(file, parent, expectedBlockHash);
  const params = paramsFor(parent, timestamp, rules, file);
  const computedBaseFee = nextBaseFee(parent, params);
  const eip1559Params = p.eip1559Params === undefined || p.eip1559Params === null ? null : hexField(p, 'eip1559Params', what);
  const txs = p.transactions;
  if (!Array.isArray(txs) || txs.some((t) => typeof t !== 'string' || !/^0x[0-9a-fA-F]+$/.test(t))) throw new Error(`${what}: transactions must be raw 0x-hex strings`);

  const sink = new PreimageSink(file);
  const kv = entries.filter((e) => /\/kv\/\d+\.(sst|log)$/.test(e.name)).sort((a, b) => fileNumber(a.name) - fileNumber(b.name));
  // SSTs hold older writes than the live log; both are content-addressed, so order only matters for deletions.
  for (const e of kv) if (e.name.endsWith('.sst')) readSst(e.data, sink, `${file}:${e.name}`);
  for (const e of kv) if (e.name.endsWith('.log')) readWal(e.data, sink, `${file}:${e.name}`);
  if (sink.map.size === 0) throw new Error(`${file}: the kv/ store holds no preimages`);

  return {
    name: basename(file).replace(/\.tar(\.gz)?$/, ''),
    layout: 'kona-executor',
    chainId,
    chain: chainOf(chainId, file),
    fork: forkName(chainId, timestamp),
    parent,
    header,
    expectedBlockHash,
    block: {
      number: parent.number + 1,
      timestamp,
      prevRandao: hexField(p, 'prevRandao', what),
      feeRecipient: hexField(p, 'suggestedFeeRecipient', what),
      parentBeaconBlockRoot: p.parentBeaconBlockRoot == null ? null : hexField(p, 'parentBeaconBlockRoot', what),
      gasLimit: BigInt(hexField(p, 'gasLimit', what)),
      baseFeePerGas: header?.baseFeePerGas ?? computedBaseFee,
      extraData: header?.extraData ?? (eip1559Params !== null ? holoceneExtraData(eip1559Params, rules.canyon) : '0x'),
      eip1559Params,
      transactions: (txs as string[]).map((t) => t.toLowerCase()),
    },
    computedBaseFee,
    preimages: sink.map,
  };
}

/**
 * The block's own header from the next consecutive fixture beside `file` (its parent_header), when that file exists.
 * It must be block N and hash to the expected block hash: a mismatch means the fixtures disagree, an Error.
 */
function nextFixtureHeader(file: string, parent: WitnessHeader, expectedBlockHash: string): WitnessHeader | null {
  const m = /^(.*?)(\d+)\.tar(\.gz)?$/.exec(basename(file));
  if (m === null) return null;
  const want = `${m[1]}${parent.number + 2}`;
  const dir = dirname(file);
  // Synchronous: a neighbour's fixture.json is read once at load, before anything is served.
  const next = readdirSync(dir).find((f) => f === `${want}.tar` || f === `${want}.tar.gz`);
  if (next === undefined) return null;
  const path = join(dir, next);
  const entries = readTar(readFileSync(path)).filter((e) => !isAppleDouble(e) && basename(e.name) === 'fixture.json');
  const h = headerFromJson(konaJson(entries, path).parent_header, `${path} parent_header`);
  if (h.number !== parent.number + 1 || h.parentHash !== parent.hash || h.hash !== expectedBlockHash) {
    throw new Error(`${path}: its parent header (block ${h.number}, ${h.hash}) is not ${basename(file)}'s block (${parent.number + 1}, expected ${expectedBlockHash})`);
  }
  return h;
}

async function loadEcotone(file: string): Promise<WitnessFixture> {
  const j = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  const chainId = numberField(j, 'chainId', file);
  if (chainId === null) throw new Error(`${file}: no chainId`);
  const parent = decodeHeader(hexToBytes(hexField(j, 'parentHeaderRlp', file)), `${file} parentHeaderRlp`);
  const header = decodeHeader(hexToBytes(hexField(j, 'headerRlp', file)), `${file} headerRlp`);
  if (header.parentHash !== parent.hash) throw new Error(`${file}: headerRlp's parentHash ${header.parentHash} is not the parent's hash ${parent.hash}`);
  const txs = j.transactions;
  if (!Array.isArray(txs) || txs.some((t) => typeof t !== 'string' || !/^0x[0-9a-fA-F]+$/.test(t))) throw new Error(`${file}: transactions must be raw 0x-hex strings`);
  const gz = file.replace(/\.block\.json$/, '.preimages.json.gz');
  if (!existsSync(gz)) throw new Error(`${file}: its preimage store ${basename(gz)} is not beside it`);
  const store = JSON.parse(gunzipSync(await readFile(gz)).toString('utf8')) as Record<string, unknown>;
  const sink = new PreimageSink(gz);
  for (const [k, v] of Object.entries(store)) {
    if (typeof v !== 'string') throw new Error(`${gz}: value of ${k} is not a hex string`);
    const key = hexToBytes(k.startsWith('0x') ? k : '0x' + k);
    sink.put(key, hexToBytes(v.startsWith('0x') ? v : '0x' + v));
  }
  const preset = presetByChainId(chainId);
  const rules: FeeRules = { holoceneTime: preset?.forks.holocene ?? null, canyonTime: preset?.forks.canyon ?? null, canyon: OP_CANYON_PARAMS, preCanyon: { denominator: 50n, elasticity: 6n } };
  return {
    name: basename(file).replace(/\.block\.json$/, ''),
    layout: 'kona-ecotone',
    chainId,
    chain: chainOf(chainId, file),
    fork: forkName(chainId, header.timestamp),
    parent,
    header,
    expectedBlockHash: header.hash,
    block: {
      number: header.number,
      timestamp: header.timestamp,
      prevRandao: header.mixHash,
      feeRecipient: header.miner,
      parentBeaconBlockRoot: header.parentBeaconBlockRoot,
      gasLimit: header.gasLimit,
      baseFeePerGas: header.baseFeePerGas,
      extraData: header.extraData,
      eip1559Params: null,
      transactions: (txs as string[]).map((t) => t.toLowerCase()),
    },
    computedBaseFee: nextBaseFee(parent, paramsFor(parent, header.timestamp, rules, file)),
    preimages: sink.map,
  };
}

/**
 * Loads a fixture file: a kona-executor `.tar` / `.tar.gz`, or a kona-ecotone `.block.json` (its `.preimages.json.gz`
 * beside it). Every preimage is checked (key == keccak256(value)); anything malformed is an Error naming the file.
 */
export async function loadWitnessFixture(file: string): Promise<WitnessFixture> {
  if (!existsSync(file)) throw new Error(`${file}: no such file`);
  if (/\.block\.json$/.test(file)) return loadEcotone(file);
  if (/\.tar(\.gz)?$/.test(file)) return loadKona(file);
  throw new Error(`${file}: not a fixture (expected a kona-executor .tar / .tar.gz or a kona-ecotone .block.json)`);
}
