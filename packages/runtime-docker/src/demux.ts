import { Readable } from 'node:stream';

/** Options of {@link DockerLogDemuxer}. */
export interface DockerLogDemuxerOptions {
  /** Turns the source's failure (a reset socket, a premature close) into the error the reader sees. */
  mapError?: (error: unknown) => Error;
  /** `highWaterMark` of the demuxed stream, in bytes; 64 KiB by default. */
  highWaterMark?: number;
  /**
   * The source was requested with `timestamps=true`: each frame starts with the engine's
   * RFC 3339 timestamp and a space, which are removed (and remembered, see `continueWith`).
   */
  timestamps?: boolean;
  /**
   * Called when a source ends cleanly, with the timestamp of the last frame delivered (when
   * `timestamps` is on). May return another multiplexed source to read on from: its frames up to
   * and including that timestamp are dropped, so it may overlap what was delivered. Resolve
   * `undefined` to end the stream.
   */
  continueWith?: (lastTimestamp: string | undefined) => Promise<Readable | undefined>;
}

const HEADER_BYTES = 8;
/** Stream types of Docker's multiplexed framing (moby `pkg/stdcopy`): 0 stdin, 1 stdout, 2 stderr, 3 engine error. */
const STDOUT = 1;
const SYSTEMERR = 3;
/** Longest timestamp prefix accepted (`2006-01-02T15:04:05.000000000+07:00 `). */
const MAX_TIMESTAMP_BYTES = 48;

/**
 * Turns the Docker engine's multiplexed log stream (8-byte frame headers: stream type, three zero
 * bytes, big-endian payload length) into one Readable of the payload bytes, stdout and stderr in
 * the order the engine sent them.
 *
 * Unlike docker-modem's `demuxStream`, it ends when the source ends, reports the source's errors,
 * and honours backpressure: when the reader is slow the source is paused, so the engine's socket
 * (and the container's log) waits instead of filling memory. The payloads of one received chunk
 * are passed on as one buffer: a view of the chunk when it holds one, else one copy of them all.
 *
 * Gotcha: a stream that does not start with a valid frame header (a TTY container's raw stream)
 * is passed through as is; an error frame (type 3) destroys the stream with the engine's message;
 * a source that ends in the middle of a frame is an error, not a short read.
 */
export class DockerLogDemuxer extends Readable {
  #source: Readable;
  readonly #mapError: (error: unknown) => Error;
  readonly #timestamps: boolean;
  readonly #continueWith: DockerLogDemuxerOptions['continueWith'];
  readonly #header = Buffer.alloc(HEADER_BYTES);
  #headerFilled = 0;
  #remaining = 0;
  #type = STDOUT;
  #framesSeen = 0;
  #raw = false;
  #systemError: Buffer[] = [];
  /** Payloads of the source chunk being read, pushed together at its end. */
  #out: Buffer[] = [];
  #outBytes = 0;
  #pausedByUs = false;
  #ended = false;
  /**
   * Pieces of the current frame's timestamp prefix read so far (it may span chunks), while it is
   * being read; undefined once it is (or when frames have none).
   */
  #prefix: Buffer[] | undefined;
  #prefixBytes = 0;
  #dropFrame = false;
  #skipThrough: string | undefined;
  /** The last delivered frame's timestamp, kept as bytes and decoded only when asked for. */
  #lastTimestamp: Buffer | undefined;

  constructor(source: Readable, options: DockerLogDemuxerOptions = {}) {
    super({ highWaterMark: options.highWaterMark ?? 64 * 1024 });
    this.#source = source;
    this.#mapError = options.mapError ?? ((error) => (error instanceof Error ? error : new Error(String(error))));
    this.#timestamps = options.timestamps ?? false;
    this.#continueWith = options.continueWith;
    this.#attach();
  }

  /** The engine's timestamp of the last frame delivered (with `timestamps`). */
  get lastTimestamp(): string | undefined {
    return this.#lastTimestamp?.toString('latin1');
  }

  override _read(): void {
    if (this.#pausedByUs) {
      this.#pausedByUs = false;
      this.#source.resume();
    }
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#detach();
    if (!this.#source.destroyed) this.#source.destroy();
    callback(error);
  }

  #attach(): void {
    this.#ended = false;
    this.#source.on('data', this.#onData);
    this.#source.once('end', this.#onEnd);
    this.#source.once('error', this.#onError);
    this.#source.once('close', this.#onClose);
    // A source handed over paused (getEngineStream's socket) does not flow on a 'data' listener alone.
    this.#source.resume();
  }

  #detach(): void {
    this.#source.off('data', this.#onData);
    this.#source.off('end', this.#onEnd);
    this.#source.off('close', this.#onClose);
    // Keep an error listener: a late socket error must not become an uncaught exception.
    this.#source.off('error', this.#onError);
    this.#source.on('error', ignore);
  }

  readonly #onData = (chunk: Buffer | string): void => {
    const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    let wantMore = true;
    let offset = 0;
    while (offset < data.length) {
      if (this.#raw) {
        wantMore = this.push(offset === 0 ? data : data.subarray(offset));
        break;
      }
      if (this.#remaining === 0 && this.#headerFilled < HEADER_BYTES) {
        const take = Math.min(HEADER_BYTES - this.#headerFilled, data.length - offset);
        data.copy(this.#header, this.#headerFilled, offset, offset + take);
        this.#headerFilled += take;
        offset += take;
        if (this.#headerFilled < HEADER_BYTES) break;
        if (!this.#startFrame()) {
          if (this.destroyed) return;
          // Not multiplexed: pass the header bytes and the rest through unchanged.
          wantMore = this.push(Buffer.from(this.#header));
          continue;
        }
        if (this.#remaining === 0) {
          this.#endFrame();
          if (this.destroyed) return;
        }
        continue;
      }
      if (this.#prefix !== undefined) {
        // Reading the frame's timestamp, up to and including its space: one search, not a loop
        // over bytes (a 1 KiB line's frame spends a tenth of its bytes on it).
        const limit = Math.min(data.length, offset + this.#remaining);
        const space = data.indexOf(0x20, offset);
        const found = space >= 0 && space < limit;
        const end = found ? space : limit;
        if (this.#prefixBytes + (end - offset) > MAX_TIMESTAMP_BYTES) {
          this.destroy(new Error("the Docker engine's log stream is corrupt: a frame has no timestamp"));
          return;
        }
        const piece = data.subarray(offset, end);
        this.#remaining -= end - offset + (found ? 1 : 0);
        offset = end + (found ? 1 : 0);
        if (found) {
          this.#endPrefix(this.#prefix.length === 0 ? piece : Buffer.concat([...this.#prefix, piece]));
        } else {
          this.#prefix.push(piece);
          this.#prefixBytes += piece.length;
        }
        if (this.#remaining === 0) {
          this.#prefix = undefined;
          this.#endFrame();
          if (this.destroyed) return;
        }
        continue;
      }
      const take = Math.min(this.#remaining, data.length - offset);
      const payload = data.subarray(offset, offset + take);
      offset += take;
      this.#remaining -= take;
      if (this.#type === SYSTEMERR) {
        this.#systemError.push(payload);
      } else if (!this.#dropFrame) {
        this.#out.push(payload);
        this.#outBytes += take;
      }
      if (this.#remaining === 0) {
        if (this.#type === SYSTEMERR) wantMore = this.#flush() && wantMore;
        this.#endFrame();
        if (this.destroyed) return;
      }
    }
    wantMore = this.#flush() && wantMore;
    if (!wantMore && !this.#pausedByUs && !this.#ended) {
      this.#pausedByUs = true;
      this.#source.pause();
    }
  };

  /**
   * Pushes the payloads gathered from one source chunk as one buffer: a chunk holds many short
   * frames (the engine writes one per log line), and one push each costs more than one copy.
   */
  #flush(): boolean {
    const out = this.#out;
    if (out.length === 0) return true;
    const bytes = out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out, this.#outBytes);
    this.#out = [];
    this.#outBytes = 0;
    return this.push(bytes);
  }

  /** Reads the header just completed; false when it is not a frame header (raw stream). */
  #startFrame(): boolean {
    const header = this.#header;
    const type = header[0] ?? 0;
    const valid = type <= SYSTEMERR && header[1] === 0 && header[2] === 0 && header[3] === 0;
    if (!valid) {
      if (this.#framesSeen === 0 && !this.#timestamps) {
        this.#raw = true;
        return false;
      }
      this.destroy(new Error(`the Docker engine's log stream is corrupt: invalid frame header ${header.toString('hex')}`));
      return false;
    }
    this.#framesSeen++;
    this.#type = type;
    this.#remaining = header.readUInt32BE(4);
    this.#headerFilled = 0;
    this.#dropFrame = false;
    this.#prefix = this.#timestamps && type !== SYSTEMERR ? [] : undefined;
    this.#prefixBytes = 0;
    return true;
  }

  #endPrefix(timestamp: Buffer): void {
    this.#prefix = undefined;
    if (this.#skipThrough !== undefined && compareTimestamps(timestamp.toString('latin1'), this.#skipThrough) <= 0) {
      this.#dropFrame = true;
      return;
    }
    this.#lastTimestamp = timestamp;
  }

  #endFrame(): void {
    this.#headerFilled = 0;
    this.#dropFrame = false;
    if (this.#type === SYSTEMERR) {
      const message = Buffer.concat(this.#systemError).toString('utf8').trim();
      this.#systemError = [];
      this.destroy(new Error(`the Docker engine reported an error while streaming logs: ${message}`));
    }
  }

  readonly #onEnd = (): void => {
    this.#ended = true;
    if (!this.#raw && (this.#remaining > 0 || this.#headerFilled > 0)) {
      this.destroy(this.#mapError(Object.assign(new Error('the log stream ended in the middle of a frame'), { code: 'ERR_STREAM_PREMATURE_CLOSE' })));
      return;
    }
    this.#detach();
    if (!this.#continueWith) {
      this.push(null);
      return;
    }
    const skipThrough = this.lastTimestamp;
    this.#continueWith(skipThrough).then(
      (next) => {
        if (this.destroyed) {
          next?.destroy();
          return;
        }
        if (!next) {
          this.push(null);
          return;
        }
        this.#source = next;
        this.#skipThrough = skipThrough;
        this.#framesSeen = 0;
        this.#pausedByUs = false;
        this.#attach();
      },
      (error: unknown) => this.destroy(this.#mapError(error)),
    );
  };

  readonly #onError = (error: unknown): void => {
    this.destroy(this.#mapError(error));
  };

  readonly #onClose = (): void => {
    if (this.#ended || this.destroyed) return;
    // 'close' without 'end': the connection went away.
    this.destroy(this.#mapError(Object.assign(new Error('the log stream closed before it ended'), { code: 'ERR_STREAM_PREMATURE_CLOSE' })));
  };
}

function ignore(): void {}

/**
 * Orders two engine timestamps. The engine writes them in Go's fixed-width RFC 3339 form
 * (`2006-01-02T15:04:05.000000000Z`), which orders as text; others are compared by value.
 */
export function compareTimestamps(a: string, b: string): number {
  const fixed = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/;
  if (fixed.test(a) && fixed.test(b)) return a < b ? -1 : a > b ? 1 : 0;
  return toNanoseconds(a) < toNanoseconds(b) ? -1 : toNanoseconds(a) > toNanoseconds(b) ? 1 : 0;
}

function toNanoseconds(timestamp: string): bigint {
  const match = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(.*)$/.exec(timestamp);
  const seconds = Date.parse(`${match?.[1] ?? timestamp}${match?.[3] ?? ''}`);
  const fraction = (match?.[2] ?? '').padEnd(9, '0').slice(0, 9);
  return BigInt(Number.isNaN(seconds) ? 0 : seconds) * 1_000_000n + BigInt(fraction || '0');
}

/** The frame header Docker puts before each payload: stream type (0 stdin, 1 stdout, 2 stderr, 3 error) and length. */
export function frameHeader(stream: 0 | 1 | 2 | 3, length: number): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  header[0] = stream;
  header.writeUInt32BE(length, 4);
  return header;
}
