/**
 * The per-container log size cap: the head passes live, the rest is held in a rolling tail window
 * of bounded size and shown, after a clear marker, when the log ends.
 */

/** Limits of one container's log. */
export interface LogLimits {
  /** Most bytes a log delivers, markers aside. Default 16 MiB; `Infinity` for no cap. */
  maxBytes?: number;
  /**
   * Of those, how many are the log's last bytes, kept in memory while the rest is dropped and
   * delivered when the log ends. Default a quarter of `maxBytes`, at most 1 MiB.
   */
  tailBytes?: number;
}

/** The default cap of one container's log. */
const DEFAULT_MAX_LOG_BYTES = 16 * 1024 * 1024;
const MAX_DEFAULT_TAIL = 1024 * 1024;
/** How far into the tail a line start is looked for, so the tail begins with a whole line. */
const LINE_SEARCH = 4096;
const EMPTY = Buffer.alloc(0);

/** `12.3 MiB`, `512 B`. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/** The start of the UTF-8 character at or after `i` (skips continuation bytes). */
function charStart(data: Uint8Array, i: number): number {
  let j = i;
  while (j < data.length && j < i + 4 && ((data[j] as number) & 0xc0) === 0x80) j++;
  return j;
}

/** The largest character boundary at or before `i`. */
function charBoundaryBefore(data: Uint8Array, i: number): number {
  let j = i;
  while (j > 0 && j > i - 4 && j < data.length && ((data[j] as number) & 0xc0) === 0x80) j--;
  return j;
}

/**
 * Applies {@link LogLimits} to one log. `write` returns what passes now; `end` returns the marker
 * and the tail when the log was over its cap. Memory stays at most `tailBytes`.
 */
export class LogCap {
  readonly #head: number;
  readonly #tail: number;
  readonly #max: number;
  #total = 0;
  #passed = 0;
  #truncated = false;
  #ring: Buffer | undefined;
  #ringWrite = 0;
  #ringFilled = 0;

  constructor(limits: LogLimits = {}) {
    const max = limits.maxBytes ?? DEFAULT_MAX_LOG_BYTES;
    if (!(max > 0)) throw new RangeError(`[berth] the log cap must be positive, got ${max}`);
    const tail = Math.min(limits.tailBytes ?? Math.min(MAX_DEFAULT_TAIL, Math.floor(max / 4)), max);
    this.#max = max;
    this.#tail = Number.isFinite(max) ? Math.max(0, Math.floor(tail)) : 0;
    this.#head = max - this.#tail;
  }

  /** Bytes seen so far. */
  get total(): number {
    return this.#total;
  }

  /** True once bytes were held back. */
  get truncated(): boolean {
    return this.#truncated;
  }

  /** Passes what fits under the cap; keeps the rest in the tail window. */
  write(chunk: Buffer): Buffer {
    this.#total += chunk.length;
    if (!this.#truncated) {
      const room = this.#head - this.#passed;
      if (chunk.length <= room) {
        this.#passed += chunk.length;
        return chunk;
      }
      this.#truncated = true;
      const cut = charBoundaryBefore(chunk, room);
      this.#passed += cut;
      this.#keep(chunk.subarray(cut));
      const marker = Buffer.from(
        `\n[berth: this log is over its ${formatBytes(this.#max)} cap: the rest is held back; its last ${formatBytes(this.#tail)} will follow when the log ends]\n`,
      );
      return cut === 0 ? marker : Buffer.concat([chunk.subarray(0, cut), marker]);
    }
    this.#keep(chunk);
    return EMPTY;
  }

  /** The end of the log: the marker and the tail when it was truncated, else nothing. */
  end(): Buffer {
    if (!this.#truncated) return EMPTY;
    let tail = this.#ordered();
    // Start the tail on a whole line when one starts soon, else on a whole character.
    const nl = tail.subarray(0, Math.min(LINE_SEARCH, tail.length)).indexOf(0x0a);
    tail = tail.subarray(nl >= 0 && nl < tail.length - 1 ? nl + 1 : charStart(tail, 0));
    const dropped = this.#total - this.#passed - tail.length;
    const marker = Buffer.from(
      `[berth: log truncated: ${formatBytes(dropped)} of ${formatBytes(this.#total)} dropped (cap ${formatBytes(this.#max)}); the last ${formatBytes(tail.length)} follow]\n`,
    );
    this.#ring = undefined;
    return Buffer.concat([marker, tail]);
  }

  #keep(data: Buffer): void {
    const size = this.#tail;
    if (size === 0 || data.length === 0) return;
    this.#ring ??= Buffer.allocUnsafe(size);
    const ring = this.#ring;
    if (data.length >= size) {
      data.copy(ring, 0, data.length - size);
      this.#ringWrite = 0;
      this.#ringFilled = size;
      return;
    }
    const first = Math.min(data.length, size - this.#ringWrite);
    data.copy(ring, this.#ringWrite, 0, first);
    if (first < data.length) data.copy(ring, 0, first);
    this.#ringWrite = (this.#ringWrite + data.length) % size;
    this.#ringFilled = Math.min(size, this.#ringFilled + data.length);
  }

  #ordered(): Buffer {
    const ring = this.#ring;
    if (ring === undefined || this.#ringFilled === 0) return EMPTY;
    if (this.#ringFilled < ring.length) return Buffer.from(ring.subarray(0, this.#ringFilled));
    return Buffer.concat([ring.subarray(this.#ringWrite), ring.subarray(0, this.#ringWrite)]);
  }
}
