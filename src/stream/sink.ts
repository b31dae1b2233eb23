// What the raw stream records (frames sent and dropped, slow closes, refusals, subscribers, fan-out time), behind one
// small interface: on the main thread straight into the registry's cells; on a stream thread accumulated and posted
// to the main thread, which adds the deltas. Owns no socket and no policy.
import { STREAM_REFUSAL_REASONS, type Metrics, type StreamRefusalReason } from '../metrics/metrics.js';

/** The raw stream's metrics, as the stream server reports them. */
export interface StreamSink {
  framesSent(n: number): void;
  framesDropped(n: number): void;
  slowClose(): void;
  refusal(reason: StreamRefusalReason): void;
  /** Open connections where this sink's stream is served (a gauge: the newest value replaces the previous). */
  subscribers(n: number): void;
  fanoutSeconds(s: number): void;
}

/** What a stream thread accumulated since its previous report. */
export interface SinkDelta {
  sent: number;
  dropped: number;
  slowCloses: number;
  refusals: Partial<Record<StreamRefusalReason, number>>;
  subscribers: number;
  fanoutSeconds: number[];
}

/** A stream thread's sink: counts locally; `take` returns what was counted since the previous call. */
export class AccumulatingSink implements StreamSink {
  private delta: SinkDelta = AccumulatingSink.empty(0);
  private static empty(subscribers: number): SinkDelta {
    return { sent: 0, dropped: 0, slowCloses: 0, refusals: {}, subscribers, fanoutSeconds: [] };
  }
  framesSent(n: number): void {
    this.delta.sent += n;
  }
  framesDropped(n: number): void {
    this.delta.dropped += n;
  }
  slowClose(): void {
    this.delta.slowCloses++;
  }
  refusal(reason: StreamRefusalReason): void {
    this.delta.refusals[reason] = (this.delta.refusals[reason] ?? 0) + 1;
  }
  subscribers(n: number): void {
    this.delta.subscribers = n;
  }
  fanoutSeconds(s: number): void {
    this.delta.fanoutSeconds.push(s);
  }
  take(): SinkDelta {
    const d = this.delta;
    this.delta = AccumulatingSink.empty(d.subscribers);
    return d;
  }
}

/**
 * The registry side: one sink per place the stream is served on the main thread, and the deltas of stream threads.
 * The subscriber gauge is the sum over every place.
 */
export class StreamMetricsHub {
  private readonly subscribersBy = new Map<string, number>();
  constructor(private readonly metrics: Metrics) {}

  /** Sets the open connections of `place` (e.g. `main`, `stream-2`) and the gauge to the total. */
  setSubscribers(place: string, n: number): void {
    if (n === 0) this.subscribersBy.delete(place);
    else this.subscribersBy.set(place, n);
    let total = 0;
    for (const v of this.subscribersBy.values()) total += v;
    this.metrics.streamSubscribers.set(total);
  }

  /** A sink writing to the registry's cells; its subscriber count is that of `place`. */
  sink(place: string): StreamSink {
    const m = this.metrics;
    return {
      framesSent: (n) => m.streamFramesSent.inc(n),
      framesDropped: (n) => m.streamFramesDropped.inc(n),
      slowClose: () => m.streamSlowCloses.inc(),
      refusal: (r) => m.streamRefusals[r].inc(),
      subscribers: (n) => this.setSubscribers(place, n),
      fanoutSeconds: (s) => m.streamFanoutSeconds.observe(s),
    };
  }

  /** Adds a stream thread's report. */
  add(place: string, d: SinkDelta): void {
    const m = this.metrics;
    m.streamFramesSent.inc(d.sent);
    m.streamFramesDropped.inc(d.dropped);
    m.streamSlowCloses.inc(d.slowCloses);
    for (const r of STREAM_REFUSAL_REASONS) {
      const n = d.refusals[r];
      if (n !== undefined) m.streamRefusals[r].inc(n);
    }
    for (const s of d.fanoutSeconds) m.streamFanoutSeconds.observe(s);
    this.setSubscribers(place, d.subscribers);
  }
}
