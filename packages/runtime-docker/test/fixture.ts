import type { Readable } from 'node:stream';
import { background, withTimeout } from '@berth/context';
import { type Build, type Container, emptyBuild, emptyContainer } from '@berth/pipeline';
import { LABELS, type Runtime, type RuntimeConfig, RuntimeError } from '@berth/runtime';
import Docker from 'dockerode';
import { afterAll, afterEach, expect } from 'vitest';
import { dockerRuntime, type DockerRuntimeOptions } from '../src/index.ts';

/** The local test image (static busybox), built by tools/images/build.sh. */
const BUSYBOX = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';
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

/** What {@link useEngine} gives a test file. */
export interface EngineFixture {
  /** This file's random suffix: in its worker id and build ids, and free for its own names. */
  readonly run: string;
  /** The worker id of the file's runtimes (`rd-<name>-<run>`). */
  readonly workerId: string;
  /**
   * A Docker runtime with this file's worker id and a 1 s stop grace, `config` and `options` over
   * the file's defaults; closed, and everything of its worker id reaped, at the next clean-up.
   */
  newRuntime(config?: Partial<RuntimeConfig>, options?: DockerRuntimeOptions): Promise<Runtime>;
  /** A build id of this file (`rd<name>_<run>_<tag>`); without `tag`, the next number. */
  buildId(tag?: string): string;
  /** A build with a new id, set up as the executor does: `setupBuild`, `createNetwork`, `createVolume`. */
  newBuild(runtime: Runtime): Promise<Build>;
  /** Runs `cleanup` at the next clean-up, after the runtimes are reaped and closed (the last one given first). */
  onCleanup(cleanup: () => Promise<void> | void): void;
}

/**
 * The engine set-up of a test file that drives the real Docker engine: unique worker and build ids,
 * runtimes, and their clean-up `after` each test or all of them (registered here). The clean-up
 * reaps every worker id the file's runtimes used straight through the engine's socket (whatever a
 * test did to a runtime's own: a proxy cut or gone), so a failed case leaves nothing behind, closes
 * the runtimes, checks that no container, network or volume of those worker ids is left, then runs
 * the file's own clean-ups.
 */
export function useEngine(
  name: string,
  defaults: { config?: Partial<RuntimeConfig>; options?: DockerRuntimeOptions; after?: 'each' | 'all' } = {},
): EngineFixture {
  const run = suffix();
  const workerId = `rd-${name}-${run}`;
  const runtimes: Runtime[] = [];
  const workers = new Set<string>();
  const cleanups: (() => Promise<void> | void)[] = [];
  let builds = 0;

  async function cleanUp(): Promise<void> {
    const made = runtimes.splice(0);
    const owners = [...workers];
    workers.clear();
    const theirs = cleanups.splice(0).reverse();
    const [ctx, release] = withTimeout(background(), 60_000);
    try {
      try {
        if (owners.length > 0) {
          const direct = await dockerRuntime().create(ctx, { workerId });
          try {
            for (const owner of owners) await direct.reap(ctx, owner);
          } finally {
            await direct.close();
          }
        }
      } finally {
        for (const runtime of made) await runtime.close();
      }
      const docker = engine();
      for (const owner of owners) {
        const filters = { label: [`${LABELS.worker}=${owner}`] };
        const left = {
          containers: (await docker.listContainers({ all: true, filters })).map((c) => c.Names),
          networks: (await docker.listNetworks({ filters })).map((n) => n.Name),
          volumes: ((await docker.listVolumes({ filters })).Volumes ?? []).map((v) => v.Name),
        };
        expect(left, `left of worker ${owner} after the reap`).toEqual({ containers: [], networks: [], volumes: [] });
      }
    } finally {
      release();
      for (const cleanup of theirs) await cleanup();
    }
  }
  if (defaults.after === 'each') afterEach(cleanUp);
  else afterAll(cleanUp);

  const buildId = (tag?: string): string => `rd${name}_${run}_${tag ?? ++builds}`;
  return {
    run,
    workerId,
    async newRuntime(config = {}, options = {}) {
      const full = { workerId, ...defaults.config, ...config };
      const runtime = await dockerRuntime({ stopGraceMs: 1_000, ...defaults.options, ...options }).create(background(), full);
      runtimes.push(runtime);
      workers.add(full.workerId);
      return runtime;
    },
    buildId,
    async newBuild(runtime) {
      const ctx = background();
      const build = emptyBuild({ id: buildId() });
      await runtime.setupBuild(ctx, build);
      await runtime.createNetwork(ctx, build);
      await runtime.createVolume(ctx, build);
      return build;
    },
    onCleanup(cleanup) {
      cleanups.push(cleanup);
    },
  };
}

/** A step of `build` on the local busybox image (never pulled), number 1, `fields` over that. */
export function step(build: Build, name: string, fields: Partial<Container> = {}): Container {
  return emptyContainer({ id: `step_${build.id}_${name}`, name, image: BUSYBOX, pull: 'never', number: 1, ...fields });
}

/** A {@link step} whose shell runs `script` (`/bin/sh -c`). */
export function shellStep(build: Build, name: string, script: string, fields: Partial<Container> = {}): Container {
  return step(build, name, { entrypoint: ['/bin/sh', '-c'], commands: [script], ...fields });
}

/** Reads a log stream to its end, as text; `between` runs after its first chunk (a pause, a cut) before reading on. */
export async function readAll(stream: Readable, between?: () => Promise<void>): Promise<string> {
  const chunks: Buffer[] = [];
  let first = true;
  for await (const chunk of stream) {
    chunks.push(chunk as Buffer);
    if (first && between) await between();
    first = false;
  }
  return Buffer.concat(chunks).toString();
}

/** Runs a container to its end: its exit code and output. */
export async function runToEnd(runtime: Runtime, build: Build, container: Container): Promise<{ exitCode: number; logs: string }> {
  const ctx = background();
  await runtime.setupContainer(ctx, container, build);
  await runtime.runContainer(ctx, container, build);
  const logs = readAll(await runtime.tailContainer(ctx, container));
  const exit = await runtime.waitContainer(ctx, container);
  return { exitCode: exit.exitCode, logs: await logs };
}

/** The RuntimeError `promise` rejects with; fails the test when it resolves, rejects with anything else, or (with `withinMs`) takes that long. */
export async function rejection(promise: Promise<unknown>, withinMs?: number): Promise<RuntimeError> {
  const started = Date.now();
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (withinMs !== undefined) expect(Date.now() - started).toBeLessThan(withinMs);
  expect(error, 'expected a RuntimeError').toBeInstanceOf(RuntimeError);
  return error as RuntimeError;
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
