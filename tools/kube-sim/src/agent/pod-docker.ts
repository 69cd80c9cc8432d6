// The pod's Docker objects: the sandbox (pause container and emptyDir volumes), stopping a
// container, and removing everything the pod made.

import type Docker from 'dockerode';
import { nowSeconds } from '../types.ts';
import { sandboxRequest, volumeLabels, volumeName } from './docker-spec.ts';
import { type PodState } from './pod-state.ts';

/** The message of a Docker (dockerode) error, or of any error. */
export function errorText(err: unknown): string {
  const e = err as { json?: { message?: string }; message?: string };
  return e.json?.message ?? e.message ?? String(err);
}

/** A Docker timestamp in the API's seconds form; null for Docker's zero time. */
export function dockerSeconds(dockerTime: string | undefined): string | null {
  if (!dockerTime || dockerTime.startsWith('0001-')) return null;
  return nowSeconds(new Date(dockerTime));
}

/** Creates the pod's emptyDir volumes (not `medium: Memory`) and starts its pause container. */
export async function createSandbox(state: PodState): Promise<void> {
  const { docker, instance, pauseImage } = state.deps;
  const pod = state.pod;
  for (const v of pod.spec.volumes ?? []) {
    if (v.emptyDir && v.emptyDir.medium !== 'Memory') {
      const name = volumeName(pod, v.name);
      if (!state.volumes.includes(name)) {
        await docker.createVolume({ Name: name, Labels: volumeLabels(instance, pod) });
        state.volumes.push(name);
      }
    }
  }
  const container = await docker.createContainer(sandboxRequest(instance, pod, pauseImage) as unknown as Docker.ContainerCreateOptions);
  state.dockerIds.add(container.id);
  await container.start();
  const info = await container.inspect();
  const bridge = Object.values(info.NetworkSettings.Networks)[0];
  state.sandbox = { id: container.id, ip: bridge?.IPAddress ?? '', gateway: bridge?.Gateway ?? '' };
}

/** Stops a container with `graceSeconds` (kills it at 0); gone or stopped already is fine. */
export async function stopDocker(docker: Docker, id: string, graceSeconds: number): Promise<void> {
  try {
    const c = docker.getContainer(id);
    if (graceSeconds <= 0) await c.kill();
    else await c.stop({ t: graceSeconds });
  } catch (err) {
    const code = (err as { statusCode?: number }).statusCode;
    if (code !== 304 && code !== 404 && code !== 409) console.error('[kube-sim] stopping container failed:', errorText(err));
  }
}

/** Stops the pod's sandbox, if it has one. */
export async function stopSandbox(state: PodState, graceSeconds: number): Promise<void> {
  if (!state.sandbox) return;
  await stopDocker(state.deps.docker, state.sandbox.id, graceSeconds);
}

/** Removes every container and volume the pod made (errors ignored). */
export async function removeDockerObjects(state: PodState): Promise<void> {
  const { docker } = state.deps;
  for (const id of state.dockerIds) {
    await docker
      .getContainer(id)
      .remove({ force: true, v: true })
      .catch(() => undefined);
  }
  for (const name of state.volumes) {
    await docker
      .getVolume(name)
      .remove()
      .catch(() => undefined);
  }
}
