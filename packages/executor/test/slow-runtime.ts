import { type Context, errOf, sleep } from '@berth/context';
import { type Runtime, RuntimeError } from '@berth/runtime';

/** The runtime methods a test can slow down. */
export type RuntimeMethod = Exclude<keyof Runtime, 'name'>;

/**
 * Wraps `runtime` so that `method` first waits `ms` (honouring its ctx, as the contract asks),
 * to hold a build in one phase while a test cancels it or lets it time out.
 */
export function slowed(runtime: Runtime, delays: Partial<Record<RuntimeMethod, number>>): Runtime {
  return new Proxy(runtime, {
    get(target, prop, _receiver) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      const fn = value as (...args: unknown[]) => unknown;
      const delay = delays[prop as RuntimeMethod];
      if (delay === undefined) return fn.bind(target);
      return async (ctx: Context, ...args: unknown[]) => {
        try {
          await sleep(ctx, delay);
        } catch {
          const err = errOf(ctx);
          throw new RuntimeError(err.name === 'DeadlineExceeded' ? 'DeadlineExceeded' : 'Canceled', 'the context ended', { runtime: target.name, operation: String(prop), cause: err });
        }
        return fn.call(target, ctx, ...args);
      };
    },
  });
}

/**
 * Wraps `runtime` so that `method` rejects with `error()` for the containers (or builds) whose
 * name `when` accepts; other calls go through.
 */
export function failing(runtime: Runtime, method: RuntimeMethod, error: () => Error, when: (subject: { name?: string; id?: string }) => boolean = () => true): Runtime {
  return new Proxy(runtime, {
    get(target, prop, _receiver) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      const fn = value as (...args: unknown[]) => unknown;
      if (prop !== method) return fn.bind(target);
      return (ctx: Context, subject: { name?: string; id?: string }, ...args: unknown[]) => (when(subject) ? Promise.reject(error()) : fn.call(target, ctx, subject, ...args));
    },
  });
}
