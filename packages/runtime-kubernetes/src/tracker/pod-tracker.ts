/**
 * The worker's view of its pods: ONE label-scoped pod watch per worker (whatever the number of
 * builds and steps), dispatching to a {@link BuildTracker} per build, and lists of one pod's events
 * when its build tracker asks (only when something needs explaining: none for a build that runs as
 * it should).
 */
import type { CoreV1Event, RequestContext, V1Pod } from '@kubernetes/client-node';
import { LABELS, labelValue } from '@berth/runtime';
import type { KubeApi } from '../kube-api.ts';
import type { TrackerStrategy } from '../options.ts';
import type { BuildTracker } from './build-tracker.ts';
import type { ContainerTracker } from './container-tracker.ts';
import { Informer, type InformerStats, trimEvent, trimPod } from './informer.ts';

/** Settings of a {@link PodTracker}. */
export interface PodTrackerOptions {
  workerId: string;
  silenceMs: number;
  /** client-node's watch inactivity timeout (see KubernetesRuntimeOptions.watchInactivityTimeoutMs). */
  inactivityTimeoutMs?: number;
  backoffMaxMs: number;
  /** `worker` (the design), or the benchmark's comparison modes `build` and `container`. */
  strategy: TrackerStrategy;
  /** Receives informer failures (restarts follow by themselves). */
  onError?: (source: string, error: unknown) => void;
}

/**
 * Dispatches pod updates and events to the build trackers registered with {@link PodTracker.attach}.
 *
 * With the `worker` strategy (the default and the only one meant for use), one pod informer selects
 * `berth.dev/worker=<worker>` from {@link PodTracker.start} to {@link PodTracker.stop}, and a build's
 * pod events are listed by `involvedObject.name` when its tracker needs them to explain something
 * (a failing wait, a start failure, a slow start, a failed pod, the pending timeout). There is no
 * events watch: events carry no labels to select a worker's pods by, so a namespace-wide one would
 * carry every worker's events to every worker (W × E in a namespace shared by W workers, issue 25
 * item 7). Nor is there a list per step: the apiserver's watch cache has no index of events by
 * involved object, so each list scans every event of the namespace.
 * The `build` strategy runs one pods and events informer pair per build (Vela's design) and
 * `container` one pod watch per running container (the design before Vela's informers); the
 * benchmark compares them.
 */
export class PodTracker {
  readonly api: KubeApi;
  readonly options: PodTrackerOptions;
  readonly #builds = new Map<string, BuildTracker>();
  readonly #informers = new Set<Informer<V1Pod> | Informer<CoreV1Event>>();
  readonly #perBuild = new Map<BuildTracker, Informer<V1Pod | CoreV1Event>[]>();
  readonly #perContainer = new Map<ContainerTracker, { informer: Informer<V1Pod>; unsubscribe: () => void }>();
  #pods: Informer<V1Pod> | undefined;
  #started = false;
  /** Lists of pod events issued, and the events they returned (the benchmark and tests read them; 0 lists for builds that needed no explaining). */
  readonly eventLists = { lists: 0, events: 0 };
  /** Stats of informers that were stopped (the benchmark sums them). */
  readonly retired: InformerStats = { lists: 0, watches: 0, restarts: 0, events: 0, bookmarks: 0 };

  constructor(api: KubeApi, options: PodTrackerOptions) {
    this.api = api;
    this.options = options;
  }

  /** The label selector of every pod this worker created. */
  get workerSelector(): string {
    return `${LABELS.worker}=${labelValue(this.options.workerId)}`;
  }

  /** Starts the worker's informers (with the `worker` strategy) and waits for their first list. Idempotent. */
  async start(signal?: AbortSignal): Promise<void> {
    if (!this.#started) {
      this.#started = true;
      if (this.options.strategy === 'worker') {
        this.#pods = this.#podInformer('pods', this.workerSelector, undefined, () => [...this.#builds.values()]);
        this.#pods.start();
      }
    }
    const waits = [this.#pods?.waitForSync(true)].filter((p): p is Promise<void> => p !== undefined);
    if (waits.length === 0) return;
    const aborted = new Promise<never>((_, reject) => {
      const fail = (): void => reject(signal?.reason instanceof Error ? signal.reason : new Error(String(signal?.reason)));
      if (signal?.aborted) fail();
      signal?.addEventListener('abort', fail, { once: true });
    });
    aborted.catch(() => undefined);
    await Promise.race([Promise.all(waits), aborted]);
  }

  /** Stops every informer. Idempotent. */
  stop(): void {
    for (const informer of this.#informers) this.#retire(informer);
    this.#informers.clear();
    this.#perBuild.clear();
    for (const { unsubscribe } of this.#perContainer.values()) unsubscribe();
    this.#perContainer.clear();
    this.#pods = undefined;
  }

  /** Registers a build's tracker: from now on its pod's updates reach it. */
  attach(build: BuildTracker): void {
    const previous = this.#builds.get(build.podName);
    if (previous && previous !== build) this.detach(previous);
    this.#builds.set(build.podName, build);
    // A pod already in the cache (e.g. a build set up again) is reported at once.
    const cached = this.#pods?.get(build.podName, this.api.namespace);
    if (cached) build.observePod(cached);
    if (this.options.strategy === 'build') {
      const selector = `${this.workerSelector},${LABELS.build}=${labelValue(build.buildId)}`;
      const pods = this.#podInformer(`pods of ${build.podName}`, selector, undefined, () => [build]);
      const events = this.#eventInformer(`events of ${build.podName}`, `involvedObject.kind=Pod,involvedObject.name=${build.podName}`);
      this.#perBuild.set(build, [pods, events]);
      pods.start();
      events.start();
    } else if (this.options.strategy === 'worker') {
      build.useEventSource(() => this.#listEvents(build.podName));
    }
  }

  /** Unregisters a build's tracker and stops what was started for it. */
  detach(build: BuildTracker): void {
    if (this.#builds.get(build.podName) === build) this.#builds.delete(build.podName);
    build.useEventSource(undefined);
    for (const informer of this.#perBuild.get(build) ?? []) this.#retire(informer);
    this.#perBuild.delete(build);
    for (const container of build.containers()) this.containerDone(container);
  }

  /** Called when a container starts to run: the `container` strategy opens its watch here. */
  containerStarted(build: BuildTracker, container: ContainerTracker): void {
    if (this.options.strategy !== 'container' || this.#perContainer.has(container)) return;
    const informer = this.#podInformer(`pod of ${container.name}`, this.workerSelector, `metadata.name=${build.podName}`, () => [build]);
    const unsubscribe = container.onChange(() => {
      if (container.finished) this.containerDone(container);
    });
    this.#perContainer.set(container, { informer, unsubscribe });
    informer.start();
  }

  /** Called when a container is done with: the `container` strategy closes its watch. */
  containerDone(container: ContainerTracker): void {
    const entry = this.#perContainer.get(container);
    if (!entry) return;
    this.#perContainer.delete(container);
    entry.unsubscribe();
    this.#retire(entry.informer);
  }

  /** The build tracker of pod `name`, if attached. */
  build(podName: string): BuildTracker | undefined {
    return this.#builds.get(podName);
  }

  /** Sums the stats of every informer, running or stopped. */
  stats(): InformerStats & { open: number; cached: number } {
    const total = { ...this.retired, open: 0, cached: 0 };
    for (const informer of this.#informers) {
      for (const key of ['lists', 'watches', 'restarts', 'events', 'bookmarks'] as const) total[key] += informer.stats[key];
      if (informer.running) total.open++;
      total.cached += informer.list().length;
    }
    return total;
  }

  #retire(informer: Informer<V1Pod> | Informer<CoreV1Event> | Informer<V1Pod | CoreV1Event>): void {
    informer.stop();
    if (this.#informers.delete(informer)) {
      for (const key of ['lists', 'watches', 'restarts', 'events', 'bookmarks'] as const) this.retired[key] += informer.stats[key];
    }
  }

  #configure(): ((context: RequestContext) => void) | undefined {
    const dispatcher = this.api.dispatcher;
    return dispatcher ? (context) => context.setDispatcher(dispatcher) : undefined;
  }

  #podInformer(name: string, labelSelector: string, fieldSelector: string | undefined, scope: () => BuildTracker[]): Informer<V1Pod> {
    const { api } = this;
    const namespace = api.namespace;
    const informer = new Informer<V1Pod>(
      api.kc,
      {
        name,
        path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`,
        labelSelector,
        ...(fieldSelector ? { fieldSelector } : {}),
        list: (signal) => api.core.listNamespacedPod({ namespace, labelSelector, ...(fieldSelector ? { fieldSelector } : {}) }, api.requestOptions(signal)),
        trim: trimPod,
        silenceMs: this.options.silenceMs,
        ...(this.options.inactivityTimeoutMs === undefined ? {} : { inactivityTimeoutMs: this.options.inactivityTimeoutMs }),
        backoffMaxMs: this.options.backoffMaxMs,
        listTimeoutMs: api.requestTimeoutMs,
        ...(this.#configure() ? { configureRequest: this.#configure() } : {}),
      },
      {
        upsert: (pod) => this.#builds.get(pod.metadata?.name ?? '')?.observePod(pod),
        remove: (pod) => this.#builds.get(pod.metadata?.name ?? '')?.observePodDeleted(pod),
        synced: (pods) => {
          const present = new Set(pods.map((pod) => pod.metadata?.name));
          for (const build of scope()) if (!present.has(build.podName)) build.observeAbsent();
        },
        error: (error) => this.options.onError?.(name, error),
      },
    );
    this.#informers.add(informer);
    return informer;
  }

  /** Lists the events of pod `podName` (the selector needs no watch, and no per-build state on the server). */
  async #listEvents(podName: string): Promise<readonly CoreV1Event[]> {
    const { api } = this;
    this.eventLists.lists++;
    try {
      const list = await api.core.listNamespacedEvent(
        { namespace: api.namespace, fieldSelector: `involvedObject.kind=Pod,involvedObject.name=${podName}` },
        api.requestOptions(AbortSignal.timeout(api.requestTimeoutMs)),
      );
      const items = (list.items ?? []).map((event) => trimEvent(event));
      this.eventLists.events += items.length;
      return items;
    } catch (error) {
      this.options.onError?.(`events of ${podName}`, error);
      return [];
    }
  }

  #eventInformer(name: string, fieldSelector: string): Informer<CoreV1Event> {
    const { api } = this;
    const namespace = api.namespace;
    const informer = new Informer<CoreV1Event>(
      api.kc,
      {
        name,
        path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`,
        fieldSelector,
        list: (signal) => api.core.listNamespacedEvent({ namespace, fieldSelector }, api.requestOptions(signal)),
        trim: trimEvent,
        // Events are read once, never looked up: caching them would hold every event of every pod in a
        // shared namespace (issue 14). The BuildTracker keeps what its pod needs.
        cache: false,
        silenceMs: this.options.silenceMs,
        ...(this.options.inactivityTimeoutMs === undefined ? {} : { inactivityTimeoutMs: this.options.inactivityTimeoutMs }),
        backoffMaxMs: this.options.backoffMaxMs,
        listTimeoutMs: api.requestTimeoutMs,
        ...(this.#configure() ? { configureRequest: this.#configure() } : {}),
      },
      {
        upsert: (event) => this.#builds.get(event.involvedObject?.name ?? '')?.observeEvent(event),
        remove: () => undefined,
        error: (error) => this.options.onError?.(name, error),
      },
    );
    this.#informers.add(informer);
    return informer;
  }
}
