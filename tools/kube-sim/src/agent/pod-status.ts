// The pod status as the kubelet composes it (phase, conditions, container statuses) and when it
// is written: container starts and exits at the PLEG relist, sync results at once.

import { nowSeconds, type ContainerStatus, type Pod, type PodCondition, type PodStatus } from '../types.ts';
import { type ContainerRun, type PodState, type RunView } from './pod-state.ts';

const terminalReason = 'The container could not be located when the pod was terminated';

/** The pod phase from the published container states (`views`) or the real ones. */
function podPhase(podState: PodState, views: boolean): PodStatus['phase'] {
  if (podState.terminal) return podState.terminal.phase;
  const phase = containersPhase(podState, views);
  // Delay transitioning a pod to a terminal phase until the pod worker has stopped it: the status
  // manager keeps the old phase while the pod "could have running containers"
  // (pkg/kubelet/status/status_manager.go mergePodStatus, couldHaveRunningContainers). On a real
  // kubelet every container shows terminated about a second before the phase turns final.
  return phase === 'Succeeded' || phase === 'Failed' ? 'Running' : phase;
}

/** The phase the containers' states give (pkg/kubelet/kubelet_pods.go getPhase), before the status manager's delay. */
export function containersPhase(podState: PodState, views: boolean): PodStatus['phase'] {
  if (!podState.sandbox) return 'Pending';
  let waiting = 0;
  let running = 0;
  let stopped = 0;
  let succeeded = 0;
  for (const run of podState.runs.values()) {
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
    if (podState.pod.spec.restartPolicy === 'Always') return 'Running';
    if (stopped === succeeded) return 'Succeeded';
    return 'Failed';
  }
  return 'Pending';
}

function containerStatuses(podState: PodState): ContainerStatus[] {
  return podState.pod.spec.containers.map((c) => {
    const run = podState.runs.get(c.name);
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
    if (podState.terminal && state.waiting) {
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

function podStatus(podState: PodState, previous: PodStatus | undefined): PodStatus {
  const now = nowSeconds();
  const phase = podPhase(podState, true);
  const statuses = containerStatuses(podState);
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
      condition('PodReadyToStartContainers', podState.sandbox !== undefined && !done),
      condition('Initialized', true),
      condition('Ready', ready, ready ? undefined : notReady[0], ready ? undefined : notReady[1]),
      condition('ContainersReady', ready, ready ? undefined : notReady[0], ready ? undefined : notReady[1]),
      condition('PodScheduled', true),
    ],
    hostIP: podState.sandbox?.gateway || '127.0.0.1',
    hostIPs: [{ ip: podState.sandbox?.gateway || '127.0.0.1' }],
    startTime: nowSeconds(new Date(podState.startTimeMs ?? Date.now())),
    containerStatuses: statuses,
  };
  if (podState.sandbox?.ip) {
    status.podIP = podState.sandbox.ip;
    status.podIPs = [{ ip: podState.sandbox.ip }];
  }
  if (podState.terminal?.reason) {
    status.reason = podState.terminal.reason;
    status.message = podState.terminal.message ?? '';
  }
  return status;
}

/** What the status shows of a container now. */
function snapshot(run: ContainerRun): RunView {
  return {
    state: structuredClone(run.state),
    lastState: structuredClone(run.lastState),
    restartCount: run.restartCount,
    image: run.image,
    imageID: run.imageID,
    ...(run.dockerId ? { dockerId: run.dockerId } : {}),
  };
}

/** Writes the pod's status to the store: at once for sync results, at the next relist for container state changes. */
export class StatusPublisher {
  readonly #state: PodState;
  /** Next PLEG relist that publishes pending container state changes. */
  #relist: NodeJS.Timeout | undefined;

  constructor(state: PodState) {
    this.#state = state;
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
  publish(): void {
    if (this.#state.destroyed) return;
    const period = this.#state.deps.behaviour.statusRelistMs;
    if (period <= 0) {
      this.flush();
      return;
    }
    // One relist clock for the node: ticks at multiples of the period.
    this.#relist ??= setTimeout(
      () => {
        this.#relist = undefined;
        this.flush();
        // The relist's events trigger a sync of the pod (rule 10: the next one waits for a newer relist).
        this.#state.synced();
      },
      period - (Date.now() % period),
    );
  }

  /** A sync result (a waiting reason, the sandbox, the start time): written at once, with `run`'s state. */
  publishNow(run?: ContainerRun): void {
    if (run) run.view = snapshot(run);
    this.#write();
    this.#state.synced();
  }

  /** A relist: every container's state as it is now, written at once. */
  flush(): void {
    clearTimeout(this.#relist);
    this.#relist = undefined;
    for (const run of this.#state.runs.values()) run.view = snapshot(run);
    this.#write();
  }

  /** Writes the pod's status to the store when it changed. */
  #write(): void {
    if (this.#state.destroyed) return;
    const { store } = this.#state.deps;
    store.modify('pods', this.#state.pod.metadata.namespace, this.#state.podName(), (obj) => {
      if (obj.metadata.uid !== this.#state.uid) return;
      const pod = obj as Pod;
      pod.status = podStatus(this.#state, pod.status);
    });
  }

  /** Drops the pending relist (the pod is gone). */
  cancel(): void {
    clearTimeout(this.#relist);
  }
}
