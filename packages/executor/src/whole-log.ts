/**
 * For reporters whose server replaces the whole log on each upload (Vela's `PUT …/logs`): keeps
 * each log and uploads it throttled, so the bytes sent stay a small multiple of the log's size.
 */
import type { Context } from '@berth/context';
import type { Target } from './reporter.ts';

/** Uploads the whole log of `target` so far. */
export type WholeLogUpload = (ctx: Context, target: Target, log: Uint8Array) => Promise<void>;

/** Settings of {@link WholeLogUploader}. */
export interface WholeLogUploaderOptions {
  /** At most one upload per log per this many ms (the last one aside). Default 1000. */
  minIntervalMs?: number;
  /**
   * A log is uploaded again only once it grew to this many times its size at the last upload.
   * Default 2: all uploads of a log of size S send at most 3·S bytes (2·S before the last, S at close).
   */
  growthFactor?: number;
  /** The clock, for tests. */
  now?: () => number;
}

interface LogState {
  chunks: Uint8Array[];
  size: number;
  uploadedSize: number;
  uploadedAt: number;
}

/**
 * Turns `appendLog` / `closeLog` into throttled whole-log uploads: call `append` from the
 * reporter's `appendLog` and `close` from its `closeLog`.
 *
 * Gotcha: it keeps each open log in memory (the executor's size cap bounds it: 16 MiB by default)
 * and forgets it on `close`.
 */
export class WholeLogUploader {
  readonly #upload: WholeLogUpload;
  readonly #minIntervalMs: number;
  readonly #factor: number;
  readonly #now: () => number;
  readonly #logs = new Map<string, LogState>();
  /** Bytes sent so far, all logs together. */
  bytesSent = 0;

  constructor(upload: WholeLogUpload, options: WholeLogUploaderOptions = {}) {
    this.#upload = upload;
    this.#minIntervalMs = options.minIntervalMs ?? 1000;
    this.#factor = Math.max(1.1, options.growthFactor ?? 2);
    this.#now = options.now ?? Date.now;
  }

  /** Adds `chunk` to `target`'s log; uploads the whole log when it is due. */
  async append(ctx: Context, target: Target, chunk: Uint8Array): Promise<void> {
    let state = this.#logs.get(target.id);
    if (state === undefined) {
      state = { chunks: [], size: 0, uploadedSize: 0, uploadedAt: -Infinity };
      this.#logs.set(target.id, state);
    }
    state.chunks.push(chunk);
    state.size += chunk.length;
    const grown = state.uploadedSize === 0 || state.size >= state.uploadedSize * this.#factor;
    if (grown && this.#now() - state.uploadedAt >= this.#minIntervalMs) await this.#send(ctx, target, state);
  }

  /** Uploads `target`'s complete log (unless it was already sent whole) and forgets it. */
  async close(ctx: Context, target: Target): Promise<void> {
    const state = this.#logs.get(target.id);
    this.#logs.delete(target.id);
    if (state === undefined || state.size === state.uploadedSize) return;
    await this.#send(ctx, target, state);
  }

  async #send(ctx: Context, target: Target, state: LogState): Promise<void> {
    const whole = state.chunks.length === 1 ? (state.chunks[0] as Uint8Array) : Buffer.concat(state.chunks);
    state.chunks = [whole];
    state.uploadedSize = whole.length;
    state.uploadedAt = this.#now();
    this.bytesSent += whole.length;
    await this.#upload(ctx, target, whole);
  }
}
