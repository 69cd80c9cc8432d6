import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { compareTimestamps, DockerLogDemuxer, frameHeader, type LogProgress } from '../src/demux.ts';

function frame(stream: 1 | 2 | 3, text: string | Buffer): Buffer {
  const payload = typeof text === 'string' ? Buffer.from(text) : text;
  return Buffer.concat([frameHeader(stream, payload.length), payload]);
}

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A source that delivers `data` cut into pieces of `size` bytes. */
function pieces(data: Buffer, size: number): Readable {
  const parts: Buffer[] = [];
  for (let i = 0; i < data.length; i += size) parts.push(data.subarray(i, i + size));
  return Readable.from(parts, { objectMode: false });
}

/** Each piece of the wire as a chunk of its own buffer, as a socket hands them over (and a record of them). */
function socketPieces(data: Buffer, size: number): { source: Readable; chunks: Buffer[] } {
  const chunks: Buffer[] = [];
  for (let i = 0; i < data.length; i += size) chunks.push(Buffer.from(data.subarray(i, i + size)));
  return { source: Readable.from(chunks, { objectMode: false }), chunks };
}

describe('DockerLogDemuxer', () => {
  const wire = Buffer.concat([frame(1, 'out 1\n'), frame(2, 'err 1\n'), frame(1, 'out 2\n'), frame(1, ''), frame(2, 'tail')]);

  it.each([1, 3, 7, 8, 9, 1000])('demultiplexes stdout and stderr in order when the wire is cut every %i bytes', async (size) => {
    const out = await collect(new DockerLogDemuxer(pieces(wire, size)));
    expect(out.toString()).toBe('out 1\nerr 1\nout 2\ntail');
  });

  it('ends when the source ends, with nothing for an empty source', async () => {
    expect((await collect(new DockerLogDemuxer(Readable.from([])))).length).toBe(0);
  });

  it('fails on a source that ends in the middle of a frame', async () => {
    const truncated = wire.subarray(0, wire.length - 2);
    await expect(collect(new DockerLogDemuxer(pieces(truncated, 5)))).rejects.toThrow(/middle of a frame/);
  });

  it("fails with the engine's message on an error frame", async () => {
    const data = Buffer.concat([frame(1, 'ok\n'), frame(3, 'log file is gone')]);
    await expect(collect(new DockerLogDemuxer(pieces(data, 4)))).rejects.toThrow(/log file is gone/);
  });

  it('passes a stream that is not multiplexed (a TTY) through unchanged', async () => {
    const raw = Buffer.from('plain text from a tty\r\nsecond line\r\n');
    expect((await collect(new DockerLogDemuxer(pieces(raw, 5)))).toString()).toBe(raw.toString());
  });

  it('maps source errors through mapError', async () => {
    const source = new Readable({ read() {} });
    const logs = new DockerLogDemuxer(source, { mapError: (error) => new Error(`mapped: ${(error as Error).message}`) });
    const done = collect(logs);
    source.push(frame(1, 'x'));
    source.destroy(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
    await expect(done).rejects.toThrow('mapped: socket hang up');
  });

  it('pauses the source while the reader does not read, and resumes it when it does', async () => {
    const source = new Readable({ read() {} });
    const logs = new DockerLogDemuxer(source, { highWaterMark: 1024 });
    const big = frame(1, Buffer.alloc(64 * 1024, 'a'));
    source.push(big);
    source.push(big);
    await new Promise((resolve) => setImmediate(resolve));
    expect(source.isPaused()).toBe(true);
    expect(logs.readableLength).toBeLessThanOrEqual(2 * big.length);
    source.push(null);
    const out = await collect(logs);
    expect(out.length).toBe(2 * 64 * 1024);
  });

  it('destroys the source when it is destroyed', () => {
    const source = new Readable({ read() {} });
    const logs = new DockerLogDemuxer(source);
    logs.destroy();
    expect(source.destroyed).toBe(true);
  });

  describe('with timestamps', () => {
    const ts = (n: number): string => `2026-12-02T10:00:00.00000000${n}Z`;
    const stamped = (stream: 1 | 2, n: number, text: string): Buffer => frame(stream, `${ts(n)} ${text}`);

    it('removes the timestamp of every frame, even when cut inside it, and remembers the last one', async () => {
      const data = Buffer.concat([stamped(1, 1, 'a\n'), stamped(2, 2, 'b\n'), stamped(1, 3, 'c')]);
      for (const size of [1, 5, 31, 32, 1000]) {
        for (const reuseChunks of [false, true]) {
          const logs = new DockerLogDemuxer(socketPieces(data, size).source, { timestamps: true, reuseChunks });
          expect((await collect(logs)).toString()).toBe('a\nb\nc');
          expect(logs.lastTimestamp).toBe(ts(3));
          expect(logs.lastTimestamps).toEqual([undefined, ts(3), ts(2), undefined]);
        }
      }
    });

    it('reads on from a continuation, dropping what was already delivered', async () => {
      const first = Buffer.concat([stamped(1, 1, 'a\n'), stamped(1, 2, 'b\n')]);
      const second = Buffer.concat([stamped(1, 1, 'a\n'), stamped(1, 2, 'b\n'), stamped(2, 3, 'c\n'), stamped(1, 4, 'd')]);
      const seen: (string | undefined)[] = [];
      const logs = new DockerLogDemuxer(pieces(first, 3), {
        timestamps: true,
        continueWith: (last) => {
          seen.push(last);
          return Promise.resolve(seen.length === 1 ? pieces(second, 4) : undefined);
        },
      });
      expect((await collect(logs)).toString()).toBe('a\nb\nc\nd');
      expect(seen).toEqual([ts(2), ts(4)]);
    });

    it('fails on a frame without a timestamp, even when the wire is cut inside it', async () => {
      for (const size of [1, 20, 1000]) {
        const logs = new DockerLogDemuxer(pieces(frame(1, `${'x'.repeat(60)} y`), size), { timestamps: true });
        await expect(collect(logs)).rejects.toThrow('a frame has no timestamp');
      }
    });

    it('fails when the continuation fails', async () => {
      const logs = new DockerLogDemuxer(pieces(stamped(1, 1, 'a'), 3), { timestamps: true, continueWith: () => Promise.reject(new Error('engine gone')) });
      await expect(collect(logs)).rejects.toThrow('engine gone');
    });
  });

  describe('a live source (the attach)', () => {
    it('keeps lines whole: what stderr sends while a stdout line is unfinished waits for its end, then each stream holds its unfinished line', async () => {
      const wire = Buffer.concat([frame(1, 'out 1\nout '), frame(2, 'err 1\ner'), frame(1, '2\nout 3\n'), frame(2, 'r 2\n'), frame(1, 'out 4\n')]);
      for (const size of [1, 3, 8, 13, 1000]) {
        for (const reuseChunks of [false, true]) {
          const out = await collect(new DockerLogDemuxer(socketPieces(wire, size).source, { live: true, reuseChunks }));
          expect(out.toString(), `cut every ${size}, reuseChunks ${reuseChunks}`).toBe('out 1\nout 2\nerr 1\nout 3\nerr 2\nout 4\n');
        }
      }
    });

    it('lets the other stream go once it held 1 MiB for an unfinished line, and delivers what is held at the end', async () => {
      const lines = 'err\n'.repeat(256 * 1024 + 1);
      const wire = Buffer.concat([frame(1, 'x'.repeat(100)), frame(2, lines), frame(1, 'y\n'), frame(2, 'tail')]);
      const out = await collect(new DockerLogDemuxer(socketPieces(wire, 64 * 1024).source, { live: true, reuseChunks: true }));
      expect(out.toString()).toBe(`${'x'.repeat(100)}${lines}y\ntail`);
      // Below 1 MiB the stderr lines wait for the stdout line's end.
      const short = Buffer.concat([frame(1, 'x'.repeat(100)), frame(2, 'err\n'), frame(1, 'y\n'), frame(2, 'tail')]);
      expect((await collect(new DockerLogDemuxer(socketPieces(short, 7).source, { live: true, reuseChunks: true }))).toString()).toBe(
        `${'x'.repeat(100)}y\nerr\ntail`,
      );
    });

    it('with reuseChunks, passes each chunk of one stream on as one view of that chunk (no copy)', async () => {
      const lines = Array.from({ length: 200 }, (_, i) => `line ${i}\n`);
      const wire = Buffer.concat(lines.map((line) => frame(1, line)));
      const { source, chunks } = socketPieces(wire, 256);
      // Read as pushed ('data'): an async iterator's read() would join what waits into one buffer.
      const got: Buffer[] = [];
      const logs = new DockerLogDemuxer(source, { live: true, reuseChunks: true });
      logs.on('data', (chunk: Buffer) => got.push(chunk));
      await new Promise((resolve, reject) => logs.once('end', resolve).once('error', reject));
      expect(Buffer.concat(got).toString()).toBe(lines.join(''));
      expect(
        got.every((piece) =>
          chunks.some((chunk) => chunk.buffer === piece.buffer && piece.byteOffset >= chunk.byteOffset && piece.byteOffset < chunk.byteOffset + chunk.length),
        ),
      ).toBe(true);
    });

    it('reads on from the log file when the attach is lost mid-line: the rest of that line comes before the other stream', async () => {
      const ts = (n: number): string => `2026-12-02T10:00:00.00000000${n}Z`;
      const stamped = (stream: 1 | 2, n: number, text: string): Buffer => frame(stream, `${ts(n)} ${text}`);
      // The attach delivers "o1\no" of stdout, then is cut; the file holds every line.
      const attach = new Readable({ read() {} });
      const file = Buffer.concat([stamped(1, 1, 'o1\n'), stamped(2, 2, 'e1\n'), stamped(1, 3, 'o2\n'), stamped(2, 4, 'e2\n')]);
      const seams: LogProgress[] = [];
      const logs = new DockerLogDemuxer(attach, {
        live: true,
        reuseChunks: true,
        continueWith: (_last, progress) => {
          seams.push(progress);
          return Promise.resolve(seams.length === 1 ? { source: pieces(file, 5), timestamps: true, fromStart: true } : undefined);
        },
      });
      const done = collect(logs);
      attach.push(frame(1, 'o1\no'));
      await new Promise((resolve) => setImmediate(resolve));
      attach.destroy(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
      expect((await done).toString()).toBe('o1\no2\ne1\ne2\n');
      // The attach delivered "o1\no" of stdout: the file's first 4 stdout bytes are dropped.
      expect(seams[0]).toMatchObject({ delivered: [0, 4, 0, 0], lost: true });
    });
  });

  it('orders timestamps of either form', () => {
    expect(compareTimestamps('2026-12-02T10:00:00.000000001Z', '2026-12-02T10:00:00.000000002Z')).toBe(-1);
    expect(compareTimestamps('2026-12-02T10:00:01Z', '2026-12-02T10:00:00.999Z')).toBe(1);
    expect(compareTimestamps('2026-12-02T11:00:00.5+01:00', '2026-12-02T10:00:00.500000000Z')).toBe(0);
  });
});
