// Maps a request path and method to what the API server would call it: verb, resource,
// subresource, namespace and name.

import { type Verb } from '../counters.ts';
import { methodNotAllowed, pathNotFound } from '../status.ts';

/** A routed API request. */
export type Route =
  | { kind: 'discovery'; path: string }
  | {
      kind: 'resource';
      verb: Verb;
      resource: string;
      subresource?: string;
      namespace?: string;
      name?: string;
      /** From a `/watch/` path (deprecated form) rather than `?watch=true`. */
      watchPath: boolean;
    };

const discoveryPaths = new Set(['/version', '/api', '/apis', '/api/v1', '/openapi/v2', '/openapi/v3', '/livez', '/readyz', '/healthz']);

/** The resources kube-sim serves under /api/v1. */
const servedResources = new Set(['pods', 'events', 'namespaces']);

/** Routes a request; throws 404/405 ApiErrors for paths and methods kube-sim does not serve. */
export function route(method: string, pathname: string, query: URLSearchParams): Route {
  const path = pathname.length > 1 ? pathname.replace(/\/+$/, '') : pathname;
  if (discoveryPaths.has(path) || path.startsWith('/openapi/') || path.startsWith('/apis/')) {
    return { kind: 'discovery', path };
  }
  if (!path.startsWith('/api/v1/')) throw pathNotFound();
  let parts = path.slice('/api/v1/'.length).split('/').map(decodeURIComponent);
  let watchPath = false;
  if (parts[0] === 'watch') {
    watchPath = true;
    parts = parts.slice(1);
  }
  let namespace: string | undefined;
  let resource: string | undefined;
  let name: string | undefined;
  let subresource: string | undefined;
  if (parts[0] === 'namespaces' && parts.length >= 3) {
    namespace = parts[1];
    resource = parts[2];
    name = parts[3];
    subresource = parts[4];
    if (parts.length > 5) throw pathNotFound();
  } else {
    resource = parts[0];
    name = parts[1];
    subresource = parts[2];
    if (parts.length > 3) throw pathNotFound();
    if (resource === 'namespaces' && subresource) {
      // /api/v1/namespaces/{name}/status etc.
    }
  }
  if (!resource || !servedResources.has(resource)) throw pathNotFound();
  if (resource === 'namespaces' && namespace !== undefined) throw pathNotFound();
  if (resource !== 'namespaces' && name !== undefined && namespace === undefined) throw pathNotFound();
  if (subresource !== undefined && !(resource === 'pods' && (subresource === 'log' || subresource === 'status'))) throw pathNotFound();
  const watchQuery = query.get('watch') === 'true' || query.get('watch') === '1';
  const base = {
    kind: 'resource' as const,
    resource,
    watchPath,
    ...(subresource ? { subresource } : {}),
    ...(namespace !== undefined ? { namespace } : {}),
    ...(name !== undefined ? { name } : {}),
  };
  if (watchPath || watchQuery) {
    if (method !== 'GET' || subresource) throw methodNotAllowed('watch');
    return { ...base, verb: 'watch' };
  }
  switch (method) {
    case 'GET':
      return { ...base, verb: name === undefined ? 'list' : 'get' };
    case 'POST':
      if (name !== undefined) throw methodNotAllowed('create');
      return { ...base, verb: 'create' };
    case 'PUT':
      if (name === undefined) throw methodNotAllowed('update');
      return { ...base, verb: 'update' };
    case 'PATCH':
      if (name === undefined) throw methodNotAllowed('patch');
      return { ...base, verb: 'patch' };
    case 'DELETE':
      return { ...base, verb: name === undefined ? 'deletecollection' : 'delete' };
    default:
      throw methodNotAllowed(method);
  }
}
