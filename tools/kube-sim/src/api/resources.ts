// The REST handlers for pods, pods/status, events and namespaces: get, list (with paging),
// create, update, patch, delete, deletecollection. Watches go to watch.ts, pods/log to logs.ts.

import { type IncomingMessage, type ServerResponse } from 'node:http';
import { applyPatch } from '../patch.ts';
import { parseFieldSelector, parseLabelSelector, type ObjectFilter } from '../selectors.ts';
import { ApiError, badRequest, conflict, listTooOld, methodNotAllowed, notFound, invalid, tooLargeResourceVersion, type StatusCause } from '../status.ts';
import { clone, type CoreEvent, type KubeObject, type Pod } from '../types.ts';
import { queryInt, readJson, sendJson } from './http.ts';
import { preparePodCreate, preparePodStatusUpdate, preparePodUpdate, labelError, validateMeta } from './pod-rules.ts';
import { type Route } from './router.ts';
import { toTable, wantsTable, type IncludeObject } from './table.ts';
import { serveWatch, type WatchDeps } from './watch.ts';

interface ResourceDef {
  kind: string;
  listKind: string;
  namespaced: boolean;
  fields: readonly string[];
}

const metaFields = ['metadata.name', 'metadata.namespace'] as const;

/** Resource definitions: kind, list kind, scope, supported field selectors. */
const resourceDefs: Record<string, ResourceDef> = {
  pods: {
    kind: 'Pod',
    listKind: 'PodList',
    namespaced: true,
    fields: [
      ...metaFields,
      'status.phase',
      'spec.nodeName',
      'spec.restartPolicy',
      'spec.schedulerName',
      'spec.serviceAccountName',
      'spec.hostNetwork',
      'status.podIP',
      'status.nominatedNodeName',
    ],
  },
  events: {
    kind: 'Event',
    listKind: 'EventList',
    namespaced: true,
    fields: [
      ...metaFields,
      'involvedObject.kind',
      'involvedObject.namespace',
      'involvedObject.name',
      'involvedObject.uid',
      'involvedObject.apiVersion',
      'involvedObject.resourceVersion',
      'involvedObject.fieldPath',
      'reason',
      'reportingComponent',
      'source',
      'type',
    ],
  },
  namespaces: { kind: 'Namespace', listKind: 'NamespaceList', namespaced: false, fields: [...metaFields, 'status.phase'] },
};

/** What resource handlers need. */
export interface ResourceDeps extends WatchDeps {
  /** Serves pods/log (logs.ts). */
  serveLog: (pod: Pod, url: URL, res: ServerResponse) => Promise<void>;
}

type ResourceRoute = Extract<Route, { kind: 'resource' }>;

function withKind(def: ResourceDef, obj: KubeObject): KubeObject {
  return { ...obj, kind: def.kind, apiVersion: 'v1' };
}

function includeObject(url: URL): IncludeObject {
  const v = url.searchParams.get('includeObject');
  return v === 'None' || v === 'Object' ? v : 'Metadata';
}

function filterFor(route: ResourceRoute, def: ResourceDef, url: URL): ObjectFilter {
  const fields = parseFieldSelector(url.searchParams.get('fieldSelector'), def.fields);
  if (route.name !== undefined) fields.push({ field: 'metadata.name', op: '=', value: route.name });
  return {
    ...(def.namespaced && route.namespace !== undefined ? { namespace: route.namespace } : {}),
    labels: parseLabelSelector(url.searchParams.get('labelSelector')),
    fields,
  };
}

function requireNamespace(deps: ResourceDeps, namespace: string | undefined): void {
  if (namespace !== undefined && !deps.store.get('namespaces', undefined, namespace)) throw notFound('namespaces', namespace);
}

function respondObject(res: ServerResponse, req: IncomingMessage, url: URL, resource: string, def: ResourceDef, obj: KubeObject, code = 200): void {
  const full = withKind(def, obj);
  if (wantsTable(req.headers.accept)) {
    sendJson(res, code, toTable(resource, [full], full.metadata.resourceVersion ?? '', includeObject(url)));
  } else {
    sendJson(res, code, full);
  }
}

interface ContinueToken {
  rv: number;
  after: string;
}

/** 422 for ListOptions the API server rejects (apimachinery validation.ValidateListOptions). */
function invalidListOptions(message: string): ApiError {
  return new ApiError({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: `ListOptions.meta.k8s.io "" is invalid: ${message}`,
    reason: 'Invalid',
    details: { group: 'meta.k8s.io', kind: 'ListOptions' },
    code: 422,
  });
}

/**
 * A read at `resourceVersion=N` (N > 0) is served from the watch cache once it has reached N;
 * one it does not reach within 3 s gets 504 "Too large resource version"
 * (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go
 * waitUntilFreshAndBlock; storage/errors.go NewTooLargeResourceVersionError).
 */
async function notOlderThan(deps: ResourceDeps, url: URL): Promise<number | undefined> {
  const rv = url.searchParams.get('resourceVersion') ?? '';
  if (rv === '' || rv === '0') return undefined;
  if (!/^\d+$/.test(rv)) throw badRequest(`resourceVersion: Invalid value: "${rv}": must be a non-negative integer`);
  const wanted = Number(rv);
  if (!(await deps.store.reached(wanted, deps.settings.freshWaitMs))) throw new ApiError(tooLargeResourceVersion(wanted, deps.store.resourceVersion));
  return wanted;
}

/**
 * resourceVersionMatch as the API server validates and serves it: `NotOlderThan` (also the
 * meaning of a bare resourceVersion=N) serves the latest state once it reached N; `Exact`
 * serves the state at N from the watch history, 410 Expired when the history no longer reaches
 * back that far (apimachinery pkg/apis/meta/internalversion/validation ValidateListOptions;
 * apiserver storage/cacher/cacher.go GetList, delegating Exact to storage).
 */
async function listItems(deps: ResourceDeps, route: ResourceRoute, filter: ObjectFilter, url: URL): Promise<{ items: KubeObject[]; resourceVersion: number }> {
  const match = url.searchParams.get('resourceVersionMatch') ?? '';
  const rv = url.searchParams.get('resourceVersion') ?? '';
  if (match !== '') {
    if (match !== 'Exact' && match !== 'NotOlderThan')
      throw invalidListOptions(`resourceVersionMatch: Unsupported value: "${match}": supported values: "Exact", "NotOlderThan", ""`);
    if (rv === '') throw invalidListOptions('resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided');
    if (url.searchParams.get('continue'))
      throw invalidListOptions('resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided');
    if (match === 'Exact' && rv === '0')
      throw invalidListOptions('resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"');
  }
  const wanted = await notOlderThan(deps, url);
  if (match === 'Exact' && wanted !== undefined) {
    const items = deps.store.listAt(route.resource, filter, wanted);
    if (!items) throw listTooOld();
    return { items, resourceVersion: wanted };
  }
  return deps.store.list(route.resource, filter);
}

async function list(deps: ResourceDeps, route: ResourceRoute, def: ResourceDef, url: URL, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const filter = filterFor(route, def, url);
  const { items, resourceVersion } = await listItems(deps, route, filter, url);
  let page = items;
  let cont: string | undefined;
  let remaining: number | undefined;
  const token = url.searchParams.get('continue');
  if (token) {
    let parsed: ContinueToken;
    try {
      parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as ContinueToken;
    } catch {
      throw badRequest('continue key is not valid: illegal base64 data');
    }
    page = page.filter((o) => `${o.metadata.namespace ?? ''}/${o.metadata.name ?? ''}` > parsed.after);
  }
  const limit = queryInt('limit', url.searchParams.get('limit'));
  if (limit !== undefined && limit > 0 && page.length > limit) {
    remaining = page.length - limit;
    page = page.slice(0, limit);
    const last = page[page.length - 1];
    cont = Buffer.from(JSON.stringify({ rv: resourceVersion, after: `${last?.metadata.namespace ?? ''}/${last?.metadata.name ?? ''}` })).toString('base64url');
  }
  const metadata = { resourceVersion: String(resourceVersion), ...(cont ? { continue: cont, remainingItemCount: remaining } : {}) };
  if (wantsTable(req.headers.accept)) {
    sendJson(
      res,
      200,
      toTable(
        route.resource,
        page.map((o) => withKind(def, o)),
        String(resourceVersion),
        includeObject(url),
        cont ? { continue: cont } : {},
      ),
    );
    return;
  }
  sendJson(res, 200, { kind: def.listKind, apiVersion: 'v1', metadata, items: page });
}

function asObject(body: unknown): KubeObject {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('the body of the request must be a JSON object');
  const obj = body as KubeObject;
  if (!obj.metadata || typeof obj.metadata !== 'object') obj.metadata = {};
  return obj;
}

function prepareEventCreate(input: KubeObject, namespace: string): CoreEvent {
  const ev = clone(input) as CoreEvent;
  if (ev.metadata.namespace && ev.metadata.namespace !== namespace) {
    throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
  }
  ev.metadata.namespace = namespace;
  const causes: StatusCause[] = [];
  validateMeta(ev, causes);
  if (!ev.involvedObject || typeof ev.involvedObject !== 'object')
    causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: 'involvedObject' });
  else if (ev.involvedObject.namespace && ev.involvedObject.namespace !== namespace) {
    causes.push({
      reason: 'FieldValueInvalid',
      message: `Invalid value: "${ev.involvedObject.namespace}": does not match event.namespace`,
      field: 'involvedObject.namespace',
    });
  }
  if (causes.length > 0) throw invalid('Event', ev.metadata.name ?? ev.metadata.generateName ?? '', causes);
  ev.apiVersion = 'v1';
  ev.kind = 'Event';
  ev.firstTimestamp ??= null;
  ev.lastTimestamp ??= null;
  ev.eventTime ??= null;
  ev.reportingComponent ??= '';
  ev.reportingInstance ??= '';
  return ev;
}

function prepareNamespaceCreate(input: KubeObject): KubeObject {
  const ns = clone(input);
  const causes: StatusCause[] = [];
  validateMeta(ns, causes, labelError);
  if (causes.length > 0) throw invalid('Namespace', ns.metadata.name ?? '', causes);
  delete ns.metadata.namespace;
  ns.apiVersion = 'v1';
  ns.kind = 'Namespace';
  ns.spec = { finalizers: ['kubernetes'] };
  ns.status = { phase: 'Active' };
  return ns;
}

/** The deletion options a client may send in the body or the query. */
interface DeleteOptions {
  gracePeriodSeconds?: number;
  propagationPolicy?: string;
  preconditions?: { uid?: string; resourceVersion?: string };
}

async function deleteOptions(req: IncomingMessage, url: URL): Promise<DeleteOptions> {
  const body = (await readJson(req)) as DeleteOptions | undefined;
  const opts: DeleteOptions = { ...(body ?? {}) };
  const grace = queryInt('gracePeriodSeconds', url.searchParams.get('gracePeriodSeconds'));
  if (grace !== undefined) opts.gracePeriodSeconds = grace;
  const policy = url.searchParams.get('propagationPolicy');
  if (policy) opts.propagationPolicy = policy;
  if (opts.propagationPolicy && !['Orphan', 'Background', 'Foreground'].includes(opts.propagationPolicy)) {
    throw invalid('DeleteOptions', '', [
      {
        reason: 'FieldValueNotSupported',
        message: `Unsupported value: "${opts.propagationPolicy}": supported values: "Foreground", "Background", "Orphan"`,
        field: 'propagationPolicy',
      },
    ]);
  }
  return opts;
}

/**
 * Deletes a pod as the API server does: graceful (deletionTimestamp set, the node agent kills
 * the containers and then removes the object) unless the grace period is 0, the pod is not
 * bound to the node, or it already ended — then it goes at once.
 */
function deletePod(deps: ResourceDeps, namespace: string, name: string, opts: DeleteOptions): KubeObject {
  const pod = deps.store.mustGet('pods', namespace, name) as Pod;
  if (opts.preconditions?.uid && opts.preconditions.uid !== pod.metadata.uid) {
    throw new ApiError({
      ...conflict('pods', name).status,
      message: `Precondition failed: UID in precondition: ${opts.preconditions.uid}, UID in object meta: ${pod.metadata.uid ?? ''}`,
    });
  }
  if (opts.preconditions?.resourceVersion && opts.preconditions.resourceVersion !== pod.metadata.resourceVersion) {
    throw new ApiError({
      ...conflict('pods', name).status,
      message: `Precondition failed: ResourceVersion in precondition: ${opts.preconditions.resourceVersion}, ResourceVersion in object meta: ${pod.metadata.resourceVersion ?? ''}`,
    });
  }
  if (pod.metadata.deletionTimestamp) return pod;
  const grace = Math.max(0, opts.gracePeriodSeconds ?? pod.spec.terminationGracePeriodSeconds ?? 30);
  const phase = pod.status?.phase;
  if (grace === 0 || !pod.spec.nodeName || phase === 'Succeeded' || phase === 'Failed') {
    return deps.store.remove('pods', namespace, name);
  }
  return deps.store.markDeleting('pods', namespace, name, grace);
}

/** Serves a routed request for pods, pods/status, pods/log, events or namespaces. */
export async function handleResource(deps: ResourceDeps, route: ResourceRoute, url: URL, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const def = resourceDefs[route.resource];
  if (!def) throw notFound(route.resource, route.name ?? '');
  const { store } = deps;
  const ns = def.namespaced ? route.namespace : undefined;

  if (route.subresource === 'log') {
    const pod = store.mustGet('pods', ns, route.name ?? '') as Pod;
    await deps.serveLog(pod, url, res);
    return;
  }

  switch (route.verb) {
    case 'watch': {
      const accept = req.headers.accept;
      if (url.searchParams.get('resourceVersionMatch'))
        throw invalidListOptions('resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch');
      await serveWatch(deps, route.resource, filterFor(route, def, url), url, req, res, wantsTable(accept) ? includeObject(url) : null);
      return;
    }
    case 'list':
      await list(deps, route, def, url, req, res);
      return;
    case 'get':
      await notOlderThan(deps, url);
      respondObject(res, req, url, route.resource, def, store.mustGet(route.resource, ns, route.name ?? ''));
      return;
    case 'create': {
      const body = asObject(await readJson(req));
      let obj: KubeObject;
      if (route.resource === 'pods') {
        requireNamespace(deps, ns);
        obj = preparePodCreate(body, ns ?? 'default');
      } else if (route.resource === 'events') {
        requireNamespace(deps, ns);
        obj = prepareEventCreate(body, ns ?? 'default');
      } else {
        obj = prepareNamespaceCreate(body);
      }
      respondObject(res, req, url, route.resource, def, store.create(route.resource, obj), 201);
      return;
    }
    case 'update':
    case 'patch': {
      if (route.resource === 'namespaces') throw methodNotAllowed(route.verb);
      const current = store.mustGet(route.resource, ns, route.name ?? '');
      const body = await readJson(req);
      let next: KubeObject;
      if (route.verb === 'patch') {
        next = asObject(applyPatch(req.headers['content-type'] ?? '', current, body));
      } else {
        next = asObject(body);
      }
      const expected = next.metadata.resourceVersion;
      if (route.verb === 'patch' && expected && expected !== current.metadata.resourceVersion) throw conflict(route.resource, route.name ?? '');
      if ((next.metadata.name ?? route.name) !== route.name) throw badRequest('the name of the object does not match the name on the URL');
      next.metadata.name = route.name;
      next.metadata.namespace = ns;
      if (route.resource === 'pods') {
        next = route.subresource === 'status' ? preparePodStatusUpdate(current as Pod, next as Pod) : preparePodUpdate(current as Pod, next as Pod);
      } else {
        next = prepareEventCreate(next, ns ?? 'default');
      }
      respondObject(res, req, url, route.resource, def, store.update(route.resource, next, route.verb === 'update' ? expected : undefined));
      return;
    }
    case 'delete': {
      if (route.resource === 'namespaces') throw methodNotAllowed('delete');
      const opts = await deleteOptions(req, url);
      const obj = route.resource === 'pods' ? deletePod(deps, ns ?? 'default', route.name ?? '', opts) : store.remove(route.resource, ns, route.name ?? '');
      respondObject(res, req, url, route.resource, def, obj);
      return;
    }
    case 'deletecollection': {
      if (route.resource === 'namespaces') throw methodNotAllowed('deletecollection');
      const opts = await deleteOptions(req, url);
      const { items } = store.list(route.resource, filterFor(route, def, url));
      const deleted = items.map((o) =>
        route.resource === 'pods'
          ? deletePod(deps, o.metadata.namespace ?? 'default', o.metadata.name ?? '', opts)
          : store.remove(route.resource, o.metadata.namespace, o.metadata.name ?? ''),
      );
      sendJson(res, 200, { kind: def.listKind, apiVersion: 'v1', metadata: { resourceVersion: String(store.resourceVersion) }, items: deleted });
      return;
    }
  }
}
