// One pod on the fake node, run in Docker the way the kubelet runs it: sandbox (pause
// container, emptyDir volumes), image decisions (never pulling), containers started one after
// another, status (coalesced on the PLEG relist) and events as the kubelet reports them, image
// patches restarting a running container (and, under restartPolicy Never, not retrying a failed
// switch), activeDeadlineSeconds, graceful termination and cleanup.
//
// This file holds the pod's life (start, spec updates, deadline, kill, graceful deletion); the
// parts live beside it: pod-state.ts (what the worker knows), container-runner.ts (container
// starts and restarts), image-step.ts (image pulls and back-off), pod-status.ts (status
// composition and the relist), pod-docker.ts (sandbox and Docker objects).

import { setTimeout as delay } from 'node:timers/promises';
import { badRequest } from '../status.ts';
import { type Pod } from '../types.ts';
import { ContainerRunner } from './container-runner.ts';
import { SerialQueue } from './image-puller.ts';
import { createSandbox, errorText, removeDockerObjects, stopDocker, stopSandbox } from './pod-docker.ts';
import { type ContainerRun, PodState, type WorkerDeps } from './pod-state.ts';
import { StatusPublisher, containersPhase } from './pod-status.ts';

/** Runs one pod. Created by the NodeAgent when the pod is bound to the node. */
export class PodWorker {
  readonly uid: string;
  readonly #state: PodState;
  readonly #status: StatusPublisher;
  readonly #runner: ContainerRunner;
  #deleting = false;
  #deadline: NodeJS.Timeout | undefined;
  #main: Promise<void> | undefined;
  #cleanup: Promise<void> | undefined;
  #killing: Promise<void> | undefined;
  /**
   * Rule 8: the kubelet handles one pod's syncs one at a time (pkg/kubelet/pod_workers.go: one
   * podWorkerLoop goroutine per pod; an update waits for the sync in progress), and within a sync
   * kills the containers a spec change replaced one after another (kuberuntime_manager.go SyncPod,
   * step 3: `for containerID, containerInfo := range podContainerChanges.ContainersToKill { m.killContainer(…) }`),
   * each waiting its grace. So two image patches of running containers sent 3 ms apart stop
   * them one grace after the other. A graceful deletion is not queued here: it kills every
   * container at once (killPodWithSyncResult → killContainersWithSyncResult, a goroutine per
   * container), as #kill does, and UpdatePod cancels the sync in progress when a pod becomes
   * terminating.
   */
  readonly #patchKills: SerialQueue;
  readonly #queuedKills = new Set<ContainerRun>();

  constructor(deps: WorkerDeps, pod: Pod) {
    this.#state = new PodState(deps, pod);
    this.uid = this.#state.uid;
    this.#status = new StatusPublisher(this.#state);
    this.#runner = new ContainerRunner(this.#state, this.#status);
    this.#patchKills = new SerialQueue(!deps.behaviour.parallelPatchKills);
  }

  /** Starts running the pod (once). */
  start(): void {
    this.#main ??= this.#run().catch((err: unknown) => {
      if (!this.#state.destroyed) console.error(`[kube-sim] pod ${this.#state.podName()} failed:`, err);
    });
  }

  /** A newer version of the pod object: spec changes (image patches, deadline) and deletion. */
  update(pod: Pod): void {
    const state = this.#state;
    if (pod.metadata.uid !== this.uid || state.destroyed) return;
    state.pod = pod;
    if (pod.metadata.deletionTimestamp) {
      if (!this.#deleting) {
        this.#deleting = true;
        void this.#terminate(pod.metadata.deletionGracePeriodSeconds ?? 30);
      }
      return;
    }
    this.#armDeadline();
    if (state.stopping || state.terminal) return;
    for (const c of pod.spec.containers) {
      const run = state.runs.get(c.name);
      if (!run) continue;
      if (run.state.running && run.runningImage !== c.image && !run.restarting && !this.#queuedKills.has(run)) {
        this.#queuedKills.add(run);
        void this.#patchKills.run(async () => {
          // Rule 10: the sync waits for a pod cache newer than the last sync (pod_workers.go podWorkerLoop, GetNewerThan).
          await state.waitForNewerCache();
          this.#queuedKills.delete(run);
          // The sync acts on the spec and state it finds when its turn comes.
          const wanted = state.pod.spec.containers.find((spec) => spec.name === run.name)?.image;
          if (state.stopping || !run.state.running || run.restarting || run.runningImage === wanted) return;
          await this.#runner.restart(run);
        });
      } else if (run.state.waiting) {
        // Rule 10 too: the sync that picks up the new image waits for a newer pod cache.
        void state.waitForNewerCache().then(() => run.wake?.());
      }
    }
  }

  /** Docker id of a container for pods/log, or a 400 ApiError worded as the API server's. */
  logTarget(container: string, previous: boolean): string {
    const pod = this.#state.podName();
    const run = this.#state.runs.get(container);
    if (!run) throw badRequest(`container ${container} is not valid for pod ${pod}`);
    if (previous) {
      if (!run.previousDockerId) throw badRequest(`previous terminated container "${container}" in pod "${pod}" not found`);
      return run.previousDockerId;
    }
    if (run.dockerId) return run.dockerId;
    const reason = run.state.waiting?.reason ?? 'ContainerCreating';
    if (reason === 'ErrImagePull' || reason === 'ImagePullBackOff')
      throw badRequest(`container "${container}" in pod "${pod}" is waiting to start: trying and failing to pull image`);
    if (reason === 'InvalidImageName' || reason === 'ErrImageNeverPull')
      throw badRequest(`container "${container}" in pod "${pod}" is waiting to start: image can't be pulled`);
    throw badRequest(`container "${container}" in pod "${pod}" is waiting to start: ${reason}`);
  }

  /** True while the Docker container `dockerId` is this pod's running instance of a container (the CRI's CONTAINER_RUNNING). */
  containerRunning(dockerId: string): boolean {
    for (const run of this.#state.runs.values()) {
      if (run.dockerId === dockerId) return run.state.running !== undefined && run.exited === undefined;
    }
    return false;
  }

  /** Kills everything now and removes the pod's Docker objects (pod deleted, or shutdown). */
  async destroy(): Promise<void> {
    await this.#kill(0);
    this.#state.destroyed = true;
    this.#status.cancel();
    await this.#main;
    await this.#removeDockerObjects();
  }

  async #run(): Promise<void> {
    const state = this.#state;
    await state.waitUnstalled();
    if (state.stopping || state.destroyed) return;
    state.startTimeMs = Date.now();
    this.#status.publishNow();
    this.#armDeadline();
    while (!state.sandbox) {
      try {
        await createSandbox(state);
      } catch (err) {
        if (state.stopping || state.destroyed) return;
        state.event({ type: 'Warning', reason: 'FailedCreatePodSandBox', message: `Failed to create pod sandbox: ${errorText(err)}` });
        await delay(2000);
        if (state.stopping || state.destroyed) return;
      }
    }
    if (state.stopping) return;
    this.#status.publishNow();
    for (const run of state.runs.values()) run.task = this.#runner.run(run);
    await Promise.all([...state.runs.values()].map((r) => r.task ?? Promise.resolve()));
    if (state.stopping || state.destroyed) return;
    const phase = containersPhase(state, false);
    if (phase === 'Succeeded' || phase === 'Failed') {
      // PLEG reports the last exit at its next relist (the terminated statuses go out then); the pod
      // worker then stops the pod, and only after that may the status manager publish the terminal
      // phase (see podPhase). On the real kubelet here: exit 52.7 s, terminated published 53.7 s,
      // Succeeded 54.8 s: about two relists after the exit.
      await delay(2 * state.deps.behaviour.statusRelistMs);
      if (state.stopping || state.destroyed) return;
      state.terminal = { phase };
      clearTimeout(this.#deadline);
      await stopSandbox(state, 2);
      this.#status.flush();
    }
  }

  /** Stops starting anything, kills running containers with the grace period and waits for the container tasks. */
  async #kill(graceSeconds: number): Promise<void> {
    const state = this.#state;
    state.stopping = true;
    clearTimeout(this.#deadline);
    state.abort.abort();
    this.#killing ??= (async () => {
      for (const run of state.runs.values()) run.wake?.();
      const stops: Promise<void>[] = [];
      for (const run of state.runs.values()) {
        if (run.dockerId && run.state.running) {
          state.containerEvent(run, 'Normal', 'Killing', `Stopping container ${run.name}`);
          stops.push(stopDocker(state.deps.docker, run.dockerId, graceSeconds));
        }
      }
      await Promise.all(stops);
      await Promise.all([...state.runs.values()].map((r) => r.task ?? Promise.resolve()));
      await stopSandbox(state, graceSeconds);
    })();
    await this.#killing;
  }

  /** Graceful deletion: kill with the grace period, report the final status, remove the pod object. */
  async #terminate(graceSeconds: number): Promise<void> {
    const state = this.#state;
    // A stalled kubelet does not confirm deletions: the pod stays Terminating until it recovers.
    await state.waitUnstalled();
    if (state.destroyed) return;
    await this.#kill(graceSeconds);
    this.#status.flush();
    await this.#removeDockerObjects();
    state.destroyed = true;
    try {
      state.deps.store.remove('pods', state.pod.metadata.namespace, state.podName(), this.uid);
    } catch {
      // already gone
    }
  }

  async #removeDockerObjects(): Promise<void> {
    this.#cleanup ??= removeDockerObjects(this.#state);
    await this.#cleanup;
  }

  #armDeadline(): void {
    const state = this.#state;
    clearTimeout(this.#deadline);
    const seconds = state.pod.spec.activeDeadlineSeconds;
    if (state.startTimeMs === undefined || seconds === undefined || state.terminal || state.stopping) return;
    const remaining = state.startTimeMs + seconds * 1000 - Date.now();
    this.#deadline = setTimeout(() => void this.#deadlineExceeded(), Math.max(0, remaining));
  }

  async #deadlineExceeded(): Promise<void> {
    const state = this.#state;
    if (state.terminal || state.stopping) return;
    const message = 'Pod was active on the node longer than the specified deadline';
    state.terminal = { phase: 'Failed', reason: 'DeadlineExceeded', message };
    state.event({ type: 'Warning', reason: 'DeadlineExceeded', message });
    this.#status.flush();
    await this.#kill(state.pod.spec.terminationGracePeriodSeconds ?? 30);
    this.#status.flush();
  }
}
