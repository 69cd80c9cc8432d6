// Issue #15 item 6: a build the worker must fail (here: its executable cannot be fetched) is PUT
// with the build token, since the build PUT needs one (server router/build.go PUT with
// perm.MustBuildAccess, router/middleware/perm/perm.go); vela-sim refuses the server secret there.
import { randomUUID } from 'node:crypto';
import { type VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE, type WorkerHandle, executable, uniqueRoute, waitFor, startRegistered, stopRegistered } from './daemon-harness.ts';

let sim: VelaSim;
let worker: WorkerHandle;
const route = uniqueRoute('failb');

beforeAll(async () => {
  ({ sim, worker } = await startRegistered({ route }));
});

afterAll(() => stopRegistered({ sim, worker }));

describe('failing a build', { timeout: 60_000 }, () => {
  it('an executable that cannot be fetched errors the build, PUT with the build token', async () => {
    const repo = `r-${randomUUID().slice(0, 8)}`;
    const yaml = `
version: "1"
steps:
  - name: s
    image: ${IMAGE}
    pull: never
    commands: [ "true" ]
`;
    sim.fail({ method: 'GET', path: `/api/v1/repos/octo/${repo}/builds/1/executable`, kind: 'status', status: 500, times: 50 });
    const { build } = await sim.enqueueBuild({ org: 'octo', repo, number: 1, pipeline: executable(yaml, { org: 'octo', repo, number: 1 }), route });
    await waitFor('the build to be errored', () => sim.builds.get(build.id!)?.status === 'error', 45_000);
    expect(sim.builds.get(build.id!)!.error).toMatch(/could not get the build's executable/);
    const puts = sim.callsTo('PUT', `/api/v1/repos/octo/${repo}/builds/1`);
    expect(puts.map((c) => [c.status, c.tokenType])).toEqual([[200, 'WorkerBuild']]);
    // The error is logged with its stack (the Error passed to pino), and the worker id once, as `worker`.
    const line = worker.logged(/could not get the executable/)[0] as {
      err?: { message?: string; stack?: string };
      worker?: string;
      workerId?: unknown;
      hostname?: unknown;
    };
    expect(line.err?.message).toMatch(/executable/);
    expect(line.err?.stack).toMatch(/VelaApiError|at /);
    expect(line.worker).toBe(worker.hostname);
    expect(worker.logs.filter((l) => 'workerId' in l || 'hostname' in l)).toEqual([]);
  });
});
