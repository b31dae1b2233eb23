// The raw stream on the main thread, wired to the state events and the registry: the counts (admission) and the
// metrics hub it builds are the ones the stream port shares. Wiring only; the stream logic is server.ts.
import type { ConnectionLeases } from '../limits/connections.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics/metrics.js';
import type { StateEvents } from '../state/events.js';
import type { TemplatedApp } from 'uWebSockets.js';
import { LocalAdmission } from './admission.js';
import { mountStream, type FrameSource, type MountedStream, type StreamOptions } from './server.js';
import { StreamMetricsHub } from './sink.js';

export interface LocalStreamDeps {
  readonly options: StreamOptions;
  readonly events: StateEvents;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** Connection counts shared through Redis (--redis-url); null or absent: this instance's counts only. */
  readonly leases?: ConnectionLeases | null;
}

/** The main port's stream, and what a stream port started beside it must share. */
export interface LocalStream extends MountedStream {
  readonly admission: LocalAdmission;
  readonly hub: StreamMetricsHub;
  readonly frames: FrameSource;
}

/** Mounts the raw stream on `app` (main thread), fed by `events.onApplied`, sending through `events.fanout`. */
export function mountLocalStream(app: TemplatedApp, deps: LocalStreamDeps): LocalStream {
  const admission = new LocalAdmission(deps.options, deps.leases ?? null);
  const hub = new StreamMetricsHub(deps.metrics);
  const frames: FrameSource = (fn) => deps.events.onApplied((_block, _fb, frame) => fn(frame));
  const stream = mountStream(app, { options: deps.options, frames, fanout: deps.events.fanout, admission, sink: hub.sink('main'), log: deps.log });
  return { ...stream, admission, hub, frames };
}
