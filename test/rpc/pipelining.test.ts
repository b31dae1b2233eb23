// HTTP/1.1 pipelining on one raw TCP socket, over a real anvil: requests answered from memory (pending receipts)
// come back complete and in order; a request pipelined behind a forwarded one (answered after an await) makes uWS
// close the connection at once, unanswered — uWebSockets refuses asynchronous pipelining by design (HttpContext.h:
// "Important for denying async pipelining"), before any handler of ours runs. The second test pins that (a close,
// never a hang); it fails the day the transport answers such requests, and then should assert all N answers.
import t from 'tap';
import net from 'node:net';
import { feed } from '../helpers/ingest.js';
import { unichainMessages, unichainRpcBlock } from '../helpers/fixtures.js';
import { startRpcOverAnvil } from '../helpers/rpc-harness.js';

const { h } = await startRpcOverAnvil(t);
for (const m of unichainMessages()) feed(h.pipeline, m);
const txHash = (unichainRpcBlock() as { transactions: { hash: string }[] }).transactions[1]!.hash;

/** One answer read off the socket. */
interface Answer {
  status: number;
  body: { id: unknown; result?: unknown; error?: unknown };
}

/**
 * Writes every body as a POST in one write on a fresh socket; reads answers (Content-Length framed) until there are
 * as many as bodies or the server closes.
 */
function pipeline(bodies: string[]): Promise<{ answers: Answer[]; closed: boolean }> {
  return new Promise((resolve) => {
    const s = net.connect(h.port, '127.0.0.1');
    const answers: Answer[] = [];
    let buf = Buffer.alloc(0);
    const finish = (closed: boolean): void => {
      s.destroy();
      resolve({ answers, closed });
    };
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const headEnd = buf.indexOf('\r\n\r\n');
        if (headEnd === -1) return;
        const head = buf.subarray(0, headEnd).toString('latin1');
        const len = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buf.length < headEnd + 4 + len) return;
        const body = buf.subarray(headEnd + 4, headEnd + 4 + len).toString('utf8');
        buf = buf.subarray(headEnd + 4 + len);
        answers.push({ status: Number(head.slice(9, 12)), body: JSON.parse(body) as Answer['body'] });
        if (answers.length === bodies.length) return finish(false);
      }
    });
    s.on('error', () => {});
    s.on('close', () => finish(true));
    s.write(bodies.map((b) => `POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`).join(''));
  });
}

const N = 16;
const request = (id: number, method: string, params: unknown[]): string => JSON.stringify({ jsonrpc: '2.0', id, method, params });

t.test('pipelined requests answered from memory: all N answers, in order, each for its id', async (tt) => {
  const { answers, closed } = await pipeline(Array.from({ length: N }, (_, i) => request(i, 'eth_getTransactionReceipt', [txHash])));
  tt.equal(closed, false, 'the connection stays open');
  tt.same(answers.map((a) => a.body.id), Array.from({ length: N }, (_, i) => i));
  for (const a of answers) {
    tt.equal(a.status, 200);
    tt.equal((a.body.result as { transactionHash?: string } | undefined)?.transactionHash, txHash);
  }
});

// The limitation as it stands: not a hang, a close the client sees at once, so it can retry without pipelining.
t.test('a request pipelined behind a forwarded one: uWS closes the connection, nothing answered', async (tt) => {
  const { answers, closed } = await pipeline([request(0, 'eth_chainId', []), request(1, 'eth_chainId', [])]);
  tt.equal(closed, true);
  tt.equal(answers.length, 0);
  tt.same(await h.call('eth_chainId'), { jsonrpc: '2.0', id: 1, result: '0x7a69' }, 'the server keeps serving');
});

