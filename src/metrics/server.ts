// The operator HTTP server on its own port: GET /metrics (Prometheus text), /healthz (liveness), /readyz (readiness).
// It only reads: metrics come from the registry, readiness from the caller's health() — it never decides either.

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../log.js';
import type { Metrics } from './metrics.js';

/** One named readiness check, e.g. `upstream`, `pending`, `node`. */
export interface HealthCheck {
  ok: boolean;
  /** What was seen, in words an operator can act on: "2 of 2 upstreams connected", "last flashblock 3.1 s ago". */
  detail: string;
}

/** What /readyz reports; built by the caller (main wires it from ingest, state and the node client). */
export interface HealthReport {
  /** True when pending answers can be served: /readyz answers 200, else 503. */
  ready: boolean;
  /** How many upstream WebSockets are open right now. */
  upstreamConnected: number;
  /** Milliseconds since the newest flashblock was applied; null before the first one. */
  pendingAgeMs: number | null;
  /** Whether the last call to the node succeeded. */
  nodeReachable: boolean;
  checks: Record<string, HealthCheck>;
  /** Why pending is not served, when flashblocks are gone (a retired chain, a long-absent upstream): one line. */
  reason?: string;
}

export interface MetricsServerOptions {
  host: string;
  /** 0 picks a free port; the bound one is returned. */
  port: number;
  metrics: Metrics;
  health: () => HealthReport | Promise<HealthReport>;
  /** A health() that takes longer than this answers 503 (default 2000 ms). */
  healthTimeoutMs?: number;
}

export interface MetricsServer {
  readonly port: number;
  /** Stops listening and closes open connections. */
  close(): Promise<void>;
}

const JSON_TYPE = 'application/json; charset=utf-8';
const HEALTHZ_BODY = '{"status":"ok"}';

function send(res: ServerResponse, status: number, type: string, body: string, head: boolean): void {
  res.writeHead(status, {
    'content-type': type,
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
  });
  res.end(head ? undefined : body);
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`health check took longer than ${ms} ms`)), ms);
    p.then(
      (v) => { clearTimeout(timer); resolve(v); },
      (e: unknown) => { clearTimeout(timer); reject(e instanceof Error ? e : new Error(String(e))); },
    );
  });
}

/**
 * Starts the metrics/health server. Resolves once listening (with the bound port); rejects with a message naming
 * the address when it cannot listen (port taken, bad host), so start-up fails loudly.
 */
export function startMetricsServer(opts: MetricsServerOptions, log: Logger): Promise<MetricsServer> {
  const { registry } = opts.metrics;
  const healthTimeoutMs = opts.healthTimeoutMs ?? 2000;

  async function readyz(res: ServerResponse, head: boolean): Promise<void> {
    let report: HealthReport;
    try {
      report = await withTimeout(Promise.resolve().then(opts.health), healthTimeoutMs);
    } catch (err) {
      const msg = err instanceof Error ? err.message : String(err);
      log.limited('warn', 'readyz-failed', 10_000, 'readiness check failed; answering 503', { err: msg });
      send(res, 503, JSON_TYPE, JSON.stringify({ ready: false, error: msg }), head);
      return;
    }
    send(res, report.ready ? 200 : 503, JSON_TYPE, JSON.stringify(report), head);
  }

  async function scrape(res: ServerResponse, head: boolean): Promise<void> {
    let body: string;
    try {
      body = await registry.metrics();
    } catch (err) {
      const msg = err instanceof Error ? err.message : String(err);
      log.limited('error', 'scrape-failed', 10_000, 'collecting metrics failed; answering 500', { err: msg });
      send(res, 500, 'text/plain; charset=utf-8', 'collecting metrics failed\n', head);
      return;
    }
    send(res, 200, registry.contentType, body, head);
  }

  function handle(req: IncomingMessage, res: ServerResponse): void {
    req.resume(); // a body on these routes is ignored, but must be drained for keep-alive
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    if (path !== '/metrics' && path !== '/healthz' && path !== '/readyz') {
      send(res, 404, JSON_TYPE, '{"error":"not found; try /metrics, /healthz or /readyz"}', req.method === 'HEAD');
      return;
    }
    // HEAD is GET without the body (RFC 9110 §9.3.2); every other method is refused.
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      send(res, 405, JSON_TYPE, '{"error":"method not allowed; use GET"}', false);
      return;
    }
    const head = req.method === 'HEAD';
    if (path === '/healthz') send(res, 200, JSON_TYPE, HEALTHZ_BODY, head);
    else if (path === '/readyz') void readyz(res, head);
    else void scrape(res, head);
  }

  const server = createServer({ requestTimeout: 10_000, headersTimeout: 5_000 }, handle);
  server.keepAliveTimeout = 5_000;
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
    else socket.destroy();
  });

  return new Promise<MetricsServer>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      reject(new Error(
        `metrics listener cannot listen on ${opts.host}:${opts.port} (${err.code ?? err.message}); ` +
        'free the port or choose another --metrics-port', { cause: err }));
    };
    server.once('error', onError);
    server.listen(opts.port, opts.host, () => {
      server.off('error', onError);
      server.on('error', (err) => log.error('metrics server error', { err: err.message }));
      const port = (server.address() as AddressInfo).port;
      log.info('metrics server listening', { host: opts.host, port, paths: ['/metrics', '/healthz', '/readyz'] });
      let closing: Promise<void> | undefined;
      resolve({
        port,
        close() {
          closing ??= new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          });
          return closing;
        },
      });
    });
  });
}
