// An HTTP/1.1 response parser for the node client (./http1.ts): bytes in, one response out (status, body, whether
// the connection may be reused). Content-Length, chunked and close-delimited bodies, 1xx interim answers skipped,
// every buffer bounded. Pure: no sockets, no timers; never throws (a malformed answer is a Parse.Error verdict).

/** What feeding bytes produced: More (not complete yet), Done (`status`, `body()`, `keepAlive`), or Error (`error`
 * says why, `tooLarge` whether it is the size bound; the connection is unusable). */
export const Parse = { More: 0, Done: 1, Error: 2 } as const;
export type Parse = (typeof Parse)[keyof typeof Parse];

const Phase = { Head: 0, Length: 1, ChunkSize: 2, ChunkData: 3, ChunkEnd: 4, Trailers: 5, UntilClose: 6, Done: 7 } as const;
type Phase = (typeof Phase)[keyof typeof Phase];

const CR = 0x0d;
const LF = 0x0a;
/** Largest status line + headers (and trailers) accepted. */
export const MAX_HEAD_BYTES = 64 * 1024;
/** Longest chunk-size line (hex size plus chunk extensions). */
const MAX_CHUNK_LINE_BYTES = 1024;
const HEAD_END = Buffer.from('\r\n\r\n', 'latin1');

/**
 * One response at a time: `reset()`, then `feed()` the socket's bytes until it says Done or Error; `end()` when the
 * peer closed. Bodies that arrive in one read are returned as a view of it (no copy).
 */
export class ResponseParser {
  status = 0;
  /** Whether the connection may carry another request after this response. */
  keepAlive = true;
  /** The server's `Keep-Alive: timeout=N` hint in ms (0 = none). */
  keepAliveHintMs = 0;
  /** Bytes of the response seen so far (0 = the peer has sent nothing for this request). */
  received = 0;
  error = '';
  /** True when the Error is the body bound, not framing. */
  tooLarge = false;
  private phase: Phase = Phase.Head;
  /** Head bytes (or a partial chunk-size/trailer line) split across reads. */
  private partial: Buffer | null = null;
  private remaining = 0;
  private chunks: Buffer[] = [];
  private bodyBytes = 0;

  constructor(
    /** Largest body accepted; a larger one is an Error ("exceeds"). */
    private readonly maxBodyBytes: number,
  ) {}

  /** Ready for the next response on the same connection. */
  reset(): void {
    this.status = 0;
    this.keepAlive = true;
    this.keepAliveHintMs = 0;
    this.received = 0;
    this.error = '';
    this.tooLarge = false;
    this.phase = Phase.Head;
    this.partial = null;
    this.remaining = 0;
    this.chunks = [];
    this.bodyBytes = 0;
  }

  /** True once a status line other than 1xx was read (a break after this is "mid-response"). */
  get started(): boolean {
    return this.status >= 200;
  }

  /** The complete body (after Done). */
  body(): Buffer {
    const c = this.chunks;
    return c.length === 1 ? (c[0] as Buffer) : c.length === 0 ? EMPTY : Buffer.concat(c, this.bodyBytes);
  }

  /** Consumes `data`. Bytes after a complete response make it Done with keepAlive false (no pipelining here). */
  feed(data: Buffer): Parse {
    this.received += data.length;
    let at = 0;
    while (at < data.length) {
      switch (this.phase) {
        case Phase.Head: {
          const r = this.head(data, at);
          if (r < 0) return this.phase === Phase.Head && this.error === '' ? Parse.More : Parse.Error;
          at = r;
          break;
        }
        case Phase.Length: {
          const n = Math.min(this.remaining, data.length - at);
          this.push(data, at, at + n);
          at += n;
          this.remaining -= n;
          if (this.remaining === 0) this.phase = Phase.Done;
          break;
        }
        case Phase.ChunkSize:
        case Phase.Trailers: {
          const r = this.line(data, at);
          if (r < 0) return this.error === '' ? Parse.More : Parse.Error;
          at = r;
          break;
        }
        case Phase.ChunkData: {
          const n = Math.min(this.remaining, data.length - at);
          if (this.bodyBytes + n > this.maxBodyBytes) return this.fail(`answer exceeds ${this.maxBodyBytes} bytes`, true);
          this.push(data, at, at + n);
          at += n;
          this.remaining -= n;
          if (this.remaining === 0) {
            this.phase = Phase.ChunkEnd;
            this.remaining = 2;
          }
          break;
        }
        case Phase.ChunkEnd: {
          const want = this.remaining === 2 ? CR : LF;
          const b = data[at] as number;
          at++;
          if (b === want) this.remaining--;
          else if (b === LF && this.remaining === 2) this.remaining = 0; // a bare LF is tolerated
          else return this.fail('malformed chunked body (no CRLF after a chunk)');
          if (this.remaining === 0) this.phase = Phase.ChunkSize;
          break;
        }
        case Phase.UntilClose: {
          if (this.bodyBytes + data.length - at > this.maxBodyBytes) return this.fail(`answer exceeds ${this.maxBodyBytes} bytes`, true);
          this.push(data, at, data.length);
          at = data.length;
          break;
        }
        case Phase.Done:
          // More bytes than the response: the server pipelined or sent garbage. Answer, then drop the connection.
          this.keepAlive = false;
          return Parse.Done;
      }
    }
    return this.phase === Phase.Done ? Parse.Done : Parse.More;
  }

  /** The peer closed: completes a close-delimited body; anything else in progress is cut short. */
  end(): Parse {
    if (this.phase === Phase.UntilClose) {
      this.phase = Phase.Done;
      this.keepAlive = false;
      return Parse.Done;
    }
    if (this.phase === Phase.Done) return Parse.Done;
    return this.fail('connection closed before the answer was complete');
  }

  private fail(message: string, tooLarge = false): Parse {
    this.error = message;
    this.tooLarge = tooLarge;
    this.phase = Phase.Done;
    this.keepAlive = false;
    return Parse.Error;
  }

  private push(data: Buffer, from: number, to: number): void {
    if (to <= from) return;
    this.chunks.push(from === 0 && to === data.length ? data : data.subarray(from, to));
    this.bodyBytes += to - from;
  }

  /** Looks for the end of the head from `at`; returns the offset after it, or -1 (more needed, or error set). */
  private head(data: Buffer, at: number): number {
    if (this.partial !== null) {
      // The head was split: search the joined bytes (bounded by MAX_HEAD_BYTES), from a few bytes back.
      const prev = this.partial;
      const buf = Buffer.concat([prev, data.subarray(at)]);
      const end = buf.indexOf(HEAD_END, Math.max(0, prev.length - 3));
      if (end === -1) return this.keepPartial(buf);
      this.partial = null;
      if (end > MAX_HEAD_BYTES) {
        this.fail(`response head exceeds ${MAX_HEAD_BYTES} bytes`);
        return -1;
      }
      if (!this.parseHead(buf.toString('latin1', 0, end))) return -1;
      // Offset in `data` just after the head.
      return at + (end + 4 - prev.length);
    }
    const end = data.indexOf(HEAD_END, at);
    if (end === -1) return this.keepPartial(data.subarray(at));
    if (end - at > MAX_HEAD_BYTES) {
      this.fail(`response head exceeds ${MAX_HEAD_BYTES} bytes`);
      return -1;
    }
    if (!this.parseHead(data.toString('latin1', at, end))) return -1;
    return end + 4;
  }

  private keepPartial(b: Buffer): number {
    if (b.length > MAX_HEAD_BYTES) {
      this.fail(`response head exceeds ${MAX_HEAD_BYTES} bytes`);
      return -1;
    }
    // A copy (at most MAX_HEAD_BYTES): the next read is joined to it.
    this.partial = Buffer.from(b);
    return -1;
  }

  /** Status line and headers; sets the body phase. False (with error set) when malformed. */
  private parseHead(head: string): boolean {
    // "HTTP/1.1 200 OK"
    if (head.length < 12 || !head.startsWith('HTTP/1.') || head.charCodeAt(8) !== 32) {
      this.fail('malformed HTTP status line');
      return false;
    }
    const http10 = head.charCodeAt(7) === 48; // HTTP/1.0
    const d0 = head.charCodeAt(9) - 48;
    const d1 = head.charCodeAt(10) - 48;
    const d2 = head.charCodeAt(11) - 48;
    const status = d0 * 100 + d1 * 10 + d2;
    if (d0 < 1 || d0 > 9 || d1 < 0 || d1 > 9 || d2 < 0 || d2 > 9 || (head.length > 12 && head.charCodeAt(12) !== 32 && head.charCodeAt(12) !== 13)) {
      this.fail('malformed HTTP status line');
      return false;
    }
    let length = -1;
    let chunked = false;
    let te = false;
    let close = http10;
    let i = head.indexOf('\r\n');
    while (i !== -1) {
      const start = i + 2;
      const next = head.indexOf('\r\n', start);
      const stop = next === -1 ? head.length : next;
      i = next;
      const colon = head.indexOf(':', start);
      if (colon === -1 || colon > stop) continue;
      const nameLength = colon - start;
      // Only four headers matter; compare names case-insensitively only when the length matches.
      if (nameLength === 14 && head.slice(start, colon).toLowerCase() === 'content-length') {
        const v = head.slice(colon + 1, stop).trim();
        const n = /^\d{1,15}$/.test(v) ? Number(v) : -1;
        if (n < 0 || (length !== -1 && n !== length)) {
          this.fail('malformed Content-Length');
          return false;
        }
        length = n;
      } else if (nameLength === 17 && head.slice(start, colon).toLowerCase() === 'transfer-encoding') {
        te = true;
        chunked = /(^|,)\s*chunked\s*$/i.test(head.slice(colon + 1, stop));
      } else if (nameLength === 10) {
        const name = head.slice(start, colon).toLowerCase();
        if (name === 'connection') {
          const v = head.slice(colon + 1, stop).toLowerCase();
          if (/(^|,)\s*close\s*(,|$)/.test(v)) close = true;
          else if (http10 && /(^|,)\s*keep-alive\s*(,|$)/.test(v)) close = false;
        } else if (name === 'keep-alive') {
          const m = /timeout\s*=\s*(\d{1,9})/i.exec(head.slice(colon + 1, stop));
          if (m !== null) this.keepAliveHintMs = Number(m[1]) * 1000;
        }
      }
    }
    if (status < 200) {
      // 1xx interim answer (100 Continue, 103 Early Hints): skip it, the real one follows. 101 is never asked for.
      if (status === 101) {
        this.fail('unexpected 101 Switching Protocols');
        return false;
      }
      this.keepAliveHintMs = 0;
      return true;
    }
    this.status = status;
    this.keepAlive = !close;
    if (status === 204 || status === 304) this.phase = Phase.Done;
    else if (te) {
      // Transfer-Encoding wins over Content-Length; such an answer is not reused (RFC 9112 6.3).
      if (length !== -1) this.keepAlive = false;
      if (chunked) this.phase = Phase.ChunkSize;
      else {
        this.phase = Phase.UntilClose;
        this.keepAlive = false;
      }
    } else if (length >= 0) {
      if (length > this.maxBodyBytes) {
        this.fail(`answer exceeds ${this.maxBodyBytes} bytes (Content-Length ${length})`, true);
        return false;
      }
      this.remaining = length;
      this.phase = length === 0 ? Phase.Done : Phase.Length;
    } else {
      this.phase = Phase.UntilClose;
      this.keepAlive = false;
    }
    return true;
  }

  /** A chunk-size or trailer line from `at`; returns the offset after it, or -1 (more needed, or error set). */
  private line(data: Buffer, at: number): number {
    const lf = data.indexOf(LF, at);
    const limit = this.phase === Phase.ChunkSize ? MAX_CHUNK_LINE_BYTES : MAX_HEAD_BYTES;
    if (lf === -1) {
      const have = (this.partial?.length ?? 0) + data.length - at;
      if (have > limit) {
        this.fail(this.phase === Phase.ChunkSize ? 'malformed chunked body (chunk-size line too long)' : `response trailers exceed ${limit} bytes`);
        return -1;
      }
      this.partial = this.partial === null ? Buffer.from(data.subarray(at)) : Buffer.concat([this.partial, data.subarray(at)]);
      return -1;
    }
    let text = data.toString('latin1', at, lf);
    if (this.partial !== null) {
      text = this.partial.toString('latin1') + text;
      this.partial = null;
    }
    if (text.length > limit) {
      this.fail(this.phase === Phase.ChunkSize ? 'malformed chunked body (chunk-size line too long)' : `response trailers exceed ${limit} bytes`);
      return -1;
    }
    if (text.endsWith('\r')) text = text.slice(0, -1);
    if (this.phase === Phase.Trailers) {
      if (text === '') this.phase = Phase.Done;
      return lf + 1;
    }
    const semi = text.indexOf(';');
    const hex = (semi === -1 ? text : text.slice(0, semi)).trim();
    if (!/^[0-9a-fA-F]{1,12}$/.test(hex)) {
      this.fail('malformed chunked body (bad chunk size)');
      return -1;
    }
    const size = parseInt(hex, 16);
    if (size === 0) this.phase = Phase.Trailers;
    else {
      if (this.bodyBytes + size > this.maxBodyBytes) {
        this.fail(`answer exceeds ${this.maxBodyBytes} bytes`, true);
        return -1;
      }
      this.remaining = size;
      this.phase = Phase.ChunkData;
    }
    return lf + 1;
  }
}

const EMPTY = Buffer.alloc(0);
