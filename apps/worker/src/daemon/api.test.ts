// The worker API's HTTP behaviour that fastify gave and node:http with find-my-way keeps (issue 28
// item 3 replaced fastify): HEAD on GET routes, the body limit, 404 for unknown routes, the
// bearer check before /api/v1, and a close that does not wait for idle kept-alive connections.
import { Agent, request } from 'node:http';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { WorkerCredentials } from '../vela/auth.ts';
import { type ApiServer, createApi } from './api.ts';
import { DaemonMetrics } from './metrics.ts';
import type { WorkerApiHost } from './types.ts';

function host(): WorkerApiHost {
  return {
    log: pino({ level: 'silent' }),
    version: '1.2.3',
    metrics: new DaemonMetrics({ defaultMetrics: false }),
    credentials: new WorkerCredentials({ hostname: 'w1', secret: '' }),
    draining: false,
    slots: new Map(),
    config: { runtime: { driver: 'docker' }, build: { limit: 1 } },
    readiness: () => Promise.resolve({ ready: true, checks: { registered: { ok: true }, queue: { ok: true }, runtime: { ok: true } } }),
    validateServerToken: () => Promise.resolve(true),
    cancel: () => undefined,
  };
}

let api: ApiServer | undefined;
afterEach(async () => {
  await api?.close();
  api = undefined;
});

async function started(): Promise<{ api: ApiServer; port: number }> {
  api = createApi(host());
  await api.listen({ host: '127.0.0.1', port: 0 });
  const address = api.server.address();
  return { api, port: typeof address === 'object' && address !== null ? address.port : 0 };
}

function call(
  port: number,
  method: string,
  path: string,
  options: { body?: Buffer; headers?: Record<string, string>; agent?: Agent } = {},
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers: options.headers, agent: options.agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

describe('the worker API over node:http', () => {
  it('answers HEAD on a GET route, without a body', async () => {
    const { port } = await started();
    const head = await call(port, 'HEAD', '/health');
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    expect((await call(port, 'GET', '/health')).body).toBe('"ok"');
  });

  it('sends one Date header, of the current second, on every answer (http-date.ts formats it, not node:http)', async () => {
    const { port } = await started();
    for (const [method, path] of [
      ['GET', '/health'],
      ['GET', '/nowhere'],
      ['GET', '/api/v1/executors'],
    ] as const) {
      const before = Math.floor(Date.now() / 1000) * 1000;
      const raw = await new Promise<string[]>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, method, path }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.rawHeaders));
        });
        req.on('error', reject);
        req.end();
      });
      const dates = raw.filter((_, i) => i % 2 === 1 && raw[i - 1]?.toLowerCase() === 'date');
      expect(dates, `${method} ${path}`).toHaveLength(1);
      expect(dates[0]).toMatch(/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/);
      expect(Date.parse(dates[0]!)).toBeGreaterThanOrEqual(before);
      expect(Date.parse(dates[0]!)).toBeLessThanOrEqual(Date.now());
    }
  });

  it('refuses a body over 64 KiB with 413, and takes a small one on POST /register', async () => {
    const { port } = await started();
    const big = await call(port, 'POST', '/register', { body: Buffer.alloc(65 * 1024, 'x') });
    expect(big.status).toBe(413);
    expect(JSON.parse(big.body)).toEqual({ error: 'Request body is too large' });
    const small = await call(port, 'POST', '/register', { body: Buffer.from('{}') });
    expect(small.status).toBe(401);
  });

  it('answers 404 with the route for an unknown path, also under /api/v1', async () => {
    const { port } = await started();
    const r = await call(port, 'GET', '/nothing?x=1');
    expect(r.status).toBe(404);
    expect(JSON.parse(r.body)).toEqual({ error: 'no route GET /nothing' });
    expect((await call(port, 'GET', '/api/v1/nothing', { headers: { authorization: 'Bearer t' } })).status).toBe(404);
  });

  it('checks the bearer before an /api/v1 route, and names bad executor ids', async () => {
    const { port } = await started();
    expect((await call(port, 'GET', '/api/v1/executors')).status).toBe(400);
    const auth = { authorization: 'Bearer t' };
    expect(JSON.parse((await call(port, 'GET', '/api/v1/executors', { headers: auth })).body)).toEqual([]);
    expect((await call(port, 'GET', '/api/v1/executors/7', { headers: auth })).status).toBe(400);
    expect((await call(port, 'GET', '/api/v1/executors/0/build', { headers: auth })).status).toBe(404);
  });

  it('close() settles while a client keeps an idle connection open', async () => {
    const { api: server, port } = await started();
    const agent = new Agent({ keepAlive: true });
    try {
      expect((await call(port, 'GET', '/health', { agent })).status).toBe(200);
      await server.close();
      expect(server.server.listening).toBe(false);
    } finally {
      agent.destroy();
    }
  });
});
