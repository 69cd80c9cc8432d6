/**
 * Containers (go-vela/worker runtime/docker/container.go): create, start with the exit subscribed
 * and the attach opened first, inspect, wait, tail, remove.
 */
import type { Readable } from 'node:stream';
import { afterFunc, type Context } from '@berth/context';
import type { Build, Container } from '@berth/pipeline';
import { type ContainerExit, type ContainerStatus, isRuntimeError, RuntimeError } from '@berth/runtime';
import type Docker from 'dockerode';
import { containerCreateBody, engineName } from './container-spec.ts';
import { readExit } from './engine-answers.ts';
import { contextError, engineMessage, isUnavailable, RUNTIME_NAME, runtimeError, statusOf, type Where } from './errors.ts';
import type { ResolvedImage } from './image-ref.ts';
import { openAttach, PendingAttach, tailLogs } from './logs.ts';
import type { ContainerRecord, Dialer, RuntimeState } from './state.ts';

/** Creates the container, pulling as its policy says; with `on_start` runContainer creates it (`Runtime.setupContainer`). */
export async function setupContainer(s: RuntimeState, ctx: Context, container: Container, build: Build): Promise<void> {
  const where = { operation: 'setupContainer', subject: container.id };
  const image = s.resolve(container, where);
  const body = createBody(s, container, build, image, where);
  if (container.pull === 'always') await s.pull(ctx, where, container, image, build.id);
  const record: ContainerRecord = {
    name: engineName(container.id),
    buildId: build.id,
    body,
    created: false,
    exit: undefined,
    exited: false,
    waitController: undefined,
  };
  s.containers.set(container.id, record);
  // With on_start the image is pulled by runContainer, so the container is created there.
  if (container.pull === 'on_start') return;
  // Create first and look at the image only when the engine says it is missing: one call, not two.
  try {
    await create(s, ctx, where, record);
  } catch (error) {
    if (!isRuntimeError(error, 'ImageNotFound') || container.pull === 'always') throw error;
    if (container.pull === 'never') {
      throw runtimeError('ImageNotFound', `image "${image.reference}" not found locally and pull policy is "never"`, where, error);
    }
    await s.pull(ctx, where, container, image, build.id);
    await create(s, ctx, where, record);
  }
}

/** Subscribes to the exit, opens the attach, then starts the container (`Runtime.runContainer`). */
export async function runContainer(s: RuntimeState, ctx: Context, container: Container, build: Build): Promise<void> {
  const where = { operation: 'runContainer', subject: container.id };
  let record = s.containers.get(container.id);
  if (!record) {
    const image = s.resolve(container, where);
    record = {
      name: engineName(container.id),
      buildId: build.id,
      body: createBody(s, container, build, image, where),
      created: false,
      exit: undefined,
      exited: false,
      waitController: undefined,
    };
    s.containers.set(container.id, record);
  }
  if (container.pull === 'on_start') await s.pull(ctx, where, container, s.resolve(container, where), build.id);
  if (!record.created) await create(s, ctx, where, record);

  // Subscribe to the exit before starting (a container that ends at once is not missed; dockerode 582),
  // and attach (so that the live stream has every byte, see logs.ts): both at once, then the start.
  record.waitController?.abort();
  const controller = new AbortController();
  record.waitController = controller;
  record.attach?.close();
  record.attach = undefined;
  const stop = afterFunc(ctx, () => controller.abort(ctx.signal.reason));
  const [subscribed, attached] = await Promise.allSettled([
    s.call(ctx, where, () => subscribeExit(s, record.name, controller.signal)),
    s.call(ctx, where, (signal) => openAttach(s.connection, record.name, signal)),
  ]);
  stop();
  if (subscribed.status === 'rejected' || (attached.status === 'rejected' && ctx.signal.aborted)) {
    controller.abort();
    if (attached.status === 'fulfilled') attached.value?.destroy();
    throw subscribed.status === 'rejected' ? subscribed.reason : (attached as PromiseRejectedResult).reason;
  }
  const { exit } = subscribed.value;
  // An attach that failed leaves the log file alone; the start tells whether the engine is there.
  if (attached.status === 'fulfilled' && attached.value) record.attach = new PendingAttach(attached.value, s.logStallMs);
  let lost = false;
  exit.then(
    () => (record.exited = true),
    // Lost (engine restarted, connection cut): later waits ask the engine afresh.
    () => {
      lost = true;
      if (record.exit === exit) record.exit = undefined;
    },
  );
  try {
    await s.call(
      ctx,
      where,
      (signal) => s.docker.getContainer(record.name).start({ abortSignal: signal }),
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

/** The container's state now (`Runtime.inspectContainer`). */
export async function inspectContainer(s: RuntimeState, ctx: Context, container: Container): Promise<ContainerStatus> {
  const where = { operation: 'inspectContainer', subject: container.id };
  const info = await s.call(ctx, where, (signal) => s.docker.getContainer(s.nameOf(container)).inspect({ abortSignal: signal }));
  const state = info.State;
  if (state.Running || state.Paused || state.Restarting) return { state: 'running' };
  if (state.Status === 'created') return { state: 'created' };
  const reason = state.OOMKilled ? 'OOMKilled' : state.Error ? state.Error : state.ExitCode === 0 ? 'Completed' : 'Error';
  return { state: 'exited', exitCode: state.ExitCode, reason };
}

/** The container's exit, confirmed with an inspect (`Runtime.waitContainer`). */
export async function waitContainer(s: RuntimeState, ctx: Context, container: Container): Promise<ContainerExit> {
  const where = { operation: 'waitContainer', subject: container.id };
  const record = s.containers.get(container.id);
  const name = s.nameOf(container);
  let statusCode: number;
  if (record?.exit) {
    const result = await s.call(
      ctx,
      where,
      () => record.exit!,
      undefined,
      (error) =>
        isUnavailable(error)
          ? runtimeError(
              'Unavailable',
              `lost the Docker engine while waiting for the container to end: ${engineMessage(error)}. Was dockerd stopped or restarted? Check ${s.engine.source}; the container's state is unknown (dockerd without live-restore stops containers when it restarts).`,
              where,
              error,
            )
          : undefined,
    );
    statusCode = result.StatusCode;
  } else {
    // Not started by this runtime (or the subscription is gone): ask the engine.
    const status = await inspectContainer(s, ctx, container).catch((error: unknown) => {
      throw error instanceof RuntimeError ? new RuntimeError(error.code, error.detail, { runtime: RUNTIME_NAME, ...where, cause: error }) : error;
    });
    if (status.state === 'exited') return { exitCode: status.exitCode ?? 0, ...(status.reason ? { reason: status.reason } : {}) };
    if (status.state === 'created') {
      throw runtimeError('ContainerFailed', 'the container was created but never started; call runContainer first', where);
    }
    const result = (await s.call(ctx, where, (signal) => s.docker.getContainer(name).wait({ condition: 'not-running', abortSignal: signal }))) as {
      StatusCode: number;
    };
    statusCode = result.StatusCode;
  }
  // Confirm with the engine: the exit code alone does not say OOM, and a dockerd that is shutting
  // down stops its containers (answering the wait) just before it goes away.
  let reason = statusCode === 0 ? 'Completed' : 'Error';
  try {
    const info = await s.call(ctx, where, (signal) => s.docker.getContainer(name).inspect({ abortSignal: signal }));
    if (info.State.OOMKilled) reason = 'OOMKilled';
  } catch (error) {
    if (ctx.signal.aborted) throw contextError(ctx, where, error);
    if (isRuntimeError(error, 'Unavailable')) {
      throw runtimeError(
        'Unavailable',
        `the Docker engine went away as the container ended (exit code ${statusCode}, which may come from dockerd stopping it while shutting down). Was dockerd stopped or restarted? Check ${s.engine.source}.`,
        where,
        error,
      );
    }
    // NotFound: removed meanwhile; the exit code stands.
  }
  return { exitCode: statusCode, reason };
}

/** The container's log: its attach when runContainer opened one, else the engine's log file (`Runtime.tailContainer`; see logs.ts). */
export async function tailContainer(s: RuntimeState, ctx: Context, container: Container): Promise<Readable> {
  const where = { operation: 'tailContainer', subject: container.id };
  const record = s.containers.get(container.id);
  const attach = record?.attach?.claim();
  if (record) record.attach = undefined;
  return tailLogs({
    ctx,
    where,
    connection: s.connection,
    engine: s.engine,
    handle: s.docker.getContainer(s.nameOf(container)),
    call: (c, w, fn) => s.call(c, w, fn),
    attach,
    stallMs: s.logStallMs,
    running: () => record?.exited !== true,
  });
}

/** SIGTERM, the grace, SIGKILL, then removal with its anonymous volumes (`Runtime.removeContainer`). */
export async function removeContainer(s: RuntimeState, ctx: Context, container: Container): Promise<void> {
  const where = { operation: 'removeContainer', subject: container.id };
  const name = s.nameOf(container);
  const handle = s.docker.getContainer(name);
  const graceSeconds = Math.ceil(s.stopGraceMs / 1000);
  // SIGTERM, the grace, then SIGKILL: the engine's stop does exactly that. A container whose
  // exit we saw, or that this runtime never created, needs no stop.
  const record = s.containers.get(container.id);
  if (record) await s.creationsSettled(ctx, record.buildId);
  const mayRun = !record || (record.created && !record.exited);
  let gone = false;
  if (mayRun) {
    try {
      await s.call(
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
  if (!gone) await s.forceRemoveContainer(ctx, where, name);
  s.forget(container.id);
}

/**
 * Opens `POST /containers/{name}/wait?condition=next-exit` and resolves once the engine answered
 * with its headers — which it sends only after the wait is registered — with a promise of the
 * exit. Starting the container after that cannot miss the exit.
 */
function subscribeExit(s: RuntimeState, name: string, signal: AbortSignal): Promise<{ exit: NonNullable<ContainerRecord['exit']> }> {
  return new Promise((resolve, reject) => {
    (s.docker.modem as Dialer).dial(
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

function createBody(s: RuntimeState, container: Container, build: Build, image: ResolvedImage, where: Where): Record<string, unknown> {
  return containerCreateBody({
    container,
    build,
    image,
    where,
    workerId: s.config.workerId,
    allowlist: s.allowlist,
    privilegedImages: s.config.privilegedImages ?? [],
    workspaceHostPath: s.config.workspaceHostPath,
    workspacePath: s.workspacePath,
    hasVolume: s.volumes.has(build.id),
    hasOutputs: s.outputs.has(build.id),
    joinsNetwork: s.networks.has(build.id),
    limits: s.limits,
    notice: (reason, message) => s.emit({ type: 'notice', buildId: build.id, containerId: container.id, reason, message }),
  });
}

async function create(s: RuntimeState, ctx: Context, where: Where, record: ContainerRecord): Promise<void> {
  const body = record.body;
  if (!body) return;
  // Split query and body, or dockerode sends every option in the query string too (issues 144, 721).
  const request = s.creation(record.buildId, () =>
    s.docker.createContainer({ _query: { name: record.name }, _body: body } as unknown as Docker.ContainerCreateOptions),
  );
  await s.call(
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
