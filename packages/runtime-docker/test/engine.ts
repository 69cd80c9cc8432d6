import Docker from 'dockerode';

/** The local test image (static busybox), built by tools/images/build.sh. */
export const BUSYBOX = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';
/** Sleeps until SIGTERM and exits 0 on it. */
export const PAUSE = process.env.BERTH_PAUSE_IMAGE ?? 'berth/pause:1';

/** A dockerode client on the engine the tests use (DOCKER_HOST or the default socket), for reading back what the runtime did. */
export function engine(): Docker {
  return new Docker();
}

/** A short random suffix, so parallel runs never share names. */
export function suffix(): string {
  return Math.random().toString(36).slice(2, 10);
}

/**
 * Whether this engine can start a privileged container at all (it cannot inside some sandboxes:
 * runc fails with "unable to apply caps"). Returns the engine's message when it cannot.
 */
export async function privilegedUnsupported(): Promise<string | undefined> {
  const docker = engine();
  const container = await docker.createContainer({
    _query: { name: `berth-privileged-probe-${suffix()}` },
    _body: { Image: BUSYBOX, Cmd: ['true'], HostConfig: { Privileged: true } },
  } as unknown as Docker.ContainerCreateOptions);
  try {
    await container.start();
    return undefined;
  } catch (error) {
    return (error as Error).message.replace(/\s+$/, '');
  } finally {
    await container.remove({ force: true }).catch(() => undefined);
  }
}
