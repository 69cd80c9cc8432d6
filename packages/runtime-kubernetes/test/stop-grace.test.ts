// Stopping a build in one grace, however many containers run (issue 24, item 4), on kube-sim and
// on the real cluster. The kubelet acts on one pod's changes one at a time and kills the
// containers an image patch replaced one after another, each in its grace
// (pkg/kubelet/pod_workers.go podWorkerLoop; kuberuntime_manager.go SyncPod step 3); deleting the
// pod kills them all at once (killPodWithSyncResult → killContainersWithSyncResult). destroyBuild
// removes every container at once, then the build: that must take one grace, not one per container.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { background, withTimeout } from '@berth/context';
import { realCluster } from '@berth/kube-cluster';
import type { KubeSim } from '@berth/kube-sim';
import { conformanceBuild, conformanceService, conformanceStep, setupBuildResources } from '@berth/runtime-conformance';
import { createKubernetesRuntime, type KubernetesRuntime } from '../src/index.ts';
import { BUSYBOX, startSim, TEST_OPTIONS } from './helpers.ts';

const GRACE_MS = 4_000;
/** Ignores SIGTERM, so that every stop takes the whole grace. */
const STUBBORN = ['trap "" TERM', 'echo up', 'while true; do sleep 1; done'];

const cluster = realCluster();
const targets = cluster.skip === undefined ? ['kube-sim', 'real cluster'] : ['kube-sim'];
if (cluster.skip !== undefined) it.skipIf(true)(`stops in one grace on the real cluster [skipped: ${cluster.skip}]`, () => undefined);

describe.each(targets)('on %s', (target) => {
  let sim: KubeSim | undefined;
  let runtime: KubernetesRuntime;
  const workerId = `stop-grace-${Math.random().toString(16).slice(2, 10)}`;
  beforeAll(async () => {
    let kubeconfig = cluster.kubeconfig;
    if (target === 'kube-sim') {
      sim = await startSim();
      kubeconfig = sim.kubeconfig;
    }
    runtime = await createKubernetesRuntime(background(), { workerId, stopGraceMs: GRACE_MS }, { ...TEST_OPTIONS, kubeconfig });
  }, 60_000);
  afterAll(async () => {
    await runtime?.reap(background(), workerId).catch(() => undefined);
    await runtime?.close();
    await sim?.close();
  });

  it(
    `a step and a service that ignore SIGTERM: removing both, then the build, takes one grace (${GRACE_MS} ms), not one per container`,
    { timeout: 120_000 },
    async () => {
      const [ctx, cancel] = withTimeout(background(), 110_000);
      try {
        const build = conformanceBuild();
        const service = conformanceService(build, 'svc', 1, { image: BUSYBOX, script: STUBBORN });
        const step = conformanceStep(build, 'step', 1, { image: BUSYBOX, script: STUBBORN });
        build.services = [service];
        build.steps = [step];
        await setupBuildResources(ctx, runtime, build);
        await runtime.runContainer(ctx, service, build);
        await runtime.runContainer(ctx, step, build);
        expect((await runtime.inspectContainer(ctx, step)).state).toBe('running');
        expect((await runtime.inspectContainer(ctx, service)).state).toBe('running');

        // As destroyBuild: every container at once, then volume, network and build.
        const started = Date.now();
        await Promise.all([runtime.removeContainer(ctx, step), runtime.removeContainer(ctx, service)]);
        await runtime.removeVolume(ctx, build);
        await runtime.removeNetwork(ctx, build);
        await runtime.removeBuild(ctx, build);
        const took = Date.now() - started;
        console.log(`[stop-grace] ${target}: two stubborn containers stopped and the pod gone ${took} ms after the first removal (grace ${GRACE_MS} ms)`);
        // One grace, not two in a row: the figure against the goal (grace + 2 s: 5.2–5.3 s on the real
        // cluster, 4.3–4.6 s on kube-sim) is printed above and in the README; a timed bound that tight
        // fails on a loaded machine (6.7 s once, with the test command's lanes running beside it).
        // Two graces in a row took 11.1 s (real) and 9.0 s (kube-sim).
        expect(took).toBeLessThan(2 * GRACE_MS);
        expect((await runtime.reap(ctx, workerId)).pods).toEqual([]);
      } finally {
        cancel();
      }
    },
  );
});
