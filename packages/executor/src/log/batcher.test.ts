import { Readable } from 'node:stream';
import { background, withCancel } from '@berth/context';
import { expectNoAsyncLeaks } from '@berth/context/testing';
import { describe, expect, it } from 'vitest';
import { LogBatcher } from './batcher.ts';
import { LogWriter, pumpLog } from './log-writer.ts';

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('LogBatcher', () => {
  it('delivers batches of at most batchBytes, in order', async () => {
    const got: string[] = [];
    const batcher = new LogBatcher(
      (b) => {
        got.push(b.toString());
        return Promise.resolve();
      },
      { batchBytes: 4, flushIntervalMs: 10_000 },
    );
    await batcher.write(Buffer.from('abcdef'));
    await batcher.write(Buffer.from('gh'));
    await batcher.write(Buffer.from('ij'));
    await batcher.close();
    expect(got).toEqual(['abcd', 'efgh', 'ij']);
  });

  it('sends what gathered as it is once the next write would not fit, and a write that fills a batch without a copy', async () => {
    const got: Buffer[] = [];
    const batcher = new LogBatcher(
      (b) => {
        got.push(b);
        return Promise.resolve();
      },
      { batchBytes: 8, flushIntervalMs: 10_000 },
    );
    // Buffer.alloc: not from Buffer's shared pool, so each has memory of its own.
    const first = Buffer.alloc(6, 'abcdef');
    const second = Buffer.alloc(5, 'ghijk');
    const third = Buffer.alloc(10, '0123456789');
    await batcher.write(first);
    await batcher.write(second);
    await batcher.write(third);
    await batcher.close();
    expect(got.map(String)).toEqual(['abcdef', 'ghijk', '01234567', '89']);
    // The writes' own memory, not copies.
    expect(got[0]?.buffer).toBe(first.buffer);
    expect(got[1]?.buffer).toBe(second.buffer);
    expect(got[2]?.buffer).toBe(third.buffer);
  });

  it('fills up what gathered when it is less than half a batch', async () => {
    const got: string[] = [];
    const batcher = new LogBatcher(
      (b) => {
        got.push(b.toString());
        return Promise.resolve();
      },
      { batchBytes: 8, flushIntervalMs: 10_000 },
    );
    await batcher.write(Buffer.from('abc'));
    await batcher.write(Buffer.from('defghij'));
    await batcher.close();
    expect(got).toEqual(['abcdefgh', 'ij']);
  });

  it('flushes what gathered after the interval', async () => {
    const got: string[] = [];
    const batcher = new LogBatcher(
      (b) => {
        got.push(b.toString());
        return Promise.resolve();
      },
      { batchBytes: 1024, flushIntervalMs: 20 },
    );
    await batcher.write(Buffer.from('one line\n'));
    expect(got).toEqual([]);
    await delay(80);
    expect(got).toEqual(['one line\n']);
    await batcher.close();
  });

  it('applies backpressure: a slow delivery holds the writer back', async () => {
    let inFlight = 0;
    let maxInFlight = 0;
    const release: Array<() => void> = [];
    const batcher = new LogBatcher(
      (b) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        void b;
        return new Promise<void>((resolve) =>
          release.push(() => {
            inFlight--;
            resolve();
          }),
        );
      },
      { batchBytes: 2, flushIntervalMs: 10_000 },
    );
    await batcher.write(Buffer.from('ab')); // first batch in flight, returns at once
    let second = false;
    const p = batcher.write(Buffer.from('cd')).then(() => (second = true));
    await delay(20);
    expect(second).toBe(false); // waits for the first delivery
    release.shift()?.();
    await p;
    expect(second).toBe(true);
    release.shift()?.();
    await batcher.close();
    expect(maxInFlight).toBe(1);
  });

  it('leaves no timer behind after close', async () => {
    await expectNoAsyncLeaks(async () => {
      const batcher = new LogBatcher(() => Promise.resolve(), { flushIntervalMs: 60_000 });
      await batcher.write(Buffer.from('x'));
      await batcher.close();
    });
  });
});

describe('LogWriter and pumpLog', () => {
  it('masks, caps and delivers a stream, then closes the log once', async () => {
    const appended: Buffer[] = [];
    let closed = 0;
    const writer = new LogWriter(
      {
        append: (b) => {
          appended.push(b);
          return Promise.resolve();
        },
        close: () => {
          closed++;
          return Promise.resolve();
        },
      },
      { secrets: ['hunter2'], batchBytes: 8, flushIntervalMs: 10_000 },
    );
    await pumpLog(background(), Readable.from([Buffer.from('pass: hun'), Buffer.from('ter2\nok\n')]), writer);
    await writer.close();
    await writer.close();
    expect(Buffer.concat(appended).toString()).toBe('pass: ***\nok\n');
    expect(appended.every((b) => b.length <= 8)).toBe(true);
    expect(closed).toBe(1);
  });

  it.each([
    ['a partial last line', 'half a li', 'half a li\n> cut\n'],
    ['a whole last line', 'a line\n', 'a line\n> cut\n'],
    ['nothing written', '', '> cut\n'],
  ])('closes with a note as the last line of its own, after %s', async (_, text, expected) => {
    const appended: Buffer[] = [];
    const writer = new LogWriter({ append: (b) => (appended.push(b), Promise.resolve()), close: () => Promise.resolve() }, { secrets: ['a li'] });
    await writer.write(text);
    await writer.close('> cut');
    expect(Buffer.concat(appended).toString()).toBe(expected.replace('a li', '***'));
  });

  it('reads no further than the slow reporter allows (bounded memory)', async () => {
    let produced = 0;
    const chunk = Buffer.alloc(16 * 1024, 0x61);
    const source = new Readable({
      highWaterMark: 16 * 1024,
      read() {
        produced++;
        this.push(produced > 400 ? null : chunk);
      },
    });
    let delivered = 0;
    const writer = new LogWriter(
      {
        append: async (b) => {
          await delay(5);
          delivered += b.length;
        },
        close: () => Promise.resolve(),
      },
      { batchBytes: 64 * 1024, limits: { maxBytes: Infinity } },
    );
    const pump = pumpLog(background(), source, writer);
    await delay(100);
    // With 5 ms per 64 KiB batch, ~20 batches were delivered; reading stays within a few batches of that.
    expect(produced * 16 * 1024 - delivered).toBeLessThan(512 * 1024);
    await pump;
    await writer.close();
    expect(delivered).toBe(400 * 16 * 1024);
  });

  it('stops reading when the ctx is done and destroys the stream', async () => {
    const [ctx, cancel] = withCancel(background());
    const source = new Readable({ read() {} });
    source.push('partial');
    const writer = new LogWriter({ append: () => Promise.resolve(), close: () => Promise.resolve() });
    const pump = pumpLog(ctx, source, writer);
    setTimeout(() => cancel(), 10);
    await expect(pump).rejects.toThrow();
    expect(source.destroyed).toBe(true);
    await writer.close();
  });
});
