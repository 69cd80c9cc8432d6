// One pod on the fake node, run in Docker the way the kubelet runs it: sandbox (pause
// container, emptyDir volumes), image decisions (never pulling), containers started in
// parallel, status and events as the kubelet reports them, image patches restarting a running
// container, activeDeadlineSeconds, graceful termination and cleanup.

import type Docker from 'dockerode';
import { setTimeout as delay } from 'node:timers/promises';
import { type Faults } from '../faults.ts';
import { badRequest } from '../status.ts';
import { type Store } from '../store.ts';
import { nowSeconds, type ContainerSpec, type ContainerState, type ContainerStatus, type Pod, type PodCondition, type PodStatus } from '../types.ts';
import { containerRequest, sandboxRequest, volumeLabels, volumeName } from './docker-spec.ts';
import { type EventRecorder, type EventSpec } from './event-recorder.ts';
import { fullyQualified, inspectLocalImage, invalidReferenceMessage, isValidReference } from './images.ts';

/** Back-off of failed image pulls (the kubelet's is 10 s doubling to 5 min). */
export interface PullBackoff {
  initialMs: number;
  maxMs: number;
}

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
}

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
  pullFailures: number;
  wake?: () => void;
  task?: Promise<void>;
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
      });
    }
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
    if (reason === 'ErrImagePull' || reason === 'ImagePullBackOff') throw badRequest(`container "${container}" in pod "${pod}" is waiting to start: trying and failing to pull image`);
    if (reason === 'InvalidImageName' || reason === 'ErrImageNeverPull') throw badRequest(`container "${container}" in pod "${pod}" is waiting to start: image can't be pulled`);
    throw badRequest(`container "${container}" in pod "${pod}" is waiting to start: ${reason}`);
  }

  /** Kills everything now and removes the pod's Docker objects (pod deleted, or shutdown). */
  async destroy(): Promise<void> {
    await this.#kill(0);
    this.#destroyed = true;
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
    this.#publish();
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
    this.#publish();
    for (const run of this.#runs.values()) run.task = this.#runContainer(run);
    await Promise.all([...this.#runs.values()].map((r) => r.task ?? Promise.resolve()));
    if (this.#stopping || this.#destroyed) return;
    const phase = this.#phase();
    if (phase === 'Succeeded' || phase === 'Failed') {
      this.#terminal = { phase };
      clearTimeout(this.#deadline);
      await this.#stopSandbox(2);
      this.#publish();
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

  /** The kubelet's image step. Resolves the image id, or undefined after reporting the failure and backing off. */
  async #ensureImage(run: ContainerRun, spec: ContainerSpec): Promise<string | undefined> {
    const image = spec.image ?? '';
    const { docker, faults } = this.#deps;
    run.image = image;
    const fail = async (reason: string, message: string, events: [EventSpec['type'], string, string][]): Promise<undefined> => {
      run.pullFailures++;
      for (const [type, r, m] of events) this.#containerEvent(run, type, r, m);
      run.state = { waiting: { reason, message } };
      this.#publish();
      const wait = this.#backoffMs(run);
      if (reason === 'ErrImagePull') {
        const first = Math.min(1000, Math.floor(wait / 2));
        if (!(await this.#sleep(run, first))) return undefined;
        const backOff = `Back-off pulling image "${image}"`;
        run.state = { waiting: { reason: 'ImagePullBackOff', message: backOff } };
        this.#containerEvent(run, 'Normal', 'BackOff', backOff);
        this.#containerEvent(run, 'Warning', 'Failed', 'Error: ImagePullBackOff');
        this.#publish();
        await this.#sleep(run, wait - first);
      } else {
        await this.#sleep(run, wait);
      }
      return undefined;
    };

    if (!isValidReference(image)) {
      const message = invalidReferenceMessage(image);
      return fail('InvalidImageName', message, [
        ['Warning', 'InspectFailed', message],
        ['Warning', 'Failed', 'Error: InvalidImageName'],
      ]);
    }
    const fault = faults.pullFailure(image);
    if (fault) {
      const reason = fault.reason === 'ImagePullBackOff' ? 'ErrImagePull' : fault.reason;
      const message = fault.message ?? `rpc error: code = Unknown desc = failed to pull and unpack image "${fullyQualified(image)}": injected by kube-sim`;
      return fail(reason, message, [
        ['Normal', 'Pulling', `Pulling image "${image}"`],
        ['Warning', 'Failed', `Failed to pull image "${image}": ${message}`],
        ['Warning', 'Failed', `Error: ${reason}`],
      ]);
    }
    const local = await inspectLocalImage(docker, image);
    const policy = spec.imagePullPolicy ?? 'IfNotPresent';
    if (local && policy !== 'Always') {
      this.#containerEvent(run, 'Normal', 'Pulled', `Container image "${image}" already present on machine`);
      run.pullFailures = 0;
      return local.id;
    }
    if (local) {
      // Always: the kubelet would ask the registry; kube-sim has none and treats the local image as the pulled one.
      this.#containerEvent(run, 'Normal', 'Pulling', `Pulling image "${image}"`);
      this.#containerEvent(run, 'Normal', 'Pulled', `Successfully pulled image "${image}" in 1ms (1ms including waiting). Image size: ${local.size} bytes.`);
      run.pullFailures = 0;
      return local.id;
    }
    if (policy === 'Never') {
      const message = `Container image "${image}" is not present with pull policy of Never`;
      return fail('ErrImageNeverPull', message, [
        ['Warning', 'ErrImageNeverPull', message],
        ['Warning', 'Failed', 'Error: ErrImageNeverPull'],
      ]);
    }
    const fq = fullyQualified(image);
    const message = `rpc error: code = NotFound desc = failed to pull and unpack image "${fq}": failed to resolve reference "${fq}": ${fq}: not found (kube-sim never pulls: the image is not present on the node)`;
    return fail('ErrImagePull', message, [
      ['Normal', 'Pulling', `Pulling image "${image}"`],
      ['Warning', 'Failed', `Failed to pull image "${image}": ${message}`],
      ['Warning', 'Failed', 'Error: ErrImagePull'],
    ]);
  }

  async #runContainer(run: ContainerRun): Promise<void> {
    const { docker, instance } = this.#deps;
    while (!this.#stopping && !this.#destroyed) {
      await this.#waitUnstalled();
      const spec = this.#spec(run.name);
      if (!spec || this.#stopping || !this.#sandbox) return;
      const imageId = await this.#ensureImage(run, spec);
      if (imageId === undefined) continue;
      if (this.#stopping) return;
      const image = spec.image ?? '';
      let container: Docker.Container;
      try {
        const request = containerRequest(instance, this.#pod, spec, image, this.#sandbox.id, run.restartCount);
        container = await docker.createContainer(request as unknown as Docker.ContainerCreateOptions);
      } catch (err) {
        const message = errorText(err);
        run.pullFailures++;
        run.state = { waiting: { reason: 'CreateContainerError', message } };
        this.#containerEvent(run, 'Warning', 'Failed', `Error: ${message}`);
        this.#publish();
        await this.#sleep(run, this.#backoffMs(run));
        continue;
      }
      this.#dockerIds.add(container.id);
      run.dockerId = container.id;
      run.runningImage = image;
      run.image = fullyQualified(image);
      run.imageID = imageId;
      this.#containerEvent(run, 'Normal', 'Created', `Created container: ${run.name}`);
      if (this.#stopping) return;
      try {
        await container.start();
      } catch (err) {
        const message = errorText(err);
        const now = nowSeconds();
        run.state = { terminated: { exitCode: 128, reason: 'StartError', message, startedAt: '1970-01-01T00:00:00Z', finishedAt: now, containerID: `docker://${container.id}` } };
        this.#containerEvent(run, 'Warning', 'Failed', `Error: ${message}`);
        this.#publish();
        return;
      }
      this.#containerEvent(run, 'Normal', 'Started', `Started container ${run.name}`);
      const started = await container.inspect().catch(() => undefined);
      run.state = { running: { startedAt: seconds(started?.State.StartedAt) ?? nowSeconds() } };
      this.#publish();
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
        run.lastState = { terminated };
        run.restartCount++;
        run.restarting = false;
        run.previousDockerId = run.dockerId;
        run.dockerId = undefined;
        run.pullFailures = 0;
        run.state = { waiting: { reason: 'ContainerCreating' } };
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
    this.#publish();
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
    this.#publish();
    await this.#kill(this.#pod.spec.terminationGracePeriodSeconds ?? 30);
    this.#publish();
  }

  #phase(): PodStatus['phase'] {
    if (this.#terminal) return this.#terminal.phase;
    if (!this.#sandbox) return 'Pending';
    let waiting = 0;
    let running = 0;
    let stopped = 0;
    let succeeded = 0;
    for (const run of this.#runs.values()) {
      if (run.state.running || run.restarting) running++;
      else if (run.state.terminated) {
        stopped++;
        if (run.state.terminated.exitCode === 0) succeeded++;
      } else if (run.lastState.terminated) running++;
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
        return { name: c.name, state: { waiting: { reason: 'ContainerCreating' } }, lastState: {}, ready: false, restartCount: 0, image: c.image ?? '', imageID: '', started: false };
      }
      let state = run.state;
      if (this.#terminal && state.waiting) {
        state = { terminated: { exitCode: 137, reason: 'ContainerStatusUnknown', message: terminalReason, startedAt: null, finishedAt: null } };
      }
      const containerID = state.terminated?.containerID ?? (run.dockerId ? `docker://${run.dockerId}` : undefined);
      return {
        name: run.name,
        state,
        lastState: run.lastState,
        ready: state.running !== undefined,
        restartCount: run.restartCount,
        image: run.image,
        imageID: run.imageID,
        ...(containerID ? { containerID } : {}),
        started: state.running !== undefined,
      };
    });
  }

  #status(previous: PodStatus | undefined): PodStatus {
    const now = nowSeconds();
    const phase = this.#phase();
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

  /** Writes the pod's status to the store when it changed. */
  #publish(): void {
    if (this.#destroyed) return;
    const { store } = this.#deps;
    store.modify('pods', this.#pod.metadata.namespace, this.#podName(), (obj) => {
      if (obj.metadata.uid !== this.uid) return;
      const pod = obj as Pod;
      pod.status = this.#status(pod.status);
    });
  }
}
