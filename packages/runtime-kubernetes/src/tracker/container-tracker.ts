/**
 * The state of one container of a build pod, as the pod watch reports it: whether the step's own
 * image is running yet, its exit, and why it waits.
 */
import type { V1ContainerStatus } from '@kubernetes/client-node';
import { type Context } from '@berth/context';
import { parseImageReference } from '@berth/pipeline';
import type { ContainerExit, ContainerStatus, RuntimeError, RuntimeErrorCode } from '@berth/runtime';
import { waitUntil } from './wait-until.ts';
import { runtimeError, type Where } from '../errors.ts';
import { failureCodeOf, imageNamedIn, pullReasonOfEvent, WAITING_REASONS } from '../pull-failures.ts';

/** Where a container is in its life. */
export type ContainerPhase = 'created' | 'starting' | 'running' | 'exited' | 'failed';

/** Compares two image references by their normalised form (`alpine` = `docker.io/library/alpine:latest`). */
export function sameImage(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined || b === undefined) return false;
  if (a === b) return true;
  const norm = (ref: string): string => {
    const parsed = parseImageReference(ref.replace(/^docker-pullable:\/\//, ''));
    return parsed.ok ? parsed.reference.normalized : ref;
  };
  return norm(a) === norm(b);
}

/** The digest (`sha256:…`) of an image reference or an `imageID` (`docker-pullable://x@sha256:…`, `sha256:…`), if it names one. */
function digestOf(value: string | undefined): string | undefined {
  return value === undefined ? undefined : /(sha256:[0-9a-f]{64})$/.exec(value)?.[1];
}

/** The id of the container instance a status describes now (running, terminated, or the status' own). */
function currentContainerId(status: V1ContainerStatus): string | undefined {
  return (status.state?.running ? status.containerID : (status.state?.terminated?.containerID ?? status.containerID)) || undefined;
}

/** How long a start failure seen in the pod status waits for the kubelet's event that says why. */
export const START_FAILURE_SETTLE_MS = 1_000;

/**
 * How long a start failure waits, at most, for the events list it sent when the apiserver answers
 * after {@link START_FAILURE_SETTLE_MS} (a list scans every event of the namespace: about 14 µs each).
 */
export const START_FAILURE_LIST_BOUND_MS = 5_000;

/** Settings of a {@link ContainerTracker}. */
export interface ContainerTrackerOptions {
  /** The pipeline container id. */
  id: string;
  /** Its name in the pod. */
  name: string;
  /** The pause image it starts on. */
  pauseImage: string;
  /** How long a pull failure (see the table) may last before the step fails. */
  pullGraceMs: number;
}

/**
 * Tracks one container. Statuses of the pause container (before `runContainer`, and the pause's own
 * exit when the kubelet swaps images) are told apart from the step's by image and restart count.
 *
 * Gotcha: every transition is one-way: once `exited` or `failed`, later statuses are ignored.
 */
export class ContainerTracker {
  readonly id: string;
  readonly name: string;
  readonly options: ContainerTrackerOptions;
  /** The step's image once `runContainer` asked for it. */
  image: string | undefined;
  /** When `runContainer` asked for the image (ms since epoch). */
  requestedAt: number | undefined;
  /** The latest status the pod reported for this container, pause or not. */
  latest: V1ContainerStatus | undefined;
  exit: ContainerExit | undefined;
  failure: RuntimeError | undefined;
  /** The current waiting reason and message of the step's image, if it waits. */
  waiting: { reason: string; message: string } | undefined;
  /** The last pull-failure message the kubelet's events gave about the step's image. */
  eventMessage: string | undefined;
  /** The waiting reason the last of those events stands for (`ErrImagePull`, `CreateContainerConfigError`, …). */
  eventReason: string | undefined;
  /** Set by removeContainer: the container no longer exists for the executor. */
  removed = false;
  #phase: ContainerPhase = 'created';
  #restartBaseline = 0;
  /** The restart count of the step's own container once seen running. */
  #stepRestartCount: number | undefined;
  /** The runtime's id of the step's own container instance, once a status of it carried one. */
  #stepContainerId: string | undefined;
  #graceTimer: NodeJS.Timeout | undefined;
  #graceReason: string | undefined;
  /** The imageID the pause container ran with, as the runtime reported it before the swap. */
  #pauseImageId: string | undefined;
  /** Set when the pause container terminated after the swap without a successor: the start failed. */
  #startFailure: { exitCode: number; restartCount: number } | undefined;
  #settleTimer: NodeJS.Timeout | undefined;
  /** True from a start failure until it fails the step (see {@link settling}). */
  #settling = false;
  /** The events list the settle waits for (see {@link settleAfter}). */
  #settleList: Promise<void> | undefined;
  readonly #listeners = new Set<() => void>();

  constructor(options: ContainerTrackerOptions) {
    this.options = options;
    this.id = options.id;
    this.name = options.name;
  }

  get phase(): ContainerPhase {
    return this.#phase;
  }

  /** True once the step's image runs or ran (logs of this container are the step's). */
  get started(): boolean {
    return this.#phase === 'running' || this.#phase === 'exited';
  }

  /**
   * True while a start failure waits for the kubelet's event that says why ({@link START_FAILURE_SETTLE_MS}):
   * the build tracker lists the pod's events meanwhile.
   */
  get settling(): boolean {
    return this.#settling;
  }

  /**
   * Makes a start failure's settle last until `list` (the events list sent for it) is fed, when that
   * comes after {@link START_FAILURE_SETTLE_MS}; the list's own bound ({@link START_FAILURE_LIST_BOUND_MS})
   * ends the wait for an apiserver that does not answer.
   */
  settleAfter(list: Promise<void>): void {
    this.#settleList = list;
  }

  /** True once exited or failed. */
  get finished(): boolean {
    return this.#phase === 'exited' || this.#phase === 'failed';
  }

  /**
   * True once the step's own container instance was replaced by another one (the pause image after
   * `removeContainer`): its log is then the previous instance's (`previous=true`), and the current
   * instance's log is not the step's. The kubelet serves `previous` from `lastState.terminated`
   * (pkg/kubelet/kubelet_pods.go, validateContainerLogStatus).
   */
  get replaced(): boolean {
    const latest = this.latest;
    if (!latest || !this.started) return false;
    const last = latest.lastState?.terminated;
    if (this.#stepContainerId !== undefined && last?.containerID) {
      return last.containerID === this.#stepContainerId && currentContainerId(latest) !== this.#stepContainerId;
    }
    return this.#stepRestartCount !== undefined && last !== undefined && (latest.restartCount ?? 0) > this.#stepRestartCount;
  }

  /** Records that `runContainer` swapped in `image`: from now on, statuses of that image are the step's. */
  markRequested(image: string, now = Date.now()): void {
    if (this.image !== undefined) return;
    this.image = image;
    this.requestedAt = now;
    this.#restartBaseline = this.latest?.restartCount ?? 0;
    if (this.latest?.imageID && sameImage(this.latest.image, this.options.pauseImage)) this.#pauseImageId = this.latest.imageID;
    if (this.#phase === 'created') this.#set('starting');
    else this.#notify();
  }

  /** True when `status` describes the step's image rather than the pause container. */
  isStepStatus(status: V1ContainerStatus): boolean {
    if (this.image === undefined) return false;
    const restarted = (status.restartCount ?? 0) > this.#restartBaseline;
    if (sameImage(this.image, this.options.pauseImage)) return restarted;
    // containerd reports status.image as the image record's first tag, or sha256:… when it has none
    // (a digest-pinned alpine@sha256:… can show as docker.io/library/alpine:3.19); imageID carries
    // the digest (pkg/kubelet/kuberuntime/kuberuntime_container.go, toKubeContainerStatus; issue 14).
    // So the pause is recognised by its name or by the imageID it ran with before the swap…
    if (this.#isPause(status)) return false;
    if (sameImage(status.image, this.image)) return true;
    const digest = digestOf(this.image);
    if (digest !== undefined && (digestOf(status.imageID) === digest || digestOf(status.image) === digest)) return true;
    // …and any other image is the step's once the kubelet created a new instance (a higher restart
    // count), or when it runs or ran: the pause instance itself never changes its image.
    return restarted || (status.state?.running !== undefined && status.image !== '' && status.image !== undefined);
  }

  #isPause(status: V1ContainerStatus): boolean {
    if (sameImage(status.image, this.options.pauseImage)) return true;
    return this.#pauseImageId !== undefined && status.imageID === this.#pauseImageId && (status.restartCount ?? 0) <= this.#restartBaseline;
  }

  /** Feeds the container's status from a pod update. */
  observe(status: V1ContainerStatus): void {
    this.latest = status;
    if (this.image === undefined && status.imageID && (status.state?.running || sameImage(status.image, this.options.pauseImage)))
      this.#pauseImageId = status.imageID;
    if (this.finished) return this.#notify();
    const previous = status.lastState?.terminated;
    if (this.#stepRestartCount !== undefined && previous && (status.restartCount ?? 0) > this.#stepRestartCount) {
      // The step's container ended and another took its place (the pause image, after removeContainer)
      // before a status showed the step terminated: its exit is in lastState.
      this.#clearGrace();
      this.waiting = undefined;
      this.#stepContainerId ??= previous.containerID || undefined;
      this.exit = previous.reason ? { exitCode: previous.exitCode, reason: previous.reason } : { exitCode: previous.exitCode };
      this.#set('exited');
      return;
    }
    if (!this.isStepStatus(status)) {
      if (this.#pauseEndedForGood(status)) this.#startFailed(status);
      return this.#notify();
    }
    this.#clearSettle();
    const state = status.state ?? {};
    if (state.running || state.terminated) this.#stepContainerId ??= (state.terminated?.containerID ?? status.containerID) || undefined;
    if (state.terminated) {
      this.#clearGrace();
      this.waiting = undefined;
      const { exitCode, reason } = state.terminated;
      this.exit = reason ? { exitCode, reason } : { exitCode };
      this.#set('exited');
      return;
    }
    if (state.running) {
      this.#stepRestartCount ??= status.restartCount ?? 0;
      this.#clearGrace();
      this.waiting = undefined;
      this.#set('running');
      return;
    }
    if (state.waiting) {
      const reason = state.waiting.reason ?? '';
      const message = state.waiting.message ?? '';
      this.waiting = { reason, message };
      const policy = WAITING_REASONS[reason];
      if (policy?.when === 'now') this.#failForReason(reason, message);
      else if (policy?.when === 'grace') this.#startGrace(reason);
      this.#notify();
      return;
    }
    this.#notify();
  }

  /**
   * Feeds a kubelet event about this container's pull or creation (reason `Failed`, `BackOff`, …).
   * Events are matched on the image their message names, not on their time (the node's clock is not
   * the worker's); an event that names none (`Error: ErrImagePull`, `Error: secret "x" not found`)
   * is the step's once its image was requested.
   */
  observePullEvent(reason: string, message: string): void {
    const named = imageNamedIn(message);
    if (this.image === undefined) return;
    if (named !== undefined && !sameImage(named, this.image) && named !== this.image) return;
    const waitingReason = pullReasonOfEvent(reason, message);
    if (waitingReason === undefined) return;
    // `Error: ErrImagePull` says less than the `Failed to pull image …` event before it.
    if (!/^Error: \w+$/.test(message) || this.eventMessage === undefined) this.eventMessage = message;
    if (!/^Error: \w+$/.test(message) || this.eventReason === undefined) this.eventReason = waitingReason;
    if (this.finished) return;
    if (this.#startFailure) this.#failStart();
    else if (waitingReason === 'InvalidImageName') this.#failForReason('InvalidImageName', message);
    else this.#startGrace(this.waiting?.reason ?? waitingReason);
    this.#notify();
  }

  /** Fails the container (if it has not finished) with `code` and `detail`. */
  fail(code: RuntimeErrorCode, detail: string, cause?: unknown): void {
    if (this.finished) return;
    this.#clearGrace();
    this.failure = runtimeError(code, detail, { operation: 'waitContainer', subject: this.id }, cause);
    this.#set('failed');
  }

  /** The state for `inspectContainer`. */
  status(): ContainerStatus {
    if (this.#phase === 'exited' && this.exit)
      return { state: 'exited', exitCode: this.exit.exitCode, ...(this.exit.reason ? { reason: this.exit.reason } : {}) };
    if (this.#phase === 'running') return { state: 'running' };
    const reason = this.failure ? (this.waiting?.reason ?? this.failure.code) : this.waiting?.reason;
    return reason ? { state: 'created', reason } : { state: 'created' };
  }

  /**
   * Resolves once `predicate()` holds (checked now and after every change); rejects with the ctx's
   * error when ctx ends first.
   */
  until(ctx: Context, where: Where, predicate: () => boolean): Promise<void> {
    return waitUntil(ctx, where, this.#listeners, predicate);
  }

  /** Calls `listener` after every change; returns the unsubscribe function. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Clears timers. */
  dispose(): void {
    this.#clearGrace();
    this.#clearSettle();
  }

  /**
   * True when `status` shows the container that held the place before the swap (the pause) terminated,
   * with no newer instance, after the step's image was requested. Under restartPolicy Never the kubelet
   * kills the pause to apply the new spec (kuberuntime_manager.go, computePodActions: "Restart regardless
   * of the restart policy because the container spec changed"); when the new image cannot be pulled or
   * created it does not try again (pkg/kubelet/container/helpers.go, ShouldContainerBeRestarted), and
   * convertToAPIContainerStatuses (pkg/kubelet/kubelet_pods.go) then shows no waiting reason either: the
   * terminated pause, restart count unchanged, is all the status will ever say.
   */
  #pauseEndedForGood(status: V1ContainerStatus): boolean {
    if (this.image === undefined || this.started || sameImage(this.image, this.options.pauseImage)) return false;
    return status.state?.terminated !== undefined && (status.restartCount ?? 0) <= this.#restartBaseline;
  }

  #startFailed(status: V1ContainerStatus): void {
    this.#startFailure ??= { exitCode: status.state?.terminated?.exitCode ?? 0, restartCount: status.restartCount ?? 0 };
    if (this.eventMessage !== undefined) return this.#failStart();
    // The kubelet's Warning event usually comes with it (events are listed apart from the pod): wait a
    // moment for its message, not for a retry that never comes. Its spam filter may have dropped it.
    if (this.#settling) return;
    this.#settling = true;
    this.#settleTimer = setTimeout(() => {
      this.#settleTimer = undefined;
      const list = this.#settleList;
      if (list === undefined) this.#failStart();
      // Disposed meanwhile (the build ended): nothing is left to fail.
      else void list.then(() => this.#settling && this.#failStart());
    }, START_FAILURE_SETTLE_MS);
  }

  #failStart(): void {
    this.#clearSettle();
    if (this.finished || !this.#startFailure) return;
    const reason = this.eventReason ?? this.waiting?.reason;
    const text = this.eventMessage ?? this.waiting?.message;
    const code = (reason && failureCodeOf(reason, text ?? '')) || 'ContainerFailed';
    const why = text
      ? `: ${reason ? `${reason}: ` : ''}${text}`
      : "; no kubelet event said why (its spam filter may have dropped it): check the image name and the pod's events";
    this.fail(
      code,
      `image ${JSON.stringify(this.image)} did not start: the kubelet stopped the pause container to start it, and under restartPolicy Never it does not try again (restart count still ${this.#startFailure.restartCount})${why}`,
    );
  }

  #clearSettle(): void {
    clearTimeout(this.#settleTimer);
    this.#settleTimer = undefined;
    this.#settling = false;
    this.#settleList = undefined;
  }

  #failForReason(reason: string, message: string): void {
    const code = failureCodeOf(reason, message || this.eventMessage || '') ?? 'ContainerFailed';
    const text = message || this.eventMessage || '(no message from the kubelet)';
    const detail =
      reason === 'InvalidImageName'
        ? `image ${JSON.stringify(this.image)} is not a valid reference (${reason}): ${text}`
        : `image ${JSON.stringify(this.image)} could not be started (${reason}) for ${Math.round(this.options.pullGraceMs / 100) / 10} s: ${text}`;
    this.fail(code, detail);
  }

  #startGrace(reason: string): void {
    this.#graceReason = reason;
    if (this.#graceTimer !== undefined || this.finished) return;
    this.#graceTimer = setTimeout(() => {
      this.#graceTimer = undefined;
      if (this.started || this.finished) return;
      const current =
        this.waiting?.reason && WAITING_REASONS[this.waiting.reason]
          ? this.waiting
          : { reason: this.#graceReason ?? this.eventReason ?? 'ErrImagePull', message: '' };
      this.#failForReason(current.reason, current.message || this.eventMessage || '');
    }, this.options.pullGraceMs);
  }

  #clearGrace(): void {
    clearTimeout(this.#graceTimer);
    this.#graceTimer = undefined;
  }

  #set(phase: ContainerPhase): void {
    this.#phase = phase;
    this.#notify();
  }

  #notify(): void {
    for (const listener of [...this.#listeners]) listener();
  }
}
