// The fake node: a one-node "scheduler" that binds every new pod to it, and the kubelet part
// that runs each bound pod in Docker through a PodWorker.

import type Docker from 'dockerode';
import { type Faults } from '../faults.ts';
import { type Store, type StoreEvent } from '../store.ts';
import { type Pod } from '../types.ts';
import { instanceLabel } from './docker-spec.ts';
import { EventRecorder, type EventSpamFilter } from './event-recorder.ts';
import { ImagePuller } from './image-puller.ts';
import { type KubeletBehaviour, type PullBackoff } from './kubelet-behaviour.ts';
import { PodWorker } from './pod-worker.ts';

/** Settings of the node agent. */
export interface NodeAgentOptions {
  docker: Docker;
  store: Store;
  faults: Faults;
  instance: string;
  nodeName: string;
  pauseImage: string;
  pullBackoff: PullBackoff;
  behaviour: KubeletBehaviour;
  /** The kubelet's event spam filter, or null for none. */
  eventSpamFilter: EventSpamFilter | null;
}

/** Schedules pods onto the one fake node and runs them. */
export class NodeAgent {
  readonly #options: NodeAgentOptions;
  readonly #recorder: EventRecorder;
  readonly #puller: ImagePuller;
  readonly #workers = new Map<string, PodWorker>();
  readonly #teardowns = new Set<Promise<void>>();
  #unsubscribe: (() => void) | undefined;
  #closed = false;

  constructor(options: NodeAgentOptions) {
    this.#options = options;
    this.#recorder = new EventRecorder(options.store, options.nodeName, options.eventSpamFilter);
    this.#puller = new ImagePuller(options.behaviour.serializeImagePulls);
  }

  /** The node's name (`spec.nodeName` of every pod). */
  get nodeName(): string {
    return this.#options.nodeName;
  }

  /** Starts reacting to pod changes. */
  start(): void {
    this.#unsubscribe = this.#options.store.subscribe((event) => {
      if (event.resource !== 'pods' || this.#closed) return;
      // Never write to the store from inside a listener: defer.
      setImmediate(() => this.#onPod(event));
    });
  }

  #onPod(event: StoreEvent): void {
    if (this.#closed) return;
    const pod = event.object as Pod;
    const uid = pod.metadata.uid ?? '';
    if (event.type === 'DELETED') {
      const worker = this.#workers.get(uid);
      if (worker) {
        this.#workers.delete(uid);
        this.#track(worker.destroy());
      }
      return;
    }
    if (!pod.spec.nodeName) {
      if (event.type === 'ADDED' && !pod.metadata.deletionTimestamp) this.#schedule(pod);
      return;
    }
    if (pod.spec.nodeName !== this.#options.nodeName) return;
    let worker = this.#workers.get(uid);
    if (!worker) {
      const current = this.#options.store.get('pods', pod.metadata.namespace, pod.metadata.name ?? '');
      if (!current || current.metadata.uid !== uid) return;
      worker = new PodWorker({ ...this.#options, recorder: this.#recorder, puller: this.#puller }, current as Pod);
      this.#workers.set(uid, worker);
      worker.start();
    }
    worker.update(pod);
  }

  /**
   * The scheduler's filter for the one node: a pod whose nodeSelector the node's labels do not
   * satisfy stays Pending with PodScheduled False / Unschedulable and a FailedScheduling event, as
   * kube-scheduler reports it (pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go
   * ErrReasonPod "node(s) didn't match Pod's node affinity/selector"; the "0/N nodes are
   * available" summary and the preemption note from schedule_one.go FitError.Error and
   * pkg/scheduler/framework/preemption). Node affinity terms are not evaluated.
   */
  #unschedulable(pod: Pod): boolean {
    const labels: Record<string, string> = {
      'kubernetes.io/hostname': this.#options.nodeName,
      'kubernetes.io/os': 'linux',
      'kubernetes.io/arch': process.arch === 'arm64' ? 'arm64' : 'amd64',
    };
    const selector = pod.spec.nodeSelector ?? {};
    if (Object.entries(selector).every(([key, value]) => labels[key] === value)) return false;
    const message =
      "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.";
    const marked = this.#options.store.modify('pods', pod.metadata.namespace, pod.metadata.name ?? '', (obj) => {
      const p = obj as Pod;
      if (p.metadata.uid !== pod.metadata.uid || p.spec.nodeName) return;
      const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      p.status = {
        ...(p.status ?? { phase: 'Pending' }),
        phase: 'Pending',
        conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message, lastProbeTime: null, lastTransitionTime: now }],
      };
    });
    if (marked) this.#recorder.record(marked as Pod, { type: 'Warning', reason: 'FailedScheduling', message, component: 'default-scheduler' });
    return true;
  }

  #schedule(pod: Pod): void {
    const { store, nodeName } = this.#options;
    if (this.#unschedulable(pod)) return;
    const bound = store.modify('pods', pod.metadata.namespace, pod.metadata.name ?? '', (obj) => {
      const p = obj as Pod;
      if (p.metadata.uid !== pod.metadata.uid || p.spec.nodeName) return;
      p.spec.nodeName = nodeName;
      const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      p.status = {
        ...(p.status ?? { phase: 'Pending' }),
        conditions: [{ type: 'PodScheduled', status: 'True', lastProbeTime: null, lastTransitionTime: now }],
      };
    });
    if (bound) {
      this.#recorder.record(bound as Pod, {
        type: 'Normal',
        reason: 'Scheduled',
        message: `Successfully assigned ${pod.metadata.namespace ?? ''}/${pod.metadata.name ?? ''} to ${nodeName}`,
        component: 'default-scheduler',
      });
    }
  }

  #track(p: Promise<void>): void {
    const tracked = p.catch((err: unknown) => console.error('[kube-sim] pod teardown failed:', err)).finally(() => this.#teardowns.delete(tracked));
    this.#teardowns.add(tracked);
  }

  /** The Docker container serving pods/log for a pod's container; throws 400 ApiErrors as the API server words them. */
  logTarget(pod: Pod, container: string, previous: boolean): string {
    const worker = this.#workers.get(pod.metadata.uid ?? '');
    if (!worker) {
      // Not started yet (unscheduled, stalled agent): a fresh worker reports it as waiting.
      return new PodWorker({ ...this.#options, recorder: this.#recorder, puller: this.#puller }, pod).logTarget(container, previous);
    }
    return worker.logTarget(container, previous);
  }

  /** True while the Docker container `dockerId` is a running container of a pod (ReadLogs' isContainerRunning). */
  containerRunning(dockerId: string): boolean {
    for (const worker of this.#workers.values()) if (worker.containerRunning(dockerId)) return true;
    return false;
  }

  /** Kills every pod's containers and removes every Docker object labelled with this instance. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#unsubscribe?.();
    for (const worker of this.#workers.values()) this.#track(worker.destroy());
    this.#workers.clear();
    while (this.#teardowns.size > 0) await Promise.all([...this.#teardowns]);
    await removeInstanceObjects(this.#options.docker, this.#options.instance);
  }
}

/** Removes every container and volume labelled `berth.kube-sim/instance=<instance>`. */
export async function removeInstanceObjects(docker: Docker, instance: string): Promise<void> {
  const filters = JSON.stringify({ label: [`${instanceLabel}=${instance}`] });
  const containers = await docker.listContainers({ all: true, filters });
  await Promise.all(
    containers.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch(() => undefined),
    ),
  );
  const { Volumes: volumes } = await docker.listVolumes({ filters });
  await Promise.all(
    (volumes ?? []).map((v) =>
      docker
        .getVolume(v.Name)
        .remove()
        .catch(() => undefined),
    ),
  );
}
