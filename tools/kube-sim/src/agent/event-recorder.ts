// Writes core/v1 events as the kubelet and the scheduler do, through client-go's
// EventCorrelator (kubernetes/kubernetes staging/src/k8s.io/client-go/tools/record/events_cache.go):
// - aggregation (EventAggregator.EventAggregate): the 10th distinct message with the same source,
//   object, type and reason within 10 minutes becomes one "(combined from similar events): …" event;
// - deduplication (eventLogger.eventObserve): the same event again bumps `count` and `lastTimestamp`;
// - the spam filter (EventSourceObjectSpamFilter.Filter): a token bucket per source + involved
//   object (getSpamKey: no fieldPath, reason or message), burst 25, refilled one token per
//   5 minutes (defaultSpamBurst, defaultSpamQPS = 1/300). An event without a token is dropped,
//   but its count still grows in the cache, so a later accepted repeat carries the full count.
// A pod with ~8 containers (Pulled, Created, Started, Killing, again after an image patch) runs
// out of tokens: later events about it — pull failures included — never reach the API.

import { type Store } from '../store.ts';
import { nowSeconds, type CoreEvent, type Pod } from '../types.ts';

/** One event to record about a pod. */
export interface EventSpec {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
  /** e.g. `spec.containers{step}`. */
  fieldPath?: string;
  /** `kubelet` (default) or `default-scheduler`. */
  component?: string;
}

/** The spam filter's token bucket (client-go defaults: burst 25, one token per 300 s). */
export interface EventSpamFilter {
  burst: number;
  refillMs: number;
}

/** client-go's defaults (events_cache.go defaultSpamBurst, defaultSpamQPS). */
export const defaultSpamFilter: EventSpamFilter = { burst: 25, refillMs: 300_000 };

/** events_cache.go defaultAggregateMaxEvents, defaultAggregateIntervalInSeconds, maxLruCacheEntries. */
const aggregateMaxEvents = 10;
const aggregateIntervalMs = 600_000;
const cacheEntries = 4096;

interface Observed {
  name: string;
  count: number;
  firstTimestamp: string;
}

/** Sets `key` as the newest entry of a map used as an LRU cache of `cacheEntries`. */
function remember<V>(cache: Map<string, V>, key: string, value: V): void {
  cache.delete(key);
  cache.set(key, value);
  if (cache.size > cacheEntries) {
    const oldest = cache.keys().next().value;
    if (oldest !== undefined) cache.delete(oldest);
  }
}

/** Records events into the store, correlated as client-go's recorder does. */
export class EventRecorder {
  readonly #store: Store;
  readonly #node: string;
  readonly #spam: EventSpamFilter | null;
  readonly #now: () => number;
  readonly #aggregates = new Map<string, { messages: Set<string>; last: number }>();
  readonly #observed = new Map<string, Observed>();
  readonly #buckets = new Map<string, { tokens: number; at: number }>();
  #lastNanos = 0n;

  /** `spam: null` turns the spam filter off (lenient); `now` is for tests. */
  constructor(store: Store, node: string, spam: EventSpamFilter | null = defaultSpamFilter, now: () => number = Date.now) {
    this.#store = store;
    this.#node = node;
    this.#spam = spam;
    this.#now = now;
  }

  /**
   * The name suffix client-go gives a new event: the time in Unix nanoseconds, in hex
   * (tools/record/event.go, makeEvent: `fmt.Sprintf("%v.%x", ref.Name, t.UnixNano())`), so a list
   * (in key order) returns one object's events in the order they were made. Strictly increasing
   * here, where two events can share a millisecond.
   */
  #unixNanoHex(nowMs: number): string {
    const nanos = BigInt(nowMs) * 1_000_000n;
    this.#lastNanos = nanos > this.#lastNanos ? nanos : this.#lastNanos + 1n;
    return this.#lastNanos.toString(16);
  }

  /** Records (aggregates, deduplicates, or drops as spam) one event about `pod`. */
  record(pod: Pod, spec: EventSpec): void {
    const ns = pod.metadata.namespace ?? 'default';
    const component = spec.component ?? 'kubelet';
    const host = component === 'kubelet' ? this.#node : '';
    const object = ['Pod', ns, pod.metadata.name ?? '', pod.metadata.uid ?? '', 'v1'];
    const nowMs = this.#now();
    const now = nowSeconds(new Date(nowMs));

    // EventAggregate: same source, object, type and reason; distinct messages counted.
    const aggregateKey = [component, host, ...object, spec.type, spec.reason].join('\u0000');
    let aggregate = this.#aggregates.get(aggregateKey);
    if (!aggregate || nowMs - aggregate.last > aggregateIntervalMs) aggregate = { messages: new Set(), last: nowMs };
    aggregate.messages.add(spec.message);
    aggregate.last = nowMs;
    remember(this.#aggregates, aggregateKey, aggregate);
    let key = [component, host, ...object, spec.fieldPath ?? '', spec.type, spec.reason, spec.message].join('\u0000');
    let message = spec.message;
    if (aggregate.messages.size >= aggregateMaxEvents) {
      const any = aggregate.messages.values().next().value;
      if (any !== undefined) aggregate.messages.delete(any);
      key = aggregateKey;
      message = `(combined from similar events): ${spec.message}`;
    }

    // eventObserve: a repeat bumps the count (even when the spam filter then drops it).
    const seen = this.#observed.get(key);
    const observed: Observed = seen
      ? { ...seen, count: seen.count + 1 }
      : { name: `${pod.metadata.name ?? 'pod'}.${this.#unixNanoHex(nowMs)}`, count: 1, firstTimestamp: now };
    remember(this.#observed, key, observed);

    // EventSourceObjectSpamFilter.Filter: one token per event written.
    if (!this.#takeToken([component, host, ...object].join('\u0000'), nowMs)) return;

    if (seen && this.#store.get('events', ns, observed.name)) {
      this.#store.modify('events', ns, observed.name, (obj) => {
        const ev = obj as CoreEvent;
        ev.count = observed.count;
        ev.lastTimestamp = now;
        ev.message = message;
      });
      return;
    }
    const event: CoreEvent = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: observed.name, namespace: ns },
      involvedObject: {
        kind: 'Pod',
        namespace: ns,
        name: pod.metadata.name ?? '',
        uid: pod.metadata.uid ?? '',
        apiVersion: 'v1',
        resourceVersion: pod.metadata.resourceVersion ?? '',
        ...(spec.fieldPath ? { fieldPath: spec.fieldPath } : {}),
      },
      reason: spec.reason,
      message,
      source: component === 'kubelet' ? { component, host } : { component },
      firstTimestamp: observed.firstTimestamp,
      lastTimestamp: now,
      count: observed.count,
      type: spec.type,
      eventTime: null,
      reportingComponent: component,
      reportingInstance: host,
    };
    try {
      this.#store.create('events', event);
    } catch {
      // An event of that name exists already (deleted and recreated meanwhile): keep the first.
    }
  }

  /** The token bucket of one source + object: true when an event may be written now. */
  #takeToken(spamKey: string, nowMs: number): boolean {
    if (!this.#spam) return true;
    const { burst, refillMs } = this.#spam;
    const bucket = this.#buckets.get(spamKey) ?? { tokens: burst, at: nowMs };
    bucket.tokens = Math.min(burst, bucket.tokens + (nowMs - bucket.at) / refillMs);
    bucket.at = nowMs;
    const ok = bucket.tokens >= 1;
    if (ok) bucket.tokens -= 1;
    remember(this.#buckets, spamKey, bucket);
    return ok;
  }
}
