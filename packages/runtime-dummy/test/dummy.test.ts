import { background, withCancel } from '@berth/context';
import { expectNoAsyncLeaks } from '@berth/context/testing';
import { applyScript, type Container } from '@berth/pipeline';
import { isRuntimeError, type Runtime, type RuntimeConfig, type RuntimeEvent } from '@berth/runtime';
import { conformanceBuild, conformanceStep, runToCompletion, setupBuildResources, teardownBuild } from '@berth/runtime-conformance';
import { describe, expect, it } from 'vitest';
import { dummyRuntime, DummyEngine, type DummyRuntimeOptions } from '../src/index.ts';

const IMAGE = 'berth/busybox:1.35';

async function create(options: DummyRuntimeOptions = {}, config: Partial<RuntimeConfig> = {}): Promise<Runtime> {
  return dummyRuntime({ engine: new DummyEngine(), ...options }).create(background(), { workerId: 'test-worker', ...config });
}

/** Runs one step through the whole lifecycle; returns its exit and logs, or the error it failed with. */
async function runStep(runtime: Runtime, fields: Partial<Container>) {
  const build = conformanceBuild();
  const step = conformanceStep(build, 'test', 1, { image: IMAGE, ...fields });
  build.steps = [step];
  try {
    await setupBuildResources(background(), runtime, build);
    return await runToCompletion(runtime, build, step, { timeoutMs: 10_000 });
  } finally {
    await teardownBuild(background(), runtime, build);
  }
}

describe('the dummy runtime', () => {
  it('runs a script compiled by @berth/pipeline (netrc setup, trace lines) as Vela would', async () => {
    const runtime = await create();
    const step = applyScript(conformanceStep({ id: 'b' }, 'test', 1, { image: IMAGE, commands: ['echo hello', 'echo "$HOME"'] }));
    const result = await runStep(runtime, step);
    expect(result.logs).toBe('$ echo hello\nhello\n$ echo "$HOME"\n/root\n');
    expect(result.exit.exitCode).toBe(0);
  });

  it('behaves as DUMMY_OUTPUT, DUMMY_SLEEP and DUMMY_EXIT_CODE say', async () => {
    const runtime = await create();
    const started = performance.now();
    const result = await runStep(runtime, { environment: { DUMMY_OUTPUT: 'pretend output\n', DUMMY_SLEEP: '200ms', DUMMY_EXIT_CODE: '3' } });
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    expect(result.logs).toBe('pretend output\n');
    expect(result.exit).toEqual({ exitCode: 3, reason: 'Error' });
  });

  it('fails runContainer and waitContainer with ContainerFailed on DUMMY_START_FAIL', async () => {
    const runtime = await create();
    const error = await runStep(runtime, { environment: { DUMMY_START_FAIL: 'no cgroup for you' } }).catch((e: unknown) => e);
    expect(isRuntimeError(error, 'ContainerFailed')).toBe(true);
    expect((error as Error).message).toMatch(/^\[dummy\] runContainer step_\w+: the container could not start: no cgroup for you$/);
  });

  it('fails the pull with ImagePullFailed on DUMMY_PULL_FAIL: at setup for not_present, at run and wait for on_start', async () => {
    const runtime = await create();
    const atSetup = await runStep(runtime, { image: 'alpine:3', environment: { DUMMY_PULL_FAIL: 'toomanyrequests' } }).catch((e: unknown) => e);
    expect(isRuntimeError(atSetup, 'ImagePullFailed')).toBe(true);
    expect((atSetup as { operation: string }).operation).toBe('setupContainer');

    const build = conformanceBuild();
    const step = conformanceStep(build, 'test', 1, { image: 'alpine:3', pull: 'on_start', environment: { DUMMY_PULL_FAIL: 'timeout' } });
    build.steps = [step];
    await setupBuildResources(background(), runtime, build);
    await expect(runtime.runContainer(background(), step, build)).rejects.toMatchObject({ code: 'ImagePullFailed' });
    await expect(runtime.waitContainer(background(), step)).rejects.toMatchObject({ code: 'ImagePullFailed' });
    await teardownBuild(background(), runtime, build);
  });

  it('pulls a missing image from its registry (with pull events), or reports ImageNotFound when the registry lacks it', async () => {
    const events: RuntimeEvent[] = [];
    const runtime = await create({ registry: (ref) => ref.includes('/library/alpine') }, { onEvent: (e) => events.push(e) });
    expect((await runStep(runtime, { image: 'alpine:3', commands: ['echo', 'pulled'] })).logs).toBe('pulled\n');
    expect(events.map((e) => (e.type === 'pull' ? e.status : e.reason))).toEqual(['Pulling alpine:3', 'Pull complete']);
    const missing = await runStep(runtime, { image: 'nobody/nothing:1' }).catch((e: unknown) => e);
    expect(isRuntimeError(missing, 'ImageNotFound')).toBe(true);
  });

  it('fails runContainer with ContainerFailed for a program it does not have, and for an unknown user', async () => {
    const runtime = await create();
    await expect(runStep(runtime, { commands: ['/usr/bin/python3', '-V'] })).rejects.toMatchObject({ code: 'ContainerFailed' });
    await expect(runStep(runtime, { commands: ['id'], user: 'jenkins' })).rejects.toMatchObject({ code: 'ContainerFailed' });
  });

  it('rejects every call with Canceled when its ctx is already cancelled, and with Unavailable once closed', async () => {
    const runtime = await create();
    const build = conformanceBuild();
    const step = conformanceStep(build, 'test', 1, { image: IMAGE });
    const [ctx, cancel] = withCancel(background());
    cancel();
    const calls: [string, () => Promise<unknown>][] = [
      ['setupBuild', () => runtime.setupBuild(ctx, build)],
      ['setupContainer', () => runtime.setupContainer(ctx, step, build)],
      ['waitContainer', () => runtime.waitContainer(ctx, step)],
      ['tailContainer', () => runtime.tailContainer(ctx, step)],
      ['createImage', () => runtime.createImage(ctx, step)],
      ['createVolume', () => runtime.createVolume(ctx, build)],
      ['removeBuild', () => runtime.removeBuild(ctx, build)],
      ['reap', () => runtime.reap(ctx, 'test-worker')],
    ];
    for (const [name, call] of calls) await expect(call(), name).rejects.toMatchObject({ code: 'Canceled', operation: name });
    await runtime.close();
    await runtime.close();
    await expect(runtime.setupBuild(background(), build)).rejects.toMatchObject({ code: 'Unavailable' });
  });

  it('refuses workspaceHostPath and a missing workerId at create', async () => {
    await expect(create({}, { workspaceHostPath: '/src' })).rejects.toMatchObject({ code: 'InvalidConfig' });
    await expect(create({}, { workerId: '' })).rejects.toMatchObject({ code: 'InvalidConfig' });
  });

  it('leaves no timers, listeners or other async resources behind after a build', async () => {
    const runtime = await create();
    await expectNoAsyncLeaks(async () => {
      const result = await runStep(runtime, { entrypoint: ['sh', '-c'], commands: ['echo start; sleep 0.05; echo end'] });
      expect(result.logs).toBe('start\nend\n');
    });
  });

  // Woodpecker's dummy backend reads SLEEP with Go's time.ParseDuration; so does this one.
  it('reads DUMMY_SLEEP as a Go duration and fails the container, saying why, on anything else', async () => {
    const runtime = await create();
    const started = performance.now();
    const slept = await runStep(runtime, { environment: { DUMMY_SLEEP: '100ms50ms' } });
    expect(slept.exit.exitCode).toBe(0);
    expect(performance.now() - started).toBeGreaterThanOrEqual(150); // a lower bound: sleeping guarantees it
    for (const bad of ['250', 'soon', '-1s']) {
      const result = await runStep(runtime, { environment: { DUMMY_SLEEP: bad } });
      expect(result.exit.exitCode).toBe(2);
      expect(result.logs).toContain(`DUMMY_SLEEP ${JSON.stringify(bad)} is not a Go duration`);
    }
  });
});
