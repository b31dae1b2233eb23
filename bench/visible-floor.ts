// Floors of "frame sent → receipt visible" on this machine, for bench/combined.ts, each in a process of its own (forked,
// never run as a suite), measured at idle with the daemon's frames, pace, poller and idle background, with no daemon:
// `--transport`: a `ws` client upstream and a uWS HTTP endpoint; the k-th frame's arrival makes the k-th hash the harness
//   named at start visible — the loopback hops and the two processes' wake-ups, no decode;
// `--indexer`: the least a JS server must do to answer a receipt from the stream — brotli inflate and JSON.parse of
//   each frame, its receipts' hashes in a set. No validation, no state, no metrics.
// Both then publish each frame as is to the raw subscribers of their WebSocket endpoint (one uWS topic).
// IPC: {upstream: url, hashes?} → {ready: {port}} once connected upstream; {stop} → exits.
import { brotliDecompressSync } from 'node:zlib';
import WebSocket from 'ws';
import { loadUws } from '../src/binaries.js';

const uWS = loadUws();
/** Transaction hashes with a receipt in the current block's frames (lower-case 0x hex). */
const known = new Set<string>();
const app = uWS.App();

app.post('/*', (res) => {
  const parts: Buffer[] = [];
  res.onAborted(() => {});
  res.onData((chunk, last) => {
    // uWS reuses the chunk's memory after this call: copy it.
    parts.push(Buffer.from(chunk.slice(0)));
    if (!last) return;
    let out: string;
    try {
      const m = JSON.parse(Buffer.concat(parts).toString('utf8')) as { id: unknown; params: unknown[] };
      const hash = String(m.params[0]).toLowerCase();
      const id = JSON.stringify(m.id ?? null);
      out = known.has(hash)
        ? `{"jsonrpc":"2.0","id":${id},"result":{"transactionHash":"${hash}","blockHash":"0x${'00'.repeat(32)}"}}`
        : `{"jsonrpc":"2.0","id":${id},"result":null}`;
    } catch {
      out = '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}';
    }
    res.cork(() => res.writeHeader('content-type', 'application/json').end(out));
  });
});

// Raw-stream subscribers (the daemon's idle background has one): each frame is published to them after it is indexed.
app.ws('/*', { compression: 0, maxPayloadLength: 1024, idleTimeout: 120, maxBackpressure: 16 * 1024 * 1024, open: (ws) => void ws.subscribe('raw') });

const port = await new Promise<number>((resolve, reject) =>
  app.listen('127.0.0.1', 0, (s) => (s ? resolve(uWS.us_socket_local_port(s)) : reject(new Error('visible-floor: cannot listen')))),
);

const transport = process.argv.includes('--transport');
/** Transport: the hash each frame makes visible, in frame order (IPC `hashes`, before the first frame), and frames seen. */
let hashes: string[] = [];
let seen = 0;

const index = (data: Buffer): void => {
  if (transport) {
    const hash = hashes[seen++];
    if (hash !== undefined) known.add(hash);
    return;
  }
  const text = data[0] === 0x7b ? data : brotliDecompressSync(data);
  const frame = JSON.parse(text.toString('utf8')) as { index: number; metadata?: { receipts?: Record<string, unknown> } };
  if (frame.index === 0) known.clear();
  for (const hash of Object.keys(frame.metadata?.receipts ?? {})) known.add(hash.toLowerCase());
};

const onFrame = (data: Buffer, isBinary: boolean): void => {
  index(data);
  app.publish('raw', data, isBinary);
};

let up: WebSocket | null = null;
process.on('message', (m: { upstream?: string; hashes?: string[]; stop?: true }) => {
  if (m.upstream !== undefined) {
    hashes = (m.hashes ?? []).map((h) => h.toLowerCase());
    up = new WebSocket(m.upstream, { perMessageDeflate: false });
    up.on('message', onFrame);
    up.once('open', () => process.send!({ ready: { port } }));
    up.once('error', (e) => {
      console.error('visible-floor:', e.message);
      process.exit(1);
    });
  } else if (m.stop !== undefined) {
    up?.terminate();
    process.exit(0);
  }
});
process.on('disconnect', () => process.exit(0));
