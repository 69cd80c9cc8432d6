// The runtime against the real cluster (tools/kube-cluster; the test command starts it and sets
// BERTH_REAL_KUBECONFIG). Run alone without it, it reports itself skipped with the way to run it.
import { expect, it } from 'vitest';
import { background, withTimeout } from '@berth/context';
import { conformanceBuild, conformanceStep, runToCompletion, setupBuildResources, teardownBuild } from '@berth/runtime-conformance';
import { realCluster } from '@berth/kube-cluster';
import { createKubernetesRuntime } from '../src/index.ts';
import { BUSYBOX, TEST_OPTIONS } from './helpers.ts';

const cluster = realCluster();
const reason = cluster.skip === undefined ? '' : ` [skipped: ${cluster.skip}]`;

it.skipIf(cluster.skip !== undefined)(
  `runs a two-step build with a failing step on a real cluster, then removes and reaps it${reason}`,
  async () => {
    const [ctx, cancel] = withTimeout(background(), 240_000);
    const workerId = `berth-real-${Date.now().toString(36)}`;
    const runtime = await createKubernetesRuntime(ctx, { workerId }, { ...TEST_OPTIONS, kubeconfig: cluster.kubeconfig });
    try {
      const image = BUSYBOX;
      const build = conformanceBuild();
      const ok = conformanceStep(build, 'ok', 1, { image, script: ['echo hello from a real cluster'] });
      const bad = conformanceStep(build, 'bad', 2, { image, script: ['echo failing', 'exit 3'] });
      build.steps = [ok, bad];
      await setupBuildResources(ctx, runtime, build);
      const first = await runToCompletion(runtime, build, ok, { ctx, timeoutMs: 180_000 });
      const second = await runToCompletion(runtime, build, bad, { ctx, timeoutMs: 120_000 });
      expect(first).toMatchObject({ logs: 'hello from a real cluster\n', exit: { exitCode: 0 } });
      expect(second).toMatchObject({ logs: 'failing\n', exit: { exitCode: 3 } });
      await teardownBuild(ctx, runtime, build);
      expect((await runtime.reap(ctx, workerId)).pods).toEqual([]);
    } finally {
      await runtime.reap(background(), workerId).catch(() => undefined);
      await runtime.close();
      cancel();
    }
  },
  300_000,
);
