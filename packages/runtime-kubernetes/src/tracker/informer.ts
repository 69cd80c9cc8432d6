/**
 * A list-watch that keeps going: client-node's `ListWatch`, wrapped so that start and stop are
 * idempotent, errors restart it with capped jittered backoff, bookmarks are requested, objects are
 * trimmed before caching, and a watch silent for too long is restarted.
 */
import { type KubeConfig, type KubernetesListObject, type KubernetesObject, ListWatch, type RequestContext, Watch } from '@kubernetes/client-node';

/** What an {@link Informer} tells its owner. */
export interface InformerHandlers<T extends KubernetesObject> {
  /** An object was added or changed (the new object). After a relist every object present is reported again. */
  upsert(object: T): void;
  /** An object is gone (the last known object). */
  remove(object: T): void;
  /**
   * A list completed: `objects` is the whole set now. Lets the owner notice what vanished while no
   * watch was open (client-node reports those only when it relists after a 410 on the same cache).
   */
  synced?(objects: readonly T[]): void;
  /** A failure that made the informer restart (for logs and tests). */
  error?(error: unknown): void;
}

/** Settings of an {@link Informer}. */
export interface InformerOptions<T extends KubernetesObject> {
  /** A short name for messages, e.g. `pods`. */
  name: string;
  /** The collection path, e.g. `/api/v1/namespaces/ns/pods`. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Lists the collection with the same selectors, aborting on `signal`. */
  list(signal: AbortSignal): Promise<KubernetesListObject<T>>;
  /** Trims an object before it is cached (drop managedFields and everything unused). */
  trim(object: T): T;
  /** Restart a watch that delivered nothing for this long. */
  silenceMs: number;
  /** The longest wait between restarts after failures. */
  backoffMaxMs: number;
  /** Bound of one list request. Default 60 000. */
  listTimeoutMs?: number;
  /** Sets the shared dispatcher on watch requests (undefined: client-node's per-request one). */
  configureRequest?: (context: RequestContext) => void;
  /**
   * `false`: hand every object to the handlers and cache none (the `build` strategy's events
   * informers: events are read once and never looked up).
   * Deletions and relist diffs are then not reported. Default true.
   */
  cache?: boolean;
  /**
   * The watch's inactivity timeout: client-node's Watch reconnects a stream that delivered nothing
   * for this long (its default, 30 s, is shorter than the API server's bookmark gap of about a minute,
   * so a quiet watch reconnected twice a minute). Default: three quarters of `silenceMs`, at least 30 s.
   */
  inactivityTimeoutMs?: number;
}

/** Counters of one informer, for tests and the benchmark. */
export interface InformerStats {
  /** Lists issued. */
  lists: number;
  /** Watch requests issued. */
  watches: number;
  /** Restarts after an error or silence. */
  restarts: number;
  /** Watch events received (bookmarks included). */
  events: number;
  bookmarks: number;
}

/** Anything an informer owns that the watch of one generation must check before acting. */
interface Generation {
  readonly id: number;
  live: boolean;
}

/**
 * client-node's Watch with `allowWatchBookmarks=true`, bound to one generation of an informer: it
 * opens no stream once that generation is stopped, aborts a stream that connected after the stop
 * (client-node's `stop()` during the initial list still opens a watch), trims objects, and reports
 * activity for the silence watchdog.
 */
class GenerationWatch<T extends KubernetesObject> extends Watch {
  readonly #generation: Generation;
  readonly #trim: (object: T) => T;
  readonly #activity: (type: string) => void;
  readonly #opened: () => void;
  readonly #divert: ((phase: string, object: T) => void) | undefined;

  constructor(
    config: KubeConfig,
    generation: Generation,
    trim: (object: T) => T,
    activity: (type: string) => void,
    opened: () => void,
    divert: ((phase: string, object: T) => void) | undefined,
    inactivityTimeoutMs: number,
  ) {
    super(config);
    this.#generation = generation;
    this.#trim = trim;
    this.#activity = activity;
    this.#opened = opened;
    this.#divert = divert;
    // A private field in client-node 2.0.1's typings (Watch.requestTimeoutMs, 30 000), read on every
    // watch() call: the only way to lengthen the inactivity timeout.
    (this as unknown as { requestTimeoutMs: number }).requestTimeoutMs = inactivityTimeoutMs;
  }

  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    if (!this.#generation.live) {
      // Stopped while listing or backing off: open nothing, and never call done (nothing to restart).
      const idle = new AbortController();
      idle.abort();
      return idle;
    }
    this.#opened();
    const trim = this.#trim;
    const activity = this.#activity;
    const generation = this.#generation;
    const divert = this.#divert;
    const controller = await super.watch(
      path,
      { ...queryParams, allowWatchBookmarks: true },
      (phase, object, watchObject) => {
        if (!generation.live) return;
        activity(phase);
        if ((phase === 'ADDED' || phase === 'MODIFIED' || phase === 'DELETED') && object && typeof object === 'object') {
          if (divert) {
            // Not cached: the owner gets the object, client-node only its resourceVersion (as a bookmark).
            divert(phase, trim(object as T));
            callback('BOOKMARK', { metadata: { resourceVersion: (object as KubernetesObject).metadata?.resourceVersion } }, watchObject);
            return;
          }
          callback(phase, trim(object as T), watchObject);
        } else {
          callback(phase, object, watchObject);
        }
      },
      (error) => {
        if (generation.live) done(error);
      },
    );
    if (!generation.live) controller.abort();
    return controller;
  }
}

/**
 * A label- or field-scoped informer that does not stop by itself.
 *
 * Each (re)start builds a fresh client-node `ListWatch` (a "generation"); a stopped generation can
 * deliver nothing, so a late list or watch of an old generation cannot leak into the new one. A
 * server-side close or a 410 is handled inside the generation (client-node resumes or relists);
 * any other error ends the generation and a new one starts after a capped, jittered backoff. A
 * watchdog restarts a generation that delivered nothing for `silenceMs`.
 *
 * Gotcha: a restart relists; `upsert` is then called again for every object (owners must treat it
 * as "this is the object now", not "this is new").
 */
export class Informer<T extends KubernetesObject> {
  readonly options: InformerOptions<T>;
  readonly stats: InformerStats = { lists: 0, watches: 0, restarts: 0, events: 0, bookmarks: 0 };
  readonly #kc: KubeConfig;
  readonly #handlers: InformerHandlers<T>;
  #running = false;
  #generation: (Generation & { listWatch: ListWatch<T>; listAbort: AbortController | undefined }) | undefined;
  #nextId = 0;
  #failures = 0;
  #lastActivity = 0;
  #restartTimer: NodeJS.Timeout | undefined;
  #watchdog: NodeJS.Timeout | undefined;
  #synced = false;
  #syncWaiters: { resolve: () => void; reject: (error: unknown) => void; failFast: boolean }[] = [];
  #lastError: unknown;

  constructor(kc: KubeConfig, options: InformerOptions<T>, handlers: InformerHandlers<T>) {
    this.#kc = kc;
    this.options = options;
    this.#handlers = handlers;
  }

  /** True between start() and stop(). */
  get running(): boolean {
    return this.#running;
  }

  /** True once a list succeeded since start(). */
  get synced(): boolean {
    return this.#synced;
  }

  /** Starts listing and watching. Idempotent: a second call while running does nothing. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#failures = 0;
    this.#synced = false;
    this.#startGeneration();
    const period = Math.max(50, Math.min(this.options.silenceMs / 4, 5_000));
    this.#watchdog = setInterval(() => this.#checkSilence(), period);
    this.#watchdog.unref();
  }

  /** Stops everything: the current list or watch is aborted, timers cleared. Idempotent. */
  stop(): void {
    if (!this.#running) return;
    this.#running = false;
    clearInterval(this.#watchdog);
    this.#watchdog = undefined;
    clearTimeout(this.#restartTimer);
    this.#restartTimer = undefined;
    this.#endGeneration();
    const waiters = this.#syncWaiters;
    this.#syncWaiters = [];
    for (const waiter of waiters) waiter.reject(new Error(`${this.options.name} informer stopped`));
  }

  /**
   * Resolves once the first list succeeded; rejects when the informer is stopped first, or (with
   * `failFast`) at the first failure before that.
   */
  waitForSync(failFast = false): Promise<void> {
    if (this.#synced) return Promise.resolve();
    if (!this.#running) return Promise.reject(new Error(`${this.options.name} informer is not running`));
    return new Promise((resolve, reject) => this.#syncWaiters.push({ resolve, reject, failFast }));
  }

  /** The last error that restarted the informer, if any. */
  get lastError(): unknown {
    return this.#lastError;
  }

  /** The cached object `name` in `namespace`. */
  get(name: string, namespace?: string): T | undefined {
    return this.#generation?.listWatch.get(name, namespace);
  }

  /** Every cached object. */
  list(): readonly T[] {
    return this.#generation?.listWatch.list() ?? [];
  }

  /** Ends the current generation and starts a new one now (used by the watchdog). */
  restart(): void {
    if (!this.#running) return;
    this.stats.restarts++;
    this.#endGeneration();
    this.#startGeneration();
  }

  #startGeneration(): void {
    const id = ++this.#nextId;
    const generation = { id, live: true, listAbort: undefined as AbortController | undefined } as Generation & {
      listWatch: ListWatch<T>;
      listAbort: AbortController | undefined;
    };
    const { options } = this;
    const kc = this.#kc;
    const configure = options.configureRequest;
    // Watch only calls these two methods of its config.
    const config = {
      getCurrentCluster: () => kc.getCurrentCluster(),
      applySecurityAuthentication: async (context: RequestContext) => {
        await kc.applySecurityAuthentication(context);
        configure?.(context);
      },
    } as unknown as KubeConfig;
    const watch = new GenerationWatch<T>(
      config,
      generation,
      (object) => options.trim(object),
      (type) => {
        this.#lastActivity = Date.now();
        this.stats.events++;
        if (type === 'BOOKMARK') this.stats.bookmarks++;
        this.#failures = 0;
      },
      () => {
        this.stats.watches++;
        this.#lastActivity = Date.now();
      },
      options.cache === false
        ? (phase, object) => {
            if (!generation.live) return;
            if (phase === 'DELETED') this.#handlers.remove(object);
            else this.#handlers.upsert(object);
          }
        : undefined,
      options.inactivityTimeoutMs ?? Math.max(30_000, Math.round(options.silenceMs * 0.75)),
    );
    const list = async (): Promise<KubernetesListObject<T>> => {
      if (!generation.live) throw new Error('generation ended');
      const controller = new AbortController();
      generation.listAbort = controller;
      const timer = setTimeout(() => controller.abort(new Error(`list ${options.name} timed out`)), options.listTimeoutMs ?? 60_000);
      this.stats.lists++;
      try {
        const result = await options.list(controller.signal);
        if (!generation.live) throw new Error('generation ended');
        const items = (result.items ?? []).map((item) => options.trim(item));
        this.#lastActivity = Date.now();
        this.#onListed(items);
        if (options.cache === false) {
          for (const item of items) if (generation.live) this.#handlers.upsert(item);
          return { ...result, items: [] };
        }
        return { ...result, items };
      } finally {
        clearTimeout(timer);
        generation.listAbort = undefined;
      }
    };
    const delay = (ms: number): Promise<void> =>
      // client-node's reconnect delay doubles up to 30 s while a watch keeps closing without events;
      // cap it and add jitter. The timer is unref'd: it must not hold the process.
      new Promise((resolve) => {
        const capped = Math.min(ms, options.backoffMaxMs) * (0.5 + Math.random() / 2);
        const timer = setTimeout(resolve, capped);
        timer.unref();
      });
    const listWatch = new ListWatch<T>(options.path, watch, list, false, options.labelSelector, options.fieldSelector, { delayFn: delay });
    generation.listWatch = listWatch;
    listWatch.on('add', (object) => {
      if (generation.live) this.#handlers.upsert(object);
    });
    listWatch.on('update', (object) => {
      if (generation.live) this.#handlers.upsert(object);
    });
    listWatch.on('delete', (object) => {
      if (generation.live) this.#handlers.remove(object);
    });
    listWatch.on('error', (error: unknown) => {
      if (generation.live) this.#onError(generation, error);
    });
    this.#generation = generation;
    this.#lastActivity = Date.now();
    listWatch.start().catch((error: unknown) => {
      if (generation.live) this.#onError(generation, error);
    });
  }

  #endGeneration(): void {
    const generation = this.#generation;
    if (!generation) return;
    generation.live = false;
    generation.listAbort?.abort(new Error('informer restarted'));
    void generation.listWatch.stop();
  }

  #onListed(items: T[]): void {
    if (!this.#synced) {
      this.#synced = true;
      const waiters = this.#syncWaiters;
      this.#syncWaiters = [];
      for (const waiter of waiters) waiter.resolve();
    }
    this.#handlers.synced?.(items);
  }

  #onError(generation: Generation, error: unknown): void {
    if (!this.#running || this.#generation?.id !== generation.id) return;
    this.#lastError = error;
    this.#handlers.error?.(error);
    const failing = this.#syncWaiters.filter((waiter) => waiter.failFast);
    this.#syncWaiters = this.#syncWaiters.filter((waiter) => !waiter.failFast);
    for (const waiter of failing) waiter.reject(error);
    this.#endGeneration();
    this.stats.restarts++;
    const backoff = Math.min(this.options.backoffMaxMs, 200 * 2 ** this.#failures) * (0.5 + Math.random() / 2);
    this.#failures++;
    clearTimeout(this.#restartTimer);
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = undefined;
      if (this.#running) this.#startGeneration();
    }, backoff);
  }

  #checkSilence(): void {
    if (!this.#running || this.#restartTimer !== undefined) return;
    if (Date.now() - this.#lastActivity > this.options.silenceMs) this.restart();
  }
}

/** Drops `metadata.managedFields` and everything else Berth never reads from a pod. */
export function trimPod<T extends KubernetesObject>(pod: T): T {
  const p = pod as unknown as {
    metadata?: Record<string, unknown>;
    status?: Record<string, unknown>;
  };
  const m = p.metadata ?? {};
  const s = p.status ?? {};
  const statuses = Array.isArray(s.containerStatuses) ? (s.containerStatuses as Record<string, unknown>[]) : undefined;
  return {
    apiVersion: (pod as { apiVersion?: string }).apiVersion,
    kind: (pod as { kind?: string }).kind,
    metadata: pick(m, ['name', 'namespace', 'uid', 'resourceVersion', 'labels', 'creationTimestamp', 'deletionTimestamp']),
    status: {
      ...pick(s, ['phase', 'reason', 'message', 'conditions', 'startTime']),
      ...(statuses
        ? {
            containerStatuses: statuses.map((c) =>
              pick(c, ['name', 'state', 'lastState', 'image', 'imageID', 'containerID', 'restartCount', 'started', 'ready']),
            ),
          }
        : {}),
    },
  } as unknown as T;
}

/** Drops everything Berth never reads from an event. */
export function trimEvent<T extends KubernetesObject>(event: T): T {
  const e = event as unknown as Record<string, unknown>;
  return {
    apiVersion: e.apiVersion,
    kind: e.kind,
    metadata: pick((e.metadata ?? {}) as Record<string, unknown>, ['name', 'namespace', 'uid', 'resourceVersion']),
    ...pick(e, ['involvedObject', 'reason', 'message', 'type', 'count', 'firstTimestamp', 'lastTimestamp', 'eventTime']),
  } as unknown as T;
}

function pick(source: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of keys) if (source[key] !== undefined) out[key] = source[key];
  return out;
}
