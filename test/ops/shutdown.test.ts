// Graceful shutdown of the real daemon process (src/main.ts under tsx) serving a replayed stream and a real anvil:
// SIGTERM under keep-alive RPC load answers every request that was sent (200, or a 503 refusal) with no connection
// reset, finishes a request that was in flight, closes stream and WebSocket RPC subscribers with 1001, exits 0;
// a second signal exits at once with 130.
import t, { type Test } from 'tap';
import http from 'node:http';
import net from 'node:net';
import WebSocket from 'ws';
import { unichainMessages } from '../helpers/fixtures.js';
import { sourceCommand, spawnDaemon, type DaemonProcess } from '../helpers/daemon-process.js';
import { startReplayServer, type ReplayServer } from '../helpers/replay-server.js';
import { startAnvil, type Anvil } from '../helpers/rpc-harness.js';

const PENDING_HEIGHT = '0x' + (35535698).toString(16);
const { NODE_OPTIONS: _tapLoaders, ...childEnv } = process.env;

let anvil: Anvil;
let upstream: ReplayServer;
t.before(async () => {
  anvil = await startAnvil();
  upstream = await startReplayServer();
});
t.teardown(async () => {
  await upstream.close();
  await anvil.stop();
});

/** Starts the daemon with the capture applied (eth_blockNumber = its pending height). */
async function startServing(t: Test, graceMs: number): Promise<DaemonProcess> {
  const d = await spawnDaemon(
    sourceCommand(),
    ['--port', '0', '--metrics-port', '0', '--flashblocks-url', upstream.url, '--node-rpc-url', anvil.url, '--block-time-ms', '1000', '--shutdown-grace-ms', String(graceMs), '--max-ahead-ms', '0'], // anvil is ~35 M blocks behind the capture
    { env: childEnv },
  );
  t.teardown(() => d.close());
  await upstream.waitForClients(1);
  for (const m of unichainMessages()) upstream.send(JSON.stringify(m));
  for (let i = 0; i < 400; i++) {
    const r = await post(d.rpcUrl, { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: ['pending'] });
    if ((r.json as { result?: string }).result === PENDING_HEIGHT) return d;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('the daemon never served the replayed pending block');
}

interface Answer {
  status: number;
  connection: string;
  json: unknown;
}

/** One JSON-RPC POST through `agent` (keep-alive); rejects with the socket error code on a reset or hang-up. */
function post(url: string, body: unknown, agent?: http.Agent): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        if (!res.complete) return reject(new Error('incomplete response'));
        const text = Buffer.concat(chunks).toString('utf8');
        try {
          resolve({ status: res.statusCode ?? 0, connection: String(res.headers.connection ?? ''), json: JSON.parse(text) as unknown });
        } catch {
          reject(new Error(`response is not JSON: ${text.slice(0, 200)}`));
        }
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** A raw HTTP/1.1 request sent in two parts: headers and half the body now, the rest when `finish` is called. */
function splitRequest(port: number, body: string): Promise<{ finish(): void; response: Promise<string> }> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let text = '';
    const response = new Promise<string>((res, rej) => {
      sock.on('data', (d: Buffer) => (text += d.toString('utf8')));
      sock.on('end', () => res(text));
      sock.on('error', (e) => rej(e));
    });
    sock.once('error', reject);
    sock.once('connect', () => {
      const half = Math.floor(body.length / 2);
      sock.write(`POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n` + body.slice(0, half));
      resolve({ finish: () => sock.write(body.slice(half)), response });
    });
  });
}

/** Resolves once the daemon logged a line matching `re`. */
async function logged(d: DaemonProcess, re: RegExp): Promise<void> {
  while (!d.logs().some((l) => re.test(String(l.msg)))) await new Promise((r) => setTimeout(r, 10));
}

/** Opens a WebSocket and resolves with it and its close code to come. */
async function openWs(url: string): Promise<{ ws: WebSocket; closed: Promise<number> }> {
  const ws = new WebSocket(url);
  const closed = new Promise<number>((resolve) => ws.once('close', (code: number) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return { ws, closed };
}

t.test('SIGTERM under keep-alive load: every sent request is answered, none reset; subscribers get 1001; exit 0', async (t) => {
  const d = await startServing(t, 10_000);
  const wsUrl = d.rpcUrl.replace('http://', 'ws://');
  const streams = await Promise.all([1, 2, 3].map(() => openWs(wsUrl + 'flashblocks')));
  const rpcSubscriber = await openWs(wsUrl);
  rpcSubscriber.ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['newFlashblocks'] }));

  // A request in flight across the signal: its headers and half its body are read before SIGTERM (a round trip
  // on another connection after writing them proves the daemon has read them); the rest comes after.
  const inFlight = await splitRequest(d.rpcPort, JSON.stringify({ jsonrpc: '2.0', id: 77, method: 'eth_getBlockByNumber', params: ['pending', false] }));
  await post(d.rpcUrl, { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] });

  // Load: keep-alive clients alternating a pending-state answer and a call forwarded to anvil, until the daemon
  // refuses (503 / connection: close) or stops accepting connections (ECONNREFUSED: nothing was sent).
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  t.teardown(() => agent.destroy());
  const answers: Answer[] = [];
  const lastAnswers: (Answer | undefined)[] = [];
  /** Clients whose next request found the port closed (ECONNREFUSED: nothing was sent on it). */
  const refusedAfter: boolean[] = [];
  const failures: string[] = [];
  let sigtermSent = false;
  let answeredAfterSigterm = 0;
  const bodies = [
    { jsonrpc: '2.0', id: 1, method: 'eth_getBlockByNumber', params: ['pending', true] },
    { jsonrpc: '2.0', id: 2, method: 'eth_getBalance', params: ['0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', 'latest'] },
  ];
  const client = async (n: number): Promise<void> => {
    for (let i = n; ; i++) {
      let a: Answer;
      try {
        a = await post(d.rpcUrl, bodies[i % 2], agent);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'ECONNREFUSED' && sigtermSent) {
          refusedAfter[n] = true;
          return;
        }
        failures.push(`${code ?? ''} ${(e as Error).message}`);
        return;
      }
      answers.push(a);
      lastAnswers[n] = a;
      if (sigtermSent) answeredAfterSigterm++;
      if (a.status !== 200) return;
    }
  };
  const clients = [0, 1, 2, 3, 4, 5, 6, 7].map(client);
  while (answers.length < 400 && failures.length === 0) await new Promise((r) => setTimeout(r, 5));

  sigtermSent = d.proc.kill('SIGTERM');
  await logged(d, /SIGTERM received: draining/);
  inFlight.finish();
  const exit = await d.exited;
  await Promise.all(clients);

  t.same(failures, [], 'no request got a connection reset or a hang-up');
  t.ok(answers.length >= 400, `${answers.length} requests answered`);
  t.ok(answeredAfterSigterm > 0, `${answeredAfterSigterm} answered after SIGTERM was sent`);
  const bad = answers.filter((a) => !(a.status === 200 && (a.json as { result?: unknown }).result !== undefined) && !(a.status === 503 && (a.json as { error?: { code: number } }).error?.code === -32000));
  t.same(bad, [], 'every answer is a 200 JSON-RPC result or a 503 JSON-RPC refusal');
  const refused = answers.filter((a) => a.status === 503);
  t.ok(refused.every((a) => a.connection === 'close'), `${refused.length} 503 refusals, each closing the connection`);
  // The daemon ends its drain once no request has ended for 50 ms: a client slower than that to send its next request
  // (a busy machine) finds its idle connection closed and the port refused — nothing sent, nothing lost.
  t.ok(
    lastAnswers.every((a, n) => a?.connection === 'close' || refusedAfter[n] === true),
    "each client ended cleanly: its last answer closed its connection, or its next request found the port closed before sending anything",
  );

  const raw = await inFlight.response;
  t.match(raw, /^HTTP\/1\.1 200 OK\r\n/, 'the request in flight at SIGTERM was answered');
  t.match(raw, /\r\nConnection: close\r\n/i, '... with connection: close');
  t.match(raw, /"id":77,"result":\{/);

  for (const s of streams) t.equal(await s.closed, 1001, 'stream subscriber closed with 1001');
  t.equal(await rpcSubscriber.closed, 1001, 'WebSocket JSON-RPC subscriber closed with 1001');
  t.same(exit, { code: 0, signal: null }, 'exit code 0');
  t.ok(d.logs().some((l) => l.msg === 'stopped cleanly'));
});

t.test('a second signal while draining exits at once with 130', async (t) => {
  const d = await startServing(t, 60_000);
  // Holds the drain open for the whole grace period: a request whose body never completes.
  await splitRequest(d.rpcPort, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }));
  await post(d.rpcUrl, { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] });
  d.proc.kill('SIGTERM');
  await logged(d, /SIGTERM received: draining/);
  d.proc.kill('SIGINT');
  t.same(await d.exited, { code: 130, signal: null }, 'exit code 130');
  t.ok(d.logs().some((l) => /second SIGINT: exiting now/.test(String(l.msg))));
  t.notOk(d.logs().some((l) => l.msg === 'stopped cleanly'), 'did not wait for the drain');
});
