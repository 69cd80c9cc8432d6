import { background } from '@berth/context';
import { describe, expect, it } from 'vitest';
import type { Target } from './reporter.ts';
import { WholeLogUploader } from './whole-log.ts';

const target: Target = { kind: 'step', name: 's', number: 2, id: 'step_s', image: 'busybox' };

describe('WholeLogUploader', () => {
  it('uploads the whole log, throttled: the bytes sent stay within 3x the log size', async () => {
    let clock = 0;
    const uploads: string[] = [];
    const uploader = new WholeLogUploader(
      (_ctx, _t, log) => {
        uploads.push(Buffer.from(log).toString());
        return Promise.resolve();
      },
      { minIntervalMs: 1000, now: () => clock },
    );
    let expected = '';
    for (let i = 0; i < 2000; i++) {
      const line = `line ${i}\n`;
      expected += line;
      clock += 100;
      await uploader.append(background(), target, Buffer.from(line));
    }
    await uploader.close(background(), target);
    expect(uploads.at(-1)).toBe(expected);
    // Every upload is a prefix of the next (the server's copy only ever grows).
    for (let i = 1; i < uploads.length; i++) expect(uploads[i]?.startsWith(uploads[i - 1] as string)).toBe(true);
    expect(uploader.bytesSent).toBeLessThanOrEqual(3 * expected.length);
    expect(uploads.length).toBeGreaterThan(5);
  });

  it('does not upload again at close when nothing changed, and forgets the log', async () => {
    let count = 0;
    const uploader = new WholeLogUploader(() => {
      count++;
      return Promise.resolve();
    });
    await uploader.append(background(), target, Buffer.from('x'));
    await uploader.close(background(), target);
    await uploader.close(background(), target);
    expect(count).toBe(1);
  });
});
