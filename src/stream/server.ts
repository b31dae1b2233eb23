// The raw flashblocks stream: /flashblocks and /ws (optionally /<api-key>) rebroadcast every applied upstream frame
// byte for byte, plus replay/resume, limits and slow-consumer closes. Never re-encodes a frame except for the opt-in
// brotli copy, which is made once per frame (off the event loop for live frames).
// Each frame is published with uWS topics (shards.ts: a native call per shard of subscribers, not a send per socket)
// as a task on a fan-out queue: after the loop has answered the RPC requests waiting on the new state, in slices of
// about a millisecond (latency isolation, issue 15). The same code serves the main port and the stream port's worker
// threads: frames, admission (limits) and metrics come in through interfaces.
import { performance } from 'node:perf_hooks';
import { brotliCompress, brotliCompressSync, constants as zlibConstants } from 'node:zlib';
import type { HttpRequest, HttpResponse, TemplatedApp, WebSocket, us_socket_context_t } from 'uWebSockets.js';
import type { Logger } from '../log.js';
import type { StreamRefusalReason } from '../metrics/metrics.js';
import { FANOUT_SLICE_MS, type FanoutQueue, type FanoutStep } from '../state/events.js';
import type { RawFrameView as RawFrame } from '../state/view.js';
import { CidrList, clientIp, forwardedFor } from '../limits/ip.js';
import type { Admission, Admit } from './admission.js';
import { ReplayRing } from './replay.js';
import { TopicShards, type Publication } from './shards.js';
import type { StreamSink } from './sink.js';

/** Close code for a resume position the ring no longer covers (application range 4000–4999). */
export const CLOSE_RESUME_TOO_OLD = 4000;
export const RESUME_TOO_OLD_REASON = 'resume point older than replay buffer';
export const CLOSE_SHUTDOWN = 1001;
/** Close codes of a connection the shared limits (Redis) refused after its handshake: a per-IP/per-key limit, the cap. */
export const CLOSE_POLICY = 1008;
export const CLOSE_TRY_LATER = 1013;
/** A close frame's reason holds at most 123 bytes (RFC 6455 §5.5). */
const MAX_CLOSE_REASON_BYTES = 123;

// Quality 5: ~4× smaller than JSON at a fraction of quality 11's cost; once per frame, on the ingest thread.
const BROTLI_OPTS = { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 5, [zlibConstants.BROTLI_PARAM_MODE]: zlibConstants.BROTLI_MODE_TEXT } };
const MAX_CLIENT_MESSAGE_BYTES = 1024;

/**
 * A connection upgraded before its admission was decided (shared limits: Redis answers after the handshake). Set by
 * the open and close handlers; read when the answer comes.
 */
class AdmissionWait {
  ws: Sock | null = null;
  gone = false;
}

/**
 * Per-connection data, fixed at upgrade (but its join and backpressure bookkeeping, and the ticket of one that
 * waited). uWS copies these fields onto the socket object: `getUserData()` is the socket itself, not this instance.
 */
class StreamUser {
  /**
   * Offset (its topics' sentBytes) up to which it cannot be over the cap: its buffer when last read plus every byte
   * published to it since stays within the cap until then, so its buffer is read again only past it.
   */
  checkAtBytes = 0;
  /** Its topics' sentBytes and sentFrames when it joined, and the replay frames it was sent then. */
  joinedBytes = 0;
  joinedFrames = 0;
  replayed = 0;
  /**
   * Sequence number of the newest frame applied when it started: it has everything up to that frame by replay (or
   * asked for nothing older), and joins the live topics once that frame has been published.
   */
  joinAt = 0;
  /** The replay or resume frames it is sent when it joins (fixed when it started); null for none. */
  replay: RawFrame[] | null = null;
  constructor(
    readonly ip: string,
    readonly brotli: boolean,
    readonly replayBlock: boolean,
    /** -1 when the subscriber did not ask to resume. */
    readonly resumeBlock: number,
    readonly resumeIndex: number,
    /** Its admission (handed back on close); 0 while it waits for the answer. */
    public ticket: number,
    /** Set while it waits for its admission (null once decided, or when it was admitted before the upgrade). */
    public wait: AdmissionWait | null,
  ) {}
}

type Sock = WebSocket<StreamUser>;

/** The settings the raw stream reads (built from Config by the daemon). */
export interface StreamOptions {
  /** Per-subscriber send buffer; a subscriber above it misses frames and is closed. */
  readonly streamMaxBackpressureBytes: number;
  readonly streamMaxSubscribers: number;
  readonly streamMaxPerIp: number;
  readonly streamIdleTimeoutS: number;
  readonly apiKeys: readonly string[];
  /** CIDRs whose X-Forwarded-For is honoured. */
  readonly trustedProxies: readonly string[];
  readonly replayRingFrames: number;
  /** Largest upstream frame: the headroom above the cap that uWS's own limit keeps. */
  readonly maxFrameBytes: number;
}

/** Subscribes `fn` to every applied frame, in apply order; returns the unsubscribe function. */
export type FrameSource = (fn: (frame: RawFrame) => void) => () => void;

/** What the raw stream is given: its settings, applied frames, a fan-out queue, limits, metrics and a logger. */
export interface StreamDeps {
  readonly options: StreamOptions;
  readonly frames: FrameSource;
  /** Where sends are queued (on the main thread, the state events' queue shared with subscriptions). */
  readonly fanout: FanoutQueue;
  /** The connection limits (counted across every place the stream is served). */
  readonly admission: Admission;
  readonly sink: StreamSink;
  readonly log: Logger;
}

/** What mountStream returns: drain, and counters/hooks for health checks and tests. */
export interface MountedStream {
  /** Stop accepting; close subscribers with 1001. */
  drain(graceMs: number): Promise<void>;
  /** Open raw-stream connections (admitted; not those waiting for their admission). */
  subscriberCount(): number;
  /** Connections upgraded and waiting for their shared-limit answer (Redis): sent nothing yet. */
  admissionWaits(): number;
  /** The largest per-socket send buffer (bytes) read before a publish; bounded by the cap plus one frame. */
  peakBufferedBytes(): number;
}

/** A decoded query parameter; '' when absent (uWS returns undefined then, despite its typings). */
function query(req: HttpRequest, key: string): string {
  return (req.getQuery(key) as string | undefined) ?? '';
}

function parsePosition(s: string): number {
  if (/^\d{1,15}$/.test(s)) return Number(s);
  if (/^0x[0-9a-fA-F]{1,12}$/.test(s)) return parseInt(s.slice(2), 16);
  return -1;
}

/** True for a binary frame that is not plain JSON, i.e. already brotli on the wire. */
function isBrotliFrame(f: RawFrame): boolean {
  if (!f.isBinary) return false;
  const d = f.data;
  let i = 0;
  while (i < d.length && (d[i] === 0x20 || d[i] === 0x0a || d[i] === 0x0d || d[i] === 0x09)) i++;
  return d[i] !== 0x7b;
}

/**
 * Mounts the raw stream on `app` (routes /flashblocks, /flashblocks/*, /ws, /ws/*) and starts rebroadcasting every
 * applied frame from `deps.frames`. With `apiKeys` set, the path suffix must be one of the keys (HTTP 401
 * otherwise); each key is limited to `streamMaxPerIp` connections (`deps.admission` counts). Query:
 * `encoding=brotli`, `replay=block`, `block_number=N&index=I` (resume after that flashblock).
 */
export function mountStream(app: TemplatedApp, deps: StreamDeps): MountedStream {
  const { options: config, sink, log, admission } = deps;
  const cap = config.streamMaxBackpressureBytes;
  const trusted = new CidrList(config.trustedProxies);
  const keys = new Set(config.apiKeys);
  const ring = new ReplayRing(config.replayRingFrames);
  /** Open connections: admitted, waiting to join the topics or joined. */
  const connections = new Set<Sock>();
  /** Subscribers receiving live frames, by encoding: the uWS topics frames are published to. */
  const rawTopics = new TopicShards<Sock>(app, 'flashblocks/raw');
  const brotliTopics = new TopicShards<Sock>(app, 'flashblocks/brotli');
  /** Connections that started while a frame was applied but not yet published: they join after its publication. */
  let joiners: Sock[] = [];
  /** Upgraded connections waiting for their admission (not in `connections`: they receive nothing). */
  const waiting = new Set<Sock>();
  /** Brotli copies of frames, made at most once per frame (live or on replay). */
  const brotliCopies = new WeakMap<RawFrame, Buffer>();
  let draining = false;
  let peakBuffered = 0;
  /** Frames applied so far (each live frame's sequence number), and the newest whose publication has finished. */
  let seq = 0;
  let published = 0;

  const brotliOf = (f: RawFrame): Buffer => {
    let b = brotliCopies.get(f);
    if (b === undefined) {
      b = isBrotliFrame(f) ? f.data : brotliCompressSync(f.data, BROTLI_OPTS);
      brotliCopies.set(f, b);
    }
    return b;
  };

  const refuse = (res: HttpResponse, status: string, body: string, reason: StreamRefusalReason | null): void => {
    if (reason !== null) sink.refusal(reason);
    res.cork(() => {
      res.writeStatus(status).writeHeader('content-type', 'text/plain; charset=utf-8').end(body + '\n');
    });
  };

  /**
   * Closes a subscriber over its cap at once, dropping what uWS still buffers for it. A graceful end() would queue
   * the close frame behind megabytes the peer is not reading and keep them (and the socket) for 10–15 s (issue 17);
   * the peer sees an abnormal closure (1006) instead of a close frame it could only read after all the backlog.
   */
  const slowClose = (ws: Sock, buffered: number): void => {
    sink.slowClose();
    log.limited('info', 'stream:slow', 1000, 'stream subscriber closed: send buffer over the cap; its buffered frames are dropped', { ip: ws.getUserData().ip, bufferedBytes: buffered, capBytes: cap });
    ws.close();
  };

  /**
   * Checked for each subscriber right before a publish reaches it (`before`: its topics' sentBytes before this frame).
   * One whose send buffer is over the cap would get the frame queued behind a backlog it is not reading (uWS would
   * skip it silently further on: a gap); it is closed instead, and the frame plus the frames its discarded buffer
   * still holds are counted as dropped. The buffer is read only once the bytes published since the last read could
   * have taken it over the cap (a healthy subscriber every ~cap bytes; its shard is not even walked before). This
   * uWS build can neither say why a socket closed nor read its buffer in the close handler, so its own close-on-limit
   * could not count what was dropped.
   */
  const admitLive = (ws: Sock, before: number): number => {
    // The socket is its user data (see StreamUser): no native call for a subscriber whose buffer need not be read.
    const u = ws as unknown as StreamUser;
    if (before <= u.checkAtBytes) return u.checkAtBytes;
    const b = ws.getBufferedAmount();
    if (b > peakBuffered) peakBuffered = b;
    if (b > cap) {
      sink.framesDropped(framesBuffered(u, before, b) + 1);
      slowClose(ws, b);
      return -1;
    }
    return (u.checkAtBytes = before + cap - b);
  };

  /**
   * Frames of which some byte is among the last `buffered` bytes sent to a subscriber (its discarded send buffer) —
   * exact while they are live frames the topics remember; when the buffer reaches back into its replay, or past the
   * frames remembered, every frame it was sent counts (an upper bound).
   */
  const framesBuffered = (u: StreamUser, before: number, buffered: number): number => {
    const topics = u.brotli ? brotliTopics : rawTopics;
    if (before - buffered >= u.joinedBytes) {
      const n = topics.framesInTail(before, buffered);
      if (n !== null) return n;
    }
    // sentFrames already counts the frame being published.
    return topics.sentFrames - 1 - u.joinedFrames + u.replayed;
  };

  /** What a refusal says (the HTTP body before the upgrade, the close reason after it). */
  const refusalText = (reason: Exclude<Admit, number>, ip: string): string => {
    if (reason === 'ip_limit') return `too many connections from ${ip} (limit ${config.streamMaxPerIp})`;
    if (reason === 'key_limit') return `too many connections for this API key (limit ${config.streamMaxPerIp})`;
    if (reason === 'global_limit') return `server is at its subscriber limit (${config.streamMaxSubscribers}); retry later`;
    return 'connection admission timed out (the daemon is busy); retry';
  };

  const refuseLimit = (res: HttpResponse, reason: Exclude<Admit, number>, ip: string): void => {
    const status = reason === 'unavailable' ? '503 Service Unavailable' : '429 Too Many Requests';
    refuse(res, status, refusalText(reason, ip), reason === 'unavailable' ? null : reason);
  };

  /**
   * Closes an upgraded connection its shared-limit answer refused: 1008 for a per-IP or per-key limit, 1013 (try
   * again later) for the subscriber cap or no answer, with the reason the HTTP refusal carries; counted the same.
   */
  const refuseUpgraded = (ws: Sock, reason: Exclude<Admit, number>): void => {
    if (reason !== 'unavailable') sink.refusal(reason);
    const code = reason === 'ip_limit' || reason === 'key_limit' ? CLOSE_POLICY : CLOSE_TRY_LATER;
    const text = refusalText(reason, ws.getUserData().ip);
    ws.cork(() => ws.end(code, Buffer.byteLength(text) <= MAX_CLOSE_REASON_BYTES ? text : text.slice(0, MAX_CLOSE_REASON_BYTES)));
  };

  const upgrade = (res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void => {
    // Everything is read synchronously before upgrade/refusal: the request is stack-allocated.
    const url = req.getUrl();
    const secKey = req.getHeader('sec-websocket-key');
    const secProtocol = req.getHeader('sec-websocket-protocol');
    const secExtensions = req.getHeader('sec-websocket-extensions');
    const xff = forwardedFor(req);
    const encoding = query(req, 'encoding');
    const replay = query(req, 'replay');
    const qBlock = query(req, 'block_number');
    const qIndex = query(req, 'index');

    if (draining) return refuse(res, '503 Service Unavailable', 'server shutting down', null);
    const slash = url.indexOf('/', 1);
    const key = slash < 0 || slash === url.length - 1 ? null : url.slice(slash + 1);
    if (keys.size > 0) {
      if (key === null) return refuse(res, '401 Unauthorized', 'API key required: connect to /flashblocks/<key>', 'bad_key');
      if (!keys.has(key)) return refuse(res, '401 Unauthorized', 'unknown API key', 'bad_key');
    }
    if (encoding !== '' && encoding !== 'brotli' && encoding !== 'identity') {
      return refuse(res, '400 Bad Request', `encoding must be brotli or identity, got "${encoding}"`, null);
    }
    if (replay !== '' && replay !== 'block') return refuse(res, '400 Bad Request', `replay must be "block", got "${replay}"`, null);
    let resumeBlock = -1;
    let resumeIndex = -1;
    if (qBlock !== '' || qIndex !== '') {
      resumeBlock = parsePosition(qBlock);
      resumeIndex = parsePosition(qIndex);
      if (resumeBlock < 0 || resumeIndex < 0) {
        return refuse(res, '400 Bad Request', 'resume needs both block_number and index as non-negative integers (decimal or 0x hex)', null);
      }
    }
    const ip = clientIp(Buffer.from(res.getRemoteAddressAsText()).toString(), xff, trusted);
    const userKey = keys.size > 0 ? key : null;
    const verdict = admission.acquire(ip, userKey);
    if (!(verdict instanceof Promise)) {
      if (typeof verdict !== 'number') return refuseLimit(res, verdict, ip);
      res.upgrade(new StreamUser(ip, encoding === 'brotli', replay === 'block', resumeBlock, resumeIndex, verdict, null), secKey, secProtocol, secExtensions, context);
      return;
    }
    // The answer waits for Redis (shared limits; main thread only: a stream thread waits for its answer blocked). The
    // socket is upgraded now: this uWS build closes a socket upgraded later from res.cork whenever the memory of its old
    // HTTP state reads as "connection: close" (uNetworking/uWebSockets#1929; always with a `Connection: close`
    // handshake). Until the answer it is sent nothing (no replay, no live frame); then it starts as if it had just
    // opened, or is closed with the refusal (refuseUpgraded).
    const wait = new AdmissionWait();
    res.upgrade(new StreamUser(ip, encoding === 'brotli', replay === 'block', resumeBlock, resumeIndex, 0, wait), secKey, secProtocol, secExtensions, context);
    void verdict.then(
      (v) => settle(wait, v),
      () => settle(wait, 'unavailable'),
    );
  };

  /** The admission answer of a connection upgraded before it: start it, refuse it, or hand back a ticket it no longer needs. */
  const settle = (wait: AdmissionWait, v: Admit): void => {
    const ws = wait.ws;
    if (ws === null || wait.gone) {
      // Gone while it waited (or never opened): nothing is kept for it.
      if (typeof v === 'number') admission.release(v);
      return;
    }
    waiting.delete(ws);
    const u = ws.getUserData();
    u.wait = null;
    if (typeof v !== 'number') return refuseUpgraded(ws, v);
    u.ticket = v;
    if (draining) {
      // drain() ends waiters; kept for safety: the close handler releases the ticket.
      ws.cork(() => ws.end(CLOSE_SHUTDOWN, 'server shutting down'));
      return;
    }
    ws.cork(() => start(ws));
  };

  const sendReplay = (ws: Sock, frames: RawFrame[], brotli: boolean): boolean => {
    let ok = true;
    ws.cork(() => {
      for (let i = 0; i < frames.length && ok; i++) {
        const f = frames[i]!;
        // 2 = dropped: the replay alone is over the cap.
        ok = (brotli ? ws.send(brotliOf(f), true) : ws.send(f.data, f.isBinary)) !== 2;
        if (!ok) sink.framesDropped(frames.length - i);
      }
    });
    return ok;
  };

  /**
   * An admitted connection starts: its replay or resume is taken from the ring now, then it joins the live topics —
   * at once when every applied frame has been published, else after the newest applied frame's publication. The ring
   * holds every applied frame (some may still wait in the fan-out queue) and a publish reaches only the sockets
   * subscribed when it is made: it gets everything up to the newest applied frame by replay (or asked for nothing
   * older) and every later frame from the topics — no gap, no duplicate.
   */
  const start = (ws: Sock): void => {
    const u = ws.getUserData();
    connections.add(ws);
    let frames: RawFrame[] | null = null;
    if (u.resumeBlock >= 0) {
      const r = ring.resumeAfter(u.resumeBlock, u.resumeIndex);
      if (!r.ok) {
        sink.refusal('resume_too_old');
        ws.end(CLOSE_RESUME_TOO_OLD, RESUME_TOO_OLD_REASON);
        return;
      }
      frames = r.frames;
    } else if (u.replayBlock) {
      frames = ring.currentBlock();
    }
    u.replay = frames !== null && frames.length > 0 ? frames : null;
    u.joinAt = seq;
    sink.subscribers(connections.size);
    if (published === seq) join(ws);
    else joiners.push(ws);
  };

  /** Sends a started connection its replay, then subscribes it to its encoding's topics (or closes it over the cap). */
  const join = (ws: Sock): void => {
    const u = ws.getUserData();
    const frames = u.replay;
    u.replay = null;
    if (frames !== null) {
      if (!sendReplay(ws, frames, u.brotli) || ws.getBufferedAmount() > cap) {
        slowClose(ws, ws.getBufferedAmount());
        return;
      }
      u.replayed = frames.length;
    }
    const topics = u.brotli ? brotliTopics : rawTopics;
    u.joinedBytes = topics.sentBytes;
    u.joinedFrames = topics.sentFrames;
    u.checkAtBytes = topics.sentBytes + cap - ws.getBufferedAmount();
    topics.add(ws, u.checkAtBytes);
  };

  /** After the publication of frame `done`: the connections waiting for it join. */
  const joinAfter = (done: number): void => {
    const waiting = joiners;
    joiners = [];
    for (const ws of waiting) {
      if (ws.getUserData().joinAt <= done) join(ws);
      else joiners.push(ws);
    }
  };

  const open = (ws: Sock): void => {
    const u = ws.getUserData();
    if (u.wait === null) return start(ws);
    u.wait.ws = ws;
    waiting.add(ws);
  };

  const close = (ws: Sock): void => {
    const u = ws.getUserData();
    if (u.wait !== null) {
      // Closed while waiting for its admission: the answer, when it comes, hands its ticket back.
      u.wait.gone = true;
      waiting.delete(ws);
      return;
    }
    if (!connections.delete(ws)) return;
    if (!(u.brotli ? brotliTopics : rawTopics).remove(ws)) {
      const i = joiners.indexOf(ws);
      if (i >= 0) joiners.splice(i, 1);
    }
    admission.release(u.ticket);
    sink.subscribers(connections.size);
  };

  const behavior = {
    compression: 0,
    maxPayloadLength: MAX_CLIENT_MESSAGE_BYTES,
    idleTimeout: config.streamIdleTimeoutS,
    sendPingsAutomatically: true,
    // Headroom above the cap: our own check closes at the cap before each publish (counted and logged); uWS's limit
    // only has to stay out of its way. Should uWS ever skip a frame (a gap), it closes the socket instead.
    maxBackpressure: cap + config.maxFrameBytes + 4096,
    closeOnBackpressureLimit: 1,
    upgrade,
    open,
    close,
  };
  app.ws<StreamUser>('/flashblocks', behavior);
  app.ws<StreamUser>('/flashblocks/*', behavior);
  app.ws<StreamUser>('/ws', behavior);
  app.ws<StreamUser>('/ws/*', behavior);

  /**
   * Fan-out of applied frame number `frameSeq`: publishes it to the raw topics in slices, then its brotli copy
   * (compressed off the loop meanwhile) to the brotli topics when there are brotli subscribers; then the connections
   * that started while it was pending join. A step that throws (the queue reports it and ends the task) still lets
   * them join, after the frames before it.
   */
  const fanOut = (frame: RawFrame, frameSeq: number, appliedAt: number): FanoutStep => {
    let raw: Publication | null = null;
    let brotli: Publication | null = null;
    let copy: Buffer | null = null;
    let compressing: Promise<void> | null = null;
    const settle = (): void => {
      published = frameSeq;
      if (joiners.length > 0) joinAfter(frameSeq);
    };
    const finish = (): true => {
      sink.framesSent(raw!.sent + (brotli?.sent ?? 0));
      sink.fanoutSeconds((performance.now() - appliedAt) / 1000);
      settle();
      return true;
    };
    const step = (): boolean | Promise<void> => {
      if (raw === null) {
        raw = rawTopics.publication(frame.data, frame.isBinary, admitLive);
        if (brotliTopics.size > 0) {
          copy = brotliCopies.get(frame) ?? (isBrotliFrame(frame) ? frame.data : null);
          if (copy === null) {
            compressing = compressOffLoop(frame).then(
              (b) => void (copy = b),
              () => void (copy = brotliOf(frame)),
            );
          }
        }
        if (!raw.step(FANOUT_SLICE_MS)) return false;
        // The raw slices used this turn; the brotli ones start on the next.
        if (copy === null && compressing === null) return finish();
        return false;
      }
      if (brotli === null) {
        if (!raw.step(FANOUT_SLICE_MS)) return false;
        if (copy === null && compressing === null) return finish();
        if (copy === null) {
          const wait = compressing!;
          compressing = null;
          return wait;
        }
        brotli = brotliTopics.publication(copy, true, admitLive);
      }
      return brotli.step(FANOUT_SLICE_MS) ? finish() : false;
    };
    return () => {
      try {
        return step();
      } catch (e) {
        settle();
        throw e;
      }
    };
  };

  /** The brotli copy of a live frame, compressed on libuv's thread pool (a copy costs milliseconds of CPU). */
  const compressOffLoop = (f: RawFrame): Promise<Buffer> =>
    new Promise((resolve, reject) => {
      brotliCompress(f.data, BROTLI_OPTS, (err, out) => {
        if (err !== null) return reject(err);
        if (!brotliCopies.has(f)) brotliCopies.set(f, out);
        resolve(brotliCopies.get(f)!);
      });
    });

  const stopListening = deps.frames((frame) => {
    ring.push(frame);
    deps.fanout.push(fanOut(frame, ++seq, performance.now()));
  });

  return {
    subscriberCount: () => connections.size,
    admissionWaits: () => waiting.size,
    peakBufferedBytes: () => peakBuffered,
    drain(_graceMs: number): Promise<void> {
      draining = true;
      stopListening();
      // end() calls the close handler synchronously, which removes the socket from its set (a waiter's ticket, if its
      // answer admits it, goes back when that answer comes).
      for (const ws of [...connections, ...waiting]) ws.end(CLOSE_SHUTDOWN, 'server shutting down');
      return Promise.resolve();
    },
  };
}
