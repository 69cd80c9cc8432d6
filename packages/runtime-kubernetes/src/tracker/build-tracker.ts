/**
 * The state of one build's pod: its uid, phase and containers, fed by the worker's pod watch and
 * the pod's events, with the pending timeout and the pod's disappearance. The events are listed only
 * when something needs explaining (a failing wait, a start failure, a slow start, a failed pod, the
 * pending timeout): a build that runs as it should lists none (issue 25 item 7).
 */
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import type { Context } from '@berth/context';
import type { RuntimeEvent } from '@berth/runtime';
import { waitUntil } from './wait-until.ts';
import type { Where } from '../errors.ts';
import { isPullEvent, WAITING_REASONS } from '../pull-failures.ts';
import { ContainerTracker, START_FAILURE_LIST_BOUND_MS, START_FAILURE_SETTLE_MS } from './container-tracker.ts';
import { PodEventLister, type PodEventSource } from './pod-events.ts';

/** How long the pending timeout waits for the pod's events before saying why the pod stayed Pending. */
const PENDING_EVENTS_BOUND_MS = 5_000;

/**
 * When a step asked to run and not started yet has its pod's events listed (the kubelet's Pulling
 * says why it waits): this long after the request, then three times as long after each list, at
 * most {@link SLOW_START_MAX_MS} apart. Steps start within a few seconds (a pause → step swap takes
 * about 2 s on a real kubelet), so a normal build reaches none of these.
 */
export const SLOW_START_FIRST_MS = 10_000;
const SLOW_START_MAX_MS = 300_000;

/** Settings of a {@link BuildTracker}. */
export interface BuildTrackerOptions {
  buildId: string;
  podName: string;
  pauseImage: string;
  pullGraceMs: number;
  pendingTimeoutMs: number;
  /** The first slow-start list, ms after the step's request (default {@link SLOW_START_FIRST_MS}; tests shorten it). */
  slowStartMs?: number | undefined;
  /** Receives Kubernetes events of the pod as `notice`s. */
  onEvent?: ((event: RuntimeEvent) => void) | undefined;
}

/** `spec.containers{name}` → `name`. */
const FIELD_PATH = /^spec\.(?:initContainers|containers)\{(.+)\}$/;

function timeOf(value: unknown): number | undefined {
  if (value instanceof Date) return value.getTime();
  if (typeof value === 'string' && value !== '') {
    const t = Date.parse(value);
    return Number.isNaN(t) ? undefined : t;
  }
  return undefined;
}

/**
 * True once the node has the pod's sandbox: the pending timeout is for pods no node starts
 * (unschedulable, a stalled kubelet), not for the image pulls that follow while the pod is still
 * Pending (the kubelet pulls one image after another). PodReadyToStartContainers is True once the
 * sandbox exists (pkg/kubelet/status/generate.go, GeneratePodReadyToStartContainersCondition); on
 * clusters without that condition, a container that runs or ran says the same.
 */
function sandboxReady(pod: V1Pod): boolean {
  const status = pod.status;
  if (status?.conditions?.some((c) => c.type === 'PodReadyToStartContainers' && c.status === 'True')) return true;
  return (status?.containerStatuses ?? []).some((c) => c.state?.running !== undefined || c.state?.terminated !== undefined);
}

/**
 * Tracks one build pod and its containers. Created by setupBuild, so it is in place before the pod
 * exists: whatever order the executor calls the other methods in, no update is missed.
 *
 * Gotcha: a pod of the same name with another uid is not this build's pod (it was deleted and
 * recreated); once the uid is known, such a pod counts as this pod's deletion.
 */
export class BuildTracker {
  readonly options: BuildTrackerOptions;
  readonly buildId: string;
  readonly podName: string;
  readonly #byName = new Map<string, ContainerTracker>();
  readonly #byId = new Map<string, ContainerTracker>();
  /** The uid the API server gave the pod at creation. */
  uid: string | undefined;
  /** The latest (trimmed) pod object. */
  pod: V1Pod | undefined;
  /** Set when the pod create request went out. */
  createdAt: number | undefined;
  /** True once the informer has reported the pod. */
  seen = false;
  /** True once the pod is known to be gone (deleted, or replaced by another uid). */
  gone = false;
  /** Why the whole build failed (pending timeout, eviction, deletion), if it did. */
  failure: string | undefined;
  #pendingTimer: NodeJS.Timeout | undefined;
  readonly #seenEvents = new Set<string>();
  readonly #goneListeners = new Set<() => void>();
  #lastWarning: string | undefined;
  readonly #events = new PodEventLister((event) => this.observeEvent(event));
  /** Per container, the failing waiting reasons its events were listed for (see #listEventsIfNeeded). */
  readonly #listedFor = new Map<ContainerTracker, Set<string>>();
  /** Per container, whether a start failure's settle was listed for (once per settle). */
  readonly #listedSettle = new Map<ContainerTracker, boolean>();
  /** Per container asked to run and not started yet, its next slow-start list. */
  readonly #slowStart = new Map<ContainerTracker, NodeJS.Timeout>();
  #listedEnd = false;

  constructor(options: BuildTrackerOptions) {
    this.options = options;
    this.buildId = options.buildId;
    this.podName = options.podName;
  }

  /** Adds a tracker for the container `id` named `name` in the pod (replacing an earlier one). */
  addContainer(id: string, name: string): ContainerTracker {
    const previous = this.#byId.get(id);
    if (previous) {
      previous.dispose();
      this.#stopSlowStart(previous);
    }
    const tracker = new ContainerTracker({ id, name, pauseImage: this.options.pauseImage, pullGraceMs: this.options.pullGraceMs });
    this.#byId.set(id, tracker);
    this.#byName.set(name, tracker);
    tracker.onChange(() => this.#watchStart(tracker));
    return tracker;
  }

  /** The tracker of the container `id`, if it belongs to this build. */
  container(id: string): ContainerTracker | undefined {
    return this.#byId.get(id);
  }

  /** Every container tracker. */
  containers(): ContainerTracker[] {
    return [...this.#byId.values()];
  }

  /**
   * Sets where the pod's events are listed from (the PodTracker's list by pod name), or none (a watch
   * feeds {@link observeEvent}, or nothing does).
   */
  useEventSource(source: PodEventSource | undefined): void {
    this.#events.use(source);
  }

  /** Marks the pod as being created now and starts the pending timeout. */
  markCreating(now = Date.now()): void {
    this.createdAt = now;
    this.#startPendingTimer();
  }

  /** Records the uid of the pod the API server created. */
  markCreated(uid: string | undefined): void {
    if (uid) this.uid = uid;
  }

  /** Feeds a pod update (the pod's current state). */
  observePod(pod: V1Pod): void {
    if (this.gone) return;
    const uid = pod.metadata?.uid;
    if (this.uid !== undefined && uid !== undefined && uid !== this.uid) {
      this.#markGone(`pod ${this.podName} was deleted and another pod of that name (uid ${uid}) took its place`);
      return;
    }
    if (this.uid === undefined && uid !== undefined && this.createdAt !== undefined) this.uid = uid;
    this.pod = pod;
    this.seen = true;
    const status = pod.status ?? {};
    for (const containerStatus of status.containerStatuses ?? []) this.#byName.get(containerStatus.name)?.observe(containerStatus);
    const phase = status.phase;
    if ((phase !== undefined && phase !== 'Pending') || sandboxReady(pod)) this.#clearPendingTimer();
    // A failed pod that cut a step short, or says why of its own (Evicted, DeadlineExceeded), needs
    // explaining; one whose steps all ended by themselves is explained by their exit codes.
    const failedPod = phase === 'Failed' && (Boolean(status.reason) || this.containers().some((c) => c.requestedAt !== undefined && !c.finished));
    if (phase === 'Failed' || phase === 'Succeeded') {
      const why = [status.reason, status.message].filter(Boolean).join(': ');
      this.#failUnfinished(`pod ${this.podName} ${phase === 'Failed' ? 'failed' : 'ended'}${why ? ` (${why})` : ''}`);
    }
    this.#listEventsIfNeeded(failedPod);
  }

  /**
   * Lists the pod's events only when something needs explaining, never per step: each list scans
   * every event of the namespace on the apiserver (its watch cache has no index by involved object),
   * so a build that runs as it should lists none. It lists when a container waits for a reason that
   * fails steps (once per reason: the kubelet's Failed event has the whole pull error), when its
   * start failed (the event is all that says why: the settle waits for that list, at most
   * {@link START_FAILURE_LIST_BOUND_MS}, and lists again before it ends), once when the pod
   * failed while a step was unfinished or with a reason of its own, and — from elsewhere — before the
   * pending timeout and while a requested step is slow to start ({@link SLOW_START_FIRST_MS}). Events
   * of a build that needed no explaining (Scheduled, Pulled, Created, Started) are not reported.
   */
  #listEventsIfNeeded(failedPod: boolean): void {
    let needed = false;
    const settlers: ContainerTracker[] = [];
    for (const container of this.#byId.values()) {
      const reason = container.waiting?.reason;
      if (reason !== undefined && WAITING_REASONS[reason] !== undefined && !container.finished) {
        const listed = this.#listedFor.get(container) ?? new Set<string>();
        this.#listedFor.set(container, listed);
        if (!listed.has(reason)) {
          listed.add(reason);
          needed = true;
        }
      }
      const settling = container.settling;
      if (settling && !this.#listedSettle.get(container)) {
        settlers.push(container);
        this.#events.refreshLater(START_FAILURE_SETTLE_MS / 2);
      }
      this.#listedSettle.set(container, settling);
    }
    if (failedPod && !this.#listedEnd) {
      this.#listedEnd = true;
      needed = true;
    }
    if (settlers.length > 0) {
      // The settle waits for this list when the apiserver answers after it (a namespace of many events).
      const list = this.#events.refresh(START_FAILURE_LIST_BOUND_MS);
      for (const container of settlers) container.settleAfter(list);
    } else if (needed) {
      void this.#events.refresh();
    }
  }

  /**
   * Called on every change of `container`: while its step was asked to run and has not started (the
   * kubelet pulls its image, or the pod waits for its node), lists the pod's events
   * {@link SLOW_START_FIRST_MS} after the request, then at growing intervals, so the step's log says
   * why it has not started yet; not while it waits for a reason that fails steps (listed for already).
   */
  #watchStart(container: ContainerTracker): void {
    if (container.requestedAt === undefined || container.started || container.finished || this.gone) {
      this.#stopSlowStart(container);
      return;
    }
    if (this.#slowStart.has(container)) return;
    const first = this.options.slowStartMs ?? SLOW_START_FIRST_MS;
    const schedule = (wait: number, gap: number): void => {
      this.#slowStart.set(
        container,
        setTimeout(() => {
          if (container.started || container.finished || this.gone) {
            this.#slowStart.delete(container);
            return;
          }
          // A wait for a reason that fails steps was listed for already (#listEventsIfNeeded), and its grace ends it.
          const reason = container.waiting?.reason;
          if (reason === undefined || WAITING_REASONS[reason] === undefined) void this.#events.refresh();
          const next = Math.min(gap * 3, SLOW_START_MAX_MS);
          schedule(next, next);
        }, wait),
      );
    };
    schedule(Math.max(0, container.requestedAt + first - Date.now()), first);
  }

  #stopSlowStart(container: ContainerTracker): void {
    clearTimeout(this.#slowStart.get(container));
    this.#slowStart.delete(container);
  }

  /** Feeds a pod deletion. */
  observePodDeleted(pod: V1Pod): void {
    const uid = pod.metadata?.uid;
    if (this.uid !== undefined && uid !== undefined && uid !== this.uid) return;
    if (this.createdAt === undefined && !this.seen) return;
    // Statuses in the final object may carry exits we have not seen yet.
    if (!this.gone) for (const containerStatus of pod.status?.containerStatuses ?? []) this.#byName.get(containerStatus.name)?.observe(containerStatus);
    this.#markGone(`pod ${this.podName} was deleted`);
  }

  /** Called after a full list of the informer's scope: a pod seen before and absent now is gone. */
  observeAbsent(): void {
    if (this.seen) this.#markGone(`pod ${this.podName} was deleted`);
  }

  /** Feeds a Kubernetes event whose involved object is this pod. */
  observeEvent(event: CoreV1Event): void {
    const involved = event.involvedObject;
    if (this.uid !== undefined && involved.uid && involved.uid !== this.uid) return;
    const key = `${event.metadata?.uid ?? event.metadata?.name ?? ''}/${event.count ?? 0}/${event.message ?? ''}`;
    if (this.#seenEvents.has(key)) return;
    this.#seenEvents.add(key);
    const reason = event.reason ?? '';
    const message = event.message ?? '';
    const at = timeOf(event.lastTimestamp) ?? timeOf(event.eventTime) ?? timeOf(event.firstTimestamp);
    const match = FIELD_PATH.exec(involved.fieldPath ?? '');
    const container = match?.[1] === undefined ? undefined : this.#byName.get(match[1]);
    if (event.type === 'Warning') this.#lastWarning = `${reason}: ${message}`;
    if (container && isPullEvent(reason, message)) container.observePullEvent(reason, message);
    if (!this.options.onEvent) return;
    if (container) {
      // Events about the pause container (pulled, created, started) are not the step's.
      if (container.requestedAt === undefined) return;
      if (at !== undefined && at < container.requestedAt - 2_000) return;
    } else if (match) {
      return;
    }
    try {
      this.options.onEvent({ type: 'notice', buildId: this.buildId, containerId: container?.id ?? '', reason, message });
    } catch {
      // onEvent must not throw; a throwing one must not break tracking.
    }
  }

  /** Resolves once the pod is gone; rejects with the ctx's error when ctx ends first. */
  waitGone(ctx: Context, where: Where): Promise<void> {
    return waitUntil(ctx, where, this.#goneListeners, () => this.gone);
  }

  /** Clears every timer of the build and its containers. */
  dispose(): void {
    this.#clearPendingTimer();
    this.#events.dispose();
    for (const timer of this.#slowStart.values()) clearTimeout(timer);
    this.#slowStart.clear();
    for (const container of this.#byId.values()) container.dispose();
  }

  #markGone(why: string): void {
    if (this.gone) return;
    this.gone = true;
    this.#clearPendingTimer();
    this.#failUnfinished(why);
    for (const listener of [...this.#goneListeners]) listener();
  }

  #failUnfinished(why: string): void {
    this.failure ??= why;
    for (const container of this.#byId.values()) container.fail('ContainerFailed', why);
  }

  #startPendingTimer(): void {
    this.#clearPendingTimer();
    const stillPending = (): boolean =>
      !this.gone && (this.pod?.status?.phase === undefined || this.pod.status.phase === 'Pending') && !(this.pod && sandboxReady(this.pod));
    const timer: NodeJS.Timeout = setTimeout(() => {
      if (!stillPending()) {
        this.#pendingTimer = undefined;
        return;
      }
      // The scheduler's and the kubelet's warnings (FailedScheduling, FailedMount, …) say why.
      void this.#events.refresh(PENDING_EVENTS_BOUND_MS).then(() => {
        // Cleared or restarted meanwhile (the pod left Pending, was deleted, or is created again).
        if (this.#pendingTimer !== timer) return;
        this.#pendingTimer = undefined;
        if (!stillPending()) return;
        this.#failUnfinished(`pod ${this.podName} stayed Pending for ${Math.round(this.options.pendingTimeoutMs / 1000)} s${this.#pendingDiagnosis()}`);
      });
    }, this.options.pendingTimeoutMs);
    this.#pendingTimer = timer;
  }

  #clearPendingTimer(): void {
    clearTimeout(this.#pendingTimer);
    this.#pendingTimer = undefined;
  }

  #pendingDiagnosis(): string {
    const parts: string[] = [];
    const status = this.pod?.status;
    if (!this.seen) parts.push('the pod was never reported by the API server');
    for (const condition of status?.conditions ?? []) {
      if (condition.status !== 'True' && (condition.reason || condition.message))
        parts.push(`${condition.type} ${condition.reason ?? ''}${condition.message ? `: ${condition.message}` : ''}`.trim());
    }
    for (const c of status?.containerStatuses ?? []) {
      const waiting = c.state?.waiting;
      if (waiting?.reason && waiting.reason !== 'ContainerCreating') parts.push(`${c.name} ${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''}`);
    }
    if (this.#lastWarning) parts.push(`last warning ${this.#lastWarning}`);
    return parts.length > 0 ? ` (${parts.join('; ')})` : '';
  }
}
