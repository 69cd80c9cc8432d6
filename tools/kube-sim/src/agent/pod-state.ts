// What one pod worker knows about its pod: the pod object, each container's run, the sandbox,
// the Docker objects it made and where the pod is in its life. Shared by the pod worker's parts
// (container starts, image step, status, Docker objects).

import type Docker from 'dockerode';
import { setTimeout as delay } from 'node:timers/promises';
import { type Faults } from '../faults.ts';
import { type Store } from '../store.ts';
import { type ContainerSpec, type ContainerState, type Pod } from '../types.ts';
import { type EventRecorder, type EventSpec } from './event-recorder.ts';
import { type ImagePuller } from './image-puller.ts';
import { type KubeletBehaviour, type PullBackoff } from './kubelet-behaviour.ts';

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
export interface RunView {
  state: ContainerState;
  lastState: ContainerState;
  restartCount: number;
  image: string;
  imageID: string;
  dockerId?: string;
}

/** One container of the pod, across its instances: what its status shows now (image: the image reported), and more. */
export interface ContainerRun extends RunView {
  name: string;
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

/** The pod sandbox (pause container) and its network. */
interface Sandbox {
  id: string;
  ip: string;
  gateway: string;
}

/** The state of one pod on the node, and the helpers every part of its worker uses. */
export class PodState {
  readonly deps: WorkerDeps;
  /** The pod's uid ('' when it has none). */
  readonly uid: string;
  /** The newest version of the pod object (same uid). */
  pod: Pod;
  readonly runs = new Map<string, ContainerRun>();
  sandbox: Sandbox | undefined;
  /** Every Docker container made for the pod (removed at cleanup). */
  readonly dockerIds = new Set<string>();
  /** Every Docker volume made for the pod's emptyDirs (removed at cleanup). */
  readonly volumes: string[] = [];
  startTimeMs: number | undefined;
  /** The pod's final phase, once decided. */
  terminal: { phase: 'Succeeded' | 'Failed'; reason?: string; message?: string } | undefined;
  /** Killed or being deleted: nothing new starts. */
  stopping = false;
  /** Gone: no more events or status writes. */
  destroyed = false;
  /** Aborted when the pod is killed: ends simulated pulls. */
  readonly abort = new AbortController();
  /** When the pod worker's last sync ended (podWorkerLoop's `lastSyncTime`), in ms since the epoch. */
  lastSyncMs = 0;

  constructor(deps: WorkerDeps, pod: Pod) {
    this.deps = deps;
    this.pod = pod;
    this.uid = pod.metadata.uid ?? '';
    for (const c of pod.spec.containers) {
      this.runs.set(c.name, {
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
  }

  podName(): string {
    return this.pod.metadata.name ?? '';
  }

  spec(name: string): ContainerSpec | undefined {
    return this.pod.spec.containers.find((c) => c.name === name);
  }

  /** Records an event on the pod (none once destroyed). */
  event(spec: EventSpec): void {
    if (this.destroyed) return;
    this.deps.recorder.record(this.pod, spec);
  }

  /** Records an event on one container of the pod. */
  containerEvent(run: ContainerRun, type: EventSpec['type'], reason: string, message: string): void {
    this.event({ type, reason, message, fieldPath: `spec.containers{${run.name}}` });
  }

  /** Waits while the node agent is stalled; a kill or destroy ends the wait. */
  async waitUnstalled(): Promise<void> {
    while (this.deps.faults.agentStalled && !this.destroyed && !this.stopping) await delay(100);
  }

  /** A sync of the pod ended now (a start, a sync result written, a relist that found a change). */
  synced(): void {
    this.lastSyncMs = Date.now();
  }

  /**
   * Rule 10: before a sync, the pod worker waits until the pod cache is newer than its last sync
   * (kubernetes/kubernetes pkg/kubelet/pod_workers.go podWorkerLoop: "wait until we have observed
   * status changes since the last syncPod method completed", `p.podCache.GetNewerThan(pod.UID,
   * lastSyncTime)`). The cache turns newer only when a PLEG relist that started after that time
   * ends (pkg/kubelet/container/cache.go getIfNewerThan; pkg/kubelet/pleg/generic.go relist takes
   * `timestamp := g.clock.Now()` first and ends with `g.cache.UpdateTime(timestamp)`), every
   * second (kubelet.go genericPlegRelistPeriod). So a patch that comes less than a relist after
   * the pod's last sync is acted on at the next relist tick, up to 1 s later; one that comes
   * later is acted on at once. Resolves at once when the pod is killed.
   */
  async waitForNewerCache(): Promise<void> {
    const { statusRelistMs: period, syncWaitsForRelist } = this.deps.behaviour;
    if (!syncWaitsForRelist || period <= 0) return;
    // The node's relist ticks at multiples of the period (StatusPublisher.publish).
    const nextRelist = (Math.floor(this.lastSyncMs / period) + 1) * period;
    const wait = nextRelist - Date.now();
    if (wait > 0) await this.pause(wait);
  }

  /** Sleeps `ms` unless the pod is killed first. */
  async pause(ms: number): Promise<void> {
    await delay(ms, undefined, { signal: this.abort.signal }).catch(() => undefined);
  }
}
