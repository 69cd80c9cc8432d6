/**
 * One container's log path: bytes → masker → size cap → batches → reporter.
 */
import type { Readable } from 'node:stream';
import { afterFunc, type Context, errOf } from '@berth/context';
import { type BatchOptions, LogBatcher } from './batcher.ts';
import { LogCap, type LogLimits } from './cap.ts';
import { SecretMasker } from './masker.ts';

/** Where a {@link LogWriter} sends its batches, and where it says the log is complete. */
export interface LogDestination {
  /** Sends one batch; must not reject. */
  append(chunk: Buffer): Promise<void>;
  /** Says the log is complete; must not reject. */
  close(): Promise<void>;
}

/** Settings of a {@link LogWriter}. */
export interface LogWriterOptions extends BatchOptions {
  /** Secret values to mask. */
  secrets?: Iterable<string>;
  /** The size cap. */
  limits?: LogLimits;
}

/**
 * Writes one log: masks secrets, applies the size cap, batches, and delivers in order with
 * backpressure (`write` resolves when more may be written).
 *
 * Gotcha: calls to `write` must not overlap (await each); `close` may be called at any time, once
 * the last `write` settled, and is idempotent.
 */
export class LogWriter {
  readonly #masker: SecretMasker;
  readonly #cap: LogCap;
  readonly #batcher: LogBatcher;
  readonly #destination: LogDestination;
  #closing: Promise<void> | undefined;
  /** The last byte delivered ended a line (or nothing was delivered). */
  #atLineStart = true;

  constructor(destination: LogDestination, options: LogWriterOptions = {}) {
    this.#destination = destination;
    this.#masker = new SecretMasker(options.secrets ?? []);
    this.#cap = new LogCap(options.limits);
    this.#batcher = new LogBatcher((batch) => destination.append(batch), options);
  }

  /** True once `close` was called. */
  get closed(): boolean {
    return this.#closing !== undefined;
  }

  /** Bytes written so far, before masking and cap. */
  get bytesIn(): number {
    return this.#cap.total;
  }

  /** Masks these values too from now on. */
  addSecrets(...values: string[]): void {
    this.#masker.add(...values);
  }

  /** Writes the next bytes (a string is taken as UTF-8). */
  async write(chunk: Uint8Array | string): Promise<void> {
    if (this.#closing !== undefined) return;
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    if (bytes.length === 0) return;
    const masked = this.#masker.write(bytes);
    if (masked.length === 0) return;
    const capped = this.#cap.write(masked);
    if (capped.length > 0) await this.#deliver(capped);
  }

  /**
   * Flushes what is held back (masker, tail), delivers it, then closes the log at the destination.
   * `note` (the writer's own words, e.g. why the log ends early) is added as the last line, on a
   * line of its own, outside the size cap.
   */
  close(note?: string): Promise<void> {
    this.#closing ??= (async () => {
      const rest = this.#masker.end();
      if (rest.length > 0) {
        const capped = this.#cap.write(rest);
        if (capped.length > 0) await this.#deliver(capped);
      }
      const tail = this.#cap.end();
      if (tail.length > 0) await this.#deliver(tail);
      if (note !== undefined) await this.#deliver(Buffer.from(`${this.#atLineStart ? '' : '\n'}${note}\n`, 'utf8'));
      await this.#batcher.close();
      await this.#destination.close();
    })();
    return this.#closing;
  }

  async #deliver(bytes: Buffer): Promise<void> {
    this.#atLineStart = bytes[bytes.length - 1] === 0x0a;
    await this.#batcher.write(bytes);
  }
}

/**
 * Reads `readable` into `writer` until it ends, awaiting each write (backpressure: a slow writer
 * slows the reading). When `ctx` is done the stream is destroyed and this rejects with its error.
 * Does not close the writer.
 */
export async function pumpLog(ctx: Context, readable: Readable, writer: LogWriter): Promise<void> {
  const stop = afterFunc(ctx, () => readable.destroy(errOf(ctx)));
  try {
    for await (const chunk of readable as AsyncIterable<Uint8Array | string>) {
      await writer.write(chunk);
    }
  } finally {
    stop();
    if (!readable.destroyed) readable.destroy();
  }
}
