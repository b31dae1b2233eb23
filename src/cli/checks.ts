// Reachability checks `flashblocksd setup` runs on the URLs it is given: a WebSocket handshake (and first frame) for a
// flashblocks upstream, eth_chainId and the head block for the node. Results are plain words with every URL
// redacted; a check never throws.
import { WebSocket } from 'ws';
import { redactUrl } from '../log.js';
import { NodeClient, NodeError } from '../node/client.js';
import { presetByChainId } from '../chain/presets.js';

/** Outcome of one check: ok with what was seen, or not ok with why. Never contains a secret. */
export interface CheckResult {
  ok: boolean;
  detail: string;
}

/** What the node check learned. */
export interface NodeCheckResult extends CheckResult {
  chainId: number | null;
  headNumber: number | null;
  headAgeS: number | null;
}

/** Chain ids without a preset that are still worth naming. */
const OTHER_CHAINS: Record<number, string> = { 1: 'Ethereum mainnet', 11155111: 'Sepolia' };

/** How the node's chain is described: its preset's name and timing, or just a name. */
function describeChain(chainId: number): string {
  const p = presetByChainId(chainId);
  if (p === null) return OTHER_CHAINS[chainId] !== undefined ? ` (${OTHER_CHAINS[chainId]}; no flashblocksd preset)` : ' (no flashblocksd preset: give --block-time-ms and --flashblock-interval-ms)';
  return ` (${p.title}: preset ${p.name}, ${p.blockTimeMs} ms blocks, ${p.flashblockIntervalMs} ms flashblocks, ${p.flashblocksPerBlock} per block, dialect ${p.dialect})`;
}

/** Replaces every occurrence of the raw URL (and its userinfo) in a message by the redacted form. */
function scrub(text: string, url: string): string {
  let out = text.split(url).join(redactUrl(url));
  try {
    const u = new URL(url);
    for (const s of [u.password, u.username, ...u.searchParams.values()]) if (s.length >= 4) out = out.split(s).join('redacted');
  } catch {
    // not a URL: nothing more to hide
  }
  return out;
}

/**
 * Opens a WebSocket to a flashblocks upstream and waits up to `frameWaitMs` for a first frame.
 * ok = the handshake succeeded (a missing first frame is reported, not a failure).
 */
export function checkFlashblocksUrl(url: string, timeoutMs: number, frameWaitMs = 1500): Promise<CheckResult> {
  return new Promise<CheckResult>((resolve) => {
    const t0 = Date.now();
    let done = false;
    let ws: WebSocket;
    const finish = (r: CheckResult): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ ok: r.ok, detail: scrub(r.detail, url) });
      ws.removeAllListeners();
      ws.on('error', () => undefined);
      ws.terminate();
    };
    const timer = setTimeout(() => finish({ ok: false, detail: `no WebSocket handshake within ${timeoutMs} ms` }), timeoutMs);
    try {
      ws = new WebSocket(url, { handshakeTimeout: timeoutMs, perMessageDeflate: false });
    } catch (e) {
      clearTimeout(timer);
      resolve({ ok: false, detail: scrub(`cannot open a WebSocket: ${(e as Error).message}`, url) });
      return;
    }
    ws.on('unexpected-response', (_req, res) => {
      const status = res.statusCode ?? 0;
      const hint = status === 401 || status === 403 ? ' (check the API key in the URL)' : status === 404 ? ' (check the path, usually /flashblocks)' : '';
      finish({ ok: false, detail: `the server refused the WebSocket upgrade with HTTP ${status}${hint}` });
    });
    ws.on('error', (e: NodeJS.ErrnoException) => finish({ ok: false, detail: `cannot connect (${e.code ?? e.message})` }));
    ws.on('open', () => {
      const openMs = Date.now() - t0;
      clearTimeout(timer);
      const wait = setTimeout(() => finish({ ok: true, detail: `connected in ${openMs} ms, but no flashblock arrived within ${frameWaitMs} ms` }), frameWaitMs);
      ws.once('message', (data: Buffer) => {
        clearTimeout(wait);
        finish({ ok: true, detail: `connected in ${openMs} ms; first frame (${data.length} bytes) after ${Date.now() - t0} ms` });
      });
      ws.once('close', (code: number) => {
        clearTimeout(wait);
        finish({ ok: false, detail: `connected, then the server closed the connection (${code})` });
      });
    });
  });
}

/** Calls eth_chainId and eth_getBlockByNumber("latest") on the node and describes what it answered. */
export async function checkNodeRpcUrl(url: string, timeoutMs: number): Promise<NodeCheckResult> {
  const client = new NodeClient({ url, timeoutMs, maxSockets: 2 });
  try {
    const chainHex = await client.call<string>('eth_chainId', []);
    const head = await client.call<{ number?: string; timestamp?: string } | null>('eth_getBlockByNumber', ['latest', false]);
    const chainId = typeof chainHex === 'string' ? Number.parseInt(chainHex, 16) : NaN;
    if (!Number.isSafeInteger(chainId)) return { ok: false, detail: `eth_chainId answered ${JSON.stringify(chainHex)}, not a chain id`, chainId: null, headNumber: null, headAgeS: null };
    const headNumber = head?.number !== undefined ? Number.parseInt(head.number, 16) : null;
    const headAgeS = head?.timestamp !== undefined ? Math.max(0, Math.round(Date.now() / 1000 - Number.parseInt(head.timestamp, 16))) : null;
    let detail = `chain id ${chainId}${describeChain(chainId)}, head block ${headNumber ?? 'unknown'}`;
    if (headAgeS !== null) detail += `, ${headAgeS} s old`;
    if (headAgeS !== null && headAgeS > 120) detail += ' - the node looks behind or still syncing';
    return { ok: true, detail, chainId, headNumber, headAgeS };
  } catch (e) {
    const msg = e instanceof NodeError ? (e.reason === 'rpc' ? `the node answered with an error: ${e.message} (${e.rpcCode ?? '?'})` : e.message) : (e as Error).message;
    return { ok: false, detail: scrub(msg, url), chainId: null, headNumber: null, headAgeS: null };
  } finally {
    client.close();
  }
}
