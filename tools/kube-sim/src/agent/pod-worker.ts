// One pod on the fake node, run in Docker the way the kubelet runs it: sandbox (pause
// container, emptyDir volumes), image decisions (never pulling), containers started one after
// another, status (coalesced on the PLEG relist) and events as the kubelet reports them, image
// patches restarting a running container (and, under restartPolicy Never, not retrying a failed
// switch), activeDeadlineSeconds, graceful termination and cleanup.

import type Docker from 'dockerode';
import { setTimeout as delay } from 'node:timers/promises';
import { type Faults } from '../faults.ts';
import { badRequest } from '../status.ts';
import { type Store } from '../store.ts';
import { nowSeconds, type ContainerSpec, type ContainerState, type ContainerStatus, type Pod, type PodCondition, type PodStatus } from '../types.ts';
import { containerRequest, sandboxRequest, volumeLabels, volumeName } from './docker-spec.ts';
import { type EventRecorder, type EventSpec } from './event-recorder.ts';
import { type ImagePuller, SerialQueue } from './image-puller.ts';
import { containerdImageStatus, fullyQualified, inspectLocalImage, invalidReferenceMessage, isValidReference, type LocalImage } from './images.ts';

/** Back-off of failed image pulls (the kubelet's is 10 s doubling to 5 min). */
export interface PullBackoff {
  initialMs: number;
  maxMs: number;
}

/**
 * How faithfully the fake kubelet behaves. The defaults are the kubelet's; every `true` among the
 * lenient knobs restores a convenience kube-sim had before it modelled the rule.
 */
export interface KubeletBehaviour {
  /** Lenient: retry a failed image switch even under restartPolicy Never (rule 1 off). */
  retryFailedImageSwitch: boolean;
  /** Lenient: start a pod's containers all at once instead of one after another (rule 4 off). */
  parallelStarts: boolean;
  /** The kubelet's `serializeImagePulls` (default true: one pull at a time per node). */
  serializeImagePulls: boolean;
  /** PLEG relist period: container starts and exits reach the pod status on this tick; 0 publishes every change at once (rule 5 off). */
  statusRelistMs: number;
  /** Lenient: status.image is the spec's reference fully qualified, imageID the image id (rule 3 off). */
  specImageNames: boolean;
}

/** The kubelet's behaviour: every rule on, relist every second. */
export const faithfulKubelet: KubeletBehaviour = {
  retryFailedImageSwitch: false,
  parallelStarts: false,
  serializeImagePulls: true,
  statusRelistMs: 1000,
  specImageNames: false,
};

/** What a pod worker needs from the agent. */
export interface WorkerDeps {
  docker: Docker;
  store: Store;
  faults: Faults;
  recorder: EventRecorder;
  instance: string;
  nodeName: string;
  pauseImage: string;
  pullBackoff: PullBackoff;
  behaviour: KubeletBehaviour;
  /** The node's serial image puller. */
  puller: ImagePuller;
}

/** What the pod status shows of a container: a snapshot taken at a relist (or a sync result). */
interface RunView {
  state: ContainerState;
  lastState: ContainerState;
  restartCount: number;
  image: string;
  imageID: string;
  dockerId?: string;
}

/** The outcome of one start attempt (image, create, start) of a container. */
type StartAttempt = { kind: 'started'; container: Docker.Container } | { kind: 'failed'; reason: string; message: string; backoff: boolean } | { kind: 'stop' };

interface ContainerRun {
  name: string;
  state: ContainerState;
  lastState: ContainerState;
  restartCount: number;
  /** Image reported in the status. */
  image: string;
  imageID: string;
  dockerId?: string;
  previousDockerId?: string;
  /** Image the current Docker container was created from. */
  runningImage?: string;
  restarting: boolean;
  /** The previous instance, when it ended for a restart and the new one is not created yet. */
  exited?: NonNullable<ContainerState['terminated']>;
  pullFailures: number;
  wake?: () => void;
  task?: Promise<void>;
  /** What the published status shows. */
  view: RunView;
}

function errorText(err: unknown): string {
  const e = err as { json?: { message?: string }; message?: string };
  return e.json?.message ?? e.message ?? String(err);
}

function seconds(dockerTime: string | undefined): string | null {
  if (!dockerTime || dockerTime.startsWith('0001-')) return null;
  return nowSeconds(new Date(dockerTime));
}

const terminalReason = 'The container could not be located when the pod was terminated';

/** Runs one pod. Created by the NodeAgent when the pod is bound to the node. */
export class PodWorker {
  readonly uid: string;
  readonly #deps: WorkerDeps;
  #pod: Pod;
  readonly #runs = new Map<string, ContainerRun>();
  #sandbox: { id: string; ip: string; gateway: string } | undefined;
  readonly #dockerIds = new Set<string>();
  readonly #volumes: string[] = [];
  #startTimeMs: number | undefined;
  #terminal: { phase: 'Succeeded' | 'Failed'; reason?: string; message?: string } | undefined;
  #stopping = false;
  #destroyed = false;
  #deleting = false;
  #deadline: NodeJS.Timeout | undefined;
  #main: Promise<void> | undefined;
  #cleanup: Promise<void> | undefined;
  #killing: Promise<void> | undefined;
  /** One start (image, create, start) at a time: SyncPod's ContainersToStart loop. */
  readonly #starts: SerialQueue;
  /** Aborted when the pod is killed: ends simulated pulls. */
  readonly #abort = new AbortController();
  /** Next PLEG relist that publishes pending container state changes. */
  #relist: NodeJS.Timeout | undefined;

  constructor(deps: WorkerDeps, pod: Pod) {
    this.#deps = deps;
    this.#pod = pod;
    this.uid = pod.metadata.uid ?? '';
    for (const c of pod.spec.containers) {
      this.#runs.set(c.name, {
        name: c.name,
        state: { waiting: { reason: 'ContainerCreating' } },
        lastState: {},
        restartCount: 0,
        image: c.image ?? '',
        imageID: '',
        restarting: false,
        pullFailures: 0,
        view: { state: { waiting: { reason: 'ContainerCreating' } }, lastState: {}, restartCount: 0, image: c.image ?? '', imageID: '' },
      });
    }
    this.#starts = new SerialQueue(!deps.behaviour.parallelStarts);
  }

  /** Starts running the pod (once). */
  start(): void {
    this.#main ??= this.#run().catch((err: unknown) => {
      if (!this.#destroyed) console.error(`[kube-sim] pod ${this.#podName()} failed:`, err);
    });
  }

  /** A newer version of the pod object: spec changes (image patches, deadline) and deletion. */
  update(pod: Pod): void {
    if (pod.metadata.uid !== this.uid || this.#destroyed) return;
    this.#pod = pod;
    if (pod.metadata.deletionTimestamp) {
      if (!this.#deleting) {
        this.#deleting = true;
        void this.#terminate(pod.metadata.deletionGracePeriodSeconds ?? 30);
      }
      return;
    }
    this.#armDeadline();
    if (this.#stopping || this.#terminal) return;
    for (const c of pod.spec.containers) {
      const run = this.#runs.get(c.name);
      if (!run) continue;
      if (run.state.running && run.runningImage !== c.image && !run.restarting) void this.#restart(run);
      else if (run.state.waiting) run.wake?.();
    }
  }

  /** Docker id of a container for pods/log, or a 400 ApiError worded as the API server's. */
  logTarget(container: string, previous: boolean): string {
    const pod = this.#podName();
    const run = this.#runs.get(container);
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

  /** Kills everything now and removes the pod's Docker objects (pod deleted, or shutdown). */
  async destroy(): Promise<void> {
    await this.#kill(0);
    this.#destroyed = true;
    clearTimeout(this.#relist);
    await this.#main;
    await this.#removeDockerObjects();
  }

  #podName(): string {
    return this.#pod.metadata.name ?? '';
  }

  #spec(name: string): ContainerSpec | undefined {
    return this.#pod.spec.containers.find((c) => c.name === name);
  }

  #event(spec: EventSpec): void {
    if (this.#destroyed) return;
    this.#deps.recorder.record(this.#pod, spec);
  }

  #containerEvent(run: ContainerRun, type: EventSpec['type'], reason: string, message: string): void {
    this.#event({ type, reason, message, fieldPath: `spec.containers{${run.name}}` });
  }

  /** Waits while the node agent is stalled; a kill or destroy ends the wait. */
  async #waitUnstalled(): Promise<void> {
    while (this.#deps.faults.agentStalled && !this.#destroyed && !this.#stopping) await delay(100);
  }

  /** Sleeps unless woken (spec change, stop). Resolves true when the full time elapsed. */
  async #sleep(run: ContainerRun, ms: number): Promise<boolean> {
    if (this.#stopping) return false;
    let timer: NodeJS.Timeout | undefined;
    const full = await new Promise<boolean>((resolve) => {
      run.wake = () => resolve(false);
      timer = setTimeout(() => resolve(true), ms);
    });
    clearTimeout(timer);
    run.wake = undefined;
    return full;
  }

  async #run(): Promise<void> {
    await this.#waitUnstalled();
    if (this.#stopping || this.#destroyed) return;
    this.#startTimeMs = Date.now();
    this.#publishNow();
    this.#armDeadline();
    while (!this.#sandbox) {
      try {
        await this.#createSandbox();
      } catch (err) {
        if (this.#stopping || this.#destroyed) return;
        this.#event({ type: 'Warning', reason: 'FailedCreatePodSandBox', message: `Failed to create pod sandbox: ${errorText(err)}` });
        await delay(2000);
        if (this.#stopping || this.#destroyed) return;
      }
    }
    if (this.#stopping) return;
    this.#publishNow();
    for (const run of this.#runs.values()) run.task = this.#runContainer(run);
    await Promise.all([...this.#runs.values()].map((r) => r.task ?? Promise.resolve()));
    if (this.#stopping || this.#destroyed) return;
    const phase = this.#phase(false);
    if (phase === 'Succeeded' || phase === 'Failed') {
      this.#terminal = { phase };
      clearTimeout(this.#deadline);
      await this.#stopSandbox(2);
      this.#flush();
    }
  }

  async #createSandbox(): Promise<void> {
    const { docker, instance, pauseImage } = this.#deps;
    const pod = this.#pod;
    for (const v of pod.spec.volumes ?? []) {
      if (v.emptyDir && v.emptyDir.medium !== 'Memory') {
        const name = volumeName(pod, v.name);
        if (!this.#volumes.includes(name)) {
          await docker.createVolume({ Name: name, Labels: volumeLabels(instance, pod) });
          this.#volumes.push(name);
        }
      }
    }
    const container = await docker.createContainer(sandboxRequest(instance, pod, pauseImage) as unknown as Docker.ContainerCreateOptions);
    this.#dockerIds.add(container.id);
    await container.start();
    const info = await container.inspect();
    const bridge = Object.values(info.NetworkSettings.Networks)[0];
    this.#sandbox = { id: container.id, ip: bridge?.IPAddress ?? '', gateway: bridge?.Gateway ?? '' };
  }

  async #stopSandbox(graceSeconds: number): Promise<void> {
    if (!this.#sandbox) return;
    await this.#stopDocker(this.#sandbox.id, graceSeconds);
  }

  async #stopDocker(id: string, graceSeconds: number): Promise<void> {
    try {
      const c = this.#deps.docker.getContainer(id);
      if (graceSeconds <= 0) await c.kill();
      else await c.stop({ t: graceSeconds });
    } catch (err) {
      const code = (err as { statusCode?: number }).statusCode;
      if (code !== 304 && code !== 404 && code !== 409) console.error('[kube-sim] stopping container failed:', errorText(err));
    }
  }

  #backoffMs(run: ContainerRun): number {
    const { initialMs, maxMs } = this.#deps.pullBackoff;
    return Math.min(maxMs, initialMs * 2 ** Math.max(0, run.pullFailures - 1));
  }

  /** Sleeps `ms` unless the pod is killed first. */
  async #pause(ms: number): Promise<void> {
    await delay(ms, undefined, { signal: this.#abort.signal }).catch(() => undefined);
  }

  /**
   * The kubelet's image step (pkg/kubelet/images/image_manager.go EnsureImageExists): decides
   * from the pull policy and the node's images, pulls through the node's serial puller, records
   * the events. Resolves the image record, or the failure (waiting reason and message).
   */
  async #ensureImage(run: ContainerRun, spec: ContainerSpec): Promise<{ local: LocalImage } | { reason: string; message: string }> {
    const image = spec.image ?? '';
    const { docker, faults, puller } = this.#deps;
    const event = (type: EventSpec['type'], reason: string, message: string): void => this.#containerEvent(run, type, reason, message);
    if (!isValidReference(image)) {
      const message = invalidReferenceMessage(image);
      event('Warning', 'InspectFailed', message);
      event('Warning', 'Failed', 'Error: InvalidImageName');
      return { reason: 'InvalidImageName', message };
    }
    const slow = faults.slowPull(image);
    const fault = faults.pullFailure(image);
    const local = fault ? undefined : await inspectLocalImage(docker, image);
    const present = local !== undefined && (slow === undefined || puller.pulled(image));
    const policy = spec.imagePullPolicy ?? 'IfNotPresent';
    if (present && policy !== 'Always') {
      event('Normal', 'Pulled', `Container image "${image}" already present on machine`);
      return { local };
    }
    if (!present && policy === 'Never' && !fault) {
      const message = `Container image "${image}" is not present with pull policy of Never`;
      event('Warning', 'ErrImageNeverPull', message);
      event('Warning', 'Failed', 'Error: ErrImageNeverPull');
      return { reason: 'ErrImageNeverPull', message };
    }
    event('Normal', 'Pulling', `Pulling image "${image}"`);
    const asked = Date.now();
    return puller.queue.run(async () => {
      const started = Date.now();
      if (slow !== undefined && local) await this.#pause(slow);
      // A pull cut short by the pod's end leaves no image behind.
      if (this.#abort.signal.aborted) return { reason: 'ErrImagePull', message: 'pull cancelled: the pod is terminating' };
      if (fault) {
        const reason = fault.reason === 'ImagePullBackOff' ? 'ErrImagePull' : fault.reason;
        const message = fault.message ?? `rpc error: code = Unknown desc = failed to pull and unpack image "${fullyQualified(image)}": injected by kube-sim`;
        event('Warning', 'Failed', `Failed to pull image "${image}": ${message}`);
        event('Warning', 'Failed', `Error: ${reason}`);
        return { reason, message };
      }
      if (!local) {
        const fq = fullyQualified(image);
        const message = `rpc error: code = NotFound desc = failed to pull and unpack image "${fq}": failed to resolve reference "${fq}": ${fq}: not found (kube-sim never pulls: the image is not present on the node)`;
        event('Warning', 'Failed', `Failed to pull image "${image}": ${message}`);
        event('Warning', 'Failed', 'Error: ErrImagePull');
        return { reason: 'ErrImagePull', message };
      }
      // kube-sim has no registry: a pull of a local image takes the slow-pull time, or none.
      puller.markPulled(image);
      const took = (ms: number): string => `${(ms / 1000).toFixed(3)}s`;
      const now = Date.now();
      event(
        'Normal',
        'Pulled',
        `Successfully pulled image "${image}" in ${took(now - started)} (${took(now - asked)} including waiting). Image size: ${local.size} bytes.`,
      );
      return { local };
    });
  }

  /** `image`/`imageID` of the status for a container created from `local`. */
  #imageStatus(spec: ContainerSpec, local: LocalImage): { image: string; imageID: string } {
    if (this.#deps.behaviour.specImageNames) return { image: fullyQualified(spec.image ?? ''), imageID: local.id };
    return containerdImageStatus(local);
  }

  /** One start of a container, under the pod's start queue: image, create, start. */
  async #startAttempt(run: ContainerRun, spec: ContainerSpec): Promise<StartAttempt> {
    const { docker, instance } = this.#deps;
    if (this.#stopping || !this.#sandbox) return { kind: 'stop' };
    const image = spec.image ?? '';
    // A container that never ran shows the spec's image; one that ran shows its instance's.
    if (!run.dockerId) run.image = image;
    const pulled = await this.#ensureImage(run, spec);
    if (this.#stopping) return { kind: 'stop' };
    if (!('local' in pulled)) return { kind: 'failed', ...pulled, backoff: true };
    if (this.#stopping) return { kind: 'stop' };
    let container: Docker.Container;
    try {
      // The kubelet creates the container from the image id EnsureImageExists returned.
      const request = containerRequest(instance, this.#pod, spec, pulled.local.id, this.#sandbox.id, run.exited ? run.restartCount + 1 : run.restartCount);
      container = await docker.createContainer(request as unknown as Docker.ContainerCreateOptions);
    } catch (err) {
      const message = errorText(err);
      this.#containerEvent(run, 'Warning', 'Failed', `Error: ${message}`);
      return { kind: 'failed', reason: 'CreateContainerError', message, backoff: true };
    }
    this.#dockerIds.add(container.id);
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
    Object.assign(run, this.#imageStatus(spec, pulled.local));
    this.#containerEvent(run, 'Normal', 'Created', `Created container: ${run.name}`);
    if (this.#stopping) return { kind: 'stop' };
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
      this.#containerEvent(run, 'Warning', 'Failed', `Error: ${message}`);
      this.#publish();
      return { kind: 'stop' };
    }
    this.#containerEvent(run, 'Normal', 'Started', `Started container ${run.name}`);
    const started = await container.inspect().catch(() => undefined);
    run.restarting = false;
    run.state = { running: { startedAt: seconds(started?.State.StartedAt) ?? nowSeconds() } };
    this.#publish();
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
    const { behaviour } = this.#deps;
    const ranBefore = run.exited !== undefined;
    if (ranBefore && this.#pod.spec.restartPolicy === 'Never' && !behaviour.retryFailedImageSwitch) {
      run.state = { terminated: run.exited ?? { exitCode: 0, reason: 'Completed' } };
      run.exited = undefined;
      run.restarting = false;
      this.#publish();
      return false;
    }
    if (ranBefore) {
      run.lastState = { terminated: run.exited ?? { exitCode: 0, reason: 'Completed' } };
      run.restarting = false;
    }
    run.pullFailures++;
    run.state = { waiting: { reason: failure.reason, message: failure.message } };
    this.#publishNow(run);
    const wait = this.#backoffMs(run);
    if (failure.reason === 'ErrImagePull') {
      // The next sync finds the image in back-off: ImagePullBackOff
      // (pkg/kubelet/images/image_manager.go EnsureImageExists, "Back-off pulling image").
      const first = Math.min(1000, Math.floor(wait / 2));
      if (!(await this.#sleep(run, first))) return true;
      const image = this.#spec(run.name)?.image ?? '';
      const backOff = `Back-off pulling image "${image}"`;
      run.state = { waiting: { reason: 'ImagePullBackOff', message: backOff } };
      this.#containerEvent(run, 'Normal', 'BackOff', backOff);
      this.#containerEvent(run, 'Warning', 'Failed', 'Error: ImagePullBackOff');
      this.#publishNow(run);
      await this.#sleep(run, wait - first);
    } else {
      await this.#sleep(run, wait);
    }
    return true;
  }

  async #runContainer(run: ContainerRun): Promise<void> {
    while (!this.#stopping && !this.#destroyed) {
      await this.#waitUnstalled();
      const spec = this.#spec(run.name);
      if (!spec || this.#stopping || !this.#sandbox) return;
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
      if (this.#stopping) await this.#stopDocker(container.id, this.#pod.metadata.deletionGracePeriodSeconds ?? 0);
      await container.wait().catch(() => undefined);
      const ended = await container.inspect().catch(() => undefined);
      const exitCode = ended?.State.ExitCode ?? 137;
      const terminated: NonNullable<ContainerState['terminated']> = {
        exitCode,
        reason: ended?.State.OOMKilled ? 'OOMKilled' : exitCode === 0 ? 'Completed' : 'Error',
        startedAt: seconds(ended?.State.StartedAt),
        finishedAt: seconds(ended?.State.FinishedAt) ?? nowSeconds(),
        containerID: `docker://${container.id}`,
      };
      if (ended?.State.Error) terminated.message = ended.State.Error;
      if (run.restarting && !this.#stopping) {
        if (this.#deps.behaviour.retryFailedImageSwitch) {
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
      this.#publish();
      return;
    }
  }

  async #restart(run: ContainerRun): Promise<void> {
    run.restarting = true;
    this.#containerEvent(run, 'Normal', 'Killing', `Container ${run.name} definition changed, will be restarted`);
    if (run.dockerId) await this.#stopDocker(run.dockerId, this.#pod.spec.terminationGracePeriodSeconds ?? 30);
  }

  /** Stops starting anything, kills running containers with the grace period and waits for the container tasks. */
  async #kill(graceSeconds: number): Promise<void> {
    this.#stopping = true;
    clearTimeout(this.#deadline);
    this.#abort.abort();
    this.#killing ??= (async () => {
      for (const run of this.#runs.values()) run.wake?.();
      const stops: Promise<void>[] = [];
      for (const run of this.#runs.values()) {
        if (run.dockerId && run.state.running) {
          this.#containerEvent(run, 'Normal', 'Killing', `Stopping container ${run.name}`);
          stops.push(this.#stopDocker(run.dockerId, graceSeconds));
        }
      }
      await Promise.all(stops);
      await Promise.all([...this.#runs.values()].map((r) => r.task ?? Promise.resolve()));
      await this.#stopSandbox(graceSeconds);
    })();
    await this.#killing;
  }

  /** Graceful deletion: kill with the grace period, report the final status, remove the pod object. */
  async #terminate(graceSeconds: number): Promise<void> {
    // A stalled kubelet does not confirm deletions: the pod stays Terminating until it recovers.
    await this.#waitUnstalled();
    if (this.#destroyed) return;
    await this.#kill(graceSeconds);
    this.#flush();
    await this.#removeDockerObjects();
    this.#destroyed = true;
    try {
      this.#deps.store.remove('pods', this.#pod.metadata.namespace, this.#podName(), this.uid);
    } catch {
      // already gone
    }
  }

  async #removeDockerObjects(): Promise<void> {
    this.#cleanup ??= (async () => {
      const { docker } = this.#deps;
      for (const id of this.#dockerIds) {
        await docker
          .getContainer(id)
          .remove({ force: true, v: true })
          .catch(() => undefined);
      }
      for (const name of this.#volumes) {
        await docker
          .getVolume(name)
          .remove()
          .catch(() => undefined);
      }
    })();
    await this.#cleanup;
  }

  #armDeadline(): void {
    clearTimeout(this.#deadline);
    const seconds = this.#pod.spec.activeDeadlineSeconds;
    if (this.#startTimeMs === undefined || seconds === undefined || this.#terminal || this.#stopping) return;
    const remaining = this.#startTimeMs + seconds * 1000 - Date.now();
    this.#deadline = setTimeout(() => void this.#deadlineExceeded(), Math.max(0, remaining));
  }

  async #deadlineExceeded(): Promise<void> {
    if (this.#terminal || this.#stopping) return;
    const message = 'Pod was active on the node longer than the specified deadline';
    this.#terminal = { phase: 'Failed', reason: 'DeadlineExceeded', message };
    this.#event({ type: 'Warning', reason: 'DeadlineExceeded', message });
    this.#flush();
    await this.#kill(this.#pod.spec.terminationGracePeriodSeconds ?? 30);
    this.#flush();
  }

  /** The pod phase from the published container states (`views`) or the real ones. */
  #phase(views: boolean): PodStatus['phase'] {
    if (this.#terminal) return this.#terminal.phase;
    if (!this.#sandbox) return 'Pending';
    let waiting = 0;
    let running = 0;
    let stopped = 0;
    let succeeded = 0;
    for (const run of this.#runs.values()) {
      const { state, lastState } = views ? run.view : run;
      if (state.running || (!views && run.restarting)) running++;
      else if (state.terminated) {
        stopped++;
        if (state.terminated.exitCode === 0) succeeded++;
      } else if (lastState.terminated) running++;
      else waiting++;
    }
    if (waiting > 0) return 'Pending';
    if (running > 0) return 'Running';
    if (stopped > 0) {
      if (this.#pod.spec.restartPolicy === 'Always') return 'Running';
      if (stopped === succeeded) return 'Succeeded';
      return 'Failed';
    }
    return 'Pending';
  }

  #containerStatuses(): ContainerStatus[] {
    return this.#pod.spec.containers.map((c) => {
      const run = this.#runs.get(c.name);
      if (!run) {
        return {
          name: c.name,
          state: { waiting: { reason: 'ContainerCreating' } },
          lastState: {},
          ready: false,
          restartCount: 0,
          image: c.image ?? '',
          imageID: '',
          started: false,
        };
      }
      const view = run.view;
      let state = view.state;
      if (this.#terminal && state.waiting) {
        state = { terminated: { exitCode: 137, reason: 'ContainerStatusUnknown', message: terminalReason, startedAt: null, finishedAt: null } };
      }
      const containerID = state.terminated?.containerID ?? (view.dockerId ? `docker://${view.dockerId}` : undefined);
      return {
        name: run.name,
        state,
        lastState: view.lastState,
        ready: state.running !== undefined,
        restartCount: view.restartCount,
        image: view.image,
        imageID: view.imageID,
        ...(containerID ? { containerID } : {}),
        started: state.running !== undefined,
      };
    });
  }

  #status(previous: PodStatus | undefined): PodStatus {
    const now = nowSeconds();
    const phase = this.#phase(true);
    const statuses = this.#containerStatuses();
    const unready = statuses.filter((s) => !s.ready).map((s) => s.name);
    const done = phase === 'Succeeded' || phase === 'Failed';
    const condition = (type: string, ok: boolean, reason?: string, message?: string): PodCondition => {
      const status = ok ? 'True' : 'False';
      const before = previous?.conditions?.find((c) => c.type === type);
      return {
        type,
        status,
        lastProbeTime: null,
        lastTransitionTime: before && before.status === status ? before.lastTransitionTime : now,
        ...(reason ? { reason } : {}),
        ...(message ? { message } : {}),
      };
    };
    const ready = unready.length === 0 && !done;
    const notReady = done ? ['PodCompleted', undefined] : ['ContainersNotReady', `containers with unready status: [${unready.join(' ')}]`];
    const status: PodStatus = {
      ...(previous ?? {}),
      phase,
      conditions: [
        condition('PodReadyToStartContainers', this.#sandbox !== undefined && !done),
        condition('Initialized', true),
        condition('Ready', ready, ready ? undefined : notReady[0], ready ? undefined : notReady[1]),
        condition('ContainersReady', ready, ready ? undefined : notReady[0], ready ? undefined : notReady[1]),
        condition('PodScheduled', true),
      ],
      hostIP: this.#sandbox?.gateway || '127.0.0.1',
      hostIPs: [{ ip: this.#sandbox?.gateway || '127.0.0.1' }],
      startTime: nowSeconds(new Date(this.#startTimeMs ?? Date.now())),
      containerStatuses: statuses,
    };
    if (this.#sandbox?.ip) {
      status.podIP = this.#sandbox.ip;
      status.podIPs = [{ ip: this.#sandbox.ip }];
    }
    if (this.#terminal?.reason) {
      status.reason = this.#terminal.reason;
      status.message = this.#terminal.message ?? '';
    }
    return status;
  }

  /**
   * A container started or ended: the pod status shows it at the next PLEG relist, together with
   * whatever else changed meanwhile. The kubelet notices container state changes by relisting the
   * runtime every second (kubernetes/kubernetes pkg/kubelet/pleg/generic.go, relist period 1 s in
   * pkg/kubelet/kubelet.go genericPlegRelistPeriod) and the status manager writes the status the
   * next sync generates (pkg/kubelet/status/status_manager.go SetPodStatus/syncPod): a container
   * that starts and exits between two relists goes from waiting to terminated with no running
   * status ever published.
   */
  #publish(): void {
    if (this.#destroyed) return;
    const period = this.#deps.behaviour.statusRelistMs;
    if (period <= 0) {
      this.#flush();
      return;
    }
    // One relist clock for the node: ticks at multiples of the period.
    this.#relist ??= setTimeout(
      () => {
        this.#relist = undefined;
        this.#flush();
      },
      period - (Date.now() % period),
    );
  }

  /** A sync result (a waiting reason, the sandbox, the start time): written at once, with `run`'s state. */
  #publishNow(run?: ContainerRun): void {
    if (run) run.view = this.#snapshot(run);
    this.#write();
  }

  /** A relist: every container's state as it is now, written at once. */
  #flush(): void {
    clearTimeout(this.#relist);
    this.#relist = undefined;
    for (const run of this.#runs.values()) run.view = this.#snapshot(run);
    this.#write();
  }

  #snapshot(run: ContainerRun): RunView {
    return {
      state: structuredClone(run.state),
      lastState: structuredClone(run.lastState),
      restartCount: run.restartCount,
      image: run.image,
      imageID: run.imageID,
      ...(run.dockerId ? { dockerId: run.dockerId } : {}),
    };
  }

  /** Writes the pod's status to the store when it changed. */
  #write(): void {
    if (this.#destroyed) return;
    const { store } = this.#deps;
    store.modify('pods', this.#pod.metadata.namespace, this.#podName(), (obj) => {
      if (obj.metadata.uid !== this.uid) return;
      const pod = obj as Pod;
      pod.status = this.#status(pod.status);
    });
  }
}
