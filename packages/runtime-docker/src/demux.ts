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
   * `timestamps` is on; the latest of the streams', each stream's in `progress`). May return
   * another multiplexed source to read on from: its frames of each stream up to and including that
   * stream's last delivered timestamp are dropped, so it may overlap what was delivered. Or a
   * {@link LogContinuation} that reads from the start, skipping by bytes. Resolve `undefined` to
   * end the stream.
   */
  continueWith?: (lastTimestamp: string | undefined, progress: LogProgress) => Promise<Readable | LogContinuation | undefined>;
  /**
   * The first source is a live one (the container's attach): it carries no timestamps, and its
   * loss — an error, a close before its end, an end in the middle of a frame, or a reader that
   * left it paused for `stallMs` — is not an error but a call of `continueWith` with `lost` set,
   * to read on from the engine's log file.
   */
  live?: boolean;
  /** How long a live source may stay paused by a slow reader before it is given up (`lost`); 5 000 ms by default. */
  stallMs?: number;
  /**
   * How many bytes of a live source are read ahead of a slow reader, into this stream's buffer,
   * before the source is paused (and, paused for `stallMs`, given up): up to that much, the
   * container never waits on the reader. `highWaterMark` by default.
   */
  liveBufferBytes?: number;
  /**
   * The source's chunks are this demuxer's to overwrite (a socket it alone reads): the payloads of
   * a chunk are moved together inside it, over the frame headers, and passed on as one view of it,
   * with no copy. Off by default: a source whose chunks are kept elsewhere would see them change.
   */
  reuseChunks?: boolean;
  /**
   * Whether a paused live source still holds its writer (the container runs); when it says no, a
   * slow reader is no reason to give the source up. Always yes by default.
   */
  holds?: () => boolean;
}

/** What was delivered so far, for {@link DockerLogDemuxerOptions.continueWith}. */
export interface LogProgress {
  /** Payload bytes delivered per stream type (1 stdout, 2 stderr), over every source so far. */
  readonly delivered: readonly number[];
  /** The timestamp of the last frame delivered per stream type (see {@link DockerLogDemuxer.lastTimestamps}). */
  readonly lastTimestamps: readonly (string | undefined)[];
  /** The source was a live one and was lost (or given up) before its end: the rest must come from elsewhere. */
  readonly lost: boolean;
}

/**
 * A source to read on from, with how to read it: `timestamps` as the option of that name, and
 * `fromStart` when it holds the whole log again: then the first `delivered` bytes of each stream
 * are dropped, so what follows the seam is neither lost nor repeated.
 */
export interface LogContinuation {
  readonly source: Readable;
  readonly timestamps: boolean;
  readonly fromStart: boolean;
}

const HEADER_BYTES = 8;
/** Stream types of Docker's multiplexed framing (moby `pkg/stdcopy`): 0 stdin, 1 stdout, 2 stderr, 3 engine error. */
const STDOUT = 1;
const SYSTEMERR = 3;
/** Longest timestamp prefix accepted (`2006-01-02T15:04:05.000000000+07:00 `). */
const MAX_TIMESTAMP_BYTES = 48;
/** The most bytes of a line held back from a live source before they are delivered anyway (the engine's log copier, moby daemon/logger/copier.go `Copier.copySrc`, splits lines at its 16 KiB buffer). */
const MAX_PARTIAL_BYTES = 16 * 1024;
/**
 * The most bytes of the other stream held while the line one stream left unfinished before the
 * streams first mixed waits for its end (its writer may buffer in blocks that end anywhere, and
 * the other stream write a lot meanwhile); past it that line counts as ended.
 */
const MAX_HELD_BYTES = 1024 * 1024;

/**
 * Turns the Docker engine's multiplexed log stream (8-byte frame headers: stream type, three zero
 * bytes, big-endian payload length) into one Readable of the payload bytes, stdout and stderr in
 * the order the engine sent them.
 *
 * A live source's streams are kept line by line, so stderr never lands in the middle of a stdout
 * line: while one stream alone has written, its bytes pass as they come; once both have, each
 * stream's unfinished last line is held until it ends (at most {@link MAX_PARTIAL_BYTES}), and
 * what the other stream sent while the first one's line was unfinished waits for that line's end.
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
  #timestamps: boolean;
  readonly #continueWith: DockerLogDemuxerOptions['continueWith'];
  /** The source is live (see the option): its loss hands over to continueWith. */
  #live: boolean;
  readonly #stallMs: number;
  readonly #holds: () => boolean;
  readonly #liveBufferBytes: number;
  #pausedAt = 0;
  #stallTimer: NodeJS.Timeout | undefined;
  /** Payload bytes delivered per stream type, and bytes still to drop per stream type (a continuation from the start). */
  readonly #delivered = [0, 0, 0, 0];
  readonly #skip = [0, 0, 0, 0];
  /** The stream type whose delivered live bytes end in an unfinished line (0: none). */
  #open = 0;
  /** The first stream type of the live source, and whether another one has written since. */
  #firstType = 0;
  #mixed = false;
  /** Per stream type, the end of a live payload after its last line end, held until the line ends (once the streams mixed). */
  readonly #partial: (Buffer | undefined)[] = [undefined, undefined, undefined, undefined];
  /** Per stream type, live payloads held (copied) while another stream's line is unfinished. */
  readonly #held: (Buffer[] | undefined)[] = [undefined, undefined, undefined, undefined];
  readonly #heldBytes = [0, 0, 0, 0];
  readonly #reuseChunks: boolean;
  /** While a chunk is read in place: the chunk, where its next payload byte goes, and where its unpushed run of payloads starts. */
  #chunk: Buffer | undefined;
  #write = 0;
  #runStart = 0;
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
  /** Per stream type: frames of that stream up to this timestamp are dropped (a continuation from `since`). */
  #skipThrough: (string | undefined)[] = [];
  /**
   * Per stream type, the last delivered frame's timestamp: its bytes copied (the chunk they came in
   * is reused) and decoded only when asked for; length 0 for none.
   */
  readonly #lastTimestampBytes = [0, 1, 2, 3].map(() => Buffer.alloc(MAX_TIMESTAMP_BYTES));
  readonly #lastTimestampLengths = [0, 0, 0, 0];

  constructor(source: Readable, options: DockerLogDemuxerOptions = {}) {
    super({ highWaterMark: options.highWaterMark ?? 64 * 1024 });
    this.#source = source;
    this.#mapError = options.mapError ?? ((error) => (error instanceof Error ? error : new Error(String(error))));
    this.#timestamps = options.timestamps ?? false;
    this.#continueWith = options.continueWith;
    this.#live = options.live ?? false;
    this.#stallMs = options.stallMs ?? 5_000;
    this.#holds = options.holds ?? (() => true);
    this.#liveBufferBytes = options.liveBufferBytes ?? this.readableHighWaterMark;
    this.#reuseChunks = options.reuseChunks ?? false;
    if (this.#live) this.#timestamps = false;
    this.#attach();
  }

  /** Payload bytes delivered so far per stream type (index 1 stdout, 2 stderr). */
  get delivered(): readonly number[] {
    return [...this.#delivered];
  }

  /** The engine's timestamp of the last frame delivered (with `timestamps`). */
  get lastTimestamp(): string | undefined {
    let latest: string | undefined;
    for (const timestamp of this.lastTimestamps) {
      if (timestamp !== undefined && (latest === undefined || compareTimestamps(timestamp, latest) > 0)) latest = timestamp;
    }
    return latest;
  }

  /**
   * The engine's timestamp of the last frame delivered of each stream type (index 1 stdout, 2
   * stderr). Within one stream the engine's log file is in timestamp order; between the two it is
   * not quite (each pipe has its own copier), so a continuation drops frames per stream.
   */
  get lastTimestamps(): readonly (string | undefined)[] {
    return this.#lastTimestampLengths.map((length, type) => (length === 0 ? undefined : this.#lastTimestampBytes[type]?.toString('latin1', 0, length)));
  }

  override _read(): void {
    if (this.#pausedByUs) {
      this.#pausedByUs = false;
      this.#source.resume();
    }
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#stopStallTimer();
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
    if (this.#live && this.#stallTimer === undefined) {
      // A live source paused by a slow reader holds the container (its output waits in the engine):
      // past stallMs it is given up and the rest is read from the log file.
      this.#stallTimer = setInterval(
        () => {
          if (this.#pausedByUs && Date.now() - this.#pausedAt >= this.#stallMs && this.#holds()) this.#lose();
        },
        Math.max(10, Math.floor(this.#stallMs / 4)),
      );
      this.#stallTimer.unref();
    }
  }

  #stopStallTimer(): void {
    if (this.#stallTimer !== undefined) clearInterval(this.#stallTimer);
    this.#stallTimer = undefined;
  }

  /** The live source is lost or given up: drop it and whatever part of a frame it was in, and read on. */
  #lose(): void {
    this.#stopStallTimer();
    this.#detach();
    if (!this.#source.destroyed) this.#source.destroy();
    this.#headerFilled = 0;
    this.#remaining = 0;
    this.#prefix = undefined;
    this.#systemError = [];
    this.#dropHeld();
    this.#continue(true);
  }

  /**
   * Delivers a live payload of stream `type`, keeping lines whole between the streams. The attach
   * passes the container's pipes on in reads that end anywhere. While one stream alone has written
   * (most logs), its payloads pass whole, so a chunk read in place goes on as one view of it. Once
   * another stream writes: if the first one's line is unfinished, the newcomer is held until that
   * line ends; from then on each stream's unfinished line is held (see {@link #deliverLines}).
   * Held bytes are not delivered: a continuation re-reads them.
   */
  #deliverLive(type: number, payload: Buffer): void {
    if (payload.length === 0) return;
    if (this.#firstType === 0) this.#firstType = type;
    else if (type !== this.#firstType) this.#mixed = true;
    if (this.#open === 0) {
      if (this.#mixed) {
        this.#deliverLines(type, payload);
        return;
      }
      this.#deliver(type, payload);
      if (payload[payload.length - 1] !== 0x0a) this.#open = type;
      return;
    }
    if (this.#open === type) {
      const end = this.#mixed ? payload.indexOf(0x0a) : -1;
      if (end < 0) {
        this.#deliver(type, payload);
        if (!this.#mixed && payload[payload.length - 1] === 0x0a) this.#open = 0;
        return;
      }
      // The line the others wait for ends here: deliver up to its end, then them, then the rest.
      this.#deliver(type, payload.subarray(0, end + 1));
      this.#endOpenLine();
      this.#deliverLines(type, payload.subarray(end + 1));
      return;
    }
    // Another stream's line is unfinished: a copy, the payload is a view of a chunk that is reused.
    (this.#held[type] ??= []).push(Buffer.from(payload));
    this.#heldBytes[type] = (this.#heldBytes[type] ?? 0) + payload.length;
    if ((this.#heldBytes[type] ?? 0) >= MAX_HELD_BYTES) this.#endOpenLine();
  }

  /** The unfinished line ended (or is taken as ended): what the other streams held goes, in stream order. */
  #endOpenLine(): void {
    this.#open = 0;
    for (let type = 0; type < this.#held.length; type++) {
      const held = this.#held[type];
      if (held === undefined) continue;
      this.#held[type] = undefined;
      this.#heldBytes[type] = 0;
      this.#deliverLines(type, held.length === 1 ? (held[0] as Buffer) : Buffer.concat(held));
    }
  }

  /**
   * Delivers a payload up to its last line end and holds the rest until the stream's next line
   * end (at most {@link MAX_PARTIAL_BYTES}), as the engine's log copier does for its file. From a
   * source that is not live (the log file, after a seam) frames are whole lines: delivered as they are.
   */
  #deliverLines(type: number, payload: Buffer): void {
    if (payload.length === 0) return;
    if (!this.#live) {
      this.#deliver(type, payload);
      return;
    }
    const held = this.#partial[type];
    const end = payload.lastIndexOf(0x0a);
    if (end < 0) {
      const joined = held === undefined ? Buffer.from(payload) : Buffer.concat([held, payload]);
      if (joined.length >= MAX_PARTIAL_BYTES) {
        this.#partial[type] = undefined;
        this.#deliver(type, joined);
      } else {
        this.#partial[type] = joined;
      }
      return;
    }
    if (held !== undefined) {
      // The held piece and this payload's first line as one small buffer; the rest as a view.
      const first = payload.indexOf(0x0a) + 1;
      this.#partial[type] = undefined;
      this.#deliver(type, Buffer.concat([held, payload.subarray(0, first)]));
      if (end + 1 > first) this.#deliver(type, payload.subarray(first, end + 1));
    } else {
      this.#deliver(type, payload.subarray(0, end + 1));
    }
    // A copy: the payload is a view of a socket chunk, kept no longer than needed.
    if (end + 1 < payload.length) this.#partial[type] = Buffer.from(payload.subarray(end + 1));
  }

  /** Delivers what live payloads left held (the source ended: the container's streams closed). */
  #flushPartials(): void {
    for (let type = 0; type < this.#held.length; type++) {
      const held = this.#held[type];
      this.#held[type] = undefined;
      this.#heldBytes[type] = 0;
      if (held !== undefined) for (const piece of held) this.#deliver(type, piece);
      const partial = this.#partial[type];
      this.#partial[type] = undefined;
      if (partial !== undefined) this.#deliver(type, partial);
    }
    this.#open = 0;
  }

  /**
   * Forgets what was held: the source was lost, and the next one has those bytes. An unfinished
   * line stays open: the next source's bytes of the other stream wait until it ends there.
   */
  #dropHeld(): void {
    this.#held.fill(undefined);
    this.#heldBytes.fill(0);
    this.#partial.fill(undefined);
  }

  /** What is left of a payload of stream `type` once what a continuation from the start must skip is dropped. */
  #skipDelivered(type: number, payload: Buffer): Buffer {
    const skip = this.#skip[type] ?? 0;
    if (skip === 0) return payload;
    const dropped = Math.min(skip, payload.length);
    this.#skip[type] = skip - dropped;
    return payload.subarray(dropped);
  }

  /** Delivers a payload piece of stream `type`, after dropping what a continuation from the start must skip. */
  #deliver(type: number, payload: Buffer): void {
    const piece = this.#skipDelivered(type, payload);
    if (piece.length === 0) return;
    this.#delivered[type] = (this.#delivered[type] ?? 0) + piece.length;
    this.#outBytes += piece.length;
    const chunk = this.#chunk;
    if (
      chunk !== undefined &&
      piece.buffer === chunk.buffer &&
      piece.byteOffset >= chunk.byteOffset &&
      piece.byteOffset + piece.length <= chunk.byteOffset + chunk.length
    ) {
      // A view of the chunk read in place: moved up to the previous payload (never past unread bytes).
      const from = piece.byteOffset - chunk.byteOffset;
      if (from !== this.#write) chunk.copyWithin(this.#write, from, from + piece.length);
      this.#write += piece.length;
      return;
    }
    this.#endRun();
    this.#out.push(piece);
  }

  /** Queues the payloads moved together in the chunk so far as one view of it. */
  #endRun(): void {
    if (this.#chunk !== undefined && this.#write > this.#runStart) {
      this.#out.push(this.#chunk.subarray(this.#runStart, this.#write));
      this.#runStart = this.#write;
    }
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
    this.#chunk = this.#reuseChunks ? data : undefined;
    this.#write = 0;
    this.#runStart = 0;
    let wantMore = true;
    let offset = 0;
    while (offset < data.length) {
      if (this.#raw) {
        this.#deliver(STDOUT, offset === 0 ? data : data.subarray(offset));
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
          this.#deliver(STDOUT, Buffer.from(this.#header));
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
        this.#systemError.push(Buffer.from(payload));
      } else if (!this.#dropFrame) {
        // Live, or a line the lost live source left unfinished: lines kept whole (after the skip, which its bytes were).
        if (this.#live || this.#open !== 0) this.#deliverLive(this.#type, this.#skipDelivered(this.#type, payload));
        else this.#deliver(this.#type, payload);
      }
      if (this.#remaining === 0) {
        if (this.#type === SYSTEMERR) wantMore = this.#flush() && wantMore;
        this.#endFrame();
        if (this.destroyed) return;
      }
    }
    wantMore = this.#flush() && wantMore;
    this.#chunk = undefined;
    // A live source is read ahead of a slow reader up to liveBufferBytes: the engine copies the
    // container's output to the attach as it comes, and once the container exited it waits 2 s at
    // most for that copy to end, then drops the rest (moby daemon/monitor.go handleContainerExit:
    // StreamConfig.Wait), from the log file as well.
    if (!wantMore && this.#live && this.readableLength < this.#liveBufferBytes) wantMore = true;
    if (!wantMore && !this.#pausedByUs && !this.#ended) {
      this.#pausedByUs = true;
      this.#pausedAt = Date.now();
      this.#source.pause();
    }
  };

  /**
   * Pushes the payloads gathered from one source chunk as one buffer: a chunk holds many short
   * frames (the engine writes one per log line), and one push each costs more than one copy.
   */
  #flush(): boolean {
    this.#endRun();
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
    const skipThrough = this.#skipThrough[this.#type];
    if (skipThrough !== undefined && compareTimestamps(timestamp.toString('latin1'), skipThrough) <= 0) {
      this.#dropFrame = true;
      return;
    }
    const kept = this.#lastTimestampBytes[this.#type];
    if (kept === undefined) return;
    timestamp.copy(kept);
    this.#lastTimestampLengths[this.#type] = timestamp.length;
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
    if (this.#live && (this.#remaining > 0 || this.#headerFilled > 0)) {
      this.#lose();
      return;
    }
    this.#ended = true;
    if (!this.#raw && (this.#remaining > 0 || this.#headerFilled > 0)) {
      this.destroy(this.#mapError(Object.assign(new Error('the log stream ended in the middle of a frame'), { code: 'ERR_STREAM_PREMATURE_CLOSE' })));
      return;
    }
    this.#stopStallTimer();
    this.#detach();
    this.#continue(false);
  };

  /** The source ended (or, `lost`, a live one was lost): read on from what continueWith gives, or end. */
  #continue(lost: boolean): void {
    if (!this.#continueWith) {
      if (lost) {
        this.destroy(this.#mapError(Object.assign(new Error('the log stream closed before it ended'), { code: 'ERR_STREAM_PREMATURE_CLOSE' })));
        return;
      }
      this.#flushPartials();
      this.#flush();
      this.push(null);
      return;
    }
    const skipThrough = this.lastTimestamps;
    this.#continueWith(this.lastTimestamp, { delivered: [...this.#delivered], lastTimestamps: skipThrough, lost }).then(
      (next) => {
        if (this.destroyed) {
          (next && 'fromStart' in next ? next.source : next)?.destroy();
          return;
        }
        if (!next) {
          // The end: what the live source held of an unfinished line is the log's last bytes.
          this.#flushPartials();
          this.#flush();
          this.push(null);
          return;
        }
        // Held bytes were not delivered: the next source has them.
        this.#dropHeld();
        const continuation: LogContinuation =
          'fromStart' in next ? next : { source: next, timestamps: this.#live ? false : this.#timestamps, fromStart: false };
        this.#source = continuation.source;
        this.#live = false;
        this.#timestamps = continuation.timestamps;
        if (continuation.fromStart) {
          for (let type = 0; type < this.#delivered.length; type++) this.#skip[type] = this.#delivered[type] ?? 0;
          this.#skipThrough = [];
        } else {
          this.#skipThrough = [...skipThrough];
        }
        this.#framesSeen = 0;
        this.#pausedByUs = false;
        this.#ended = false;
        this.#attach();
      },
      (error: unknown) => this.destroy(this.#mapError(error)),
    );
  }

  readonly #onError = (error: unknown): void => {
    if (this.#live) {
      this.#lose();
      return;
    }
    this.destroy(this.#mapError(error));
  };

  readonly #onClose = (): void => {
    if (this.#ended || this.destroyed) return;
    if (this.#live) {
      this.#lose();
      return;
    }
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
