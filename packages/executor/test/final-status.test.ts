// When the build's final status is reported (ExecutorOptions.finalBuildStatusAt): at the end of
// destroyBuild by default (`berth exec` prints its summary then), or when execBuild returns, as
// go-vela/worker does: executor/linux/build.go ExecBuild defers build.Upload
// (internal/build/upload.go) and cmd/vela-worker/exec.go runs DestroyBuild after ExecBuild
// (deferred), whose DestroyStep/DestroyService still upload their containers' statuses.
import { background, type Context } from '@berth/context';
import { describe, expect, it } from 'vitest';
import type { Executor } from '../src/executor.ts';
import type { BuildReport, StepReport } from '../src/reporter.ts';
import { runBuild } from '../src/run-build.ts';
import { isFinal } from '../src/status.ts';
import { ctn, dummy, makeBuild, RecordingReporter } from './helpers.ts';
import { recorded } from './slow-runtime.ts';

const sh = (script: string) => ({ entrypoint: ['sh', '-c'], commands: [script] });

/** A recording reporter that also writes `build <status>` and `step <name> <status>` into the runtime's call list. */
class OrderReporter extends RecordingReporter {
  readonly calls: string[];
  readonly onFinal: (() => void) | undefined;
  constructor(calls: string[], onFinal?: () => void) {
    super();
    this.calls = calls;
    this.onFinal = onFinal;
  }
  override buildStatus(ctx: Context, build: BuildReport): Promise<void> {
    this.calls.push(`build ${build.status}`);
    if (isFinal(build.status)) this.onFinal?.();
    return super.buildStatus(ctx, build);
  }
  override stepStatus(ctx: Context, step: StepReport): Promise<void> {
    this.calls.push(`step ${step.name} ${step.status}`);
    return super.stepStatus(ctx, step);
  }
}

/** The index of the build's only final status in `calls`; fails when there is not exactly one. */
function finalIndex(calls: string[]): number {
  const finals = calls.flatMap((c, i) => (/^build (?!running)/.test(c) ? [i] : []));
  expect(finals).toHaveLength(1);
  return finals[0]!;
}

const removals = (calls: string[]): string[] => calls.filter((c) => c.startsWith('remove'));

describe("finalBuildStatusAt: 'exec-end' (the Vela worker's order)", () => {
  it('reports the final build status before any container, the volume or the network is removed; services end after it; a cancel then has no effect', async () => {
    const calls: string[] = [];
    const { runtime, engine } = await dummy();
    let executor: Executor | undefined;
    // A cancel arriving between the build's report and its destroy (the server cancels a build it
    // sees running): too late, the build is over.
    const reporter = new OrderReporter(calls, () => executor?.cancelBuild(new Error('too late')));
    const build = makeBuild({ services: [ctn('svc', sh('echo up; sleep 60'))], steps: [ctn('one', { commands: ['echo one'] })] });
    const result = await runBuild(background(), {
      build,
      runtime: recorded(runtime, calls),
      reporter,
      finalBuildStatusAt: 'exec-end',
      onStart: (e) => (executor = e),
    });
    const final = finalIndex(calls);
    expect(calls[final]).toBe('build success');
    expect(calls.indexOf('step one success')).toBeLessThan(final);
    expect(removals(calls.slice(0, final))).toEqual([]);
    expect(removals(calls.slice(final))).toEqual(expect.arrayContaining(['removeContainer svc', 'removeContainer one']));
    expect(removals(calls.slice(final)).some((c) => c.startsWith('removeNetwork'))).toBe(true);
    expect(removals(calls.slice(final)).some((c) => c.startsWith('removeVolume'))).toBe(true);
    // Vela's DestroyService uploads the service's status after the build's.
    expect(calls.indexOf('step svc success')).toBeGreaterThan(final);
    expect(result).toMatchObject({ status: 'success', build: { status: 'success' } });
    expect(executor?.status).toBe('success');
    expect(reporter.last('init')).toMatchObject({ status: 'success' });
    expect(result.steps.map((s) => [s.name, s.status])).toEqual([
      ['init', 'success'],
      ['svc', 'success'],
      ['one', 'success'],
    ]);
    expect(engine.containers.size).toBe(0);
    expect(engine.networks.size).toBe(0);
    expect(engine.volumes.size).toBe(0);
  });

  it.each([
    ['timed out', 'error'],
    ['canceled', 'canceled'],
  ] as const)('a build %s is reported %s when exec returns, before its containers are removed', async (how, status) => {
    const calls: string[] = [];
    const { runtime, engine } = await dummy();
    const reporter = new OrderReporter(calls);
    const build = makeBuild({ steps: [ctn('long', sh('echo started; sleep 60')), ctn('after', { commands: ['true'] })] });
    const result = await runBuild(background(), {
      build,
      runtime: recorded(runtime, calls),
      reporter,
      finalBuildStatusAt: 'exec-end',
      timeoutMs: how === 'timed out' ? 1_500 : 60_000,
      onStart: (executor) => {
        if (how === 'canceled') setTimeout(() => executor.cancelBuild(new Error('by the user')), 1_500);
      },
    });
    const final = finalIndex(calls);
    expect(calls[final]).toBe(`build ${status}`);
    expect(removals(calls.slice(0, final))).toEqual([]);
    expect(removals(calls.slice(final))).toContain('removeContainer long');
    expect(result.status).toBe(status);
    expect(reporter.last('long')?.status).toBe(how === 'canceled' ? 'canceled' : 'failure');
    expect(reporter.last('after')?.status).toBe(how === 'canceled' ? 'canceled' : 'killed');
    expect(engine.containers.size).toBe(0);
  });

  it('a build whose exec never ran (assemble failed) is reported at the end of destroy, once', async () => {
    const calls: string[] = [];
    const { runtime } = await dummy();
    const reporter = new OrderReporter(calls);
    const build = makeBuild({ steps: [ctn('missing', { image: 'berth/none:1', pull: 'never', commands: ['true'] })] });
    const result = await runBuild(background(), { build, runtime: recorded(runtime, calls), reporter, finalBuildStatusAt: 'exec-end' });
    const final = finalIndex(calls);
    expect(calls[final]).toBe('build error');
    expect(removals(calls.slice(final))).toEqual([]);
    expect(removals(calls).some((c) => c.startsWith('removeNetwork'))).toBe(true);
    expect(result.status).toBe('error');
    expect(reporter.last('init')?.status).toBe('failure');
  });
});

describe("finalBuildStatusAt: 'destroy-end' (the default, for berth exec's summary)", () => {
  it('reports the final build status after every removal and every container status', async () => {
    const calls: string[] = [];
    const { runtime } = await dummy();
    const reporter = new OrderReporter(calls);
    const build = makeBuild({ services: [ctn('svc', sh('echo up; sleep 60'))], steps: [ctn('one', { commands: ['echo one'] })] });
    const result = await runBuild(background(), { build, runtime: recorded(runtime, calls), reporter });
    const final = finalIndex(calls);
    expect(final).toBe(calls.length - 1);
    expect(calls[final]).toBe('build success');
    expect(calls.indexOf('step svc success')).toBeLessThan(final);
    expect(removals(calls).length).toBeGreaterThanOrEqual(4);
    expect(result.status).toBe('success');
  });
});
