import { background, withCancel } from '@berth/context';
import { listenerCount } from '@berth/context/testing';
import { describe, expect, it } from 'vitest';
import { deferred, makeBuildContexts, settleWithin, untilDone } from './contexts.ts';

describe('makeBuildContexts', () => {
  it('end() ends the build and exec at once, the stream after its grace; destroy is never cancelled', async () => {
    const [parent, cancelParent] = withCancel(background());
    const { contexts, state } = makeBuildContexts(parent, { timeoutMs: 60_000, logStreamingGraceMs: 50 });
    const destroy = contexts.destroy();
    contexts.end();
    expect(state.released).toBe(true);
    expect(contexts.build.signal.aborted).toBe(true);
    expect(contexts.exec.signal.aborted).toBe(true);
    expect(contexts.stream.signal.aborted).toBe(false);
    await contexts.stream.done();
    expect(destroy.signal.aborted).toBe(false);
    contexts.release();
    expect(listenerCount(parent.signal)).toBe(0);
    cancelParent();
  });

  it('a cancel of the parent is no release: the state says so', () => {
    const [parent, cancelParent] = withCancel(background());
    const { contexts, state } = makeBuildContexts(parent, { timeoutMs: 60_000, logStreamingGraceMs: 60_000 });
    cancelParent();
    expect(contexts.exec.signal.aborted).toBe(true);
    expect(contexts.stream.signal.aborted).toBe(false);
    expect(state.released).toBe(false);
    contexts.release();
    expect(contexts.stream.signal.aborted).toBe(true);
  });
});

describe('promise helpers', () => {
  it('a deferred nobody waits for may reject without an unhandled rejection', async () => {
    const d = deferred();
    d.reject(new Error('nobody listens'));
    await expect(d.promise).rejects.toThrow('nobody listens');
  });

  it('untilDone rejects with the ctx error when the ctx ends first, and leaves no listener', async () => {
    const [ctx, cancel] = withCancel(background());
    const pending = deferred();
    const waiting = untilDone(ctx, pending.promise);
    expect(listenerCount(ctx.signal)).toBe(1);
    cancel();
    await expect(waiting).rejects.toThrow(/cancel/i);
    expect(listenerCount(ctx.signal)).toBe(0);
  });

  it('untilDone passes the value on and removes its listener; settleWithin never rejects', async () => {
    const [ctx, cancel] = withCancel(background());
    expect(await untilDone(ctx, Promise.resolve(7))).toBe(7);
    expect(listenerCount(ctx.signal)).toBe(0);
    await expect(settleWithin(ctx, Promise.reject(new Error('x')))).resolves.toBeUndefined();
    cancel();
    await expect(settleWithin(ctx, new Promise(() => undefined))).resolves.toBeUndefined();
  });
});
