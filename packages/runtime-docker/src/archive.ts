/**
 * Reads the one file of the tar archive `GET /containers/{id}/archive` answers with, as
 * go-vela/worker's `PollOutputsContainer` does with `archive/tar` (runtime/docker/container.go):
 * the first regular file's bytes, refused above a limit before it is read.
 */
import type { Readable } from 'node:stream';

/** What {@link readArchivedFile} found. */
export type ArchivedFile = { kind: 'file'; data: Buffer } | { kind: 'too-large'; size: number } | { kind: 'not-a-file' };

const BLOCK = 512;

/** The size field of a tar header: octal, or GNU base-256 when its first byte has the high bit. */
function headerSize(header: Buffer): number {
  const field = header.subarray(124, 136);
  if (((field[0] ?? 0) & 0x80) !== 0) {
    let size = 0;
    for (let i = 1; i < field.length; i++) size = size * 256 + (field[i] ?? 0);
    return size;
  }
  const text = field.toString('latin1').replace(/\0.*$/s, '').trim();
  return text === '' ? 0 : Number.parseInt(text, 8);
}

/**
 * Reads `stream` (a tar archive) up to the end of its first regular file and destroys it: the
 * file's bytes, `too-large` (read no further) when its header says more than `limit` bytes, or
 * `not-a-file` (a directory, a link, an empty archive). PAX and GNU long-name entries are skipped.
 */
export async function readArchivedFile(stream: Readable, limit: number): Promise<ArchivedFile> {
  let buffered: Buffer = Buffer.alloc(0);
  let skip = 0;
  let fileSize: number | undefined;
  /** What the bytes so far decide, or undefined when more are needed. */
  const step = (): ArchivedFile | undefined => {
    for (;;) {
      if (skip > 0) {
        const dropped = Math.min(skip, buffered.length);
        buffered = buffered.subarray(dropped);
        skip -= dropped;
        if (skip > 0) return undefined;
      }
      if (fileSize !== undefined) return buffered.length >= fileSize ? { kind: 'file', data: Buffer.from(buffered.subarray(0, fileSize)) } : undefined;
      if (buffered.length < BLOCK) return undefined;
      const header = buffered.subarray(0, BLOCK);
      buffered = buffered.subarray(BLOCK);
      if (header.every((byte) => byte === 0)) return { kind: 'not-a-file' };
      const size = headerSize(header);
      const type = String.fromCharCode(header[156] ?? 0);
      if (type === 'x' || type === 'g' || type === 'L' || type === 'K') {
        // Metadata of the next entry (PAX, GNU long names): skipped, padded to whole blocks.
        skip = Math.ceil(size / BLOCK) * BLOCK;
        continue;
      }
      if (type !== '0' && type !== '\0') return { kind: 'not-a-file' };
      if (size > limit) return { kind: 'too-large', size };
      fileSize = size;
    }
  };
  try {
    for await (const chunk of stream) {
      buffered = buffered.length === 0 ? (chunk as Buffer) : Buffer.concat([buffered, chunk as Buffer]);
      const found = step();
      if (found !== undefined) return found;
    }
    return step() ?? { kind: 'not-a-file' };
  } finally {
    stream.destroy();
  }
}
