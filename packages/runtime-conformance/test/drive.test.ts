import { Readable } from 'node:stream';
import { background, withCancel, withTimeout } from '@berth/context';
import { isRuntimeError, type Runtime } from '@berth/runtime';
import { describe, expect, it } from 'vitest';
import {
  collectStream,
  conformanceBuild,
  conformanceStep,
  describeOutcome,
  EarlyTailEndError,
  pollUntil,
  rejectedWith,
  runToCompletion,
  settleWithin,
} from '../src/index.ts';

describe('collectStream', () => {
  it('reads a stream to its end, in order', async () => {
    const data = await collectStream(background(), Readable.from([Buffer.from('a'), Buffer.from('bc'), 'd']));
    expect(data.toString()).toBe('abcd');
  });

  it('destroys a stream that never ends when its ctx is cancelled, rejecting Canceled', async () => {
    const stream = new Readable({ read: () => undefined });
    stream.push('partial');
    const [ctx, cancel] = withCancel(background());
    const reading = collectStream(ctx, stream);
    setTimeout(cancel, 20);
    const error = await reading.catch((e: unknown) => e);
    expect(isRuntimeError(error, 'Canceled')).toBe(true);
    expect(stream.destroyed).toBe(true);
  });

  it('rejects DeadlineExceeded when its ctx times out', async () => {
    const [ctx, cancel] = withTimeout(background(), 20);
    const error = await collectStream(ctx, new Readable({ read: () => undefined })).catch((e: unknown) => e);
    cancel();
    expect(isRuntimeError(error, 'DeadlineExceeded')).toBe(true);
  });
});

describe('settleWithin', () => {
  it('tells how a promise settled', async () => {
    const ok = await settleWithin(Promise.resolve(42), 1000);
    expect(ok).toMatchObject({ status: 'fulfilled', value: 42 });
    const failed = await settleWithin(Promise.reject(new Error('no')), 1000);
    expect(failed.status).toBe('rejected');
    expect(describeOutcome(failed)).toMatch(/rejected after \d+ ms with Error: no/);
    expect(rejectedWith(failed, 'Canceled')).toBe(false);
  });

  it('gives up on a promise that hangs, without hanging itself', async () => {
    const outcome = await settleWithin(new Promise(() => undefined), 30);
    expect(outcome.status).toBe('pending');
    expect(outcome.ms).toBeGreaterThanOrEqual(25);
  });
});

describe('pollUntil', () => {
  it('returns true once the check holds, false when the limit passes first', async () => {
    let calls = 0;
    expect(await pollUntil(() => Promise.resolve(++calls >= 3), 2000, 5)).toBe(true);
    expect(calls).toBe(3);
    expect(await pollUntil(() => Promise.reject(new Error('not yet')), 50, 5)).toBe(false);
  });
});

describe('runToCompletion and a live tail that ends before the container exits', () => {
  /** A fake runtime whose live tail stops after "first" while the process still runs; a later tail is whole. */
  function earlyEnding() {
    let state: 'created' | 'running' | 'exited' = 'created';
    let tails = 0;
    let exit: (value: { exitCode: number }) => void = () => undefined;
    const exited = new Promise<{ exitCode: number }>((resolve) => (exit = resolve));
    const runtime = {
      name: 'fake',
      runContainer: () => {
        state = 'running';
        return Promise.resolve();
      },
      tailContainer: () => {
        tails++;
        if (tails > 1) return Promise.resolve(Readable.from([Buffer.from('first\nlast\n')]));
        const stream = Readable.from([Buffer.from('first\n')]);
        // The process exits (writing "last") well after this stream ended.
        stream.on('end', () => setTimeout(() => ((state = 'exited'), exit({ exitCode: 0 })), 50));
        return Promise.resolve(stream);
      },
      waitContainer: () => exited,
      inspectContainer: () => Promise.resolve({ state }),
    } as unknown as Runtime;
    return runtime;
  }
  const build = conformanceBuild();
  const step = conformanceStep(build, 'follow', 1, { image: 'x', script: ['echo first', 'sleep 1', 'echo last'] });

  it('rejects EarlyTailEndError naming the cause and both logs (fails on a runtime whose tail stops at the log written so far)', async () => {
    const error = await runToCompletion(earlyEnding(), build, step).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EarlyTailEndError);
    expect((error as Error).message).toMatch(
      /the log stream of follow ended while the container was still running; it delivered "first\\n" but a tail opened after the exit returned "first\\nlast\\n"/,
    );
  });

  it("with earlyEnd 'reread', returns the whole log re-read after the exit and says so", async () => {
    const result = await runToCompletion(earlyEnding(), build, step, { earlyEnd: 'reread' });
    expect(result).toMatchObject({ logs: 'first\nlast\n', liveTailEndedEarly: true, exit: { exitCode: 0 } });
  });
});
