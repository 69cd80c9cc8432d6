import { type Context, type CancelFunc, withCancel } from './context.ts';

/** Options for `TaskGroup`. */
export interface TaskGroupOptions {
  /** At most this many tasks run at once; further `go()` calls queue (FIFO). Default: unlimited. */
  limit?: number;
}

/**
 * Go's `errgroup`: runs tasks under a shared child context; the first failure cancels that context
 * (cause = the error) so the other tasks stop, and `wait()` reports it.
 *
 * Gotchas: `wait()` settles only after every task settled, including tasks that ignore the
 * context. Tasks queued by `limit` still start after a failure (with an already-cancelled `ctx`),
 * as in Go — check `ctx.signal` first. The group's context is also cancelled when `wait()` settles.
 */
export class TaskGroup {
  /** The group's context: cancelled by the first error (cause = that error), or when `wait()` settles. */
  readonly ctx: Context;
  readonly #cancel: CancelFunc;
  readonly #limit: number;
  readonly #queue: Array<(ctx: Context) => Promise<void>> = [];
  #active = 0;
  #pending = 0;
  #failed = false;
  #error: unknown;
  #idle: Array<() => void> = [];

  constructor(parent: Context, options: TaskGroupOptions = {}) {
    const limit = options.limit ?? Infinity;
    if (!(limit >= 1)) throw new RangeError(`TaskGroup limit must be >= 1, got ${String(options.limit)}`);
    this.#limit = limit;
    [this.ctx, this.#cancel] = withCancel(parent);
  }

  /** Tasks started or queued and not yet settled. */
  get pending(): number {
    return this.#pending;
  }

  /**
   * Starts `fn(ctx)` now (it runs synchronously up to its first `await`), or queues it when `limit`
   * tasks are running. A synchronous throw counts as a failure like a rejection.
   */
  go(fn: (ctx: Context) => Promise<void>): void {
    this.#pending++;
    if (this.#active < this.#limit) this.#start(fn);
    else this.#queue.push(fn);
  }

  #start(fn: (ctx: Context) => Promise<void>): void {
    this.#active++;
    let result: Promise<void>;
    try {
      result = Promise.resolve(fn(this.ctx));
    } catch (e) {
      this.#fail(e);
      this.#settle();
      return;
    }
    result.then(
      () => this.#settle(),
      (e: unknown) => {
        this.#fail(e);
        this.#settle();
      },
    );
  }

  #fail(e: unknown): void {
    if (this.#failed) return;
    this.#failed = true;
    this.#error = e;
    this.#cancel(e);
  }

  #settle(): void {
    this.#active--;
    this.#pending--;
    const next = this.#queue.shift();
    if (next) this.#start(next);
    if (this.#pending === 0) {
      const idle = this.#idle;
      this.#idle = [];
      for (const resolve of idle) resolve();
    }
  }

  /**
   * Waits until every task settled, cancels the group's context, then rejects with the first error
   * (or resolves).
   */
  async wait(): Promise<void> {
    if (this.#pending > 0) await new Promise<void>((resolve) => this.#idle.push(resolve));
    this.#cancel();
    if (this.#failed) throw this.#error;
  }
}
