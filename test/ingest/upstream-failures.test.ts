// How upstream failures are logged, over real sockets: one warn line per failure episode worded by what happened
// (DNS, refused, TLS, HTTP status on the upgrade, close code), debug lines and a periodic summary while it lasts, an
// info line when the upstream is back. Waits for log lines and events; asserts no durations.
import t, { type Test } from 'tap';
import http from 'node:http';
import net, { type LookupFunction } from 'node:net';
import { WebSocketServer } from 'ws';
import { FailureEpisode } from '../../src/ingest/backoff.js';
import { UpstreamPool, type UpstreamEvent, type UpstreamOptions } from '../../src/ingest/upstream.js';
import { createLogger } from '../../src/log.js';
import { startReplayServer } from '../helpers/replay-server.js';

const BASE: Omit<UpstreamOptions, 'urls'> = {
  pingIntervalMs: 100,
  stallTimeoutMs: 1000,
  backoffInitialMs: 10,
  backoffMaxMs: 40,
  healthyResetMs: 60_000,
  maxFrameBytes: 1 << 20,
  connectTimeoutMs: 3000,
};

interface Line {
  level: string;
  msg: string;
  failure?: string;
}

/** A pool on `url` logging at debug into `lines`; `until` waits for a condition, re-checked on every line and event. */
function watchPool(t: Test, url: string, over: Partial<UpstreamOptions> = {}) {
  const lines: Line[] = [];
  const events: UpstreamEvent[] = [];
  let wakers: (() => void)[] = [];
  const wake = (): void => {
    const w = wakers;
    wakers = [];
    for (const f of w) f();
  };
  const log = createLogger({
    level: 'debug',
    write: (l) => {
      lines.push(JSON.parse(l) as Line);
      wake();
    },
  });
  const pool = new UpstreamPool({ ...BASE, ...over, urls: [url] }, { onFrame: wake, onEvent: (e) => (events.push(e), wake()) }, log);
  t.teardown(() => pool.stop());
  const failures = (): Extract<UpstreamEvent, { kind: 'disconnected' }>[] =>
    events.filter((e): e is Extract<UpstreamEvent, { kind: 'disconnected' }> => e.kind === 'disconnected');
  return {
    pool,
    lines,
    events,
    failures,
    warns: () => lines.filter((l) => l.level === 'warn'),
    async until<T>(what: string, fn: () => T | undefined | false, timeoutMs = 20_000): Promise<T> {
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
  };
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

/** An HTTP server answering every request, the WebSocket upgrade included, with `status`. */
async function httpStatusServer(t: Test, status: number): Promise<number> {
  const srv = http.createServer((_req, res) => {
    res.writeHead(status, { connection: 'close' });
    res.end('no');
  });
  srv.on('upgrade', (_req, socket: net.Socket) => {
    socket.on('error', () => {});
    socket.end(`HTTP/1.1 ${status} Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => (srv.closeAllConnections(), srv.close(() => resolve()))));
  const addr = srv.address();
  if (addr === null || typeof addr === 'string') throw new Error('no port');
  return addr.port;
}

/** The pool fails at least `n` times in a row; exactly one warn line was logged, and it is the first failure's. */
async function expectOneWarn(t: Test, w: ReturnType<typeof watchPool>, n: number, wording: RegExp, failure: string): Promise<void> {
  const fails = await w.until(`${n} failures`, () => (w.failures().length >= n ? w.failures() : undefined));
  const warns = w.warns();
  t.equal(warns.length, 1, `${fails.length} consecutive failures, exactly one warn line`);
  t.match(warns[0]?.msg, wording, `worded by what happened: ${warns[0]?.msg}`);
  t.equal(warns[0]?.failure, failure, 'the failure field names the cause');
  t.match(warns[0]?.msg, /reconnecting in \d+ ms \(attempt 1\)/, 'the warn line is the first failure');
  for (const e of fails) t.equal(e.failure, failure);
  const debugs = w.lines.filter((l) => l.level === 'debug' && wording.test(l.msg));
  t.ok(debugs.length >= n - 1, `the repeats went to debug (${debugs.length})`);
}

t.test('a failure episode: first failure says "first", repeats are quiet, one summary per interval, end reports it', async (t) => {
  const ep = new FailureEpisode(60_000);
  t.equal(ep.end(0), null, 'no episode, nothing to end');
  const steps = [0, 1000, 59_999, 60_000, 61_000, 119_999, 120_000].map((at) => ep.fail(1_000_000 + at, `r${at}`));
  t.same(steps, ['first', 'repeat', 'repeat', 'summary', 'repeat', 'repeat', 'summary']);
  t.equal(ep.failures, 7);
  t.equal(ep.lastReason, 'r120000');
  t.equal(ep.startedAtMs, 1_000_000);
  t.same(ep.end(1_130_000), { durationMs: 130_000, failures: 7 });
  t.equal(ep.active, false);
  t.equal(ep.fail(2_000_000, 'again'), 'first', 'a new failure after the end starts a new episode');
  t.same(ep.end(2_000_500), { durationMs: 500, failures: 1 });
  t.throws(() => new FailureEpisode(0), RangeError);
});

t.test('a refused port: one warn line naming the refusal, then debug; the upstream coming up gives the info line', async (t) => {
  const port = await freePort();
  const w = watchPool(t, `ws://127.0.0.1:${port}/`);
  w.pool.start();
  await expectOneWarn(t, w, 6, new RegExp(`connection refused by 127\\.0\\.0\\.1:${port}`), 'refused');
  t.notOk(w.lines.some((l) => /\(1006\)/.test(l.msg)), 'no "closed (1006)" wording for a connection that never opened');

  const server = await startReplayServer({ port });
  t.teardown(() => server.close());
  await server.waitForClients(1);
  t.equal(w.lines.filter((l) => l.msg.startsWith('upstream connected') && l.level === 'info').length, 0, 'open alone does not end the episode');
  server.send('first frame');
  const back = await w.until('the info line', () => w.lines.find((l) => l.msg.startsWith('upstream connected again')));
  t.equal(back.level, 'info');
  const m = /^upstream connected again after [\d.]+ s, (\d+) attempts$/.exec(back.msg);
  t.ok(m !== null, back.msg);
  t.ok(Number(m?.[1]) >= 6, `counts the failed attempts (${m?.[1]})`);
  t.equal(w.warns().length, 1, 'still one warn line in all');
});

t.test('an unresolvable host: "cannot resolve host", one warn line', async (t) => {
  // The resolver answers as getaddrinfo does for a name with no record (ENOTFOUND), here, without asking any DNS
  // server: tests send no traffic off this machine.
  const asked: string[] = [];
  const lookup: LookupFunction = (hostname, _options, callback) => {
    asked.push(hostname);
    const err = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', errno: -3008, syscall: 'getaddrinfo', hostname });
    process.nextTick(() => (callback as (e: NodeJS.ErrnoException) => void)(err));
  };
  const w = watchPool(t, 'ws://flashblocks-upstream.invalid:8545/', { lookup });
  w.pool.start();
  await expectOneWarn(t, w, 3, /cannot resolve host flashblocks-upstream\.invalid \(ENOTFOUND\)/, 'dns');
  t.ok(asked.length >= 3 && asked.every((h) => h === 'flashblocks-upstream.invalid'), `the resolver was asked for the host (${asked.length} times)`);
  t.notOk(w.lines.some((l) => /closed/.test(l.msg)), 'nothing says "closed": no connection ever opened');
});

t.test('an upgrade answered with HTTP 403: "upgrade refused: HTTP 403", one warn line', async (t) => {
  const port = await httpStatusServer(t, 403);
  const w = watchPool(t, `ws://127.0.0.1:${port}/`);
  w.pool.start();
  await expectOneWarn(t, w, 4, /upgrade refused: HTTP 403/, 'http_status');
});

t.test('a TLS handshake against a plain HTTP port: "TLS error", one warn line', async (t) => {
  const port = await httpStatusServer(t, 403);
  const w = watchPool(t, `wss://127.0.0.1:${port}/`);
  w.pool.start();
  await expectOneWarn(t, w, 3, /TLS error: /, 'tls');
});

t.test('a server that accepts then closes with 1011: "closed with code 1011 after N s", one warn; frames end it', async (t) => {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
  t.teardown(() => new Promise<void>((resolve) => (wss.clients.forEach((c) => c.terminate()), wss.close(() => resolve()))));
  let healthy = false;
  wss.on('connection', (ws) => {
    ws.on('error', () => {});
    if (healthy) ws.send('a frame');
    else ws.close(1011, 'overloaded');
  });
  const addr = wss.address();
  if (addr === null || typeof addr === 'string') throw new Error('no port');
  const w = watchPool(t, `ws://127.0.0.1:${addr.port}/`);
  w.pool.start();
  await expectOneWarn(t, w, 5, /closed with code 1011 \("overloaded"\) after [\d.]+ s/, 'closed');
  t.equal(w.lines.filter((l) => l.msg === 'upstream connected' && l.level === 'info').length, 1, 'only the very first open is at info');

  healthy = true;
  const back = await w.until('the info line', () => w.lines.find((l) => l.msg.startsWith('upstream connected again')));
  t.match(back.msg, /^upstream connected again after [\d.]+ s, \d+ attempts$/);
  t.equal(w.warns().length, 1);

  // The next drop of a healthy connection is a new episode: one more warn line.
  healthy = false;
  for (const c of wss.clients) c.close(1011, 'overloaded');
  await w.until('a second warn', () => w.warns().length === 2);
  t.match(w.warns()[1]?.msg, /closed with code 1011 \("overloaded"\) after [\d.]+ s/);
});

t.test('a failure that lasts: a summary line per interval (info) with attempts, since when and the last reason', async (t) => {
  const port = await freePort();
  const w = watchPool(t, `ws://127.0.0.1:${port}/`, { failureSummaryMs: 150 });
  w.pool.start();
  const sums = await w.until('two summaries', () => {
    const s = w.lines.filter((l) => l.msg.startsWith('upstream still failing'));
    return s.length >= 2 ? s : undefined;
  });
  for (const s of sums) {
    t.equal(s.level, 'info');
    t.match(s.msg, /^upstream still failing: \d+ attempts since \d{4}-\d\d-\d\dT[\d:.]+Z \([\d.]+ s\); last: connection refused by /);
  }
  t.equal(w.warns().length, 1, 'summaries are not warn lines');
});

t.test('settled at the cap (a retired chain): the episode is logged at debug only', async (t) => {
  const port = await freePort();
  const w = watchPool(t, `ws://127.0.0.1:${port}/`, { backoffMaxMs: 40, failureSummaryMs: 50 });
  w.pool.settleAtCap(true);
  w.pool.start();
  await w.until('4 failures', () => w.failures().length >= 4);
  t.equal(w.lines.filter((l) => l.level !== 'debug').length, 0, 'nothing above debug while settled');
  t.ok(w.lines.some((l) => /connection refused/.test(l.msg)), 'but the wording is there at debug');
});
