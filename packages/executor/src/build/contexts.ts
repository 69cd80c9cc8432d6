/**
 * The contexts of one build (ARCHITECTURE.md, "The contexts of one build"), and the small promise
 * helpers the lifecycle waits with.
 */
import { afterFunc, type CancelFunc, type Context, errOf, withCancel, withDelayedCancel, withoutCancel, withTimeout } from '@berth/context';

/** The contexts of one build (see ARCHITECTURE.md, "The contexts of one build"). */
export interface BuildContexts {
  /** Cancelled by `Executor.cancelBuild`, by the parent, or by `end` / `release`. */
  readonly build: Context;
  /** `withTimeout(build, timeout)`: create, plan, assemble, exec. */
  readonly exec: Context;
  /** `withDelayedCancel(build, log-streaming grace)`: streamBuild and every log stream. */
  readonly stream: Context;
  /**
   * `withoutCancel(build)`: destroyBuild runs under it whatever ended the build. It has no limit of
   * its own: destroyBuild bounds each removal by the cleanup budget.
   */
  readonly destroy: () => Context;
  /**
   * The build's containers are done (exec returned): cancels the build ctx, so log streams still
   * running get the log-streaming grace and no more. Does not count as a cancel of the build.
   */
  readonly end: () => void;
  /** Cancels every context of the build now and clears their timers. Call it last. */
  readonly release: () => void;
}

/** What the executor keeps of its contexts: the build ctx, its cancel, and whether the build is over. */
export interface BuildContextState {
  readonly build: Context;
  readonly cancel: CancelFunc;
  /** True once `end` or `release` was called: a cancel of the build ctx is then no user cancel. */
  released: boolean;
}

/** The cause `end()` and `release()` cancel the build ctx with: the build is over, nobody cancelled it. */
const RELEASED = new Error('the build is over');

/**
 * Makes the contexts of one build under `parent` (the worker's root ctx): build, exec (build
 * timeout), stream (log-streaming grace once the build ctx ends) and destroy (detached).
 */
export function makeBuildContexts(
  parent: Context,
  options: { timeoutMs: number; logStreamingGraceMs: number },
): { contexts: BuildContexts; state: BuildContextState } {
  const [build, cancel] = withCancel(parent);
  const [exec, cancelExec] = withTimeout(build, options.timeoutMs);
  const [stream, cancelStream] = withDelayedCancel(build, options.logStreamingGraceMs);
  const state: BuildContextState = { build, cancel, released: false };
  const destroy = withoutCancel(build);
  const contexts: BuildContexts = {
    build,
    exec,
    stream,
    destroy: () => destroy,
    end() {
      state.released = true;
      cancel(RELEASED);
    },
    release() {
      state.released = true;
      cancelExec();
      cancelStream();
      cancel(RELEASED);
    },
  };
  return { contexts, state };
}

/** A promise settled from outside (`Promise.withResolvers`) that is never an unhandled rejection. */
export interface Deferred {
  readonly promise: Promise<void>;
  resolve(): void;
  reject(error: unknown): void;
}

/** A {@link Deferred}: nobody may be waiting on it, so its rejection is handled. */
export function deferred(): Deferred {
  const { promise, resolve, reject } = Promise.withResolvers<void>();
  promise.catch(() => undefined);
  return { promise, resolve: () => resolve(), reject };
}

/** Resolves with `promise`, or rejects with `ctx`'s error when it is done first; leaves no listener. */
export function untilDone<T>(ctx: Context, promise: Promise<T>): Promise<T> {
  if (ctx.signal.aborted) return Promise.reject(errOf(ctx));
  const { promise: out, resolve, reject } = Promise.withResolvers<T>();
  const stop = afterFunc(ctx, () => reject(errOf(ctx)));
  promise.then(
    (value) => {
      stop();
      resolve(value);
    },
    (error: unknown) => {
      stop();
      reject(error);
    },
  );
  return out;
}

/** Waits for `promise` or for `ctx` to be done, whichever comes first; never rejects. */
export async function settleWithin(ctx: Context, promise: Promise<unknown>): Promise<void> {
  try {
    await untilDone(ctx, promise);
  } catch {
    // Done either way.
  }
}
