import type { Context } from '@berth/context';
import type { RuntimeErrorCode } from '@berth/runtime';
import { contextError, type EngineDescription, toRuntimeError, type Where } from './errors.ts';

/**
 * Runs one engine call under `ctx`: rejects at once when ctx is already done, hands ctx's signal
 * to the call (dockerode's `abortSignal`), settles as soon as ctx is done even when the call does
 * not notice, and maps every failure to a RuntimeError.
 */
export async function engineCall<T>(
  ctx: Context,
  where: Where,
  engine: EngineDescription,
  fn: (signal: AbortSignal) => Promise<T>,
  overrides?: Partial<Record<number, RuntimeErrorCode>>,
): Promise<T> {
  if (ctx.signal.aborted) throw contextError(ctx, where);
  const signal = ctx.signal;
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(contextError(ctx, where));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  const work = fn(signal);
  // Whichever loses the race must not become an unhandled rejection.
  work.catch(() => undefined);
  aborted.catch(() => undefined);
  try {
    return await Promise.race([work, aborted]);
  } catch (error) {
    throw toRuntimeError(error, ctx, where, engine, overrides);
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}
