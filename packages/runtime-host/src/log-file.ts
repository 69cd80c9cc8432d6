import { open, type FileHandle } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';

/** How often a follower looks for more output once it has read everything written so far. */
const POLL_MS = 50;
const CHUNK_BYTES = 64 * 1024;

/**
 * Follows a step's log file from its start: a Readable that delivers what is written, waits for
 * more while the step runs, and ends once `ended()` is true and every byte was read. It reads only
 * when its consumer asks (backpressure), as GitLab Runner reads its job log file at a byte offset.
 *
 * Gotcha: `stopped` must abort when the follower is no longer wanted; the stream is then destroyed
 * by its caller (the runtime maps a ctx to a `RuntimeError`).
 */
export function followLogFile(file: string, ended: () => boolean, stopped: AbortSignal): Readable {
  let handle: FileHandle | undefined;
  let position = 0;
  const buffer = Buffer.alloc(CHUNK_BYTES);
  const stream: Readable = new Readable({
    read() {
      void pump();
    },
    destroy(error, callback) {
      const closing = handle?.close();
      handle = undefined;
      if (closing)
        closing.then(
          () => callback(error),
          () => callback(error),
        );
      else callback(error);
    },
  });
  async function pump(): Promise<void> {
    try {
      handle ??= await open(file, 'r');
      if (stream.destroyed) {
        await handle.close();
        return;
      }
      for (;;) {
        if (stream.destroyed) return;
        // Read the end state first: output written before the exit is on disk when `ended()` turns true.
        const done = ended();
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
        if (bytesRead > 0) {
          position += bytesRead;
          stream.push(Buffer.from(buffer.subarray(0, bytesRead)));
          return;
        }
        if (done) {
          stream.push(null);
          return;
        }
        await delay(POLL_MS, undefined, { signal: stopped });
      }
    } catch (error) {
      if (!stopped.aborted && !stream.destroyed) stream.destroy(error as Error);
    }
  }
  return stream;
}
