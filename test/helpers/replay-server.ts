// Test helper: a real `ws` WebSocketServer on 127.0.0.1 standing in for a flashblocks upstream.
// Owns only socket plumbing (send, go silent, drop, wait); knows nothing about the flashblock format.
import { WebSocketServer, WebSocket } from 'ws';

/** A running fake upstream. All methods are safe to call at any time, including after `close()`. */
export interface ReplayServer {
  /** `ws://127.0.0.1:<port>/` */
  url: string;
  port: number;
  /** Connections currently open. */
  clients(): number;
  /**
   * Sends one frame to every connected client. Strings go as text and Buffers as binary unless `opts.binary` says
   * otherwise. Dropped while silenced.
   */
  send(frame: string | Buffer, opts?: { binary?: boolean }): void;
  /** When on: pings go unanswered and `send` does nothing, so clients see a silent (stalled) upstream. */
  silence(on: boolean): void;
  /** Closes every connection with `code` (default 1011), or destroys the TCP sockets without a close frame when 0. */
  dropClients(code?: number): void;
  /** Resolves once at least `n` clients are connected; rejects after `timeoutMs` (default 5000). */
  waitForClients(n: number, timeoutMs?: number): Promise<void>;
  /** Destroys all connections and stops listening. */
  close(): Promise<void>;
}

/** Starts a fake upstream on 127.0.0.1 (port 0 = any free port unless `opts.port` is given). */
export async function startReplayServer(opts: { port?: number } = {}): Promise<ReplayServer> {
  // autoPong off: pongs are sent by hand below so that silence() can withhold them.
  const wss = new WebSocketServer({ host: '127.0.0.1', port: opts.port ?? 0, autoPong: false, perMessageDeflate: false });
  await new Promise<void>((resolve, reject) => {
    wss.once('listening', resolve);
    wss.once('error', reject);
  });
  wss.on('error', () => {});
  let silent = false;
  let waiters: { n: number; resolve: () => void }[] = [];
  const openClients = (): number => {
    let n = 0;
    for (const c of wss.clients) if (c.readyState === WebSocket.OPEN) n++;
    return n;
  };

  wss.on('connection', (ws) => {
    ws.on('error', () => {});
    ws.on('ping', (data) => {
      if (!silent) ws.pong(data);
    });
    const n = openClients();
    waiters = waiters.filter((w) => (w.n <= n ? (w.resolve(), false) : true));
  });

  const address = wss.address();
  if (address === null || typeof address === 'string') throw new Error('replay server: no TCP address');
  const port = address.port;

  return {
    url: `ws://127.0.0.1:${port}/`,
    port,
    clients: openClients,
    send(frame, o) {
      if (silent) return;
      const binary = o?.binary ?? typeof frame !== 'string';
      for (const c of wss.clients) if (c.readyState === WebSocket.OPEN) c.send(frame, { binary });
    },
    silence(on) {
      silent = on;
    },
    dropClients(code = 1011) {
      for (const c of wss.clients) {
        if (code === 0) c.terminate();
        else c.close(code, 'replay server dropped the connection');
      }
    },
    waitForClients(n, timeoutMs = 5000) {
      if (openClients() >= n) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters = waiters.filter((w) => w !== waiter);
          reject(new Error(`replay server: ${openClients()} of ${n} clients after ${timeoutMs} ms`));
        }, timeoutMs);
        const waiter = {
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        };
        waiters.push(waiter);
      });
    },
    close() {
      for (const c of wss.clients) c.terminate();
      return new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
