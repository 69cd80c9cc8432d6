/**
 * Batches a log's bytes for the reporter: by size or by time, delivered one batch after the other,
 * with backpressure.
 */

/** How logs are batched for the reporter. */
export interface BatchOptions {
  /** A batch is sent once it holds this many bytes; no batch is larger. Default 64 KiB. */
  batchBytes?: number;
  /** Bytes wait at most this long before they are sent. Default 1000 ms. */
  flushIntervalMs?: number;
}

/** The default batch size: 64 KiB. */
const DEFAULT_BATCH_BYTES = 64 * 1024;
/** The default flush interval: 1 s. */
const DEFAULT_FLUSH_INTERVAL_MS = 1000;

/**
 * Gathers bytes into batches and hands them to `deliver` in order, one at a time.
 *
 * `write` resolves once the previous batch was delivered, so a slow `deliver` slows the writer and
 * at most two batches (one in flight, one gathering) are held. A timer sends what gathered after
 * `flushIntervalMs`; `close` sends the rest and clears the timer.
 *
 * Gotcha: `deliver` must not reject (wrap it); `write` must not be called again before the
 * previous call resolved.
 */
export class LogBatcher {
  readonly #deliver: (batch: Buffer) => Promise<void>;
  readonly #batchBytes: number;
  readonly #intervalMs: number;
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #chain: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(deliver: (batch: Buffer) => Promise<void>, options: BatchOptions = {}) {
    this.#deliver = deliver;
    this.#batchBytes = Math.max(1, options.batchBytes ?? DEFAULT_BATCH_BYTES);
    this.#intervalMs = Math.max(0, options.flushIntervalMs ?? DEFAULT_FLUSH_INTERVAL_MS);
  }

  /** Adds bytes; resolves when more may be written. */
  async write(data: Buffer): Promise<void> {
    if (this.#closed || data.length === 0) return;
    this.#pending.push(data);
    this.#pendingBytes += data.length;
    while (this.#pendingBytes >= this.#batchBytes) {
      const previous = this.#chain;
      this.#enqueue(this.#take(this.#batchBytes));
      await previous;
    }
    if (this.#pendingBytes === 0) this.#clearTimer();
    else if (this.#timer === undefined && !this.#closed) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        if (this.#pendingBytes > 0) this.#enqueue(this.#take(this.#pendingBytes));
      }, this.#intervalMs);
    }
  }

  /** Sends what is left and resolves once every batch was delivered. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#clearTimer();
    if (this.#pendingBytes > 0) this.#enqueue(this.#take(this.#pendingBytes));
    await this.#chain;
  }

  #clearTimer(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }

  #enqueue(batch: Buffer): void {
    this.#chain = this.#chain.then(() => this.#deliver(batch));
  }

  /** Removes the first `n` pending bytes as one buffer. */
  #take(n: number): Buffer {
    const first = this.#pending[0] as Buffer;
    if (first.length === n) {
      this.#pending.shift();
      this.#pendingBytes -= n;
      return first;
    }
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    while (filled < n) {
      const head = this.#pending[0] as Buffer;
      const want = n - filled;
      if (head.length <= want) {
        head.copy(out, filled);
        filled += head.length;
        this.#pending.shift();
      } else {
        head.copy(out, filled, 0, want);
        this.#pending[0] = head.subarray(want);
        filled += want;
      }
    }
    this.#pendingBytes -= n;
    return out;
  }
}
