// A scriptable stand-in for the API server, for unit tests of the informer and the log follower:
// each request is handed to the test, which answers it however it likes.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';

/** One request the fake received. */
export interface FakeRequest {
  method: string;
  url: URL;
  req: http.IncomingMessage;
  res: http.ServerResponse;
}

/** A running fake API server. */
export interface FakeApi {
  url: string;
  kc: KubeConfig;
  requests: FakeRequest[];
  /** Sockets currently open (to check that streams were closed). */
  openSockets(): number;
  close(): Promise<void>;
}

/** Starts a plain-HTTP fake on 127.0.0.1 (the kubeconfig sets insecure-skip-tls-verify, which client-node requires for http). */
export async function startFakeApi(handler: (request: FakeRequest) => void): Promise<FakeApi> {
  const requests: FakeRequest[] = [];
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    const request = { method: req.method ?? 'GET', url: new URL(req.url ?? '/', 'http://fake'), req, res };
    requests.push(request);
    handler(request);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'fake', server: url, skipTLSVerify: true }],
    users: [{ name: 'fake', token: 'fake-token' }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'fake', namespace: 'ns' }],
    currentContext: 'fake',
  });
  return {
    url,
    kc,
    requests,
    openSockets: () => sockets.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Answers with JSON. */
export function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** A pod object as the API server sends it. */
export function podObject(name: string, rv: string, fields: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: 'ns',
      uid: `uid-${name}`,
      resourceVersion: rv,
      labels: { app: 'x' },
      managedFields: [{ manager: 'kubectl', operation: 'Update' }],
    },
    spec: { containers: [{ name: 'c', image: 'busybox', env: [{ name: 'SECRET', value: 'hunter2' }] }] },
    status: { phase: 'Running' },
    ...fields,
  };
}

/** Waits until `check()` holds, polling every 10 ms, at most `ms`. */
export async function eventually(check: () => boolean, ms = 5_000): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
