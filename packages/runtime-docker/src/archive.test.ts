import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { readArchivedFile } from './archive.ts';

/** A tar entry: a 512-byte ustar header and the data padded to whole blocks. */
function entry(name: string, data: Buffer, type = '0', sizeOverride?: number): Buffer {
  const header = Buffer.alloc(512);
  header.write(name, 0, 'latin1');
  header.write('0000644\0', 100, 'latin1');
  header.write(`${(sizeOverride ?? data.length).toString(8).padStart(11, '0')}\0`, 124, 'latin1');
  header.write(type, 156, 'latin1');
  header.write('ustar\0', 257, 'latin1');
  const padded = Buffer.alloc(Math.ceil(data.length / 512) * 512);
  data.copy(padded);
  return Buffer.concat([header, padded]);
}

/** The archive as a stream of small chunks, as a socket delivers it. */
function chunked(archive: Buffer, size = 100): Readable {
  const chunks: Buffer[] = [];
  for (let i = 0; i < archive.length; i += size) chunks.push(archive.subarray(i, i + size));
  return Readable.from(chunks);
}

// go-vela/worker runtime/docker/container.go PollOutputsContainer: tar.NewReader, first header, MaxOutputsSize.
describe('readArchivedFile', () => {
  it('returns the first file, across chunk boundaries, after PAX metadata', () => {
    const data = Buffer.from('TAG=1.35\n'.repeat(100));
    const archive = Buffer.concat([entry('PaxHeaders/.env', Buffer.from('30 mtime=1700000000.123456789\n'), 'x'), entry('.env', data), Buffer.alloc(1024)]);
    return expect(readArchivedFile(chunked(archive, 77), 1 << 20)).resolves.toEqual({ kind: 'file', data });
  });

  it('refuses a file above the limit from its header, without reading its data', async () => {
    const stream = chunked(entry('.env', Buffer.alloc(0), '0', 11 * 1024 * 1024));
    await expect(readArchivedFile(stream, 10 * 1024 * 1024)).resolves.toEqual({ kind: 'too-large', size: 11 * 1024 * 1024 });
    expect(stream.destroyed).toBe(true);
  });

  it('says not-a-file for a directory or an empty archive', async () => {
    await expect(readArchivedFile(chunked(entry('outputs/', Buffer.alloc(0), '5')), 100)).resolves.toEqual({ kind: 'not-a-file' });
    await expect(readArchivedFile(chunked(Buffer.alloc(1024)), 100)).resolves.toEqual({ kind: 'not-a-file' });
  });

  it('returns an empty file', () =>
    expect(readArchivedFile(chunked(Buffer.concat([entry('.env', Buffer.alloc(0)), Buffer.alloc(1024)])), 100)).resolves.toEqual({
      kind: 'file',
      data: Buffer.alloc(0),
    }));
});
