import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { background, sleep, withTimeout } from '@berth/context';
import type { Build, Container } from '@berth/pipeline';
import type { Runtime } from '@berth/runtime';
import { describe, expect, it } from 'vitest';
import { PAUSE, readAll, rejection, shellStep, step, useEngine } from './fixture.ts';
import { EngineProxy } from './proxy.ts';

const ctx = background();
const fx = useEngine('loss', { after: 'each' });

async function start(runtime: Runtime, build: Build, container: Container): Promise<void> {
  await runtime.setupContainer(ctx, container, build);
  await runtime.runContainer(ctx, container, build);
}

/** A second build on the same runtime once the engine is back: it must simply work. */
async function nextBuildWorks(runtime: Runtime): Promise<void> {
  const build = await fx.newBuild(runtime);
  const after = shellStep(build, 'after', 'echo still working');
  await start(runtime, build, after);
  const logs = await readAll(await runtime.tailContainer(ctx, after));
  expect(await runtime.waitContainer(ctx, after)).toEqual({ exitCode: 0, reason: 'Completed' });
  expect(logs).toBe('still working\n');
  await runtime.removeBuild(ctx, build);
}

describe('the engine lost mid-build (a proxy that is cut, then reopened)', () => {
  it('fails a pending wait, a log stream and later calls with Unavailable, and the next build works', async () => {
    const proxy = new EngineProxy();
    await proxy.open();
    fx.onCleanup(() => proxy.dispose());
    const runtime = await fx.newRuntime({}, { socketPath: proxy.path });
    const build = await fx.newBuild(runtime);
    const long = step(build, 'long', { image: PAUSE });
    await start(runtime, build, long);

    const waiting = runtime.waitContainer(ctx, long);
    const logs = await runtime.tailContainer(ctx, long);
    const logsFailed = new Promise<unknown>((resolve) => logs.once('error', resolve));
    logs.resume();
    await sleep(ctx, 300);
    await proxy.cut();

    const waitError = await rejection(waiting, 5_000);
    expect(waitError.code).toBe('Unavailable');
    expect(waitError.operation).toBe('waitContainer');
    expect(waitError.detail).toMatch(/lost the Docker engine while waiting.*Was dockerd stopped or restarted\?/);
    expect(await logsFailed).toMatchObject({ code: 'Unavailable', operation: 'tailContainer' });

    const inspectError = await rejection(runtime.inspectContainer(ctx, long), 5_000);
    expect(inspectError.code).toBe('Unavailable');
    expect(inspectError.detail).toContain(`cannot reach the Docker engine at unix://${proxy.path}`);
    expect(inspectError.detail).toMatch(/Is dockerd running\?/);

    await proxy.open();
    expect((await runtime.inspectContainer(ctx, long)).state).toBe('running');
    // The lost subscription is not reused: a new wait asks the engine again (and the container still runs).
    const [short, release] = withTimeout(ctx, 1_500);
    expect((await rejection(runtime.waitContainer(short, long), 5_000)).code).toBe('DeadlineExceeded');
    release();
    await nextBuildWorks(runtime);
  });
});

// Restarting the real dockerd breaks everyone else's containers: run only on request.
describe.runIf(process.env.BERTH_TEST_ENGINE_RESTART === '1')('the real engine restarted mid-build (BERTH_TEST_ENGINE_RESTART=1)', () => {
  it('fails a pending wait with Unavailable, and the next build works once dockerd is back', async () => {
    const runtime = await fx.newRuntime();
    const build = await fx.newBuild(runtime);
    const long = step(build, 'long', { image: PAUSE });
    await start(runtime, build, long);
    const waiting = runtime.waitContainer(ctx, long);
    await sleep(ctx, 300);

    execFileSync('sh', ['-c', 'kill -TERM $(pidof dockerd)']);
    try {
      const error = await rejection(waiting, 20_000);
      expect(error.code).toBe('Unavailable');
      expect(error.detail).toMatch(/Was dockerd stopped or restarted\?/);
    } finally {
      // Whatever happened, bring dockerd back for everyone else.
      for (let i = 0; i < 60 && pidofDockerd(); i++) await sleep(ctx, 500);
      execFileSync('bash', [path.join(import.meta.dirname, '../../../tools/docker-engine.sh')], { stdio: 'inherit' });
    }
    await nextBuildWorks(runtime);
  }, 180_000);
});

function pidofDockerd(): boolean {
  try {
    execFileSync('pidof', ['dockerd']);
    return true;
  } catch {
    return false;
  }
}
