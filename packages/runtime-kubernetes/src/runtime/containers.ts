/**
 * The containers of a build's pod (go-vela/worker runtime/kubernetes/container.go): planned into
 * the pod, started by swapping the pause image for their own, watched, followed, stopped.
 */
import type { Readable } from 'node:stream';
import { PatchStrategy } from '@kubernetes/client-node';
import { type Context, withTimeout } from '@berth/context';
import type { Build, Container } from '@berth/pipeline';
import { type ContainerExit, type ContainerStatus, isRuntimeError, type RuntimeError } from '@berth/runtime';
import { runtimeError, type Where } from '../errors.ts';
import { followLogs } from '../log-follower.ts';
import { imageOf } from '../pod-spec.ts';
import type { ContainerTracker } from '../tracker/container-tracker.ts';
import { type BuildState, planError, type RuntimeState } from './state.ts';

/**
 * How long stops asked for together are gathered before one request carries them all:
 * destroyBuild removes every container at once, and their removals arrive within milliseconds.
 */
const STOP_GATHER_MS = 25;

/** Adds the container to the build's pod plan, on the pause image; the pod must not exist yet (`Runtime.setupContainer`). */
export async function setupContainer(s: RuntimeState, ctx: Context, container: Container, build: Build): Promise<void> {
  const where = { operation: 'setupContainer', subject: container.id };
  s.live(ctx, where);
  const state = s.buildState(build, where);
  if (state.assembled)
    throw runtimeError('InvalidConfig', `the pod of build ${build.id} exists already: Kubernetes cannot add container ${container.id} to it`, where);
  let name: string;
  try {
    name = state.plan.addContainer(container);
  } catch (error) {
    throw planError(error, where);
  }
  state.tracker.addContainer(container.id, name);
  s.containers.set(container.id, state);
  return Promise.resolve();
}

/** Swaps the container's own image in and waits until it runs or is over (`Runtime.runContainer`). */
export async function runContainer(s: RuntimeState, ctx: Context, container: Container, build: Build): Promise<void> {
  const where = { operation: 'runContainer', subject: container.id };
  s.live(ctx, where);
  const state = s.buildState(build, where);
  const tracker = state.tracker.container(container.id);
  if (!tracker) throw runtimeError('NotFound', `container ${container.id} was not set up`, where);
  if (!state.assembled) throw runtimeError('InvalidConfig', `build ${build.id} was not assembled: its pod does not exist yet`, where);
  let image: string;
  try {
    image = imageOf(container);
  } catch (error) {
    throw planError(error, where);
  }
  if (state.tracker.gone) throw runtimeError('ContainerFailed', state.tracker.failure ?? `pod ${state.plan.podName} is gone`, where);
  if (state.deleted) throw runtimeError('ContainerFailed', `pod ${state.plan.podName} is being deleted: its build was stopped`, where);
  if (tracker.failure) throw tracker.failure;
  tracker.markRequested(image);
  s.podTracker.containerStarted(state.tracker, tracker);
  await patchImage(s, ctx, where, state.plan.podName, tracker.name, image);
  // "Started" means running (or already over): wait for the kubelet to swap the image in.
  await tracker.until(ctx, where, () => tracker.started || tracker.finished);
  if (!tracker.started && tracker.failure) throw rephrase(tracker.failure, where);
}

async function patchImage(s: RuntimeState, ctx: Context, where: Where, podName: string, containerName: string, image: string): Promise<void> {
  await patchImages(s, ctx, where, podName, [containerName], image);
}

/** One strategic merge patch setting `image` on every container named. */
async function patchImages(s: RuntimeState, ctx: Context, where: Where, podName: string, containerNames: string[], image: string): Promise<void> {
  const body = { spec: { containers: containerNames.map((name) => ({ name, image })) } };
  await s.api.call(ctx, where, (options) => s.api.core.patchNamespacedPod({ namespace: s.api.namespace, name: podName, body }, options), {
    headers: { 'Content-Type': PatchStrategy.StrategicMergePatch },
    retries: 2,
  });
}

/** The container's state as the pod watch last saw it (`Runtime.inspectContainer`). */
export async function inspectContainer(s: RuntimeState, ctx: Context, container: Container): Promise<ContainerStatus> {
  const where = { operation: 'inspectContainer', subject: container.id };
  s.live(ctx, where);
  const tracker = s.container(container.id, where);
  return Promise.resolve(tracker.status());
}

/** Waits until the container is over, from the pod watch (`Runtime.waitContainer`). */
export async function waitContainer(s: RuntimeState, ctx: Context, container: Container): Promise<ContainerExit> {
  const where = { operation: 'waitContainer', subject: container.id };
  s.live(ctx, where);
  const tracker = s.container(container.id, where);
  await tracker.until(ctx, where, () => tracker.finished || tracker.removed);
  if (tracker.exit) return tracker.exit;
  if (tracker.failure) throw tracker.failure;
  throw runtimeError('NotFound', `container ${container.id} was removed before it ran`, where);
}

/** The container's log, followed across rotations and restarts until it is over (`Runtime.tailContainer`). */
export async function tailContainer(s: RuntimeState, ctx: Context, container: Container): Promise<Readable> {
  const where = { operation: 'tailContainer', subject: container.id };
  s.live(ctx, where);
  const state = s.containers.get(container.id);
  const tracker = s.container(container.id, where);
  if (!state) throw runtimeError('NotFound', `container ${container.id} does not exist`, where);
  const build = state.tracker;
  return Promise.resolve(
    followLogs(
      ctx,
      where,
      {
        kc: s.api.kc,
        namespace: s.api.namespace,
        podName: state.plan.podName,
        containerName: tracker.name,
        waitStarted: async () => {
          await tracker.until(ctx, where, () => tracker.started || tracker.finished);
          return tracker.started;
        },
        isFinished: () => tracker.finished,
        isGone: () => build.gone,
        waitFinished: (ms) => waitOrFinished(tracker, ms),
        isReplaced: () => tracker.replaced,
        onChange: (listener) => tracker.onChange(listener),
      },
      s.stats.logs,
    ),
  );
}

/** Stops the container if it runs (waiting, bounded, until it is over) and forgets it (`Runtime.removeContainer`). */
export async function removeContainer(s: RuntimeState, ctx: Context, container: Container): Promise<void> {
  const where = { operation: 'removeContainer', subject: container.id };
  s.live(ctx, where);
  const state = s.containers.get(container.id);
  const tracker = state?.tracker.container(container.id);
  if (!state || !tracker || tracker.removed) return;
  if (tracker.phase === 'running' && !state.tracker.gone) {
    await stopRunning(s, ctx, where, state, tracker);
    const graceMs = (s.config.stopGraceMs ?? 10_000) + 15_000;
    const [bounded, cancel] = withTimeout(ctx, graceMs);
    try {
      await tracker.until(bounded, where, () => tracker.finished || state.tracker.gone);
    } catch (error) {
      if (ctx.signal.aborted) throw error;
    } finally {
      cancel();
    }
  }
  tracker.fail('NotFound', `container ${container.id} was removed`);
  tracker.removed = true;
  s.podTracker.containerDone(tracker);
  tracker.dispose();
}

/**
 * Asks for a running container's stop. A container of a pod cannot be removed: it is stopped
 * by swapping the pause image back in (SIGTERM, SIGKILL after the grace; an idle pause
 * container stays), or by deleting the pod.
 *
 * The kubelet handles one pod's changes one at a time (kubernetes/kubernetes
 * pkg/kubelet/pod_workers.go: one podWorkerLoop per pod) and kills the containers a change
 * replaced one after another (pkg/kubelet/kuberuntime/kuberuntime_manager.go SyncPod, step 3),
 * each in its grace: N containers stopped by image patches take N graces. Deleting the pod
 * kills every container at once (killPodWithSyncResult → killContainersWithSyncResult, a
 * goroutine per container): one grace. So stops asked for together are gathered for
 * STOP_GATHER_MS; when nothing else in the pod is left to run (every other container ended,
 * was removed, or is being stopped too), the pod is deleted with the stop grace; otherwise one
 * patch swaps them all to the pause image.
 */
async function stopRunning(s: RuntimeState, ctx: Context, where: Where, state: BuildState, tracker: ContainerTracker): Promise<void> {
  state.stops.add(tracker);
  state.stopping ??= (async () => {
    await new Promise((resolve) => setTimeout(resolve, STOP_GATHER_MS));
    const gathered = [...state.stops];
    state.stops.clear();
    state.stopping = undefined;
    const idle = (other: ContainerTracker): boolean => other.finished || other.removed || gathered.includes(other);
    if (state.deleted) return;
    if (state.tracker.containers().every(idle)) {
      state.deleted = true;
      await deletePod(s, ctx, where, state.plan.podName, Math.ceil((s.config.stopGraceMs ?? 10_000) / 1000));
    } else {
      await patchImages(
        s,
        ctx,
        where,
        state.plan.podName,
        gathered.map((stopped) => stopped.name),
        s.options.pauseImage,
      );
    }
  })();
  await state.stopping;
}

async function deletePod(s: RuntimeState, ctx: Context, where: Where, podName: string, gracePeriodSeconds: number): Promise<void> {
  try {
    await s.api.call(
      ctx,
      where,
      (options) => s.api.core.deleteNamespacedPod({ namespace: s.api.namespace, name: podName, gracePeriodSeconds, propagationPolicy: 'Background' }, options),
      { retries: 2 },
    );
  } catch (error) {
    if (!isRuntimeError(error, 'NotFound')) throw error;
  }
}

/** The same failure, reported by another operation. */
function rephrase(error: RuntimeError, where: Where): RuntimeError {
  return runtimeError(error.code, error.detail, where, error.cause ?? error);
}

function waitOrFinished(tracker: ContainerTracker, ms: number): Promise<void> {
  if (tracker.finished) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    const unsubscribe = tracker.onChange(() => {
      if (tracker.finished) done();
    });
    function done(): void {
      clearTimeout(timer);
      unsubscribe();
      resolve();
    }
  });
}
