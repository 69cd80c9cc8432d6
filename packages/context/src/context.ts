import { setMaxListeners } from 'node:events';
import { Canceled, DeadlineExceeded } from './errors.ts';

/**
 * A typed key for `withValue` / `Context.value`. Keys compare by identity, never by name: two
 * `createKey('user')` calls make two different keys.
 */
export interface ContextKey<T> {
  /** A label for debugging; not used for lookup. */
  readonly name: string;
  /** Phantom field carrying `T`; never set at runtime. */
  readonly __type?: (value: T) => T;
}

/** Creates a new, unique `ContextKey`. Create keys once at module level, not per call. */
export function createKey<T>(name: string): ContextKey<T> {
  return Object.freeze({ name });
}

/**
 * Cancels a context and all its descendants. Idempotent: only the first call counts.
 * `cause` becomes the context's `cause()` (default: the `Canceled` error itself).
 *
 * Gotcha: always call it when the work is over, even on success: until then the context stays
 * registered on its parent (and keeps its timer, if any).
 */
export type CancelFunc = (cause?: unknown) => void;

/**
 * Carries cancellation, a deadline and request-scoped values across API boundaries, like Go's
 * `context.Context`. Pass it as the first argument; hand `ctx.signal` to APIs that take an
 * `AbortSignal`.
 */
export interface Context {
  /** Aborted when the context is done; `signal.reason` is the `err()` error. */
  readonly signal: AbortSignal;
  /** `Canceled` or `DeadlineExceeded` once done, `undefined` while live. */
  err(): Canceled | DeadlineExceeded | undefined;
  /** The cause given to the cancel function (or `err()` when none was given); `undefined` while live. */
  cause(): unknown;
  /** When the context will be cancelled by a deadline, if ever (the earliest along its ancestry). */
  deadline(): Date | undefined;
  /**
   * Resolves when the context is done; never rejects. One shared promise per context, backed by a
   * single `abort` listener that is removed when the context is done.
   */
  done(): Promise<void>;
  /** The value bound to `key` by this context or the nearest ancestor, or `undefined`. */
  value<T>(key: ContextKey<T>): T | undefined;
}

/** Contexts that can never be done (background, withoutCancel and value contexts on top of them). */
const neverDone = new WeakSet<Context>();
const NEVER_SIGNAL = new AbortController().signal;
setMaxListeners(0, NEVER_SIGNAL);
const NEVER = new Promise<void>(() => undefined);
/** setTimeout's longest delay; longer deadlines re-arm. */
const MAX_TIMER_MS = 2_147_483_647;

class EmptyContext implements Context {
  readonly signal = NEVER_SIGNAL;
  readonly #parent: Context | undefined;
  constructor(parent?: Context) {
    this.#parent = parent;
    neverDone.add(this);
  }
  err(): undefined {
    return undefined;
  }
  cause(): undefined {
    return undefined;
  }
  deadline(): undefined {
    return undefined;
  }
  done(): Promise<void> {
    return NEVER;
  }
  value<T>(key: ContextKey<T>): T | undefined {
    return this.#parent?.value(key);
  }
  toString(): string {
    return this.#parent ? 'context.withoutCancel' : 'context.background';
  }
}

class ValueContext implements Context {
  readonly #parent: Context;
  readonly #key: ContextKey<unknown>;
  readonly #value: unknown;
  constructor(parent: Context, key: ContextKey<unknown>, value: unknown) {
    this.#parent = parent;
    this.#key = key;
    this.#value = value;
    if (neverDone.has(parent)) neverDone.add(this);
  }
  get signal(): AbortSignal {
    return this.#parent.signal;
  }
  err(): Canceled | DeadlineExceeded | undefined {
    return this.#parent.err();
  }
  cause(): unknown {
    return this.#parent.cause();
  }
  deadline(): Date | undefined {
    return this.#parent.deadline();
  }
  done(): Promise<void> {
    return this.#parent.done();
  }
  value<T>(key: ContextKey<T>): T | undefined {
    return key === this.#key ? (this.#value as T) : this.#parent.value(key);
  }
  toString(): string {
    return `context.withValue(${this.#key.name})`;
  }
}

/** The error and cause a done context passes on to its children. */
function inherited(parent: Context): [Canceled | DeadlineExceeded, unknown] {
  const err = parent.err() ?? toContextError(parent.signal.reason);
  const cause = parent.cause();
  return [err, cause === undefined ? err : cause];
}

function toContextError(reason: unknown): Canceled | DeadlineExceeded {
  if (reason instanceof Canceled || reason instanceof DeadlineExceeded) return reason;
  if (reason instanceof Error && reason.name === 'TimeoutError') return new DeadlineExceeded(undefined, { cause: reason });
  return new Canceled(undefined, { cause: reason });
}

interface CancelOptions {
  /** Own deadline (already capped by the parent's), armed as a timer. */
  deadline?: Date | undefined;
  /** Deadline to report without arming a timer (delayed cancel). */
  reportedDeadline?: Date | undefined;
  /** When set, the parent's cancellation reaches this context that many ms later. */
  parentDelayMs?: number | undefined;
}

class CancelContext implements Context {
  readonly signal: AbortSignal;
  readonly #parent: Context;
  readonly #controller = new AbortController();
  readonly #deadline: Date | undefined;
  #err: Canceled | DeadlineExceeded | undefined;
  #cause: unknown;
  #timer: NodeJS.Timeout | undefined;
  #unlink: (() => void) | undefined;
  #done: Promise<void> | undefined;

  constructor(parent: Context, options: CancelOptions = {}) {
    this.#parent = parent;
    this.signal = this.#controller.signal;
    // Many children and waiters on one context are normal, not a leak.
    setMaxListeners(0, this.signal);
    const delay = options.parentDelayMs;
    this.#deadline = options.deadline ?? options.reportedDeadline ?? parent.deadline();
    const onParentDone =
      delay === undefined
        ? () => this.cancel(...inherited(parent))
        : () => {
            const [err, cause] = inherited(parent);
            this.#unlink = undefined;
            if (this.#err) return;
            this.#timer = setTimeout(() => this.cancel(err, cause), Math.max(0, delay));
          };
    if (!neverDone.has(parent)) {
      const parentSignal = parent.signal;
      if (parentSignal.aborted) {
        onParentDone();
        if (this.#err) return;
      } else {
        const listener = (): void => onParentDone();
        parentSignal.addEventListener('abort', listener, { once: true });
        this.#unlink = () => parentSignal.removeEventListener('abort', listener);
      }
    }
    if (options.deadline) this.#arm(options.deadline.getTime());
  }

  #arm(at: number): void {
    const delay = at - Date.now();
    if (delay <= 0) {
      const err = new DeadlineExceeded();
      this.cancel(err, err);
    } else if (delay > MAX_TIMER_MS) {
      this.#timer = setTimeout(() => this.#arm(at), MAX_TIMER_MS);
    } else {
      this.#timer = setTimeout(() => {
        const err = new DeadlineExceeded();
        this.cancel(err, err);
      }, delay);
    }
  }

  /** Internal: marks the context done, releases what it holds on its parent, aborts the signal. */
  cancel(err: Canceled | DeadlineExceeded, cause: unknown): void {
    if (this.#err) return;
    this.#err = err;
    this.#cause = cause;
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    const unlink = this.#unlink;
    this.#unlink = undefined;
    unlink?.();
    this.#controller.abort(err);
  }

  /** Internal: cancels with `Canceled` (only allocates when still live). */
  cancelWith(cause: unknown): void {
    if (this.#err) return;
    const err = new Canceled(undefined, cause === undefined ? undefined : { cause });
    this.cancel(err, cause === undefined ? err : cause);
  }

  err(): Canceled | DeadlineExceeded | undefined {
    return this.#err;
  }
  cause(): unknown {
    return this.#err ? this.#cause : undefined;
  }
  deadline(): Date | undefined {
    return this.#deadline;
  }
  done(): Promise<void> {
    if (!this.#done) {
      const signal = this.signal;
      this.#done = signal.aborted ? Promise.resolve() : new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    }
    return this.#done;
  }
  value<T>(key: ContextKey<T>): T | undefined {
    return this.#parent.value(key);
  }
  toString(): string {
    return `context.withCancel(${this.#err ? this.#err.name : 'live'})`;
  }
}

const BACKGROUND: Context = new EmptyContext();

/** The root context: never cancelled, no deadline, no values. Cheap to call; always the same object. */
export function background(): Context {
  return BACKGROUND;
}

function cancelFuncOf(ctx: CancelContext): CancelFunc {
  return (cause?: unknown) => ctx.cancelWith(cause);
}

/**
 * A child of `parent` with its own cancel function. Cancelling the parent cancels the child (with
 * the parent's err/cause); cancelling the child never touches the parent.
 *
 * Gotcha: call the cancel function when done, even on success, or the child stays registered on
 * the parent (one `abort` listener) until the parent is done.
 */
export function withCancel(parent: Context): [Context, CancelFunc] {
  const ctx = new CancelContext(parent);
  return [ctx, cancelFuncOf(ctx)];
}

/**
 * A child of `parent` that is cancelled with `DeadlineExceeded` at `deadline`, unless the parent's
 * deadline comes first: then the child reports (and obeys) the parent's deadline.
 *
 * Gotcha: the timer is ref'd (a pending build timeout keeps the process alive); the cancel function
 * clears it, so always call it.
 */
export function withDeadline(parent: Context, deadline: Date): [Context, CancelFunc] {
  const parentDeadline = parent.deadline();
  const ctx =
    parentDeadline && parentDeadline.getTime() <= deadline.getTime()
      ? new CancelContext(parent)
      : new CancelContext(parent, { deadline: new Date(deadline.getTime()) });
  return [ctx, cancelFuncOf(ctx)];
}

/** `withDeadline(parent, now + ms)`. Same gotcha: call the cancel function to clear the timer. */
export function withTimeout(parent: Context, ms: number): [Context, CancelFunc] {
  return withDeadline(parent, new Date(Date.now() + ms));
}

/**
 * A child of `parent` carrying `value` under `key`. Shares the parent's signal, err and deadline
 * (it has no cancel function of its own).
 */
export function withValue<T>(parent: Context, key: ContextKey<T>, value: T): Context {
  return new ValueContext(parent, key as ContextKey<unknown>, value);
}

/**
 * A context with `parent`'s values but none of its cancellation or deadline: for cleanup that must
 * run after the work was cancelled (e.g. removing a container). Combine with `withTimeout` to bound
 * that cleanup.
 */
export function withoutCancel(parent: Context): Context {
  return new EmptyContext(parent);
}

/**
 * A child that is cancelled `ms` after its parent is (with the parent's err/cause), or at once by
 * its own cancel function: a grace period, e.g. to let a step stop its container before the build
 * context tears everything down. Its deadline is the parent's deadline plus `ms`.
 *
 * Gotcha: the grace timer starts when the parent is done and is ref'd; the child's cancel function
 * clears it.
 */
export function withDelayedCancel(parent: Context, ms: number): [Context, CancelFunc] {
  const parentDeadline = parent.deadline();
  const ctx = new CancelContext(parent, {
    parentDelayMs: ms,
    reportedDeadline: parentDeadline ? new Date(parentDeadline.getTime() + ms) : undefined,
  });
  return [ctx, cancelFuncOf(ctx)];
}

/**
 * A child of `parent` that is also cancelled when `signal` aborts (err `Canceled`, or
 * `DeadlineExceeded` for a `TimeoutError`; cause = `signal.reason`). Bridges foreign signals such as
 * a shutdown handler's into a context tree.
 *
 * Gotcha: call the cancel function to remove the listener from `signal`.
 */
export function withSignal(parent: Context, signal: AbortSignal): [Context, CancelFunc] {
  const [ctx, cancel] = withCancel(parent);
  if (signal.aborted) {
    (ctx as CancelContext).cancel(toContextError(signal.reason), signal.reason);
    return [ctx, cancel];
  }
  const listener = (): void => (ctx as CancelContext).cancel(toContextError(signal.reason), signal.reason);
  signal.addEventListener('abort', listener, { once: true });
  afterFunc(ctx, () => signal.removeEventListener('abort', listener));
  return [ctx, cancel];
}

/**
 * Runs `fn` once, in a microtask, when `ctx` is done (soon, if it already is). The returned `stop()`
 * returns true if it prevented `fn` from running (and removes the listener), false if `fn` already
 * ran or was already committed to run, or `stop` was already called.
 */
export function afterFunc(ctx: Context, fn: () => void): () => boolean {
  let state: 'pending' | 'stopped' | 'fired' = 'pending';
  const fire = (): void => {
    if (state !== 'pending') return;
    state = 'fired';
    queueMicrotask(fn);
  };
  if (neverDone.has(ctx)) {
    return () => {
      if (state !== 'pending') return false;
      state = 'stopped';
      return true;
    };
  }
  const signal = ctx.signal;
  if (signal.aborted) {
    fire();
  } else {
    signal.addEventListener('abort', fire, { once: true });
  }
  return () => {
    if (state !== 'pending') return false;
    state = 'stopped';
    signal.removeEventListener('abort', fire);
    return true;
  };
}

/** `ctx.err()` for a done context, falling back to its signal's reason for foreign contexts. */
export function errOf(ctx: Context): Canceled | DeadlineExceeded {
  return ctx.err() ?? toContextError(ctx.signal.reason);
}

/**
 * Waits `ms` milliseconds, or rejects with `ctx.err()` as soon as `ctx` is done. Clears its timer
 * and removes its listener either way.
 */
export function sleep(ctx: Context, ms: number): Promise<void> {
  if (ctx.signal.aborted) return Promise.reject(errOf(ctx));
  return new Promise<void>((resolve, reject) => {
    const signal = ctx.signal;
    const never = neverDone.has(ctx);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(errOf(ctx));
    };
    const timer = setTimeout(() => {
      if (!never) signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    if (!never) signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Internal: true when `ctx` can never be done (lets helpers skip registering listeners). */
export function isNeverDone(ctx: Context): boolean {
  return neverDone.has(ctx);
}
