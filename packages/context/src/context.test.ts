import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  type CancelFunc,
  type Context,
  Canceled,
  DeadlineExceeded,
  afterFunc,
  background,
  createKey,
  isContextError,
  sleep,
  withCancel,
  withDeadline,
  withDelayedCancel,
  withSignal,
  withTimeout,
  withValue,
  withoutCancel,
} from './index.ts';
import { expectNoAsyncLeaks } from './testing/index.ts';

const abortListeners = (ctx: Context): number => getEventListeners(ctx.signal, 'abort').length;
const timeouts = (): number => process.getActiveResourcesInfo().filter((t) => t === 'Timeout').length;

afterEach(() => {
  vi.useRealTimers();
});

describe('background', () => {
  it('is never done and has no deadline or values', async () => {
    const bg = background();
    expect(bg).toBe(background());
    expect(bg.signal.aborted).toBe(false);
    expect(bg.err()).toBeUndefined();
    expect(bg.cause()).toBeUndefined();
    expect(bg.deadline()).toBeUndefined();
    expect(bg.value(createKey('k'))).toBeUndefined();
    const raced = await Promise.race([bg.done().then(() => 'done'), sleep(bg, 5).then(() => 'slept')]);
    expect(raced).toBe('slept');
  });

  it('children of background register nothing on it', () => {
    const before = abortListeners(background());
    const [, cancel] = withCancel(background());
    expect(abortListeners(background())).toBe(before);
    cancel();
  });
});

describe('withCancel', () => {
  it('cancel sets err, cause and aborts the signal with err', async () => {
    const [ctx, cancel] = withCancel(background());
    expect(ctx.err()).toBeUndefined();
    expect(ctx.cause()).toBeUndefined();
    const why = new Error('user pressed stop');
    cancel(why);
    expect(ctx.err()).toBeInstanceOf(Canceled);
    expect(ctx.err()?.name).toBe('Canceled');
    expect(ctx.err()?.cause).toBe(why);
    expect(ctx.cause()).toBe(why);
    expect(ctx.signal.aborted).toBe(true);
    expect(ctx.signal.reason).toBe(ctx.err());
    await expect(ctx.done()).resolves.toBeUndefined();
    // Only the first cancel counts.
    const first = ctx.err();
    cancel(new Error('second'));
    expect(ctx.err()).toBe(first);
    expect(ctx.cause()).toBe(why);
  });

  it('cause defaults to err', () => {
    const [ctx, cancel] = withCancel(background());
    cancel();
    expect(ctx.cause()).toBe(ctx.err());
    expect(isContextError(ctx.err())).toBe(true);
    expect(isContextError(new Error('x'))).toBe(false);
  });

  it('propagates parent cancellation (err and cause) to all descendants, never upwards', () => {
    const [root, cancelRoot] = withCancel(background());
    const [mid, cancelMid] = withCancel(root);
    const [leaf] = withCancel(withValue(mid, createKey<number>('n'), 1));
    const [sibling, cancelSibling] = withCancel(root);
    cancelSibling('sibling done');
    expect(root.err()).toBeUndefined();
    expect(mid.err()).toBeUndefined();
    const why = { reason: 'build cancelled' };
    cancelRoot(why);
    for (const c of [mid, leaf]) {
      expect(c.err()).toBe(root.err());
      expect(c.cause()).toBe(why);
      expect(c.signal.reason).toBe(root.err());
    }
    expect(sibling.cause()).toBe('sibling done');
    cancelMid('late');
    expect(mid.cause()).toBe(why);
  });

  it('a child of an already-done parent is born done', () => {
    const [parent, cancel] = withCancel(background());
    cancel('gone');
    const [child] = withCancel(parent);
    expect(child.err()).toBe(parent.err());
    expect(child.cause()).toBe('gone');
  });

  it('done() returns one promise backed by one listener, removed when done', async () => {
    const [ctx, cancel] = withCancel(background());
    const p = ctx.done();
    expect(ctx.done()).toBe(p);
    expect(abortListeners(ctx)).toBe(1);
    cancel();
    await p;
    expect(abortListeners(ctx)).toBe(0);
  });
});

describe('deadlines', () => {
  it('withTimeout fires DeadlineExceeded and clears nothing early', () => {
    vi.useFakeTimers();
    const [ctx, cancel] = withTimeout(background(), 1000);
    expect(ctx.deadline()?.getTime()).toBe(Date.now() + 1000);
    vi.advanceTimersByTime(999);
    expect(ctx.err()).toBeUndefined();
    vi.advanceTimersByTime(1);
    expect(ctx.err()).toBeInstanceOf(DeadlineExceeded);
    expect(ctx.err()?.name).toBe('DeadlineExceeded');
    expect(ctx.cause()).toBe(ctx.err());
    expect(vi.getTimerCount()).toBe(0);
    cancel('too late');
    expect(ctx.err()).toBeInstanceOf(DeadlineExceeded);
  });

  it('cancel clears the timer', () => {
    vi.useFakeTimers();
    const [, cancel] = withTimeout(background(), 60_000);
    const [, cancel2] = withDeadline(background(), new Date(Date.now() + 3_000_000_000));
    expect(vi.getTimerCount()).toBe(2);
    cancel();
    cancel2();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('deadlines beyond setTimeout range still fire', () => {
    vi.useFakeTimers();
    const [ctx, cancel] = withDeadline(background(), new Date(Date.now() + 2 ** 31 + 5000));
    vi.advanceTimersByTime(2 ** 31);
    expect(ctx.err()).toBeUndefined();
    vi.advanceTimersByTime(5000);
    expect(ctx.err()).toBeInstanceOf(DeadlineExceeded);
    cancel();
  });

  it('a past deadline is done at once', () => {
    const [ctx, cancel] = withDeadline(background(), new Date(Date.now() - 1));
    expect(ctx.err()).toBeInstanceOf(DeadlineExceeded);
    cancel();
  });

  it('a child never outlives the parent deadline and inherits DeadlineExceeded', () => {
    vi.useFakeTimers();
    const [parent, cancelParent] = withTimeout(background(), 100);
    const [child, cancelChild] = withTimeout(parent, 10_000);
    const [grandchild, cancelGrandchild] = withCancel(withValue(child, createKey('k'), 1));
    expect(child.deadline()).toEqual(parent.deadline());
    expect(grandchild.deadline()).toEqual(parent.deadline());
    // Only the parent's timer was armed.
    expect(vi.getTimerCount()).toBe(1);
    const [shorter, cancelShorter] = withTimeout(parent, 50);
    expect(shorter.deadline()?.getTime()).toBe(Date.now() + 50);
    vi.advanceTimersByTime(100);
    expect(shorter.err()).toBeInstanceOf(DeadlineExceeded);
    expect(shorter.err()).not.toBe(parent.err());
    for (const c of [child, grandchild]) {
      expect(c.err()).toBe(parent.err());
      expect(c.err()).toBeInstanceOf(DeadlineExceeded);
      expect(c.cause()).toBe(parent.err());
    }
    for (const c of [cancelParent, cancelChild, cancelGrandchild, cancelShorter]) c();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('sleep resolves after ms, rejects with ctx.err() and clears its timer', async () => {
    await expectNoAsyncLeaks(async () => {
      await sleep(background(), 1);
      const [ctx, cancel] = withCancel(background());
      const p = sleep(ctx, 60_000);
      expect(abortListeners(ctx)).toBe(1);
      cancel('stop');
      await expect(p).rejects.toBe(ctx.err());
      expect(abortListeners(ctx)).toBe(0);
      await expect(sleep(ctx, 1)).rejects.toBeInstanceOf(Canceled);
      const [live, cancelLive] = withCancel(background());
      await sleep(live, 1);
      expect(abortListeners(live)).toBe(0);
      cancelLive();
    });
  });
});

describe('values', () => {
  it('looks keys up by identity through any kind of context', () => {
    const user = createKey<string>('user');
    const other = createKey<string>('user');
    const base = withValue(background(), user, 'ana');
    const [c] = withTimeout(base, 60_000);
    const shadow = withValue(c, user, 'bob');
    expect(c.value(user)).toBe('ana');
    expect(c.value(other)).toBeUndefined();
    expect(shadow.value(user)).toBe('bob');
    expect(withoutCancel(shadow).value(user)).toBe('bob');
    const [delayed, cancelDelayed] = withDelayedCancel(shadow, 10);
    expect(delayed.value(user)).toBe('bob');
    cancelDelayed();
    // withValue shares its parent's signal.
    expect(shadow.signal).toBe(c.signal);
  });
});

describe('withoutCancel', () => {
  it('keeps values, drops cancellation and deadline', () => {
    const key = createKey<number>('n');
    const [parent, cancel] = withTimeout(withValue(background(), key, 7), 1000);
    const detached = withoutCancel(parent);
    const [child, cancelChild] = withCancel(detached);
    const before = abortListeners(parent);
    cancel('x');
    expect(parent.err()).toBeInstanceOf(Canceled);
    expect(detached.err()).toBeUndefined();
    expect(detached.signal.aborted).toBe(false);
    expect(detached.deadline()).toBeUndefined();
    expect(detached.value(key)).toBe(7);
    expect(child.err()).toBeUndefined();
    expect(before).toBe(0);
    cancelChild();
  });
});

describe('withDelayedCancel', () => {
  it('is cancelled ms after its parent, with the parent err/cause', () => {
    vi.useFakeTimers();
    const [parent, cancelParent] = withCancel(background());
    const [grace, cancelGrace] = withDelayedCancel(parent, 500);
    const [graceChild] = withCancel(grace);
    cancelParent('shutdown');
    vi.advanceTimersByTime(499);
    expect(grace.err()).toBeUndefined();
    expect(graceChild.err()).toBeUndefined();
    vi.advanceTimersByTime(1);
    expect(grace.err()).toBe(parent.err());
    expect(grace.cause()).toBe('shutdown');
    expect(graceChild.cause()).toBe('shutdown');
    expect(vi.getTimerCount()).toBe(0);
    cancelGrace();
  });

  it('own cancel is immediate and clears a running grace timer', () => {
    vi.useFakeTimers();
    const [parent, cancelParent] = withCancel(background());
    const [grace, cancelGrace] = withDelayedCancel(parent, 500);
    cancelParent();
    expect(vi.getTimerCount()).toBe(1);
    cancelGrace('mine');
    expect(grace.cause()).toBe('mine');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('own cancel before the parent releases the parent listener; deadline is parent deadline + ms', () => {
    vi.useFakeTimers();
    const [parent, cancelParent] = withTimeout(background(), 1000);
    const [grace, cancelGrace] = withDelayedCancel(parent, 500);
    expect(grace.deadline()?.getTime()).toBe((parent.deadline()?.getTime() ?? 0) + 500);
    expect(abortListeners(parent)).toBe(1);
    cancelGrace();
    expect(abortListeners(parent)).toBe(0);
    vi.advanceTimersByTime(1000);
    expect(parent.err()).toBeInstanceOf(DeadlineExceeded);
    expect(grace.err()).toBeInstanceOf(Canceled);
    cancelParent();
  });

  it('a parent already done starts the grace period at once', () => {
    vi.useFakeTimers();
    const [parent, cancelParent] = withTimeout(background(), 0);
    const [grace] = withDelayedCancel(parent, 20);
    expect(grace.err()).toBeUndefined();
    vi.advanceTimersByTime(20);
    expect(grace.err()).toBeInstanceOf(DeadlineExceeded);
    cancelParent();
  });
});

describe('afterFunc', () => {
  it('runs fn once when the ctx is done; stop() after that returns false', async () => {
    const [ctx, cancel] = withCancel(background());
    const fn = vi.fn();
    const stop = afterFunc(ctx, fn);
    cancel();
    cancel();
    await Promise.resolve();
    expect(fn).toHaveBeenCalledTimes(1);
    expect(stop()).toBe(false);
  });

  it('stop() before done prevents fn and removes the listener', async () => {
    const [ctx, cancel] = withCancel(background());
    const fn = vi.fn();
    const stop = afterFunc(ctx, fn);
    expect(abortListeners(ctx)).toBe(1);
    expect(stop()).toBe(true);
    expect(stop()).toBe(false);
    expect(abortListeners(ctx)).toBe(0);
    cancel();
    await Promise.resolve();
    expect(fn).not.toHaveBeenCalled();
  });

  it('on an already-done ctx it runs fn and stop() returns false', async () => {
    const [ctx, cancel] = withCancel(background());
    cancel();
    const fn = vi.fn();
    const stop = afterFunc(ctx, fn);
    expect(stop()).toBe(false);
    await Promise.resolve();
    expect(fn).toHaveBeenCalledTimes(1);
  });

  it('on background it never runs; stop() returns true once', () => {
    const stop = afterFunc(background(), () => undefined);
    expect(stop()).toBe(true);
    expect(stop()).toBe(false);
  });
});

describe('withSignal', () => {
  it('is cancelled by a foreign signal and detaches from it on cancel', () => {
    const ac = new AbortController();
    const [ctx, cancel] = withSignal(background(), ac.signal);
    ac.abort('SIGTERM');
    expect(ctx.err()).toBeInstanceOf(Canceled);
    expect(ctx.cause()).toBe('SIGTERM');
    cancel();
    const ac2 = new AbortController();
    const [ctx2, cancel2] = withSignal(background(), ac2.signal);
    expect(getEventListeners(ac2.signal, 'abort')).toHaveLength(1);
    cancel2();
    return Promise.resolve().then(() => {
      expect(getEventListeners(ac2.signal, 'abort')).toHaveLength(0);
      expect(ctx2.err()).toBeInstanceOf(Canceled);
    });
  });

  it('maps a TimeoutError to DeadlineExceeded', async () => {
    const [ctx, cancel] = withSignal(background(), AbortSignal.timeout(1));
    await ctx.done();
    expect(ctx.err()).toBeInstanceOf(DeadlineExceeded);
    cancel();
  });
});

describe('many short-lived children', () => {
  it('a long-lived root returns to its baseline after 100,000 children', () => {
    const [root, cancelRoot] = withCancel(background());
    const baseline = abortListeners(root);
    const timersBefore = timeouts();
    const gc = (globalThis as { gc?: () => void }).gc;
    const heap = (): number => {
      gc?.();
      gc?.();
      return process.memoryUsage().heapUsed;
    };
    // Warm up so one-time allocations do not count.
    for (let i = 0; i < 1000; i++) withTimeout(root, 60_000)[1]();
    const heapBefore = heap();
    for (let i = 0; i < 100_000; i++) {
      const [child, cancel] = i % 2 === 0 ? withCancel(root) : withTimeout(root, 60_000);
      if (i % 3 === 0) void child.done();
      const [grandchild, cancelGrandchild] = withCancel(child);
      if (i % 5 === 0) cancelGrandchild();
      cancel();
      if (grandchild.err() === undefined) throw new Error('grandchild not cancelled');
    }
    expect(abortListeners(root)).toBe(baseline);
    expect(timeouts()).toBe(timersBefore);
    const growth = heap() - heapBefore;
    if (gc) {
      // Retaining the children would cost well over 50 MB; allow generous noise.
      expect(growth).toBeLessThan(8 * 1024 * 1024);
    }
    // Control: children that are not cancelled stay registered until the root is done.
    const kept: CancelFunc[] = [];
    for (let i = 0; i < 1000; i++) kept.push(withCancel(root)[1]);
    expect(abortListeners(root)).toBe(baseline + 1000);
    cancelRoot();
    expect(abortListeners(root)).toBe(0);
    for (const cancel of kept) cancel();
  });

  it('runs with --expose-gc so the heap bound above is checked', () => {
    expect(typeof (globalThis as { gc?: unknown }).gc).toBe('function');
  });
});

// --- property test: random trees cancelled in random order -------------------------------------

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Kind = 'cancel' | 'timeout' | 'value' | 'detached' | 'delayed';
interface Node {
  kind: Kind;
  parent: number; // -1 for the root
  ctx: Context;
  cancel?: CancelFunc;
  cancelledAt?: number; // step at which its own cancel was called
  cause?: unknown;
}

describe('random trees (property)', () => {
  it('a node is done iff it or an ancestor (up to a withoutCancel) was cancelled, with the first one’s err', () => {
    const rand = mulberry32(0xb3e7);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
    let checks = 0;
    for (let tree = 0; tree < 200; tree++) {
      const size = 1 + Math.floor(rand() * 50);
      const [rootCtx, rootCancel] = withCancel(background());
      const nodes: Node[] = [{ kind: 'cancel', parent: -1, ctx: rootCtx, cancel: rootCancel }];
      const key = createKey<number>('id');
      for (let i = 1; i < size; i++) {
        const parent = Math.floor(rand() * i);
        const p = (nodes[parent] as Node).ctx;
        const kind = pick<Kind>(['cancel', 'cancel', 'timeout', 'value', 'detached', 'delayed']);
        let node: Node;
        switch (kind) {
          case 'cancel': {
            const [ctx, cancel] = withCancel(p);
            node = { kind, parent, ctx, cancel };
            break;
          }
          case 'timeout': {
            const [ctx, cancel] = withTimeout(p, 3_600_000);
            node = { kind, parent, ctx, cancel };
            break;
          }
          case 'delayed': {
            // A zero grace cannot be observed synchronously; it is only cancelled directly here.
            const [ctx, cancel] = withDelayedCancel(p, 3_600_000);
            node = { kind, parent, ctx, cancel };
            break;
          }
          case 'value':
            node = { kind, parent, ctx: withValue(p, key, i) };
            break;
          case 'detached':
            node = { kind, parent, ctx: withoutCancel(p) };
            break;
        }
        nodes.push(node);
      }
      const cancellable = nodes.map((n, i) => ({ n, i })).filter(({ n }) => n.cancel);
      // Random order over a random subset.
      for (let i = cancellable.length - 1; i > 0; i--) {
        const j = Math.floor(rand() * (i + 1));
        [cancellable[i], cancellable[j]] = [cancellable[j]!, cancellable[i]!];
      }
      const order = cancellable.slice(0, Math.floor(rand() * (cancellable.length + 1)));
      // Expected state: walk the chain up to (not past) a withoutCancel; a 'delayed' node only
      // propagates its parent's cancellation after its grace period, which never elapses here.
      const firstCancelled = (i: number): Node | undefined => {
        let best: Node | undefined;
        for (let j = i; j >= 0;) {
          const n = nodes[j] as Node;
          if (n.cancelledAt !== undefined && (best === undefined || n.cancelledAt < (best.cancelledAt ?? Infinity))) best = n;
          if (n.kind === 'detached' || n.kind === 'delayed') break;
          j = n.parent;
        }
        return best;
      };
      const check = (): void => {
        nodes.forEach((n, i) => {
          const first = firstCancelled(i);
          checks++;
          if (!first) {
            expect(n.ctx.err(), `tree ${tree} node ${i} should be live`).toBeUndefined();
            expect(n.ctx.signal.aborted).toBe(false);
          } else {
            const owner = first.ctx;
            expect(n.ctx.err(), `tree ${tree} node ${i}`).toBe(owner.err());
            expect(owner.err()).toBeInstanceOf(Canceled);
            expect(n.ctx.cause()).toBe(first.cause === undefined ? owner.err() : first.cause);
            expect(n.ctx.signal.reason).toBe(owner.err());
          }
        });
      };
      check();
      order.forEach(({ n }, step) => {
        n.cancelledAt = step;
        n.cause = rand() < 0.3 ? undefined : { step, tree };
        n.cancel?.(n.cause);
        // A repeated cancel must change nothing.
        if (rand() < 0.2) n.cancel?.({ ignored: true });
        check();
      });
      for (const n of nodes) n.cancel?.();
      expect(abortListeners(rootCtx)).toBe(0);
    }
    expect(checks).toBeGreaterThan(5000);
  });
});
