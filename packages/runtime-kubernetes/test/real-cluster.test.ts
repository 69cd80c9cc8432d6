// Opt-in: the runtime against a real cluster. Runs only with BERTH_KUBE_REAL_CLUSTER=1 and KUBECONFIG
// set; otherwise it reports itself skipped with the reason. See README.md ("Testing against a real cluster").
import { expect, it } from 'vitest';
import { background, withTimeout } from '@berth/context';
import { conformanceBuild, conformanceStep, runToCompletion, setupBuildResources, teardownBuild } from '@berth/runtime-conformance';
import { createKubernetesRuntime } from '../src/index.ts';

const enabled = process.env.BERTH_KUBE_REAL_CLUSTER === '1' && Boolean(process.env.KUBECONFIG);
const reason = enabled ? '' : ' [skipped: set BERTH_KUBE_REAL_CLUSTER=1 and KUBECONFIG to run it against a real cluster]';

it.skipIf(!enabled)(
  `runs a two-step build with a failing step on a real cluster, then removes and reaps it${reason}`,
  async () => {
    const [ctx, cancel] = withTimeout(background(), 240_000);
    const workerId = `berth-real-${Date.now().toString(36)}`;
    const runtime = await createKubernetesRuntime(
      ctx,
      { workerId },
      {
        ...(process.env.BERTH_KUBE_NAMESPACE ? { namespace: process.env.BERTH_KUBE_NAMESPACE } : {}),
        ...(process.env.BERTH_KUBE_PAUSE_IMAGE ? { pauseImage: process.env.BERTH_KUBE_PAUSE_IMAGE } : {}),
      },
    );
    try {
      const image = process.env.BERTH_KUBE_REAL_IMAGE ?? 'busybox:1.36';
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
