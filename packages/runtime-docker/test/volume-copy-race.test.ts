import { background } from '@berth/context';
import { describe, expect, it } from 'vitest';
import { engineName } from '../src/container-spec.ts';
import { readAll, rejection, runToEnd, shellStep, useEngine } from './fixture.ts';
import { EngineProxy } from './proxy.ts';

/**
 * dockerd copies what the image holds at a volume's mount point (here the step's working
 * directory, which it just made under /vela) into the volume when the volume is empty, at create
 * (moby daemon/create_unix.go createContainerOSSpecificSettings → populateVolumes). Two creates at
 * once on a build's fresh volume both find it empty and copy; the later one fails on a directory
 * the other made (moby/moby#47021). dockerd 20.10 answered the bench's held starts (two creates at
 * once) with it, 3 times in ~400 builds, and the build errored:
 *
 *   500 failed to mkdir /var/lib/docker/volumes/<volume>/_data/src: mkdir …: file exists
 *
 * Plain creates at once (dockerode, joining the build's network) hit it 1 time in 150 pairs. The
 * engine removes the container it could not create, and the volume is no longer empty: the
 * runtime sends the same create again. The answer is given here by a proxy in front of the real
 * engine (the race cannot be provoked at will); everything else is the engine's.
 */
const ctx = background();
const fx = useEngine('copyrace');

/** The engine's answer to a create that lost the race on `volume`, as dockerd 20.10 words it. */
function lostRace(volume: string): { message: string } {
  const dir = `/var/lib/docker/volumes/${volume}/_data/src`;
  return { message: `failed to mkdir ${dir}: mkdir ${dir}: file exists` };
}

async function proxied(): Promise<{ proxy: EngineProxy; runtime: Awaited<ReturnType<typeof fx.newRuntime>> }> {
  const proxy = new EngineProxy();
  await proxy.open();
  fx.onCleanup(() => proxy.dispose());
  return { proxy, runtime: await fx.newRuntime({}, { socketPath: proxy.path }) };
}

const createOf = (name: string): RegExp => new RegExp(`^POST \\S*/containers/create\\?name=${name}[& ]`);

describe('a create that lost the race to fill the build’s fresh volume (500 failed to mkdir …: file exists)', () => {
  it('holdContainer creates it again: the step is held, released and runs', async () => {
    const { proxy, runtime } = await proxied();
    const build = await fx.newBuild(runtime);
    const held = shellStep(build, 'held', 'echo held-ran; pwd', { directory: '/vela/src/github.com/org/repo' });
    proxy.answerOnce(createOf(engineName(held.id)), 500, lostRace(engineName(build.id)));
    expect(await runtime.holdContainer?.(ctx, held, build)).toBe(true);
    await runtime.releaseContainer?.(ctx, held);
    const log = readAll(await runtime.tailContainer(ctx, held));
    expect(await runtime.waitContainer(ctx, held)).toMatchObject({ exitCode: 0 });
    expect(await log).toBe('held-ran\n/vela/src/github.com/org/repo\n');
    expect(proxy.requests.filter((line) => createOf(engineName(held.id)).test(line))).toHaveLength(2);
    await runtime.removeBuild(ctx, build);
  });

  it('setupContainer creates it again; another 500 of the engine is not retried', async () => {
    const { proxy, runtime } = await proxied();
    const build = await fx.newBuild(runtime);
    const plain = shellStep(build, 'plain', 'echo plain-ran');
    proxy.answerOnce(createOf(engineName(plain.id)), 500, lostRace(engineName(build.id)));
    expect(await runToEnd(runtime, build, plain)).toEqual({ exitCode: 0, logs: 'plain-ran\n' });

    const other = shellStep(build, 'other', 'echo never');
    proxy.answerOnce(createOf(engineName(other.id)), 500, { message: 'failed to mkdir /var/lib/docker/containers/x: no space left on device' });
    const error = await rejection(runtime.setupContainer(ctx, other, build));
    expect(error.detail).toContain('no space left on device');
    expect(proxy.requests.filter((line) => createOf(engineName(other.id)).test(line))).toHaveLength(1);
    await runtime.removeBuild(ctx, build);
  });
});
