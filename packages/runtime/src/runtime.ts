import type { Readable } from 'node:stream';
import type { Context } from '@berth/context';
import type { Build, Container } from '@berth/pipeline';

/** What a container ended with. */
export interface ContainerExit {
  /** The process's exit code; 137 when it was killed (SIGKILL, OOM, stop after the grace). */
  exitCode: number;
  /** The engine's short reason when it gives one (`OOMKilled`, `Error`, `Completed`, `DeadlineExceeded`, …). */
  reason?: string;
}

/** What {@link Runtime.inspectContainer} reports. */
export interface ContainerStatus {
  /** `created` (not started), `running`, or `exited`. */
  state: 'created' | 'running' | 'exited';
  /** Set once `state` is `exited`. */
  exitCode?: number;
  /** The engine's reason, e.g. a waiting reason such as `ErrImagePull`. */
  reason?: string;
}

/**
 * Something a runtime noticed while working, for the step's log or the console:
 * pull progress, or an event from the orchestrator (a Kubernetes event, say).
 */
export type RuntimeEvent =
  | {
      type: 'pull';
      buildId: string;
      containerId: string;
      image: string;
      /** The engine's status line, e.g. `Pulling fs layer`, `Download complete`. */
      status: string;
      /** Bytes so far and in all, when known. */
      current?: number;
      total?: number;
    }
  | {
      type: 'notice';
      buildId: string;
      containerId: string;
      /** A short machine-readable reason, e.g. `Pulling`, `BackOff`, `Killing`. */
      reason: string;
      message: string;
    };

/** What {@link Runtime.reap} removed. */
export interface ReapReport {
  containers: string[];
  networks: string[];
  volumes: string[];
  /** Pods, for orchestrators that have them. */
  pods: string[];
}

/** Settings every runtime receives from the worker, whatever the plugin. */
export interface RuntimeConfig {
  /**
   * The worker's id. Every container, network, volume and pod the runtime creates carries it
   * (with the build id) in its labels, and {@link Runtime.reap} removes by it.
   */
  workerId: string;
  /**
   * Images allowed to run privileged, as Vela's `VELA_RUNTIME_PRIVILEGED_IMAGES`: familiar names
   * (`docker`, `target/vela-docker`), matched without tag unless the pattern has one.
   * A container asking for `privileged` with any other image runs unprivileged.
   */
  privilegedImages?: string[];
  /** Host paths steps may mount, as `src:dst[:ro|rw]` (read-only unless `rw`), Vela's `VELA_RUNTIME_VOLUMES`. */
  volumes?: string[];
  /** Where the build's workspace volume is mounted; `/vela` by default. */
  workspacePath?: string;
  /**
   * A host directory to mount as the workspace instead of a per-build volume (`berth exec` runs
   * a pipeline on the current directory). Runtimes that cannot mount host paths (Kubernetes)
   * reject it with `InvalidConfig` at create.
   */
  workspaceHostPath?: string;
  /** How long a stop waits after SIGTERM before SIGKILL; 10 000 ms by default. */
  stopGraceMs?: number;
  /** Receives pull progress and orchestrator notices. Must not throw; it is called synchronously. */
  onEvent?: (event: RuntimeEvent) => void;
}

/**
 * The contract between the executor and a container runtime (Docker, Kubernetes, …).
 *
 * It mirrors Vela's `runtime.Engine`, grouped by build, container, image, network and volume.
 * Every method takes a {@link Context} first. When that ctx is done (cancelled or past its
 * deadline) the method must settle promptly — within about a second — by rejecting with a
 * {@link RuntimeError} of code `Canceled` or `DeadlineExceeded`, having released whatever it
 * opened (sockets, watches, timers); it need not undo work the engine already finished.
 * Every failure is a {@link RuntimeError}: never a bare engine error, never an unhandled rejection.
 *
 * The executor calls, for one build: setupBuild → createNetwork → createVolume → (per container:
 * setupContainer → createImage when the pull policy asks → runContainer → tailContainer / waitContainer
 * → removeContainer) → assembleBuild after the init step is set up → removeVolume → removeNetwork → removeBuild.
 * A plugin that has no use for a step (Kubernetes has no networks) implements it as a no-op.
 */
export interface Runtime {
  /** The runtime's name, e.g. `docker`, `kubernetes`. */
  readonly name: string;
  /**
   * Optional (contract 1.3): true when {@link setupContainer} may be called at any time until the
   * build is removed — after {@link assembleBuild}, while other containers of the build run — each
   * container being set up on its own (Docker: one create per container). The executor then sets a
   * step's container up while the step before it runs, instead of every container before the
   * first step. Unset (Kubernetes: the pod holds every container), every container is set up
   * before {@link assembleBuild}.
   */
  readonly setupWhileRunning?: boolean;

  // ---- build -------------------------------------------------------------------------------

  /** A human-readable description of the build's resources, for the init step's log. On ctx done: reject `Canceled`/`DeadlineExceeded`. */
  inspectBuild(ctx: Context, build: Build): Promise<string>;
  /**
   * Prepares the build's resources that precede containers (Kubernetes: the pod spec and its tracker).
   * After it resolves, container events of this build are observed, whatever order the executor
   * calls the other methods in. On ctx done: reject, leaving nothing that {@link removeBuild} cannot remove.
   */
  setupBuild(ctx: Context, build: Build): Promise<void>;
  /**
   * Creates what every container of the build needs before any of them runs (Kubernetes: the pod,
   * with every container started on the pause image). Called once all containers were set up.
   * On ctx done: reject promptly; {@link removeBuild} must still clean up.
   */
  assembleBuild(ctx: Context, build: Build): Promise<void>;
  /**
   * Removes everything the build created (containers, network, volume, pod) and releases its
   * trackers, watches and timers. Idempotent; a missing resource is not an error.
   * It is called with a ctx that is not cancelled by the build's end (the destroy ctx) but has a
   * deadline of its own: on ctx done, reject `DeadlineExceeded` and leave what remains to {@link reap}.
   */
  removeBuild(ctx: Context, build: Build): Promise<void>;

  // ---- container ---------------------------------------------------------------------------

  /**
   * Creates the container (Docker) or adds it to the build's pod spec (Kubernetes), applying the
   * container's pull policy where it says so (`always`, `not_present`), with progress as `pull` events.
   * Rejects `ImageNotFound` (pull `never` and the image is missing), `InvalidConfig` (bad reference,
   * bad volume) or `ImagePullFailed`. On ctx done: reject promptly, also while pulling.
   */
  setupContainer(ctx: Context, container: Container, build: Build): Promise<void>;
  /**
   * Starts the container (pulling first for `on_start`). Resolves once it was started; it does
   * not wait for the end. May reject `ImageNotFound`, `ImagePullFailed`, `InvalidConfig`,
   * `ContainerFailed`. On ctx done: reject promptly; the container may be left for removal.
   */
  runContainer(ctx: Context, container: Container, build: Build): Promise<void>;
  /** The container's state now. Rejects `NotFound` when it does not exist. On ctx done: reject promptly. */
  inspectContainer(ctx: Context, container: Container): Promise<ContainerStatus>;
  /**
   * Resolves when the container has exited, with its exit code; rejects with the reason when it
   * cannot run (pull failure, eviction: `ImagePullFailed`, `ImageNotFound`, `ContainerFailed`, …)
   * — it never hangs on a container that will not start. On ctx done: reject `Canceled`/`DeadlineExceeded`
   * within a second, leaving the container running (stopping it is {@link removeContainer}'s job).
   */
  waitContainer(ctx: Context, container: Container): Promise<ContainerExit>;
  /**
   * The container's combined stdout and stderr, in order, as bytes, from its start; the stream
   * ends when the container has exited and every byte was delivered. Opened after the container
   * exited, it still returns everything. Backpressure is honoured: a slow reader slows the reading.
   * On ctx done: the stream is destroyed (an `error` of code `Canceled`/`DeadlineExceeded`), its socket released.
   */
  tailContainer(ctx: Context, container: Container): Promise<Readable>;
  /**
   * Stops the container if it runs (SIGTERM, then SIGKILL after the stop grace) and removes it
   * with its anonymous volumes. Idempotent: a container that is gone is not an error.
   * On ctx done: reject promptly; {@link removeBuild} or {@link reap} removes what is left.
   */
  removeContainer(ctx: Context, container: Container): Promise<void>;

  // ---- image -------------------------------------------------------------------------------

  /**
   * Pulls the container's image now, whatever its pull policy (the executor calls it for `always`
   * and `on_start` where Vela does). Rejects `ImagePullFailed`/`ImageNotFound`/`InvalidConfig`.
   * On ctx done: abort the pull and reject promptly.
   */
  createImage(ctx: Context, container: Container): Promise<void>;
  /**
   * A human-readable description of the image (id, size, created), for the init step's log.
   * Rejects `ImageNotFound` when it is not present. On ctx done: reject promptly.
   */
  inspectImage(ctx: Context, container: Container): Promise<string>;

  // ---- network -----------------------------------------------------------------------------

  /** Creates the build's network (Docker: a bridge named after the build). No-op where pods share one. On ctx done: reject promptly. */
  createNetwork(ctx: Context, build: Build): Promise<void>;
  /** A description of the build's network, for the init log. On ctx done: reject promptly. */
  inspectNetwork(ctx: Context, build: Build): Promise<string>;
  /** Removes the build's network. Idempotent. On ctx done: reject promptly. */
  removeNetwork(ctx: Context, build: Build): Promise<void>;

  // ---- volume ------------------------------------------------------------------------------

  /** Creates the build's workspace volume, mounted in every container at the workspace path. On ctx done: reject promptly. */
  createVolume(ctx: Context, build: Build): Promise<void>;
  /** A description of the build's workspace volume, for the init log. On ctx done: reject promptly. */
  inspectVolume(ctx: Context, build: Build): Promise<string>;
  /** Removes the build's workspace volume. Idempotent. On ctx done: reject promptly. */
  removeVolume(ctx: Context, build: Build): Promise<void>;

  // ---- outputs (optional capability) -------------------------------------------------------

  /**
   * Optional, with {@link readOutput}: the `outputs` capability (Vela's outputs, go-vela/worker
   * `executor/linux/outputs.go`). Makes {@link OUTPUTS_PATH} a directory shared by every container
   * of the build set up after this call, writable by steps. The executor calls it in planBuild,
   * after createVolume and before any setupContainer; {@link removeBuild} and {@link reap} must
   * remove whatever it created. On ctx done: reject promptly.
   *
   * A runtime without it runs builds without outputs; the executor refuses at build start a build
   * whose images need them (`${KEY}`), naming the steps.
   */
  setupOutputs?(ctx: Context, build: Build): Promise<void>;
  /**
   * Optional, with {@link setupOutputs}: the content of `OUTPUTS_PATH/<name>` as the build's
   * containers see it now, read through `container` — a container of the build that was run and
   * not removed (running or exited). Resolves `undefined` when the file does not exist. Rejects
   * `InvalidConfig` when the file is larger than {@link MAX_OUTPUT_FILE_BYTES} (Vela's
   * `MaxOutputsSize`), without reading it all. On ctx done: reject promptly.
   */
  readOutput?(ctx: Context, build: Build, container: Container, name: string): Promise<Uint8Array | undefined>;

  // ---- held start (optional capability) ----------------------------------------------------

  /**
   * Optional, with {@link releaseContainer}: the `heldStart` capability (contract 1.4). Sets the
   * container up as {@link setupContainer} does and starts it **held**: its process runs but does
   * not begin the container's command until {@link releaseContainer}, so that at release only a
   * signal is left (Docker: a create and a start, ~250 ms, move ahead of the step before it
   * ending). Until released, a held container writes nothing to its log, and {@link removeContainer}
   * kills and removes it at once (no stop grace: it ran nothing of its own).
   *
   * The executor calls it in place of setupContainer, for a step whose container runs a shell
   * script (entrypoint `['/bin/sh', '-c']` and one command: a step with `commands`, after the
   * executor made them its build script), not detached, its image present. Resolves `false`, having
   * created and started nothing, when this runtime cannot hold this container (another entrypoint,
   * an engine that cannot attach stdin): the executor then calls setupContainer and runContainer as
   * usual. Rejects as setupContainer and runContainer do (`ImageNotFound`, `InvalidConfig`,
   * `ContainerFailed`, …). On ctx done: reject promptly; what was created is removeContainer's.
   */
  holdContainer?(ctx: Context, container: Container, build: Build): Promise<boolean>;
  /**
   * Optional, with {@link holdContainer}: lets the held container's command begin (Docker: a newline
   * on its stdin, which is then closed; the command sees stdin at EOF, as a container started
   * without stdin does). From then on the container is as after {@link runContainer}: its log
   * ({@link tailContainer}) holds the command's whole output from its first byte, and
   * {@link waitContainer} its exit. Rejects `ContainerFailed` when the held container is gone or
   * ended before the release (it did not run the command), `NotFound` when it was never held.
   * On ctx done: reject promptly.
   */
  releaseContainer?(ctx: Context, container: Container): Promise<void>;

  // ---- worker ------------------------------------------------------------------------------

  /**
   * Removes every container, network, volume and pod labelled with worker id `owner` whose build
   * id is not in `keep` — what a crashed worker left behind. On ctx done: reject promptly with what
   * was removed so far lost (a later reap finishes the job).
   */
  reap(ctx: Context, owner: string, keep?: ReadonlySet<string>): Promise<ReapReport>;
  /** Releases the runtime's own resources (watches, sockets, agents). Idempotent. Builds must be removed first. */
  close(): Promise<void>;
}

/** Where steps write outputs, in every container of a build with outputs (Vela's fixed `/vela/outputs`). */
export const OUTPUTS_PATH = '/vela/outputs';

/** The largest output file {@link Runtime.readOutput} returns: 10 MiB, Vela's `MaxOutputsSize` (runtime/docker/docker.go). */
export const MAX_OUTPUT_FILE_BYTES = 10 * 1024 * 1024;

/** A runtime that offers the optional `outputs` capability ({@link Runtime.setupOutputs} and {@link Runtime.readOutput}). */
export type RuntimeWithOutputs = Runtime & Required<Pick<Runtime, 'setupOutputs' | 'readOutput'>>;

/** A runtime that offers the optional `heldStart` capability ({@link Runtime.holdContainer} and {@link Runtime.releaseContainer}). */
export type RuntimeWithHeldStart = Runtime & Required<Pick<Runtime, 'holdContainer' | 'releaseContainer'>>;

/** True when `runtime` offers the optional `heldStart` capability (both of its methods). */
export function supportsHeldStart(runtime: Runtime): runtime is RuntimeWithHeldStart {
  return typeof runtime.holdContainer === 'function' && typeof runtime.releaseContainer === 'function';
}

/** True when `runtime` offers the optional `outputs` capability (both of its methods). */
export function supportsOutputs(runtime: Runtime): runtime is RuntimeWithOutputs {
  return typeof runtime.setupOutputs === 'function' && typeof runtime.readOutput === 'function';
}
