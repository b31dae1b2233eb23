// Traces at `pending` (issue 41): geth's debug_traceTransaction / debug_traceCall / debug_traceBlockByNumber /
// debug_traceBlockByHash and parity's trace_call / trace_callMany / trace_transaction / trace_replayTransaction /
// trace_block / trace_replayBlockTransactions / trace_get, answered from the executed flashblocks by the engine
// (native/src/trace.rs: revm-inspectors' tracers). A preconfirmed transaction is traced by executing its flashblock
// again on the state before it; a call at `pending` on the newest executed state.
//
// Never a trace of state the chain contradicts: with execution off, at a flashblock the engine has not executed (after
// the usual bounded wait), or whose block's execution disagreed with the builder, the trace is refused with a clear
// error — it never falls back to `latest`. Canonical targets (and hashes not held) go to the node only when
// --forward-methods allows the method (the dispatcher checks; see isGuardedForward), as any other method.
// Bounded: --trace-timeout-ms (geth's `timeout` option may ask for less), --max-response-bytes (the engine stops a
// trace that outgrows it), --max-traces-in-flight (one more is refused at once).
import { EngineUnavailableError, RpcReplyError, type FlashblockAt, type TraceRequest } from '../../exec/engine.js';
import { RpcCode, RpcError } from '../../errors.js';
import type { TraceMethod, TraceRefusal, TraceTracer } from '../../metrics/metrics.js';
import type { BlockView } from '../../state/view.js';
import { atNewestState } from './executed.js';
import { heldAbove, heldStateBlock, usablePending } from './pending.js';
import { arity } from './params.js';
import { FORWARD_AS_IS, type Handler, type MethodContext } from './types.js';

/** geth's default trace timeout. */
const DEFAULT_TIMEOUT_MS = 5000;
const DEFAULT_IN_FLIGHT = 4;
const DEFAULT_MAX_BYTES = 100 * 1024 * 1024;

/** geth's built-in tracers this daemon runs (no tracer named = the struct logger). */
const BUILT_IN: ReadonlySet<string> = new Set(['callTracer', 'prestateTracer', '4byteTracer', 'flatCallTracer', 'muxTracer', 'noopTracer']);
const TRACE_TYPES: ReadonlySet<string> = new Set(['trace', 'stateDiff', 'vmTrace']);

/** Traces running now, per RPC server (its options object). */
const inFlight = new WeakMap<object, number>();

/** Refuses a trace: counted by reason, answered with `message`. */
class Refusal extends RpcError {
  constructor(
    readonly reason: TraceRefusal,
    code: number,
    message: string,
  ) {
    super(code, message);
  }
}

function refuse(ctx: MethodContext, reason: TraceRefusal, code: number, message: string): never {
  ctx.metrics.traceRefusals[reason].inc();
  throw new Refusal(reason, code, message);
}

function hashParam(params: unknown[], i: number, what = 'transaction hash'): string {
  const v = params[i];
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(v)) throw new RpcError(RpcCode.INVALID_PARAMS, `invalid argument ${i}: expected a ${what} (0x-prefixed, 32 bytes)`);
  return v.toLowerCase();
}

function objectParam(params: unknown[], i: number, what: string): Record<string, unknown> | undefined {
  const v = params[i];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw new RpcError(RpcCode.INVALID_PARAMS, `invalid argument ${i}: expected ${what}`);
  return v as Record<string, unknown>;
}

/** A Go duration ("5s", "300ms", "1m30s") in milliseconds, as geth parses the `timeout` option. */
export function goDurationMs(s: string): number | null {
  const units: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/y;
  let ms = 0;
  let i = 0;
  if (s === '') return null;
  while (i < s.length) {
    re.lastIndex = i;
    const m = re.exec(s);
    if (m === null) return null;
    ms += Number(m[1]) * units[m[2]!]!;
    i = re.lastIndex;
  }
  return ms;
}

/** geth's tracing options, checked: a known tracer (no JavaScript), a valid timeout. Returns the engine's part and the timeout. */
function gethOptions(ctx: MethodContext, o: Record<string, unknown> | undefined): { options: Record<string, unknown>; tracer: TraceTracer; timeoutMs: number } {
  const options: Record<string, unknown> = { ...(o ?? {}) };
  const cap = ctx.options.traceTimeoutMs ?? DEFAULT_TIMEOUT_MS;
  let timeoutMs = cap;
  if (options.timeout !== undefined && options.timeout !== null) {
    const t = typeof options.timeout === 'string' ? goDurationMs(options.timeout) : null;
    if (t === null) throw new RpcError(RpcCode.INVALID_PARAMS, `invalid timeout ${JSON.stringify(options.timeout)}: expected a duration such as "5s" or "300ms"`);
    timeoutMs = Math.min(Math.max(1, Math.ceil(t)), cap);
  }
  delete options.timeout;
  // debug_traceCall's overrides travel beside the call, not in the tracer's options.
  delete options.stateOverrides;
  delete options.blockOverrides;
  let tracer: TraceTracer = 'structLogger';
  if (options.tracer !== undefined && options.tracer !== null && options.tracer !== '') {
    if (typeof options.tracer !== 'string' || !BUILT_IN.has(options.tracer)) {
      const named = typeof options.tracer === 'string' ? options.tracer : JSON.stringify(options.tracer);
      refuse(
        ctx,
        'unsupported_tracer',
        RpcCode.INVALID_PARAMS,
        `tracer ${JSON.stringify(named.length > 40 ? named.slice(0, 40) + '…' : named)} is not supported: JavaScript tracers are not run here; use a built-in tracer (callTracer, prestateTracer, 4byteTracer, flatCallTracer, muxTracer, noopTracer) or none for the struct logger`,
      );
    }
    tracer = options.tracer as TraceTracer;
  } else delete options.tracer;
  return { options, tracer, timeoutMs };
}

function traceTypes(params: unknown[], i: number): string[] {
  const v = params[i];
  if (!Array.isArray(v) || v.length === 0 || !v.every((t) => typeof t === 'string' && TRACE_TYPES.has(t))) {
    throw new RpcError(RpcCode.INVALID_PARAMS, `invalid argument ${i}: expected a non-empty list of trace types ("trace", "stateDiff", "vmTrace")`);
  }
  return v as string[];
}

/** The pending block a block argument names for a trace: `pending`, a held number or a held flashblock hash; undefined: not pending. */
function pendingBlockOf(ctx: MethodContext, tag: unknown): { block: BlockView; index: number } | undefined {
  if (tag === undefined || tag === null || tag === 'pending') {
    needsExecution(ctx);
    const b = usablePending(ctx);
    if (b === null) refuse(ctx, 'not_executed', RpcCode.SERVER_ERROR, 'pending state is not available now (no fresh flashblock, or flashblocks are off): ask with "latest" or a block number');
    return { block: b, index: b.lastIndex };
  }
  if (typeof tag === 'string' && /^0x[0-9a-fA-F]{64}$/.test(tag)) {
    const f = ctx.view.blockByFlashblockHash(tag.toLowerCase());
    return f === undefined || f.block.broken ? undefined : f;
  }
  if (typeof tag === 'string' && /^0x[0-9a-fA-F]{1,15}$/.test(tag)) {
    const b = heldAbove(ctx, Number.parseInt(tag.slice(2), 16));
    return b === null ? undefined : { block: b, index: b.lastIndex };
  }
  if (tag !== null && typeof tag === 'object' && !Array.isArray(tag)) {
    const o = tag as { blockHash?: unknown; blockNumber?: unknown };
    if (typeof o.blockHash === 'string') return pendingBlockOf(ctx, o.blockHash);
    if (o.blockNumber !== undefined) return pendingBlockOf(ctx, o.blockNumber);
  }
  return undefined;
}

/** Refuses at once when there is no engine to trace with (`pending` asked with execution off). */
function needsExecution(ctx: MethodContext): void {
  if (ctx.execution === null || ctx.execution.engine.trace === undefined) {
    refuse(ctx, 'execution_off', RpcCode.SERVER_ERROR, 'traces at pending need the execution engine, which is off (--execution false)');
  }
}

/**
 * The engine, once it has executed flashblock `index` of `block` and that block's execution agrees with the builder;
 * refuses otherwise (counted), never answers as latest.
 */
async function engineAt(ctx: MethodContext, block: BlockView, index: number): Promise<NonNullable<MethodContext['execution']>['engine']> {
  needsExecution(ctx);
  const ex = ctx.execution!;
  const at = `${block.number}/${index}`;
  if (!(await ex.readyFor(block.number, index))) {
    if (ex.fallbackReason?.(block.number, index) === 'diverged') {
      refuse(ctx, 'diverged', RpcCode.SERVER_ERROR, `execution diverged from the builder at pending block ${at}: no trace is served from that state`);
    }
    refuse(ctx, 'not_executed', RpcCode.SERVER_ERROR, `flashblock ${at} is not executed (the engine is behind, failed there or is restarting): try again, or trace it once canonical`);
  }
  if (!ex.receiptsVerified(block.number)) {
    refuse(ctx, 'diverged', RpcCode.SERVER_ERROR, `execution diverged from the builder in pending block ${block.number}: no trace is served from that state`);
  }
  return ex.engine;
}

/** Runs one engine trace within the in-flight bound; its errors as JSON-RPC errors (counted), its time and count recorded. */
async function run(ctx: MethodContext, method: TraceMethod, tracer: TraceTracer, block: BlockView, index: number, req: Omit<TraceRequest, 'maxBytes'>): Promise<unknown> {
  // The slot is taken before waiting for the engine: a trace waiting for its flashblock is in flight too.
  const key = ctx.options;
  const busy = inFlight.get(key) ?? 0;
  const max = ctx.options.maxTracesInFlight ?? DEFAULT_IN_FLIGHT;
  if (busy >= max) refuse(ctx, 'busy', RpcCode.LIMIT_EXCEEDED, `too many traces in flight (${max}, --max-traces-in-flight): try again shortly`);
  inFlight.set(key, busy + 1);
  const t0 = performance.now();
  try {
    const engine = await engineAt(ctx, block, index);
    const out = await engine.trace!({ ...req, maxBytes: ctx.options.maxResponseBytes ?? DEFAULT_MAX_BYTES } as TraceRequest);
    ctx.metrics.traces[method][tracer].inc();
    ctx.metrics.traceSeconds[method].observe((performance.now() - t0) / 1000);
    return out;
  } catch (e) {
    if (e instanceof EngineUnavailableError) {
      refuse(ctx, 'not_held', RpcCode.SERVER_ERROR, `flashblock ${block.number}/${index} is no longer held by the engine (its block turned canonical, or was rebuilt): ask again`);
    }
    if (e instanceof RpcReplyError) {
      if (e.code === RpcCode.LIMIT_EXCEEDED) ctx.metrics.traceRefusals.too_large.inc();
      else if (e.rpcMessage === 'execution timeout') ctx.metrics.traceRefusals.timeout.inc();
      throw new RpcError(e.code, e.rpcMessage, e.data ?? undefined);
    }
    throw e;
  } finally {
    inFlight.set(key, (inFlight.get(key) ?? 1) - 1);
  }
}

/** A transaction trace: at the flashblock that carried `hash` when it is preconfirmed, else the node's (when allowed). */
function txTrace(method: TraceMethod, engineMethod: TraceRequest['method'], tracerOf: (ctx: MethodContext, params: unknown[]) => { tracer: TraceTracer; timeoutMs: number; extra: Record<string, unknown> }): Handler {
  return (ctx, params) => {
    const hash = hashParam(params, 0);
    const shaped = tracerOf(ctx, params);
    const tx = ctx.view.tx(hash);
    if (tx === undefined || tx.block.broken) return FORWARD_AS_IS;
    const at: FlashblockAt = { number: tx.block.number, index: tx.flashblockIndex };
    return run(ctx, method, shaped.tracer, tx.block, tx.flashblockIndex, { method: engineMethod, hash, at, blockHash: tx.block.hash, timeoutMs: shaped.timeoutMs, ...shaped.extra });
  };
}

/** A block trace: every transaction of a pending block so far; other blocks are the node's (when allowed). */
function blockTrace(method: TraceMethod, engineMethod: TraceRequest['method'], byHash: boolean, tracerOf: (ctx: MethodContext, params: unknown[]) => { tracer: TraceTracer; timeoutMs: number; extra: Record<string, unknown> }): Handler {
  return (ctx, params) => {
    const tag = byHash ? hashParam(params, 0, 'block hash') : params[0];
    if (!byHash && typeof tag !== 'string' && (tag === null || typeof tag !== 'object')) throw new RpcError(RpcCode.INVALID_PARAMS, 'invalid argument 0: expected a block number, tag or hash');
    const shaped = tracerOf(ctx, params);
    const target = pendingBlockOf(ctx, tag);
    if (target === undefined) return FORWARD_AS_IS;
    const { block, index } = target;
    return run(ctx, method, shaped.tracer, block, index, { method: engineMethod, at: { number: block.number, index }, blockHash: block.hash, timeoutMs: shaped.timeoutMs, ...shaped.extra });
  };
}

/**
 * The pending block a call's block argument names, when its state is the newest executed one (calls run there);
 * undefined: not pending (the node's); an older held block is refused (only the newest flashblock's state is kept).
 */
function callTarget(ctx: MethodContext, tag: unknown): BlockView | undefined {
  if (tag === 'pending') needsExecution(ctx);
  const b = tag === undefined || tag === null ? heldStateBlock(ctx, 'pending') : heldStateBlock(ctx, tag);
  if (b === undefined) return undefined;
  if (b === null) refuse(ctx, 'not_executed', RpcCode.SERVER_ERROR, 'pending state is not available now (no fresh flashblock, or flashblocks are off): ask with "latest" or a block number');
  if (!atNewestState(ctx, b)) refuse(ctx, 'not_held', RpcCode.SERVER_ERROR, `pending block ${b.number} is not the newest: its state is not kept, trace at "pending"`);
  return b;
}

const gethTracer = (i: number) => (ctx: MethodContext, params: unknown[]) => {
  const g = gethOptions(ctx, objectParam(params, i, 'a tracing options object'));
  return { tracer: g.tracer, timeoutMs: g.timeoutMs, extra: { options: g.options } };
};

const parityTracer = (typesAt: number | null) => (ctx: MethodContext, params: unknown[]) => ({
  tracer: 'parity' as const,
  timeoutMs: ctx.options.traceTimeoutMs ?? DEFAULT_TIMEOUT_MS,
  extra: typesAt === null ? {} : { traceTypes: traceTypes(params, typesAt) },
});

export const debug_traceTransaction: Handler = (ctx, params) => {
  arity(params, 1, 2);
  return txTrace('debug_traceTransaction', 'traceTransaction', gethTracer(1))(ctx, params, null);
};

export const debug_traceBlockByNumber: Handler = (ctx, params) => {
  arity(params, 1, 2);
  return blockTrace('debug_traceBlockByNumber', 'traceBlock', false, gethTracer(1))(ctx, params, null);
};

export const debug_traceBlockByHash: Handler = (ctx, params) => {
  arity(params, 1, 2);
  return blockTrace('debug_traceBlockByHash', 'traceBlock', true, gethTracer(1))(ctx, params, null);
};

export const debug_traceCall: Handler = (ctx, params) => {
  arity(params, 1, 3);
  const call = objectParam(params, 0, 'a transaction call object');
  if (call === undefined) throw new RpcError(RpcCode.INVALID_PARAMS, 'invalid argument 0: expected a transaction call object');
  const raw = objectParam(params, 2, 'a tracing options object');
  const g = gethOptions(ctx, raw);
  const block = callTarget(ctx, params[1] ?? 'latest');
  if (block === undefined) return FORWARD_AS_IS;
  return run(ctx, 'debug_traceCall', g.tracer, block, block.lastIndex, {
    method: 'traceCall',
    tx: call,
    stateOverrides: raw?.stateOverrides ?? null,
    blockOverrides: raw?.blockOverrides ?? null,
    options: g.options,
    timeoutMs: g.timeoutMs,
  });
};

export const trace_call: Handler = async (ctx, params) => {
  arity(params, 2, 3);
  const call = objectParam(params, 0, 'a transaction call object');
  if (call === undefined) throw new RpcError(RpcCode.INVALID_PARAMS, 'invalid argument 0: expected a transaction call object');
  const types = traceTypes(params, 1);
  const block = callTarget(ctx, params[2] ?? 'latest');
  if (block === undefined) return FORWARD_AS_IS;
  const out = (await run(ctx, 'trace_call', 'parity', block, block.lastIndex, {
    method: 'traceCallMany',
    calls: [{ tx: call, traceTypes: types }],
    timeoutMs: ctx.options.traceTimeoutMs ?? DEFAULT_TIMEOUT_MS,
  })) as unknown[];
  return out[0];
};

export const trace_callMany: Handler = (ctx, params) => {
  arity(params, 1, 2);
  const list = params[0];
  if (!Array.isArray(list) || list.length === 0) throw new RpcError(RpcCode.INVALID_PARAMS, 'invalid argument 0: expected a non-empty list of [call, traceTypes] pairs');
  const calls = list.map((pair, k) => {
    if (!Array.isArray(pair) || pair.length !== 2) throw new RpcError(RpcCode.INVALID_PARAMS, `invalid argument 0: item ${k} is not a [call, traceTypes] pair`);
    const call = objectParam(pair, 0, `a transaction call object (item ${k})`);
    if (call === undefined) throw new RpcError(RpcCode.INVALID_PARAMS, `invalid argument 0: item ${k} has no call object`);
    return { tx: call, traceTypes: traceTypes(pair, 1) };
  });
  const block = callTarget(ctx, params[1] ?? 'latest');
  if (block === undefined) return FORWARD_AS_IS;
  return run(ctx, 'trace_callMany', 'parity', block, block.lastIndex, { method: 'traceCallMany', calls, timeoutMs: ctx.options.traceTimeoutMs ?? DEFAULT_TIMEOUT_MS });
};

export const trace_transaction: Handler = (ctx, params) => {
  arity(params, 1, 1);
  return txTrace('trace_transaction', 'traceTransactionParity', parityTracer(null))(ctx, params, null);
};

export const trace_replayTransaction: Handler = (ctx, params) => {
  arity(params, 2, 2);
  return txTrace('trace_replayTransaction', 'traceReplayTransaction', parityTracer(1))(ctx, params, null);
};

export const trace_block: Handler = (ctx, params) => {
  arity(params, 1, 1);
  return blockTrace('trace_block', 'traceBlockParity', false, parityTracer(null))(ctx, params, null);
};

export const trace_replayBlockTransactions: Handler = (ctx, params) => {
  arity(params, 2, 2);
  return blockTrace('trace_replayBlockTransactions', 'traceReplayBlock', false, parityTracer(1))(ctx, params, null);
};

/** trace_get(hash, [i]): the i-th of trace_transaction's traces (null when none), as reth answers it. */
export const trace_get: Handler = (ctx, params) => {
  arity(params, 2, 2);
  const idx = params[1];
  if (!Array.isArray(idx) || !idx.every((i) => typeof i === 'string' || typeof i === 'number')) throw new RpcError(RpcCode.INVALID_PARAMS, 'invalid argument 1: expected a list of trace indices');
  const r = txTrace('trace_get', 'traceTransactionParity', parityTracer(null))(ctx, params, null);
  if (!(r instanceof Promise)) return r;
  return r.then((all) => {
    if (idx.length !== 1) return null;
    const i = typeof idx[0] === 'number' ? idx[0] : Number.parseInt(idx[0] as string, (idx[0] as string).startsWith('0x') ? 16 : 10);
    return (all as unknown[])[i] ?? null;
  });
};

export const TRACE_HANDLERS: ReadonlyMap<string, Handler> = new Map<string, Handler>([
  ['debug_traceTransaction', debug_traceTransaction],
  ['debug_traceCall', debug_traceCall],
  ['debug_traceBlockByNumber', debug_traceBlockByNumber],
  ['debug_traceBlockByHash', debug_traceBlockByHash],
  ['trace_call', trace_call],
  ['trace_callMany', trace_callMany],
  ['trace_transaction', trace_transaction],
  ['trace_replayTransaction', trace_replayTransaction],
  ['trace_block', trace_block],
  ['trace_replayBlockTransactions', trace_replayBlockTransactions],
  ['trace_get', trace_get],
]);

/** Methods whose handler's "forward to the node" still obeys the forwarding allow-list (--forward-methods). */
export function isGuardedForward(method: string): boolean {
  return TRACE_HANDLERS.has(method);
}
