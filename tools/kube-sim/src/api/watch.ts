// Watch streams: newline-delimited JSON events from a resourceVersion on, with filtered
// transitions (an object leaving the selection is DELETED for that watcher), optional
// bookmarks, timeoutSeconds, 410 Expired as an in-stream ERROR event, and the fault hooks
// (close now / periodically, delay every event).

import { type IncomingMessage, type ServerResponse } from 'node:http';
import { type Counters } from '../counters.ts';
import { type Faults } from '../faults.ts';
import { matchFilter, type ObjectFilter } from '../selectors.ts';
import { badRequest, tooLargeResourceVersion, tooOldStatus, type StatusObject } from '../status.ts';
import { type Store, type StoreEvent } from '../store.ts';
import { type KubeObject } from '../types.ts';
import { queryBool, queryInt } from './http.ts';
import { type IncludeObject, toTable } from './table.ts';

/** Tuning of watches (library options). */
interface WatchSettings {
  /** Period of BOOKMARK events for watches that allow them (the API server's is a minute); one more comes 2 s before the watch's deadline. */
  bookmarkIntervalMs: number;
  /** Server-side timeout when the client sends no timeoutSeconds; null: random 30–60 min as the API server does. */
  defaultTimeoutSeconds: number | null;
  /** How long a request for a resourceVersion the store has not reached waits before a 504 (the watch cache's 3 s). */
  freshWaitMs: number;
}

/** One watch event on the wire. */
interface WireEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: unknown;
}

/** Keeps track of open watch streams so they can be closed all at once. */
export class WatchHub {
  readonly #open = new Set<() => void>();

  /** Registers a closer; returns the function that unregisters it. */
  add(close: () => void): () => void {
    this.#open.add(close);
    return () => this.#open.delete(close);
  }

  /** Ends every open watch stream now. */
  closeAll(): void {
    for (const close of [...this.#open]) close();
  }

  /** Number of open watch streams. */
  get size(): number {
    return this.#open.size;
  }
}

/** What a watch needs from the rest of the simulator. */
export interface WatchDeps {
  store: Store;
  counters: Counters;
  faults: Faults;
  hub: WatchHub;
  settings: WatchSettings;
}

function withKind(resource: string, obj: KubeObject): KubeObject {
  const kind = resource === 'pods' ? 'Pod' : resource === 'events' ? 'Event' : 'Namespace';
  return { ...obj, kind, apiVersion: 'v1' };
}

/** Turns a store change into what a filtered watcher sees (or nothing). */
function filterEvent(filter: ObjectFilter, event: StoreEvent): WireEvent | undefined {
  const now = matchFilter(filter, event.object);
  if (event.type === 'MODIFIED' && event.previous) {
    const before = matchFilter(filter, event.previous);
    if (before && now) return { type: 'MODIFIED', object: event.object };
    if (now) return { type: 'ADDED', object: event.object };
    if (before) return { type: 'DELETED', object: event.object };
    return undefined;
  }
  return now ? { type: event.type, object: event.object } : undefined;
}

/**
 * Serves one watch request on `res` until timeout, client close, fault or shutdown. A version
 * the store has not reached yet is waited for (3 s), then answered with an in-stream ERROR
 * carrying the 504 "Too large resource version" Status, as the cacher does
 * (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go Watch:
 * waitUntilWatchCacheFreshAndForceAllEvents, then newErrWatcher).
 */
export async function serveWatch(
  deps: WatchDeps,
  resource: string,
  filter: ObjectFilter,
  url: URL,
  req: IncomingMessage,
  res: ServerResponse,
  table: IncludeObject | null,
): Promise<void> {
  const rv = url.searchParams.get('resourceVersion') ?? '';
  const wanted = /^\d+$/.test(rv) ? Number(rv) : 0;
  if (wanted > deps.store.resourceVersion && !(await deps.store.reached(wanted, deps.settings.freshWaitMs))) {
    deps.counters.watchOpened()();
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache, private' });
    res.end(`${JSON.stringify({ type: 'ERROR', object: tooLargeResourceVersion(wanted, deps.store.resourceVersion) })}\n`);
    return;
  }
  serveWatchFrom(deps, resource, filter, url, req, res, table);
}

function serveWatchFrom(
  deps: WatchDeps,
  resource: string,
  filter: ObjectFilter,
  url: URL,
  _req: IncomingMessage,
  res: ServerResponse,
  table: IncludeObject | null,
): void {
  const { store, counters, faults, hub, settings } = deps;
  const q = url.searchParams;
  const rvParam = q.get('resourceVersion') ?? '';
  const timeoutSeconds = queryInt('timeoutSeconds', q.get('timeoutSeconds'));
  const bookmarks = queryBool(q.get('allowWatchBookmarks'));
  const sendInitialEvents = queryBool(q.get('sendInitialEvents'));
  if (rvParam !== '' && !/^\d+$/.test(rvParam)) throw badRequest(`resourceVersion: Invalid value: "${rvParam}": must be a non-negative integer`);
  if (sendInitialEvents && !bookmarks) throw badRequest('sendInitialEvents is forbidden for watch unless allowWatchBookmarks=true');

  const render = (ev: WireEvent): string => {
    let object = ev.object;
    if (ev.type !== 'ERROR' && ev.type !== 'BOOKMARK') {
      const full = withKind(resource, object as KubeObject);
      object = table ? toTable(resource, [full], full.metadata.resourceVersion ?? '', table) : full;
    }
    return `${JSON.stringify({ type: ev.type, object })}\n`;
  };

  // Decide the start synchronously, then subscribe in the same tick: no change can slip between.
  const initial: WireEvent[] = [];
  let expiredStatus: StatusObject | undefined;
  if (rvParam === '' || rvParam === '0' || sendInitialEvents) {
    for (const item of store.list(resource, filter).items) initial.push({ type: 'ADDED', object: item });
    if (sendInitialEvents) {
      initial.push({ type: 'BOOKMARK', object: bookmarkObject(resource, store.resourceVersion, true) });
    }
  } else {
    const from = Number(rvParam);
    const replay = store.replay(resource, from);
    if (replay.expired) {
      expiredStatus = tooOldStatus(from, replay.oldest);
    } else {
      for (const e of replay.events) {
        const ev = filterEvent(filter, e);
        if (ev) initial.push(ev);
      }
    }
  }

  const doneCounting = counters.watchOpened();
  res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache, private', 'transfer-encoding': 'chunked' });
  res.flushHeaders();

  if (expiredStatus) {
    res.end(`${JSON.stringify({ type: 'ERROR', object: expiredStatus })}\n`);
    doneCounting();
    return;
  }

  const queue: { due: number; line: string }[] = [];
  let pumping = false;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;

  const pump = async (): Promise<void> => {
    if (pumping) return;
    pumping = true;
    while (queue.length > 0 && !closed) {
      const next = queue[0];
      if (!next) break;
      const wait = next.due - Date.now();
      if (wait > 0) {
        await new Promise<void>((resolve) => {
          timer = setTimeout(resolve, wait);
        });
        continue;
      }
      queue.shift();
      res.write(next.line);
    }
    pumping = false;
  };

  const send = (ev: WireEvent): void => {
    if (closed) return;
    if (ev.type !== 'BOOKMARK' && ev.type !== 'ERROR') counters.watchEventSent(resource);
    const delay = faults.watchEventDelayMs;
    if (delay <= 0 && queue.length === 0) {
      res.write(render(ev));
      return;
    }
    queue.push({ due: Date.now() + delay, line: render(ev) });
    void pump();
  };

  for (const ev of initial) send(ev);
  const unsubscribe = store.subscribe((event) => {
    if (event.resource !== resource) return;
    const ev = filterEvent(filter, event);
    if (ev) send(ev);
  });

  const seconds = timeoutSeconds ?? settings.defaultTimeoutSeconds ?? 1800 + Math.floor(Math.random() * 1800);
  const deadline = Date.now() + seconds * 1000;
  const timeoutTimer = setTimeout(() => close(), seconds * 1000);
  // Bookmarks as the watch cache sends them: about every bookmark period (a minute by default),
  // and one 2 s before the watch's deadline, none after that (kubernetes/kubernetes
  // staging/src/k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go nextBookmarkTime;
  // cacher.go defaultBookmarkFrequency = time.Minute). Simpler than the API server: it fires each
  // bookmark at its time, where cacher.go's watcherBookmarkTimeBuckets pops watchers in one-second
  // buckets ("you can get the bookmark within (X-1,X+1)"), so the real pretimeout bookmark can
  // come up to a second early and then once more.
  let bookmarkTimer: NodeJS.Timeout | undefined;
  // A timer can fire a millisecond before Date.now() reaches its time (its clock is the event
  // loop's, read at the start of the tick): a fired bookmark counts as sent at its time at least.
  const scheduleBookmark = (now = Date.now()): void => {
    const next = nextBookmarkAt(now, deadline, settings.bookmarkIntervalMs);
    if (next === undefined) return;
    bookmarkTimer = setTimeout(() => {
      send({ type: 'BOOKMARK', object: bookmarkObject(resource, store.resourceVersion, false) });
      scheduleBookmark(Math.max(Date.now(), next));
    }, next - now);
  };
  if (bookmarks) scheduleBookmark();

  const close = (): void => {
    if (closed) return;
    closed = true;
    unsubscribe();
    clearTimeout(bookmarkTimer);
    clearTimeout(timeoutTimer);
    clearTimeout(timer);
    unregister();
    unfault();
    doneCounting();
    if (!res.writableEnded) res.end();
  };
  const unregister = hub.add(close);
  const unfault = faults.onCloseWatches(close);
  res.on('close', close);
}

/**
 * When a watch's next bookmark is due, from `now`: a bookmark period on, or 2 s before the watch's
 * deadline if that comes first; undefined when that time has passed (kubernetes/kubernetes
 * staging/src/k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go nextBookmarkTime).
 */
export function nextBookmarkAt(now: number, deadline: number, periodMs: number): number | undefined {
  const next = Math.min(now + periodMs, deadline - 2000);
  return next <= now ? undefined : next;
}

function bookmarkObject(resource: string, rv: number, initialEnd: boolean): unknown {
  const kind = resource === 'pods' ? 'Pod' : resource === 'events' ? 'Event' : 'Namespace';
  return {
    kind,
    apiVersion: 'v1',
    metadata: { resourceVersion: String(rv), ...(initialEnd ? { annotations: { 'k8s.io/initial-events-end': 'true' } } : {}) },
  };
}
