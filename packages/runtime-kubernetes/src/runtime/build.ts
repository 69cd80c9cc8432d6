/**
 * The build as a whole (go-vela/worker runtime/kubernetes/build.go): its pod planned, created and
 * deleted; the worker's reaping by label.
 */
import { background, type Context, sleep, withTimeout } from '@berth/context';
import type { Build } from '@berth/pipeline';
import { isRuntimeError, LABELS, labelValue, type ReapReport, type RuntimeError } from '@berth/runtime';
import type { V1Pod } from '@kubernetes/client-node';
import { contextError, runtimeError, type Where } from '../errors.ts';
import { BUILD_ID_ANNOTATION, PodPlan, podNameOf } from '../pod-spec.ts';
import { parsePodsTemplate, type PipelinePodTemplate, PODS_TEMPLATE_GROUP, PODS_TEMPLATE_PLURAL, PODS_TEMPLATE_VERSION } from '../pods-template.ts';
import { BuildTracker } from '../tracker/build-tracker.ts';
import { type BuildState, planError, type RuntimeState } from './state.ts';

/** The build's pod as planned so far, as the init log shows it (`Runtime.inspectBuild`). */
export async function inspectBuild(s: RuntimeState, ctx: Context, build: Build): Promise<string> {
  const where = { operation: 'inspectBuild', subject: build.id };
  s.live(ctx, where);
  const state = s.builds.get(build.id);
  if (!state) throw runtimeError('NotFound', `build ${build.id} was not set up`, where);
  return Promise.resolve(`> Inspecting pod for pipeline ${build.id}\n${state.plan.describe()}`);
}

/**
 * Plans the build's pod (with the pods template of the file, or the custom resource read now) and
 * attaches its tracker to the pod watch (`Runtime.setupBuild`); a build set up again starts afresh.
 */
export async function setupBuild(s: RuntimeState, ctx: Context, build: Build): Promise<void> {
  const where = { operation: 'setupBuild', subject: build.id };
  s.live(ctx, where);
  const template = s.options.podsTemplateName ? await readTemplate(s, ctx, where, s.options.podsTemplateName) : s.fileTemplate;
  s.live(ctx, where);
  const previous = s.builds.get(build.id);
  if (previous) s.forget(build.id, previous);
  const timeoutMinutes = buildTimeoutMinutes(build) ?? s.options.buildTimeoutMinutes;
  const plan = new PodPlan(build, {
    namespace: s.api.namespace,
    workerId: s.config.workerId,
    pauseImage: s.options.pauseImage,
    workspacePath: s.config.workspacePath ?? '/vela',
    privilegedImages: s.config.privilegedImages ?? [],
    volumes: s.volumes,
    stopGraceMs: s.config.stopGraceMs ?? 10_000,
    activeDeadlineSeconds: Math.ceil(timeoutMinutes * 60 + s.options.deadlineMarginMs / 1000),
    template,
  });
  const tracker = new BuildTracker({
    buildId: build.id,
    podName: plan.podName,
    pauseImage: s.options.pauseImage,
    pullGraceMs: s.options.pullGraceMs,
    pendingTimeoutMs: s.options.pendingTimeoutMs,
    onEvent: s.config.onEvent,
  });
  const state: BuildState = { plan, tracker, assembled: false, stops: new Set() };
  s.builds.set(build.id, state);
  s.podTracker.attach(tracker);
  return Promise.resolve();
}

/** Creates the build's pod, every container on the pause image; adopts our own pod on a retried create (`Runtime.assembleBuild`). */
export async function assembleBuild(s: RuntimeState, ctx: Context, build: Build): Promise<void> {
  const where = { operation: 'assembleBuild', subject: build.id };
  s.live(ctx, where);
  const state = s.buildState(build, where);
  if (state.assembled) return;
  let pod: V1Pod;
  try {
    pod = state.plan.toPod();
  } catch (error) {
    throw planError(error, where);
  }
  state.assembled = true;
  state.tracker.markCreating();
  const namespace = s.api.namespace;
  try {
    const created = await s.api.call(ctx, where, (options) => s.api.core.createNamespacedPod({ namespace, body: pod }, options), { retries: 2 });
    state.tracker.markCreated(created.metadata?.uid);
  } catch (error) {
    // A retried create whose first attempt went through answers AlreadyExists: adopt our own pod.
    if (!isRuntimeError(error, 'AlreadyExists')) throw error;
    const existing = await s.api.call(ctx, where, (options) => s.api.core.readNamespacedPod({ namespace, name: state.plan.podName }, options));
    if (existing.metadata?.annotations?.[BUILD_ID_ANNOTATION] !== build.id || existing.metadata.labels?.[LABELS.worker] !== labelValue(s.config.workerId)) {
      throw error;
    }
    state.tracker.markCreated(existing.metadata.uid);
  }
}

/**
 * Deletes the build's pod and waits (bounded) until it is gone (`Runtime.removeBuild`); concurrent
 * removals share one. When the ctx is or becomes done, the deletion is still requested.
 */
export async function removeBuild(s: RuntimeState, ctx: Context, build: Build): Promise<void> {
  const where = { operation: 'removeBuild', subject: build.id };
  const state = s.builds.get(build.id);
  if (ctx.signal.aborted) {
    await deleteRegardless(s, where, build, state);
    throw rephraseContext(ctx, where);
  }
  if (state?.removing) return state.removing;
  const removal = removePod(s, ctx, where, build, state);
  if (state) state.removing = removal;
  try {
    await removal;
  } catch (error) {
    if (!ctx.signal.aborted) throw error;
    await deleteRegardless(s, where, build, state);
    throw rephraseContext(ctx, where);
  } finally {
    if (state) state.removing = undefined;
  }
}

/**
 * The pod's deletion when the destroy ctx already ran out (issue 14): a pod left behind keeps a
 * node's resources until its activeDeadlineSeconds, so the delete request is sent anyway, on a
 * fresh context bounded by one API call; whether the pod is gone is not awaited.
 */
async function deleteRegardless(s: RuntimeState, where: Where, build: Build, state: BuildState | undefined): Promise<void> {
  if (state && !state.assembled) {
    s.forget(build.id, state);
    return;
  }
  const [fresh, cancel] = withTimeout(background(), Math.min(s.options.requestTimeoutMs, 10_000));
  try {
    const name = state?.plan.podName ?? podNameOf(build.id);
    await s.api.call(fresh, where, (options) =>
      s.api.core.deleteNamespacedPod({ namespace: s.api.namespace, name, gracePeriodSeconds: 0, propagationPolicy: 'Background' }, options),
    );
  } catch {
    // NotFound is success; anything else is left to reap, as the rejection below says.
  } finally {
    cancel();
    if (state) s.forget(build.id, state);
  }
}

async function removePod(s: RuntimeState, ctx: Context, where: Where, build: Build, state: BuildState | undefined): Promise<void> {
  const podName = state?.plan.podName ?? podNameOf(build.id);
  if (state && !state.assembled) {
    s.forget(build.id, state);
    return;
  }
  // Watch for the deletion before asking for it, so the delete event cannot be missed.
  let tracker = state?.tracker;
  let temporary = false;
  if (!tracker) {
    tracker = new BuildTracker({
      buildId: build.id,
      podName,
      pauseImage: s.options.pauseImage,
      pullGraceMs: s.options.pullGraceMs,
      pendingTimeoutMs: 2_147_483_647,
    });
    temporary = true;
    s.podTracker.attach(tracker);
  }
  const [bounded, cancel] = withTimeout(ctx, s.options.removeWaitMs);
  try {
    let deleted = true;
    try {
      await s.api.call(
        bounded,
        where,
        (options) =>
          s.api.core.deleteNamespacedPod({ namespace: s.api.namespace, name: podName, gracePeriodSeconds: 0, propagationPolicy: 'Background' }, options),
        { retries: 3 },
      );
    } catch (error) {
      if (!isRuntimeError(error, 'NotFound')) throw error;
      deleted = false;
    }
    if (deleted && !tracker.gone) {
      // The tracker's delete event, when a watch covers the pod; else (another worker's pod, or
      // the benchmark's per-container mode, whose watches end with their containers) poll.
      const watched = s.podTracker.options.strategy !== 'container' && (state !== undefined || tracker.seen);
      if (watched) await tracker.waitGone(bounded, where);
      else await pollGone(s, bounded, where, podName);
    }
  } catch (error) {
    if (isRuntimeError(error, 'Canceled', 'DeadlineExceeded') && !ctx.signal.aborted) {
      throw runtimeError(
        'DeadlineExceeded',
        `pod ${podName} was still there ${s.options.removeWaitMs} ms after its deletion; reap removes it later`,
        where,
        error,
      );
    }
    throw error;
  } finally {
    cancel();
    if (temporary) {
      s.podTracker.detach(tracker);
      tracker.dispose();
    }
    if (state) s.forget(build.id, state);
  }
}

async function pollGone(s: RuntimeState, ctx: Context, where: Where, podName: string): Promise<void> {
  for (;;) {
    try {
      await s.api.call(ctx, where, (options) => s.api.core.readNamespacedPod({ namespace: s.api.namespace, name: podName }, options));
    } catch (error) {
      if (isRuntimeError(error, 'NotFound')) return;
      if (!isRuntimeError(error, 'Unavailable')) throw error;
    }
    try {
      await sleep(ctx, 250);
    } catch {
      throw contextError(ctx, where);
    }
  }
}

/** Deletes the owner's pods (by label) but those of the builds kept, and waits (bounded) until they are gone (`Runtime.reap`). */
export async function reap(s: RuntimeState, ctx: Context, owner: string, keep: ReadonlySet<string>): Promise<ReapReport> {
  const where = { operation: 'reap', subject: owner };
  s.live(ctx, where);
  const namespace = s.api.namespace;
  const labelSelector = `${LABELS.worker}=${labelValue(owner)}`;
  const keepLabels = new Set([...keep].map((id) => labelValue(id)));
  const list = await s.api.call(ctx, where, (options) => s.api.core.listNamespacedPod({ namespace, labelSelector }, options), { retries: 2 });
  const doomed = list.items.filter((pod) => {
    const id = pod.metadata?.annotations?.[BUILD_ID_ANNOTATION];
    const label = pod.metadata?.labels?.[LABELS.build];
    return !(id !== undefined && keep.has(id)) && !(label !== undefined && keepLabels.has(label));
  });
  const report: ReapReport = { containers: [], networks: [], volumes: [], pods: [] };
  for (const pod of doomed) {
    const name = pod.metadata?.name;
    if (!name) continue;
    try {
      await s.api.call(
        ctx,
        where,
        (options) => s.api.core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0, propagationPolicy: 'Background' }, options),
        {
          retries: 2,
        },
      );
    } catch (error) {
      if (!isRuntimeError(error, 'NotFound')) throw error;
      continue;
    }
    report.pods.push(name);
  }
  // Wait (bounded) until they are gone, so a reap that returns has really removed them.
  if (report.pods.length > 0) {
    const [bounded, cancel] = withTimeout(ctx, 15_000);
    try {
      for (;;) {
        const now = await s.api.call(bounded, where, (options) => s.api.core.listNamespacedPod({ namespace, labelSelector }, options));
        const left = new Set(now.items.map((pod) => pod.metadata?.name));
        if (!report.pods.some((name) => left.has(name))) break;
        await sleep(bounded, 200);
      }
    } catch (error) {
      if (ctx.signal.aborted) throw contextError(ctx, where);
      if (!isRuntimeError(error, 'DeadlineExceeded', 'Canceled') && !(error instanceof Error && error.name === 'DeadlineExceeded')) throw error;
    } finally {
      cancel();
    }
  }
  return report;
}

async function readTemplate(s: RuntimeState, ctx: Context, where: Where, name: string): Promise<PipelinePodTemplate> {
  const object = await s.api.call(
    ctx,
    where,
    (options) =>
      s.api.custom.getNamespacedCustomObject(
        { group: PODS_TEMPLATE_GROUP, version: PODS_TEMPLATE_VERSION, namespace: s.api.namespace, plural: PODS_TEMPLATE_PLURAL, name },
        options,
      ) as Promise<unknown>,
    { retries: 2 },
  );
  try {
    return parsePodsTemplate(object, `PipelinePodsTemplate ${name}`);
  } catch (error) {
    throw runtimeError('InvalidConfig', (error as Error).message, where, error);
  }
}

/** The build's timeout in minutes from its metadata (`metadata.timeout`), when it has one. */
function buildTimeoutMinutes(build: Build): number | undefined {
  const value = (build.metadata as Record<string, unknown> | null | undefined)?.['timeout'];
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : undefined;
}

/** The ctx's error for removeBuild, saying that the deletion was requested anyway. */
function rephraseContext(ctx: Context, where: Where): RuntimeError {
  const error = contextError(ctx, where);
  return runtimeError(error.code, `${error.detail}; the pod's deletion was requested anyway (reap removes it if it remains)`, where, error.cause);
}
