// eth_sendRawTransactionSync (EIP-7966): watch for the hash first, then forward, and answer with the receipt of the
// first flashblock (or canonical block) that includes it; error code 4 with the hash on timeout. Never races: the
// watchers are registered before the node sees the transaction, and state is checked right after registering.
import { decodeTransaction } from '../../chain/tx.js';
import { RpcCode, RpcError } from '../../errors.js';
import type { BlockView } from '../../state/view.js';
import { arity, hexData } from './params.js';
import type { Handler, MethodContext } from './types.js';

/** EIP-7966: the transaction was submitted but no receipt appeared within the timeout. */
export const SYNC_TIMEOUT_CODE = RpcCode.TX_SYNC_TIMEOUT;

function timeoutParam(v: unknown, max: number): number {
  let ms: number | null = null;
  if (typeof v === 'number' && Number.isFinite(v)) ms = v;
  else if (typeof v === 'string' && /^0x[0-9a-fA-F]{1,12}$/.test(v)) ms = Number.parseInt(v.slice(2), 16);
  // EIP-7966: an invalid timeout falls back to the node-configured default; ours is also the maximum.
  return ms === null || ms <= 0 || ms > max ? max : ms;
}

/** eth_sendRawTransactionSync(raw, timeoutMs?): see the file comment. */
export const ethSendRawTransactionSync: Handler = (ctx: MethodContext, params) => {
  arity(params, 1, 2);
  const raw = hexData(params, 0);
  const d = decodeTransaction(raw);
  if (!d.ok) throw new RpcError(RpcCode.INVALID_PARAMS, `invalid argument 0: transaction does not decode: ${d.reason}`);
  // lagoon/post-exec.md "Mempool and Propagation": only the sequencer builds them; never accepted from a client.
  if (!d.tx.executes) throw new RpcError(RpcCode.INVALID_PARAMS, 'invalid argument 0: a post-exec (0x7d) transaction is built by the sequencer and cannot be submitted');
  const hash = d.tx.hash;
  const timeoutMs = timeoutParam(params[1], ctx.options.sendRawSyncTimeoutMs);
  return new Promise<unknown>((resolve, reject) => {
    let done = false;
    let polling = false;
    const finish = (err: unknown, value?: unknown): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      offApplied();
      offCanonical();
      offExecuted();
      if (err !== null) reject(err);
      else resolve(value);
    };
    const fromState = (): boolean => {
      const rec = ctx.view.tx(hash);
      if (rec === undefined) return false;
      const r = ctx.shapes.receiptObject(rec);
      if (r === null) return false;
      finish(null, r);
      return true;
    };
    const fromNode = (): void => {
      if (done || polling) return;
      polling = true;
      ctx.node.call<unknown>('eth_getTransactionReceipt', [hash]).then(
        (r) => {
          polling = false;
          if (r !== null && r !== undefined) finish(null, r);
        },
        () => {
          polling = false;
        },
      );
    };
    const offApplied = ctx.events.onApplied((_block: BlockView, fb) => {
      const body = fb.body;
      for (let i = 0; i < body.txCount; i++) {
        if (body.txHashIs(i, hash)) {
          if (!fromState()) fromNode();
          return;
        }
      }
    });
    const offCanonical = ctx.events.onCanonical(() => fromNode());
    // A stream without receipts (post-Azul): the executed receipt, as soon as the engine has run the flashblock.
    const offExecuted = ctx.execution?.onExecuted(() => void (!done && fromState())) ?? ((): void => undefined);
    const timer = setTimeout(() => {
      finish(new RpcError(SYNC_TIMEOUT_CODE, `The transaction was added to the transaction pool but wasn't processed in ${timeoutMs} ms.`, hash));
    }, timeoutMs);
    if (fromState()) return;
    ctx.node.call<unknown>('eth_sendRawTransaction', [raw]).then(
      () => {
        if (!fromState()) fromNode();
      },
      (e: unknown) => finish(e),
    );
  });
};
