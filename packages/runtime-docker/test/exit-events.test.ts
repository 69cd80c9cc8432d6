import { background, sleep, withTimeout } from '@berth/context';
import type { Build, Container } from '@berth/pipeline';
import type { ContainerExit, Runtime } from '@berth/runtime';
import { describe, expect, it } from 'vitest';
import { engineName } from '../src/container-spec.ts';
import { engine, readAll, rejection, shellStep, useEngine } from './fixture.ts';
import { EngineProxy } from './proxy.ts';

// The exit from the engine's `die` event (src/exit-events.ts): moby v20.10 daemon/monitor.go
// handleContainerExit logs `die` with the exit code before daemon.Cleanup, and the wait endpoint
// answers after it. Here the proxy holds the wait's answer back, so only the event can tell the exit.
const ctx = background();
const fx = useEngine('exits', { after: 'each' });
const EVENTS = /^GET \/events\?/;
const WAIT = /^POST \/containers\/[^/]+\/wait\?/;

async function throughProxy(options: Parameters<typeof fx.newRuntime>[1] = {}): Promise<{ proxy: EngineProxy; runtime: Runtime; build: Build }> {
  const proxy = new EngineProxy();
  await proxy.open();
  fx.onCleanup(() => proxy.dispose());
  const runtime = await fx.newRuntime({}, { ...options, socketPath: proxy.path });
  return { proxy, runtime, build: await fx.newBuild(runtime) };
}

/** The container's exit within 20 s (a wait that never answers fails the case with DeadlineExceeded, not a hang). */
async function exitOf(runtime: Runtime, container: Container): Promise<ContainerExit> {
  const [short, release] = withTimeout(ctx, 20_000);
  try {
    return await runtime.waitContainer(short, container);
  } finally {
    release();
  }
}

async function run(runtime: Runtime, build: Build, container: Container): Promise<string> {
  await runtime.setupContainer(ctx, container, build);
  await runtime.runContainer(ctx, container, build);
  return readAll(await runtime.tailContainer(ctx, container));
}

async function eventually(check: () => boolean, ms = 5_000): Promise<boolean> {
  for (let waited = 0; waited < ms && !check(); waited += 50) await sleep(ctx, 50);
  return check();
}

describe("a container's exit told by the engine's die event", () => {
  it('is known while the wait has not answered: a success, a failure, and a held step released', async () => {
    const { proxy, runtime, build } = await throughProxy();
    proxy.withholdAnswers(WAIT);

    const ok = shellStep(build, 'ok', 'echo fine');
    expect(await run(runtime, build, ok)).toBe('fine\n');
    expect(await exitOf(runtime, ok)).toEqual({ exitCode: 0, reason: 'Completed' });

    const failed = shellStep(build, 'failed', 'exit 3');
    await run(runtime, build, failed);
    expect(await exitOf(runtime, failed)).toEqual({ exitCode: 3, reason: 'Error' });

    const held = shellStep(build, 'held', 'echo held');
    expect(await runtime.holdContainer!(ctx, held, build)).toBe(true);
    await runtime.releaseContainer!(ctx, held);
    expect(await readAll(await runtime.tailContainer(ctx, held))).toBe('held\n');
    expect(await exitOf(runtime, held)).toEqual({ exitCode: 0, reason: 'Completed' });

    // Every one of those waits is still unanswered: the exits came from the events.
    expect(proxy.openWhere(WAIT)).toBe(3);
    proxy.releaseAnswers();
    await runtime.removeBuild(ctx, build);
  });

  it('says OOMKilled when a process of the container was killed for memory though its command exited 0', async () => {
    const { proxy, runtime, build } = await throughProxy({ memoryBytes: 16 * 2 ** 20 });
    proxy.withholdAnswers(WAIT);
    // dd's 64 MiB buffer is over the 16 MiB limit: the kernel kills dd, the shell exits 0 a second
    // later (docker inspect: OOMKilled true, ExitCode 0). The engine's OOM notification is not
    // ordered with the exit (a fresh-clone run at load 5 saw the `die` of a shell that exited at
    // once come first): the second lets the `oom` event come before the `die`.
    const hungry = shellStep(build, 'hungry', 'dd if=/dev/zero of=/dev/null bs=64M count=1 2>/dev/null; sleep 1; exit 0');
    await run(runtime, build, hungry);
    expect(await exitOf(runtime, hungry)).toEqual({ exitCode: 0, reason: 'OOMKilled' });
    proxy.releaseAnswers();
    await runtime.removeBuild(ctx, build);
  });

  it('is confirmed by the engine when the container was signalled: a dockerd shutting down stops it, the exit 0 is no success', async () => {
    const { proxy, runtime, build } = await throughProxy();
    proxy.withholdAnswers(WAIT);
    // Exits 0 on SIGTERM, as many programs do.
    const polite = shellStep(build, 'polite', "trap 'exit 0' TERM; echo up; while :; do sleep 0.1; done");
    await runtime.setupContainer(ctx, polite, build);
    await runtime.runContainer(ctx, polite, build);
    // Its trap is set once it wrote "up" (the engine's log file has it).
    for (let i = 0; i < 100 && !(await engine().getContainer(engineName(polite.id)).logs({ stdout: true })).toString().includes('up'); i++)
      await sleep(ctx, 50);
    // dockerd shutting down: no new connection, then its containers stopped (a `kill` event, then `die` with 0).
    await proxy.stopListening();
    await engine().getContainer(engineName(polite.id)).kill({ signal: 'SIGTERM' });
    const error = await rejection(exitOf(runtime, polite), 20_000);
    expect(error.code).toBe('Unavailable');
    expect(error.detail).toMatch(/went away as the container ended \(exit code 0/);
    proxy.releaseAnswers();
  });

  it('reads the events on one connection, only while an exit is awaited', async () => {
    const { proxy, runtime, build } = await throughProxy();
    const quick = shellStep(build, 'quick', 'sleep 0.5');
    const slow = shellStep(build, 'slow', 'sleep 3');
    for (const container of [quick, slow]) {
      await runtime.setupContainer(ctx, container, build);
      await runtime.runContainer(ctx, container, build);
    }
    expect(proxy.openWhere(EVENTS)).toBe(1);
    expect(await exitOf(runtime, quick)).toEqual({ exitCode: 0, reason: 'Completed' });
    // The slow one's exit is still awaited: the connection stays.
    await sleep(ctx, 200);
    expect(proxy.openWhere(EVENTS)).toBe(1);
    expect(await exitOf(runtime, slow)).toEqual({ exitCode: 0, reason: 'Completed' });
    expect(proxy.requests.filter((line) => EVENTS.test(line))).toHaveLength(1);
    expect(await eventually(() => proxy.openWhere(EVENTS) === 0)).toBe(true);
    await runtime.removeBuild(ctx, build);
  });

  it('is told by the wait alone when the engine refuses the events', async () => {
    const { proxy, runtime, build } = await throughProxy();
    proxy.answerOnce(EVENTS, 500, { message: 'events are off here' });
    const ok = shellStep(build, 'ok', 'exit 0');
    await run(runtime, build, ok);
    expect(await exitOf(runtime, ok)).toEqual({ exitCode: 0, reason: 'Completed' });
    expect(proxy.requests.filter((line) => EVENTS.test(line))).toHaveLength(1);
    await runtime.removeBuild(ctx, build);
  });
});
