// Baseline for bench/rpc.ts only: the floor of forwarding on this machine — a uWS HTTP server that writes each request
// body to the node over one kept-alive node:net socket and answers with the node's body. No JSON, no method check,
// no limits, no timeout, one call at a time (the bench's sequential client): the extra loopback hop and nothing else.
// Not used by the daemon.
import net from 'node:net';
import { loadUws } from '../../src/binaries.js';

/** A started bare proxy: its URL and how it stops. */
export interface BareProxy {
  url: string;
  close(): void;
}

/** Starts the proxy in front of `nodeUrl` (http://host:port). */
export async function startBareProxy(nodeUrl: string): Promise<BareProxy> {
  const node = new URL(nodeUrl);
  const socket = net.connect(Number(node.port), node.hostname);
  socket.setNoDelay(true);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));

  // The answer in progress: bytes so far, and where it goes once its Content-Length is in.
  let got: Buffer | null = null;
  let answer: ((body: Buffer) => void) | null = null;
  socket.on('data', (d: Buffer) => {
    got = got === null ? d : Buffer.concat([got, d]);
    const headEnd = got.indexOf('\r\n\r\n');
    if (headEnd === -1) return;
    const length = Number(/content-length: *(\d+)/i.exec(got.toString('latin1', 0, headEnd))?.[1] ?? 0);
    if (got.length < headEnd + 4 + length) return;
    const body = got.subarray(headEnd + 4, headEnd + 4 + length);
    got = null;
    const to = answer;
    answer = null;
    to?.(body);
  });

  const uws = loadUws();
  const app = uws.App();
  app.post('/*', (res) => {
    let aborted = false;
    res.onAborted(() => void (aborted = true));
    const chunks: Buffer[] = [];
    res.onData((chunk, last) => {
      chunks.push(Buffer.from(chunk));
      if (!last) return;
      const body = Buffer.concat(chunks);
      answer = (b) => {
        if (!aborted) res.cork(() => res.writeHeader('content-type', 'application/json').end(b));
      };
      const head = `POST / HTTP/1.1\r\nhost: ${node.host}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`;
      socket.write(Buffer.concat([Buffer.from(head, 'latin1'), body]));
    });
  });
  const listen = await new Promise<unknown>((resolve) => app.listen('127.0.0.1', 0, resolve));
  if (listen === false) throw new Error('bare proxy: cannot listen');
  return {
    url: `http://127.0.0.1:${uws.us_socket_local_port(listen as never)}/`,
    close() {
      uws.us_listen_socket_close(listen as never);
      socket.destroy();
    },
  };
}
