// Three in-process workers share one queue: short builds, each run exactly once. The test command
// runs 12 (four a worker if shared evenly); SCALE_N=30 (or more) runs a larger queue.
import { VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE, type WorkerHandle, buildOver, executable, labelled, startWorker, uniqueRoute, waitFor } from './daemon-harness.ts';

let sim: VelaSim;
const workers: WorkerHandle[] = [];
const route = uniqueRoute('scale');
const N = Number(process.env.SCALE_N ?? 12);

beforeAll(async () => {
  sim = await VelaSim.start();
  for (let i = 0; i < 3; i++) workers.push(await startWorker(sim, { route, env: { VELA_LOG_LEVEL: 'info' } }));
  await waitFor('the workers to register', () => workers.every((w) => w.daemon.registered));
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await sim?.close();
});

describe('3 workers, one queue', { timeout: 60_000 + N * 5_000 }, () => {
  it(`runs ${N} builds, each exactly once, and leaves nothing behind`, async () => {
    const ids: number[] = [];
    const t0 = Date.now();
    for (let n = 1; n <= N; n++) {
      const pipeline = executable(
        `
version: "1"
steps:
  - name: hello
    image: ${IMAGE}
    pull: never
    commands: [ "echo build ${n}" ]
`,
        { org: 'octo', repo: 'many', number: n },
      );
      const { build } = await sim.enqueueBuild({ org: 'octo', repo: 'many', number: n, pipeline, route });
      ids.push(build.id!);
    }
    const progress = setInterval(() => {
      const by = new Map<string, number>();
      for (const id of ids) by.set(sim.builds.get(id)?.status ?? '?', (by.get(sim.builds.get(id)?.status ?? '?') ?? 0) + 1);
      console.log(`${Math.round((Date.now() - t0) / 1000)} s:`, Object.fromEntries(by));
    }, 10_000);
    try {
      await waitFor(`${N} builds to end`, () => ids.every((id) => buildOver(sim, id)), 30_000 + N * 4_000, 250);
    } finally {
      clearInterval(progress);
    }
    console.log(`${N} builds on 3 workers in ${Date.now() - t0} ms`);
    const hosts = new Map<string, number>();
    for (const [i, id] of ids.entries()) {
      const b = sim.builds.get(id)!;
      expect(b.status, `build ${i + 1}: ${b.error ?? ''}`).toBe('success');
      hosts.set(b.host!, (hosts.get(b.host!) ?? 0) + 1);
      expect(sim.stepLog(id, 2)!.toString('utf8')).toBe(`$ echo build ${i + 1}\nbuild ${i + 1}\n`);
      // Claimed once: one build token, one executable read, one "running" PUT.
      const base = `/api/v1/repos/octo/many/builds/${i + 1}`;
      expect(sim.callsTo('GET', `${base}/token`)).toHaveLength(1);
      expect(sim.callsTo('GET', `${base}/executable`)).toHaveLength(1);
      expect(sim.callsTo('PUT', base).filter((c) => c.summary.includes('"status":"running"'))).toHaveLength(1);
    }
    console.log('builds per worker:', Object.fromEntries(hosts));
    expect([...hosts.keys()].every((h) => workers.some((w) => w.hostname === h))).toBe(true);
    expect([...hosts.values()].reduce((a, b) => a + b, 0)).toBe(N);
    expect(await sim.redis().llen(route)).toBe(0);
    for (const w of workers) {
      expect(w.daemon.slots.size).toBe(0);
      expect(labelled(w.hostname)).toEqual([]);
    }
  });
});
