// The HTTPS front: bearer-token authentication, routing, request counting, injected request
// failures, and the admin endpoints under /_sim/.

import { type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import { timingSafeEqual } from 'node:crypto';
import { type Counters } from './counters.ts';
import { type Faults, type FaultUpdate } from './faults.ts';
import { discovery } from './api/discovery.ts';
import { readJson, sendError, sendJson } from './api/http.ts';
import { handleResource, type ResourceDeps } from './api/resources.ts';
import { route } from './api/router.ts';
import { ApiError, badRequest, forbidden, gone, internalError, pathNotFound, tooManyRequests, unauthorized } from './status.ts';
import { type TlsMaterial } from './tls.ts';

/** What the HTTP front needs. */
export interface ServerDeps extends ResourceDeps {
  token: string;
  counters: Counters;
  faults: Faults;
  /** Address advertised in /api (host:port), set once listening. */
  serverAddress: () => string;
  /** The user named in 403 messages. */
  user: string;
}

function authorized(req: IncomingMessage, token: string): boolean {
  const header = req.headers.authorization ?? '';
  const m = /^Bearer\s+(.+)$/i.exec(header);
  if (!m) return false;
  const a = Buffer.from(m[1] ?? '');
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

function injected(code: 410 | 429 | 500): ApiError {
  if (code === 410) return gone('The resourceVersion for the provided list is too old. (injected by kube-sim)');
  if (code === 429) return tooManyRequests(1);
  return internalError('injected by kube-sim');
}

async function handleAdmin(deps: ServerDeps, pathname: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (pathname === '/_sim/counters') {
    if (req.method === 'GET') return sendJson(res, 200, deps.counters.snapshot());
    if (req.method === 'DELETE') {
      deps.counters.reset();
      return sendJson(res, 200, deps.counters.snapshot());
    }
  }
  if (pathname === '/_sim/faults') {
    if (req.method === 'GET') return sendJson(res, 200, deps.faults.get());
    if (req.method === 'DELETE') return sendJson(res, 200, deps.faults.clear());
    if (req.method === 'POST' || req.method === 'PUT' || req.method === 'PATCH') {
      const body = await readJson(req);
      if (body !== undefined && (typeof body !== 'object' || body === null || Array.isArray(body))) throw badRequest('faults: expected a JSON object');
      const update: FaultUpdate = body ?? {};
      try {
        return sendJson(res, 200, deps.faults.set(update));
      } catch (err) {
        throw badRequest((err as Error).message);
      }
    }
  }
  throw pathNotFound();
}

/** Creates (does not start) the HTTPS API server. */
export function createApiServer(tls: TlsMaterial, deps: ServerDeps): Server {
  const server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    void handle(req, res);
  });
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    try {
      const url = new URL(req.url ?? '/', 'https://127.0.0.1');
      if (!authorized(req, deps.token)) throw unauthorized();
      if (url.pathname.startsWith('/_sim/')) {
        await handleAdmin(deps, url.pathname, req, res);
        return;
      }
      const r = route(req.method ?? 'GET', url.pathname, url.searchParams);
      if (r.kind === 'discovery') {
        deps.counters.request('get', 'discovery');
        const body = discovery(r.path, deps.serverAddress());
        if (typeof body === 'string') {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.end(body);
        } else {
          sendJson(res, 200, body);
        }
        return;
      }
      deps.counters.request(r.verb, r.resource, r.subresource);
      const resource = r.subresource ? `${r.resource}/${r.subresource}` : r.resource;
      countBytes(res, (n) => deps.counters.bytesSent(r.verb, resource, n));
      if (deps.faults.isForbidden(r.verb, resource, r.namespace)) throw forbidden(deps.user, r.verb, r.resource, r.subresource, r.namespace, r.name);
      const code = deps.faults.takeFailure(r.verb);
      if (code) {
        deps.counters.fault(code);
        throw injected(code);
      }
      await handleResource(deps, r, url, req, res);
    } catch (err) {
      if (!(err instanceof ApiError)) console.error('[kube-sim] request failed:', err);
      if (res.headersSent) res.destroy();
      else sendError(res, err);
    }
  };
  return server;
}

/** Calls `count` with the size of every body chunk `res` writes (strings as UTF-8). */
function countBytes(res: ServerResponse, count: (n: number) => void): void {
  const size = (chunk: unknown): number => (typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk instanceof Uint8Array ? chunk.byteLength : 0);
  const write = res.write.bind(res) as (...args: unknown[]) => boolean;
  const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
  res.write = ((chunk: unknown, ...rest: unknown[]) => {
    count(size(chunk));
    return write(chunk, ...rest);
  }) as ServerResponse['write'];
  res.end = ((chunk?: unknown, ...rest: unknown[]) => {
    if (typeof chunk !== 'function') count(size(chunk));
    return end(chunk, ...rest);
  }) as ServerResponse['end'];
}
