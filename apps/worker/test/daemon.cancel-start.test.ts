// Issue #13 item 5: an API cancel that arrives while a slot is starting is honoured when the
// executor appears, and the answer says what really happened. go-vela/worker api/build.go
// CancelBuild answers `canceled` whatever happened; Berth tells the truth (the server stores
// `canceled` either way: S api/build/cancel.go).
// Issue #26 item 1: the cancel is answered as soon as it is recorded, not after the stop grace
// (S api/build/cancel.go cancelBuildForExecutor waits for the worker's answer before the user's
// cancel returns).
import { randomInt, randomUUID } from 'node:crypto';
import { type AddressInfo, createServer } from 'node:net';
import { type VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE, type WorkerHandle, executable, labelled, uniqueRoute, waitFor, startRegistered, stopRegistered } from './daemon-harness.ts';

let sim: VelaSim;
let worker: WorkerHandle;
const route = uniqueRoute('cancel');

/** A free port on `host`: the server reaches the worker at the address it registered. */
async function freePort(host: string): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, host, resolve));
  const { port } = srv.address() as AddressInfo;
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

beforeAll(async () => {
  // The worker's address must reach it (the sim's cancel calls it): a loopback address of its own
  // (all of 127/8 is loopback), which is also the worker id its resources are labelled with.
  const hostname = `127.${randomInt(1, 255)}.${randomInt(1, 255)}.${randomInt(1, 255)}`;
  const port = await freePort(hostname);
  // A stop grace of 4 s (the default is 10 s): long beside the 1 s the cancel's answer may take,
  // short enough not to wait out the default.
  ({ sim, worker } = await startRegistered({
    route,
    hostname,
    env: { BERTH_STOP_GRACE: '4s', BERTH_LISTEN: `${hostname}:${port}`, VELA_WORKER_ADDR: `http://${hostname}:${port}` },
  }));
  // The start-up reap PUTs the worker with its (empty) running builds; after it the slots pop.
  await waitFor('the reap to end', () =>
    sim.callsTo('PUT', `/api/v1/workers/${worker.hostname}`).some((c) => c.status === 200 && c.summary.includes('"running_builds":[]')),
  );
});

afterAll(() => stopRegistered({ sim, worker }));

const api = (path: string, init: RequestInit = {}): Promise<Response> =>
  fetch(`${worker.daemon.url}${path}`, { ...init, headers: { authorization: `Bearer ${sim.serverToWorkerToken()}` } });

async function enqueue(yaml: string) {
  const repo = `r-${randomUUID().slice(0, 8)}`;
  const { build } = await sim.enqueueBuild({ org: 'octo', repo, number: 1, pipeline: executable(yaml, { org: 'octo', repo, number: 1 }), route });
  return { id: build.id!, repo };
}

describe('API cancel around the edges of a build (Docker)', { timeout: 90_000 }, () => {
  it('a cancel during the slot start (worker PUT held) is recorded and cancels the build when it starts', async () => {
    // The claim's worker PUT gets no answer until the client's 5 s timeout: the slot is starting.
    sim.fail({ method: 'PUT', path: `/api/v1/workers/${worker.hostname}`, kind: 'timeout', times: 1 });
    const { id } = await enqueue(`
version: "1"
steps:
  - name: work
    image: ${IMAGE}
    pull: never
    commands: [ "echo ran" ]
`);
    await waitFor('the slot to start', () => worker.daemon.slots.get(0));
    expect(worker.daemon.slots.get(0)!.executor).toBeUndefined();
    const res = await api('/api/v1/executors/0/build/cancel', { method: 'DELETE' });
    expect(res.status).toBe(200);
    expect((await res.json()) as { id: number; status: string }).toMatchObject({ id, status: 'canceled' });
    await waitFor('the final status', () => ['success', 'failure', 'error', 'canceled'].includes(sim.builds.get(id)?.status ?? ''), 30_000);
    expect(sim.builds.get(id)!.status).toBe('canceled');
    expect(sim.stepLog(id, 2)?.toString('utf8') ?? '').not.toContain('ran');
    expect(worker.logged(/while its slot starts/)).toHaveLength(1);
    await waitFor('the slot to be free', () => worker.daemon.slots.size === 0);
    expect(labelled(worker.hostname)).toEqual([]);
  });

  it('a cancel through the server is answered in ≤ 1 s while a step that ignores SIGTERM takes the stop grace (4 s); final statuses reported after', async () => {
    const { id, repo } = await enqueue(`
version: "1"
steps:
  - name: stubborn
    image: ${IMAGE}
    pull: never
    commands:
      - trap "" TERM
      - echo started
      - sleep 120
`);
    await waitFor('the step to run', () => sim.stepsOf(id).find((s) => s.number === 2)?.status === 'running', 30_000);
    await waitFor('the step to print', () => sim.stepLog(id, 2)?.toString('utf8').includes('started'), 15_000);
    // The user's cancel, on the server: vela-sim calls the worker as S api/build/cancel.go does.
    const t0 = Date.now();
    const res = await fetch(`${sim.url}/api/v1/repos/octo/${repo}/builds/1/cancel`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${sim.secret}` },
    });
    const ms = Date.now() - t0;
    console.log(`server cancel answered in ${ms} ms (stop grace 4 s)`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ id, status: 'canceled', error: 'running build was canceled by vela-admin' });
    expect(ms).toBeLessThanOrEqual(1_000);
    expect(worker.daemon.slots.get(0)?.build().id).toBe(id); // still stopping in the background
    await waitFor('the slot to be free', () => worker.daemon.slots.size === 0, 30_000);
    const ended = Date.now() - t0;
    expect(ended).toBeGreaterThanOrEqual(3_000); // SIGKILL only after the grace
    expect(sim.builds.get(id)).toMatchObject({ status: 'canceled' });
    expect(sim.stepsOf(id).find((s) => s.number === 2)).toMatchObject({ status: 'canceled', exit_code: 137 });
    expect(labelled(worker.hostname)).toEqual([]);
  });

  it('a cancel after the build ended (its final PUT held) answers the status it ended with', async () => {
    const { id, repo } = await enqueue(`
version: "1"
steps:
  - name: work
    image: ${IMAGE}
    pull: never
    commands: [ "echo ran" ]
`);
    await waitFor('the step to succeed', () => sim.stepsOf(id).find((s) => s.number === 2)?.status === 'success', 30_000);
    // Hold the next build PUT (the final one): the executor has its final status, the slot is still busy.
    sim.fail({ method: 'PUT', path: `/api/v1/repos/octo/${repo}/builds/1`, kind: 'timeout', times: 1 });
    await waitFor('the build to end in the executor', () => worker.daemon.slots.get(0)?.executor?.status === 'success', 30_000);
    const res = await api('/api/v1/executors/0/build/cancel', { method: 'DELETE' });
    expect(res.status).toBe(200);
    expect((await res.json()) as { id: number; status: string }).toMatchObject({ id, status: 'success' });
    await waitFor('the slot to be free', () => worker.daemon.slots.size === 0, 30_000);
  });
});
