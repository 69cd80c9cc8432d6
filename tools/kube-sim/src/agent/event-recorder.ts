// Writes core/v1 events as the kubelet and the scheduler do, aggregating repeats: the same
// reason and message for the same object bumps `count` and `lastTimestamp` of one event.

import { randomBytes } from 'node:crypto';
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

/** Records events into the store. */
export class EventRecorder {
  readonly #store: Store;
  readonly #node: string;
  readonly #recent = new Map<string, string>();

  constructor(store: Store, node: string) {
    this.#store = store;
    this.#node = node;
  }

  /** Records (or aggregates) one event about `pod`. */
  record(pod: Pod, spec: EventSpec): void {
    const ns = pod.metadata.namespace ?? 'default';
    const component = spec.component ?? 'kubelet';
    const key = [pod.metadata.uid, spec.fieldPath ?? '', spec.type, spec.reason, spec.message, component].join('\u0000');
    const now = nowSeconds();
    const existing = this.#recent.get(key);
    if (existing && this.#store.get('events', ns, existing)) {
      this.#store.modify('events', ns, existing, (obj) => {
        const ev = obj as CoreEvent;
        ev.count = (ev.count ?? 1) + 1;
        ev.lastTimestamp = now;
      });
      return;
    }
    const name = `${pod.metadata.name ?? 'pod'}.${randomBytes(8).toString('hex')}`;
    const event: CoreEvent = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name, namespace: ns },
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
      message: spec.message,
      source: component === 'kubelet' ? { component, host: this.#node } : { component },
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
      type: spec.type,
      eventTime: null,
      reportingComponent: component,
      reportingInstance: component === 'kubelet' ? this.#node : '',
    };
    this.#store.create('events', event);
    this.#recent.set(key, name);
    if (this.#recent.size > 10_000) {
      const first = this.#recent.keys().next().value;
      if (first !== undefined) this.#recent.delete(first);
    }
  }
}
