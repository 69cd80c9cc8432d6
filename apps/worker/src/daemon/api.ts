/**
 * The worker's HTTP API (fastify), Vela's routes: health, readiness, version, metrics,
 * registration, and the executors a Vela server reads and cancels builds through.
 */
import { arch, platform } from 'node:os';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { probeRuntime } from '../runtimes.ts';
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

const json = (reply: FastifyReply, status: number, body: unknown): FastifyReply =>
  reply.code(status).type('application/json; charset=utf-8').send(JSON.stringify(body));

/**
 * Builds the API of `daemon`. Every `/api/v1` route requires a bearer token the Vela server
 * validates (`GET /validate-token`): no bearer → 400 `error parsing token`, a token the server
 * refuses → 401, the server unreachable → 500 `error validating token`, as go-vela/worker answers.
 */
export function createApi(daemon: WorkerApiHost, options: { tls?: ApiTls } = {}): FastifyInstance {
  const base = { logger: false, bodyLimit: 64 * 1024, return503OnClosing: true } as const;
  // go-vela/worker cmd/vela-worker/server.go: TLS with the worker's certificate and key when the
  // worker address is https, with tls.Config MinVersion from server.tls-min-version.
  const app = (
    options.tls
      ? Fastify({ ...base, https: { cert: options.tls.cert, key: options.tls.key, minVersion: TLS_VERSIONS[options.tls.minVersion] } })
      : Fastify(base)
  ) as FastifyInstance;
  // POST /register takes no body; accept and ignore whatever comes.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, _body, done) => done(null, undefined));

  app.setNotFoundHandler((req, reply) => json(reply, 404, { error: `no route ${req.method} ${req.url.split('?')[0]}` }));
  app.setErrorHandler((error: { statusCode?: number; message?: string }, _req, reply) => {
    const status = typeof error.statusCode === 'number' && error.statusCode >= 400 ? error.statusCode : 500;
    if (status >= 500) daemon.log.error({ err: error }, 'worker API error');
    return json(reply, status, { error: error.message ?? 'internal error' });
  });

  app.get('/health', (_req, reply) => json(reply, 200, 'ok'));
  app.get('/version', (_req, reply) => json(reply, 200, versionBody(daemon.version)));
  app.get('/metrics', async (_req, reply) => {
    const text = await daemon.metrics.registry.metrics();
    return reply.code(200).type(daemon.metrics.registry.contentType).send(text);
  });
  app.get('/ready', async (_req, reply) => {
    const r = await daemon.readiness(probeRuntime);
    const failed = Object.entries(r.checks)
      .filter(([, c]) => !c.ok)
      .map(([k]) => k);
    return json(reply, r.ready ? 200 : 503, { ready: r.ready, ...(daemon.draining ? { draining: true } : {}), failed, checks: r.checks });
  });
  app.post('/register', (req, reply) => {
    const res = daemon.credentials.offerRegistration(req.headers.authorization);
    if (res.status === 200) daemon.log.info({ answer: res.body }, 'registration token received');
    else daemon.log.warn({ answer: res.body }, 'registration token refused');
    return json(reply, res.status, res.body);
  });

  void app.register(
    (api, _opts, done) => {
      api.addHook('preHandler', async (req: FastifyRequest, reply: FastifyReply) => {
        const header = req.headers.authorization;
        if (typeof header !== 'string' || !header.startsWith('Bearer ') || header.slice(7).trim() === '') {
          daemon.log.warn({ route: req.url }, 'worker API call without a bearer token');
          return json(reply, 400, { error: 'error parsing token: no bearer token in the Authorization header' });
        }
        let valid: boolean;
        try {
          valid = await daemon.validateServerToken(header.slice(7).trim());
        } catch (e) {
          daemon.log.error({ route: req.url, err: e }, 'could not validate a token with the server');
          return json(reply, 500, { error: `error validating token: ${errText(e)}` });
        }
        if (!valid) {
          daemon.log.warn({ route: req.url }, 'worker API call with a token the server does not validate');
          return json(reply, 401, { error: 'unable to validate token' });
        }
        return undefined;
      });

      const slotOf = (req: FastifyRequest, reply: FastifyReply): SlotEntry | FastifyReply => {
        const raw = (req.params as { id?: string }).id ?? '';
        const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
        if (!Number.isInteger(n) || n >= daemon.config.build.limit) {
          return json(reply, 400, { error: `invalid executor id ${JSON.stringify(raw)}: use 0 to ${daemon.config.build.limit - 1}` });
        }
        const entry = daemon.slots.get(n);
        if (!entry) return json(reply, 404, { error: `no build is running on executor ${n}` });
        return entry;
      };
      const isEntry = (x: SlotEntry | FastifyReply): x is SlotEntry => typeof (x as SlotEntry).build === 'function';

      api.get('/executors', (_req, reply) =>
        json(
          reply,
          200,
          [...daemon.slots.values()].sort((a, b) => a.slot - b.slot).map((e) => executorJson(daemon, e)),
        ),
      );
      api.get('/executors/:id', (req, reply) => {
        const e = slotOf(req, reply);
        return isEntry(e) ? json(reply, 200, executorJson(daemon, e)) : e;
      });
      api.get('/executors/:id/build', (req, reply) => {
        const e = slotOf(req, reply);
        return isEntry(e) ? json(reply, 200, e.build()) : e;
      });
      api.get('/executors/:id/pipeline', (req, reply) => {
        const e = slotOf(req, reply);
        return isEntry(e) ? json(reply, 200, e.pipeline) : e;
      });
      api.get('/executors/:id/repo', (req, reply) => {
        const e = slotOf(req, reply);
        return isEntry(e) ? json(reply, 200, e.repo ?? {}) : e;
      });
      // Answers once the cancel is recorded; the build stops in the background (daemon.cancel).
      api.delete('/executors/:id/build/cancel', (req, reply) => {
        const e = slotOf(req, reply);
        if (!isEntry(e)) return e;
        const res = daemon.cancel(e.slot);
        // 200 with the build either way: the server parses the body as a Build whatever the status.
        return res ? json(reply, 200, res.build) : json(reply, 404, { error: `no build is running on executor ${e.slot}` });
      });
      api.post('/shutdown', (_req, reply) => json(reply, 501, 'This endpoint is not yet implemented'));
      done();
    },
    { prefix: '/api/v1' },
  );
  return app;
}
