import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { background, sleep, withTimeout } from '@berth/context';
import { type Build, type Container, emptyBuild, emptyContainer } from '@berth/pipeline';
import { type Runtime, RuntimeError } from '@berth/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { dockerRuntime } from '../src/index.ts';
import { BUSYBOX, PAUSE, suffix } from './engine.ts';
import { EngineProxy } from './proxy.ts';

const ctx = background();
const run = suffix();
const workerId = `rd-loss-${run}`;
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function container(build: Build, name: string, fields: Partial<Container> = {}): Container {
  return emptyContainer({ id: `step_${build.id}_${name}`, name, image: BUSYBOX, pull: 'not_present', ...fields });
}

async function startBuild(runtime: Runtime, build: Build, step: Container): Promise<void> {
  await runtime.createNetwork(ctx, build);
  await runtime.createVolume(ctx, build);
  await runtime.setupContainer(ctx, step, build);
  await runtime.runContainer(ctx, step, build);
}

/** A second build on the same runtime once the engine is back: it must simply work. */
async function nextBuildWorks(runtime: Runtime): Promise<void> {
  const build = emptyBuild({ id: `rdloss_${run}_${suffix()}` });
  const step = container(build, 'after', { entrypoint: ['/bin/sh', '-c'], commands: ['echo still working'] });
  await startBuild(runtime, build, step);
  const logs: Buffer[] = [];
  for await (const chunk of await runtime.tailContainer(ctx, step)) logs.push(chunk as Buffer);
  expect(await runtime.waitContainer(ctx, step)).toEqual({ exitCode: 0, reason: 'Completed' });
  expect(Buffer.concat(logs).toString()).toBe('still working\n');
  await runtime.removeBuild(ctx, build);
}

async function rejectionWithin(promise: Promise<unknown>, ms: number): Promise<RuntimeError> {
  const started = Date.now();
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(Date.now() - started).toBeLessThan(ms);
  expect(error, 'expected a RuntimeError').toBeInstanceOf(RuntimeError);
  return error as RuntimeError;
}

describe('the engine lost mid-build (a proxy that is cut, then reopened)', () => {
  it('fails a pending wait, a log stream and later calls with Unavailable, and the next build works', async () => {
    const proxy = new EngineProxy();
    await proxy.open();
    cleanups.push(() => proxy.dispose());
    const runtime = await dockerRuntime({ socketPath: proxy.path, stopGraceMs: 1_000 }).create(ctx, { workerId });
    cleanups.push(() => runtime.close());
    // Cleaned up straight through the engine's socket, whatever state the proxy is in.
    const direct = await dockerRuntime().create(ctx, { workerId });
    cleanups.push(async () => {
      await direct.reap(ctx, workerId);
      await direct.close();
    });
    const build = emptyBuild({ id: `rdloss_${run}_${suffix()}` });
    const step = container(build, 'long', { image: PAUSE });
    await startBuild(runtime, build, step);

    const waiting = runtime.waitContainer(ctx, step);
    const logs = await runtime.tailContainer(ctx, step);
    const logsFailed = new Promise<unknown>((resolve) => logs.once('error', resolve));
    logs.resume();
    await sleep(ctx, 300);
    await proxy.cut();

    const waitError = await rejectionWithin(waiting, 5_000);
    expect(waitError.code).toBe('Unavailable');
    expect(waitError.operation).toBe('waitContainer');
    expect(waitError.detail).toMatch(/lost the Docker engine while waiting.*Was dockerd stopped or restarted\?/);
    expect(await logsFailed).toMatchObject({ code: 'Unavailable', operation: 'tailContainer' });

    const inspectError = await rejectionWithin(runtime.inspectContainer(ctx, step), 5_000);
    expect(inspectError.code).toBe('Unavailable');
    expect(inspectError.detail).toContain(`cannot reach the Docker engine at unix://${proxy.path}`);
    expect(inspectError.detail).toMatch(/Is dockerd running\?/);

    await proxy.open();
    expect((await runtime.inspectContainer(ctx, step)).state).toBe('running');
    // The lost subscription is not reused: a new wait asks the engine again (and the container still runs).
    const [short, release] = withTimeout(ctx, 1_500);
    expect((await rejectionWithin(runtime.waitContainer(short, step), 5_000)).code).toBe('DeadlineExceeded');
    release();
    await nextBuildWorks(runtime);
  });
});

// Restarting the real dockerd breaks everyone else's containers: run only on request.
describe.runIf(process.env.BERTH_TEST_ENGINE_RESTART === '1')('the real engine restarted mid-build (BERTH_TEST_ENGINE_RESTART=1)', () => {
  it('fails a pending wait with Unavailable, and the next build works once dockerd is back', async () => {
    const runtime = await dockerRuntime({ stopGraceMs: 1_000 }).create(ctx, { workerId });
    cleanups.push(() => runtime.close());
    const build = emptyBuild({ id: `rdrestart_${run}` });
    cleanups.push(async () => {
      await runtime.reap(ctx, workerId);
    });
    const step = container(build, 'long', { image: PAUSE });
    await startBuild(runtime, build, step);
    const waiting = runtime.waitContainer(ctx, step);
    await sleep(ctx, 300);

    execFileSync('sh', ['-c', 'kill -TERM $(pidof dockerd)']);
    try {
      const error = await rejectionWithin(waiting, 20_000);
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
