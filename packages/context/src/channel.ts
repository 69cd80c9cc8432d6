import { type Context, background, errOf, isNeverDone } from './context.ts';
import { ChannelClosed } from './errors.ts';

/** What `Channel.receive` resolves with: a value, or `ok: false` once closed and drained. */
export type ReceiveResult<T> = { value: T; ok: true } | { value: undefined; ok: false };

interface Waiter {
  /** Removes the waiter's abort listener. */
  release(): void;
}
interface Sender<T> extends Waiter {
  value: T;
  resolve(): void;
  reject(e: unknown): void;
}
interface Receiver<T> extends Waiter {
  resolve(r: ReceiveResult<T>): void;
}

/**
 * A Go-style channel. Unbuffered by default (a `send` resolves once a receiver took the value);
 * with `capacity > 0` a `send` resolves as soon as the value is buffered.
 *
 * Gotchas: a context that is already done wins over a ready value or buffer slot (the call rejects
 * with `ctx.err()`). Values are delivered in FIFO order to receivers in FIFO order. `close()` makes
 * waiting and later senders reject with `ChannelClosed`; buffered values can still be received.
 */
export class Channel<T> {
  readonly #capacity: number;
  readonly #buffer: T[] = [];
  readonly #senders: Array<Sender<T>> = [];
  readonly #receivers: Array<Receiver<T>> = [];
  #closed = false;

  constructor(capacity = 0) {
    if (!Number.isInteger(capacity) || capacity < 0) throw new RangeError(`Channel capacity must be a non-negative integer, got ${capacity}`);
    this.#capacity = capacity;
  }

  /** True once `close()` was called (buffered values may remain). */
  get closed(): boolean {
    return this.#closed;
  }

  /** Number of buffered values. */
  get length(): number {
    return this.#buffer.length;
  }

  /** Sends `value`; rejects with `ChannelClosed` if the channel is closed, or `ctx.err()` if `ctx` is done first. */
  send(ctx: Context, value: T): Promise<void> {
    if (this.#closed) return Promise.reject(new ChannelClosed());
    if (ctx.signal.aborted) return Promise.reject(errOf(ctx));
    const receiver = this.#receivers.shift();
    if (receiver) {
      receiver.release();
      receiver.resolve({ value, ok: true });
      return Promise.resolve();
    }
    if (this.#buffer.length < this.#capacity) {
      this.#buffer.push(value);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const sender: Sender<T> = { value, resolve, reject, release: () => undefined };
      this.#senders.push(sender);
      this.#watch(ctx, sender, this.#senders, () => reject(errOf(ctx)));
    });
  }

  /**
   * Receives the next value: `{ value, ok: true }`, or `{ value: undefined, ok: false }` once the
   * channel is closed and drained. Rejects with `ctx.err()` if `ctx` is done first.
   */
  receive(ctx: Context): Promise<ReceiveResult<T>> {
    if (ctx.signal.aborted) return Promise.reject(errOf(ctx));
    if (this.#buffer.length > 0) {
      const value = this.#buffer.shift() as T;
      const sender = this.#senders.shift();
      if (sender) {
        sender.release();
        this.#buffer.push(sender.value);
        sender.resolve();
      }
      return Promise.resolve({ value, ok: true });
    }
    const sender = this.#senders.shift();
    if (sender) {
      sender.release();
      sender.resolve();
      return Promise.resolve({ value: sender.value, ok: true });
    }
    if (this.#closed) return Promise.resolve({ value: undefined, ok: false });
    return new Promise<ReceiveResult<T>>((resolve, reject) => {
      const receiver: Receiver<T> = { resolve, release: () => undefined };
      this.#receivers.push(receiver);
      this.#watch(ctx, receiver, this.#receivers, () => reject(errOf(ctx)));
    });
  }

  #watch<W extends Waiter>(ctx: Context, waiter: W, queue: W[], onAbort: () => void): void {
    if (isNeverDone(ctx)) return;
    const signal = ctx.signal;
    const listener = (): void => {
      const i = queue.indexOf(waiter);
      if (i >= 0) queue.splice(i, 1);
      onAbort();
    };
    signal.addEventListener('abort', listener, { once: true });
    waiter.release = () => signal.removeEventListener('abort', listener);
  }

  /**
   * Closes the channel: waiting senders reject with `ChannelClosed`, waiting receivers get
   * `ok: false`. Idempotent.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const sender of this.#senders.splice(0)) {
      sender.release();
      sender.reject(new ChannelClosed());
    }
    for (const receiver of this.#receivers.splice(0)) {
      receiver.release();
      receiver.resolve({ value: undefined, ok: false });
    }
  }

  /** Iterates received values until the channel is closed and drained (never cancelled). */
  [Symbol.asyncIterator](): AsyncIterator<T> {
    return this.iterate(background())[Symbol.asyncIterator]();
  }

  /**
   * Iterates received values until the channel is closed and drained; the iteration rejects with
   * `ctx.err()` when `ctx` is done first. Breaking out of the loop does not close the channel.
   */
  async *iterate(ctx: Context): AsyncIterable<T> {
    for (;;) {
      const r = await this.receive(ctx);
      if (!r.ok) return;
      yield r.value;
    }
  }
}
