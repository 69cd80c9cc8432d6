// The fleet lane (issue 25): the worker image as a StatefulSet in the real cluster, on one
// vela-sim queue. Runs when BERTH_REAL_KUBECONFIG names the cluster (tools/test.sh sets it, with
// BERTH_REAL_CLUSTER=required); the worker image must be in the Docker engine
// (bash tools/ship/image.sh), and is imported into the cluster here.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { realCluster } from '@berth/kube-cluster';
import { VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRecords, enqueueSleepBuilds, isFinal } from './builds.ts';
import { Fleet } from './fleet.ts';
import { pops, waitFor } from './wait.ts';

const cluster = realCluster();
const KUBECONFIG = process.env.BERTH_REAL_KUBECONFIG ?? '';
const ROOT = path.resolve(import.meta.dirname, '../../..');
const IMAGE = process.env.BERTH_WORKER_IMAGE ?? 'berth/worker:dev';
/** Builds of the exactly-once run: FLEET_BUILDS (the figure is 60; 2 cores make 18 the default). */
const BUILDS = Number(process.env.FLEET_BUILDS ?? 18);
/** Seconds each build sleeps. */
const SLEEP_S = Number(process.env.FLEET_SLEEP_S ?? 4);
const reason = cluster.skip === undefined ? '' : ` [skipped: ${cluster.skip}]`;

describe.skipIf(cluster.skip !== undefined)(`the fleet in the real cluster${reason}`, { timeout: 600_000 }, () => {
  let sim: VelaSim;
  beforeAll(async () => {
    execFileSync('bash', [path.join(ROOT, 'tools/kube-cluster/cluster.sh'), 'import', IMAGE], { stdio: 'inherit' });
    sim = await VelaSim.start();
  }, 300_000);
  afterAll(async () => {
    await sim?.close();
  });

  it('1. the image rolls out from the repository manifests; /ready and /metrics answer through the pod', async () => {
    const fleet = await Fleet.deploy({
      kubeconfig: KUBECONFIG,
      serverAddr: sim.url,
      serverSecret: sim.secret,
      route: `fleet-${randomUUID().slice(0, 8)}`,
      replicas: 2,
    });
    try {
      expect(await fleet.rolloutStatus()).toMatch(/rolling update complete 2 pods/);
      for (const ordinal of [0, 1]) {
        expect(await fleet.fromPod(ordinal, '/ready')).toBeDefined();
        const metrics = await fleet.fromPod(ordinal, '/metrics');
        expect(metrics).toMatch(/^berth_worker_build_limit 2$/m);
        expect(metrics).toMatch(/^berth_worker_builds_running 0$/m);
      }
      // Registered with the server under its StatefulSet identity.
      expect([...sim.workers.keys()].sort()).toEqual([0, 1].map((i) => `berth-worker-${i}.berth-worker.${fleet.namespace}.svc`));
    } finally {
      await fleet.destroy();
    }
  });

  it(`2. exactly once on one queue: 3 replicas, ${BUILDS} builds, each claimed once, each final, no pod left`, async () => {
    const route = `fleet-${randomUUID().slice(0, 8)}`;
    const fleet = await Fleet.deploy({ kubeconfig: KUBECONFIG, serverAddr: sim.url, serverSecret: sim.secret, route, replicas: 3 });
    try {
      const t0 = Date.now();
      const ids = await enqueueSleepBuilds(sim, route, BUILDS, SLEEP_S, route);
      await waitFor(`${BUILDS} builds to end`, () => ids.every((id) => isFinal(sim.builds.get(id)?.status)), 480_000);
      const minutes = (Date.now() - t0) / 60_000;
      const records = buildRecords(sim, ids);
      const hosts = new Map<string, number>();
      for (const r of records) hosts.set(r.host ?? '?', (hosts.get(r.host ?? '?') ?? 0) + 1);
      console.log(
        `fleet exactly-once: ${BUILDS} builds of sleep ${SLEEP_S} on 3 replicas in ${(minutes * 60).toFixed(1)} s (${(BUILDS / minutes).toFixed(1)} builds/min); per worker ${JSON.stringify(Object.fromEntries(hosts))}`,
      );
      expect(records.filter((r) => r.claims !== 1 || r.finals !== 1 || r.status !== 'success')).toEqual([]);
      // Every replica's own count of the items it popped adds up to the builds: none popped twice.
      const popped = await Promise.all([0, 1, 2].map(async (i) => pops(await fleet.fromPod(i, '/metrics'))));
      expect(popped.reduce((a, b) => a + b, 0)).toBe(BUILDS);
      expect(await sim.redis().llen(route)).toBe(0);
      await waitFor('the build pods to go', async () => (await fleet.buildPods()).length === 0, 60_000);
    } finally {
      await fleet.destroy();
    }
  });
});
