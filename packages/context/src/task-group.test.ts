import { describe, expect, it } from 'vitest';
import { Canceled, TaskGroup, errOf, background, sleep, withCancel } from './index.ts';
import { listenerCount, useAsyncLeakCheck } from './testing/index.ts';

useAsyncLeakCheck();

/** A promise with its resolvers, to drive tasks step by step. */
function deferred(): { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void } {
  const { promise, resolve, reject } = Promise.withResolvers<void>();
  return { promise, resolve: () => resolve(), reject };
}

const flush = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe('TaskGroup', () => {
  it('resolves when every task succeeded, then cancels its ctx', async () => {
    const group = new TaskGroup(background());
    const done: number[] = [];
    for (const n of [3, 1, 2]) {
      group.go(async (ctx) => {
        await sleep(ctx, n);
        done.push(n);
      });
    }
    expect(group.ctx.err()).toBeUndefined();
    await group.wait();
    expect(done.sort()).toEqual([1, 2, 3]);
    expect(group.ctx.err()).toBeInstanceOf(Canceled);
  });

  it('wait() with no tasks resolves at once', async () => {
    await expect(new TaskGroup(background()).wait()).resolves.toBeUndefined();
  });

  it('the first error cancels the ctx (cause = error) and wait() waits for every task', async () => {
    const group = new TaskGroup(background());
    const boom = new Error('step failed');
    const stubborn = deferred();
    const seen: unknown[] = [];
    let stubbornSettled = false;
    group.go(async (ctx) => {
      try {
        await sleep(ctx, 60_000);
      } catch (e) {
        seen.push(e);
        throw e;
      }
    });
    group.go(async () => {
      // Ignores the context on purpose.
      await stubborn.promise;
      stubbornSettled = true;
    });
    group.go(() => Promise.reject(boom));
    group.go(() => Promise.reject(new Error('second failure')));
    let waited = false;
    const waiting = group.wait().finally(() => {
      waited = true;
    });
    await flush();
    expect(group.ctx.cause()).toBe(boom);
    expect(group.ctx.err()).toBeInstanceOf(Canceled);
    expect(seen).toEqual([group.ctx.err()]);
    await sleep(background(), 10);
    expect(waited).toBe(false);
    stubborn.resolve();
    await expect(waiting).rejects.toBe(boom);
    expect(stubbornSettled).toBe(true);
  });

  it('a synchronous throw counts as a failure', async () => {
    const group = new TaskGroup(background());
    const boom = new Error('sync');
    group.go(() => {
      throw boom;
    });
    await expect(group.wait()).rejects.toBe(boom);
  });

  it('respects limit and starts queued tasks in order', async () => {
    const group = new TaskGroup(background(), { limit: 2 });
    let running = 0;
    let peak = 0;
    const started: number[] = [];
    const gates = Array.from({ length: 6 }, () => deferred());
    gates.forEach((gate, i) => {
      group.go(async () => {
        started.push(i);
        running++;
        peak = Math.max(peak, running);
        await gate.promise;
        running--;
      });
    });
    expect(started).toEqual([0, 1]);
    expect(group.pending).toBe(6);
    gates[1]?.resolve();
    await flush();
    expect(started).toEqual([0, 1, 2]);
    for (const gate of gates) gate.resolve();
    await group.wait();
    expect(started).toEqual([0, 1, 2, 3, 4, 5]);
    expect(peak).toBe(2);
    expect(group.pending).toBe(0);
  });

  it('rejects a bad limit', () => {
    expect(() => new TaskGroup(background(), { limit: 0 })).toThrow(RangeError);
  });

  it('parent cancellation racing wait(): tasks see it, wait() reports their error after all settle', async () => {
    const [parent, cancel] = withCancel(background());
    const group = new TaskGroup(parent, { limit: 1 });
    const order: string[] = [];
    group.go(async (ctx) => {
      await ctx.done();
      order.push('a');
      throw errOf(ctx);
    });
    group.go(async (ctx) => {
      order.push(`b:${ctx.err()?.name ?? 'live'}`);
      await Promise.resolve();
    });
    const waiting = group.wait();
    cancel('shutdown');
    await expect(waiting).rejects.toBe(parent.err());
    expect(order).toEqual(['a', 'b:Canceled']);
    expect(group.ctx.cause()).toBe('shutdown');
    expect(listenerCount(parent.signal)).toBe(0);
  });

  it('releases its registration on the parent once wait() settles', async () => {
    const [parent, cancel] = withCancel(background());
    for (let i = 0; i < 50; i++) {
      const group = new TaskGroup(parent);
      group.go(() => Promise.resolve());
      await group.wait();
    }
    expect(listenerCount(parent.signal)).toBe(0);
    cancel();
  });
});
