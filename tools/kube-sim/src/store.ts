// The object store: one global, monotonically increasing resourceVersion shared by every
// resource (as etcd's revision is), a history of changes per resource for watches to resume
// from (the API server's watch cache: one per resource, keeping about the last 75 s), and
// synchronous change listeners (the watch hub and the node agent subscribe here).

import { randomUUID } from 'node:crypto';
import { matchFilter, type ObjectFilter } from './selectors.ts';
import { alreadyExists, conflict, notFound } from './status.ts';
import { clone, nowSeconds, type KubeObject } from './types.ts';

/** A change to a stored object. */
export interface StoreEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  resource: string;
  resourceVersion: number;
  object: KubeObject;
  /** The object before a MODIFIED or DELETED (lets a filtered watch turn it into ADDED or DELETED, and a list go back in time). */
  previous?: KubeObject;
}

/** How long the watch history of each resource reaches back. */
export interface HistoryWindow {
  /** At most this many changes per resource (kube-sim's memory cap; the API server's is 100 Ki). Default 1000. */
  limit: number;
  /**
   * Changes older than this may go once a resource has more than `lowerBound` of them: the
   * watch cache sizes its buffer to hold at least `eventFreshDuration` (75 s) and at least
   * 100 changes (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go
   * resizeCacheLocked; cacher.go DefaultEventFreshDuration, defaultLowerBoundCapacity). Default 75 000.
   */
  windowMs: number;
  /** Default 100. */
  lowerBound: number;
}

/** The API server's watch cache window, with kube-sim's cap of 1000 changes per resource. */
const defaultHistoryWindow: HistoryWindow = { limit: 1000, windowMs: 75_000, lowerBound: 100 };

/** What a watch gets when it asks to start from a version. */
export type ReplayResult = { expired: false; events: StoreEvent[] } | { expired: true; oldest: number };

function key(namespace: string | undefined, name: string): string {
  return `${namespace ?? ''}/${name}`;
}

function randomSuffix(): string {
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  let s = '';
  for (let i = 0; i < 5; i++) s += alphabet[Math.floor(Math.random() * alphabet.length)];
  return s;
}

/** The in-memory object store with its change history. */
export class Store {
  #rv = 0;
  readonly #objects = new Map<string, Map<string, KubeObject>>();
  /** Per resource: retained changes (oldest first) and when each happened. */
  readonly #history = new Map<string, { event: StoreEvent; at: number }[]>();
  readonly #window: HistoryWindow;
  readonly #now: () => number;
  /** Per resource: highest version that has fallen out of its history window. */
  readonly #compacted = new Map<string, number>();
  readonly #listeners = new Set<(event: StoreEvent) => void>();
  readonly #pending: StoreEvent[] = [];
  #delivering = false;

  /** `window` as a number is the old form: the per-resource change limit. `now` is for tests. */
  constructor(window: number | Partial<HistoryWindow> = {}, now: () => number = Date.now) {
    const w = typeof window === 'number' ? { limit: window } : window;
    this.#window = { ...defaultHistoryWindow, ...w };
    this.#window.limit = Math.max(1, this.#window.limit);
    this.#now = now;
  }

  /** The current global resourceVersion. */
  get resourceVersion(): number {
    return this.#rv;
  }

  /** Oldest version a watch of `resource` may still resume from. */
  oldestResumable(resource: string): number {
    return this.#compacted.get(resource) ?? 0;
  }

  #collection(resource: string): Map<string, KubeObject> {
    let c = this.#objects.get(resource);
    if (!c) {
      c = new Map();
      this.#objects.set(resource, c);
    }
    return c;
  }

  /** A copy of one object, or undefined. */
  get(resource: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const obj = this.#collection(resource).get(key(namespace, name));
    return obj ? clone(obj) : undefined;
  }

  /** Like get, but throws a 404 ApiError. */
  mustGet(resource: string, namespace: string | undefined, name: string): KubeObject {
    const obj = this.get(resource, namespace, name);
    if (!obj) throw notFound(resource, name);
    return obj;
  }

  /** Copies of every object passing the filter, ordered by namespace and name, with the list's version. */
  list(resource: string, filter: ObjectFilter): { items: KubeObject[]; resourceVersion: number } {
    const items = [...this.#collection(resource).values()].filter((o) => matchFilter(filter, o)).map((o) => clone(o));
    items.sort((a, b) => key(a.metadata.namespace, a.metadata.name ?? '').localeCompare(key(b.metadata.namespace, b.metadata.name ?? '')));
    return { items, resourceVersion: this.#rv };
  }

  /** Stores a new object, filling name (from generateName), uid, creationTimestamp and resourceVersion. */
  create(resource: string, input: KubeObject): KubeObject {
    const obj = clone(input);
    const collection = this.#collection(resource);
    const meta = obj.metadata;
    if (!meta.name && meta.generateName) {
      do meta.name = meta.generateName + randomSuffix();
      while (collection.has(key(meta.namespace, meta.name)));
    }
    const name = meta.name ?? '';
    if (collection.has(key(meta.namespace, name))) throw alreadyExists(resource, name);
    meta.uid = randomUUID();
    meta.creationTimestamp = nowSeconds();
    delete meta.deletionTimestamp;
    delete meta.deletionGracePeriodSeconds;
    meta.resourceVersion = String(++this.#rv);
    collection.set(key(meta.namespace, name), obj);
    this.#emit({ type: 'ADDED', resource, resourceVersion: this.#rv, object: clone(obj) });
    return clone(obj);
  }

  /**
   * Replaces a stored object. When `expectedVersion` is given and differs from the stored one,
   * throws 409 Conflict. uid and creationTimestamp are kept from the stored object.
   */
  update(resource: string, input: KubeObject, expectedVersion?: string): KubeObject {
    const obj = clone(input);
    const name = obj.metadata.name ?? '';
    const collection = this.#collection(resource);
    const k = key(obj.metadata.namespace, name);
    const previous = collection.get(k);
    if (!previous) throw notFound(resource, name);
    if (expectedVersion && expectedVersion !== previous.metadata.resourceVersion) throw conflict(resource, name);
    obj.metadata.uid = previous.metadata.uid;
    obj.metadata.creationTimestamp = previous.metadata.creationTimestamp;
    if (previous.metadata.deletionTimestamp) {
      obj.metadata.deletionTimestamp = previous.metadata.deletionTimestamp;
      obj.metadata.deletionGracePeriodSeconds = previous.metadata.deletionGracePeriodSeconds;
    }
    obj.metadata.resourceVersion = String(++this.#rv);
    collection.set(k, obj);
    this.#emit({ type: 'MODIFIED', resource, resourceVersion: this.#rv, object: clone(obj), previous: clone(previous) });
    return clone(obj);
  }

  /** Applies `mutate` to the stored object (if it still exists) and writes it when it changed. */
  modify(resource: string, namespace: string | undefined, name: string, mutate: (obj: KubeObject) => void): KubeObject | undefined {
    const current = this.#collection(resource).get(key(namespace, name));
    if (!current) return undefined;
    const next = clone(current);
    mutate(next);
    if (JSON.stringify(next) === JSON.stringify(current)) return clone(current);
    return this.update(resource, next);
  }

  /** Sets deletionTimestamp on an object (graceful deletion); it stays until `remove`. */
  markDeleting(resource: string, namespace: string | undefined, name: string, graceSeconds: number): KubeObject {
    const current = this.#collection(resource).get(key(namespace, name));
    if (!current) throw notFound(resource, name);
    if (current.metadata.deletionTimestamp) return clone(current);
    const next = clone(current);
    next.metadata.deletionTimestamp = nowSeconds(new Date(Date.now() + graceSeconds * 1000));
    next.metadata.deletionGracePeriodSeconds = graceSeconds;
    next.metadata.resourceVersion = String(++this.#rv);
    this.#collection(resource).set(key(namespace, name), next);
    this.#emit({ type: 'MODIFIED', resource, resourceVersion: this.#rv, object: clone(next), previous: clone(current) });
    return clone(next);
  }

  /** Removes an object; the DELETED event carries a new resourceVersion. Returns the last state. */
  remove(resource: string, namespace: string | undefined, name: string, expectedUid?: string): KubeObject {
    const collection = this.#collection(resource);
    const k = key(namespace, name);
    const current = collection.get(k);
    if (!current || (expectedUid && current.metadata.uid !== expectedUid)) throw notFound(resource, name);
    collection.delete(k);
    const last = clone(current);
    last.metadata.resourceVersion = String(++this.#rv);
    this.#emit({ type: 'DELETED', resource, resourceVersion: this.#rv, object: clone(last), previous: clone(current) });
    return last;
  }

  /**
   * Resolves true once the store's version reaches `version`, false after `timeoutMs` (the watch
   * cache's waitUntilFreshAndBlock, which gives up after 3 s).
   */
  async reached(version: number, timeoutMs: number): Promise<boolean> {
    if (this.#rv >= version) return true;
    return new Promise<boolean>((resolve) => {
      const done = (ok: boolean): void => {
        clearTimeout(timer);
        unsubscribe();
        resolve(ok);
      };
      const timer = setTimeout(() => done(false), timeoutMs);
      const unsubscribe = this.subscribe(() => {
        if (this.#rv >= version) done(true);
      });
    });
  }

  /** Listens to every change, synchronously and in order. Returns an unsubscribe function. */
  subscribe(listener: (event: StoreEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The retained changes of `resource` after `fromVersion`, or `expired` when its window no longer reaches back that far. */
  replay(resource: string, fromVersion: number): ReplayResult {
    this.#evict(resource);
    const compacted = this.oldestResumable(resource);
    if (fromVersion < compacted) return { expired: true, oldest: compacted + 1 };
    return { expired: false, events: (this.#history.get(resource) ?? []).filter((e) => e.event.resourceVersion > fromVersion).map((e) => e.event) };
  }

  /**
   * The objects of `resource` as they were at `version` (a list with resourceVersionMatch=Exact),
   * or undefined when the history no longer reaches back that far.
   */
  listAt(resource: string, filter: ObjectFilter, version: number): KubeObject[] | undefined {
    const replay = this.replay(resource, version);
    if (replay.expired) return undefined;
    const objects = new Map([...this.#collection(resource)].map(([k, o]) => [k, clone(o)]));
    for (const e of replay.events.toReversed()) {
      const k = key(e.object.metadata.namespace, e.object.metadata.name ?? '');
      if (e.type === 'ADDED') objects.delete(k);
      else if (e.previous) objects.set(k, clone(e.previous));
    }
    const items = [...objects.values()].filter((o) => matchFilter(filter, o));
    items.sort((a, b) => key(a.metadata.namespace, a.metadata.name ?? '').localeCompare(key(b.metadata.namespace, b.metadata.name ?? '')));
    return items;
  }

  /** Drops the changes of `resource` that fell out of its window. */
  #evict(resource: string): void {
    const history = this.#history.get(resource);
    if (!history) return;
    const { limit, windowMs, lowerBound } = this.#window;
    const horizon = this.#now() - windowMs;
    for (let first = history[0]; first; first = history[0]) {
      if (history.length <= limit && (history.length <= lowerBound || first.at >= horizon)) break;
      history.shift();
      this.#compacted.set(resource, first.event.resourceVersion);
    }
  }

  #emit(event: StoreEvent): void {
    let history = this.#history.get(event.resource);
    if (!history) {
      history = [];
      this.#history.set(event.resource, history);
    }
    history.push({ event, at: this.#now() });
    this.#evict(event.resource);
    // A listener that writes to the store must not make others see changes out of order:
    // nested changes are queued and delivered after the current one reached every listener.
    this.#pending.push(event);
    if (this.#delivering) return;
    this.#delivering = true;
    try {
      for (let next = this.#pending.shift(); next; next = this.#pending.shift()) {
        for (const listener of [...this.#listeners]) {
          try {
            listener(next);
          } catch (err) {
            console.error('[kube-sim] store listener failed:', err);
          }
        }
      }
    } finally {
      this.#delivering = false;
    }
  }
}
