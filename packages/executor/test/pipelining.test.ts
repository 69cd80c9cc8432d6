/**
 * Issue 28 item 2: on a runtime that sets each container up on its own (`setupWhileRunning`:
 * Docker, the dummy), the executor sets the steps' containers up once the build is assembled, one
 * at a time while the build runs, not all of them in assembleBuild; a container set up for a step that then does not run is removed at
 * once; a step taking a lazy secret is set up only once the secret is loaded. On a runtime without
 * it (Kubernetes: the pod holds every container) every container is set up before assembleBuild,
 * as Vela's executor does (go-vela/worker executor/linux/build.go AssembleBuild → CreateStep).
 *
 * The first cases hide the held start (contract 1.4) to check the containers created ahead; the
 * held start itself (each step's container started ahead, released when its step runs) follows.
 */
import { background, errOf, withCancel } from '@berth/context';
import type { Build } from '@berth/pipeline';
import { type Runtime, RuntimeError } from '@berth/runtime';
import { describe, expect, it } from 'vitest';
import { runBuild } from '../src/run-build.ts';
import { ctn, dummy, makeBuild, RecordingReporter, secret } from './helpers.ts';
import { at, intercepted, onHeld, recorded, setupInAssemble, withoutHeldStart } from './slow-runtime.ts';

/**
 * Runs `broken` (exit 2), `skipped` (skipped: the build failed) and `on-failure` (runs only after a
 * failure) on `runtime`; checks the build and `broken` failed.
 */
async function skippedAfterFailure(runtime: Runtime): Promise<{ build: Build; reporter: RecordingReporter }> {
  const reporter = new RecordingReporter();
  const onFailure = ctn('on-failure', { commands: ['echo cleaning up'] });
  onFailure.ruleset.if.status = ['failure'];
  const build = makeBuild({ steps: [ctn('broken', { commands: ['echo breaking', 'exit 2'] }), ctn('skipped', { commands: ['echo never'] }), onFailure] });
  const result = await runBuild(background(), { build, runtime, reporter });
  expect(result.status).toBe('failure');
  expect(reporter.last('broken')).toMatchObject({ status: 'failure', exitCode: 2 });
  return { build, reporter };
}

describe('setting steps up while the build runs', () => {
  it("sets the steps' containers up after assembleBuild, one at a time, each before its step runs; inspects each image once; keeps the logs in order", async () => {
    const { runtime: base, engine } = await dummy();
    const calls: string[] = [];
    const runtime = recorded(withoutHeldStart(base), calls);
    const reporter = new RecordingReporter();
    const build = makeBuild({
      steps: [ctn('one', { commands: ['echo one-a', 'echo one-b'] }), ctn('two', { commands: ['echo two-a'] }), ctn('three', { commands: ['echo three-a'] })],
    });
    const result = await runBuild(background(), { build, runtime, reporter });
    expect(result.status).toBe('success');
    // Set up once the build is assembled, one at a time, each before its step runs.
    const assembled = at(calls, `assembleBuild ${build.id}`);
    for (const step of ['one', 'two', 'three']) {
      expect(at(calls, `setupContainer ${step}`)).toBeGreaterThan(assembled);
      expect(at(calls, `setupContainer ${step}`)).toBeLessThan(at(calls, `runContainer ${step}`));
    }
    expect(calls.filter((c) => c.startsWith('setupContainer'))).toEqual(['setupContainer one', 'setupContainer two', 'setupContainer three']);
    // One image, inspected once.
    expect(calls.filter((c) => c.startsWith('inspectImage'))).toHaveLength(1);
    expect(reporter.log('init').match(/> Preparing step image /g)).toHaveLength(3);
    expect(reporter.log('one')).toBe('$ echo one-a\none-a\n$ echo one-b\none-b\n');
    expect(reporter.log('two')).toBe('$ echo two-a\ntwo-a\n');
    expect(reporter.log('three')).toBe('$ echo three-a\nthree-a\n');
    // Reported in order: each step ends before the next one runs.
    const order = reporter.steps.filter((s) => s.kind === 'step').map((s) => `${s.name} ${s.status}`);
    expect(order).toEqual(['one running', 'one success', 'two running', 'two success', 'three running', 'three success']);
    expect(engine.containers.size + engine.networks.size + engine.volumes.size).toBe(0);
  });

  it('removes at once the container set up for a step that is then skipped (its ruleset says no after a failure); nothing is left', async () => {
    const { runtime: base, engine } = await dummy();
    const calls: string[] = [];
    const runtime = recorded(withoutHeldStart(base), calls);
    const { build, reporter } = await skippedAfterFailure(runtime);
    expect(reporter.last('skipped')?.status).toBe('skipped');
    expect(reporter.log('skipped')).toBe('');
    expect(reporter.last('on-failure')?.status).toBe('success');
    expect(reporter.log('on-failure')).toContain('cleaning up');
    // Set up ahead, removed as soon as it was skipped (before the next step ran), never run.
    expect(at(calls, 'setupContainer skipped')).toBeGreaterThan(at(calls, `assembleBuild ${build.id}`));
    expect(at(calls, 'removeContainer skipped')).toBeGreaterThan(at(calls, 'runContainer broken'));
    expect(at(calls, 'removeContainer skipped')).toBeLessThan(at(calls, 'runContainer on-failure'));
    expect(calls).not.toContain('runContainer skipped');
    expect(engine.containers.size + engine.networks.size + engine.volumes.size).toBe(0);
  });

  it('sets a step taking a lazy secret (pull: step_start) up only once the secret is loaded, with the secret in its environment', async () => {
    const { runtime: base } = await dummy();
    const calls: string[] = [];
    const runtime = recorded(withoutHeldStart(base), calls);
    const reporter = new RecordingReporter();
    const build = makeBuild({
      secrets: [secret('lazy', 'lazy-value-99')],
      steps: [
        ctn('first', { commands: ['echo first'] }),
        ctn('uses-lazy', { commands: ['echo "lazy=[$LAZY]"'], secrets: [{ source: 'lazy', target: 'LAZY' }] }),
      ],
    });
    build.secrets[0]!.pull = 'step_start';
    const result = await runBuild(background(), {
      build,
      runtime,
      reporter,
      loadSecret: (_ctx, s) => {
        calls.push(`loadSecret ${s.name}`);
        return Promise.resolve(s.value);
      },
    });
    expect(result.status).toBe('success');
    // Not set up ahead: only once the build reached it and loaded its secret.
    expect(at(calls, 'setupContainer uses-lazy')).toBeGreaterThan(at(calls, 'loadSecret lazy'));
    expect(at(calls, 'loadSecret lazy')).toBeGreaterThan(at(calls, 'runContainer first'));
    expect(reporter.log('uses-lazy')).toContain('lazy=[***]');
  });

  it('sets every container up before assembleBuild on a runtime without setupWhileRunning (Kubernetes)', async () => {
    const { runtime: base, engine } = await dummy();
    const calls: string[] = [];
    const runtime = recorded(setupInAssemble(base), calls);
    const reporter = new RecordingReporter();
    const build = makeBuild({ steps: [ctn('one', { commands: ['echo one'] }), ctn('two', { commands: ['echo two'] })] });
    const result = await runBuild(background(), { build, runtime, reporter });
    expect(result.status).toBe('success');
    const assembled = at(calls, `assembleBuild ${build.id}`);
    expect(at(calls, 'setupContainer one')).toBeLessThan(assembled);
    expect(at(calls, 'setupContainer two')).toBeLessThan(assembled);
    // Inspected after each setup, as before.
    expect(calls.filter((c) => c.startsWith('inspectImage'))).toEqual(['inspectImage one', 'inspectImage two']);
    expect(engine.containers.size).toBe(0);
  });
});

describe('starting steps held ahead (the runtime’s heldStart, contract 1.4)', () => {
  it('holds each step’s container ahead, two at most, and releases it when the step runs: logs whole and in order, nothing left', async () => {
    const { runtime: base, engine } = await dummy();
    const calls: string[] = [];
    const runtime = recorded(base, calls);
    const reporter = new RecordingReporter();
    const names = ['one', 'two', 'three', 'four'];
    const build = makeBuild({ steps: names.map((name) => ctn(name, { commands: [`echo ${name}-a`, `echo ${name}-b`] })) });
    const result = await runBuild(background(), { build, runtime, reporter });
    expect(result.status).toBe('success');
    const assembled = at(calls, `assembleBuild ${build.id}`);
    for (const name of names) {
      expect(at(calls, `holdContainer ${name}`)).toBeGreaterThan(assembled);
      expect(at(calls, `holdContainer ${name}`)).toBeLessThan(at(calls, `releaseContainer ${name}`));
      expect(reporter.log(name)).toBe(`$ echo ${name}-a\n${name}-a\n$ echo ${name}-b\n${name}-b\n`);
    }
    // Released, never started the usual way nor set up twice.
    expect(calls.filter((c) => /^(runContainer|setupContainer) /.test(c))).toEqual([]);
    // Two held at most: the third is held only once the first was released, the fourth once the second was.
    expect(at(calls, 'holdContainer three')).toBeGreaterThan(at(calls, 'releaseContainer one'));
    expect(at(calls, 'holdContainer four')).toBeGreaterThan(at(calls, 'releaseContainer two'));
    const order = reporter.steps.filter((s) => s.kind === 'step').map((s) => `${s.name} ${s.status}`);
    expect(order).toEqual(names.flatMap((name) => [`${name} running`, `${name} success`]));
    expect(engine.containers.size + engine.networks.size + engine.volumes.size).toBe(0);
  });

  it('removes the held container of a step its ruleset skips, never released: no log, no running status', async () => {
    const { runtime: base, engine } = await dummy();
    const calls: string[] = [];
    const runtime = recorded(base, calls);
    const { reporter } = await skippedAfterFailure(runtime);
    expect(reporter.statuses('skipped')).toEqual(['skipped']);
    expect(reporter.log('skipped')).toBe('');
    expect(reporter.log('on-failure')).toContain('cleaning up');
    expect(at(calls, 'holdContainer skipped')).toBeLessThan(at(calls, 'releaseContainer broken'));
    expect(at(calls, 'removeContainer skipped')).toBeGreaterThan(at(calls, 'releaseContainer broken'));
    expect(at(calls, 'removeContainer skipped')).toBeLessThan(at(calls, 'releaseContainer on-failure'));
    expect(calls.filter((c) => c.endsWith(' skipped') && !/^(holdContainer|removeContainer) /.test(c))).toEqual([]);
    expect(engine.containers.size + engine.networks.size + engine.volumes.size).toBe(0);
  });

  it('removes a held container when the build is cancelled before its step: never released, no log, canceled', async () => {
    const { runtime: base, engine } = await dummy();
    const calls: string[] = [];
    const [ctx, cancel] = withCancel(background());
    const held = Promise.withResolvers<void>();
    const runtime = recorded(
      onHeld(base, 'second', () => held.resolve()),
      calls,
    );
    const reporter = new RecordingReporter();
    // Cancel while the first step runs and the second is held.
    const stepStatus = reporter.stepStatus.bind(reporter);
    reporter.stepStatus = async (statusCtx, step) => {
      await stepStatus(statusCtx, step);
      if (step.name === 'first' && step.status === 'running') void held.promise.then(() => cancel());
    };
    const build = makeBuild({ steps: [ctn('first', { commands: ['sleep 30'] }), ctn('second', { commands: ['echo never'] })] });
    const result = await runBuild(ctx, { build, runtime, reporter });
    expect(result.status).toBe('canceled');
    expect(reporter.last('first')).toMatchObject({ status: 'canceled', exitCode: 137 });
    expect(reporter.statuses('second')).toEqual(['canceled']);
    expect(reporter.log('second')).toBe('');
    expect(calls).toContain('holdContainer second');
    expect(calls).toContain('removeContainer second');
    expect(calls).not.toContain('releaseContainer second');
    expect(engine.containers.size + engine.networks.size + engine.volumes.size).toBe(0);
  });

  it('removes the containers of holds that failed or were cut off after the runtime created them, before the volume and the network', async () => {
    // The bench's failure (dockerd 20.10): the first step's hold failed (its create answered 500),
    // which ended exec and cancelled the second step's hold after the engine had created its
    // container. Neither step's setup resolved, yet both containers existed: destroy removed
    // neither, and the volume's and the network's removals failed with the containers attached.
    const { runtime: base, engine } = await dummy();
    const calls: string[] = [];
    const atVolumeRemoval: string[] = [];
    const failedHold = intercepted(base, 'holdContainer', (original) => async (ctx, container, ...args) => {
      // The runtime created the container and holds it.
      expect(await original(ctx, container, ...args)).toBe(true);
      if (container.name === 'first') {
        throw new RuntimeError('Internal', 'the Docker engine answered 500: failed to mkdir …/_data/src: file exists', {
          runtime: 'dummy',
          operation: 'holdContainer',
        });
      }
      // Created and held by the engine, but its caller gave up first: exec ended.
      await ctx.done();
      throw errOf(ctx);
    });
    const runtime = recorded(
      intercepted(failedHold, 'removeVolume', (original) => (ctx, build, ...args) => {
        atVolumeRemoval.push(...engine.owned('test-worker', build.id).containers.map((c) => c.name));
        return original(ctx, build, ...args);
      }),
      calls,
    );
    const reporter = new RecordingReporter();
    const build = makeBuild({ steps: [ctn('first', { commands: ['echo one'] }), ctn('second', { commands: ['echo two'] })] });
    const result = await runBuild(background(), { build, runtime, reporter });
    expect(result.status).toBe('error');
    expect(reporter.last('first')).toMatchObject({ status: 'error' });
    expect(calls).toContain('holdContainer second');
    expect(calls).not.toContain('releaseContainer second');
    expect(at(calls, 'removeContainer first')).toBeLessThan(at(calls, `removeVolume ${build.id}`));
    expect(at(calls, 'removeContainer second')).toBeLessThan(at(calls, `removeVolume ${build.id}`));
    expect(atVolumeRemoval).toEqual([]);
    expect(engine.containers.size + engine.networks.size + engine.volumes.size).toBe(0);
  });
});
