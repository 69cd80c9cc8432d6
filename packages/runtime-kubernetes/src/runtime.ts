import type { Readable } from 'node:stream';
import type { Context } from '@berth/context';
import type { Build, Container } from '@berth/pipeline';
import type { ContainerExit, ContainerStatus, ReapReport, Runtime, RuntimeConfig } from '@berth/runtime';
import { RUNTIME_NAME } from './errors.ts';
import type { KubeApi } from './kube-api.ts';
import type { ResolvedOptions } from './options.ts';
import * as builds from './runtime/build.ts';
import * as containers from './runtime/containers.ts';
import * as images from './runtime/images.ts';
import * as networksVolumes from './runtime/networks-volumes.ts';
import { type KubernetesRuntimeStats, type RuntimeParts, RuntimeState } from './runtime/state.ts';
import type { PodTracker } from './tracker/pod-tracker.ts';

export type { KubernetesRuntimeStats } from './runtime/state.ts';

/**
 * The Kubernetes runtime: one pod per build, every container started on the pause image and swapped
 * to its own image by `runContainer`; container state comes from the worker's pod watch, never from
 * per-step GETs.
 *
 * A facade: each resource group lives in a file of its own under runtime/, as go-vela/worker's
 * runtime/kubernetes does (build.ts, containers.ts, images.ts, networks-volumes.ts), acting on the
 * state this class owns (runtime/state.ts).
 */
export class KubernetesRuntime implements Runtime {
  readonly name = RUNTIME_NAME;
  readonly api: KubeApi;
  readonly options: ResolvedOptions;
  readonly config: RuntimeConfig;
  readonly podTracker: PodTracker;
  readonly stats: KubernetesRuntimeStats;
  readonly #s: RuntimeState;

  constructor(parts: RuntimeParts) {
    this.#s = new RuntimeState(parts);
    this.api = parts.api;
    this.options = parts.options;
    this.config = parts.config;
    this.podTracker = parts.podTracker;
    this.stats = this.#s.stats;
  }

  // ---- build -------------------------------------------------------------------------------

  inspectBuild(ctx: Context, build: Build): Promise<string> {
    return builds.inspectBuild(this.#s, ctx, build);
  }

  setupBuild(ctx: Context, build: Build): Promise<void> {
    return builds.setupBuild(this.#s, ctx, build);
  }

  assembleBuild(ctx: Context, build: Build): Promise<void> {
    return builds.assembleBuild(this.#s, ctx, build);
  }

  removeBuild(ctx: Context, build: Build): Promise<void> {
    return builds.removeBuild(this.#s, ctx, build);
  }

  // ---- container ---------------------------------------------------------------------------

  setupContainer(ctx: Context, container: Container, build: Build): Promise<void> {
    return containers.setupContainer(this.#s, ctx, container, build);
  }

  runContainer(ctx: Context, container: Container, build: Build): Promise<void> {
    return containers.runContainer(this.#s, ctx, container, build);
  }

  inspectContainer(ctx: Context, container: Container): Promise<ContainerStatus> {
    return containers.inspectContainer(this.#s, ctx, container);
  }

  waitContainer(ctx: Context, container: Container): Promise<ContainerExit> {
    return containers.waitContainer(this.#s, ctx, container);
  }

  tailContainer(ctx: Context, container: Container): Promise<Readable> {
    return containers.tailContainer(this.#s, ctx, container);
  }

  removeContainer(ctx: Context, container: Container): Promise<void> {
    return containers.removeContainer(this.#s, ctx, container);
  }

  // ---- image -------------------------------------------------------------------------------

  createImage(ctx: Context, container: Container): Promise<void> {
    return images.createImage(this.#s, ctx, container);
  }

  inspectImage(ctx: Context, container: Container): Promise<string> {
    return images.inspectImage(this.#s, ctx, container);
  }

  // ---- network and volume ------------------------------------------------------------------

  createNetwork(ctx: Context, build: Build): Promise<void> {
    return networksVolumes.createNetwork(this.#s, ctx, build);
  }

  inspectNetwork(ctx: Context, build: Build): Promise<string> {
    return networksVolumes.inspectNetwork(this.#s, ctx, build);
  }

  removeNetwork(ctx: Context, build: Build): Promise<void> {
    return networksVolumes.removeNetwork(this.#s, ctx, build);
  }

  createVolume(ctx: Context, build: Build): Promise<void> {
    return networksVolumes.createVolume(this.#s, ctx, build);
  }

  inspectVolume(ctx: Context, build: Build): Promise<string> {
    return networksVolumes.inspectVolume(this.#s, ctx, build);
  }

  removeVolume(ctx: Context, build: Build): Promise<void> {
    return networksVolumes.removeVolume(this.#s, ctx, build);
  }

  // ---- worker ------------------------------------------------------------------------------

  reap(ctx: Context, owner: string, keep: ReadonlySet<string> = new Set()): Promise<ReapReport> {
    return builds.reap(this.#s, ctx, owner, keep);
  }

  async close(): Promise<void> {
    const s = this.#s;
    if (s.closed) return;
    s.closed = true;
    s.podTracker.stop();
    for (const [id, state] of s.builds) s.forget(id, state);
    await s.api.close();
  }
}
