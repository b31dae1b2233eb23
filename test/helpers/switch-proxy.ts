// Test helper: a loopback TCP port whose far end can be switched — to a node or stream of one devnet, to another
// devnet's (a node reset behind the same URL), or to nothing (down: the port refuses connections, as a stopped node's
// does). Switching or going down cuts the connections open through it. Bytes pass unchanged (HTTP, WebSocket).
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface SwitchProxy {
  /** The port, the same whatever the far end. */
  readonly port: number;
  /** Connections go to `target` (`http://host:port/…` or `ws://…`) from now on; open ones are cut. */
  point(target: string): Promise<void>;
  /** Refuses connections (the port is closed) and cuts the open ones, until point(). */
  down(): Promise<void>;
  close(): Promise<void>;
}

function hostPort(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port) };
}

/** Starts the proxy on a free port, pointing at `target`, or down (null: the port is reserved, then closed). */
export async function startSwitchProxy(target: string | null): Promise<SwitchProxy> {
  let far = target === null ? null : hostPort(target);
  const open = new Set<Socket>();
  const cut = (): void => {
    for (const s of open) s.destroy();
    open.clear();
  };
  const serve = (): Server =>
    createServer((client) => {
      if (far === null) return client.destroy();
      const upstream = connect(far.port, far.host);
      open.add(client);
      open.add(upstream);
      const end = (): void => {
        client.destroy();
        upstream.destroy();
        open.delete(client);
        open.delete(upstream);
      };
      client.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
      client.pipe(upstream);
      upstream.pipe(client);
    });
  const listen = (server: Server, port: number): Promise<number> =>
    new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve((server.address() as { port: number }).port));
    });
  const shut = (server: Server): Promise<void> => new Promise((resolve) => server.close(() => resolve()));
  let server: Server | null = serve();
  const port = await listen(server, 0);
  if (far === null) {
    await shut(server);
    server = null;
  }
  const proxy: SwitchProxy = {
    port,
    async point(to) {
      far = hostPort(to);
      cut();
      if (server === null) {
        server = serve();
        await listen(server, port);
      }
    },
    async down() {
      far = null;
      cut();
      if (server !== null) {
        const s = server;
        server = null;
        await shut(s);
      }
    },
    async close() {
      await proxy.down();
    },
  };
  return proxy;
}
