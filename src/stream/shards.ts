// The raw stream's subscribers as uWS topics of one app: which sockets one native publish call reaches, and the
// per-frame publication that walks those topics in slices. Owns topic names and membership; no limits, no metrics.
import { performance } from 'node:perf_hooks';
import type { TemplatedApp, WebSocket } from 'uWebSockets.js';

/** Subscribers per fine shard: the unit of a large frame's publish (each call sends before it returns). */
export const SHARD_SUBSCRIBERS = 16;
/** Fine shards per group: the unit of a small frame's publish (128 subscribers). */
export const GROUP_SHARDS = 8;
/**
 * uWS sends a published message this large inside the publish call (one send per subscriber); a smaller one is
 * queued in its topic tree and sent, corked per socket, when the loop next polls (uWS drains before and after each
 * poll). uWebSockets v20.30 App::publish, LoopData::CORK_BUFFER_SIZE.
 */
export const PUBLISH_SYNC_BYTES = 16 * 1024;
/**
 * Small-frame subscribers published per loop turn: their sends happen after the turn, so they are counted, not timed.
 * 1,000 sends of a 2.5 KB frame drained in 6.4–8.0 ms here (2 vCPUs, loopback): 128 ≈ 1 ms before the next poll.
 */
export const SMALL_SENDS_PER_TURN = 128;

/** Frames whose end offsets the shards keep, for counting what a closed subscriber's send buffer held. */
export const SENT_HISTORY_FRAMES = 4096;

/**
 * Decides, right before a publish that would reach `ws`, whether it still should: returns the offset (in
 * {@link TopicShards.sentBytes}) up to which it need not be asked again, or −1 when the socket was closed (for falling
 * behind; its close handler has then removed it from its shard). `beforeBytes` is the shards' sentBytes before this
 * frame: every frame published to the socket since it joined ends at or before it.
 */
export type AdmitLive<S> = (ws: S, beforeBytes: number) => number;

/** Bytes a server frame of `payloadBytes` takes on the wire (unmasked, RFC 6455 §5.2). */
export function wireBytes(payloadBytes: number): number {
  return payloadBytes + (payloadBytes < 126 ? 2 : payloadBytes < 65536 ? 4 : 10);
}

/** One frame being published to every member of a {@link TopicShards}, slice by slice, in shard order. */
export interface Publication {
  /** Publishes the next slice; true once every shard has been published. */
  step(budgetMs: number): boolean;
  /** Subscribers the frame was published to so far (admitted by the check). */
  readonly sent: number;
}

/**
 * Subscribers of one app, split into fine shards of {@link SHARD_SUBSCRIBERS} sockets (each its own topic) and groups
 * of {@link GROUP_SHARDS} fine shards (a topic each too). A socket subscribes to both of its topics; a frame is
 * published to one level only, so each member gets it once. Members must not be added while a publication is in
 * progress (it would get that frame from the topic although it started after it): the stream server adds them only
 * between two frames' publications.
 */
export class TopicShards<S extends WebSocket<unknown>> {
  private readonly shards: Set<S>[] = [];
  /** Per fine shard, the lowest offset its members asked to be checked again at: below it the shard is not walked. */
  private readonly dueAt: number[] = [];
  private readonly shardOf = new Map<S, number>();
  private readonly fineTopics: string[] = [];
  private readonly groupTopics: string[] = [];
  /** Wire bytes of every frame published so far (each frame once, whoever it reached), and frames published. */
  private bytes = 0;
  private frames = 0;
  /**
   * Cumulative end offset of each of the last {@link SENT_HISTORY_FRAMES} frames and of the one before them (where the
   * oldest starts); frame n at n % length.
   */
  private readonly ends = new Float64Array(SENT_HISTORY_FRAMES + 1);

  constructor(
    private readonly app: TemplatedApp,
    /** Topic prefix, unique on this app (the app's other WebSocket routes share its topic tree). */
    private readonly prefix: string,
  ) {}

  /** Sockets held. */
  get size(): number {
    return this.shardOf.size;
  }

  /** Wire bytes of the frames published so far: a subscriber that joins now gets the frames after this offset. */
  get sentBytes(): number {
    return this.bytes;
  }

  /** Frames published so far. */
  get sentFrames(): number {
    return this.frames;
  }

  /**
   * Frames published before offset `beforeBytes` of which some byte lies in its last `bufferedBytes` — what a send
   * buffer of that size still holds of them — or null when that reaches past the frames remembered.
   */
  framesInTail(beforeBytes: number, bufferedBytes: number): number | null {
    const from = beforeBytes - bufferedBytes;
    const ends = this.ends;
    const oldest = Math.max(0, this.frames - SENT_HISTORY_FRAMES);
    let n = 0;
    for (let k = this.frames - 1; k >= oldest; k--) {
      const end = ends[k % ends.length]!;
      if (end <= from) return n;
      if (end <= beforeBytes) n++;
    }
    return oldest === 0 || ends[(oldest - 1) % ends.length]! <= from ? n : null;
  }

  /**
   * Adds an open socket to the first fine shard with room (shards emptied by closes are refilled first); it is asked
   * (AdmitLive) before the first publish that starts past offset `dueAtBytes`.
   */
  add(ws: S, dueAtBytes: number): void {
    let i = 0;
    while (i < this.shards.length && this.shards[i]!.size >= SHARD_SUBSCRIBERS) i++;
    if (i === this.shards.length) {
      this.shards.push(new Set());
      this.dueAt.push(Infinity);
      this.fineTopics.push(`${this.prefix}/f${i}`);
      if (i % GROUP_SHARDS === 0) this.groupTopics.push(`${this.prefix}/g${i / GROUP_SHARDS}`);
    }
    this.shards[i]!.add(ws);
    this.shardOf.set(ws, i);
    if (dueAtBytes < this.dueAt[i]!) this.dueAt[i] = dueAtBytes;
    ws.subscribe(this.fineTopics[i]!);
    ws.subscribe(this.groupTopics[Math.floor(i / GROUP_SHARDS)]!);
  }

  /** Forgets a socket that closed (uWS has dropped its subscriptions); false when it was not held. */
  remove(ws: S): boolean {
    const i = this.shardOf.get(ws);
    if (i === undefined) return false;
    this.shardOf.delete(ws);
    this.shards[i]!.delete(ws);
    return true;
  }

  /**
   * A publication of `message` to every current member: a message under {@link PUBLISH_SYNC_BYTES} by group, at most
   * about {@link SMALL_SENDS_PER_TURN} subscribers per step; a larger one by fine shard until the step's budget has
   * passed (those sends happen inside the call, so they are timed). `admit` is asked for each member that is due,
   * right before the call that would reach it; a shard none of whose members is due is not walked at all.
   */
  publication(message: Buffer, isBinary: boolean, admit: AdmitLive<S>): Publication {
    const shards = this.shards;
    const app = this.app;
    const small = message.length < PUBLISH_SYNC_BYTES;
    const before = this.bytes;
    this.bytes += wireBytes(message.length);
    this.ends[this.frames++ % this.ends.length] = this.bytes;
    const topics = small ? this.groupTopics : this.fineTopics;
    const width = small ? GROUP_SHARDS : 1;
    /** Shards that exist now; later ones only hold sockets added after this publication (none, see the class). */
    const units = topics.length;
    let unit = 0;
    let sent = 0;
    const dueAt = this.dueAt;
    /** Checks the due members of shards [from, to) and returns how many are left to receive the publish. */
    const check = (from: number, to: number): number => {
      let n = 0;
      for (let i = from; i < to && i < shards.length; i++) {
        const shard = shards[i]!;
        if (before > dueAt[i]!) {
          let next = Infinity;
          for (const ws of shard) {
            const due = admit(ws, before);
            if (due >= 0 && due < next) next = due;
          }
          dueAt[i] = next;
        }
        n += shard.size;
      }
      return n;
    };
    return {
      get sent() {
        return sent;
      },
      step(budgetMs: number): boolean {
        const until = performance.now() + budgetMs;
        let thisTurn = 0;
        while (unit < units) {
          const n = check(unit * width, (unit + 1) * width);
          if (n > 0) app.publish(topics[unit]!, message, isBinary);
          unit++;
          sent += n;
          thisTurn += n;
          if (small ? thisTurn >= SMALL_SENDS_PER_TURN : performance.now() >= until) break;
        }
        return unit >= units;
      },
    };
  }
}
