/** Where a dummy command writes: resolves `false` once nobody reads any more (a broken pipe). */
export interface Output {
  write(data: Buffer | string): Promise<boolean>;
}

/** Where a dummy command reads from. */
export type Input = AsyncIterable<Buffer>;

/** An input with nothing in it (`< /dev/null`, or no stdin). */
export const EMPTY_INPUT: Input = {
  [Symbol.asyncIterator]: () => ({ next: () => Promise.resolve({ done: true as const, value: undefined }) }),
};

/** An output that discards everything (`> /dev/null`). */
export const NULL_OUTPUT: Output = { write: () => Promise.resolve(true) };

/** An input holding `data` once. */
export function inputOf(data: Buffer | string): Input {
  const buffer = typeof data === 'string' ? Buffer.from(data) : data;
  return {
    [Symbol.asyncIterator]: () => {
      let done = buffer.length === 0;
      return {
        next: () => {
          if (done) return Promise.resolve({ done: true as const, value: undefined });
          done = true;
          return Promise.resolve({ done: false as const, value: buffer });
        },
      };
    },
  };
}

/** Reads an input to its end. */
export async function readAll(input: Input): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of input) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/**
 * A pipe between two commands of a pipeline, holding at most one chunk: a write resolves when the
 * reader took it (backpressure), or with `false` once the reader is gone.
 */
export class Pipe implements Output, Input {
  #queue: Buffer | undefined;
  #closed = false;
  #abandoned = false;
  #wakeReader: (() => void) | undefined;
  #wakeWriter: (() => void) | undefined;

  async write(data: Buffer | string): Promise<boolean> {
    const buffer = typeof data === 'string' ? Buffer.from(data) : data;
    while (this.#queue !== undefined && !this.#abandoned) {
      await new Promise<void>((resolve) => (this.#wakeWriter = resolve));
    }
    if (this.#abandoned || this.#closed) return false;
    if (buffer.length === 0) return true;
    this.#queue = buffer;
    this.#wake('reader');
    return true;
  }

  /** The writer is done: the reader sees the end once the pipe is empty. */
  close(): void {
    this.#closed = true;
    this.#wake('reader');
  }

  /** The reader is gone: pending and later writes resolve `false`. */
  abandon(): void {
    this.#abandoned = true;
    this.#queue = undefined;
    this.#wake('writer');
  }

  #wake(who: 'reader' | 'writer'): void {
    const wake = who === 'reader' ? this.#wakeReader : this.#wakeWriter;
    if (who === 'reader') this.#wakeReader = undefined;
    else this.#wakeWriter = undefined;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
    for (;;) {
      if (this.#abandoned) return;
      const chunk = this.#queue;
      if (chunk !== undefined) {
        this.#queue = undefined;
        this.#wake('writer');
        yield chunk;
        continue;
      }
      if (this.#closed) return;
      await new Promise<void>((resolve) => (this.#wakeReader = resolve));
    }
  }
}
