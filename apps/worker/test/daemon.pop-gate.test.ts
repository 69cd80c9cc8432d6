// Issue #15 item 7: go-vela/worker GETs its worker record before each pop and pops the routes it
// lists (cmd/vela-worker/exec.go), and its build threads skip the queue while the last check-in or
// queue ping failed (cmd/vela-worker/operate.go: `!w.CheckedIn`, `!w.QueueCheckedIn`).
import { randomUUID } from 'node:crypto';
import { VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE, type WorkerHandle, executable, startWorker, uniqueRoute, waitFor } from './daemon-harness.ts';

let sim: VelaSim;

beforeAll(async () => {
  sim = await VelaSim.start();
});

afterAll(async () => {
  await sim?.close();
});

const yaml = `
version: "1"
steps:
  - name: s
    image: ${IMAGE}
    pull: never
    commands: [ "echo ran" ]
`;

async function enqueue(route: string) {
  const repo = `r-${randomUUID().slice(0, 8)}`;
  const { build } = await sim.enqueueBuild({ org: 'octo', repo, number: 1, pipeline: executable(yaml, { org: 'octo', repo, number: 1 }), route });
  return build.id!;
}

const ready = async (w: WorkerHandle): Promise<void> => {
  await waitFor('the worker to register', () => w.daemon.registered);
  await waitFor('the reap to end', () =>
    sim.callsTo('PUT', `/api/v1/workers/${w.hostname}`).some((c) => c.status === 200 && c.summary.includes('"running_builds":[]')),
  );
};

describe('what the build slots pop, and when', { timeout: 90_000 }, () => {
  it('pops the routes the server lists for the worker now, not those of the last check-in', async () => {
    const first = uniqueRoute('gate');
    const second = uniqueRoute('gate');
    const worker = await startWorker(sim, { route: first, env: { VELA_CHECK_IN: '10m' } });
    try {
      await ready(worker);
      // An operator moves the worker to another route on the server between two check-ins.
      sim.workers.get(worker.hostname)!.routes = [second];
      const gets = sim.callsTo('GET', `/api/v1/workers/${worker.hostname}`).length;
      const id = await enqueue(second);
      await waitFor('the build on the new route to run', () => sim.builds.get(id)?.status === 'success', 30_000);
      // One GET of the worker per pop.
      expect(sim.callsTo('GET', `/api/v1/workers/${worker.hostname}`).length).toBeGreaterThan(gets);
      expect(sim.callsTo('POST', `/api/v1/workers/${worker.hostname}/refresh`)).toHaveLength(0);
    } finally {
      await worker.stop();
    }
  });

  it('pops nothing while check-in fails, and resumes once it works', async () => {
    const route = uniqueRoute('gate');
    const worker = await startWorker(sim, { route, env: { VELA_CHECK_IN: '2s' } });
    try {
      await ready(worker);
      const refresh = `/api/v1/workers/${worker.hostname}/refresh`;
      sim.fail({ method: 'POST', path: refresh, kind: 'status', status: 500, times: 100_000 });
      await waitFor('a failed check-in', () => !worker.daemon.registered, 30_000);
      // The slot's pop in flight (1 s timeout) ends; then it stops at the gate, and says so.
      await waitFor('the slot to skip the queue', () => worker.logged(/not checked in.*skipping the queue/).length > 0, 30_000);
      const id = await enqueue(route);
      // Two more failed check-ins after the push: the slot had many pop timeouts (1 s) meanwhile.
      const failedNow = sim.callsTo('POST', refresh).filter((c) => c.status === 500).length;
      await waitFor('two more failed check-ins', () => sim.callsTo('POST', refresh).filter((c) => c.status === 500).length >= failedNow + 2, 45_000);
      expect(await sim.redis().llen(route)).toBe(1);
      expect(sim.builds.get(id)!.status).toBe('pending');
      sim.clearFaults();
      await waitFor('the build to run after a good check-in', () => sim.builds.get(id)?.status === 'success', 45_000);
    } finally {
      await worker.stop();
    }
  });
});
