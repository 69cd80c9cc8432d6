/**
 * What the Kubernetes runtime keeps between calls, and the helpers every resource group uses: the
 * builds set up (their pod plan and tracker), which build each container belongs to, the checks
 * that a call may go on. The facade (runtime.ts) owns one; build.ts, containers.ts, images.ts and
 * networks-volumes.ts act on it.
 */
import type { Context } from '@berth/context';
import type { Build } from '@berth/pipeline';
import type { RuntimeConfig } from '@berth/runtime';
import { contextError, runtimeError, type Where } from '../errors.ts';
import type { KubeApi } from '../kube-api.ts';
import type { FollowStats } from '../log-follower.ts';
import type { ResolvedOptions } from '../options.ts';
import { type AllowedVolume, PlanError, type PodPlan } from '../pod-spec.ts';
import { type PipelinePodTemplate, PodsTemplateError } from '../pods-template.ts';
import type { BuildTracker } from '../tracker/build-tracker.ts';
import type { ContainerTracker } from '../tracker/container-tracker.ts';
import type { PodTracker } from '../tracker/pod-tracker.ts';

/** What the runtime keeps about a build between calls: its pod's plan and its tracker. */
export interface BuildState {
  plan: PodPlan;
  tracker: BuildTracker;
  /** True once the pod create request went out (it may exist even if the call failed). */
  assembled: boolean;
  removing?: Promise<void>;
  /** Running containers whose stop was asked for and not yet sent (see stopRunning in containers.ts). */
  stops: Set<ContainerTracker>;
  /** The request that stops the gathered containers, once the gathering is over. */
  stopping?: Promise<void>;
  /** The pod was deleted with the stop grace: nothing more runs in it. */
  deleted?: boolean;
}

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

/** The API, the configuration and the builds set up, shared by the resource groups. */
export class RuntimeState {
  readonly api: KubeApi;
  readonly options: ResolvedOptions;
  readonly config: RuntimeConfig;
  readonly podTracker: PodTracker;
  readonly stats: KubernetesRuntimeStats = { logs: { requests: 0, resumes: 0, linesSkipped: 0 } };
  readonly fileTemplate: PipelinePodTemplate;
  readonly volumes: AllowedVolume[];
  readonly builds = new Map<string, BuildState>();
  /** The build each set-up container belongs to, by container id. */
  readonly containers = new Map<string, BuildState>();
  closed = false;

  constructor(parts: RuntimeParts) {
    this.api = parts.api;
    this.options = parts.options;
    this.config = parts.config;
    this.podTracker = parts.podTracker;
    this.fileTemplate = parts.fileTemplate;
    this.volumes = parts.volumes;
  }

  /** Throws when the ctx is done or the runtime was closed. */
  live(ctx: Context, where: Where): void {
    if (ctx.signal.aborted) throw contextError(ctx, where);
    if (this.closed) throw runtimeError('Unavailable', 'the runtime was closed', where);
  }

  /** The build's state; `InvalidConfig` when it was not set up. */
  buildState(build: Build, where: Where): BuildState {
    const state = this.builds.get(build.id);
    if (!state) throw runtimeError('InvalidConfig', `build ${build.id} was not set up (call setupBuild first)`, where);
    return state;
  }

  /** The container's tracker; `NotFound` when it was not set up or was removed. */
  container(id: string, where: Where): ContainerTracker {
    const tracker = this.containers.get(id)?.tracker.container(id);
    if (!tracker || tracker.removed) throw runtimeError('NotFound', `container ${id} does not exist`, where);
    return tracker;
  }

  /** Drops the build and its containers: its tracker leaves the pod watch and is disposed. */
  forget(buildId: string, state: BuildState): void {
    this.podTracker.detach(state.tracker);
    state.tracker.dispose();
    for (const { id } of state.plan.containers()) if (this.containers.get(id) === state) this.containers.delete(id);
    if (this.builds.get(buildId) === state) this.builds.delete(buildId);
  }
}

/** A plan or template error as `InvalidConfig`; anything else as it is. */
export function planError(error: unknown, where: Where): Error {
  if (error instanceof PlanError || error instanceof PodsTemplateError) return runtimeError('InvalidConfig', error.message, where, error);
  return error instanceof Error ? error : new Error(String(error));
}
