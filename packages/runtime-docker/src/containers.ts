/**
 * Containers (go-vela/worker runtime/docker/container.go): create, start with the exit subscribed
 * and the attach opened first, inspect, wait, tail, remove.
 */
import type { Duplex, Readable } from 'node:stream';
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
export async function setupContainer(
  s: RuntimeState,
  ctx: Context,
  container: Container,
  build: Build,
  shape: (body: Record<string, unknown>) => Record<string, unknown> = (body) => body,
  where: Where = { operation: 'setupContainer', subject: container.id },
): Promise<void> {
  const image = s.resolve(container, where);
  const body = shape(createBody(s, container, build, image, where));
  if (container.pull === 'always') await s.pull(ctx, where, container, image, build.id);
  const record: ContainerRecord = {
    name: engineName(container.id),
    buildId: build.id,
    body,
    mountsOutputs: s.outputs.has(build.id),
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
  if (record?.held !== undefined) return releaseContainer(s, ctx, container);
  if (!record) {
    const image = s.resolve(container, where);
    record = {
      name: engineName(container.id),
      buildId: build.id,
      body: createBody(s, container, build, image, where),
      mountsOutputs: s.outputs.has(build.id),
      created: false,
      exit: undefined,
      exited: false,
      waitController: undefined,
    };
    s.containers.set(container.id, record);
  }
  if (container.pull === 'on_start') await s.pull(ctx, where, container, s.resolve(container, where), build.id);
  if (!record.created) await create(s, ctx, where, record);

  await start(s, ctx, where, record, false);
}

/**
 * Subscribes to the exit, opens the attach (with stdin when `held`: the go signal goes there), then
 * starts the container. Without `held`, an attach that fails leaves the log to the log file; with
 * it, it fails the start (resolving `false`, nothing started): a held container needs its stdin.
 */
async function start(s: RuntimeState, ctx: Context, where: Where, record: ContainerRecord, held: boolean): Promise<boolean> {
  // Subscribe to the exit before starting (a container that ends at once is not missed; dockerode 582),
  // and attach (so that the live stream has every byte, see logs.ts): both at once, then the start.
  record.waitController?.abort();
  const controller = new AbortController();
  record.waitController = controller;
  record.attach?.close();
  record.attach = undefined;
  const stop = afterFunc(ctx, () => controller.abort(ctx.signal.reason));
  // The `die` event tells the exit before the wait does (exit-events.ts); the wait stays the fallback.
  const died = record.id === undefined ? undefined : s.exitEvents.exitOf(record.id, controller.signal);
  const [subscribed, attached] = await Promise.allSettled([
    s.call(ctx, where, () => subscribeExit(s, record.name, controller.signal)),
    s.call(ctx, where, (signal) => openAttach(s.connection, record.name, signal, held)),
    died && s.exitEvents.listen(controller.signal),
  ]);
  stop();
  if (subscribed.status === 'rejected' || (attached.status === 'rejected' && ctx.signal.aborted)) {
    controller.abort();
    if (attached.status === 'fulfilled') attached.value?.destroy();
    throw subscribed.status === 'rejected' ? subscribed.reason : (attached as PromiseRejectedResult).reason;
  }
  if (held && (attached.status === 'rejected' || attached.value === undefined)) {
    controller.abort();
    record.waitController = undefined;
    return false;
  }
  const exit = died ? Promise.race([subscribed.value.exit, died]) : subscribed.value.exit;
  // Answered by the wait alone (no event came, or not yet): the events need not be read for it any more.
  if (died) void exit.finally(() => s.exitEvents.forget(record.id!)).catch(() => undefined);
  // An attach that failed leaves the log file alone; the start tells whether the engine is there.
  if (attached.status === 'fulfilled' && attached.value) {
    record.attach = new PendingAttach(attached.value, s.logStallMs);
    if (held) record.held = attached.value as Duplex;
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
    record.held = undefined;
    throw error;
  }
  if (!lost) record.exit = exit;
  return true;
}

/**
 * What a held container runs before its command: it waits for one line on stdin (the go signal),
 * then gives its stdin up (`/dev/null`, what a container started without stdin has) and runs the
 * command. Stdin closed before a line came (the connection lost) ends it without running anything.
 */
const HOLD_PREFIX = 'read -r berth_go || exit 125; exec </dev/null; ';

/** Whether the container runs a shell script (`/bin/sh -c` and one command: a step with commands, as the executor made them). */
function holdable(container: Container): boolean {
  const [shell, flag, ...rest] = container.entrypoint;
  return shell === '/bin/sh' && flag === '-c' && rest.length === 0 && container.commands.length === 1 && container.pull !== 'on_start';
}

/**
 * Creates the container with its stdin open, its command behind {@link HOLD_PREFIX}, and starts it
 * with its exit subscribed and its attach (stdin, stdout, stderr) open (`Runtime.holdContainer`).
 * `false`, nothing left behind, when the container is not a shell script or the engine gave no attach.
 */
export async function holdContainer(s: RuntimeState, ctx: Context, container: Container, build: Build): Promise<boolean> {
  if (!holdable(container) || s.containers.get(container.id)?.created === true) return false;
  const where = { operation: 'holdContainer', subject: container.id };
  await setupContainer(s, ctx, container, build, holdBody, where);
  const record = s.containers.get(container.id);
  if (!record) throw runtimeError('NotFound', 'the container was removed while it was being held', where);
  if (await start(s, ctx, where, record, true)) return true;
  // No attach to send the go signal through: nothing held, nothing left.
  await s.forceRemoveContainer(ctx, where, record.name);
  s.forget(container.id);
  return false;
}

function holdBody(body: Record<string, unknown>): Record<string, unknown> {
  const [command] = body.Cmd as string[];
  return { ...body, Cmd: [`${HOLD_PREFIX}${command}`], AttachStdin: true, OpenStdin: true, StdinOnce: true };
}

/** Sends the go signal to the held container: a newline, then its stdin closed (`Runtime.releaseContainer`). */
export async function releaseContainer(s: RuntimeState, ctx: Context, container: Container): Promise<void> {
  const where = { operation: 'releaseContainer', subject: container.id };
  const record = s.containers.get(container.id);
  const stdin = record?.held;
  if (!record || !stdin) throw runtimeError('NotFound', 'the container is not held: hold it with holdContainer first', where);
  // Until the signal went out the container stays held: a removal then kills it without the grace.
  if (record.exited || stdin.destroyed || !stdin.writable) {
    throw runtimeError('ContainerFailed', 'the held container ended or lost its stdin before it was released, so it ran nothing; run the step again', where);
  }
  await s.call(
    ctx,
    where,
    () =>
      new Promise<void>((resolve, reject) => {
        stdin.write('\n', (error) => (error ? reject(error) : resolve()));
        stdin.end();
      }),
  );
  record.held = undefined;
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
    // Told by the `die` event, a success that nobody signalled needs no confirmation: an inspect
    // would wait for the engine's clean-up, the very time the event saves (exit-events.ts). One
    // that was signalled is confirmed as before: a dockerd shutting down stops its containers
    // (moby daemon/daemon.go `Shutdown` → `shutdownContainer` → `containerStop`, a `kill` event)
    // after it closed its listener but not the open connections (cmd/dockerd/daemon.go: the trap's
    // `cli.stop` → api/server `HTTPServer.Close` closes the listener only), so a step that exits
    // 0 on SIGTERM would read as a success; the inspect, on a new connection, finds the engine gone.
    if (result.oomKilled !== undefined && statusCode === 0 && result.killed === false) {
      return { exitCode: 0, reason: result.oomKilled ? 'OOMKilled' : 'Completed' };
    }
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
    bufferBytes: s.logBufferBytes,
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
  // A held container (never released) ran nothing of its own: killed at once by the forced removal.
  const mayRun = !record || (record.created && !record.exited && record.held === undefined);
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

/**
 * Whether the engine refused a create because another create filled the build's volume at the same
 * time. dockerd copies what the image (with the working directory it just made) holds at a volume's
 * mount point into the volume when the volume is empty, at create (moby daemon/create_unix.go
 * createContainerOSSpecificSettings → populateVolumes → container.CopyImagePathContent): two creates
 * at once on a fresh volume both find it empty and copy, and the later one fails on a directory the
 * other made, `500 failed to mkdir /var/lib/docker/volumes/<volume>/_data/src: … file exists`
 * (moby/moby#47021; 1 in 150 pairs of creates joining a network on dockerd 20.10 here). The engine
 * removed the container it could not create, and the volume is no longer empty: the same create
 * again goes through.
 */
function volumeCopyRace(error: unknown): boolean {
  return statusOf(error) === 500 && /failed to mkdir \S*\/_data\b.*file exists/i.test(engineMessage(error));
}

/** How many times a create refused by {@link volumeCopyRace} is sent again. */
const COPY_RACE_RETRIES = 2;

async function create(s: RuntimeState, ctx: Context, where: Where, record: ContainerRecord): Promise<void> {
  const body = record.body;
  if (!body) return;
  // Split query and body, or dockerode sends every option in the query string too (issues 144, 721).
  const request = s.creation(record.buildId, async () => {
    for (let attempt = 0; ; attempt++) {
      try {
        const created = await s.docker.createContainer({ _query: { name: record.name }, _body: body } as unknown as Docker.ContainerCreateOptions);
        record.id = created.id;
        return created;
      } catch (error) {
        if (!volumeCopyRace(error) || attempt >= COPY_RACE_RETRIES || ctx.signal.aborted) throw error;
      }
    }
  });
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
