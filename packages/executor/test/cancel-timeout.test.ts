import { background, type Context, withCancel } from '@berth/context';
import type { Container } from '@berth/pipeline';
import { describe, expect, it } from 'vitest';
import type { Executor } from '../src/executor.ts';
import { runBuild } from '../src/run-build.ts';
import { ctn, dummy, makeBuild, RecordingReporter } from './helpers.ts';
import { type RuntimeMethod, slowed, type StreamEvents, stuckStreams } from './slow-runtime.ts';

/**
 * How long a held runtime call (or a step's sleep) would take: the bound a cancel or a timeout
 * must beat. Bounds come from the build's configuration, never from the machine's speed.
 */
const HOLD_MS = 30_000;

/** Which runtime call holds the build in each phase before exec. */
// Assemble: inspectImage, which it calls for every step whether the runtime sets containers up
// there or as the build reaches them (setupWhileRunning).
const HOLD: Record<'create' | 'plan' | 'assemble', RuntimeMethod> = { create: 'setupBuild', plan: 'createNetwork', assemble: 'inspectImage' };

/** Calls `fn` once the reporter saw `name` running. */
function whenRunning(reporter: RecordingReporter, name: string, fn: () => void): void {
  const stepStatus = reporter.stepStatus.bind(reporter);
  let fired = false;
  reporter.stepStatus = async (ctx, step) => {
    await stepStatus(ctx, step);
    if (!fired && step.name === name && step.status === 'running') {
      fired = true;
      fn();
    }
  };
}

function twoSteps() {
  return makeBuild({ steps: [ctn('first', { commands: ['sleep 30'] }), ctn('second', { commands: ['true'] })] });
}

describe.each(['create', 'plan', 'assemble'] as const)('in %s', (phase) => {
  it('a cancel ends the build at once: canceled, nothing left', async () => {
    const { runtime: base, engine } = await dummy();
    let executor: Executor | undefined;
    let canceledAt = 0;
    // The cancel lands as the held call starts: in this phase, whatever the machine's speed.
    const runtime = slowed(base, { [HOLD[phase]]: HOLD_MS }, () => {
      canceledAt = performance.now();
      executor?.cancelBuild();
    });
    const reporter = new RecordingReporter();
    const result = await runBuild(background(), { build: twoSteps(), runtime, reporter, onStart: (e: Executor) => (executor = e) });
    expect(canceledAt).toBeGreaterThan(0);
    expect(performance.now() - canceledAt).toBeLessThan(HOLD_MS);
    expect(result.status).toBe('canceled');
    expect(reporter.last('init')?.status).toBe('canceled');
    expect(reporter.last('first')?.status).toBe('canceled');
    expect(reporter.last('second')?.status).toBe('canceled');
    expect(reporter.builds.at(-1)?.status).toBe('canceled');
    expect(engine.containers.size + engine.networks.size + engine.volumes.size).toBe(0);
  });

  it('the build timeout errors the build: init failed, steps killed', async () => {
    const { runtime: base, engine } = await dummy();
    const runtime = slowed(base, { [HOLD[phase]]: HOLD_MS });
    const reporter = new RecordingReporter();
    const started = performance.now();
    const result = await runBuild(background(), { build: twoSteps(), runtime, reporter, timeoutMs: 200 });
    expect(performance.now() - started).toBeLessThan(HOLD_MS);
    expect(result.status).toBe('error');
    expect(result.build.error).toBe('the build timed out after 200ms');
    expect(reporter.last('init')).toMatchObject({ status: 'failure', error: 'the build timed out after 200ms' });
    expect(reporter.last('first')).toMatchObject({ status: 'killed', exitCode: 137 });
    expect(reporter.last('second')).toMatchObject({ status: 'killed', exitCode: 137 });
    expect(engine.containers.size + engine.networks.size + engine.volumes.size).toBe(0);
  });
});

describe('in exec', () => {
  it('a cancel stops the running step (canceled, 137) and the rest (canceled)', async () => {
    const { runtime, engine } = await dummy();
    const reporter = new RecordingReporter();
    let canceledAt = 0;
    const result = await runBuild(background(), {
      build: twoSteps(),
      runtime,
      reporter,
      // Cancel once the first step (sleep 30) is running.
      onStart: (executor) =>
        whenRunning(reporter, 'first', () => {
          canceledAt = performance.now();
          executor.cancelBuild(new Error('canceled by the user'));
        }),
    });
    expect(performance.now() - canceledAt).toBeLessThan(HOLD_MS);
    expect(result.status).toBe('canceled');
    expect(result.build.error).toBe('the build was canceled: canceled by the user');
    expect(reporter.last('init')?.status).toBe('success');
    expect(reporter.statuses('first')).toEqual(['running', 'canceled']);
    expect(reporter.last('first')?.exitCode).toBe(137);
    expect(reporter.last('second')?.status).toBe('canceled');
    expect(engine.containers.size).toBe(0);
  });

  it('cancelling the parent ctx cancels the build too', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const [ctx, cancel] = withCancel(background());
    whenRunning(reporter, 'first', () => cancel());
    const result = await runBuild(ctx, { build: twoSteps(), runtime, reporter });
    expect(result.status).toBe('canceled');
    expect(reporter.last('first')).toMatchObject({ status: 'canceled', exitCode: 137 });
  });

  it('the build timeout fails the running step (137) and kills the rest; the build errors', async () => {
    const { runtime, engine } = await dummy();
    const reporter = new RecordingReporter();
    const started = performance.now();
    const result = await runBuild(background(), { build: twoSteps(), runtime, reporter, timeoutMs: 300 });
    expect(performance.now() - started).toBeLessThan(HOLD_MS);
    expect(result.status).toBe('error');
    expect(result.build.error).toBe('the build timed out after 300ms');
    expect(reporter.last('first')).toMatchObject({ status: 'failure', exitCode: 137, error: 'the build timed out after 300ms' });
    expect(reporter.last('second')).toMatchObject({ status: 'killed', exitCode: 137 });
    expect(engine.containers.size).toBe(0);
  });

  it('a timeout inside a stage stops every stage', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    const build = makeBuild({
      stages: [
        { name: 'a', needs: [], independent: false, environment: {}, steps: [ctn('a1', { commands: ['sleep 30'] })] },
        { name: 'b', needs: ['a'], independent: false, environment: {}, steps: [ctn('b1', { commands: ['true'] })] },
      ],
    });
    const result = await runBuild(background(), { build, runtime, reporter, timeoutMs: 300 });
    expect(result.status).toBe('error');
    expect(reporter.last('a1')).toMatchObject({ status: 'failure', exitCode: 137 });
    expect(reporter.last('b1')).toMatchObject({ status: 'killed', exitCode: 137 });
  });
});

describe('in stream', () => {
  it('log streaming is not subject to the build timeout: the last lines still arrive', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    reporter.appendDelayMs = 20;
    const started = Date.now();
    // About 280 batches of 32 bytes at 20 ms each: delivery outlasts the 2 s build timeout.
    const build = makeBuild({ steps: [ctn('loud', { commands: ['seq 1 2000'] })] });
    const result = await runBuild(background(), { build, runtime, reporter, timeoutMs: 2000, logs: { batchBytes: 32 } });
    expect(Date.now() - started).toBeGreaterThan(2000);
    expect(result.status).toBe('success');
    expect(reporter.log('loud').endsWith('1999\n2000\n')).toBe(true);
  });

  it('a cancel cuts streaming after the log-streaming grace', async () => {
    const { runtime } = await dummy();
    const reporter = new RecordingReporter();
    reporter.appendDelayMs = 20;
    const graceMs = 300;
    let canceledAt = 0;
    const build = makeBuild({ steps: [ctn('loud', { commands: ['seq 1 400', 'sleep 60'] })] });
    const result = await runBuild(background(), {
      build,
      runtime,
      reporter,
      logStreamingGraceMs: graceMs,
      logs: { batchBytes: 32 },
      // Cancel while the step runs and its log is still being delivered (about 50 slow batches).
      onStart: (executor) => {
        const poll = setInterval(() => {
          if (reporter.log('loud') === '') return;
          clearInterval(poll);
          canceledAt = performance.now();
          executor.cancelBuild();
        }, 5);
      },
    });
    // Streaming went on for the grace after the cancel (timers may fire a millisecond early).
    expect(performance.now() - canceledAt).toBeGreaterThanOrEqual(graceMs - 5);
    expect(result.status).toBe('canceled');
    expect(reporter.last('loud')).toMatchObject({ status: 'canceled', exitCode: 137 });
    // Its log was cut, then closed.
    expect(reporter.log('loud')).toContain('\n1\n');
    expect(reporter.log('loud').endsWith('400\n')).toBe(false);
    expect(reporter.closed).toContain('loud');
  });
});

describe('a container started as the build ends (issue #13 item 6)', () => {
  it('is still streamed: its stream request is accepted while the stream ctx lives', async () => {
    const { runtime: base } = await dummy();
    let executor: Executor | undefined;
    // runContainer (releaseContainer for a step started held) returns just after the cancel landed:
    // the exec ctx has ended, the container runs.
    const runtime = new Proxy(base, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop, target);
        if (typeof value !== 'function') return value;
        const fn = value as (...args: unknown[]) => Promise<unknown>;
        if (prop !== 'runContainer' && prop !== 'releaseContainer') return fn.bind(target);
        return async (ctx: Context, container: Container, ...rest: unknown[]) => {
          const done = await fn.call(target, ctx, container, ...rest);
          // Once the container has logged its first line, the cancel lands.
          const peek = await target.tailContainer(background(), container);
          await new Promise((resolve) => peek.once('data', resolve));
          peek.destroy();
          executor?.cancelBuild();
          return done;
        };
      },
    });
    const reporter = new RecordingReporter();
    const build = makeBuild({ steps: [ctn('late', { commands: ['echo started late', 'sleep 60'] })] });
    const result = await runBuild(background(), { build, runtime, reporter, logStreamingGraceMs: 500, onStart: (e) => (executor = e) });
    expect(result.status).toBe('canceled');
    expect(reporter.last('late')?.status).toBe('canceled');
    expect(reporter.log('late')).toContain('started late\n');
    expect(reporter.closed).toContain('late');
  });
});

describe('in destroy', () => {
  it('a cancel does not stop cleanup: the parent is cancelled during a slowed removal', async () => {
    const { runtime: base, engine } = await dummy();
    const [parent, cancelParent] = withCancel(background());
    const removals: string[] = [];
    // removeContainer cancels the parent as it starts, then takes 300 ms (honouring its ctx): only
    // a destroy ctx detached from the build's cancel lets it finish.
    const slow = slowed(base, { removeContainer: 300 });
    const runtime = new Proxy(slow, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop, target);
        if (prop !== 'removeContainer' || typeof value !== 'function') return value;
        const fn = value as (ctx: Context, container: Container) => Promise<void>;
        return async (ctx: Context, container: Container) => {
          cancelParent(new Error('the worker is shutting down'));
          removals.push(`start ${container.name}`);
          await fn.call(target, ctx, container);
          removals.push(`done ${container.name}`);
        };
      },
    });
    const reporter = new RecordingReporter();
    const build = makeBuild({ steps: [ctn('one', { commands: ['true'] })] });
    const result = await runBuild(parent, { build, runtime, reporter });
    expect(parent.signal.aborted).toBe(true);
    expect(removals).toEqual(['start one', 'done one']);
    expect(result.status).toBe('success');
    expect(engine.containers.size + engine.networks.size + engine.volumes.size).toBe(0);
  });

  it('a slow log stream does not starve the removals: each gets its own budget (issue #13 item 3)', async () => {
    const { runtime: base, engine } = await dummy();
    // The service's log stream does not end when its container is removed (a stuck connection);
    // the log-streaming grace is longer than the cleanup budget.
    const events: StreamEvents = { cut: new Map() };
    const runtime = stuckStreams(base, events, (c) => c.name === 'svc');
    const reporter = new RecordingReporter();
    const warnings: string[] = [];
    const build = makeBuild({
      services: [ctn('svc', { entrypoint: ['sh', '-c'], commands: ['echo svc up; sleep 60'] })],
      steps: [ctn('one', { commands: ['true'] })],
    });
    const result = await runBuild(background(), {
      build,
      runtime,
      reporter,
      logStreamingGraceMs: 2_000,
      cleanupTimeoutMs: 300,
      logger: { warn: (m) => warnings.push(m) },
    });
    expect(result.status).toBe('success');
    // Every removal ran in its own budget: the volume, the network and the build are gone.
    expect(warnings.filter((w) => /removing the (volume|network|build)/.test(w))).toEqual([]);
    expect(engine.containers.size + engine.networks.size + engine.volumes.size).toBe(0);
    // The stuck stream was cut by the grace, after destroy gave up waiting for it.
    expect(events.cut.has('svc')).toBe(true);
    expect(reporter.closed).toContain('svc');
  });

  it('cleanup is bounded by its own limit, and the final status is still reported', async () => {
    const { runtime: base } = await dummy();
    const runtime = slowed(base, { removeContainer: HOLD_MS, removeNetwork: HOLD_MS });
    const reporter = new RecordingReporter();
    const warnings: string[] = [];
    const started = performance.now();
    const result = await runBuild(background(), {
      build: makeBuild({ steps: [ctn('one', { commands: ['true'] })] }),
      runtime,
      reporter,
      cleanupTimeoutMs: 300,
      logger: { warn: (m) => warnings.push(m) },
    });
    // It did not wait for the 30 s calls: each gave up after its 300 ms budget.
    expect(performance.now() - started).toBeLessThan(HOLD_MS);
    expect(result.status).toBe('success');
    expect(reporter.builds.at(-1)?.status).toBe('success');
    expect(warnings.some((w) => /one/.test(w))).toBe(true);
    expect(warnings.some((w) => /network/.test(w))).toBe(true);
  });
});
