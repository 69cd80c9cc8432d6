// The fleet lane (issue 25): the worker image as a StatefulSet in the real cluster, on one
// vela-sim queue. Runs when BERTH_REAL_KUBECONFIG names the cluster (tools/test.sh sets it, with
// BERTH_REAL_CLUSTER=required); the worker image must be in the Docker engine
// (bash tools/ship/image.sh), and is imported into the cluster here.
//
// The cases run at the same time (FLEET_CONCURRENCY at once, vitest.config.ts): each has its own
// vela-sim, queue route and namespace, and spends most of its time waiting on sleeping builds.
import { execFile, execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { realCluster } from '@berth/kube-cluster';
import { VelaSim } from '@berth/vela-sim';
import { beforeAll, describe, it } from 'vitest';
import { buildRecords, enqueueSleepBuilds, isFinal, runningOn, watchFinals } from './builds.ts';
import { Fleet, type FleetOptions } from './fleet.ts';
import { pops, waitFor } from './wait.ts';

const run = promisify(execFile);

const cluster = realCluster();
const KUBECONFIG = process.env.BERTH_REAL_KUBECONFIG ?? '';
const ROOT = path.resolve(import.meta.dirname, '../../..');
const IMAGE = process.env.BERTH_WORKER_IMAGE ?? 'berth/worker:dev';
/** Builds of the exactly-once run: FLEET_BUILDS (the figure is 60; 2 cores make 18 the default). */
const BUILDS = Number(process.env.FLEET_BUILDS ?? 18);
/** Seconds each build sleeps. */
const SLEEP_S = Number(process.env.FLEET_SLEEP_S ?? 4);
/** The kill soak: FLEET_SOAK_SEED, FLEET_SOAK_BUILDS builds, FLEET_SOAK_KILLS kills. */
const SOAK_SEED = Number(process.env.FLEET_SOAK_SEED ?? 25);
const SOAK_BUILDS = Number(process.env.FLEET_SOAK_BUILDS ?? 12);
const SOAK_KILLS = Number(process.env.FLEET_SOAK_KILLS ?? 2);
/**
 * The stated bound from a kill to the final status of the builds the killed worker held: the
 * StatefulSet controller's new pod (force delete) or the kubelet's container restart (SIGKILL; its
 * crash back-off starts at 10 s), the worker's start, and its reaper's report.
 */
const KILL_BOUND_MS = 90_000;
const reason = cluster.skip === undefined ? '' : ` [skipped: ${cluster.skip}]`;

/**
 * Runs `body` with a vela-sim of its own and a fleet of `replicas` on a fresh route of it; the
 * fleet is destroyed and the sim closed afterwards, whatever the outcome.
 */
async function withFleet(
  replicas: number,
  body: (sim: VelaSim, fleet: Fleet, route: string) => Promise<void>,
  options: Partial<FleetOptions> = {},
): Promise<void> {
  const sim = await VelaSim.start();
  try {
    const route = `fleet-${randomUUID().slice(0, 8)}`;
    const fleet = await Fleet.deploy({ kubeconfig: KUBECONFIG, serverAddr: sim.url, serverSecret: sim.secret, route, replicas, ...options });
    try {
      await body(sim, fleet, route);
    } finally {
      await fleet.destroy();
    }
  } finally {
    await sim.close();
  }
}

/**
 * Waits until replica `ordinal` runs some of `ids` and each has its build pod, and returns both:
 * vela-sim shows a build running once the worker reports it, and its pod may come seconds later.
 */
async function runningWithPods(sim: VelaSim, fleet: Fleet, ids: readonly number[], ordinal: number): Promise<{ builds: number[]; pods: string[] }> {
  let builds: number[] = [];
  let pods: string[] = [];
  await waitFor(
    `berth-worker-${ordinal} to run builds, each in its pod`,
    async () => {
      builds = runningOn(sim, ids, fleet.workerId(ordinal));
      if (builds.length === 0) return false;
      pods = (await fleet.buildPods()).filter((p) => p.metadata.labels?.['berth.dev/worker'] === fleet.workerId(ordinal)).map((p) => p.metadata.uid);
      return pods.length === builds.length;
    },
    180_000,
  );
  return { builds, pods };
}

describe.skipIf(cluster.skip !== undefined)(`the fleet in the real cluster${reason}`, { timeout: 600_000, concurrent: true }, () => {
  beforeAll(() => {
    execFileSync('bash', [path.join(ROOT, 'tools/kube-cluster/cluster.sh'), 'import', IMAGE], { stdio: 'inherit' });
  }, 300_000);

  it('1. the image rolls out from the repository manifests; /ready and /metrics answer through the pod', async ({ expect }) => {
    await withFleet(2, async (sim, fleet) => {
      expect(await fleet.rolloutStatus()).toMatch(/rolling update complete 2 pods/);
      for (const ordinal of [0, 1]) {
        // wget fails on a 503: an answer is a 200, and its checks (server, queue, runtime) all passed.
        expect(JSON.parse(await fleet.fromPod(ordinal, '/ready'))).toMatchObject({ ready: true, failed: [] });
        const metrics = await fleet.fromPod(ordinal, '/metrics');
        expect(metrics).toMatch(/^berth_worker_build_limit 2$/m);
        expect(metrics).toMatch(/^berth_worker_builds_running 0$/m);
      }
      // Registered with the server under its StatefulSet identity.
      expect([...sim.workers.keys()].sort()).toEqual([0, 1].map((i) => `berth-worker-${i}.berth-worker.${fleet.namespace}.svc`));
    });
  });

  it(`2. exactly once on one queue: 3 replicas, ${BUILDS} builds, each claimed once, each final, no pod left`, async ({ expect }) => {
    await withFleet(3, async (sim, fleet, route) => {
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
    });
  });

  it('3. scale-in drains: kubectl scale --replicas=1 under load; the removed workers finish what they hold and exit; nothing lost or run twice', async ({
    expect,
  }) => {
    await withFleet(3, async (sim, fleet, route) => {
      const ids = await enqueueSleepBuilds(sim, route, 12, 10, route);
      await waitFor('workers 1 and 2 to run builds', () => [1, 2].every((i) => runningOn(sim, ids, fleet.workerId(i)).length > 0), 180_000);
      const held = [1, 2].flatMap((i) => runningOn(sim, ids, fleet.workerId(i)));
      const t0 = Date.now();
      await fleet.scale(1);
      await waitFor('berth-worker-1 and -2 to exit', async () => (await fleet.workers()).length === 1, 300_000);
      const drainS = (Date.now() - t0) / 1000;
      await waitFor('every build to end', () => ids.every((id) => isFinal(sim.builds.get(id)?.status)), 300_000);
      const records = buildRecords(sim, ids);
      const byRemoved = records.filter((r) => r.host === fleet.workerId(1) || r.host === fleet.workerId(2));
      console.log(
        `fleet scale-in 3 -> 1: the removed workers held ${held.length} running builds, exited ${drainS.toFixed(1)} s after the scale; ` +
          `${byRemoved.length} builds ran on them in all, ${records.length - byRemoved.length} on berth-worker-0`,
      );
      // The builds the removed workers held finished (drained, not canceled), and nothing ran twice.
      expect(records.filter((r) => held.includes(r.id) && r.status !== 'success')).toEqual([]);
      expect(records.filter((r) => r.claims !== 1 || r.finals !== 1 || r.status !== 'success')).toEqual([]);
      expect(await sim.redis().llen(route)).toBe(0);
      await waitFor('the build pods to go', async () => (await fleet.buildPods()).length === 0, 60_000);
    });
  });

  it('3b. scale-in past the drain grace: the removed worker cancels what it holds, reports it with the reason, removes its pods and exits', async ({
    expect,
  }) => {
    await withFleet(
      2,
      async (sim, fleet, route) => {
        const ids = await enqueueSleepBuilds(sim, route, 4, 120, route);
        const { builds: held, pods: heldPods } = await runningWithPods(sim, fleet, ids, 1);
        const t0 = Date.now();
        await fleet.scale(1);
        await waitFor('berth-worker-1 to exit', async () => (await fleet.workers()).length === 1, 120_000);
        console.log(
          `fleet scale-in past a 3 s drain grace: berth-worker-1 held ${held.length} builds and exited after ${((Date.now() - t0) / 1000).toFixed(1)} s`,
        );
        for (const r of buildRecords(sim, held))
          expect(r).toMatchObject({ status: 'canceled', claims: 1, finals: 1, error: expect.stringMatching(/shutting down/) as unknown });
        await waitFor('its build pods to go', async () => !(await fleet.buildPods()).some((p) => heldPods.includes(p.metadata.uid)), 60_000);
      },
      { env: { BERTH_DRAIN_GRACE: '3s' } },
    );
  });

  it('4. a killed worker loses nothing: force-deleted mid-build, its builds get a final status with a reason, its pods go, the replica serves again', async ({
    expect,
  }) => {
    await withFleet(2, async (sim, fleet, route) => {
      const finals = watchFinals(sim);
      const ids = await enqueueSleepBuilds(sim, route, 4, 90, `${route}-a`);
      const { builds: lost, pods: podsOfKilled } = await runningWithPods(sim, fleet, ids, 1);
      expect(podsOfKilled.length).toBe(lost.length);
      const t0 = Date.now();
      await fleet.forceDelete(1);
      await waitFor("the killed worker's builds to end", () => lost.every((id) => finals.finalAt.has(id)), KILL_BOUND_MS);
      const toFinal = lost.map((id) => (finals.finalAt.get(id)! - t0) / 1000);
      finals.stop();
      console.log(
        `fleet kill: berth-worker-1 force-deleted with ${lost.length} builds running; final status after ${toFinal.map((t) => t.toFixed(1)).join(', ')} s`,
      );
      for (const id of lost) {
        expect(sim.builds.get(id)).toMatchObject({ status: 'error' });
        expect(sim.builds.get(id)?.error).toMatch(/stopped unexpectedly/);
      }
      await fleet.rolloutStatus();
      // Worker 0 still holds its 90 s builds in both slots: new builds can only go to the restarted replica.
      const more = await enqueueSleepBuilds(sim, route, 2, 1, `${route}-b`);
      await waitFor('the new builds to end', () => more.every((id) => isFinal(sim.builds.get(id)?.status)), 180_000);
      expect(buildRecords(sim, more).map((r) => [r.status, r.host, r.claims])).toEqual(more.map(() => ['success', fleet.workerId(1), 1]));
      // The restarted replica's reaper removed the build pods of the killed one.
      await waitFor("the killed worker's build pods to go", async () => !(await fleet.buildPods()).some((p) => podsOfKilled.includes(p.metadata.uid)), 60_000);
    });
  });

  it(`4b. the fleet soak: seed ${SOAK_SEED}, ${SOAK_BUILDS} builds, 3 replicas, ${SOAK_KILLS} kills (force delete or SIGKILL): 0 lost, 0 duplicated`, async ({
    expect,
  }) => {
    await withFleet(3, async (sim, fleet, route) => {
      const random = mulberry32(SOAK_SEED);
      const finals = watchFinals(sim);
      const ids = await enqueueSleepBuilds(sim, route, SOAK_BUILDS, 15, route);
      const afterKill: number[] = [];
      for (let k = 0; k < SOAK_KILLS; k++) {
        const ordinal = Math.floor(random() * 3);
        const how = random() < 0.5 ? 'force-delete' : 'SIGKILL';
        await waitFor(`berth-worker-${ordinal} to run a build`, () => runningOn(sim, ids, fleet.workerId(ordinal)).length > 0, 240_000);
        await new Promise((r) => setTimeout(r, Math.floor(random() * 5000)));
        const lost = runningOn(sim, ids, fleet.workerId(ordinal));
        const t0 = Date.now();
        if (how === 'SIGKILL') fleet.killWorkerProcess(ordinal);
        else await fleet.forceDelete(ordinal);
        await waitFor("the killed worker's builds to end", () => lost.every((id) => finals.finalAt.has(id)), KILL_BOUND_MS);
        afterKill.push(...lost.map((id) => (finals.finalAt.get(id)! - t0) / 1000));
        console.log(`fleet soak: kill ${k + 1}: ${how} of berth-worker-${ordinal} with ${lost.length} builds running`);
        await fleet.rolloutStatus();
      }
      await waitFor('every build to end', () => ids.every((id) => isFinal(sim.builds.get(id)?.status)), 480_000);
      finals.stop();
      const records = buildRecords(sim, ids);
      const lostN = records.filter((r) => !isFinal(r.status)).length;
      const duplicated = records.filter((r) => r.claims > 1 || r.finals > 1).length;
      const p99 = quantile(afterKill, 0.99);
      console.log(
        `fleet: ${SOAK_BUILDS} builds, 3 replicas, ${SOAK_KILLS} kills, ${lostN} lost, ${duplicated} duplicated, ` +
          `p99 time to final status after a kill ${p99.toFixed(1)} s (seed ${SOAK_SEED}; ${afterKill.length} builds caught by a kill)`,
      );
      expect(lostN).toBe(0);
      expect(duplicated).toBe(0);
      // A build is either done or was caught by a kill and reported with its reason.
      expect(records.filter((r) => r.status !== 'success' && !/stopped unexpectedly|shutting down/.test(r.error ?? ''))).toEqual([]);
      await waitFor('the build pods to go', async () => (await fleet.buildPods()).length === 0, 120_000);
    });
  });

  it('5. the KEDA ScaledObject is accepted by the apiserver (KEDA v2.21.1 CRDs, server-side dry run); a broken one is refused', async ({ expect }) => {
    const crds = await kedaCrds();
    const fleetNs = `berth-fleet-keda-${randomUUID().slice(0, 6)}`;
    // Asynchronous: the other cases' vela-sims answer their workers from this process meanwhile.
    const kubectl = async (args: string[], input?: string): Promise<string> => {
      const child = run('kubectl', ['--kubeconfig', KUBECONFIG, ...args], { encoding: 'utf8' });
      child.child.stdin?.end(input);
      try {
        return (await child).stdout;
      } catch (e) {
        const err = e as Error & { stderr?: string };
        throw new Error(`kubectl ${args.join(' ')}: ${err.stderr?.trim() || err.message}`, { cause: e });
      }
    };
    await kubectl([
      'apply',
      '--server-side',
      '--force-conflicts',
      '-f',
      path.join(crds, 'keda.sh_scaledobjects.yaml'),
      '-f',
      path.join(crds, 'keda.sh_triggerauthentications.yaml'),
    ]);
    await kubectl(['wait', '--for=condition=Established', 'crd/scaledobjects.keda.sh', 'crd/triggerauthentications.keda.sh', '--timeout=60s']);
    await kubectl(['create', 'namespace', fleetNs]);
    try {
      const manifest = readFileSync(path.join(ROOT, 'apps/worker/deploy/keda/scaledobject.yaml'), 'utf8');
      const out = await kubectl(['apply', '-n', fleetNs, '--dry-run=server', '-f', '-'], manifest.replaceAll('namespace: vela', `namespace: ${fleetNs}`));
      console.log(`fleet keda: ${out.trim().replaceAll('\n', '; ')}`);
      expect(out).toMatch(/scaledobject.keda.sh\/berth-worker created \(server dry run\)/);
      // The dry run validates: the CRD's own rule refuses min > max.
      const broken = manifest.replaceAll('namespace: vela', `namespace: ${fleetNs}`).replace('minReplicaCount: 1', 'minReplicaCount: 20');
      await expect(kubectl(['apply', '-n', fleetNs, '--dry-run=server', '-f', '-'], broken)).rejects.toThrow(
        /minReplicaCount must be less than or equal to maxReplicaCount/,
      );
    } finally {
      await kubectl(['delete', 'namespace', fleetNs, '--wait=false']);
      rmSync(crds, { recursive: true, force: true });
    }
  });
});

/**
 * KEDA's CRDs from its Go module (github.com/kedacore/keda/v2 at KEDA_VERSION, default v2.21.1):
 * `go mod download` fetches the module's zip through the Go module proxy (its go directive may be
 * newer than the local Go, which then reports an error but has fetched and verified the zip), and
 * the CRDs are read from the zip's config/crd/bases into a temporary directory.
 */
async function kedaCrds(): Promise<string> {
  const version = process.env.KEDA_VERSION ?? 'v2.21.1';
  const module = `github.com/kedacore/keda/v2@${version}`;
  let out: string;
  try {
    out = (await run('go', ['mod', 'download', '-json', module], { encoding: 'utf8', cwd: tmpdir() })).stdout;
  } catch (e) {
    out = (e as { stdout?: string }).stdout ?? '';
  }
  const zip = out ? (JSON.parse(out) as { Zip?: string }).Zip : undefined;
  if (zip === undefined) throw new Error(`cannot fetch KEDA's Go module for its CRDs: go mod download -json ${module} gave ${out || 'nothing'}`);
  const dir = mkdtempSync(path.join(tmpdir(), 'berth-keda-'));
  await run('unzip', [
    '-q',
    '-j',
    zip,
    `${module}/config/crd/bases/keda.sh_scaledobjects.yaml`,
    `${module}/config/crd/bases/keda.sh_triggerauthentications.yaml`,
    '-d',
    dir,
  ]);
  return dir;
}

/** A seeded PRNG (mulberry32): the soak's choices repeat under one seed. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The q-quantile (nearest rank) of `values`, 0 when empty. */
function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}
