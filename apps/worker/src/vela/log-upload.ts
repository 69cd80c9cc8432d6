/**
 * Uploads a growing log to a server that only takes the whole log (Vela's log PUT replaces the
 * stored data), keeping the bytes sent a small, bounded multiple of the log's size.
 */
import { type Context, sleep } from '@berth/context';

/** Sends the whole log so far; rejects on failure. */
type UploadFn = (ctx: Context, log: Uint8Array, final: boolean) => Promise<void>;

/** Options of {@link WholeLogUploader}. */
export interface WholeLogUploaderOptions {
  upload: UploadFn;
  /** Keep at most this many bytes of the log (VELA_EXECUTOR_MAX_LOG_SIZE); 0: no limit. */
  maxBytes?: number;
  /**
   * Byte budget of the uploads before the final one, as a multiple of the log's current size
   * (default 1.5): a non-final upload of a log of size s starts only when
   * `sent + s ≤ budget·s + slackBytes`, counting failed attempts too. With the final upload,
   * every byte sent adds up to at most `(budget + 1)·size + slackBytes`, plus one log per failed
   * final attempt.
   */
  budget?: number;
  /** Bytes the budget allows on top, so small logs update live (default 256 KiB). */
  slackBytes?: number;
  /** Upload when the part not yet sent is at least this fraction of what the last upload carried (default 0.5)… */
  growthFraction?: number;
  /** …or when this long has passed since the last upload and something is unsent (default 3000 ms). */
  intervalMs?: number;
  /** Attempts of the final upload (default 6), with capped jittered backoff between them. */
  finalAttempts?: number;
  /** First backoff of the final upload's retries in ms (default 500, doubling, capped at 10 s). */
  finalBackoffMs?: number;
  /** Called when an upload fails (a non-final one is not retried: the next one carries everything anyway). */
  onError?: (e: unknown, final: boolean) => void;
}

/** What an uploader sent. */
export interface UploadStats {
  /** Size of the log kept (after the size cap). */
  logBytes: number;
  /** Bytes received beyond the cap and dropped. */
  droppedBytes: number;
  /** Bytes of log data in every upload attempt, failed ones included. */
  sentBytes: number;
  uploads: number;
  /** Failed attempts, the final upload's included. */
  failures: number;
  /** Failed attempts of the final upload (each costs one more whole log). */
  finalFailures: number;
  /** True once the final upload succeeded (or there was nothing to upload). */
  complete: boolean;
}

/**
 * Keeps a log as it grows (`append`) and uploads the whole of it now and then, at most one upload
 * at a time, in order, so the server never goes back to an older version. A failed upload is not
 * retried as such: the next one carries everything. `finish` waits for the upload in flight, then
 * uploads the complete log with the retries the `upload` function does.
 *
 * Gotcha: it holds the whole log in memory (bounded by `maxBytes`), which a whole-log API needs.
 */
export class WholeLogUploader {
  readonly #o: Required<Omit<WholeLogUploaderOptions, 'onError'>> & Pick<WholeLogUploaderOptions, 'onError'>;
  #buf: Buffer = Buffer.alloc(64 * 1024);
  #size = 0;
  #dropped = 0;
  /** Size of the log the last attempt carried. */
  #lastAttempt = 0;
  /** Size of the log the last successful upload carried. */
  #acked = 0;
  #lastAttemptAt = 0;
  #sent = 0;
  #uploads = 0;
  #failures = 0;
  #finalFailures = 0;
  #inFlight: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #ctx: Context | undefined;
  #finished = false;
  #complete = false;

  constructor(options: WholeLogUploaderOptions) {
    this.#o = {
      maxBytes: 0,
      budget: 1.5,
      finalAttempts: 6,
      finalBackoffMs: 500,
      slackBytes: 256 * 1024,
      growthFraction: 0.5,
      intervalMs: 3_000,
      ...options,
    };
  }

  /** Adds bytes to the log and starts an upload if one is due. `ctx` bounds that upload. */
  append(ctx: Context, chunk: Uint8Array): void {
    if (this.#finished) return;
    this.#ctx = ctx;
    let take = chunk.byteLength;
    if (this.#o.maxBytes > 0) take = Math.max(0, Math.min(take, this.#o.maxBytes - this.#size));
    this.#dropped += chunk.byteLength - take;
    if (take > 0) {
      if (this.#size + take > this.#buf.length) {
        const grown = Buffer.alloc(Math.max(this.#size + take, this.#buf.length * 2));
        this.#buf.copy(grown, 0, 0, this.#size);
        this.#buf = grown;
      }
      this.#buf.set(chunk.subarray(0, take), this.#size);
      this.#size += take;
    }
    this.#maybeUpload();
  }

  /** The log so far (a copy). */
  bytes(): Buffer {
    return Buffer.from(this.#buf.subarray(0, this.#size));
  }

  /** Counters, for logs and tests. */
  stats(): UploadStats {
    return {
      logBytes: this.#size,
      droppedBytes: this.#dropped,
      sentBytes: this.#sent,
      uploads: this.#uploads,
      failures: this.#failures,
      finalFailures: this.#finalFailures,
      complete: this.#complete,
    };
  }

  /**
   * No more bytes: waits for the upload in flight, then uploads the whole log unless the server
   * already has it. Rejects when that final upload fails (after the upload function's retries).
   */
  async finish(ctx: Context): Promise<void> {
    this.#finished = true;
    this.#clearTimer();
    if (this.#inFlight) await this.#inFlight;
    if (this.#acked === this.#size) {
      this.#complete = true;
      return;
    }
    const size = this.#size;
    for (let attempt = 1; ; attempt++) {
      this.#uploads += 1;
      this.#sent += size;
      try {
        await this.#o.upload(ctx, this.#buf.subarray(0, size), true);
        break;
      } catch (e) {
        this.#failures += 1;
        this.#finalFailures += 1;
        this.#o.onError?.(e, true);
        if (attempt >= this.#o.finalAttempts || ctx.signal.aborted) throw e;
        const d = Math.min(10_000, this.#o.finalBackoffMs * 2 ** (attempt - 1));
        await sleep(ctx, d / 2 + (Math.random() * d) / 2);
      }
    }
    this.#acked = size;
    this.#complete = true;
  }

  /** Stops the timer without a final upload (the build is gone). */
  abandon(): void {
    this.#finished = true;
    this.#clearTimer();
  }

  #clearTimer(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }

  #withinBudget(size: number): boolean {
    return this.#sent + size <= this.#o.budget * size + this.#o.slackBytes;
  }

  #maybeUpload(): void {
    if (this.#finished || this.#inFlight || (this.#size <= this.#lastAttempt && this.#acked === this.#size)) return;
    const size = this.#size;
    if (size === 0 || !this.#withinBudget(size)) return; // more bytes will come, or finish() sends the rest
    const unsent = size - this.#lastAttempt;
    const grown = unsent > 0 && unsent >= this.#o.growthFraction * this.#lastAttempt;
    const waited = Date.now() - this.#lastAttemptAt;
    const pending = size !== this.#acked;
    if (grown || (pending && waited >= this.#o.intervalMs)) {
      this.#clearTimer();
      this.#start(size);
    } else if (pending && this.#timer === undefined) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.#maybeUpload();
      }, this.#o.intervalMs - waited);
    }
  }

  #start(size: number): void {
    const ctx = this.#ctx;
    if (!ctx || ctx.signal.aborted) return;
    this.#lastAttempt = size;
    this.#lastAttemptAt = Date.now();
    this.#uploads += 1;
    this.#sent += size;
    const run = async (): Promise<void> => {
      try {
        await this.#o.upload(ctx, this.#buf.subarray(0, size), false);
        this.#acked = Math.max(this.#acked, size);
      } catch (e) {
        this.#failures += 1;
        this.#o.onError?.(e, false);
      }
    };
    this.#inFlight = run().finally(() => {
      this.#inFlight = undefined;
      this.#maybeUpload();
    });
  }
}
