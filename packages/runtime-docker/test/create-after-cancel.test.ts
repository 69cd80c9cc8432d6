/**
 * A create request the engine finishes after its caller was cancelled must not leave the
 * resource behind: the build's removal waits for creations still in the engine, then removes.
 * Found by the executor's fault soak (seed 7, build 19: a cancel at the build's second call left
 * its network). go-vela/worker has the same race: `runtime/docker/network.go` CreateNetwork passes
 * its ctx to the client, and DestroyBuild removes by name once, so a late create survives.
 */
import { execFileSync } from 'node:child_process';
import { background, sleep, withCancel, withTimeout } from '@berth/context';
import { type Build, emptyBuild } from '@berth/pipeline';
import type { Runtime } from '@berth/runtime';
import { describe, expect, it } from 'vitest';
import { step, useEngine } from './fixture.ts';
import { HoldingProxy } from './holding-proxy.ts';

const fx = useEngine('late', { after: 'each' });

function left(kind: 'network' | 'volume' | 'container'): string {
  const args = kind === 'container' ? ['ps', '-aq'] : [kind, 'ls', '-q'];
  return execFileSync('docker', [...args, '--filter', `label=berth.dev/worker=${fx.workerId}`], { encoding: 'utf8' }).trim();
}

/**
 * Holds the engine's create request, cancels its caller, starts the build's removal, and lets the
 * engine finish the create once the removal settled or had 2 s: what removal leaves is a leak.
 */
async function lateCreate(create: (runtime: Runtime, ctx: ReturnType<typeof withCancel>[0], build: Build) => Promise<void>, request: RegExp): Promise<void> {
  const proxy = new HoldingProxy();
  await proxy.open();
  fx.onCleanup(() => proxy.dispose());
  const runtime = await fx.newRuntime({}, { socketPath: proxy.path, stopGraceMs: 500 });
  const build = emptyBuild({ id: fx.buildId() });
  proxy.hold(request);
  const [ctx, cancel] = withCancel(background());
  const creating = create(runtime, ctx, build);
  await proxy.held();
  cancel();
  await expect(creating).rejects.toMatchObject({ code: 'Canceled' });

  const [destroy, cancelDestroy] = withTimeout(background(), 30_000);
  const removing = (async () => {
    await runtime.removeVolume(destroy, build).catch(() => undefined);
    await runtime.removeNetwork(destroy, build).catch(() => undefined);
    await runtime.removeBuild(destroy, build);
  })();
  const [wait, stopWait] = withCancel(background());
  await Promise.race([removing, sleep(wait, 2_000).catch(() => undefined)]);
  stopWait();
  await proxy.release();
  await removing;
  cancelDestroy();
}

describe('a create the engine finishes after its caller was cancelled', () => {
  it('createNetwork: removeNetwork and removeBuild still remove the network', async () => {
    await lateCreate((runtime, ctx, build) => runtime.createNetwork(ctx, build), /^POST \S*\/networks\/create/);
    expect(left('network')).toBe('');
  });

  it('createVolume: removeVolume and removeBuild still remove the volume', async () => {
    await lateCreate((runtime, ctx, build) => runtime.createVolume(ctx, build), /^POST \S*\/volumes\/create/);
    expect(left('volume')).toBe('');
  });

  it('setupContainer: removeBuild still removes the container', async () => {
    await lateCreate((runtime, ctx, build) => runtime.setupContainer(ctx, step(build, 'late', { commands: ['true'] }), build), /^POST \S*\/containers\/create/);
    expect(left('container')).toBe('');
  });
});
