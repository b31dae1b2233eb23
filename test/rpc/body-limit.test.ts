// The body limit as every kind of client sees it: a 6 MB body over the default 5 MiB limit gets HTTP 413 with the
// JSON-RPC error body from Node's fetch, from a raw socket that writes the whole body before reading, with chunked
// transfer encoding, and from curl (Expect: 100-continue); the server keeps serving. A real daemon process: with
// client and server in one process the server only reads while the client awaits, which hides the reset.
import t, { type Test } from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sourceCommand, spawnDaemon } from '../helpers/daemon-process.js';

const { NODE_OPTIONS: _tapLoaders, ...childEnv } = process.env;
const d = await spawnDaemon(sourceCommand(), ['--port', '0', '--metrics-port', '0', '--flashblocks-enabled', 'false', '--node-rpc-url', 'http://127.0.0.1:9'], { env: childEnv });
t.teardown(() => d.close());
const h = { url: d.rpcUrl, port: d.rpcPort };
/** The default --max-body-bytes. */
const LIMIT = 5 * 1024 * 1024;
const SIX_MB = 6 * 1000 * 1000;

/** A syntactically valid JSON-RPC request of exactly `bytes` bytes. */
function bigRequest(bytes: number): string {
  const head = '{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"data":"0x';
  const tail = '"},"latest"]}';
  return head + 'ab'.repeat((bytes - head.length - tail.length) >> 1) + tail;
}

/** Writes `head` and then `body` chunks on a raw socket, reads until the server closes; returns all it said. */
function rawExchange(head: string, body: Buffer[]): Promise<{ text: string; error: string | null }> {
  return new Promise((resolve) => {
    const s = net.connect(h.port, '127.0.0.1');
    const got: Buffer[] = [];
    let error: string | null = null;
    s.on('data', (d: Buffer) => got.push(d));
    s.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    s.on('close', () => resolve({ text: Buffer.concat(got).toString('latin1'), error }));
    s.write(head);
    for (const b of body) s.write(b);
  });
}

async function stillServes(tt: Test): Promise<void> {
  const r = await fetch(h.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"web3_sha3","params":["0x"]}' });
  const j = (await r.json()) as { id?: number };
  tt.equal(j.id, 1, 'the server still answers JSON-RPC afterwards');
}

t.test('the limit this file tests is the default', async (tt) => {
  const config = d.logs().find((l) => l.msg === 'configuration')?.config as { maxBodyBytes?: number } | undefined;
  tt.equal(config?.maxBodyBytes, LIMIT);
  tt.ok(SIX_MB > LIMIT);
});

t.test("Node's fetch gets the 413 for a 6 MB body (no EPIPE, no reset)", async (tt) => {
  const r = await fetch(h.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bigRequest(SIX_MB) });
  tt.equal(r.status, 413);
  const j = (await r.json()) as { error?: { code: number; message: string } };
  tt.equal(j.error?.code, -32600);
  tt.match(j.error?.message, `exceeds the ${LIMIT}-byte limit`);
  tt.equal(r.headers.get('connection'), 'close', 'the connection is closed after the 413');
  await stillServes(tt);
});

t.test('a raw socket writing a 6 MB Content-Length body before reading gets the 413', async (tt) => {
  const body = Buffer.from(bigRequest(SIX_MB));
  const head = `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
  // In 64 KiB writes, as a client streaming its upload would.
  const chunks: Buffer[] = [];
  for (let i = 0; i < body.length; i += 65536) chunks.push(body.subarray(i, i + 65536));
  const r = await rawExchange(head, chunks);
  tt.match(r.text, /^HTTP\/1\.1 413 /, `the 413 status line arrives (socket error: ${r.error ?? 'none'})`);
  tt.match(r.text, /exceeds the \d+-byte limit/, 'with the JSON-RPC error body');
  tt.equal(r.error, null, 'no reset or EPIPE on the client side');
  await stillServes(tt);
});

t.test('a chunked 6 MB body (no Content-Length) gets the 413', async (tt) => {
  const body = Buffer.from(bigRequest(SIX_MB));
  const head = 'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n';
  const chunks: Buffer[] = [];
  for (let i = 0; i < body.length; i += 65536) {
    const part = body.subarray(i, i + 65536);
    chunks.push(Buffer.from(part.length.toString(16) + '\r\n'), part, Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from('0\r\n\r\n'));
  const r = await rawExchange(head, chunks);
  tt.match(r.text, /^HTTP\/1\.1 413 /, `the 413 status line arrives (socket error: ${r.error ?? 'none'})`);
  tt.equal(r.error, null, 'no reset on the client side');
  await stillServes(tt);
});

// (uWS itself drops, without an answer, a Content-Length of 10 digits or more: its parser refuses it.)
t.test('a body announced far beyond what is drained is refused at once, before it is sent', async (tt) => {
  const head = `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${500 * 1000 * 1000}\r\n\r\n`;
  const r = await rawExchange(head, []);
  tt.match(r.text, /^HTTP\/1\.1 413 /);
  await stillServes(tt);
});

const CURL = spawnSync('curl', ['--version'], { stdio: 'ignore' }).status === 0;
t.test('curl (Expect: 100-continue) gets the 413', { skip: CURL ? false : 'curl is not installed' }, async (tt) => {
  const file = join(mkdtempSync(join(tmpdir(), 'fbd-413-')), 'body.json');
  writeFileSync(file, bigRequest(SIX_MB));
  const out = await new Promise<string>((resolve) => {
    const c = spawn('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '-H', 'content-type: application/json', '--data-binary', '@' + file, h.url]);
    let s = '';
    c.stdout.on('data', (d: Buffer) => (s += d.toString()));
    c.on('close', () => resolve(s));
  });
  tt.equal(out, '413');
  await stillServes(tt);
});
