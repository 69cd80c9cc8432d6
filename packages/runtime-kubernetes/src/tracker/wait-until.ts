import type { Context } from '@berth/context';
import { contextError, type Where } from '../errors.ts';

/**
 * Resolves once `ready()` holds — checked now and each time the tracker calls the listeners in
 * `listeners` — and rejects with the ctx's error when ctx ends first. Leaves nothing registered.
 */
export function waitUntil(ctx: Context, where: Where, listeners: Set<() => void>, ready: () => boolean): Promise<void> {
  if (ready()) return Promise.resolve();
  if (ctx.signal.aborted) return Promise.reject(contextError(ctx, where));
  return new Promise((resolve, reject) => {
    const check = (): void => {
      if (!ready()) return;
      cleanup();
      resolve();
    };
    const onAbort = (): void => {
      cleanup();
      reject(contextError(ctx, where));
    };
    const cleanup = (): void => {
      listeners.delete(check);
      ctx.signal.removeEventListener('abort', onAbort);
    };
    listeners.add(check);
    ctx.signal.addEventListener('abort', onAbort, { once: true });
  });
}
