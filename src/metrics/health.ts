// Readiness as /readyz reports it, from plain observations (no module references): whether pending answers can be
// served — a fresh flashblock, an upstream connected, the node answering, an execution engine that can run, keeps
// up and agrees with the chain. Pure; the daemon gathers the inputs.
import type { HealthReport } from './server.js';

/** What readiness is judged from, observed at one instant. */
export interface HealthInputs {
  flashblocksEnabled: boolean;
  upstreamUrls: number;
  upstreamConnected: number;
  /** Milliseconds since the newest flashblock was applied; null before the first. */
  pendingAgeMs: number | null;
  readyMaxAgeMs: number;
  /** False when no node is configured. */
  nodeEnabled: boolean;
  /** Milliseconds since the node last answered the canonical tracker; null when it never did. */
  nodeOkAgeMs: number | null;
  canonicalPollMs: number;
  /** The node's head as the tracker last saw it. */
  nodeHead: number;
  /** Why the node is not on the stream's chain (a line from src/ingest/chain-match.ts), or null. */
  chainMismatch?: string | null;
  /** Why the chain is not known yet (--chain auto and the node never answered eth_chainId), or null. */
  chainNotKnown?: string | null;
  /**
   * Pending execution: its phase (off, starting, up, restarting, down) and a line of detail; absent = off.
   * cannotRun: the engine it was told to run is missing or cannot be run (down for good, not retrying).
   * lagging: why the engine is too far behind the stream (its pending reads would answer as latest), else null.
   * diverging: why executed state is not trusted (the share of flashblocks disagreeing with the builder or the chain
   * passed its bound: pending reads answer as latest), else null.
   */
  execution?: { phase: string; detail: string; cannotRun?: boolean; lagging?: string | null; diverging?: string | null };
  /** Flashblocks considered gone (src/ingest/retirement.ts): its reason label and operator message; absent = streaming. */
  retirement?: { reason: string; message: string };
}

/** The /readyz report: ready when pending state is fresh, an upstream is connected and the node answers. */
export function healthReport(h: HealthInputs): HealthReport {
  const age = h.pendingAgeMs;
  const nodeReachable = !h.nodeEnabled || (h.nodeOkAgeMs !== null && h.nodeOkAgeMs < Math.max(5000, h.canonicalPollMs * 20));
  const fresh = !h.flashblocksEnabled || (age !== null && age <= h.readyMaxAgeMs);
  const upOk = !h.flashblocksEnabled || h.upstreamConnected > 0;
  // An engine that is starting, restarting or retrying does not affect readiness (pending reads answer as latest
  // meanwhile); one that cannot run at all is a configuration to fix, one lagging behind the stream answers pending
  // reads as latest for as long as it lags, and one whose execution keeps disagreeing with the chain (a wrong fork,
  // a bug) serves no executed state: in all three cases the instance is not ready.
  const lagging = h.execution?.lagging ?? null;
  const diverging = h.execution?.diverging ?? null;
  const engineRunnable = h.execution?.cannotRun !== true && lagging === null && diverging === null;
  const mismatch = h.chainMismatch ?? null;
  const notKnown = h.chainNotKnown ?? null;
  const gone = h.retirement;
  return {
    ...(gone === undefined ? {} : { reason: `${gone.reason}: ${gone.message}` }),
    ready: fresh && upOk && nodeReachable && engineRunnable && mismatch === null && notKnown === null && gone === undefined,
    upstreamConnected: h.upstreamConnected,
    pendingAgeMs: age,
    nodeReachable,
    checks: {
      upstream: {
        ok: upOk && gone === undefined,
        detail: !h.flashblocksEnabled ? 'flashblocks disabled' : `${h.upstreamConnected}/${h.upstreamUrls} upstreams connected${gone === undefined ? '' : `; ${gone.reason}`}`,
      },
      pending: { ok: fresh, detail: age === null ? 'no flashblock applied yet' : `last flashblock applied ${age} ms ago (limit ${h.readyMaxAgeMs} ms)` },
      chain: {
        ok: mismatch === null && notKnown === null,
        detail: mismatch !== null ? mismatch : notKnown !== null ? `not known yet: ${notKnown}` : h.flashblocksEnabled ? 'no sign of another chain' : 'flashblocks disabled',
      },
      node: { ok: nodeReachable, detail: h.nodeEnabled ? (nodeReachable ? `head ${h.nodeHead}` : 'node not answering') : 'no node configured' },
      // Informational unless the engine cannot run, lags or diverges (see above): pending state reads then answer as latest.
      execution: {
        ok: h.execution === undefined || ((h.execution.phase === 'up' || h.execution.phase === 'off') && lagging === null && diverging === null),
        detail: h.execution === undefined ? 'off' : `${h.execution.phase}: ${diverging === null ? '' : `${diverging}; `}${lagging === null ? '' : `${lagging}; `}${h.execution.detail}`,
      },
    },
  };
}
