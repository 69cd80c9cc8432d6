import type { Readable } from 'node:stream';
import { PatchStrategy, type V1Pod } from '@kubernetes/client-node';
import { background, type Context, sleep, withTimeout } from '@berth/context';
import type { Build, Container } from '@berth/pipeline';
import {
  type ContainerExit,
  type ContainerStatus,
  isRuntimeError,
  LABELS,
  labelValue,
  type ReapReport,
  type Runtime,
  type RuntimeConfig,
  type RuntimeError,
} from '@berth/runtime';
import { stringify as toYaml } from 'yaml';
import { contextError, RUNTIME_NAME, runtimeError, type Where } from './errors.ts';
import type { KubeApi } from './kube-api.ts';
import { followLogs, type FollowStats } from './log-follower.ts';
import type { ResolvedOptions } from './options.ts';
import { type AllowedVolume, BUILD_ID_ANNOTATION, imageOf, PlanError, PodPlan, podNameOf } from './pod-spec.ts';
import {
  parsePodsTemplate,
  type PipelinePodTemplate,
  PODS_TEMPLATE_GROUP,
  PODS_TEMPLATE_PLURAL,
  PODS_TEMPLATE_VERSION,
  PodsTemplateError,
} from './pods-template.ts';
import { BuildTracker } from './tracker/build-tracker.ts';
import type { ContainerTracker } from './tracker/container-tracker.ts';
import type { PodTracker } from './tracker/pod-tracker.ts';

interface BuildState {
  plan: PodPlan;
  tracker: BuildTracker;
  /** True once the pod create request went out (it may exist even if the call failed). */
  assembled: boolean;
  removing?: Promise<void>;
  /** Running containers whose stop was asked for and not yet sent (see #stopRunning). */
  stops: Set<ContainerTracker>;
  /** The request that stops the gathered containers, once the gathering is over. */
  stopping?: Promise<void>;
  /** The pod was deleted with the stop grace: nothing more runs in it. */
  deleted?: boolean;
}

/**
 * How long stops asked for together are gathered before one request carries them all:
 * destroyBuild removes every container at once, and their removals arrive within milliseconds.
 */
const STOP_GATHER_MS = 25;

/** What the runtime was created with. */
export interface RuntimeParts {
  api: KubeApi;
  options: ResolvedOptions;
  config: RuntimeConfig;
  podTracker: PodTracker;
  fileTemplate: PipelinePodTemplate;
  volumes: AllowedVolume[];
}

/** Counters for tests and the benchmark. */
export interface KubernetesRuntimeStats {
  logs: FollowStats;
}

/**
 * The Kubernetes runtime: one pod per build, every container started on the pause image and swapped
 * to its own image by `runContainer`; container state comes from the worker's pod watch, never from
 * per-step GETs.
 */
export class KubernetesRuntime implements Runtime {
  readonly name = RUNTIME_NAME;
  readonly api: KubeApi;
  readonly options: ResolvedOptions;
  readonly config: RuntimeConfig;
  readonly podTracker: PodTracker;
  readonly stats: KubernetesRuntimeStats = { logs: { requests: 0, resumes: 0, linesSkipped: 0 } };
  readonly #fileTemplate: PipelinePodTemplate;
  readonly #volumes: AllowedVolume[];
  readonly #builds = new Map<string, BuildState>();
  readonly #containers = new Map<string, BuildState>();
  #closed = false;

  constructor(parts: RuntimeParts) {
    this.api = parts.api;
    this.options = parts.options;
    this.config = parts.config;
    this.podTracker = parts.podTracker;
    this.#fileTemplate = parts.fileTemplate;
    this.#volumes = parts.volumes;
  }

  // ---- build -------------------------------------------------------------------------------

  async inspectBuild(ctx: Context, build: Build): Promise<string> {
    const where = { operation: 'inspectBuild', subject: build.id };
    this.#live(ctx, where);
    const state = this.#builds.get(build.id);
    if (!state) throw runtimeError('NotFound', `build ${build.id} was not set up`, where);
    return Promise.resolve(`> Inspecting pod for pipeline ${build.id}\n${state.plan.describe()}`);
  }

  async setupBuild(ctx: Context, build: Build): Promise<void> {
    const where = { operation: 'setupBuild', subject: build.id };
    this.#live(ctx, where);
    const template = this.options.podsTemplateName ? await this.#readTemplate(ctx, where, this.options.podsTemplateName) : this.#fileTemplate;
    this.#live(ctx, where);
    const previous = this.#builds.get(build.id);
    if (previous) this.#forget(build.id, previous);
    const timeoutMinutes = buildTimeoutMinutes(build) ?? this.options.buildTimeoutMinutes;
    const plan = new PodPlan(build, {
      namespace: this.api.namespace,
      workerId: this.config.workerId,
      pauseImage: this.options.pauseImage,
      workspacePath: this.config.workspacePath ?? '/vela',
      privilegedImages: this.config.privilegedImages ?? [],
      volumes: this.#volumes,
      stopGraceMs: this.config.stopGraceMs ?? 10_000,
      activeDeadlineSeconds: Math.ceil(timeoutMinutes * 60 + this.options.deadlineMarginMs / 1000),
      template,
    });
    const tracker = new BuildTracker({
      buildId: build.id,
      podName: plan.podName,
      pauseImage: this.options.pauseImage,
      pullGraceMs: this.options.pullGraceMs,
      pendingTimeoutMs: this.options.pendingTimeoutMs,
      onEvent: this.config.onEvent,
    });
    const state: BuildState = { plan, tracker, assembled: false, stops: new Set() };
    this.#builds.set(build.id, state);
    this.podTracker.attach(tracker);
    return Promise.resolve();
  }

  async assembleBuild(ctx: Context, build: Build): Promise<void> {
    const where = { operation: 'assembleBuild', subject: build.id };
    this.#live(ctx, where);
    const state = this.#state(build, where);
    if (state.assembled) return;
    let pod: V1Pod;
    try {
      pod = state.plan.toPod();
    } catch (error) {
      throw planError(error, where);
    }
    state.assembled = true;
    state.tracker.markCreating();
    const namespace = this.api.namespace;
    try {
      const created = await this.api.call(ctx, where, (options) => this.api.core.createNamespacedPod({ namespace, body: pod }, options), { retries: 2 });
      state.tracker.markCreated(created.metadata?.uid);
    } catch (error) {
      // A retried create whose first attempt went through answers AlreadyExists: adopt our own pod.
      if (!isRuntimeError(error, 'AlreadyExists')) throw error;
      const existing = await this.api.call(ctx, where, (options) => this.api.core.readNamespacedPod({ namespace, name: state.plan.podName }, options));
      if (
        existing.metadata?.annotations?.[BUILD_ID_ANNOTATION] !== build.id ||
        existing.metadata.labels?.[LABELS.worker] !== labelValue(this.config.workerId)
      ) {
        throw error;
      }
      state.tracker.markCreated(existing.metadata.uid);
    }
  }

  async removeBuild(ctx: Context, build: Build): Promise<void> {
    const where = { operation: 'removeBuild', subject: build.id };
    const state = this.#builds.get(build.id);
    if (ctx.signal.aborted) {
      await this.#deleteRegardless(where, build, state);
      throw rephraseContext(ctx, where);
    }
    if (state?.removing) return state.removing;
    const removal = this.#removeBuild(ctx, where, build, state);
    if (state) state.removing = removal;
    try {
      await removal;
    } catch (error) {
      if (!ctx.signal.aborted) throw error;
      await this.#deleteRegardless(where, build, state);
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
  async #deleteRegardless(where: Where, build: Build, state: BuildState | undefined): Promise<void> {
    if (state && !state.assembled) {
      this.#forget(build.id, state);
      return;
    }
    const [fresh, cancel] = withTimeout(background(), Math.min(this.options.requestTimeoutMs, 10_000));
    try {
      const name = state?.plan.podName ?? podNameOf(build.id);
      await this.api.call(fresh, where, (options) =>
        this.api.core.deleteNamespacedPod({ namespace: this.api.namespace, name, gracePeriodSeconds: 0, propagationPolicy: 'Background' }, options),
      );
    } catch {
      // NotFound is success; anything else is left to reap, as the rejection below says.
    } finally {
      cancel();
      if (state) this.#forget(build.id, state);
    }
  }

  async #removeBuild(ctx: Context, where: Where, build: Build, state: BuildState | undefined): Promise<void> {
    const podName = state?.plan.podName ?? podNameOf(build.id);
    if (state && !state.assembled) {
      this.#forget(build.id, state);
      return;
    }
    // Watch for the deletion before asking for it, so the delete event cannot be missed.
    let tracker = state?.tracker;
    let temporary = false;
    if (!tracker) {
      tracker = new BuildTracker({
        buildId: build.id,
        podName,
        pauseImage: this.options.pauseImage,
        pullGraceMs: this.options.pullGraceMs,
        pendingTimeoutMs: 2_147_483_647,
      });
      temporary = true;
      this.podTracker.attach(tracker);
    }
    const [bounded, cancel] = withTimeout(ctx, this.options.removeWaitMs);
    try {
      let deleted = true;
      try {
        await this.api.call(
          bounded,
          where,
          (options) =>
            this.api.core.deleteNamespacedPod(
              { namespace: this.api.namespace, name: podName, gracePeriodSeconds: 0, propagationPolicy: 'Background' },
              options,
            ),
          { retries: 3 },
        );
      } catch (error) {
        if (!isRuntimeError(error, 'NotFound')) throw error;
        deleted = false;
      }
      if (deleted && !tracker.gone) {
        // The tracker's delete event, when a watch covers the pod; else (another worker's pod, or
        // the benchmark's per-container mode, whose watches end with their containers) poll.
        const watched = this.podTracker.options.strategy !== 'container' && (state !== undefined || tracker.seen);
        if (watched) await tracker.waitGone(bounded, where);
        else await this.#pollGone(bounded, where, podName);
      }
    } catch (error) {
      if (isRuntimeError(error, 'Canceled', 'DeadlineExceeded') && !ctx.signal.aborted) {
        throw runtimeError(
          'DeadlineExceeded',
          `pod ${podName} was still there ${this.options.removeWaitMs} ms after its deletion; reap removes it later`,
          where,
          error,
        );
      }
      throw error;
    } finally {
      cancel();
      if (temporary) {
        this.podTracker.detach(tracker);
        tracker.dispose();
      }
      if (state) this.#forget(build.id, state);
    }
  }

  async #pollGone(ctx: Context, where: Where, podName: string): Promise<void> {
    for (;;) {
      try {
        await this.api.call(ctx, where, (options) => this.api.core.readNamespacedPod({ namespace: this.api.namespace, name: podName }, options));
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

  // ---- container ---------------------------------------------------------------------------

  async setupContainer(ctx: Context, container: Container, build: Build): Promise<void> {
    const where = { operation: 'setupContainer', subject: container.id };
    this.#live(ctx, where);
    const state = this.#state(build, where);
    if (state.assembled)
      throw runtimeError('InvalidConfig', `the pod of build ${build.id} exists already: Kubernetes cannot add container ${container.id} to it`, where);
    let name: string;
    try {
      name = state.plan.addContainer(container);
    } catch (error) {
      throw planError(error, where);
    }
    state.tracker.addContainer(container.id, name);
    this.#containers.set(container.id, state);
    return Promise.resolve();
  }

  async runContainer(ctx: Context, container: Container, build: Build): Promise<void> {
    const where = { operation: 'runContainer', subject: container.id };
    this.#live(ctx, where);
    const state = this.#state(build, where);
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
    this.podTracker.containerStarted(state.tracker, tracker);
    await this.#patchImage(ctx, where, state.plan.podName, tracker.name, image);
    // "Started" means running (or already over): wait for the kubelet to swap the image in.
    await tracker.until(ctx, where, () => tracker.started || tracker.finished);
    if (!tracker.started && tracker.failure) throw rephrase(tracker.failure, where);
  }

  async #patchImage(ctx: Context, where: Where, podName: string, containerName: string, image: string): Promise<void> {
    await this.#patchImages(ctx, where, podName, [containerName], image);
  }

  /** One strategic merge patch setting `image` on every container named. */
  async #patchImages(ctx: Context, where: Where, podName: string, containerNames: string[], image: string): Promise<void> {
    const body = { spec: { containers: containerNames.map((name) => ({ name, image })) } };
    await this.api.call(ctx, where, (options) => this.api.core.patchNamespacedPod({ namespace: this.api.namespace, name: podName, body }, options), {
      headers: { 'Content-Type': PatchStrategy.StrategicMergePatch },
      retries: 2,
    });
  }

  async inspectContainer(ctx: Context, container: Container): Promise<ContainerStatus> {
    const where = { operation: 'inspectContainer', subject: container.id };
    this.#live(ctx, where);
    const tracker = this.#container(container.id, where);
    return Promise.resolve(tracker.status());
  }

  async waitContainer(ctx: Context, container: Container): Promise<ContainerExit> {
    const where = { operation: 'waitContainer', subject: container.id };
    this.#live(ctx, where);
    const tracker = this.#container(container.id, where);
    await tracker.until(ctx, where, () => tracker.finished || tracker.removed);
    if (tracker.exit) return tracker.exit;
    if (tracker.failure) throw tracker.failure;
    throw runtimeError('NotFound', `container ${container.id} was removed before it ran`, where);
  }

  async tailContainer(ctx: Context, container: Container): Promise<Readable> {
    const where = { operation: 'tailContainer', subject: container.id };
    this.#live(ctx, where);
    const state = this.#containers.get(container.id);
    const tracker = this.#container(container.id, where);
    if (!state) throw runtimeError('NotFound', `container ${container.id} does not exist`, where);
    const build = state.tracker;
    return Promise.resolve(
      followLogs(
        ctx,
        where,
        {
          kc: this.api.kc,
          namespace: this.api.namespace,
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
        this.stats.logs,
      ),
    );
  }

  async removeContainer(ctx: Context, container: Container): Promise<void> {
    const where = { operation: 'removeContainer', subject: container.id };
    this.#live(ctx, where);
    const state = this.#containers.get(container.id);
    const tracker = state?.tracker.container(container.id);
    if (!state || !tracker || tracker.removed) return;
    if (tracker.phase === 'running' && !state.tracker.gone) {
      await this.#stopRunning(ctx, where, state, tracker);
      const graceMs = (this.config.stopGraceMs ?? 10_000) + 15_000;
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
    this.podTracker.containerDone(tracker);
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
  async #stopRunning(ctx: Context, where: Where, state: BuildState, tracker: ContainerTracker): Promise<void> {
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
        await this.#deletePod(ctx, where, state.plan.podName, Math.ceil((this.config.stopGraceMs ?? 10_000) / 1000));
      } else {
        await this.#patchImages(
          ctx,
          where,
          state.plan.podName,
          gathered.map((stopped) => stopped.name),
          this.options.pauseImage,
        );
      }
    })();
    await state.stopping;
  }

  async #deletePod(ctx: Context, where: Where, podName: string, gracePeriodSeconds: number): Promise<void> {
    try {
      await this.api.call(
        ctx,
        where,
        (options) =>
          this.api.core.deleteNamespacedPod({ namespace: this.api.namespace, name: podName, gracePeriodSeconds, propagationPolicy: 'Background' }, options),
        { retries: 2 },
      );
    } catch (error) {
      if (!isRuntimeError(error, 'NotFound')) throw error;
    }
  }

  // ---- image -------------------------------------------------------------------------------

  async createImage(ctx: Context, container: Container): Promise<void> {
    const where = { operation: 'createImage', subject: container.id };
    this.#live(ctx, where);
    try {
      imageOf(container);
    } catch (error) {
      throw planError(error, where);
    }
    // The kubelet pulls when the container starts (the pull policy is on the pod spec).
    return Promise.resolve();
  }

  async inspectImage(ctx: Context, container: Container): Promise<string> {
    const where = { operation: 'inspectImage', subject: container.id };
    this.#live(ctx, where);
    let image: string;
    try {
      image = imageOf(container);
    } catch (error) {
      throw planError(error, where);
    }
    const state = this.#containers.get(container.id);
    const name = state?.plan.containerName(container.id) ?? container.id;
    const podName = state?.plan.podName ?? '<pod>';
    return Promise.resolve(
      `$ kubectl get pod ${podName} -o=jsonpath='{.spec.containers[?(@.name=="${name}")].image}'\n${image} (pulled by the kubelet when the step starts, pull policy ${container.pull})\n`,
    );
  }

  // ---- network -----------------------------------------------------------------------------

  async createNetwork(ctx: Context, build: Build): Promise<void> {
    const where = { operation: 'createNetwork', subject: build.id };
    this.#live(ctx, where);
    this.#state(build, where).plan.addHostAliases(build);
    return Promise.resolve();
  }

  async inspectNetwork(ctx: Context, build: Build): Promise<string> {
    const where = { operation: 'inspectNetwork', subject: build.id };
    this.#live(ctx, where);
    const pod = this.#state(build, where).plan.toPod();
    return Promise.resolve(`$ kubectl get pod ${pod.metadata?.name} -o=jsonpath='{.spec.hostAliases}'\n${toYaml(pod.spec?.hostAliases ?? [])}`);
  }

  async removeNetwork(ctx: Context, build: Build): Promise<void> {
    this.#live(ctx, { operation: 'removeNetwork', subject: build.id });
    return Promise.resolve();
  }

  // ---- volume ------------------------------------------------------------------------------

  async createVolume(ctx: Context, build: Build): Promise<void> {
    const where = { operation: 'createVolume', subject: build.id };
    this.#live(ctx, where);
    this.#state(build, where).plan.addWorkspace();
    return Promise.resolve();
  }

  async inspectVolume(ctx: Context, build: Build): Promise<string> {
    const where = { operation: 'inspectVolume', subject: build.id };
    this.#live(ctx, where);
    const pod = this.#state(build, where).plan.toPod();
    return Promise.resolve(`$ kubectl get pod ${pod.metadata?.name} -o=jsonpath='{.spec.volumes}'\n${toYaml(pod.spec?.volumes ?? [])}`);
  }

  async removeVolume(ctx: Context, build: Build): Promise<void> {
    this.#live(ctx, { operation: 'removeVolume', subject: build.id });
    return Promise.resolve();
  }

  // ---- worker ------------------------------------------------------------------------------

  async reap(ctx: Context, owner: string, keep: ReadonlySet<string> = new Set()): Promise<ReapReport> {
    const where = { operation: 'reap', subject: owner };
    this.#live(ctx, where);
    const namespace = this.api.namespace;
    const labelSelector = `${LABELS.worker}=${labelValue(owner)}`;
    const keepLabels = new Set([...keep].map((id) => labelValue(id)));
    const list = await this.api.call(ctx, where, (options) => this.api.core.listNamespacedPod({ namespace, labelSelector }, options), { retries: 2 });
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
        await this.api.call(
          ctx,
          where,
          (options) => this.api.core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0, propagationPolicy: 'Background' }, options),
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
          const now = await this.api.call(bounded, where, (options) => this.api.core.listNamespacedPod({ namespace, labelSelector }, options));
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

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.podTracker.stop();
    for (const [id, state] of this.#builds) this.#forget(id, state);
    await this.api.close();
  }

  // ---- helpers -----------------------------------------------------------------------------

  #live(ctx: Context, where: Where): void {
    if (ctx.signal.aborted) throw contextError(ctx, where);
    if (this.#closed) throw runtimeError('Unavailable', 'the runtime was closed', where);
  }

  #state(build: Build, where: Where): BuildState {
    const state = this.#builds.get(build.id);
    if (!state) throw runtimeError('InvalidConfig', `build ${build.id} was not set up (call setupBuild first)`, where);
    return state;
  }

  #container(id: string, where: Where): ContainerTracker {
    const tracker = this.#containers.get(id)?.tracker.container(id);
    if (!tracker || tracker.removed) throw runtimeError('NotFound', `container ${id} does not exist`, where);
    return tracker;
  }

  #forget(buildId: string, state: BuildState): void {
    this.podTracker.detach(state.tracker);
    state.tracker.dispose();
    for (const { id } of state.plan.containers()) if (this.#containers.get(id) === state) this.#containers.delete(id);
    if (this.#builds.get(buildId) === state) this.#builds.delete(buildId);
  }

  async #readTemplate(ctx: Context, where: Where, name: string): Promise<PipelinePodTemplate> {
    const object = await this.api.call(
      ctx,
      where,
      (options) =>
        this.api.custom.getNamespacedCustomObject(
          { group: PODS_TEMPLATE_GROUP, version: PODS_TEMPLATE_VERSION, namespace: this.api.namespace, plural: PODS_TEMPLATE_PLURAL, name },
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
}

/** The build's timeout in minutes from its metadata (`metadata.timeout`), when it has one. */
function buildTimeoutMinutes(build: Build): number | undefined {
  const value = (build.metadata as Record<string, unknown> | null | undefined)?.['timeout'];
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : undefined;
}

function planError(error: unknown, where: Where): Error {
  if (error instanceof PlanError || error instanceof PodsTemplateError) return runtimeError('InvalidConfig', error.message, where, error);
  return error instanceof Error ? error : new Error(String(error));
}

/** The ctx's error for removeBuild, saying that the deletion was requested anyway. */
function rephraseContext(ctx: Context, where: Where): RuntimeError {
  const error = contextError(ctx, where);
  return runtimeError(error.code, `${error.detail}; the pod's deletion was requested anyway (reap removes it if it remains)`, where, error.cause);
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
