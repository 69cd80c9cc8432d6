import { Readable } from 'node:stream';

/** Options of {@link DockerLogDemuxer}. */
export interface DockerLogDemuxerOptions {
  /** Turns the source's failure (a reset socket, a premature close) into the error the reader sees. */
  mapError?: (error: unknown) => Error;
  /** `highWaterMark` of the demuxed stream, in bytes; 64 KiB by default. */
  highWaterMark?: number;
}

const HEADER_BYTES = 8;
/** Stream types of Docker's multiplexed framing (moby `pkg/stdcopy`): 0 stdin, 1 stdout, 2 stderr, 3 engine error. */
const STDOUT = 1;
const SYSTEMERR = 3;

/**
 * Turns the Docker engine's multiplexed log stream (8-byte frame headers: stream type, three zero
 * bytes, big-endian payload length) into one Readable of the payload bytes, stdout and stderr in
 * the order the engine sent them.
 *
 * Unlike docker-modem's `demuxStream`, it ends when the source ends, reports the source's errors,
 * and honours backpressure: when the reader is slow the source is paused, so the engine's socket
 * (and the container's log) waits instead of filling memory. Payloads are passed on as views of
 * the received chunks, without copying.
 *
 * Gotcha: a stream that does not start with a valid frame header (a TTY container's raw stream)
 * is passed through as is; an error frame (type 3) destroys the stream with the engine's message;
 * a source that ends in the middle of a frame is an error, not a short read.
 */
export class DockerLogDemuxer extends Readable {
  readonly #source: Readable;
  readonly #mapError: (error: unknown) => Error;
  readonly #header = Buffer.alloc(HEADER_BYTES);
  #headerFilled = 0;
  #remaining = 0;
  #type = STDOUT;
  #framesSeen = 0;
  #raw = false;
  #systemError: Buffer[] = [];
  #pausedByUs = false;
  #ended = false;

  constructor(source: Readable, options: DockerLogDemuxerOptions = {}) {
    super({ highWaterMark: options.highWaterMark ?? 64 * 1024 });
    this.#source = source;
    this.#mapError = options.mapError ?? ((error) => (error instanceof Error ? error : new Error(String(error))));
    source.on('data', this.#onData);
    source.once('end', this.#onEnd);
    source.once('error', this.#onError);
    source.once('close', this.#onClose);
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
        if (this.#remaining > 0) continue;
        // Zero-length frame.
        this.#endFrame();
        if (this.destroyed) return;
        continue;
      }
      const take = Math.min(this.#remaining, data.length - offset);
      const payload = data.subarray(offset, offset + take);
      offset += take;
      this.#remaining -= take;
      if (this.#type === SYSTEMERR) {
        this.#systemError.push(payload);
      } else {
        wantMore = this.push(payload) && wantMore;
      }
      if (this.#remaining === 0) {
        this.#endFrame();
        if (this.destroyed) return;
      }
    }
    if (!wantMore && !this.#pausedByUs && !this.#ended) {
      this.#pausedByUs = true;
      this.#source.pause();
    }
  };

  /** Reads the header just completed; false when it is not a frame header (raw stream). */
  #startFrame(): boolean {
    const header = this.#header;
    const type = header[0] ?? 0;
    const valid = type <= SYSTEMERR && header[1] === 0 && header[2] === 0 && header[3] === 0;
    if (!valid) {
      if (this.#framesSeen === 0) {
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
    return true;
  }

  #endFrame(): void {
    this.#headerFilled = 0;
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
    this.push(null);
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

/** Exposed for tests: the frame header Docker puts before each payload. */
export function frameHeader(stream: 0 | 1 | 2 | 3, length: number): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  header[0] = stream;
  header.writeUInt32BE(length, 4);
  return header;
}
