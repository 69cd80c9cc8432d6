// Server-side printing: kubectl asks for `application/json;as=Table;v=v1;g=meta.k8s.io` and
// prints the cells it gets back. Columns follow the API server's printers for these kinds.

import { type CoreEvent, type KubeObject, type Pod } from '../types.ts';

interface Column {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

function col(name: string, priority = 0, type = 'string', format = ''): Column {
  return { name, type, format, description: name, priority };
}

/** Go's `duration.HumanDuration`, shortened as kubectl shows ages (5s, 3m2s, 4h, 2d). */
function humanDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 8) return m % 60 === 0 ? `${h}h` : `${h}h${m % 60}m`;
  if (h < 48) return `${h}h`;
  const d = Math.floor(h / 24);
  if (d < 8) return h % 24 === 0 ? `${d}d` : `${d}d${h % 24}h`;
  if (d < 365 * 2) return `${d}d`;
  return `${Math.floor(d / 365)}y`;
}

function age(timestamp: string | null | undefined, now: number): string {
  if (!timestamp) return '<unknown>';
  return humanDuration(now - Date.parse(timestamp));
}

/** The STATUS column of `kubectl get pods`, computed as the API server's printer does. */
function podStatusReason(pod: Pod): string {
  let reason = pod.status?.reason ?? pod.status?.phase ?? 'Pending';
  let running = false;
  for (const cs of [...(pod.status?.containerStatuses ?? [])].reverse()) {
    if (cs.state.waiting?.reason) reason = cs.state.waiting.reason;
    else if (cs.state.terminated?.reason) reason = cs.state.terminated.reason;
    else if (cs.state.terminated) reason = `ExitCode:${cs.state.terminated.exitCode}`;
    else if (cs.ready && cs.state.running) running = true;
  }
  if (running && reason === 'Completed') reason = 'Running';
  if (pod.metadata.deletionTimestamp) reason = 'Terminating';
  return reason;
}

const podColumns = [
  col('Name', 0, 'string', 'name'),
  col('Ready'),
  col('Status'),
  col('Restarts', 0, 'string'),
  col('Age'),
  col('IP', 1),
  col('Node', 1),
  col('Nominated Node', 1),
  col('Readiness Gates', 1),
];

function podCells(pod: Pod, now: number): unknown[] {
  const statuses = pod.status?.containerStatuses ?? [];
  const ready = statuses.filter((c) => c.ready).length;
  const restarts = statuses.reduce((n, c) => n + c.restartCount, 0);
  return [
    pod.metadata.name,
    `${ready}/${pod.spec.containers.length}`,
    podStatusReason(pod),
    String(restarts),
    age(pod.metadata.creationTimestamp, now),
    pod.status?.podIP ?? '<none>',
    pod.spec.nodeName ?? '<none>',
    '<none>',
    '<none>',
  ];
}

const eventColumns = [
  col('Last Seen'),
  col('Type'),
  col('Reason'),
  col('Object'),
  col('Subobject', 1),
  col('Source', 1),
  col('Message'),
  col('First Seen', 1),
  col('Count', 1, 'integer'),
  col('Name', 1),
];

function eventCells(ev: CoreEvent, now: number): unknown[] {
  const last = ev.lastTimestamp ?? ev.eventTime ?? ev.metadata.creationTimestamp;
  const object = `${(ev.involvedObject.kind ?? '').toLowerCase()}/${ev.involvedObject.name ?? ''}`;
  const source = [ev.source?.component, ev.source?.host].filter(Boolean).join(', ');
  return [
    age(last, now),
    ev.type ?? '',
    ev.reason ?? '',
    object,
    ev.involvedObject.fieldPath ?? '',
    source,
    ev.message ?? '',
    age(ev.firstTimestamp ?? last, now),
    ev.count ?? 1,
    ev.metadata.name,
  ];
}

const namespaceColumns = [col('Name', 0, 'string', 'name'), col('Status'), col('Age')];

function namespaceCells(ns: KubeObject, now: number): unknown[] {
  return [ns.metadata.name, (ns.status as { phase?: string } | undefined)?.phase ?? 'Active', age(ns.metadata.creationTimestamp, now)];
}

/** What rows should carry: `includeObject` of the Table request. */
export type IncludeObject = 'None' | 'Metadata' | 'Object';

/** Converts objects of one resource to a meta.k8s.io/v1 Table. */
export function toTable(
  resource: string,
  objects: KubeObject[],
  resourceVersion: string,
  include: IncludeObject,
  extra: Record<string, unknown> = {},
): unknown {
  const now = Date.now();
  const [columns, cells] =
    resource === 'pods'
      ? [podColumns, (o: KubeObject) => podCells(o as Pod, now)]
      : resource === 'events'
        ? [eventColumns, (o: KubeObject) => eventCells(o as CoreEvent, now)]
        : [namespaceColumns, (o: KubeObject) => namespaceCells(o, now)];
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: { resourceVersion, ...extra },
    columnDefinitions: columns,
    rows: objects.map((o) => ({
      cells: cells(o),
      ...(include === 'None'
        ? {}
        : { object: include === 'Object' ? o : { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata } }),
    })),
  };
}

/** True when the Accept header asks for a Table (kubectl's human output does). */
export function wantsTable(accept: string | undefined): boolean {
  return !!accept && accept.split(',').some((part) => /(^|;)\s*as=Table(\s*;|$)/.test(part) && /g=meta\.k8s\.io/.test(part));
}
