// Tests for the upstream pool over real sockets (replay servers, raw TCP servers, a child process); no mocks.
// Time bounds are deliberately loose: the machine is shared, so only behaviour and gross timing are asserted.
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import {
  UpstreamPool,
  backoffDelayMs,
  type UpstreamEvent,
  type UpstreamFrame,
  type UpstreamOptions,
} from '../../src/ingest/upstream.js';
import { createLogger, silentLogger, type Logger } from '../../src/log.js';
import { startReplayServer, type ReplayServer } from '../helpers/replay-server.js';

const BASE: Omit<UpstreamOptions, 'urls'> = {
  pingIntervalMs: 100,
  stallTimeoutMs: 300,
  backoffInitialMs: 20,
  backoffMaxMs: 200,
  healthyResetMs: 60_000,
  maxFrameBytes: 1 << 20,
  connectTimeoutMs: 2000,
};

/** Records frames and events and lets a test wait for a condition on them. */
function recorder() {
  const frames: UpstreamFrame[] = [];
  const events: UpstreamEvent[] = [];
  let wakers: (() => void)[] = [];
  const wake = (): void => {
    const w = wakers;
    wakers = [];
    for (const f of w) f();
  };
  return {
    frames,
    events,
    handlers: {
      onFrame(f: UpstreamFrame) {
        frames.push(f);
        wake();
      },
      onEvent(e: UpstreamEvent) {
        events.push(e);
        wake();
      },
    },
    /** Waits until `fn` returns something other than undefined/false, re-checking on every frame and event. */
    async until<T>(what: string, fn: () => T | undefined | false, timeoutMs = 5000): Promise<T> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const v = fn();
        if (v !== undefined && v !== false) return v;
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          wakers.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
    /** The first event of `kind` (for `upstream`, default 0) recorded at or after position `from`. */
    find<K extends UpstreamEvent['kind']>(kind: K, from = 0, upstream = 0) {
      for (let i = from; i < events.length; i++) {
        const e = events[i];
        if (e !== undefined && e.kind === kind && e.upstream === upstream) return e as Extract<UpstreamEvent, { kind: K }>;
      }
      return undefined;
    },
  };
}

async function withServer(t: Test): Promise<ReplayServer> {
  const server = await startReplayServer();
  t.teardown(() => server.close());
  return server;
}

function startPool(t: Test, urls: string[], over: Partial<UpstreamOptions> = {}, log: Logger = silentLogger) {
  const rec = recorder();
  const pool = new UpstreamPool({ ...BASE, ...over, urls }, rec.handlers, log);
  t.teardown(() => pool.stop());
  pool.start();
  return { pool, rec };
}

/** A port on 127.0.0.1 with nothing listening (bound once, then released). */
async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const addr = srv.address();
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  if (addr === null || typeof addr === 'string') throw new Error('no port');
  return addr.port;
}

/** A TCP server that accepts connections and never answers the WebSocket upgrade. */
async function blackhole(t: Test): Promise<number> {
  const sockets = new Set<net.Socket>();
  const srv = net.createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  t.teardown(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => srv.close(() => resolve()));
  });
  const addr = srv.address();
  if (addr === null || typeof addr === 'string') throw new Error('no port');
  return addr.port;
}

t.test('text and binary frames arrive byte-identical, tagged with kind and upstream index', async (t) => {
  const server = await withServer(t);
  const { pool, rec } = startPool(t, [server.url]);
  await rec.until('connected', () => rec.find('connected'));
  t.equal(pool.connectedCount(), 1);
  t.ok(pool.isConnected(0));
  t.notOk(pool.isConnected(1), 'an unknown index is not connected');

  const text = '{"payload_id":"0x0102030405060708","index":0,"note":"ünïcödé ✓"}';
  const binary = Buffer.from([0x1b, 0x00, 0xff, 0xfe, 0x7b, 0x80, 0xc3, 0x28]); // not valid UTF-8
  const before = performance.now();
  server.send(text);
  server.send(binary);
  server.send(Buffer.from('{"as":"text"}'), { binary: false });
  await rec.until('3 frames', () => rec.frames.length >= 3);

  const [a, b, c] = rec.frames;
  t.ok(Buffer.isBuffer(a?.data), 'text frames are delivered as Buffers, not decoded');
  t.ok(a?.data.equals(Buffer.from(text, 'utf8')));
  t.equal(a?.isBinary, false);
  t.ok(b?.data.equals(binary));
  t.equal(b?.isBinary, true);
  t.ok(c?.data.equals(Buffer.from('{"as":"text"}')));
  t.equal(c?.isBinary, false);
  for (const f of rec.frames) {
    t.equal(f.upstream, 0);
    t.ok(f.receivedAtMs >= before && f.receivedAtMs <= performance.now(), 'receivedAtMs is performance.now()');
  }
});

t.test('reconnects after the server drops the connection, and frames flow again', async (t) => {
  const server = await withServer(t);
  const { pool, rec } = startPool(t, [server.url]);
  await rec.until('connected', () => rec.find('connected'));

  let mark = rec.events.length;
  server.dropClients(); // close frame 1011
  const closed = await rec.until('disconnected', () => rec.find('disconnected', mark));
  t.equal(closed.code, 1011);
  t.match(closed.reason, /dropped/);
  t.equal(closed.attempt, 1);
  t.ok(closed.retryInMs >= BASE.backoffInitialMs && closed.retryInMs <= BASE.backoffMaxMs, 'retry delay within bounds');
  t.notOk(pool.isConnected(0));
  await rec.until('connected again', () => rec.find('connected', mark));
  t.equal(pool.connectedCount(), 1);

  mark = rec.events.length;
  server.dropClients(0); // TCP destroyed without a close frame
  const killed = await rec.until('disconnected', () => rec.find('disconnected', mark));
  t.equal(killed.code, 1006);
  t.equal(killed.attempt, 2, 'a connection that was not up healthyResetMs does not reset the attempt counter');
  await rec.until('connected again', () => rec.find('connected', mark));

  await server.waitForClients(1);
  server.send('after reconnect');
  const f = await rec.until('frame', () => rec.frames.find((x) => x.data.toString() === 'after reconnect'));
  t.equal(f.upstream, 0);
});

/** Waits for the first connection, then drops it three times; returns the attempt number of each disconnect. */
async function flapThreeTimes(server: { dropClients(): void }, rec: ReturnType<typeof startPool>['rec']): Promise<number[]> {
  await rec.until('connected', () => rec.find('connected'));
  const attempts: number[] = [];
  for (let i = 0; i < 3; i++) {
    const mark = rec.events.length;
    server.dropClients();
    attempts.push((await rec.until('disconnected', () => rec.find('disconnected', mark))).attempt);
    await rec.until('connected', () => rec.find('connected', mark));
  }
  return attempts;
}

t.test('the attempt counter resets once a connection stayed up healthyResetMs', async (t) => {
  const server = await withServer(t);
  const { rec } = startPool(t, [server.url], { healthyResetMs: 300 });
  t.same(await flapThreeTimes(server, rec), [1, 2, 3], 'quick flaps keep counting');
  await new Promise((r) => setTimeout(r, 700));
  const mark = rec.events.length;
  server.dropClients();
  const e = await rec.until('disconnected', () => rec.find('disconnected', mark));
  t.equal(e.attempt, 1, 'counter reset after a healthy connection');
  t.ok(e.retryInMs === BASE.backoffInitialMs, 'first retry waits exactly backoffInitialMs');
});

t.test('the first frame of a connection resets the backoff; connections that deliver nothing keep climbing', async (t) => {
  const server = await withServer(t);
  const { rec } = startPool(t, [server.url]); // healthyResetMs 60 s: only the frame can reset it here
  t.same(await flapThreeTimes(server, rec), [1, 2, 3], 'no frame: the counter keeps climbing');
  await server.waitForClients(1);
  server.send('hello');
  await rec.until('frame', () => rec.frames.length >= 1);
  const mark = rec.events.length;
  server.dropClients();
  const e = await rec.until('disconnected', () => rec.find('disconnected', mark));
  t.equal(e.attempt, 1, 'a connection that delivered a frame resets the counter');
  t.equal(e.retryInMs, BASE.backoffInitialMs, 'and the retry waits exactly backoffInitialMs');
});

/** A fake upstream that can be killed and brought back on the same port, sending a frame every `everyMs` while up. */
async function restartable(t: Test, everyMs: number) {
  let server = await startReplayServer();
  const port = server.port;
  let n = 0;
  const ticker = setInterval(() => server.send(`frame ${n++}`), everyMs);
  t.teardown(async () => {
    clearInterval(ticker);
    await server.close();
  });
  return {
    url: server.url,
    kill: () => server.close(),
    async revive(): Promise<void> {
      server = await startReplayServer({ port });
    },
  };
}

t.test('an upstream restarted 20 times is retried from backoffInitialMs each time (reconnect-to-receipt reported)', async (t) => {
  // The daemon's defaults (backoff 100 ms → 5 s, healthy reset 10 s), a 200 ms frame interval, 500 ms down each time.
  const up = await restartable(t, 200);
  const { rec } = startPool(t, [up.url], { pingIntervalMs: 500, stallTimeoutMs: 1000, backoffInitialMs: 100, backoffMaxMs: 5000, healthyResetMs: 10_000, connectTimeoutMs: 3000 });
  await rec.until('first frame', () => rec.frames.length > 0);
  const toReceiptMs: number[] = [];
  const firstAttempts: number[] = [];
  for (let i = 0; i < 20; i++) {
    const mark = rec.events.length;
    await up.kill();
    const gone = await rec.until('disconnected', () => rec.find('disconnected', mark));
    firstAttempts.push(gone.attempt);
    await new Promise((r) => setTimeout(r, 500));
    await up.revive();
    const backAt = performance.now();
    const f = await rec.until('a frame after the restart', () => rec.frames.find((x) => x.receivedAtMs > backAt), 15_000);
    toReceiptMs.push(f.receivedAtMs - backAt);
  }
  t.same(firstAttempts, new Array(20).fill(1), 'every restart found the backoff reset by the frames before it');
  const pct = (xs: number[], p: number): number => {
    const s = [...xs].sort((a, b) => a - b);
    return Math.round(s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!);
  };
  t.comment(`upstream back → next frame received, 20 restarts: p50 ${pct(toReceiptMs, 50)} ms, p99 ${pct(toReceiptMs, 99)} ms, max ${pct(toReceiptMs, 100)} ms`);
  t.equal(toReceiptMs.length, 20, 'a frame was received after every restart');
});

t.test('a silent upstream (no frames, no pongs) is reported stalled and reconnected', async (t) => {
  const server = await withServer(t);
  const { rec } = startPool(t, [server.url], { stallTimeoutMs: 300, pingIntervalMs: 100 });
  await rec.until('connected', () => rec.find('connected'));

  // A quiet but answering upstream is not stalled: pongs keep it alive.
  await new Promise((r) => setTimeout(r, 800));
  t.notOk(rec.find('stalled'), 'pongs alone keep a quiet upstream alive');

  const mark = rec.events.length;
  const silencedAt = performance.now();
  server.silence(true);
  const stalled = await rec.until('stalled', () => rec.find('stalled', mark));
  const tookMs = performance.now() - silencedAt;
  t.ok(stalled.silentMs >= 300, `silentMs ${stalled.silentMs} >= stallTimeoutMs`);
  t.ok(tookMs < 3000, `detected after ${Math.round(tookMs)} ms (~stallTimeoutMs, generous bound)`);
  const gone = await rec.until('disconnected', () => rec.find('disconnected', mark));
  t.equal(gone.code, 1006, 'the stalled socket was terminated');
  const markReconnect = rec.events.indexOf(gone);
  server.silence(false);
  await rec.until('connected again', () => rec.find('connected', markReconnect));
  await server.waitForClients(1);
  server.send('alive');
  await rec.until('frame after stall', () => rec.frames.some((f) => f.data.toString() === 'alive'));
  t.pass('frames flow after the stall reconnect');
});

t.test('an oversized frame gives "oversized", a 1009 close and a reconnect; the pool keeps working', async (t) => {
  const server = await withServer(t);
  const { rec } = startPool(t, [server.url], { maxFrameBytes: 1024 });
  await rec.until('connected', () => rec.find('connected'));

  const mark = rec.events.length;
  server.send(Buffer.alloc(4096, 0x61));
  await rec.until('oversized', () => rec.find('oversized', mark));
  const closed = await rec.until('disconnected', () => rec.find('disconnected', mark));
  t.equal(closed.code, 1009);
  t.ok(rec.events.indexOf(rec.find('oversized', mark)!) < rec.events.indexOf(closed), 'oversized before disconnected');
  await rec.until('connected again', () => rec.find('connected', mark));
  await server.waitForClients(1);
  server.send(Buffer.alloc(1024, 0x62));
  const f = await rec.until('small frame', () => rec.frames[0]);
  t.equal(f.data.length, 1024, 'a frame of exactly maxFrameBytes is accepted');
  t.equal(rec.frames.length, 1, 'the oversized frame was never delivered');
});

t.test('a URL with nothing listening keeps retrying with growing, capped delays', async (t) => {
  const port = await freePort();
  const initial = 10;
  const max = 80;
  const { pool, rec } = startPool(t, [`ws://127.0.0.1:${port}/`], { backoffInitialMs: initial, backoffMaxMs: max });
  const fails = await rec.until('10 failed attempts', () => {
    const d = rec.events.filter((e) => e.kind === 'disconnected');
    return d.length >= 10 ? d : undefined;
  }, 15_000);
  t.same(fails.map((e) => e.attempt), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  for (const e of fails) {
    const ceiling = Math.min(max, initial * 2 ** (e.attempt - 1));
    t.ok(e.retryInMs >= initial && e.retryInMs <= ceiling, `attempt ${e.attempt}: ${e.retryInMs} in [${initial}, ${ceiling}]`);
    t.equal(e.code, 1006);
  }
  const early = Math.max(...fails.slice(0, 2).map((e) => e.retryInMs));
  const late = Math.max(...fails.slice(4).map((e) => e.retryInMs));
  t.ok(late > early, `later delays grow (early max ${early}, late max ${late})`);
  t.notOk(rec.find('connected'));
  t.equal(pool.connectedCount(), 0);
});

t.test('backoffDelayMs stays within [initial, min(max, initial·2^(attempt-1))]', async (t) => {
  for (let attempt = 1; attempt <= 40; attempt++) {
    const ceiling = Math.min(5000, 100 * 2 ** (attempt - 1));
    let ok = true;
    for (let i = 0; i < 200; i++) {
      const d = backoffDelayMs(attempt, 100, 5000);
      if (!(d >= 100 && d <= ceiling && Number.isInteger(d))) ok = false;
    }
    t.ok(ok, `attempt ${attempt}`);
  }
  t.equal(backoffDelayMs(1, 100, 5000), 100);
  t.equal(backoffDelayMs(1e6, 5000, 5000), 5000, 'huge attempt numbers do not overflow');
});

t.test('a server that never answers the upgrade hits the connect timeout and is retried', async (t) => {
  const port = await blackhole(t);
  const lines: string[] = [];
  const log = createLogger({ level: 'debug', write: (l) => lines.push(l) });
  const { rec } = startPool(t, [`ws://127.0.0.1:${port}/`], { connectTimeoutMs: 200 }, log);
  const started = performance.now();
  const e = await rec.until('disconnected', () => rec.find('disconnected'));
  t.equal(e.code, 1006);
  t.ok(performance.now() - started < 5000, 'timed out well before a TCP timeout would');
  t.ok(lines.some((l) => /timed out/.test(l)), 'the log line names the handshake timeout');
  await rec.until('second attempt', () => rec.events.filter((x) => x.kind === 'disconnected').length >= 2);
});

t.test('two upstreams: connected at once, frames tagged by index, one dying leaves the other delivering', async (t) => {
  const a = await withServer(t);
  const b = await withServer(t);
  const { pool, rec } = startPool(t, [a.url, b.url]);
  await rec.until('both connected', () => pool.connectedCount() === 2);
  t.ok(rec.find('connected', 0, 0) && rec.find('connected', 0, 1));

  a.send('from a');
  b.send(Buffer.from('from b'));
  await rec.until('2 frames', () => rec.frames.length >= 2);
  const tagOf = (s: string) => rec.frames.find((f) => f.data.toString() === s)?.upstream;
  t.equal(tagOf('from a'), 0);
  t.equal(tagOf('from b'), 1);

  await a.close();
  await rec.until('a disconnected', () => rec.find('disconnected', 0, 0));
  t.notOk(pool.isConnected(0));
  t.ok(pool.isConnected(1));
  t.equal(pool.connectedCount(), 1);
  b.send('b still here');
  const f = await rec.until('frame from b', () => rec.frames.find((x) => x.data.toString() === 'b still here'));
  t.equal(f.upstream, 1);
  t.notOk(rec.find('disconnected', 0, 1), 'upstream 1 was never disturbed');
});

t.test('a throwing frame handler loses only that frame', async (t) => {
  const server = await withServer(t);
  const seen: string[] = [];
  const pool = new UpstreamPool({ ...BASE, urls: [server.url] }, {
    onFrame(f) {
      seen.push(f.data.toString());
      if (f.data.toString() === 'boom') throw new Error('handler bug');
    },
  }, silentLogger);
  t.teardown(() => pool.stop());
  pool.start();
  await server.waitForClients(1);
  server.send('boom');
  server.send('next');
  const deadline = Date.now() + 5000;
  while (seen.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  t.same(seen, ['boom', 'next']);
  t.ok(pool.isConnected(0));
});

t.test('stop() closes every socket, cancels pending reconnects and emits nothing afterwards', async (t) => {
  const server = await withServer(t);
  const other = await withServer(t);
  const refused = await freePort();
  const { pool, rec } = startPool(t, [server.url, `ws://127.0.0.1:${refused}/`, other.url], {
    backoffInitialMs: 300,
    backoffMaxMs: 300,
  });
  await rec.until('connected and retrying', () => rec.find('connected', 0, 0) && rec.find('disconnected', 0, 1));
  await rec.until('third connected', () => rec.find('connected', 0, 2));
  const mark = rec.events.length;
  other.dropClients();
  await rec.until('third in backoff', () => rec.find('disconnected', mark, 2));
  await pool.stop();
  t.equal(pool.connectedCount(), 0);
  t.equal(server.clients(), 0, 'stop() resolved after the server saw the connection close');
  const stoppedAt = rec.events.length;
  await new Promise((r) => setTimeout(r, 700));
  t.equal(other.clients(), 0, 'the pending reconnect was cancelled');
  t.equal(server.clients(), 0);
  t.equal(rec.events.length, stoppedAt, 'no events after stop');
  pool.start();
  await new Promise((r) => setTimeout(r, 100));
  t.equal(server.clients(), 0, 'start() after stop() does nothing');
  await pool.stop();
});

t.test('after stop() no timer or socket keeps the process alive', async (t) => {
  // A child process runs a pool against a live, a refused and a never-answering upstream, stops it and must exit.
  const server = await withServer(t);
  const refused = await freePort();
  const hole = await blackhole(t);
  const moduleUrl = new URL('../../src/ingest/upstream.ts', import.meta.url).href;
  const logUrl = new URL('../../src/log.ts', import.meta.url).href;
  const script = `
    import { UpstreamPool } from ${JSON.stringify(moduleUrl)};
    import { silentLogger } from ${JSON.stringify(logUrl)};
    const urls = JSON.parse(process.env.UPSTREAM_URLS);
    let connected = false, failed = false, done = false;
    const pool = new UpstreamPool({ urls, pingIntervalMs: 50, stallTimeoutMs: 1000, backoffInitialMs: 50,
      backoffMaxMs: 5000, healthyResetMs: 60000, maxFrameBytes: 1024, connectTimeoutMs: 30000 }, {
      onFrame() {},
      async onEvent(e) {
        if (e.kind === 'connected') connected = true;
        if (e.kind === 'disconnected' && e.upstream === 1) failed = true;
        if (connected && failed && !done) { done = true; await pool.stop(); console.log('stopped'); }
      },
    }, silentLogger);
    pool.start();
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: fileURLToPath(new URL('../..', import.meta.url)),
    env: { ...process.env, UPSTREAM_URLS: JSON.stringify([server.url, `ws://127.0.0.1:${refused}/`, `ws://127.0.0.1:${hole}/`]) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  clearTimeout(killer);
  t.equal(code, 0, `child exited by itself${err ? ': ' + err : ''}`);
  t.match(out, /stopped/);
});

t.test('credentials in upstream URLs never reach the log', async (t) => {
  const server = await withServer(t);
  const refused = await freePort();
  const lines: string[] = [];
  const log = createLogger({ level: 'debug', write: (l) => lines.push(l) });
  const secretUrl = `ws://user:secret@127.0.0.1:${server.port}/path?key=abc`;
  const deadUrl = `ws://user:secret@127.0.0.1:${refused}/path?key=abc`;
  const { pool, rec } = startPool(t, [secretUrl, deadUrl], { maxFrameBytes: 16 }, log);
  await rec.until('connected', () => rec.find('connected'));
  await rec.until('dead one retried', () => rec.find('disconnected', 0, 1));
  server.send('this frame is longer than sixteen bytes'); // oversized → warn + close + reconnect lines
  await rec.until('oversized', () => rec.find('oversized'));
  await rec.until('reconnected', () => rec.events.filter((e) => e.kind === 'connected' && e.upstream === 0).length >= 2);
  await pool.stop();
  t.ok(lines.length >= 5, `${lines.length} log lines captured`);
  t.ok(lines.some((l) => l.includes('127.0.0.1') && l.includes('redacted')), 'lines carry the redacted URL');
  t.ok(lines.some((l) => /upstream: connection refused by 127\.0\.0\.1:\d+ .*; reconnecting in \d+ ms \(attempt \d+\)/.test(l)));
  t.ok(lines.some((l) => /upstream: sent a frame larger than 16 bytes/.test(l)), 'the oversized frame is the reason given');
  for (const l of lines) {
    t.notMatch(l, /secret/, 'no password');
    t.notMatch(l, /abc/, 'no query value');
  }
  let thrown: unknown;
  try {
    new UpstreamPool({ ...BASE, urls: ['http://user:secret@x/?key=abc'] }, rec.handlers, log);
  } catch (err) {
    thrown = err;
  }
  t.ok(thrown instanceof RangeError, 'a bad URL is rejected at construction');
  t.notMatch(String(thrown), /secret|abc/, 'and the error message is redacted');
});
