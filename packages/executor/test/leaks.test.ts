import { background, type Context, withCancel } from '@berth/context';
import { expectNoAsyncLeaks, listenerCount } from '@berth/context/testing';
import { describe, expect, it } from 'vitest';
import { Executor } from '../src/executor.ts';
import { runBuild } from '../src/run-build.ts';
import { ctn, dummy, makeBuild, RecordingReporter, secret, stage } from './helpers.ts';

type Kind = 'passing' | 'failing' | 'canceled' | 'timed-out';

function buildFor(kind: Kind) {
  const slow = kind === 'canceled' || kind === 'timed-out';
  return makeBuild({
    secrets: [secret('token', 'leak-test-secret')],
    services: [
      ctn('svc', { entrypoint: ['sh', '-c'], commands: ['while true; do echo svc $TOKEN; sleep 0.01; done'], secrets: [{ source: 'token', target: 'TOKEN' }] }),
    ],
    stages: [
      stage('one', [ctn('a', { commands: ['seq 1 500', slow ? 'sleep 30' : 'true'] })]),
      stage('two', [ctn('b', { commands: [kind === 'failing' ? 'exit 2' : 'echo ok'] }), ctn('c', { detach: true, commands: ['sleep 30'] })], {
        needs: ['one'],
      }),
    ],
  });
}

describe('async resources', () => {
  it('none of 50 builds (passing, failing, canceled, timed out; final status at the end of destroy or of exec) leaves a timer, socket or listener behind', async () => {
    const { runtime: base } = await dummy();
    // Every ctx the build handed the runtime (exec, stream, destroy, budgets): none may keep a
    // listener once the build is over.
    const used = new Set<AbortSignal>();
    const runtime = new Proxy(base, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop, target);
        if (typeof value !== 'function') return value;
        const fn = value as (ctx: Context, ...args: unknown[]) => unknown;
        return (ctx: Context, ...args: unknown[]) => {
          used.add(ctx.signal);
          return fn.call(target, ctx, ...args);
        };
      },
    });
    const kinds: Kind[] = ['passing', 'failing', 'canceled', 'timed-out'];
    const seen = new Map<Kind, string>();
    // The worker's root ctx, shared by every build: no build may leave a listener on it.
    const [root, cancelRoot] = withCancel(background());
    await expectNoAsyncLeaks(async () => {
      for (let i = 0; i < 50; i++) {
        const kind = kinds[i % kinds.length] as Kind;
        const reporter = new RecordingReporter();
        const [ctx, cancel] = withCancel(root);
        const timer = kind === 'canceled' ? setTimeout(() => cancel(), 60) : undefined;
        const result = await runBuild(ctx, {
          build: buildFor(kind),
          runtime,
          reporter,
          timeoutMs: kind === 'timed-out' ? 60 : 30_000,
          logStreamingGraceMs: 50,
          logs: { flushIntervalMs: 5 },
          // Each kind in both orders (berth exec's and berth start's).
          finalBuildStatusAt: i % 8 < 4 ? 'destroy-end' : 'exec-end',
        });
        clearTimeout(timer);
        // The ctx runBuild was given (the build ctx, the stream ctx and the rest hang off it): once
        // the build is over it holds no listener of the build's.
        expect(listenerCount(ctx.signal)).toBe(0);
        expect(used.size).toBeGreaterThan(0);
        expect([...used].map((signal) => listenerCount(signal)).filter((n) => n > 0)).toEqual([]);
        used.clear();
        cancel();
        expect(listenerCount(root.signal)).toBe(0);
        seen.set(kind, result.status);
        expect(reporter.log('svc')).not.toContain('leak-test-secret');
      }
    });
    cancelRoot();
    expect(Object.fromEntries(seen)).toEqual({ passing: 'success', failing: 'failure', canceled: 'canceled', 'timed-out': 'error' });
  });

  it('the check can fail: contexts never released leave their timer behind', async () => {
    const { runtime } = await dummy();
    const executor = new Executor({ build: makeBuild({ steps: [ctn('x', { commands: ['true'] })] }), runtime, timeoutMs: 60_000 });
    let release = (): void => undefined;
    await expect(
      expectNoAsyncLeaks(() => {
        release = executor.contexts(background()).release;
      }),
    ).rejects.toThrow(/Timeout/);
    release();
  });
});
