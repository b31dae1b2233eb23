// Load-generating child processes for the benchmarks (forked by bench/lib.ts, never run as a suite):
//   --subscribers  a batch of WebSocket clients that time every frame they receive: raw-stream (/flashblocks)
//                  subscribers keyed by frameKey (`ws` clients, or bare TCP sockets reading the frames: `wire`), or
//                  `eth_subscribe newFlashblocks` subscribers keyed by block hash;
//   --rpc-mix      an open-loop JSON-RPC client at a fixed rate over a weighted method mix, latency per method
//                  measured from the request's scheduled time (no coordinated omission).
// Clocks: performance.timeOrigin + performance.now() on both sides (same machine).
import http from 'node:http';
import net from 'node:net';
import WebSocket from 'ws';
import { absNow, frameKey, LatencyHistogram, type HistogramJson, type SubscriberMode, type SubscriberReport } from './lib.js';

// ── subscribers ──────────────────────────────────────────────────────────────────────────────────────────────────

interface SubStart {
  url: string;
  count: number;
  mode: SubscriberMode;
}

/** The part of a `ws` client the subscriber loop uses (a bare-TCP reader offers the same). */
interface Client {
  terminate(): void;
  removeAllListeners(event: 'close'): unknown;
}

/** Largest server frame a bare-TCP reader accepts (a bound on what it buffers). */
const WIRE_MAX_FRAME_BYTES = 64 * 1024 * 1024;

/** Where every bare-TCP reader of this process reads into (callbacks run one at a time; leftovers are copied out). */
const WIRE_READ_BUFFER = Buffer.alloc(256 * 1024);

/**
 * A raw-stream subscriber on a bare TCP socket: writes the handshake, then parses the server's (unmasked) frames in
 * the bytes as they are read (`onread` into one shared buffer: no stream machinery, no allocation per read) and
 * calls `onMessage(payload, arrivedAt)` per text or binary message — the payload valid during the call only, the
 * time that of the read that completed it; answers pings. Far less work per message than a `ws` client, so that the
 * server's sending, not the clients' receiving, sets the last arrival.
 */
function wireClient(url: string, onOpen: () => void, onMessage: (payload: Buffer, at: number) => void, onClose: (code: number) => void): Client {
  const u = new URL(url);
  /** Bytes of an incomplete frame (or handshake) left from earlier reads. */
  let rest: Buffer | null = null;
  let open = false;
  let code = 1006;
  const sock: net.Socket = net.connect({
    port: Number(u.port),
    host: u.hostname,
    noDelay: true,
    onread: {
      buffer: WIRE_READ_BUFFER,
      callback: (nread: number, read: Uint8Array): boolean => {
        const at = absNow();
        const chunk = Buffer.from(read.buffer, read.byteOffset, nread);
        let buf = rest === null ? chunk : Buffer.concat([rest, chunk]);
        rest = null;
        if (!open) {
          const end = buf.indexOf('\r\n\r\n');
          if (end < 0) {
            rest = Buffer.from(buf);
            return true;
          }
          if (!buf.subarray(0, 12).toString('latin1').startsWith('HTTP/1.1 101')) {
            sock.destroy();
            return false;
          }
          open = true;
          buf = buf.subarray(end + 4);
          onOpen();
        }
        let at0 = 0;
        while (buf.length - at0 >= 2) {
          const op = buf[at0]! & 0x0f;
          let len = buf[at0 + 1]! & 0x7f;
          let head = 2;
          if (len === 126) {
            if (buf.length - at0 < 4) break;
            len = buf.readUInt16BE(at0 + 2);
            head = 4;
          } else if (len === 127) {
            if (buf.length - at0 < 10) break;
            len = Number(buf.readBigUInt64BE(at0 + 2));
            head = 10;
          }
          if (len > WIRE_MAX_FRAME_BYTES) {
            sock.destroy();
            return false;
          }
          if (buf.length - at0 < head + len) break;
          const payload = buf.subarray(at0 + head, at0 + head + len);
          at0 += head + len;
          if (op === 1 || op === 2) onMessage(payload, at);
          else if (op === 8) code = len >= 2 ? payload.readUInt16BE(0) : 1005;
          else if (op === 9) sock.write(Buffer.concat([Buffer.from([0x8a, 0x80 | payload.length, 0, 0, 0, 0]), payload])); // pong, zero mask
        }
        if (at0 < buf.length) rest = Buffer.from(buf.subarray(at0));
        return true;
      },
    },
  });
  sock.on('connect', () =>
    sock.write(
      `GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
    ),
  );
  sock.on('close', () => onClose(code));
  sock.on('error', () => {});
  return {
    terminate: () => sock.destroy(),
    removeAllListeners: () => sock.removeAllListeners('close'),
  };
}

function runSubscribers(): void {
  let sockets: Client[] = [];
  /** key → arrival times of this child's clients */
  let arrivals = new Map<string, number[]>();
  let closes: Record<string, number> = {};
  let cpu0 = process.cpuUsage();
  let wall0 = 0;
  const arrived = (key: string, t: number): void => {
    const a = arrivals.get(key);
    if (a === undefined) arrivals.set(key, [t]);
    else a.push(t);
  };
  process.on('message', (msg: { start?: SubStart; report?: { sentAt: [string, number][] } }) => {
    if (msg.start !== undefined) {
      const { url, count, mode } = msg.start;
      // A new phase: the previous phase's subscribers leave (they would still be sent to, and count).
      for (const old of sockets) old.terminate();
      sockets = [];
      arrivals = new Map();
      closes = {};
      let ready = 0;
      const oneReady = (): void => {
        if (++ready === count) {
          cpu0 = process.cpuUsage();
          wall0 = absNow();
          process.send!({ ready: true });
        }
      };
      if (count === 0) {
        process.send!({ ready: true });
        return;
      }
      for (let i = 0; i < count; i++) {
        if (mode === 'wire') {
          const onClose = (code: number): void => void (closes[code] = (closes[code] ?? 0) + 1);
          sockets.push(wireClient(url, oneReady, (payload, at) => arrived(frameKey(payload), at), onClose));
          continue;
        }
        const ws = new WebSocket(url, { perMessageDeflate: false });
        if (mode === 'raw') {
          ws.on('message', (data: Buffer) => arrived(frameKey(data), absNow()));
          ws.on('open', oneReady);
        } else {
          let subscribed = false;
          ws.on('open', () => ws.send('{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newFlashblocks"]}'));
          ws.on('message', (data: Buffer) => {
            const t = absNow();
            const m = JSON.parse(data.toString('utf8')) as { id?: number; result?: unknown; params?: { result?: { hash?: string } } };
            if (!subscribed) {
              if (m.id === 1 && typeof m.result === 'string') {
                subscribed = true;
                oneReady();
              }
              return;
            }
            const h = m.params?.result?.hash;
            if (typeof h === 'string') arrived(h, t);
          });
        }
        ws.on('close', (code) => {
          closes[code] = (closes[code] ?? 0) + 1;
        });
        ws.on('error', () => {});
        sockets.push(ws);
      }
    } else if (msg.report !== undefined) {
      const cpu = process.cpuUsage(cpu0);
      const wallMs = absNow() - wall0;
      const sentAt = new Map(msg.report.sentAt);
      const all = new LatencyHistogram();
      const last: [string, [number, number]][] = [];
      for (const [k, times] of arrivals) {
        const s = sentAt.get(k);
        let max = 0;
        for (const t of times) {
          if (t > max) max = t;
          if (s !== undefined) all.record(t - s);
        }
        last.push([k, [max, times.length]]);
      }
      for (const ws of sockets) {
        ws.removeAllListeners('close');
        ws.terminate();
      }
      sockets = [];
      const report: SubscriberReport = { last, all: all.toJSON(), closes, cpuMs: (cpu.user + cpu.system) / 1000, wallMs };
      process.send!({ report });
    }
  });
}

// ── fixed-rate RPC mix ──────────────────────────────────────────────────────────────────────────────────────────

/** Methods of the mix and their weights. */
export const RPC_MIX: { method: string; weight: number }[] = [
  { method: 'eth_getTransactionReceipt', weight: 30 },
  { method: 'eth_getBlockByNumber(pending)', weight: 15 },
  { method: 'eth_getBalance(pending)', weight: 20 },
  { method: 'eth_getTransactionCount(pending)', weight: 15 },
  { method: 'eth_chainId (forwarded)', weight: 10 },
  { method: 'eth_getBlockByNumber(latest) (forwarded)', weight: 10 },
];

export interface MixReport {
  byMethod: Record<string, { latency: HistogramJson; errors: number; nulls: number }>;
  sent: number;
  completed: number;
  seconds: number;
}

/** Fresh pending transactions and their senders, sent by the replay process after every frame. */
export interface Fresh {
  txHashes: string[];
  senders: string[];
}

/** The JSON-RPC body of request `n` of `method` (an RPC_MIX name), asking about `fresh` transactions and senders. */
export function mixBody(method: string, n: number, fresh: Fresh): string {
  const pick = <T>(a: T[], dflt: T): T => (a.length === 0 ? dflt : (a[n % a.length] as T));
  const someone = '0x0000000000000000000000000000000000000001';
  switch (method) {
    case 'eth_getTransactionReceipt':
      return JSON.stringify({ jsonrpc: '2.0', id: n, method, params: [pick(fresh.txHashes, '0x' + '00'.repeat(32))] });
    case 'eth_getBlockByNumber(pending)':
      return JSON.stringify({ jsonrpc: '2.0', id: n, method: 'eth_getBlockByNumber', params: ['pending', false] });
    case 'eth_getBalance(pending)':
      return JSON.stringify({ jsonrpc: '2.0', id: n, method: 'eth_getBalance', params: [pick(fresh.senders, someone), 'pending'] });
    case 'eth_getTransactionCount(pending)':
      return JSON.stringify({ jsonrpc: '2.0', id: n, method: 'eth_getTransactionCount', params: [pick(fresh.senders, someone), 'pending'] });
    case 'eth_chainId (forwarded)':
      return JSON.stringify({ jsonrpc: '2.0', id: n, method: 'eth_chainId', params: [] });
    case 'eth_getBlockByNumber(latest) (forwarded)':
      return JSON.stringify({ jsonrpc: '2.0', id: n, method: 'eth_getBlockByNumber', params: ['latest', false] });
    default:
      throw new Error(`unknown mix method ${method}`);
  }
}

/** The mix as a repeating sequence (smooth weighted round robin: every short window has the whole mix). */
export function mixCycle(mix: { method: string; weight: number }[]): string[] {
  const cycle: string[] = [];
  const total = mix.reduce((a, m) => a + m.weight, 0);
  const credit = mix.map(() => 0);
  for (let i = 0; i < total; i++) {
    let best = 0;
    for (let j = 0; j < mix.length; j++) {
      credit[j]! += mix[j]!.weight;
      if (credit[j]! > credit[best]!) best = j;
    }
    credit[best]! -= total;
    cycle.push(mix[best]!.method);
  }
  return cycle;
}

function runRpcMix(): void {
  let cycle = mixCycle(RPC_MIX);
  let gen = 0;
  let fresh: Fresh = { txHashes: [], senders: [] };
  let timer: NodeJS.Timeout | null = null;
  let agent: http.Agent | null = null;
  const stats = new Map<string, { latency: LatencyHistogram; errors: number; nulls: number }>();
  let sent = 0;
  let completed = 0;
  let t0 = 0;
  let stoppedAt = 0;
  const stat = (m: string): { latency: LatencyHistogram; errors: number; nulls: number } => {
    let s = stats.get(m);
    if (s === undefined) stats.set(m, (s = { latency: new LatencyHistogram(), errors: 0, nulls: 0 }));
    return s;
  };
  const issue = (url: URL, n: number, scheduled: number): void => {
    const method = cycle[n % cycle.length]!;
    const myGen = gen;
    const b = mixBody(method, n, fresh);
    sent++;
    const req = http.request(
      { agent: agent!, host: url.hostname, port: url.port, path: '/', method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(b) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const t = absNow();
          if (myGen !== gen) return;
          completed++;
          const s = stat(method);
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200 || text.includes('"error"')) s.errors++;
          else {
            if (text.includes('"result":null')) s.nulls++;
            s.latency.record(t - scheduled);
          }
        });
      },
    );
    req.on('error', () => {
      if (myGen === gen) stat(method).errors++;
    });
    req.end(b);
  };
  process.on('message', (msg: { mix?: { url: string; rate: number; methods?: string[] }; fresh?: Fresh; report?: true }) => {
    if (msg.fresh !== undefined) fresh = msg.fresh;
    else if (msg.mix !== undefined) {
      const url = new URL(msg.mix.url);
      const rate = msg.mix.rate;
      const only = msg.mix.methods;
      cycle = mixCycle(only === undefined ? RPC_MIX : RPC_MIX.filter((m) => only.includes(m.method)));
      gen++;
      agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
      stats.clear();
      sent = 0;
      completed = 0;
      stoppedAt = 0;
      t0 = absNow();
      let n = 0;
      // Open loop: every 1 ms, issue every request whose scheduled time has come.
      timer = setInterval(() => {
        const due = Math.floor(((absNow() - t0) * rate) / 1000) + 1; // requests 0..due-1 are scheduled at or before now
        for (; n < due; n++) issue(url, n, t0 + (n * 1000) / rate);
      }, 1);
      process.send!({ started: true });
    } else if (msg.report !== undefined) {
      if (timer !== null) clearInterval(timer);
      stoppedAt = absNow();
      // let in-flight requests finish
      setTimeout(() => {
        agent?.destroy();
        const byMethod: MixReport['byMethod'] = {};
        for (const [m, s] of stats) byMethod[m] = { latency: s.latency.toJSON(), errors: s.errors, nulls: s.nulls };
        const report: MixReport = { byMethod, sent, completed, seconds: (stoppedAt - t0) / 1000 };
        gen++;
        process.send!({ report });
      }, 300);
    }
  });
}

if (process.argv.includes('--subscribers')) runSubscribers();
else if (process.argv.includes('--rpc-mix')) runRpcMix();
