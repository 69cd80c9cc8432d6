/** Outputs (the optional capability): a volume of the build's own, read back through a container's archive. */
import type { Readable } from 'node:stream';
import type { Context } from '@berth/context';
import type { Build, Container } from '@berth/pipeline';
import { MAX_OUTPUT_FILE_BYTES, OUTPUTS_PATH, resourceLabels } from '@berth/runtime';
import { readArchivedFile } from './archive.ts';
import { outputsVolumeName } from './container-spec.ts';
import { engineMessage, runtimeError, statusOf } from './errors.ts';
import type { Dialer, RuntimeState } from './state.ts';

/**
 * A volume of its own for the build's outputs, mounted at `/vela/outputs` in every container set
 * up afterwards. Vela mounts its build volume at `/vela` and has an outputs sidecar `mkdir
 * /vela/outputs` (go-vela/worker executor/linux/outputs.go create); a volume of its own needs no
 * sidecar and works whatever the workspace is (`berth exec` mounts the current directory instead).
 */
export async function setupOutputs(s: RuntimeState, ctx: Context, build: Build): Promise<void> {
  const where = { operation: 'setupOutputs', subject: build.id };
  await s.call(
    ctx,
    where,
    s.creation(build.id, () =>
      s.docker.createVolume({ Name: outputsVolumeName(build.id), Driver: 'local', Labels: resourceLabels(s.config.workerId, build.id) }),
    ),
  );
  s.outputs.add(build.id);
}

/**
 * `GET /containers/{id}/archive?path=/vela/outputs/<name>` on a container of the build, running
 * or exited, as go-vela/worker runtime/docker/container.go PollOutputsContainer does on its
 * sidecar (CopyFromContainer; a missing file is no error; above MaxOutputsSize it fails).
 */
export async function readOutput(s: RuntimeState, ctx: Context, build: Build, container: Container, name: string): Promise<Uint8Array | undefined> {
  const where = { operation: 'readOutput', subject: container.id };
  if (!s.outputs.has(build.id)) throw runtimeError('NotFound', 'the build has no outputs volume (setupOutputs was not called)', where);
  if (name.includes('/') || name === '' || name === '.' || name === '..') {
    throw runtimeError('InvalidConfig', `${JSON.stringify(name)} is not a file name in ${OUTPUTS_PATH}`, where);
  }
  const file = `${OUTPUTS_PATH}/${name}`;
  const read = (through: string): Promise<Awaited<ReturnType<typeof readArchivedFile>> | undefined> =>
    s.call(
      ctx,
      where,
      async (signal) => {
        const stream = await archive(s, through, file, signal);
        return readArchivedFile(stream, MAX_OUTPUT_FILE_BYTES);
      },
      undefined,
      (error) => (statusOf(error) === 404 && !/no such container/i.test(engineMessage(error)) ? null : undefined),
    );
  const running = s.containers.get(container.id)?.exited === true ? runningContainerOf(s, build) : undefined;
  let found: Awaited<ReturnType<typeof read>>;
  try {
    found = await read(running ?? s.nameOf(container));
  } catch (error) {
    // The other container went away meanwhile (removed, or ended and removed): through the step's own.
    if (running === undefined || ctx.signal.aborted) throw error;
    found = await read(s.nameOf(container));
  }
  if (found === undefined || found.kind === 'not-a-file') return undefined;
  if (found.kind === 'too-large') {
    throw runtimeError(
      'InvalidConfig',
      `${file} has ${found.size} bytes, more than the ${MAX_OUTPUT_FILE_BYTES} an outputs file may have (write large data to the workspace instead)`,
      where,
    );
  }
  return new Uint8Array(found.data);
}

/**
 * The name of a container of the build that this runtime started and that still runs (a step
 * held for its turn, a service), to read the outputs volume through when the step that wrote them
 * has just exited: every container of the build mounts the volume, and an exited container's
 * archive waits for the engine's clean-up of its exit (moby daemon/archive.go
 * `containerArchivePath` takes the container's lock, which daemon/monitor.go `handleContainerExit`
 * holds while it releases the network endpoint and the mounts; ~50 ms here), the time the exit
 * from the `die` event saves (exit-events.ts).
 */
function runningContainerOf(s: RuntimeState, build: Build): string | undefined {
  for (const record of s.containers.values()) {
    if (record.buildId === build.id && record.exit !== undefined && !record.exited && record.mountsOutputs) return record.name;
  }
  return undefined;
}

function archive(s: RuntimeState, name: string, file: string, signal: AbortSignal): Promise<Readable> {
  return new Promise((resolve, reject) => {
    (s.docker.modem as Dialer).dial(
      {
        path: `/containers/${encodeURIComponent(name)}/archive?`,
        method: 'GET',
        options: { path: file },
        abortSignal: signal,
        isStream: true,
        statusCodes: { 200: true, 400: 'bad parameter', 404: 'no such container or path', 500: 'server error' },
      },
      (error, data) => (error ? reject(error) : resolve(data as Readable)),
    );
  });
}
