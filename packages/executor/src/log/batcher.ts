/**
 * Batches a log's bytes for the reporter: by size or by time, delivered one batch after the other,
 * with backpressure.
 */

/** How logs are batched for the reporter. */
export interface BatchOptions {
  /**
   * A batch is sent once it holds this many bytes, or once it holds at least half of them and the
   * next write would take it past them; no batch is larger. Default 64 KiB.
   */
  batchBytes?: number;
  /** Bytes wait at most this long before they are sent. Default 1000 ms. */
  flushIntervalMs?: number;
}

/** The default batch size: 64 KiB. */
const DEFAULT_BATCH_BYTES = 64 * 1024;
/** The default flush interval: 1 s. */
const DEFAULT_FLUSH_INTERVAL_MS = 1000;

/**
 * Gathers bytes into batches of at most `batchBytes` and hands them to `deliver` in order, one at
 * a time.
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

  /**
   * Adds bytes; resolves when more may be written. What gathered goes as it is once these bytes
   * would take it past `batchBytes` (unless it is less than half of that: then it is filled up),
   * and bytes go on as they came where they can (views, not copies): a batch is copied together
   * only from several writes.
   */
  async write(data: Buffer): Promise<void> {
    if (this.#closed || data.length === 0) return;
    let rest = data;
    if (this.#pendingBytes > 0 && this.#pendingBytes + rest.length > this.#batchBytes) {
      // Less than half a batch does not go alone (a reporter call each): filled up, with a copy.
      if (this.#pendingBytes * 2 < this.#batchBytes) {
        const fill = this.#batchBytes - this.#pendingBytes;
        this.#pending.push(rest.subarray(0, fill));
        this.#pendingBytes += fill;
        rest = rest.subarray(fill);
      }
      await this.#send(this.#takeAll());
    }
    while (rest.length >= this.#batchBytes) {
      const batch = rest.subarray(0, this.#batchBytes);
      rest = rest.subarray(this.#batchBytes);
      await this.#send(batch);
    }
    if (rest.length > 0) {
      this.#pending.push(rest);
      this.#pendingBytes += rest.length;
      if (this.#pendingBytes === this.#batchBytes) await this.#send(this.#takeAll());
    }
    // A timer armed for earlier bytes stays (it may send these a little early): one timer per
    // interval, not one set and cleared per write.
    if (this.#pendingBytes > 0 && this.#timer === undefined && !this.#closed) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        if (this.#pendingBytes > 0) this.#enqueue(this.#takeAll());
      }, this.#intervalMs);
    }
  }

  /** Queues a batch behind the one in flight and waits for that one (at most one in flight, one gathering). */
  async #send(batch: Buffer): Promise<void> {
    const previous = this.#chain;
    this.#enqueue(batch);
    await previous;
  }

  /** Sends what is left and resolves once every batch was delivered. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#clearTimer();
    if (this.#pendingBytes > 0) this.#enqueue(this.#takeAll());
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

  /** Removes every pending byte as one buffer: the piece itself when there is one. */
  #takeAll(): Buffer {
    const pending = this.#pending;
    const bytes = this.#pendingBytes;
    this.#pending = [];
    this.#pendingBytes = 0;
    return pending.length === 1 ? (pending[0] as Buffer) : Buffer.concat(pending, bytes);
  }
}
