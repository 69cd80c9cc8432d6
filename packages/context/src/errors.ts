/**
 * The error a context reports from `err()` (and as `signal.reason`) once it was cancelled by a
 * cancel function, or inherited that cancellation from a parent.
 *
 * Gotcha: the value passed to a cancel function is the context's `cause()`; it is also attached as
 * this error's standard `cause` property, so a log of `signal.reason` still says why.
 */
export class Canceled extends Error {
  constructor(message = 'context canceled', options?: ErrorOptions) {
    super(message, options);
    this.name = 'Canceled';
  }
}

/**
 * The error a context reports from `err()` (and as `signal.reason`) once its deadline passed, or
 * the deadline of an ancestor passed.
 */
export class DeadlineExceeded extends Error {
  constructor(message = 'context deadline exceeded', options?: ErrorOptions) {
    super(message, options);
    this.name = 'DeadlineExceeded';
  }
}

/**
 * The error `Channel.send` rejects with when the channel is (or becomes, while the sender waits)
 * closed.
 */
export class ChannelClosed extends Error {
  constructor(message = 'send on closed channel', options?: ErrorOptions) {
    super(message, options);
    this.name = 'ChannelClosed';
  }
}

/**
 * True when `e` is a context error (`Canceled` or `DeadlineExceeded`), i.e. the work stopped
 * because its context ended, not because it failed by itself.
 *
 * Gotcha: Node APIs given `ctx.signal` reject with an `AbortError` whose `cause` is the context
 * error; this function does not unwrap that — use `ctx.err()` after a failure to decide.
 */
export function isContextError(e: unknown): e is Canceled | DeadlineExceeded {
  return e instanceof Canceled || e instanceof DeadlineExceeded;
}
