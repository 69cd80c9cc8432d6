import { randomUUID } from 'node:crypto';
import { Canceled, background, withCancel, withTimeout } from '@berth/context';
import { VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VelaApiError, VelaClient } from './client.ts';

let sim: VelaSim;
beforeAll(async () => {
  sim = await VelaSim.start();
});
afterAll(async () => {
  await sim.close();
});

const fast = { baseDelayMs: 10, maxDelayMs: 50 };
const pipeline = { version: '1', steps: [{ name: 'init', image: '#init', number: 1 }] };

async function pendingBuild(): Promise<{ org: string; repo: string; number: number; id: number; client: VelaClient }> {
  const repo = `r-${randomUUID().slice(0, 8)}`;
  const { build } = await sim.enqueueBuild({ org: 'octo', repo, pipeline, noPush: true });
  const token = sim.mintToken('WorkerBuild', 'w1', 600, { build_id: build.id!, repo: `octo/${repo}` });
  return { org: 'octo', repo, number: build.number!, id: build.id!, client: new VelaClient({ address: sim.url, token, retry: fast, timeoutMs: 2_000 }) };
}

describe('VelaClient', () => {
  it('retries 5xx answers and then succeeds', async () => {
    const b = await pendingBuild();
    const path = `/api/v1/repos/octo/${b.repo}/builds/${b.number}`;
    sim.fail({ method: 'GET', path, kind: 'status', status: 503, times: 3 });
    const build = await b.client.getBuild(background(), 'octo', b.repo, b.number);
    expect(build.id).toBe(b.id);
    expect(sim.callsTo('GET', path).map((c) => c.status)).toEqual([503, 503, 503, 200]);
  });

  it('retries timeouts, resets and non-JSON error pages', async () => {
    const b = await pendingBuild();
    const path = `/api/v1/repos/octo/${b.repo}/builds/${b.number}`;
    const client = new VelaClient({ address: sim.url, token: b.client.token, retry: fast, timeoutMs: 300 });
    sim.fail({ path, kind: 'timeout' });
    sim.fail({ path, kind: 'reset' });
    sim.fail({ path, kind: 'non-json' });
    const build = await client.getBuild(background(), 'octo', b.repo, b.number);
    expect(build.number).toBe(b.number);
    expect(sim.callsTo('GET', path).map((c) => c.fault ?? c.status)).toEqual(['timeout', 'reset', 'non-json', 200]);
  });

  it('gives up after its attempts with a typed error carrying the server message', async () => {
    const b = await pendingBuild();
    const path = `/api/v1/repos/octo/${b.repo}/builds/${b.number}`;
    sim.fail({ path, kind: 'status', status: 500, times: 3 });
    const err = await b.client.getBuild(background(), 'octo', b.repo, b.number, { retry: { attempts: 3 } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VelaApiError);
    expect(err).toMatchObject({ kind: 'http', status: 500, attempts: 3, serverMessage: 'injected fault' });
    expect(sim.callsTo('GET', path)).toHaveLength(3);
  });

  it('does not retry 4xx answers; a missing worker is undefined', async () => {
    const client = new VelaClient({ address: sim.url, token: sim.secret, retry: fast });
    const host = `nobody-${randomUUID().slice(0, 8)}`;
    expect(await client.getWorker(background(), host)).toBeUndefined();
    expect(sim.callsTo('GET', `/api/v1/workers/${host}`)).toHaveLength(1);
    const bad = new VelaClient({ address: sim.url, token: 'not-a-token', retry: fast });
    await expect(bad.getWorker(background(), host)).rejects.toMatchObject({ kind: 'http', status: 401 });
  });

  it('treats a non-JSON 2xx body as a retryable bad response, not success', async () => {
    let calls = 0;
    const fakeFetch: typeof fetch = () => {
      calls += 1;
      return Promise.resolve(new Response(calls === 1 ? '<html>ok</html>' : '{"id":1}', { status: 200 }));
    };
    const client = new VelaClient({ address: 'http://vela.invalid', token: 't', retry: fast, transport: fakeFetch });
    expect(await client.request(background(), 'GET', '/x')).toEqual({ id: 1 });
    expect(calls).toBe(2);
  });

  it('stops at once when its ctx is cancelled during the backoff', async () => {
    const b = await pendingBuild();
    const path = `/api/v1/repos/octo/${b.repo}/builds/${b.number}`;
    sim.fail({ path, kind: 'status', times: 100 });
    const slow = new VelaClient({ address: sim.url, token: b.client.token, retry: { attempts: Infinity, baseDelayMs: 60_000 } });
    const [ctx, cancel] = withCancel(background());
    const p = slow.getBuild(ctx, 'octo', b.repo, b.number);
    setTimeout(() => cancel(), 200);
    const started = Date.now();
    await expect(p).rejects.toBeInstanceOf(Canceled);
    expect(Date.now() - started).toBeLessThan(10_000);
    sim.clearFaults();
  });

  it('aborts a hanging request when its ctx ends', async () => {
    const b = await pendingBuild();
    const path = `/api/v1/repos/octo/${b.repo}/builds/${b.number}`;
    sim.fail({ path, kind: 'timeout' });
    const client = new VelaClient({ address: sim.url, token: b.client.token, timeoutMs: 60_000 });
    const [ctx, cancel] = withTimeout(background(), 200);
    await expect(client.getBuild(ctx, 'octo', b.repo, b.number)).rejects.toThrow(/deadline/i);
    cancel();
  });

  it('does not retry an executable the server already handed out (deleted on read)', async () => {
    const b = await pendingBuild();
    const path = `/api/v1/repos/octo/${b.repo}/builds/${b.number}/executable`;
    // The first answer is lost after the server popped the row; a retry gets "unable to pop".
    sim.fail({ path, kind: 'status', status: 502, when: 'after' });
    const err = await b.client.getExecutable(background(), 'octo', b.repo, b.number).catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'http', status: 500 });
    expect(sim.callsTo('GET', path).map((c) => c.status)).toEqual([502, 500]);
  });

  it('decodes the executable pipeline', async () => {
    const b = await pendingBuild();
    const { executable, pipeline: p } = await b.client.getExecutable(background(), 'octo', b.repo, b.number);
    expect(executable.build_id).toBe(b.id);
    expect(p).toMatchObject({ version: '1', steps: [{ name: 'init' }] });
  });

  it('validates server tokens through /validate-token', async () => {
    const client = new VelaClient({ address: sim.url, token: sim.secret, retry: fast });
    expect(await client.validateServerToken(background(), sim.serverToWorkerToken())).toBe(true);
    expect(await client.validateServerToken(background(), sim.registrationToken('w1'))).toBe(false);
  });
});
