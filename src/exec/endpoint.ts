// The node as the execution engine reaches it: its URL, extra headers and CA, handed once to the native engine (which
// reads the node itself on its own threads, native/src/node.rs), and the few calls the engine's TypeScript side makes
// (chain id, canonical headers and receipts) with the same credentials, headers and CA. No error it makes carries the
// URL, its credentials or its host. Knows nothing of flashblocks.
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { Agent, request } from 'undici';

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
}

/** Largest answer read by {@link NodeCaller} (native/src/node.rs bounds its own the same). */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/** `node` for the native engine: its CA file read now (a file that cannot be read is an Error saying which). */
export function nativeNode(node: EngineNode): NativeNode {
  let caPem: string | null = null;
  if (node.caFile !== undefined) {
    try {
      caPem = readFileSync(node.caFile, 'utf8');
    } catch (e) {
      throw new Error(`cannot read the node's CA file ${node.caFile}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { cause: e });
    }
  }
  return { url: node.url, headersJson: JSON.stringify(node.headers ?? {}), caPem };
}

/** JSON-RPC calls to the node from TypeScript, over undici with the native engine's credentials, headers and CA. */
export class NodeCaller {
  private readonly url: URL;
  private readonly headers: Record<string, string> = { 'content-type': 'application/json' };
  private readonly agent: Agent;

  constructor(node: NativeNode, private readonly timeoutMs: number) {
    this.url = new URL(node.url);
    if (this.url.username !== '') {
      const credentials = `${decodeURIComponent(this.url.username)}:${decodeURIComponent(this.url.password)}`;
      this.headers.authorization = 'Basic ' + Buffer.from(credentials).toString('base64');
      this.url.username = '';
      this.url.password = '';
    }
    for (const [k, v] of Object.entries(JSON.parse(node.headersJson) as Record<string, string>)) this.headers[k.toLowerCase()] = v;
    // Like rustls in the native engine: the CA is trusted besides the Mozilla roots, not instead of them.
    this.agent = new Agent(node.caPem === null ? {} : { connect: { ca: [...rootCertificates, node.caPem] } });
  }

  /** One call's `result`; a failure is an Error whose message names no URL. Reads only: tried twice on a lost socket. */
  async call<T>(method: string, params: unknown[]): Promise<T> {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
    try {
      return await this.post<T>(body);
    } catch (e) {
      if ((e as { code?: string }).code !== 'UND_ERR_SOCKET' && (e as { code?: string }).code !== 'ECONNRESET') throw redacted(e);
      return this.post<T>(body).catch((again: unknown) => Promise.reject(redacted(again)));
    }
  }

  /** Closes its connections. */
  close(): Promise<void> {
    return this.agent.close();
  }

  private async post<T>(body: string): Promise<T> {
    const r = await request(this.url, { method: 'POST', headers: this.headers, body, dispatcher: this.agent, signal: AbortSignal.timeout(this.timeoutMs) });
    const parts: Buffer[] = [];
    let size = 0;
    for await (const chunk of r.body as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_ANSWER_BYTES) {
        r.body.destroy();
        throw new Error(`node answer over ${MAX_ANSWER_BYTES >> 20} MiB`);
      }
      parts.push(chunk);
    }
    if (r.statusCode < 200 || r.statusCode > 299) throw new Error(`node answered HTTP ${r.statusCode}`);
    let answer: { result?: T; error?: { message?: string } | null };
    try {
      answer = JSON.parse(Buffer.concat(parts).toString('utf8')) as typeof answer;
    } catch {
      throw new Error('node answered with invalid JSON');
    }
    if (answer.error !== undefined && answer.error !== null) throw new Error(`node: ${answer.error.message ?? 'error'}`);
    return answer.result as T;
  }
}

/** `e` as an Error with a message that carries no URL or host: undici's name the address, so only the code is kept. */
function redacted(e: unknown): Error {
  if (e instanceof Error && e.message.startsWith('node')) return e;
  if ((e as Error)?.name === 'TimeoutError') return new Error('node timed out');
  const code = (e as { code?: string }).code ?? (e as Error)?.name ?? 'error';
  return new Error(/CERT|SIGNATURE|SSL|TLS/.test(code) ? `node TLS failed: ${code}` : `node unreachable: ${code}`);
}
