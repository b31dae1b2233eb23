// The production IngestObserver: maps what the pipeline and the upstream pool report onto the metric cells (resolved
// once; nothing allocated per frame). Reads no state; never decides anything.
import { performance } from 'node:perf_hooks';
import { FLASHBLOCK_INTERVAL_MS, flashblockLatenessSeconds, type Metrics } from '../metrics/metrics.js';
import type { IngestObserver } from './pipeline.js';
import type { UpstreamEvent } from './upstream.js';

/** The chain's timing as the observer reads it at each flashblock (the daemon updates it when it learns the chain). */
export interface ObservedTiming {
  blockTimeMs: number;
  flashblockIntervalMs: number;
}

/** Pipeline observations → metrics; the chain's block time and interval (read per flashblock) place its due time. */
export function metricsObserver(m: Metrics, timing: Readonly<ObservedTiming> = { blockTimeMs: 2000, flashblockIntervalMs: FLASHBLOCK_INTERVAL_MS }): IngestObserver {
  let lastAppliedAt = -1;
  return {
    frame(u, isBinary, bytes) {
      const up = m.forUpstream(u);
      up.frames[isBinary ? 'binary' : 'text'].inc();
      up.bytes.inc(bytes);
    },
    decodeError: (reason) => m.decodeErrors[reason].inc(),
    copy: (u, first) => (first ? m.upstreamFirstCopies[u] : m.upstreamDuplicateCopies[u])?.inc(),
    verdict: (v) => m.sequenceVerdicts[v].inc(),
    applied(fb, block, seconds, receivedAtMs) {
      m.processingSeconds.observe(seconds);
      if (lastAppliedAt >= 0) m.observeInterarrival((receivedAtMs - lastAppliedAt) / 1000);
      lastAppliedAt = receivedAtMs;
      m.observeLateness(flashblockLatenessSeconds(performance.timeOrigin + receivedAtMs, block.base.timestamp, fb.index, timing.blockTimeMs, timing.flashblockIntervalMs));
      m.pendingBlock.set(block.number);
      m.pendingIndex.set(fb.index);
    },
    reorg: (hashes) => m.preconfReorgs.inc(hashes.length),
    brokenBlock: () => {},
  };
}

/** Upstream connection events → the per-upstream gauges and counters. */
export function observeUpstreamEvent(m: Metrics, e: UpstreamEvent): void {
  const up = m.forUpstream(e.upstream);
  if (e.kind === 'connected') {
    up.connected.set(1);
    if (e.resumedAfter !== null) up.resumes.requested.inc();
  } else if (e.kind === 'resume_too_old') up.resumes.too_old.inc();
  else if (e.kind === 'disconnected') {
    up.connected.set(0);
    up.reconnects.inc();
  } else if (e.kind === 'stalled') up.stalls.inc();
}
