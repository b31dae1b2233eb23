// The node client's HTTP/1.1 response parser, table-driven: every framing (Content-Length, chunked with extensions
// and trailers, close-delimited, no body), 1xx answers skipped, reuse decisions, every bound and malformed input —
// each fed whole, byte by byte, and split in two at every offset.
import t from 'tap';
import { MAX_HEAD_BYTES, Parse, ResponseParser } from '../../src/node/response.js';

interface Outcome {
  verdict: 'done' | 'more' | 'error';
  status?: number;
  body?: string;
  keepAlive?: boolean;
  hintMs?: number;
  error?: string;
  tooLarge?: boolean;
}

type Want = Partial<Omit<Outcome, 'error'>> & { error?: RegExp };

/** Feeds `pieces` in order (then end() when `closed`) and reports what the parser ended with. */
function run(pieces: Buffer[], closed: boolean, max: number): Outcome {
  const p = new ResponseParser(max);
  let r: Parse = Parse.More;
  for (const piece of pieces) {
    r = p.feed(piece);
    if (r !== Parse.More) break;
  }
  if (r === Parse.More && closed) r = p.end();
  if (r === Parse.Error) return { verdict: 'error', error: p.error, tooLarge: p.tooLarge };
  if (r === Parse.More) return { verdict: 'more' };
  return { verdict: 'done', status: p.status, body: p.body().toString('latin1'), keepAlive: p.keepAlive, hintMs: p.keepAliveHintMs };
}

/** The ways one byte string can arrive: whole, byte by byte, and in two pieces split at every offset. */
function splits(raw: Buffer): Buffer[][] {
  const out: Buffer[][] = [[raw], [...raw].map((b) => Buffer.from([b]))];
  for (let i = 1; i < raw.length; i++) out.push([raw.subarray(0, i), raw.subarray(i)]);
  return out;
}

const JSON_BODY = '{"jsonrpc":"2.0","id":1,"result":"0x7a69"}';

const CASES: Array<{ name: string; raw: string; closed?: boolean; max?: number; whole?: boolean; want: Want }> = [
  {
    name: 'Content-Length body, kept alive, keep-alive hint read',
    raw: `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: ${JSON_BODY.length}\r\nKeep-Alive: timeout=5\r\n\r\n${JSON_BODY}`,
    want: { verdict: 'done', status: 200, body: JSON_BODY, keepAlive: true, hintMs: 5000 },
  },
  {
    name: 'chunked body with a chunk extension and trailers',
    raw: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n, world!!!\r\n0\r\nX-Trailer: 1\r\n\r\n',
    want: { verdict: 'done', status: 200, body: 'hello, world!!!', keepAlive: true },
  },
  {
    name: 'chunked body with bare LF line ends',
    raw: 'HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n3\nabc\n0\n\n',
    want: { verdict: 'done', body: 'abc', keepAlive: true },
  },
  {
    name: 'no length and no chunking: the body runs until the node closes',
    raw: 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"a":1}',
    closed: true,
    want: { verdict: 'done', body: '{"a":1}', keepAlive: false },
  },
  {
    name: 'close-delimited body not finished while the socket is open',
    raw: 'HTTP/1.1 200 OK\r\n\r\n{"a":1}',
    want: { verdict: 'more' },
  },
  {
    name: 'Connection: close is not reused',
    raw: 'HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 2\r\n\r\n{}',
    want: { verdict: 'done', body: '{}', keepAlive: false },
  },
  {
    name: 'HTTP/1.0 is reused only with Connection: keep-alive',
    raw: 'HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}',
    want: { verdict: 'done', keepAlive: false },
  },
  {
    name: 'HTTP/1.0 with Connection: keep-alive',
    raw: 'HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}',
    want: { verdict: 'done', keepAlive: true },
  },
  {
    name: '100 Continue and 103 Early Hints are skipped',
    raw: 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]',
    want: { verdict: 'done', status: 200, body: '[]' },
  },
  {
    name: '204 has no body',
    raw: 'HTTP/1.1 204 No Content\r\n\r\n',
    want: { verdict: 'done', status: 204, body: '', keepAlive: true },
  },
  {
    name: 'a non-2xx status with its body',
    raw: 'HTTP/1.1 502 Bad Gateway\r\nContent-Length: 11\r\n\r\nbad gateway',
    want: { verdict: 'done', status: 502, body: 'bad gateway' },
  },
  {
    name: 'Content-Length: 0',
    raw: 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n',
    want: { verdict: 'done', body: '', keepAlive: true },
  },
  {
    name: 'Transfer-Encoding with Content-Length: chunked wins, not reused',
    raw: 'HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
    want: { verdict: 'done', body: '{}', keepAlive: false },
  },
  {
    name: 'bytes after the answer in the same read: answered, not reused',
    whole: true,
    raw: 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}garbage',
    want: { verdict: 'done', body: '{}', keepAlive: false },
  },
  {
    name: 'header names in any case, spaces and tabs around the length, lines without a colon and look-alike names ignored',
    raw: `HTTP/1.1 200 OK\r\nCONTENT-length: \t${JSON_BODY.length} \r\nno colon here\r\ncontent-lengtx: 3\r\nKEEP-ALIVE: Timeout=2\r\nconnectioN: Close\r\n\r\n${JSON_BODY}`,
    want: { verdict: 'done', status: 200, body: JSON_BODY, keepAlive: false, hintMs: 2000 },
  },
  { name: 'a status line only', raw: 'HTTP/1.1 204 No Content\r\n\r\n', want: { verdict: 'done', status: 204, body: '', keepAlive: true } },
  { name: 'a lower-case protocol name', raw: 'http/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', want: { verdict: 'error', error: /malformed HTTP status line/ } },
  { name: 'a signed Content-Length', raw: 'HTTP/1.1 200 OK\r\nContent-Length: +42\r\n\r\n', want: { verdict: 'error', error: /Content-Length/ } },
  { name: 'an empty Content-Length', raw: 'HTTP/1.1 200 OK\r\nContent-Length: \t \r\n\r\n', want: { verdict: 'error', error: /Content-Length/ } },
  { name: 'a Content-Length of 16 digits', raw: 'HTTP/1.1 200 OK\r\nContent-Length: 1000000000000000\r\n\r\n', want: { verdict: 'error', error: /Content-Length/ } },
  { name: 'not HTTP', raw: '<html>hello</html>\r\n\r\n', want: { verdict: 'error', error: /malformed HTTP status line/ } },
  { name: 'a bad status code', raw: 'HTTP/1.1 2x0 OK\r\n\r\n', want: { verdict: 'error', error: /malformed HTTP status line/ } },
  { name: '101 was never asked for', raw: 'HTTP/1.1 101 Switching Protocols\r\n\r\n', want: { verdict: 'error', error: /101/ } },
  { name: 'a bad Content-Length', raw: 'HTTP/1.1 200 OK\r\nContent-Length: 1e3\r\n\r\n', want: { verdict: 'error', error: /Content-Length/ } },
  {
    name: 'two different Content-Lengths',
    raw: 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}',
    want: { verdict: 'error', error: /Content-Length/ },
  },
  { name: 'a bad chunk size', raw: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', want: { verdict: 'error', error: /bad chunk size/ } },
  {
    name: 'a chunk not followed by CRLF',
    raw: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}xx0\r\n\r\n',
    want: { verdict: 'error', error: /no CRLF after a chunk/ },
  },
  {
    name: 'cut short inside a Content-Length body',
    raw: 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}',
    closed: true,
    want: { verdict: 'error', error: /closed before the answer was complete/ },
  },
  {
    name: 'cut short inside a chunked body',
    raw: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel',
    closed: true,
    want: { verdict: 'error', error: /closed before the answer was complete/ },
  },
  { name: 'cut short inside the head', raw: 'HTTP/1.1 200 OK\r\nContent-Le', closed: true, want: { verdict: 'error', error: /closed before/ } },
  {
    name: 'a Content-Length over the bound is refused before the body',
    raw: 'HTTP/1.1 200 OK\r\nContent-Length: 17\r\n\r\n',
    max: 16,
    want: { verdict: 'error', error: /exceeds 16 bytes/, tooLarge: true },
  },
  {
    name: 'a chunked body over the bound',
    raw: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n1\r\nx\r\n0\r\n\r\n',
    max: 16,
    want: { verdict: 'error', error: /exceeds 16 bytes/, tooLarge: true },
  },
  {
    name: 'a chunked body exactly at the bound',
    raw: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n01234567\r\n8\r\n89abcdef\r\n0\r\n\r\n',
    max: 16,
    want: { verdict: 'done', body: '0123456789abcdef' },
  },
  {
    name: 'a close-delimited body over the bound',
    raw: 'HTTP/1.1 200 OK\r\n\r\n0123456789abcdefg',
    max: 16,
    want: { verdict: 'error', error: /exceeds 16 bytes/, tooLarge: true },
  },
];

t.test('framings, reuse decisions and malformed answers, however the bytes are split', async (t) => {
  for (const c of CASES) {
    const raw = Buffer.from(c.raw, 'latin1');
    const seen = new Set<string>();
    for (const pieces of c.whole === true ? [[raw]] : splits(raw)) {
      const got = run(pieces, c.closed === true, c.max ?? 1024);
      const ok = Object.entries(c.want).every(([k, v]) => {
        const g = got[k as keyof Outcome];
        return v instanceof RegExp ? typeof g === 'string' && v.test(g) : g === v;
      });
      if (!ok) seen.add(JSON.stringify({ pieces: pieces.map((p) => p.length), got }));
    }
    t.same([...seen].slice(0, 3), [], c.name);
  }
});

t.test('a head larger than the bound is refused without waiting for its end', async (t) => {
  const p = new ResponseParser(1024);
  const filler = Buffer.from('HTTP/1.1 200 OK\r\n' + 'X-Filler: ' + 'a'.repeat(MAX_HEAD_BYTES), 'latin1');
  t.equal(p.feed(filler.subarray(0, 1000)), Parse.More);
  t.equal(p.feed(filler.subarray(1000)), Parse.Error);
  t.match(p.error, /response head exceeds/);
  t.equal(p.tooLarge, false);
});

t.test('an endless chunk-size line is refused', async (t) => {
  const p = new ResponseParser(1024);
  t.equal(p.feed(Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;' + 'x'.repeat(2000))), Parse.Error);
  t.match(p.error, /chunk-size line too long/);
});

t.test('reset: the same parser reads the next answer on a kept-alive connection', async (t) => {
  const p = new ResponseParser(1024);
  t.equal(p.feed(Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n')), Parse.Done);
  t.equal(p.received > 0, true);
  p.reset();
  t.equal(p.received, 0, 'nothing received yet for the next request');
  t.equal(p.started, false);
  t.equal(p.feed(Buffer.from('HTTP/1.1 500 Internal Server Error\r\nContent-Length: 2\r\n\r\n[]')), Parse.Done);
  t.equal(p.status, 500);
  t.equal(p.body().toString(), '[]');
});
