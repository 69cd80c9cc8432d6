// Starting a pod's containers as the kubelet does: one start at a time (image, create, start),
// waiting for the instance to end, restarting it when an image patch changed its spec, and
// deciding after a failed start whether and when to try again (back-off).

import type Docker from 'dockerode';
import { nowSeconds, type ContainerSpec, type ContainerState } from '../types.ts';
import { containerRequest } from './docker-spec.ts';
import { SerialQueue } from './image-puller.ts';
import { backoffMs, ensureImage, imageStatus } from './image-step.ts';
import { dockerSeconds, errorText, stopDocker } from './pod-docker.ts';
import { type ContainerRun, type PodState } from './pod-state.ts';
import { type StatusPublisher } from './pod-status.ts';

/** The outcome of one start attempt (image, create, start) of a container. */
type StartAttempt = { kind: 'started'; container: Docker.Container } | { kind: 'failed'; reason: string; message: string; backoff: boolean } | { kind: 'stop' };

/** Runs the containers of one pod: each container's start loop, and restarts after image patches. */
export class ContainerRunner {
  readonly #state: PodState;
  readonly #status: StatusPublisher;
  /** One start (image, create, start) at a time: SyncPod's ContainersToStart loop. */
  readonly #starts: SerialQueue;

  constructor(state: PodState, status: StatusPublisher) {
    this.#state = state;
    this.#status = status;
    this.#starts = new SerialQueue(!state.deps.behaviour.parallelStarts);
  }

  /** One start of a container, under the pod's start queue: image, create, start. */
  async #startAttempt(run: ContainerRun, spec: ContainerSpec): Promise<StartAttempt> {
    const state = this.#state;
    const { docker, instance } = state.deps;
    if (state.stopping || !state.sandbox) return { kind: 'stop' };
    const image = spec.image ?? '';
    // A container that never ran shows the spec's image; one that ran shows its instance's.
    if (!run.dockerId) run.image = image;
    const pulled = await ensureImage(state, run, spec);
    if (state.stopping) return { kind: 'stop' };
    if (!('local' in pulled)) return { kind: 'failed', ...pulled, backoff: true };
    if (state.stopping) return { kind: 'stop' };
    let container: Docker.Container;
    try {
      // The kubelet creates the container from the image id EnsureImageExists returned.
      const request = containerRequest(instance, state.pod, spec, pulled.local.id, state.sandbox.id, run.exited ? run.restartCount + 1 : run.restartCount);
      container = await docker.createContainer(request as unknown as Docker.ContainerCreateOptions);
    } catch (err) {
      const message = errorText(err);
      state.containerEvent(run, 'Warning', 'Failed', `Error: ${message}`);
      return { kind: 'failed', reason: 'CreateContainerError', message, backoff: true };
    }
    state.dockerIds.add(container.id);
    if (run.exited) {
      // The new instance exists: the old one becomes lastState and the restart count goes up
      // (kuberuntime_container.go startContainer: restartCount = previous status's + 1).
      run.lastState = { terminated: run.exited };
      run.restartCount++;
      run.exited = undefined;
      run.previousDockerId = run.dockerId;
    }
    run.dockerId = container.id;
    run.runningImage = image;
    Object.assign(run, imageStatus(state, spec, pulled.local));
    state.containerEvent(run, 'Normal', 'Created', `Created container: ${run.name}`);
    if (state.stopping) return { kind: 'stop' };
    try {
      await container.start();
    } catch (err) {
      const message = errorText(err);
      const now = nowSeconds();
      run.restarting = false;
      run.state = {
        terminated: {
          exitCode: 128,
          reason: 'StartError',
          message,
          startedAt: '1970-01-01T00:00:00Z',
          finishedAt: now,
          containerID: `docker://${container.id}`,
        },
      };
      state.containerEvent(run, 'Warning', 'Failed', `Error: ${message}`);
      this.#status.publish();
      return { kind: 'stop' };
    }
    state.containerEvent(run, 'Normal', 'Started', `Started container ${run.name}`);
    const started = await container.inspect().catch(() => undefined);
    run.restarting = false;
    run.state = { running: { startedAt: dockerSeconds(started?.State.StartedAt) ?? nowSeconds() } };
    this.#status.publish();
    state.synced();
    return { kind: 'started', container };
  }

  /**
   * A start that failed. Whether the kubelet tries again is ShouldContainerBeRestarted's call
   * (kubernetes/kubernetes pkg/kubelet/container/helpers.go): a container that never ran is
   * always retried (back-off: ErrImagePull, then ImagePullBackOff); one that ran before — the
   * pause container an image patch replaced — is not retried under restartPolicy Never, and
   * its status stays that terminated instance (pause image, old restart count): the waiting
   * reason is only shown for containers that will be restarted
   * (pkg/kubelet/kubelet_pods.go convertToAPIContainerStatuses, reasonCache). Only the
   * events say why. Resolves true when the caller should try again.
   */
  async #startFailed(run: ContainerRun, failure: { reason: string; message: string }): Promise<boolean> {
    const state = this.#state;
    const { behaviour } = state.deps;
    const ranBefore = run.exited !== undefined;
    if (ranBefore && state.pod.spec.restartPolicy === 'Never' && !behaviour.retryFailedImageSwitch) {
      run.state = { terminated: run.exited ?? { exitCode: 0, reason: 'Completed' } };
      run.exited = undefined;
      run.restarting = false;
      this.#status.publish();
      return false;
    }
    if (ranBefore) {
      run.lastState = { terminated: run.exited ?? { exitCode: 0, reason: 'Completed' } };
      run.restarting = false;
    }
    run.pullFailures++;
    run.state = { waiting: { reason: failure.reason, message: failure.message } };
    this.#status.publishNow(run);
    const wait = backoffMs(state, run);
    if (failure.reason === 'ErrImagePull') {
      // The next sync finds the image in back-off: ImagePullBackOff
      // (pkg/kubelet/images/image_manager.go EnsureImageExists, "Back-off pulling image"). The
      // event says only that; the waiting message wraps the pull's error as it was stored
      // (prevPullErrMsg: "<reason>: <message>").
      const first = Math.min(1000, Math.floor(wait / 2));
      if (!(await this.#sleep(run, first))) return true;
      const image = state.spec(run.name)?.image ?? '';
      const backOff = `Back-off pulling image "${image}"`;
      run.state = { waiting: { reason: 'ImagePullBackOff', message: `${backOff}: ${failure.reason}: ${failure.message}` } };
      state.containerEvent(run, 'Normal', 'BackOff', backOff);
      state.containerEvent(run, 'Warning', 'Failed', 'Error: ImagePullBackOff');
      this.#status.publishNow(run);
      await this.#sleep(run, wait - first);
    } else {
      await this.#sleep(run, wait);
    }
    return true;
  }

  /** A container's start loop: starts it, again after a failed start or an image switch, until it ends for good or the pod stops. */
  async run(run: ContainerRun): Promise<void> {
    const state = this.#state;
    while (!state.stopping && !state.destroyed) {
      await state.waitUnstalled();
      const spec = state.spec(run.name);
      if (!spec || state.stopping || !state.sandbox) return;
      const attempt = await this.#starts.run(() => this.#startAttempt(run, spec));
      if (attempt.kind === 'stop') {
        // Stopped between the old instance's exit and the new one's creation: that exit is final.
        if (run.exited && !run.state.terminated) {
          run.state = { terminated: run.exited };
          run.exited = undefined;
          run.restarting = false;
        }
        return;
      }
      if (attempt.kind === 'failed') {
        if (await this.#startFailed(run, attempt)) continue;
        return;
      }
      run.pullFailures = 0;
      const { container } = attempt;
      if (state.stopping) await stopDocker(state.deps.docker, container.id, state.pod.metadata.deletionGracePeriodSeconds ?? 0);
      await container.wait().catch(() => undefined);
      const ended = await container.inspect().catch(() => undefined);
      const exitCode = ended?.State.ExitCode ?? 137;
      const terminated: NonNullable<ContainerState['terminated']> = {
        exitCode,
        reason: ended?.State.OOMKilled ? 'OOMKilled' : exitCode === 0 ? 'Completed' : 'Error',
        startedAt: dockerSeconds(ended?.State.StartedAt),
        finishedAt: dockerSeconds(ended?.State.FinishedAt) ?? nowSeconds(),
        containerID: `docker://${container.id}`,
      };
      if (ended?.State.Error) terminated.message = ended.State.Error;
      if (run.restarting && !state.stopping) {
        if (state.deps.behaviour.retryFailedImageSwitch) {
          // Lenient: the old instance becomes lastState at once, and any failure is retried.
          run.lastState = { terminated };
          run.restartCount++;
          run.restarting = false;
          run.previousDockerId = run.dockerId;
          run.dockerId = undefined;
          run.state = { waiting: { reason: 'ContainerCreating' } };
          continue;
        }
        // The kill and the start happen in one sync (computePodActions puts the container in
        // both ContainersToKill and ContainersToStart): until the start attempt ends, the status
        // keeps showing the old instance.
        run.exited = terminated;
        continue;
      }
      run.restarting = false;
      run.state = { terminated };
      this.#status.publish();
      return;
    }
  }

  /** An image patch changed a running container: kills it with the pod's grace period; its start loop starts the new instance. */
  async restart(run: ContainerRun): Promise<void> {
    const state = this.#state;
    run.restarting = true;
    state.containerEvent(run, 'Normal', 'Killing', `Container ${run.name} definition changed, will be restarted`);
    if (run.dockerId) await stopDocker(state.deps.docker, run.dockerId, state.pod.spec.terminationGracePeriodSeconds ?? 30);
  }

  /** Sleeps unless woken (spec change, stop). Resolves true when the full time elapsed. */
  async #sleep(run: ContainerRun, ms: number): Promise<boolean> {
    if (this.#state.stopping) return false;
    let timer: NodeJS.Timeout | undefined;
    const full = await new Promise<boolean>((resolve) => {
      run.wake = () => resolve(false);
      timer = setTimeout(() => resolve(true), ms);
    });
    clearTimeout(timer);
    run.wake = undefined;
    return full;
  }
}
