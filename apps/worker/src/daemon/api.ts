/**
 * The worker's HTTP API, Vela's routes: health, readiness, version, metrics, registration, and
 * the executors a Vela server reads and cancels builds through. node:http (node:https with TLS)
 * and find-my-way, fastify's router: a dozen routes answering small JSON bodies need neither
 * fastify's schemas, serializers nor plugin system, which held ~10 MB of an idle worker's memory
 * (tools/bench worker-memory).
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { arch, platform } from 'node:os';
import FindMyWay from 'find-my-way';
import { probeRuntime } from '../runtimes.ts';
import { httpDateNow } from './http-date.ts';
import type { SlotEntry, WorkerApiHost } from './types.ts';
import { errText } from './util.ts';

/** The worker API's TLS settings (server.cert, server.cert-key, server.tls-min-version). */
export interface ApiTls {
  cert: Buffer;
  key: Buffer;
  minVersion: '1.0' | '1.1' | '1.2' | '1.3';
}

const TLS_VERSIONS = { '1.0': 'TLSv1', '1.1': 'TLSv1.1', '1.2': 'TLSv1.2', '1.3': 'TLSv1.3' } as const;

/** The `/version` body, in Vela's shape. */
function versionBody(version: string): Record<string, unknown> {
  const [core = '0.0.0', pre] = version.split('-', 2);
  const [major = 0, minor = 0, patch = 0] = core.split('.').map((n) => Number(n) || 0);
  return {
    canonical: `v${version}`,
    major,
    minor,
    patch,
    ...(pre ? { pre_release: pre } : {}),
    metadata: { architecture: arch(), build_date: '', compiler: 'node', git_commit: '', go_version: process.version, operating_system: platform() },
  };
}

function executorJson(daemon: WorkerApiHost, entry: SlotEntry): Record<string, unknown> {
  return { id: entry.slot, runtime: daemon.config.runtime.driver, distribution: 'linux', build: entry.build(), pipeline: entry.pipeline };
}

/** The API's server: listen, its address, close (new requests get 503 meanwhile, idle connections end). */
export interface ApiServer {
  readonly server: Server;
  listen(at: { host: string; port: number }): Promise<void>;
  close(): Promise<void>;
}

/** The largest request body accepted (no route reads one; POST /register ignores its body). */
const BODY_LIMIT = 64 * 1024;

const json = (res: ServerResponse, status: number, body: unknown): void => {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
};

/** Reads and drops the request's body; false (after answering 413) when it is larger than {@link BODY_LIMIT}. */
function drainBody(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
  return new Promise((resolve) => {
    let size = 0;
    let over = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > BODY_LIMIT && !over) {
        over = true;
        res.setHeader('connection', 'close');
        json(res, 413, { error: 'Request body is too large' });
        resolve(false);
      }
    });
    req.once('end', () => resolve(!over));
    req.once('error', () => resolve(false));
  });
}

type Handler = (req: IncomingMessage, res: ServerResponse, params: Record<string, string | undefined>) => void | Promise<void>;

/**
 * Builds the API of `daemon`. Every `/api/v1` route requires a bearer token the Vela server
 * validates (`GET /validate-token`): no bearer → 400 `error parsing token`, a token the server
 * refuses → 401, the server unreachable → 500 `error validating token`, as go-vela/worker answers.
 */
export function createApi(daemon: WorkerApiHost, options: { tls?: ApiTls } = {}): ApiServer {
  let closing = false;
  const router = FindMyWay({
    defaultRoute: (req, res) => json(res, 404, { error: `no route ${req.method} ${(req.url ?? '').split('?')[0]}` }),
  });
  /** A GET route answers HEAD too (without a body: node:http drops it). */
  const get = (path: string, handler: Handler): void => router.on(['GET', 'HEAD'], path, handler);

  get('/health', (_req, res) => json(res, 200, 'ok'));
  get('/version', (_req, res) => json(res, 200, versionBody(daemon.version)));
  get('/metrics', async (_req, res) => {
    const text = await daemon.metrics.registry.metrics();
    res.writeHead(200, { 'content-type': daemon.metrics.registry.contentType, 'content-length': Buffer.byteLength(text) });
    res.end(text);
  });
  get('/ready', async (_req, res) => {
    const r = await daemon.readiness(probeRuntime);
    const failed = Object.entries(r.checks)
      .filter(([, c]) => !c.ok)
      .map(([k]) => k);
    json(res, r.ready ? 200 : 503, { ready: r.ready, ...(daemon.draining ? { draining: true } : {}), failed, checks: r.checks });
  });
  router.on('POST', '/register', (req, res) => {
    const answer = daemon.credentials.offerRegistration(req.headers.authorization);
    if (answer.status === 200) daemon.log.info({ answer: answer.body }, 'registration token received');
    else daemon.log.warn({ answer: answer.body }, 'registration token refused');
    json(res, answer.status, answer.body);
  });

  /** The routes under /api/v1: a bearer token the server validates first. */
  const guarded =
    (handler: Handler): Handler =>
    async (req, res, params) => {
      const header = req.headers.authorization;
      if (typeof header !== 'string' || !header.startsWith('Bearer ') || header.slice(7).trim() === '') {
        daemon.log.warn({ route: req.url }, 'worker API call without a bearer token');
        json(res, 400, { error: 'error parsing token: no bearer token in the Authorization header' });
        return;
      }
      let valid: boolean;
      try {
        valid = await daemon.validateServerToken(header.slice(7).trim());
      } catch (e) {
        daemon.log.error({ route: req.url, err: e }, 'could not validate a token with the server');
        json(res, 500, { error: `error validating token: ${errText(e)}` });
        return;
      }
      if (!valid) {
        daemon.log.warn({ route: req.url }, 'worker API call with a token the server does not validate');
        json(res, 401, { error: 'unable to validate token' });
        return;
      }
      await handler(req, res, params);
    };
  const api = (methods: string[], path: string, handler: Handler): void =>
    router.on(methods as Parameters<typeof router.on>[0], `/api/v1${path}`, guarded(handler));

  /** The slot the `:id` parameter names, or undefined after answering 400 or 404. */
  const slotOf = (params: Record<string, string | undefined>, res: ServerResponse): SlotEntry | undefined => {
    const raw = params.id ?? '';
    const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
    if (!Number.isInteger(n) || n >= daemon.config.build.limit) {
      json(res, 400, { error: `invalid executor id ${JSON.stringify(raw)}: use 0 to ${daemon.config.build.limit - 1}` });
      return undefined;
    }
    const entry = daemon.slots.get(n);
    if (!entry) json(res, 404, { error: `no build is running on executor ${n}` });
    return entry;
  };
  const executor = (path: string, answer: (entry: SlotEntry) => unknown): void =>
    api(['GET', 'HEAD'], `/executors/:id${path}`, (_req, res, params) => {
      const e = slotOf(params, res);
      if (e) json(res, 200, answer(e));
    });

  api(['GET', 'HEAD'], '/executors', (_req, res) =>
    json(
      res,
      200,
      [...daemon.slots.values()].sort((a, b) => a.slot - b.slot).map((e) => executorJson(daemon, e)),
    ),
  );
  executor('', (e) => executorJson(daemon, e));
  executor('/build', (e) => e.build());
  executor('/pipeline', (e) => e.pipeline);
  executor('/repo', (e) => e.repo ?? {});
  // Answers once the cancel is recorded; the build stops in the background (daemon.cancel).
  api(['DELETE'], '/executors/:id/build/cancel', (_req, res, params) => {
    const e = slotOf(params, res);
    if (!e) return;
    const canceled = daemon.cancel(e.slot);
    // 200 with the build either way: the server parses the body as a Build whatever the status.
    if (canceled) json(res, 200, canceled.build);
    else json(res, 404, { error: `no build is running on executor ${e.slot}` });
  });
  api(['POST'], '/shutdown', (_req, res) => json(res, 501, 'This endpoint is not yet implemented'));

  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    // Set here, node:http does not add its own (http-date.ts: why).
    res.setHeader('date', httpDateNow());
    void (async () => {
      try {
        if (!(await drainBody(req, res))) return;
        if (closing) {
          res.setHeader('connection', 'close');
          json(res, 503, { error: 'the worker API is closing' });
          return;
        }
        await router.lookup(req, res);
      } catch (error) {
        daemon.log.error({ err: error }, 'worker API error');
        if (!res.headersSent) json(res, 500, { error: errText(error) });
        else res.destroy();
      }
    })();
  };
  // go-vela/worker cmd/vela-worker/server.go: TLS with the worker's certificate and key when the
  // worker address is https, with tls.Config MinVersion from server.tls-min-version.
  const server: Server = options.tls
    ? process
        .getBuiltinModule('node:https')
        .createServer({ cert: options.tls.cert, key: options.tls.key, minVersion: TLS_VERSIONS[options.tls.minVersion] }, onRequest)
    : process.getBuiltinModule('node:http').createServer(onRequest);
  return {
    server,
    listen: ({ host, port }) =>
      new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve();
        });
      }),
    close: () =>
      new Promise((resolve) => {
        closing = true;
        if (!server.listening) {
          resolve();
          return;
        }
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
