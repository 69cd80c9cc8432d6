import { background, withTimeout } from '@berth/context';
import type { Build, Container } from '@berth/pipeline';
import type { Runtime } from '@berth/runtime';
import { describe, expect, it } from 'vitest';
import { engineName } from '../src/container-spec.ts';
import { readAll, shellStep, useEngine } from './fixture.ts';
import { EngineProxy } from './proxy.ts';

// readOutput after a step exited reads the outputs volume through a container of the build that
// still runs (src/outputs.ts runningContainerOf): the exited one's archive waits for the engine's
// clean-up of its exit (moby daemon/archive.go containerArchivePath takes the container's lock,
// held by daemon/monitor.go handleContainerExit through daemon.Cleanup).
const ctx = background();
const fx = useEngine('outthrough', { after: 'each' });

const archiveOf = (container: Container): RegExp => new RegExp(`^GET /containers/${engineName(container.id)}/archive\\?`);

async function setUp(): Promise<{ proxy: EngineProxy; runtime: Runtime; build: Build; wrote: Container; held: Container }> {
  const proxy = new EngineProxy();
  await proxy.open();
  fx.onCleanup(() => proxy.dispose());
  const runtime = await fx.newRuntime({}, { socketPath: proxy.path });
  const build = await fx.newBuild(runtime);
  await runtime.setupOutputs!(ctx, build);
  const wrote = shellStep(build, 'wrote', 'echo GREETING=hello > /vela/outputs/.env');
  const held = shellStep(build, 'held', 'echo next');
  await runtime.setupContainer(ctx, wrote, build);
  await runtime.runContainer(ctx, wrote, build);
  expect(await readAll(await runtime.tailContainer(ctx, wrote))).toBe('');
  const [short, release] = withTimeout(ctx, 20_000);
  expect((await runtime.waitContainer(short, wrote)).exitCode).toBe(0);
  release();
  expect(await runtime.holdContainer!(ctx, held, build)).toBe(true);
  return { proxy, runtime, build, wrote, held };
}

describe('the outputs of a step that exited', () => {
  it('are read through a container of the build that still runs (the next step, held)', async () => {
    const { proxy, runtime, build, wrote, held } = await setUp();
    const data = await runtime.readOutput!(ctx, build, wrote, '.env');
    expect(Buffer.from(data!).toString()).toBe('GREETING=hello\n');
    expect(proxy.requests.filter((line) => archiveOf(held).test(line))).toHaveLength(1);
    expect(proxy.requests.filter((line) => archiveOf(wrote).test(line))).toHaveLength(0);
    await runtime.releaseContainer!(ctx, held);
    expect(await readAll(await runtime.tailContainer(ctx, held))).toBe('next\n');
    await runtime.removeBuild(ctx, build);
  });

  it('are read through the step itself when that container went away meanwhile', async () => {
    const { proxy, runtime, build, wrote, held } = await setUp();
    proxy.answerOnce(archiveOf(held), 404, { message: `No such container: ${engineName(held.id)}` });
    const data = await runtime.readOutput!(ctx, build, wrote, '.env');
    expect(Buffer.from(data!).toString()).toBe('GREETING=hello\n');
    expect(proxy.requests.filter((line) => archiveOf(wrote).test(line))).toHaveLength(1);
    await runtime.removeBuild(ctx, build);
  });
});
