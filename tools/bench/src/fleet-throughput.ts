/**
 * Fleet throughput (issue 25): builds per minute of the worker image as a StatefulSet in the real
 * cluster (tools/kube-cluster, through @berth/fleet), 3 replicas against 1, on one vela-sim queue.
 * The same BENCH_FLEET_BUILDS (default 24) builds of one step sleeping BENCH_FLEET_SLEEP_S (default
 * 10) seconds, each replica with the manifests' VELA_BUILD_LIMIT (2); timed from the first enqueue
 * to the last final status. Goal: 3 replicas ≥ 2.7 × 1 replica.
 *
 * Needs BERTH_REAL_KUBECONFIG (the cluster's kubeconfig), Redis (REDIS_URL or 127.0.0.1:6379) and
 * the worker image in the cluster (`bash tools/ship/image.sh && bash tools/kube-cluster/cluster.sh
 * import berth/worker:dev`). Every build pod and every worker runs on this one node: the ratio is
 * bounded by its CPUs, not by the workers (the load average is printed beside the figures).
 */
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { Fleet, buildRecords, enqueueSleepBuilds, isFinal, waitFor } from '@berth/fleet';
import { VelaSim } from '@berth/vela-sim';

const BUILDS = Number(process.env.BENCH_FLEET_BUILDS ?? 24);
const SLEEP_S = Number(process.env.BENCH_FLEET_SLEEP_S ?? 10);
const kubeconfig = process.env.BERTH_REAL_KUBECONFIG;
if (!kubeconfig)
  throw new Error('fleet-throughput needs the real cluster: set BERTH_REAL_KUBECONFIG=/var/lib/berth-kube/berth.kubeconfig (tools/kube-cluster)');

const sim = await VelaSim.start();
try {
  const rate = async (replicas: number): Promise<number> => {
    const route = `bench-fleet-${randomUUID().slice(0, 8)}`;
    const fleet = await Fleet.deploy({ kubeconfig, serverAddr: sim.url, serverSecret: sim.secret, route, replicas });
    try {
      const t0 = Date.now();
      const ids = await enqueueSleepBuilds(sim, route, BUILDS, SLEEP_S, route);
      await waitFor(`${BUILDS} builds`, () => ids.every((id) => isFinal(sim.builds.get(id)?.status)), 30 * 60_000);
      const minutes = (Date.now() - t0) / 60_000;
      const bad = buildRecords(sim, ids).filter((r) => r.status !== 'success' || r.claims !== 1);
      if (bad.length > 0) throw new Error(`builds not run exactly once with success: ${JSON.stringify(bad)}`);
      const perMin = BUILDS / minutes;
      console.log(
        `${replicas} replica(s): ${BUILDS} builds of sleep ${SLEEP_S} in ${(minutes * 60).toFixed(1)} s = ${perMin.toFixed(1)} builds/min (load ${loadavg()[0]!.toFixed(1)})`,
      );
      return perMin;
    } finally {
      await fleet.destroy();
    }
  };
  const one = await rate(1);
  const three = await rate(3);
  // The floor of the sleep alone: BUILDS / (2 slots × replicas) rounds of SLEEP_S.
  const ideal = (replicas: number): number => BUILDS / ((Math.ceil(BUILDS / (2 * replicas)) * SLEEP_S) / 60);
  console.log(
    `fleet throughput: 3 replicas ${three.toFixed(1)} builds/min, 1 replica ${one.toFixed(1)} builds/min, ratio ${(three / one).toFixed(2)} (goal ≥ 2.70; ` +
      `sleep-only ceiling ${ideal(3).toFixed(1)} vs ${ideal(1).toFixed(1)} builds/min)`,
  );
} finally {
  await sim.close();
}
