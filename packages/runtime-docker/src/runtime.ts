import type { Readable } from 'node:stream';
import { afterFunc, type Context } from '@berth/context';
import type { Build, Container } from '@berth/pipeline';
import {
  type ContainerExit,
  type ContainerStatus,
  isRuntimeError,
  LABELS,
  labelValue,
  MAX_OUTPUT_FILE_BYTES,
  OUTPUTS_PATH,
  type ReapReport,
  resourceLabels,
  type Runtime,
  type RuntimeConfig,
  RuntimeError,
  type RuntimeEvent,
} from '@berth/runtime';
import type Docker from 'dockerode';
import { engineCall } from './call.ts';
import type { EngineConnection } from './connection.ts';
import { DEFAULT_LOG_STALL_MS, openAttach, PendingAttach, tailLogs } from './logs.ts';
import { contextError, type EngineDescription, engineMessage, isUnavailable, RUNTIME_NAME, runtimeError, statusOf, type Where } from './errors.ts';
import { readArchivedFile } from './archive.ts';
import { type ContainerLimits, containerCreateBody, engineName, outputsVolumeName } from './container-spec.ts';
import { readExit } from './engine-answers.ts';
import { type ResolvedImage, resolveImage } from './image-ref.ts';
import { pullImage } from './pull.ts';
import type { AllowedVolume } from './volumes.ts';

/** docker-modem's request function (untyped in @types/dockerode). */
interface Dialer {
  dial(options: object, callback: (error: Error | null, data: unknown) => void): void;
}

/** dockerode methods whose typings omit the options object they accept. */
interface InspectableWithSignal {
  inspect(options: { abortSignal: AbortSignal }): Promise<unknown>;
}

/** What the runtime keeps about a container between calls. */
interface ContainerRecord {
  /** The engine's container name. */
  readonly name: string;
  readonly buildId: string;
  /** The create request, kept until the container exists (creation waits for the pull with `on_start`). */
  body: Record<string, unknown> | undefined;
  created: boolean;
  /** The exit, subscribed before start; settles when the container ends. */
  exit: Promise<{ StatusCode: number; Error?: { Message?: string } | null }> | undefined;
  /** Set once the exit above resolved: the container is not running (removal need not stop it). */
  exited: boolean;
  /** Aborts the exit subscription (on remove, on close). */
  waitController: AbortController | undefined;
  /** The attach opened before the start, until tailContainer claims it. */
  attach?: PendingAttach | undefined;
}

export { type ContainerLimits, engineName } from './container-spec.ts';

/** The workspace mount point when the worker configures none (Vela's `/vela`). */
export const DEFAULT_WORKSPACE_PATH = '/vela';
/** SIGTERM to SIGKILL, when neither the worker nor the plugin options say otherwise. */
export const DEFAULT_STOP_GRACE_MS = 10_000;

/**
 * The Runtime contract on the Docker engine, as Vela's Docker runtime does it: one bridge network
 * and one volume per build, named after the build; one container per step or service, named after
 * its id, reachable on the network by its name.
 */
export class DockerRuntime implements Runtime {
  readonly name = RUNTIME_NAME;
  readonly #docker: Docker;
  readonly #engine: EngineDescription;
  readonly #connection: EngineConnection;
  readonly #config: RuntimeConfig;
  readonly #limits: ContainerLimits;
  readonly #allowlist: readonly AllowedVolume[];
  readonly #stopGraceMs: number;
  readonly #logStallMs: number;
  readonly #workspacePath: string;
  readonly #containers = new Map<string, ContainerRecord>();
  /** Builds whose network / volume this runtime created: containers join or mount only those. */
  readonly #networks = new Set<string>();
  readonly #volumes = new Set<string>();
  /** Builds with an outputs volume (setupOutputs): their containers mount it at `/vela/outputs`. */
  readonly #outputs = new Set<string>();
  /**
   * Create requests still in the engine, per build id. A removal waits for them: the engine
   * finishes a create whose caller gave up, and a removal that ran first would leave it behind.
   */
  readonly #creating = new Map<string, Set<Promise<void>>>();
  #closed = false;

  constructor(
    connection: EngineConnection,
    config: RuntimeConfig,
    allowlist: readonly AllowedVolume[],
    limits: ContainerLimits,
    stopGraceMs: number | undefined,
    logStallMs: number = DEFAULT_LOG_STALL_MS,
  ) {
    this.#logStallMs = logStallMs;
    this.#connection = connection;
    this.#docker = connection.docker;
    this.#engine = connection.engine;
    this.#config = config;
    this.#allowlist = allowlist;
    this.#limits = limits;
    this.#stopGraceMs = config.stopGraceMs ?? stopGraceMs ?? DEFAULT_STOP_GRACE_MS;
    this.#workspacePath = config.workspacePath || DEFAULT_WORKSPACE_PATH;
  }

  // ---- build -------------------------------------------------------------------------------

  async inspectBuild(ctx: Context, build: Build): Promise<string> {
    const where = { operation: 'inspectBuild', subject: build.id };
    const containers = await this.#call(ctx, where, (signal) =>
      this.#docker.listContainers({ all: true, filters: { label: this.#buildFilter(build.id) }, abortSignal: signal }),
    );
    const lines = [`$ docker ps -a --filter label=${LABELS.build}=${labelValue(build.id)}`];
    lines.push(`network ${engineName(build.id)}, volume ${engineName(build.id)} mounted at ${this.#workspacePath}`);
    for (const c of containers) lines.push(`${c.Names[0]?.replace(/^\//, '') ?? c.Id} ${c.Image} ${c.State}`);
    return `${lines.join('\n')}\n`;
  }

  async setupBuild(ctx: Context, build: Build): Promise<void> {
    // Nothing precedes containers on Docker (Vela: a no-op); still honour a done ctx.
    if (ctx.signal.aborted) throw contextError(ctx, { operation: 'setupBuild', subject: build.id });
    return Promise.resolve();
  }

  async assembleBuild(ctx: Context, build: Build): Promise<void> {
    if (ctx.signal.aborted) throw contextError(ctx, { operation: 'assembleBuild', subject: build.id });
    return Promise.resolve();
  }

  async removeBuild(ctx: Context, build: Build): Promise<void> {
    const where = { operation: 'removeBuild', subject: build.id };
    await this.#creationsSettled(ctx, build.id);
    const containers = await this.#call(ctx, where, (signal) =>
      this.#docker.listContainers({ all: true, filters: { label: this.#buildFilter(build.id) }, abortSignal: signal }),
    );
    for (const c of containers) await this.#forceRemoveContainer(ctx, where, c.Id);
    for (const [id, record] of this.#containers) {
      if (record.buildId === build.id) this.#forget(id);
    }
    await this.#removeNetworkNamed(ctx, where, engineName(build.id));
    await this.#removeVolumeNamed(ctx, where, engineName(build.id));
    await this.#removeVolumeNamed(ctx, where, outputsVolumeName(build.id));
    this.#networks.delete(build.id);
    this.#volumes.delete(build.id);
    this.#outputs.delete(build.id);
  }

  // ---- container ---------------------------------------------------------------------------

  async setupContainer(ctx: Context, container: Container, build: Build): Promise<void> {
    const where = { operation: 'setupContainer', subject: container.id };
    const image = this.#resolve(container, where);
    const body = this.#createBody(container, build, image, where);
    if (container.pull === 'always') await this.#pull(ctx, where, container, image, build.id);
    const record: ContainerRecord = {
      name: engineName(container.id),
      buildId: build.id,
      body,
      created: false,
      exit: undefined,
      exited: false,
      waitController: undefined,
    };
    this.#containers.set(container.id, record);
    // With on_start the image is pulled by runContainer, so the container is created there.
    if (container.pull === 'on_start') return;
    // Create first and look at the image only when the engine says it is missing: one call, not two.
    try {
      await this.#create(ctx, where, record);
    } catch (error) {
      if (!isRuntimeError(error, 'ImageNotFound') || container.pull === 'always') throw error;
      if (container.pull === 'never') {
        throw runtimeError('ImageNotFound', `image "${image.reference}" not found locally and pull policy is "never"`, where, error);
      }
      await this.#pull(ctx, where, container, image, build.id);
      await this.#create(ctx, where, record);
    }
  }

  async runContainer(ctx: Context, container: Container, build: Build): Promise<void> {
    const where = { operation: 'runContainer', subject: container.id };
    let record = this.#containers.get(container.id);
    if (!record) {
      const image = this.#resolve(container, where);
      record = {
        name: engineName(container.id),
        buildId: build.id,
        body: this.#createBody(container, build, image, where),
        created: false,
        exit: undefined,
        exited: false,
        waitController: undefined,
      };
      this.#containers.set(container.id, record);
    }
    if (container.pull === 'on_start') await this.#pull(ctx, where, container, this.#resolve(container, where), build.id);
    if (!record.created) await this.#create(ctx, where, record);

    // Subscribe to the exit before starting (a container that ends at once is not missed; dockerode 582).
    record.waitController?.abort();
    const controller = new AbortController();
    record.waitController = controller;
    const stop = afterFunc(ctx, () => controller.abort(ctx.signal.reason));
    let exit: NonNullable<ContainerRecord['exit']>;
    try {
      ({ exit } = await this.#call(ctx, where, () => this.#subscribeExit(record.name, controller.signal)));
    } catch (error) {
      controller.abort();
      throw error;
    } finally {
      stop();
    }
    let lost = false;
    exit.then(
      () => (record.exited = true),
      // Lost (engine restarted, connection cut): later waits ask the engine afresh.
      () => {
        lost = true;
        if (record.exit === exit) record.exit = undefined;
      },
    );
    // Attach before the start, so the live stream has every byte (see logs.ts).
    record.attach?.close();
    record.attach = undefined;
    try {
      const socket = await this.#call(ctx, where, (signal) => openAttach(this.#connection, record.name, signal));
      if (socket) record.attach = new PendingAttach(socket, this.#logStallMs);
    } catch (error) {
      if (ctx.signal.aborted) {
        controller.abort();
        throw error;
      }
      // The log file alone will do; the start tells whether the engine is there.
    }
    try {
      await this.#call(
        ctx,
        where,
        (signal) => this.#docker.getContainer(record.name).start({ abortSignal: signal }),
        undefined,
        (error) => {
          const status = statusOf(error);
          if (status === 304) return null; // already started
          if (status === 404 && /no such container/i.test(engineMessage(error))) return undefined;
          if (status !== undefined) return runtimeError('ContainerFailed', `the container could not be started: ${engineMessage(error)}`, where, error);
          return undefined;
        },
      );
    } catch (error) {
      controller.abort();
      record.waitController = undefined;
      record.attach?.close();
      record.attach = undefined;
      throw error;
    }
    if (!lost) record.exit = exit;
  }

  async inspectContainer(ctx: Context, container: Container): Promise<ContainerStatus> {
    const where = { operation: 'inspectContainer', subject: container.id };
    const info = await this.#call(ctx, where, (signal) => this.#docker.getContainer(this.#nameOf(container)).inspect({ abortSignal: signal }));
    const state = info.State;
    if (state.Running || state.Paused || state.Restarting) return { state: 'running' };
    if (state.Status === 'created') return { state: 'created' };
    const reason = state.OOMKilled ? 'OOMKilled' : state.Error ? state.Error : state.ExitCode === 0 ? 'Completed' : 'Error';
    return { state: 'exited', exitCode: state.ExitCode, reason };
  }

  async waitContainer(ctx: Context, container: Container): Promise<ContainerExit> {
    const where = { operation: 'waitContainer', subject: container.id };
    const record = this.#containers.get(container.id);
    const name = this.#nameOf(container);
    let statusCode: number;
    if (record?.exit) {
      const result = await this.#call(
        ctx,
        where,
        () => record.exit!,
        undefined,
        (error) =>
          isUnavailable(error)
            ? runtimeError(
                'Unavailable',
                `lost the Docker engine while waiting for the container to end: ${engineMessage(error)}. Was dockerd stopped or restarted? Check ${this.#engine.source}; the container's state is unknown (dockerd without live-restore stops containers when it restarts).`,
                where,
                error,
              )
            : undefined,
      );
      statusCode = result.StatusCode;
    } else {
      // Not started by this runtime (or the subscription is gone): ask the engine.
      const status = await this.inspectContainer(ctx, container).catch((error: unknown) => {
        throw error instanceof RuntimeError ? new RuntimeError(error.code, error.detail, { runtime: RUNTIME_NAME, ...where, cause: error }) : error;
      });
      if (status.state === 'exited') return { exitCode: status.exitCode ?? 0, ...(status.reason ? { reason: status.reason } : {}) };
      if (status.state === 'created') {
        throw runtimeError('ContainerFailed', 'the container was created but never started; call runContainer first', where);
      }
      const result = (await this.#call(ctx, where, (signal) => this.#docker.getContainer(name).wait({ condition: 'not-running', abortSignal: signal }))) as {
        StatusCode: number;
      };
      statusCode = result.StatusCode;
    }
    // Confirm with the engine: the exit code alone does not say OOM, and a dockerd that is shutting
    // down stops its containers (answering the wait) just before it goes away.
    let reason = statusCode === 0 ? 'Completed' : 'Error';
    try {
      const info = await this.#call(ctx, where, (signal) => this.#docker.getContainer(name).inspect({ abortSignal: signal }));
      if (info.State.OOMKilled) reason = 'OOMKilled';
    } catch (error) {
      if (ctx.signal.aborted) throw contextError(ctx, where, error);
      if (isRuntimeError(error, 'Unavailable')) {
        throw runtimeError(
          'Unavailable',
          `the Docker engine went away as the container ended (exit code ${statusCode}, which may come from dockerd stopping it while shutting down). Was dockerd stopped or restarted? Check ${this.#engine.source}.`,
          where,
          error,
        );
      }
      // NotFound: removed meanwhile; the exit code stands.
    }
    return { exitCode: statusCode, reason };
  }

  async tailContainer(ctx: Context, container: Container): Promise<Readable> {
    const where = { operation: 'tailContainer', subject: container.id };
    const record = this.#containers.get(container.id);
    const attach = record?.attach?.claim();
    if (record) record.attach = undefined;
    return tailLogs({
      ctx,
      where,
      connection: this.#connection,
      engine: this.#engine,
      handle: this.#docker.getContainer(this.#nameOf(container)),
      call: (c, w, fn) => this.#call(c, w, fn),
      attach,
      stallMs: this.#logStallMs,
    });
  }

  async removeContainer(ctx: Context, container: Container): Promise<void> {
    const where = { operation: 'removeContainer', subject: container.id };
    const name = this.#nameOf(container);
    const handle = this.#docker.getContainer(name);
    const graceSeconds = Math.ceil(this.#stopGraceMs / 1000);
    // SIGTERM, the grace, then SIGKILL: the engine's stop does exactly that. A container whose
    // exit we saw, or that this runtime never created, needs no stop.
    const record = this.#containers.get(container.id);
    if (record) await this.#creationsSettled(ctx, record.buildId);
    const mayRun = !record || (record.created && !record.exited);
    let gone = false;
    if (mayRun) {
      try {
        await this.#call(
          ctx,
          where,
          (signal) => handle.stop({ t: graceSeconds, abortSignal: signal }),
          undefined,
          (error) => (statusOf(error) === 304 ? null : undefined),
        );
      } catch (error) {
        if (!isRuntimeError(error, 'NotFound')) throw error;
        gone = true;
      }
    }
    if (!gone) await this.#forceRemoveContainer(ctx, where, name);
    this.#forget(container.id);
  }

  // ---- image -------------------------------------------------------------------------------

  async createImage(ctx: Context, container: Container): Promise<void> {
    const where = { operation: 'createImage', subject: container.id };
    const image = this.#resolve(container, where);
    await this.#pull(ctx, where, container, image, this.#containers.get(container.id)?.buildId ?? '');
  }

  async inspectImage(ctx: Context, container: Container): Promise<string> {
    const where = { operation: 'inspectImage', subject: container.id };
    const header = `$ docker image inspect ${container.image}\n`;
    if (container.pull === 'on_start') return `${header}skipped for container ${container.id} due to pull policy on_start\n`;
    const image = this.#resolve(container, where);
    const info = await this.#call(ctx, where, (signal) => this.#imageInspect(image.reference, signal), { 404: 'ImageNotFound' });
    const created = info.Created ? ` created ${info.Created}` : '';
    return `${header}${info.Id} ${image.reference} ${formatBytes(info.Size)}${created}\n`;
  }

  // ---- network -----------------------------------------------------------------------------

  async createNetwork(ctx: Context, build: Build): Promise<void> {
    const where = { operation: 'createNetwork', subject: build.id };
    await this.#call(
      ctx,
      where,
      this.#creation(build.id, () =>
        this.#docker.createNetwork({
          Name: engineName(build.id),
          Driver: 'bridge',
          CheckDuplicate: true,
          Labels: resourceLabels(this.#config.workerId, build.id),
        }),
      ),
    );
    this.#networks.add(build.id);
  }

  async inspectNetwork(ctx: Context, build: Build): Promise<string> {
    const where = { operation: 'inspectNetwork', subject: build.id };
    const name = engineName(build.id);
    const info = (await this.#call(ctx, where, (signal) =>
      (this.#docker.getNetwork(name) as unknown as InspectableWithSignal).inspect({ abortSignal: signal }),
    )) as { Id: string; Driver: string };
    return `$ docker network inspect ${name}\n${info.Id} (${info.Driver})\n`;
  }

  async removeNetwork(ctx: Context, build: Build): Promise<void> {
    await this.#creationsSettled(ctx, build.id);
    await this.#removeNetworkNamed(ctx, { operation: 'removeNetwork', subject: build.id }, engineName(build.id));
    this.#networks.delete(build.id);
  }

  // ---- volume ------------------------------------------------------------------------------

  async createVolume(ctx: Context, build: Build): Promise<void> {
    const where = { operation: 'createVolume', subject: build.id };
    await this.#call(
      ctx,
      where,
      this.#creation(build.id, () =>
        this.#docker.createVolume({ Name: engineName(build.id), Driver: 'local', Labels: resourceLabels(this.#config.workerId, build.id) }),
      ),
    );
    this.#volumes.add(build.id);
  }

  async inspectVolume(ctx: Context, build: Build): Promise<string> {
    const where = { operation: 'inspectVolume', subject: build.id };
    const name = engineName(build.id);
    const info = (await this.#call(ctx, where, (signal) => this.#docker.getVolume(name).inspect({ abortSignal: signal }))) as {
      Name: string;
      Driver: string;
      Mountpoint: string;
    };
    const mounted = this.#config.workspaceHostPath
      ? `unused: the host directory ${this.#config.workspaceHostPath} is mounted at ${this.#workspacePath} instead`
      : `mounted in containers at ${this.#workspacePath}`;
    return `$ docker volume inspect ${name}\n${info.Name} (${info.Driver}) at ${info.Mountpoint}, ${mounted}\n`;
  }

  async removeVolume(ctx: Context, build: Build): Promise<void> {
    await this.#creationsSettled(ctx, build.id);
    await this.#removeVolumeNamed(ctx, { operation: 'removeVolume', subject: build.id }, engineName(build.id));
    this.#volumes.delete(build.id);
    if (this.#outputs.has(build.id)) {
      await this.#removeVolumeNamed(ctx, { operation: 'removeVolume', subject: build.id }, outputsVolumeName(build.id));
      this.#outputs.delete(build.id);
    }
  }

  // ---- outputs -----------------------------------------------------------------------------

  /**
   * A volume of its own for the build's outputs, mounted at `/vela/outputs` in every container set
   * up afterwards. Vela mounts its build volume at `/vela` and has an outputs sidecar `mkdir
   * /vela/outputs` (go-vela/worker executor/linux/outputs.go create); a volume of its own needs no
   * sidecar and works whatever the workspace is (`berth exec` mounts the current directory instead).
   */
  async setupOutputs(ctx: Context, build: Build): Promise<void> {
    const where = { operation: 'setupOutputs', subject: build.id };
    await this.#call(
      ctx,
      where,
      this.#creation(build.id, () =>
        this.#docker.createVolume({ Name: outputsVolumeName(build.id), Driver: 'local', Labels: resourceLabels(this.#config.workerId, build.id) }),
      ),
    );
    this.#outputs.add(build.id);
  }

  /**
   * `GET /containers/{id}/archive?path=/vela/outputs/<name>` on a container of the build, running
   * or exited, as go-vela/worker runtime/docker/container.go PollOutputsContainer does on its
   * sidecar (CopyFromContainer; a missing file is no error; above MaxOutputsSize it fails).
   */
  async readOutput(ctx: Context, build: Build, container: Container, name: string): Promise<Uint8Array | undefined> {
    const where = { operation: 'readOutput', subject: container.id };
    if (!this.#outputs.has(build.id)) throw runtimeError('NotFound', 'the build has no outputs volume (setupOutputs was not called)', where);
    if (name.includes('/') || name === '' || name === '.' || name === '..') {
      throw runtimeError('InvalidConfig', `${JSON.stringify(name)} is not a file name in ${OUTPUTS_PATH}`, where);
    }
    const file = `${OUTPUTS_PATH}/${name}`;
    const found = await this.#call(
      ctx,
      where,
      async (signal) => {
        const stream = await this.#archive(this.#nameOf(container), file, signal);
        return readArchivedFile(stream, MAX_OUTPUT_FILE_BYTES);
      },
      undefined,
      (error) => (statusOf(error) === 404 && !/no such container/i.test(engineMessage(error)) ? null : undefined),
    );
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

  // ---- worker ------------------------------------------------------------------------------

  /**
   * The worker ids (`berth.dev/worker` label values) on the engine's containers, networks and
   * volumes that start with `prefix`, each once: the owners a caller may {@link reap}, e.g.
   * `berth exec` runs that died (`berth-exec-`).
   */
  async owners(ctx: Context, prefix: string): Promise<string[]> {
    const where = { operation: 'owners', subject: prefix };
    const filters = { label: [LABELS.worker] };
    const [containers, networks, volumes] = await Promise.all([
      this.#call(ctx, where, (signal) => this.#docker.listContainers({ all: true, filters, abortSignal: signal })),
      this.#call(ctx, where, (signal) => this.#docker.listNetworks({ filters, abortSignal: signal })),
      this.#call(ctx, where, (signal) => this.#docker.listVolumes({ filters, abortSignal: signal })),
    ]);
    const found = new Set<string>();
    for (const labels of [...containers.map((c) => c.Labels), ...networks.map((n) => n.Labels), ...(volumes.Volumes ?? []).map((v) => v.Labels)]) {
      const owner = labels?.[LABELS.worker];
      if (owner !== undefined && owner.startsWith(prefix)) found.add(owner);
    }
    return [...found].sort();
  }

  async reap(ctx: Context, owner: string, keep: ReadonlySet<string> = new Set()): Promise<ReapReport> {
    const where = { operation: 'reap', subject: owner };
    const kept = new Set([...keep].map((id) => labelValue(id)));
    const filters = { label: [`${LABELS.worker}=${labelValue(owner)}`] };
    const reaped = (labels: Record<string, string> | null | undefined): boolean => !kept.has(labels?.[LABELS.build] ?? '');
    const report: ReapReport = { containers: [], networks: [], volumes: [], pods: [] };

    const containers = await this.#call(ctx, where, (signal) => this.#docker.listContainers({ all: true, filters, abortSignal: signal }));
    for (const c of containers.filter((c) => reaped(c.Labels))) {
      await this.#forceRemoveContainer(ctx, where, c.Id);
      report.containers.push(c.Names[0]?.replace(/^\//, '') ?? c.Id);
    }
    const networks = await this.#call(ctx, where, (signal) => this.#docker.listNetworks({ filters, abortSignal: signal }));
    for (const n of networks.filter((n) => reaped(n.Labels))) {
      await this.#removeNetworkNamed(ctx, where, n.Id);
      report.networks.push(n.Name);
    }
    const volumes = await this.#call(ctx, where, (signal) => this.#docker.listVolumes({ filters, abortSignal: signal }));
    for (const v of (volumes.Volumes ?? []).filter((v) => reaped(v.Labels))) {
      await this.#removeVolumeNamed(ctx, where, v.Name);
      report.volumes.push(v.Name);
    }
    return report;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const id of [...this.#containers.keys()]) this.#forget(id);
    this.#connection.close();
    return Promise.resolve();
  }

  // ---- helpers -----------------------------------------------------------------------------

  /**
   * A create request that is not aborted with its caller's ctx: the caller still returns at once
   * when its ctx ends (engineCall races it), but the request goes on until the engine answers, and
   * the build's removals wait for that answer ({@link #creationsSettled}). An aborted create may
   * still be carried out by the engine after the client gave up, and then nothing would remove it.
   *
   * Gotcha: the request's socket outlives a cancelled call until the engine answers (a create is
   * short); the build's removal, bounded by its own ctx, is what waits for it.
   */
  #creation<T>(buildId: string, request: () => Promise<T>): () => Promise<T> {
    return () => {
      const work = request();
      let pending = this.#creating.get(buildId);
      if (!pending) {
        pending = new Set();
        this.#creating.set(buildId, pending);
      }
      const set = pending;
      const settled: Promise<void> = work.then(
        () => undefined,
        () => undefined,
      );
      set.add(settled);
      void settled.then(() => {
        set.delete(settled);
        if (set.size === 0 && this.#creating.get(buildId) === set) this.#creating.delete(buildId);
      });
      return work;
    };
  }

  /** Waits until the build's create requests still in the engine were answered, or ctx ends. */
  async #creationsSettled(ctx: Context, buildId: string): Promise<void> {
    const pending = this.#creating.get(buildId);
    if (!pending || pending.size === 0) return;
    await Promise.race([Promise.all(pending), ctx.done()]);
  }

  /** Removes a network by name or id; a missing one is not an error. */
  async #removeNetworkNamed(ctx: Context, where: Where, name: string): Promise<void> {
    await this.#call(
      ctx,
      where,
      (signal) => this.#docker.getNetwork(name).remove({ abortSignal: signal }),
      undefined,
      (error) => (statusOf(error) === 404 ? null : undefined),
    );
  }

  /** Removes a volume by name; a missing one is not an error. */
  async #removeVolumeNamed(ctx: Context, where: Where, name: string): Promise<void> {
    await this.#call(
      ctx,
      where,
      (signal) => this.#docker.getVolume(name).remove({ abortSignal: signal }),
      { 409: 'Internal' },
      (error) => (statusOf(error) === 404 ? null : undefined),
    );
  }

  async #forceRemoveContainer(ctx: Context, where: Where, name: string): Promise<void> {
    await this.#call(
      ctx,
      where,
      (signal) => this.#docker.getContainer(name).remove({ v: true, force: true, abortSignal: signal }),
      undefined,
      (error) => {
        const status = statusOf(error);
        if (status === 404) return null;
        if (status === 409 && /already in progress/i.test(engineMessage(error))) return null;
        return undefined;
      },
    );
  }

  /**
   * One engine call under ctx. `translate` sees raw engine errors first: it returns `null` to
   * swallow the error (the call then resolves with `undefined`), a RuntimeError to throw, or
   * `undefined` to fall back to the generic mapping.
   */
  async #call<T>(
    ctx: Context,
    where: Where,
    fn: (signal: AbortSignal) => Promise<T>,
    overrides?: Parameters<typeof engineCall>[4],
    translate?: (error: unknown) => RuntimeError | null | undefined,
  ): Promise<T> {
    if (this.#closed) throw runtimeError('Unavailable', 'the runtime was closed', where);
    if (!translate) return engineCall(ctx, where, this.#engine, fn, overrides);
    return engineCall(
      ctx,
      where,
      this.#engine,
      async (signal) => {
        try {
          return await fn(signal);
        } catch (error) {
          if (signal.aborted) throw error;
          const translated = translate(error);
          if (translated === null) return undefined as T;
          if (translated) throw translated;
          throw error;
        }
      },
      overrides,
    );
  }

  #buildFilter(buildId: string): string[] {
    return [`${LABELS.worker}=${labelValue(this.#config.workerId)}`, `${LABELS.build}=${labelValue(buildId)}`];
  }

  #nameOf(container: Container): string {
    return this.#containers.get(container.id)?.name ?? engineName(container.id);
  }

  #forget(id: string): void {
    const record = this.#containers.get(id);
    record?.waitController?.abort();
    record?.attach?.close();
    this.#containers.delete(id);
  }

  #resolve(container: Container, where: Where): ResolvedImage {
    try {
      return resolveImage(container.image);
    } catch (error) {
      throw runtimeError(
        'InvalidConfig',
        `image ${JSON.stringify(container.image)} is not a valid image reference: ${error instanceof Error ? error.message : String(error)}`,
        where,
        error,
      );
    }
  }

  #emit(event: RuntimeEvent): void {
    try {
      this.#config.onEvent?.(event);
    } catch {
      // onEvent must not throw; if it does, the build goes on.
    }
  }

  async #pull(ctx: Context, where: Where, container: Container, image: ResolvedImage, buildId: string): Promise<void> {
    this.#emit({ type: 'notice', buildId, containerId: container.id, reason: 'Pulling', message: `pulling image ${image.reference}` });
    await pullImage(ctx, this.#docker, this.#engine, where, image, (progress) =>
      this.#emit({
        type: 'pull',
        buildId,
        containerId: container.id,
        image: image.reference,
        status: progress.id ? `${progress.id}: ${progress.status}` : progress.status,
        ...(progress.current !== undefined ? { current: progress.current } : {}),
        ...(progress.total !== undefined ? { total: progress.total } : {}),
      }),
    );
  }

  /** `GET /containers/{name}/archive?path=…` as a stream (a tar archive), with the signal. */
  #archive(name: string, file: string, signal: AbortSignal): Promise<Readable> {
    return new Promise((resolve, reject) => {
      (this.#docker.modem as Dialer).dial(
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

  /** `GET /images/{name}/json` with the signal (dockerode's `Image.inspect` drops `abortSignal`). */
  #imageInspect(reference: string, signal: AbortSignal): Promise<{ Id: string; Size: number; Created?: string }> {
    return new Promise((resolve, reject) => {
      (this.#docker.modem as Dialer).dial(
        {
          path: `/images/${encodeURIComponent(reference)}/json`,
          method: 'GET',
          abortSignal: signal,
          statusCodes: { 200: true, 404: 'no such image', 500: 'server error' },
        },
        (error, data) => (error ? reject(error) : resolve(data as { Id: string; Size: number })),
      );
    });
  }

  /**
   * Opens `POST /containers/{name}/wait?condition=next-exit` and resolves once the engine answered
   * with its headers — which it sends only after the wait is registered — with a promise of the
   * exit. Starting the container after that cannot miss the exit.
   */
  #subscribeExit(name: string, signal: AbortSignal): Promise<{ exit: NonNullable<ContainerRecord['exit']> }> {
    return new Promise((resolve, reject) => {
      (this.#docker.modem as Dialer).dial(
        {
          path: `/containers/${encodeURIComponent(name)}/wait?`,
          method: 'POST',
          options: { condition: 'next-exit' },
          abortSignal: signal,
          isStream: true,
          statusCodes: { 200: true, 400: 'bad parameter', 404: 'no such container', 500: 'server error' },
        },
        (error, response) => {
          if (error) {
            reject(error);
            return;
          }
          const stream = response as Readable;
          // Wrapped: resolving with the promise itself would wait for the exit.
          resolve({ exit: readExit(stream, signal) });
        },
      );
    });
  }

  #createBody(container: Container, build: Build, image: ResolvedImage, where: Where): Record<string, unknown> {
    return containerCreateBody({
      container,
      build,
      image,
      where,
      workerId: this.#config.workerId,
      allowlist: this.#allowlist,
      privilegedImages: this.#config.privilegedImages ?? [],
      workspaceHostPath: this.#config.workspaceHostPath,
      workspacePath: this.#workspacePath,
      hasVolume: this.#volumes.has(build.id),
      hasOutputs: this.#outputs.has(build.id),
      joinsNetwork: this.#networks.has(build.id),
      limits: this.#limits,
      notice: (reason, message) => this.#emit({ type: 'notice', buildId: build.id, containerId: container.id, reason, message }),
    });
  }

  async #create(ctx: Context, where: Where, record: ContainerRecord): Promise<void> {
    const body = record.body;
    if (!body) return;
    // Split query and body, or dockerode sends every option in the query string too (issues 144, 721).
    const request = this.#creation(record.buildId, () =>
      this.#docker.createContainer({ _query: { name: record.name }, _body: body } as unknown as Docker.ContainerCreateOptions),
    );
    await this.#call(
      ctx,
      where,
      request,
      {
        404: 'ImageNotFound',
      },
      (error) => {
        const status = statusOf(error);
        const message = engineMessage(error);
        if (status === 404 && /no such image/i.test(message)) {
          return runtimeError('ImageNotFound', `image "${String(body.Image)}" not found locally (${message})`, where, error);
        }
        if (status === 409) return runtimeError('AlreadyExists', `a container named ${record.name} exists already: ${message}`, where, error);
        return undefined;
      },
    );
    record.created = true;
    record.body = undefined;
  }
}

function formatBytes(size: number | undefined): string {
  if (typeof size !== 'number') return '';
  if (size < 1024 * 1024) return `${(size / 1024).toFixed(1)} KiB`;
  return `${(size / (1024 * 1024)).toFixed(1)} MiB`;
}
