// The node as the execution engine reaches it: its URL, extra headers and CA, handed once to the native engine (which
// reads the node itself on its own threads, native/src/node.rs), and the daemon's node client (src/node/client.ts)
// for the few calls the engine's TypeScript side makes (chain id, canonical headers and receipts) with the same
// credentials, headers and CA. No error either makes carries the URL, its credentials or its host.
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { NodeClient } from '../node/client.js';

/** The node the engine reads (canonical state, headers). */
export interface EngineNode {
  /** http:// or https:// URL; credentials in it (user:password@) become a Basic authorization. */
  url: string;
  /** Extra headers sent with every call (an API key); an `authorization` here wins over the URL's credentials. */
  headers?: Record<string, string>;
  /** A PEM file of CA certificates trusted besides the Mozilla roots (a private node's, a test's self-signed one). */
  caFile?: string;
}

/** The node as the native engine's constructor takes it. */
export interface NativeNode {
  url: string;
  headersJson: string;
  caPem: string | null;
  /** The same node for the engine's TypeScript side. */
  client: NodeClient;
}

/**
 * `node` for the native engine and the TypeScript side's client (calls time out after `timeoutMs`): its CA file read
 * now (a file that cannot be read is an Error saying which) and trusted besides the Mozilla roots, as rustls does.
 */
export function nativeNode(node: EngineNode, timeoutMs: number): NativeNode {
  let caPem: string | null = null;
  if (node.caFile !== undefined) {
    try {
      caPem = readFileSync(node.caFile, 'utf8');
    } catch (e) {
      throw new Error(`cannot read the node's CA file ${node.caFile}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { cause: e });
    }
  }
  const client = new NodeClient({
    url: node.url,
    timeoutMs,
    maxSockets: 2,
    // The engine's answers are bounded as native/src/node.rs bounds its own.
    maxResponseBytes: 64 * 1024 * 1024,
    ...(node.headers === undefined ? {} : { headers: node.headers }),
    ...(caPem === null ? {} : { ca: [...rootCertificates, caPem] }),
  });
  return { url: node.url, headersJson: JSON.stringify(node.headers ?? {}), caPem, client };
}

