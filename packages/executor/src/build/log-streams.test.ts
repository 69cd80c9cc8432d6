import { background, withCancel } from '@berth/context';
import { describe, expect, it } from 'vitest';
import { nullReporter, type Reporter, type Target } from '../reporter.ts';
import { InitLog, makeLogWriter } from './log-streams.ts';

const target: Target = { kind: 'step', name: 'one', number: 2, id: 'step_one', image: 'busybox' };

function recording(): { reporter: Reporter; text: () => string; closed: () => number } {
  const chunks: Buffer[] = [];
  let closed = 0;
  const reporter: Reporter = {
    ...nullReporter,
    appendLog: (_ctx, _t, chunk) => {
      chunks.push(Buffer.from(chunk));
      return Promise.resolve();
    },
    closeLog: () => {
      closed++;
      return Promise.resolve();
    },
  };
  return { reporter, text: () => Buffer.concat(chunks).toString(), closed: () => closed };
}

describe('makeLogWriter', () => {
  it('after the stream ctx ended, what was read is still delivered on close, masked; nothing more is', async () => {
    const { reporter, text, closed } = recording();
    const [stream, cancel] = withCancel(background());
    const writer = makeLogWriter(target, {
      reporter,
      appendCtx: () => stream,
      reportCtx: () => background(),
      warn: () => undefined,
      logs: { flushIntervalMs: 60_000 },
      secrets: ['s3cret-value'],
    });
    await writer.write('read before the cut: s3cret-value\n');
    cancel();
    await writer.close();
    await writer.write('after close\n');
    expect(text()).toBe('read before the cut: ***\n');
    expect(closed()).toBe(1);
  });
});

describe('InitLog', () => {
  it('keeps lines in order, adds missing newlines, ignores empty text, and closes once they are delivered', async () => {
    const { reporter, text, closed } = recording();
    const writer = makeLogWriter(target, {
      reporter,
      appendCtx: () => background(),
      reportCtx: () => background(),
      warn: () => undefined,
      logs: {},
      secrets: [],
    });
    const log = new InitLog(() => writer);
    log.line('> one');
    log.line('');
    log.line('> two\n');
    await log.close();
    expect(text()).toBe('> one\n> two\n');
    expect(closed()).toBe(1);
  });
});
