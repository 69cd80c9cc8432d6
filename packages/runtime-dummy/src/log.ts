import { Readable } from 'node:stream';
import { afterFunc, type Context } from '@berth/context';
import type { RuntimeError } from '@berth/runtime';

/**
 * A container's combined log as the engine keeps it: every chunk written, in order, from the
 * start. Chunks are kept by reference, so a command that writes one block many times (`yes`)
 * costs one block of memory.
 */
export class LogStore {
  readonly chunks: Buffer[] = [];
  #ended = false;
  #bytes = 0;
  readonly #listeners = new Set<() => void>();

  get ended(): boolean {
    return this.#ended;
  }
  /** Bytes written so far. */
  get bytes(): number {
    return this.#bytes;
  }
  append(data: Buffer | string): void {
    if (this.#ended) return;
    const buffer = typeof data === 'string' ? Buffer.from(data) : data;
    if (buffer.length === 0) return;
    this.chunks.push(buffer);
    this.#bytes += buffer.length;
    this.#notify();
  }
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#notify();
  }
  /** Calls `listener` on the next append or end; returns a function that unsubscribes. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
  #notify(): void {
    const listeners = [...this.#listeners];
    this.#listeners.clear();
    for (const listener of listeners) listener();
  }
}

/**
 * A Readable over `store` from its first byte: follows it until it ends, honours backpressure
 * (reads the store only as fast as the consumer reads), and is destroyed with `ctxError()` when
 * `ctx` is done.
 */
export function tailLog(ctx: Context, store: LogStore, ctxError: () => RuntimeError): Readable {
  let index = 0;
  let unsubscribe: (() => void) | undefined;
  let stopWatchingCtx: (() => boolean) | undefined;
  const release = (): void => {
    unsubscribe?.();
    unsubscribe = undefined;
    stopWatchingCtx?.();
    stopWatchingCtx = undefined;
  };
  const pump = (): void => {
    if (stream.destroyed) return;
    while (index < store.chunks.length) {
      const chunk = store.chunks[index++] as Buffer;
      if (!stream.push(chunk)) return;
    }
    if (store.ended) {
      release();
      stream.push(null);
      return;
    }
    unsubscribe ??= store.onChange(() => {
      unsubscribe = undefined;
      pump();
    });
  };
  const stream = new Readable({
    highWaterMark: 256 * 1024,
    read: pump,
    destroy(error, callback) {
      release();
      callback(error);
    },
  });
  stopWatchingCtx = afterFunc(ctx, () => stream.destroy(ctxError()));
  return stream;
}
