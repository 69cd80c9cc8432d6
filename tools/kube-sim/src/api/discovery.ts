// Discovery documents: what kubectl and client libraries read before anything else. Only
// legacy (non-aggregated) discovery is served; kubectl falls back to it. OpenAPI is 404.

import { pathNotFound } from '../status.ts';

/** The version kube-sim claims to be. */
const serverVersion = {
  major: '1',
  minor: '32',
  gitVersion: 'v1.32.0-kube-sim',
  gitCommit: '0000000000000000000000000000000000000000',
  gitTreeState: 'clean',
  buildDate: '2024-12-11T00:00:00Z',
  goVersion: 'go1.23.4',
  compiler: 'gc',
  platform: 'linux/amd64',
};

const resources = [
  {
    name: 'events',
    singularName: 'event',
    namespaced: true,
    kind: 'Event',
    verbs: ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'],
    shortNames: ['ev'],
  },
  {
    name: 'namespaces',
    singularName: 'namespace',
    namespaced: false,
    kind: 'Namespace',
    verbs: ['create', 'get', 'list', 'watch'],
    shortNames: ['ns'],
  },
  {
    name: 'pods',
    singularName: 'pod',
    namespaced: true,
    kind: 'Pod',
    verbs: ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'],
    shortNames: ['po'],
    categories: ['all'],
  },
  { name: 'pods/log', singularName: '', namespaced: true, kind: 'Pod', verbs: ['get'] },
  { name: 'pods/status', singularName: '', namespaced: true, kind: 'Pod', verbs: ['get', 'patch', 'update'] },
];

/** Answers a discovery path, or throws 404. */
export function discovery(path: string, serverAddress: string): unknown {
  switch (path) {
    case '/version':
      return serverVersion;
    case '/api':
      return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }] };
    case '/apis':
      return { kind: 'APIGroupList', apiVersion: 'v1', groups: [] };
    case '/api/v1':
      return { kind: 'APIResourceList', groupVersion: 'v1', resources };
    case '/livez':
    case '/readyz':
    case '/healthz':
      return 'ok';
    default:
      throw pathNotFound();
  }
}
