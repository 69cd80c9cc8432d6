/**
 * The build's network and volume (go-vela/worker runtime/docker/network.go and volume.go): one
 * bridge network and one volume per build, named after it and labelled with the worker and build.
 */
import type { Context } from '@berth/context';
import type { Build } from '@berth/pipeline';
import { resourceLabels } from '@berth/runtime';
import { engineName, outputsVolumeName } from './container-spec.ts';
import type { RuntimeState } from './state.ts';

/** dockerode methods whose typings omit the options object they accept. */
interface InspectableWithSignal {
  inspect(options: { abortSignal: AbortSignal }): Promise<unknown>;
}

/** The build's bridge network, named after it (`Runtime.createNetwork`). */
export async function createNetwork(s: RuntimeState, ctx: Context, build: Build): Promise<void> {
  const where = { operation: 'createNetwork', subject: build.id };
  await s.call(
    ctx,
    where,
    s.creation(build.id, () =>
      s.docker.createNetwork({
        Name: engineName(build.id),
        Driver: 'bridge',
        CheckDuplicate: true,
        Labels: resourceLabels(s.config.workerId, build.id),
      }),
    ),
  );
  s.networks.add(build.id);
}

/** The build's network for the init log (`Runtime.inspectNetwork`). */
export async function inspectNetwork(s: RuntimeState, ctx: Context, build: Build): Promise<string> {
  const where = { operation: 'inspectNetwork', subject: build.id };
  const name = engineName(build.id);
  const info = (await s.call(ctx, where, (signal) => (s.docker.getNetwork(name) as unknown as InspectableWithSignal).inspect({ abortSignal: signal }))) as {
    Id: string;
    Driver: string;
  };
  return `$ docker network inspect ${name}\n${info.Id} (${info.Driver})\n`;
}

/** Removes the build's network after its pending creations (`Runtime.removeNetwork`). */
export async function removeNetwork(s: RuntimeState, ctx: Context, build: Build): Promise<void> {
  await s.creationsSettled(ctx, build.id);
  await s.removeNetworkNamed(ctx, { operation: 'removeNetwork', subject: build.id }, engineName(build.id));
  s.networks.delete(build.id);
}

/** The build's volume, named after it (`Runtime.createVolume`). */
export async function createVolume(s: RuntimeState, ctx: Context, build: Build): Promise<void> {
  const where = { operation: 'createVolume', subject: build.id };
  await s.call(
    ctx,
    where,
    s.creation(build.id, () => s.docker.createVolume({ Name: engineName(build.id), Driver: 'local', Labels: resourceLabels(s.config.workerId, build.id) })),
  );
  s.volumes.add(build.id);
}

/** The build's volume for the init log (`Runtime.inspectVolume`). */
export async function inspectVolume(s: RuntimeState, ctx: Context, build: Build): Promise<string> {
  const where = { operation: 'inspectVolume', subject: build.id };
  const name = engineName(build.id);
  const info = (await s.call(ctx, where, (signal) => s.docker.getVolume(name).inspect({ abortSignal: signal }))) as {
    Name: string;
    Driver: string;
    Mountpoint: string;
  };
  const mounted = s.config.workspaceHostPath
    ? `unused: the host directory ${s.config.workspaceHostPath} is mounted at ${s.workspacePath} instead`
    : `mounted in containers at ${s.workspacePath}`;
  return `$ docker volume inspect ${name}\n${info.Name} (${info.Driver}) at ${info.Mountpoint}, ${mounted}\n`;
}

/** Removes the build's volume (and outputs volume) after its pending creations (`Runtime.removeVolume`). */
export async function removeVolume(s: RuntimeState, ctx: Context, build: Build): Promise<void> {
  await s.creationsSettled(ctx, build.id);
  await s.removeVolumeNamed(ctx, { operation: 'removeVolume', subject: build.id }, engineName(build.id));
  s.volumes.delete(build.id);
  if (s.outputs.has(build.id)) {
    await s.removeVolumeNamed(ctx, { operation: 'removeVolume', subject: build.id }, outputsVolumeName(build.id));
    s.outputs.delete(build.id);
  }
}
