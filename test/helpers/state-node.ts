// Test helper: a tiny JSON-RPC node on 127.0.0.1 serving a pre-state the test defines (accounts with balance, nonce,
// code and storage) at one head block, for an execution engine to read from. Real HTTP, batches included; it
// executes nothing. Every account not listed is empty (that is the defined pre-state, not a missing witness).
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One account of the pre-state; absent fields are zero / empty. */
export interface PreAccount {
  balance?: bigint;
  nonce?: bigint;
  /** Runtime bytecode, 0x-hex. */
  code?: string;
  /** Slot → value, both 0x-hex (any length; compared as numbers). */
  storage?: Record<string, string>;
}

export interface StateNodeOptions {
  chainId: number;
  /** The head block (the engine's canonical parent): its number, hash and timestamp. */
  head: { number: number; hash: string; timestamp: number };
  accounts: Record<string, PreAccount>;
}

/** A running state node. */
export interface StateNode {
  /** `http://127.0.0.1:<port>/` */
  readonly url: string;
  /** Calls answered, by method (batch members counted one by one). */
  readonly calls: Map<string, number>;
  close(): Promise<void>;
}

interface Req {
  id?: unknown;
  method?: unknown;
  params?: unknown;
}

const hexQ = (v: bigint): string => '0x' + v.toString(16);
const word = (v: bigint): string => '0x' + v.toString(16).padStart(64, '0');

/** The account state and block answers, or a JSON-RPC error for anything else. */
function answer(o: StateNodeOptions, accounts: Map<string, PreAccount>, r: Req): { result: unknown } | { error: { code: number; message: string } } {
  const params = Array.isArray(r.params) ? (r.params as unknown[]) : [];
  const account = (): PreAccount => accounts.get(String(params[0]).toLowerCase()) ?? {};
  // State exists at the head only (and below it, unchanged): a later block is not known here.
  const atHead = (tag: unknown): boolean => typeof tag !== 'string' || !tag.startsWith('0x') || Number(tag) <= o.head.number;
  const header = { number: hexQ(BigInt(o.head.number)), hash: o.head.hash, timestamp: hexQ(BigInt(o.head.timestamp)), parentHash: '0x' + '00'.repeat(32), receiptsRoot: '0x' + '00'.repeat(32), transactions: [] };
  switch (r.method) {
    case 'eth_chainId':
      return { result: hexQ(BigInt(o.chainId)) };
    case 'eth_blockNumber':
      return { result: hexQ(BigInt(o.head.number)) };
    case 'eth_getBalance':
    case 'eth_getTransactionCount':
    case 'eth_getCode':
    case 'eth_getStorageAt': {
      const tag = r.method === 'eth_getStorageAt' ? params[2] : params[1];
      if (!atHead(tag)) return { error: { code: -32001, message: `block ${String(tag)} not found (this node's head is ${o.head.number})` } };
      const a = account();
      if (r.method === 'eth_getBalance') return { result: hexQ(a.balance ?? 0n) };
      if (r.method === 'eth_getTransactionCount') return { result: hexQ(a.nonce ?? 0n) };
      if (r.method === 'eth_getCode') return { result: a.code ?? '0x' };
      const slot = BigInt(String(params[1]));
      const hit = Object.entries(a.storage ?? {}).find(([k]) => BigInt(k) === slot);
      return { result: word(hit === undefined ? 0n : BigInt(hit[1])) };
    }
    case 'eth_getBlockByNumber': {
      const tag = params[0];
      const n = tag === 'latest' ? o.head.number : Number(tag);
      return { result: n === o.head.number ? header : null };
    }
    case 'eth_getBlockByHash':
      return { result: String(params[0]).toLowerCase() === o.head.hash.toLowerCase() ? header : null };
    default:
      return { error: { code: -32601, message: `method ${String(r.method)} is not served by this state node` } };
  }
}

function body(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** Starts a state node on a free loopback port. */
export async function startStateNode(o: StateNodeOptions): Promise<StateNode> {
  const accounts = new Map(Object.entries(o.accounts).map(([k, v]) => [k.toLowerCase(), v]));
  const calls = new Map<string, number>();
  const one = (r: Req): Record<string, unknown> => {
    calls.set(String(r.method), (calls.get(String(r.method)) ?? 0) + 1);
    return { jsonrpc: '2.0', id: r.id ?? null, ...answer(o, accounts, r) };
  };
  const server: Server = createServer((req, res) => {
    void body(req).then((text) => {
      let out: unknown;
      try {
        const parsed = JSON.parse(text) as Req | Req[];
        out = Array.isArray(parsed) ? parsed.map(one) : one(parsed);
      } catch {
        out = { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error' } };
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(out));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/`,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
