/**
 * @berth/runtime-docker — the Berth runtime plugin for the Docker engine (through dockerode).
 *
 * @packageDocumentation
 */
import { statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Context } from '@berth/context';
import { CONTRACT_VERSION, defineRuntime, type Runtime, type RuntimeConfig, type RuntimeDescriptor } from '@berth/runtime';
import { engineCall } from './call.ts';
import { connect, type DockerConnectionOptions } from './connection.ts';
import { RUNTIME_NAME, runtimeError } from './errors.ts';
import { type ContainerLimits, DockerRuntime } from './runtime.ts';
import { parseVolumeAllowlist } from './volumes.ts';

export { DockerLogDemuxer, type DockerLogDemuxerOptions, type LogContinuation, type LogProgress } from './demux.ts';
export { type ContainerLimits, DEFAULT_STOP_GRACE_MS, DEFAULT_WORKSPACE_PATH, DockerRuntime, engineName } from './runtime.ts';
export type { DockerConnectionOptions } from './connection.ts';

/** Options of {@link dockerRuntime}: where the engine is, and the limits every container gets. */
export interface DockerRuntimeOptions extends DockerConnectionOptions, ContainerLimits {
  /**
   * SIGTERM to SIGKILL when a container is removed while it runs, in ms (10 000 by default).
   * The worker's `RuntimeConfig.stopGraceMs` wins when set. The engine counts whole seconds: rounded up.
   */
  stopGraceMs?: number;
  /**
   * How long, in ms, a container's live log (its attach) may hold the container because nobody
   * reads it fast enough before it is given up and the rest read from the engine's log file
   * (5 000 by default).
   */
  logStallMs?: number;
  /**
   * How many bytes of a container's live log are read ahead into memory when its reader is slow
   * (1 MiB by default), before the attach holds the container (and, `logStallMs` later, is given
   * up). Once a container exited, the engine waits 2 s at most for its output to be copied to the
   * attach, then drops the rest, from its log file too.
   */
  logBufferBytes?: number;
}

/** dockerode's `ping` accepts options, though its typings say otherwise. */
interface Pingable {
  ping(options: { abortSignal: AbortSignal }): Promise<unknown>;
}

const { version } = createRequire(import.meta.url)('../package.json') as { version: string };

/**
 * The Docker runtime plugin: register the descriptor with the worker, which calls `create`.
 *
 * @example
 * const runtime = await dockerRuntime({ memoryBytes: 2 ** 30, dropCapabilities: ['NET_RAW'] })
 *   .create(ctx, { workerId: 'worker-1', privilegedImages: ['target/vela-docker'] });
 *
 * Gotcha: `create` pings the engine and rejects `Unavailable` when it does not answer; the
 * connection comes from the options, else `DOCKER_HOST`, else `/var/run/docker.sock`.
 */
export function dockerRuntime(options: DockerRuntimeOptions = {}): RuntimeDescriptor {
  return defineRuntime({
    name: RUNTIME_NAME,
    version,
    contract: CONTRACT_VERSION,
    create: (ctx, config) => createDockerRuntime(ctx, config, options),
  });
}

async function createDockerRuntime(ctx: Context, config: RuntimeConfig, options: DockerRuntimeOptions): Promise<Runtime> {
  const where = { operation: 'create' };
  if (!config.workerId) throw runtimeError('InvalidConfig', 'the worker id is empty; every resource is labelled with it', where);
  if (config.workspaceHostPath !== undefined) {
    const hostPath = config.workspaceHostPath;
    if (!path.isAbsolute(hostPath))
      throw runtimeError('InvalidConfig', `the workspace host directory must be an absolute path; got ${JSON.stringify(hostPath)}`, where);
    if (!statSync(hostPath, { throwIfNoEntry: false })?.isDirectory()) {
      throw runtimeError('InvalidConfig', `the workspace host directory ${hostPath} does not exist or is not a directory`, where);
    }
  }
  let allowlist;
  try {
    allowlist = parseVolumeAllowlist(config.volumes ?? []);
  } catch (error) {
    throw runtimeError('InvalidConfig', `bad volume allowlist: ${(error as Error).message}`, where, error);
  }
  for (const [key, value] of [
    ['cpus', options.cpus],
    ['memoryBytes', options.memoryBytes],
    ['pidsLimit', options.pidsLimit],
    ['stopGraceMs', options.stopGraceMs ?? config.stopGraceMs],
    ['logStallMs', options.logStallMs],
    ['logBufferBytes', options.logBufferBytes],
  ] as const) {
    if (value !== undefined && !(Number.isFinite(value) && value >= 0))
      throw runtimeError('InvalidConfig', `${key} must be a non-negative number; got ${String(value)}`, where);
  }
  let connection;
  try {
    connection = connect(options);
  } catch (error) {
    throw runtimeError('InvalidConfig', (error as Error).message, where, error);
  }
  try {
    await engineCall(ctx, where, connection.engine, (signal) => (connection.docker as unknown as Pingable).ping({ abortSignal: signal }));
  } catch (error) {
    connection.close();
    throw error;
  }
  return new DockerRuntime({
    connection,
    config,
    allowlist,
    limits: options,
    stopGraceMs: options.stopGraceMs,
    logStallMs: options.logStallMs,
    logBufferBytes: options.logBufferBytes,
  });
}
