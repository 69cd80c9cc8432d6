// Bad input to a running worker: queue items (bad signatures, garbage, stale versions, unknown or
// finished builds, bad executables) and API requests (missing or invalid tokens on every protected
// route, bad executor ids, bad registrations). Each gives a clear log line or HTTP error, and the
// worker keeps serving and running builds.
import { generateKeyPairSync, randomBytes, randomUUID, sign } from 'node:crypto';
import { type VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STALE_BUILD_MESSAGE } from '../src/daemon/daemon.ts';
import { IMAGE, type WorkerHandle, executable, uniqueRoute, waitFor, waitForBuildOver, startRegistered, stopRegistered } from './daemon-harness.ts';

let sim: VelaSim;
let worker: WorkerHandle;
const route = uniqueRoute('bad');

beforeAll(async () => {
  ({ sim, worker } = await startRegistered({ route, env: { VELA_LOG_LEVEL: 'info' } }));
});

afterAll(() => stopRegistered({ sim, worker }));

const good = (repo: string, n = 1) =>
  executable(
    `
version: "1"
steps:
  - name: ok
    image: ${IMAGE}
    pull: never
    commands: [ "echo ok" ]
`,
    { org: 'octo', repo, number: n },
  );

/** A pending build on the server, not queued. */
async function pendingBuild(pipeline?: Record<string, unknown>) {
  const repo = `b-${randomUUID().slice(0, 8)}`;
  const e = await sim.enqueueBuild({ org: 'octo', repo, number: 1, pipeline: pipeline ?? good(repo), route, noPush: true });
  return { ...e, repo, id: e.build.id! };
}

/** NaCl combined format with a key that is not the server's. */
function signWithOtherKey(message: string): Buffer {
  const { privateKey } = generateKeyPairSync('ed25519');
  const msg = Buffer.from(message);
  return Buffer.concat([sign(null, msg, privateKey), msg]);
}

/** Pushes raw bytes and waits for the log line that says what the worker did with them. */
async function pushAndExpectLog(bytes: Buffer, re: RegExp): Promise<Record<string, unknown>> {
  const before = worker.logs.length;
  await sim.pushRaw(route, bytes);
  return waitFor(`a log line matching ${re}`, () => worker.logs.slice(before).find((l) => typeof l.msg === 'string' && re.test(l.msg)), 20_000);
}

describe('bad queue items', { timeout: 60_000 }, () => {
  it('random bytes: dropped with a clear log line', async () => {
    const line = await pushAndExpectLog(randomBytes(200), /dropped a queue item: its signature does not verify/);
    expect(line.level).toBe(50);
  });

  it('fewer than 64 bytes: dropped', async () => {
    await pushAndExpectLog(Buffer.from('short'), /dropped a queue item: its signature does not verify/);
  });

  it('an empty entry: dropped', async () => {
    await pushAndExpectLog(Buffer.alloc(0), /dropped a queue item/);
  });

  it('a readable item signed with another key: dropped, and its pending build set to error', async () => {
    const { item, id } = await pendingBuild();
    await pushAndExpectLog(signWithOtherKey(JSON.stringify(item)), /dropped a queue item: its signature/);
    await waitFor('the build to be errored', () => sim.builds.get(id)?.status === 'error');
    expect(sim.builds.get(id)?.error).toMatch(/could not use this build's queue item: its signature does not verify/);
  });

  it('signed garbage (not JSON): dropped', async () => {
    await pushAndExpectLog(sim.sign('{"build": nope'), /dropped a queue item: not JSON/);
  });

  it('signed JSON that is not an item: dropped', async () => {
    await pushAndExpectLog(sim.sign('{"hello":"world"}'), /dropped a queue item: not a queue item/);
  });

  it('signed JSON array: dropped', async () => {
    await pushAndExpectLog(sim.sign('[1,2,3]'), /dropped a queue item: not a queue item/);
  });

  it('a signed item whose build id is a string: dropped, its build set to error', async () => {
    const { item, id } = await pendingBuild();
    await pushAndExpectLog(sim.sign(JSON.stringify({ ...item, build: { ...item.build, id: String(id) } })), /dropped a queue item: not a queue item/);
    await waitFor('the build to be errored', () => sim.builds.get(id)?.status === 'error');
  });

  it('a signed item without a repo: dropped', async () => {
    const { item } = await pendingBuild();
    const { repo: _repo, ...build } = item.build;
    await pushAndExpectLog(sim.sign(JSON.stringify({ ...item, build })), /dropped a queue item: not a queue item: build.repo/);
  });

  it("a stale item_version: the build is errored with Vela's message and never listed as running", async () => {
    const { item, id } = await pendingBuild();
    await pushAndExpectLog(sim.sign(JSON.stringify({ ...item, item_version: 2 })), /stale queue item/);
    await waitFor('the build to be errored', () => sim.builds.get(id)?.status === 'error');
    expect(sim.builds.get(id)?.error).toBe(STALE_BUILD_MESSAGE);
    expect(sim.workers.get(worker.hostname)?.running_build_ids).not.toContain(id);
    expect(sim.hasExecutable(id)).toBe(true);
  });

  it('an item without item_version is stale too', async () => {
    const { item, id } = await pendingBuild();
    await pushAndExpectLog(sim.sign(JSON.stringify({ build: item.build })), /stale queue item/);
    await waitFor('the build to be errored', () => sim.builds.get(id)?.status === 'error');
  });

  it('an unknown build (no such repo on the server): skipped with a log line', async () => {
    const { item } = await pendingBuild();
    const ghost = { ...item, build: { ...item.build, repo: { ...item.build.repo, name: 'no-such-repo' } } };
    await pushAndExpectLog(sim.sign(JSON.stringify(ghost)), /the server has no such build/);
  });

  it('a build no longer pending (canceled while queued): skipped, executable untouched', async () => {
    const { item, id } = await pendingBuild();
    sim.builds.get(id)!.status = 'canceled';
    await pushAndExpectLog(sim.sign(JSON.stringify(item)), /no longer pending/);
    expect(sim.builds.get(id)?.status).toBe('canceled');
  });

  it('an executable that is not a valid pipeline: the build is errored, nothing runs', async () => {
    const repo = `x-${randomUUID().slice(0, 8)}`;
    const pipeline = { ...good(repo), stages: [{ name: 's', steps: [{ name: 'a', image: IMAGE }] }] };
    const { item, id } = await pendingBuild(pipeline);
    await pushAndExpectLog(sim.sign(JSON.stringify(item)), /not a pipeline Berth can run/);
    await waitFor('the build to be errored', () => sim.builds.get(id)?.status === 'error');
    expect(sim.builds.get(id)?.error).toMatch(/not a valid pipeline: stages: cannot have both stages and steps/);
  });

  it('the same item twice: run once, the duplicate skipped', async () => {
    const { signed, id } = await pendingBuild();
    await sim.pushRaw(route, signed);
    await waitFor('the build to succeed', () => sim.builds.get(id)?.status === 'success', 40_000);
    await pushAndExpectLog(signed, /no longer pending/);
  });

  it('after all that, the worker still runs a good build', async () => {
    const { signed, id } = await pendingBuild();
    await sim.pushRaw(route, signed);
    await waitFor('the build to succeed', () => sim.builds.get(id)?.status === 'success', 40_000);
    // The final status goes out when exec returns, before cleanup (as go-vela/worker's ExecBuild
    // does): the next cases want the executor idle, so wait until the build is over.
    await waitForBuildOver(sim, id);
    expect((await fetch(`${worker.daemon.url}/health`)).status).toBe(200);
  });
});

const PROTECTED: Array<[string, string]> = [
  ['GET', '/api/v1/executors'],
  ['GET', '/api/v1/executors/0'],
  ['GET', '/api/v1/executors/0/build'],
  ['GET', '/api/v1/executors/0/pipeline'],
  ['GET', '/api/v1/executors/0/repo'],
  ['DELETE', '/api/v1/executors/0/build/cancel'],
];

describe('bad API requests', () => {
  const call = (method: string, path: string, authorization?: string) =>
    fetch(`${worker.daemon.url}${path}`, { method, headers: authorization === undefined ? {} : { authorization } });

  for (const [method, path] of PROTECTED) {
    it(`${method} ${path} without a token: 400`, async () => {
      const res = await call(method, path);
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ error: expect.stringMatching(/^error parsing token/) as unknown });
    });
    it(`${method} ${path} with a Basic header: 400`, async () => {
      expect((await call(method, path, 'Basic dXNlcjpwYXNz')).status).toBe(400);
    });
    it(`${method} ${path} with a garbage bearer: 401`, async () => {
      const res = await call(method, path, 'Bearer not-a-token');
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: 'unable to validate token' });
    });
    it(`${method} ${path} with a valid token that is not the server's: 401`, async () => {
      const res = await call(method, path, `Bearer ${sim.mintToken('WorkerAuth', worker.hostname, 60)}`);
      expect(res.status).toBe(401);
    });
  }

  it('the refusals are logged', () => {
    expect(worker.logged(/without a bearer token/).length).toBeGreaterThanOrEqual(12);
    expect(worker.logged(/does not validate/).length).toBeGreaterThanOrEqual(12);
  });

  it('bad executor ids: 400; an idle executor: 404', async () => {
    const auth = `Bearer ${sim.serverToWorkerToken()}`;
    expect((await call('GET', '/api/v1/executors/abc', auth)).status).toBe(400);
    expect((await call('GET', '/api/v1/executors/-1', auth)).status).toBe(400);
    expect((await call('GET', '/api/v1/executors/7', auth)).status).toBe(400);
    expect((await call('GET', '/api/v1/executors/0/build', auth)).status).toBe(404);
    expect((await call('DELETE', '/api/v1/executors/0/build/cancel', auth)).status).toBe(404);
    expect((await call('POST', '/api/v1/shutdown', auth)).status).toBe(501);
    expect((await call('GET', '/api/v1/nothing-here', auth)).status).toBe(404);
  });

  it('POST /register refuses missing, unreadable, foreign, expired and non-registration tokens with 401', async () => {
    const reg = (authorization?: string) => call('POST', '/register', authorization);
    expect((await reg()).status).toBe(401);
    expect((await reg('Bearer not.a.jwt')).status).toBe(401);
    const foreign = await reg(`Bearer ${sim.registrationToken('some-other-host')}`);
    expect(foreign.status).toBe(401);
    expect(await foreign.json()).toBe('worker hostname is invalid');
    expect((await reg(`Bearer ${sim.mintToken('WorkerRegister', worker.hostname, -60)}`)).status).toBe(401);
    expect((await reg(`Bearer ${sim.mintToken('WorkerAuth', worker.hostname, 600)}`)).status).toBe(401);
    expect(worker.logged(/registration token refused/).length).toBeGreaterThanOrEqual(5);
  });

  it('the worker still serves: health, version, ready, metrics', async () => {
    expect(await (await call('GET', '/health')).json()).toBe('ok');
    expect(((await (await call('GET', '/version')).json()) as { canonical: string }).canonical).toBe('v0.0.0-test');
    const ready = await call('GET', '/ready');
    expect(await ready.json()).toMatchObject({ ready: true, failed: [] });
    expect(ready.status).toBe(200);
    expect(await (await call('GET', '/metrics')).text()).toMatch(/berth_worker_queue_pops_total\{result="bad-signature"\} [3-9]/);
  });
});
