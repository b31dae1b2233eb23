// Test helpers: a pipeline over fresh pending state that counts what the observer sees.
import { IngestPipeline, type IngestObserver, type VerdictLabel } from '../../src/ingest/pipeline.js';
import { PendingState } from '../../src/state/pending.js';
import { silentLogger, type Logger } from '../../src/log.js';

/** Counts every observer call, for assertions. */
export class CountingObserver implements IngestObserver {
  verdicts = new Map<string, number>();
  decodeErrors = new Map<string, number>();
  firstCopies = new Map<number, number>();
  laterCopies = new Map<number, number>();
  appliedN = 0;
  reorgs: string[] = [];
  broken: number[] = [];
  frame(): void {}
  decodeError(reason: string): void {
    this.decodeErrors.set(reason, (this.decodeErrors.get(reason) ?? 0) + 1);
  }
  copy(upstream: number, first: boolean): void {
    const m = first ? this.firstCopies : this.laterCopies;
    m.set(upstream, (m.get(upstream) ?? 0) + 1);
  }
  verdict(v: VerdictLabel): void {
    this.verdicts.set(v, (this.verdicts.get(v) ?? 0) + 1);
  }
  applied(): void {
    this.appliedN++;
  }
  reorg(hashes: string[]): void {
    this.reorgs.push(...hashes);
  }
  brokenBlock(n: number): void {
    this.broken.push(n);
  }
}
/** A pipeline with test-friendly defaults. */
export function makePipeline(
  opts: { gapWindowFrames?: number; gapTimeoutMs?: number; maxPendingBlocks?: number; maxFrameBytes?: number; log?: Logger; blockTimeMs?: number; maxAheadMs?: number; dialect?: string; nativeDecode?: boolean } = {},
) {
  const state = new PendingState({ maxPendingBlocks: opts.maxPendingBlocks ?? 8 });
  const observer = new CountingObserver();
  const pipeline = new IngestPipeline(
    state,
    {
      maxFrameBytes: opts.maxFrameBytes ?? 16 * 1024 * 1024,
      gapWindowFrames: opts.gapWindowFrames ?? 16,
      gapTimeoutMs: opts.gapTimeoutMs ?? 1000,
      ...(opts.blockTimeMs === undefined ? {} : { blockTimeMs: opts.blockTimeMs }),
      ...(opts.maxAheadMs === undefined ? {} : { maxAheadMs: opts.maxAheadMs }),
      ...(opts.dialect === undefined ? {} : { dialect: opts.dialect }),
      ...(opts.nativeDecode === undefined ? {} : { nativeDecode: opts.nativeDecode }),
    },
    opts.log ?? silentLogger,
    observer,
  );
  return { state, observer, pipeline, senders: pipeline.senders };
}

let clock = 0;
/** Feeds one message (object → JSON text frame, or raw Buffer) to the pipeline as if from `upstream`. */
export function feed(pipeline: IngestPipeline, msg: unknown, upstream = 0, isBinary = false): void {
  const data = Buffer.isBuffer(msg) ? msg : Buffer.from(JSON.stringify(msg));
  pipeline.handleFrame({ data, isBinary, upstream, receivedAtMs: ++clock });
}
