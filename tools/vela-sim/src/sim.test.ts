import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCombined } from './signing.ts';
import { ITEM_VERSION } from './queue.ts';
import { VelaSim } from './sim.ts';
import { verifyJwt } from './jwt.ts';

let sim: VelaSim;
beforeAll(async () => {
  sim = await VelaSim.start();
});
afterAll(async () => {
  await sim.close();
});

async function call(method: string, path: string, token: string, body?: unknown): Promise<{ status: number; json: unknown; text: string }> {
  const res = await fetch(sim.url + path, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

const pipeline = {
  version: '1',
  services: [{ name: 'redis', image: 'redis:7', number: 1 }],
  steps: [
    { name: 'init', image: '#init', number: 1 },
    { name: 'test', image: 'alpine:3', number: 2 },
  ],
};

describe('VelaSim', () => {
  it('registers a worker with a registration token and refreshes it into auth tokens', async () => {
    const host = `w-${randomUUID().slice(0, 8)}`;
    const reg = sim.registrationToken(host);
    expect((await call('GET', '/api/v1/queue/info', reg)).json).toEqual({ queue_public_key: sim.queueKeys.publicKeyBase64, queue_address: sim.queueAddr });
    expect((await call('GET', `/api/v1/workers/${host}`, reg)).status).toBe(404);
    const wrong = await call('POST', '/api/v1/workers', reg, { hostname: 'someone-else' });
    expect(wrong.status).toBe(400);
    const created = await call('POST', '/api/v1/workers', reg, {
      hostname: host,
      address: `http://${host}:8080`,
      routes: ['vela'],
      active: true,
      status: 'idle',
      build_limit: 1,
    });
    expect(created.status).toBe(201);
    const auth = (created.json as { token: string }).token;
    const claims = verifyJwt('x', auth);
    expect(claims.ok).toBe(false); // signed with the sim's key, not 'x'
    const refreshed = await call('POST', `/api/v1/workers/${host}/refresh`, auth);
    expect(refreshed.status).toBe(200);
    const put = await call('PUT', `/api/v1/workers/${host}`, (refreshed.json as { token: string }).token, { status: 'busy', running_builds: [] });
    expect(put.status).toBe(200);
    expect((put.json as { status: string }).status).toBe('busy');
    // An auth token is not accepted for queue info.
    expect((await call('GET', '/api/v1/queue/info', auth)).status).toBe(401);
  });

  it('answers the shared secret with the secret itself, and rejects bad bearers', async () => {
    const host = `w-${randomUUID().slice(0, 8)}`;
    const created = await call('POST', '/api/v1/workers', sim.secret, { hostname: host });
    expect(created.json).toEqual({ token: sim.secret });
    expect((await call('GET', `/api/v1/workers/${host}`, 'nonsense')).status).toBe(401);
    const res = await fetch(`${sim.url}/api/v1/workers/${host}`);
    expect(res.status).toBe(401);
    expect(await res.json()).toHaveProperty('error');
  });

  it('validates only server tokens on /validate-token', async () => {
    expect((await call('GET', '/validate-token', sim.serverToWorkerToken())).json).toBe('valid server token');
    expect((await call('GET', '/validate-token', sim.registrationToken('w1'))).status).toBe(401);
  });

  it('enqueues a signed item, mints build tokens, and deletes the executable on read', async () => {
    const route = `route-${randomUUID()}`;
    const { build, signed } = await sim.enqueueBuild({ org: 'octo', repo: `r-${randomUUID().slice(0, 6)}`, pipeline, route });
    const popped = await sim.redis().lpopBuffer(route);
    expect(popped?.equals(signed)).toBe(true);
    const opened = openCombined(sim.queueKeys.publicKey, popped!);
    const item = JSON.parse(opened!.toString('utf8')) as { build: { id: number; repo: { full_name: string } }; item_version: number };
    expect(item.item_version).toBe(ITEM_VERSION);
    expect(item.build.id).toBe(build.id);
    expect(item.build.repo.full_name).toBe(build.repo?.full_name);

    const B = `/api/v1/repos/${build.repo!.org}/${build.repo!.name}/builds/${build.number}`;
    const auth = sim.mintToken('WorkerAuth', 'w1', 60);
    const tok = await call('GET', `${B}/token`, auth);
    expect(tok.status).toBe(200);
    const bt = (tok.json as { token: string }).token;
    expect((await call('GET', `${B}/executable`, auth)).status).toBe(401);
    const exe = await call('GET', `${B}/executable`, bt);
    expect(exe.status).toBe(200);
    const data = JSON.parse(Buffer.from((exe.json as { data: string }).data, 'base64').toString('utf8')) as { steps: unknown[] };
    expect(data.steps).toHaveLength(2);
    expect((await call('GET', `${B}/executable`, bt)).status).toBe(500);

    // Once running, no more build tokens.
    expect((await call('PUT', B, bt, { status: 'running', started: 1700000000, host: 'w1' })).status).toBe(200);
    expect((await call('GET', `${B}/token`, auth)).status).toBe(409);

    // Steps, services and whole-log PUTs.
    expect((await call('PUT', `${B}/steps/2`, bt, { number: 2, status: 'success', exit_code: 0 })).status).toBe(200);
    expect((await call('PUT', `${B}/steps/9`, bt, { number: 9, status: 'success' })).status).toBe(404);
    const log = await call('GET', `${B}/steps/2/logs`, bt);
    expect(log.json).toMatchObject({ data: '' });
    await call('PUT', `${B}/steps/2/logs`, bt, { ...(log.json as object), data: Buffer.from('hello\n').toString('base64') });
    const put2 = await call('PUT', `${B}/steps/2/logs`, bt, { data: Buffer.from('hello\nworld\n').toString('base64') });
    expect(put2).toMatchObject({ status: 200, json: null });
    expect(sim.stepLog(build.id!, 2)?.toString()).toBe('hello\nworld\n');
    await call('PUT', `${B}/services/1/logs`, bt, { data: Buffer.from('svc').toString('base64') });
    expect(sim.serviceLog(build.id!, 1)?.toString()).toBe('svc');
    // A build token for another build is refused.
    const other = sim.mintToken('WorkerBuild', 'w1', 60, { build_id: 999999, repo: 'x/y' });
    expect((await call('GET', B, other)).status).toBe(401);
    expect(sim.callsTo('PUT', '/api/v1/repos/*/*/builds/*/steps/*/logs').map((c) => c.logDataBytes)).toEqual([6, 12]);
  });

  it("records a body's status even when it lies past the summary, as in go-vela/worker's whole-record build PUTs", async () => {
    const { build } = await sim.enqueueBuild({ org: 'octo', repo: `r-${randomUUID().slice(0, 6)}`, pipeline, noPush: true });
    const B = `/api/v1/repos/${build.repo!.org}/${build.repo!.name}/builds/${build.number}`;
    const bt = sim.mintToken('WorkerBuild', 'w1', 60, { build_id: build.id!, repo: build.repo!.full_name! });
    // sdk-go's Build.Update sends the whole api.Build: id, repo (with its owner), … then status.
    const whole = {
      id: build.id,
      repo: { ...build.repo, owner: { name: 'octocat', active: true }, topics: ['a'.repeat(200)] },
      number: build.number,
      status: 'running',
    };
    expect((await call('PUT', B, bt, whole)).status).toBe(200);
    const put = sim.callsTo('PUT', B).at(-1)!;
    expect(put.summary).not.toContain('"status"');
    expect(put.bodyStatus).toBe('running');
    expect(sim.builds.get(build.id!)?.status).toBe('running');
    await call('GET', `${B}/steps/1/logs`, bt);
    expect(sim.calls.at(-1)!.bodyStatus).toBeUndefined();
  });

  it('injects faults: status, non-JSON, lost responses, timeouts', async () => {
    const { build } = await sim.enqueueBuild({ org: 'octo', repo: `r-${randomUUID().slice(0, 6)}`, pipeline, noPush: true });
    const B = `/api/v1/repos/${build.repo!.org}/${build.repo!.name}/builds/${build.number}`;
    const bt = sim.mintToken('WorkerBuild', 'w1', 60, { build_id: build.id!, repo: build.repo!.full_name! });
    sim.fail({ method: 'GET', path: '/api/v1/repos/*/*/builds/*', kind: 'status', status: 503, times: 2 });
    expect((await call('GET', B, bt)).status).toBe(503);
    expect((await call('GET', B, bt)).status).toBe(503);
    expect((await call('GET', B, bt)).status).toBe(200);

    sim.fail({ path: /\/executable$/, kind: 'status', when: 'after' });
    expect((await call('GET', `${B}/executable`, bt)).status).toBe(500);
    expect(sim.hasExecutable(build.id!)).toBe(false);

    sim.fail({ path: B, kind: 'non-json' });
    const nj = await call('GET', B, bt);
    expect(nj.status).toBe(502);
    expect(nj.json).toBeUndefined();

    sim.fail({ path: B, kind: 'timeout' });
    await expect(fetch(sim.url + B, { headers: { authorization: `Bearer ${bt}` }, signal: AbortSignal.timeout(300) })).rejects.toThrow();
    const last = sim.calls.at(-1)!;
    expect(last).toMatchObject({ method: 'GET', path: B, status: 0, fault: 'timeout' });

    // gin's 404 for unknown routes is not JSON.
    const unknown = await call('GET', '/api/v1/nope', bt);
    expect(unknown).toMatchObject({ status: 404, text: '404 page not found' });
  });

  it('serves secrets with values to build tokens of the right repo only', async () => {
    const repo = `r-${randomUUID().slice(0, 6)}`;
    const { build } = await sim.enqueueBuild({ org: 'octo', repo, pipeline, noPush: true });
    sim.addSecret('native', 'repo', 'octo', repo, 'password', { value: 'hunter2', images: [] });
    const bt = sim.mintToken('WorkerBuild', 'w1', 60, { build_id: build.id!, repo: `octo/${repo}` });
    const got = await call('GET', `/api/v1/secrets/native/repo/octo/${repo}/password`, bt);
    expect(got.json).toMatchObject({ name: 'password', value: 'hunter2' });
    const stranger = sim.mintToken('WorkerBuild', 'w1', 60, { build_id: build.id!, repo: 'octo/other' });
    expect((await call('GET', `/api/v1/secrets/native/repo/octo/${repo}/password`, stranger)).status).toBe(401);
  });
});

describe('VelaSim follows the server', () => {
  // router/secret.go: secrets.GET("/*secret", ...) is a catch-all, so a name may hold slashes.
  it('serves a secret whose name contains a slash (the wildcard secret route)', async () => {
    const repo = `r-${randomUUID().slice(0, 8)}`;
    sim.addSecret('native', 'shared', 'octo', 'team', 'deploy/key', { value: 'k3y', images: [] });
    const got = await call('GET', '/api/v1/secrets/native/shared/octo/team/deploy/key', sim.secret);
    expect(got.status).toBe(200);
    expect((got.json as { name?: string; value?: string }).value).toBeUndefined(); // the shared secret sees it sanitized
    expect((await call('GET', `/api/v1/secrets/native/repo/octo/${repo}/nope`, sim.secret)).status).toBe(404);
  });

  // api/build/cancel.go CancelBuild and CancelRunning.
  it('cancels a pending build in its records and refuses a finished one', async () => {
    const repo = `r-${randomUUID().slice(0, 8)}`;
    const { build } = await sim.enqueueBuild({ org: 'octo', repo, pipeline, noPush: true });
    const cancelled = await call('DELETE', `/api/v1/repos/octo/${repo}/builds/${build.number}/cancel`, sim.secret);
    expect(cancelled.status).toBe(200);
    expect(cancelled.json).toMatchObject({ status: 'canceled', error: 'pending build was canceled by vela-admin' });
    const again = await call('DELETE', `/api/v1/repos/octo/${repo}/builds/${build.number}/cancel`, sim.secret);
    expect(again.status).toBe(400);
    expect(again.text).toContain('but its status was canceled');
  });

  // api/build/cancel.go CancelBuild → CancelRunning → cancelBuildForExecutor; then the worker's
  // answer is stored with the server's error and status (UpdateBuild) and returned.
  it("cancels a running build through the worker that runs it: GET executors, then DELETE the executor's build; stores the answer as canceled", async () => {
    const { createServer } = await import('node:http');
    const repo = `r-${randomUUID().slice(0, 8)}`;
    const { build } = await sim.enqueueBuild({ org: 'octo', repo, pipeline, noPush: true });
    const seen: string[] = [];
    const worker = createServer((req, res) => {
      seen.push(`${req.method} ${req.url} ${req.headers.authorization?.startsWith('Bearer ') ? 'bearer' : 'none'}`);
      res.setHeader('content-type', 'application/json');
      if (req.method === 'GET' && req.url === '/api/v1/executors')
        res.end(
          JSON.stringify([
            { id: 0, build: { id: -1 } },
            { id: 3, build: { id: build.id } },
          ]),
        );
      else if (req.method === 'DELETE' && req.url === '/api/v1/executors/3/build/cancel')
        res.end(JSON.stringify({ id: build.id, status: 'canceled', message: 'as the worker has it' }));
      else res.writeHead(404).end('{}');
    });
    await new Promise<void>((resolve) => worker.listen(0, '127.0.0.1', resolve));
    try {
      const host = `w-${randomUUID().slice(0, 8)}`;
      const port = (worker.address() as { port: number }).port;
      await call('POST', '/api/v1/workers', sim.secret, { hostname: host, address: `http://127.0.0.1:${port}` });
      const record = sim.findBuild('octo', repo, build.number!)!;
      record.status = 'running';
      record.host = host;
      const cancelled = await call('DELETE', `/api/v1/repos/octo/${repo}/builds/${build.number}/cancel`, sim.secret);
      expect(cancelled.status).toBe(200);
      const stored = { id: build.id, status: 'canceled', error: 'running build was canceled by vela-admin', message: 'as the worker has it' };
      expect(cancelled.json).toMatchObject(stored);
      expect(record).toMatchObject(stored);
      expect(seen).toEqual(['GET /api/v1/executors bearer', 'DELETE /api/v1/executors/3/build/cancel bearer']);
    } finally {
      await new Promise((resolve) => worker.close(resolve));
    }
  });
});
