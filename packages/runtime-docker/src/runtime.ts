import type { Readable } from 'node:stream';
import type { Context } from '@berth/context';
import type { Build, Container } from '@berth/pipeline';
import type { ContainerExit, ContainerStatus, ReapReport, Runtime, RuntimeConfig } from '@berth/runtime';
import * as builds from './build.ts';
import type { EngineConnection } from './connection.ts';
import * as containers from './containers.ts';
import type { ContainerLimits } from './container-spec.ts';
import { RUNTIME_NAME } from './errors.ts';
import * as images from './images.ts';
import { DEFAULT_LOG_BUFFER_BYTES, DEFAULT_LOG_STALL_MS } from './logs.ts';
import * as networksVolumes from './networks-volumes.ts';
import * as outputs from './outputs.ts';
import { RuntimeState } from './state.ts';
import type { AllowedVolume } from './volumes.ts';

export { type ContainerLimits, engineName } from './container-spec.ts';

/** The workspace mount point when the worker configures none (Vela's `/vela`). */
export const DEFAULT_WORKSPACE_PATH = '/vela';
/** SIGTERM to SIGKILL, when neither the worker nor the plugin options say otherwise. */
export const DEFAULT_STOP_GRACE_MS = 10_000;

/**
 * The Runtime contract on the Docker engine, as Vela's Docker runtime does it: one bridge network
 * and one volume per build, named after the build; one container per step or service, named after
 * its id, reachable on the network by its name.
 *
 * A facade: each resource group lives in a file of its own, as go-vela/worker's runtime/docker
 * does (build.ts, containers.ts, images.ts, networks-volumes.ts, outputs.ts; the log in logs.ts),
 * acting on the state this class owns (state.ts).
 */
export class DockerRuntime implements Runtime {
  readonly name = RUNTIME_NAME;
  /** Each container is one create of its own, possible until the build is removed (contract 1.3). */
  readonly setupWhileRunning = true;
  readonly #s: RuntimeState;

  /** Made by {@link dockerRuntime}'s `create`, once the engine answered its ping. */
  constructor(options: {
    connection: EngineConnection;
    config: RuntimeConfig;
    allowlist: readonly AllowedVolume[];
    limits: ContainerLimits;
    /** Unless `config.stopGraceMs` says it; default {@link DEFAULT_STOP_GRACE_MS}. */
    stopGraceMs?: number | undefined;
    logStallMs?: number | undefined;
    logBufferBytes?: number | undefined;
  }) {
    const { config } = options;
    this.#s = new RuntimeState({
      connection: options.connection,
      config,
      allowlist: options.allowlist,
      limits: options.limits,
      stopGraceMs: config.stopGraceMs ?? options.stopGraceMs ?? DEFAULT_STOP_GRACE_MS,
      logStallMs: options.logStallMs ?? DEFAULT_LOG_STALL_MS,
      logBufferBytes: options.logBufferBytes ?? DEFAULT_LOG_BUFFER_BYTES,
      workspacePath: config.workspacePath || DEFAULT_WORKSPACE_PATH,
    });
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

  /** See {@link containers.holdContainer} (the `heldStart` capability, contract 1.4). */
  holdContainer(ctx: Context, container: Container, build: Build): Promise<boolean> {
    return containers.holdContainer(this.#s, ctx, container, build);
  }

  /** See {@link containers.releaseContainer}. */
  releaseContainer(ctx: Context, container: Container): Promise<void> {
    return containers.releaseContainer(this.#s, ctx, container);
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

  // ---- outputs -----------------------------------------------------------------------------

  /** See {@link outputs.setupOutputs}. */
  setupOutputs(ctx: Context, build: Build): Promise<void> {
    return outputs.setupOutputs(this.#s, ctx, build);
  }

  /** See {@link outputs.readOutput}. */
  readOutput(ctx: Context, build: Build, container: Container, name: string): Promise<Uint8Array | undefined> {
    return outputs.readOutput(this.#s, ctx, build, container, name);
  }

  // ---- worker ------------------------------------------------------------------------------

  /**
   * The worker ids (`berth.dev/worker` label values) on the engine's containers, networks and
   * volumes that start with `prefix`, each once: the owners a caller may {@link reap}, e.g.
   * `berth exec` runs that died (`berth-exec-`).
   */
  owners(ctx: Context, prefix: string): Promise<string[]> {
    return builds.owners(this.#s, ctx, prefix);
  }

  reap(ctx: Context, owner: string, keep: ReadonlySet<string> = new Set()): Promise<ReapReport> {
    return builds.reap(this.#s, ctx, owner, keep);
  }

  async close(): Promise<void> {
    const s = this.#s;
    if (s.closed) return;
    s.closed = true;
    for (const id of [...s.containers.keys()]) s.forget(id);
    s.exitEvents.close();
    s.connection.close();
    return Promise.resolve();
  }
}
