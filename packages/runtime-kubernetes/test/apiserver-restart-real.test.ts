// The apiserver restarted mid-build on the real cluster (issue 24, item 7): stopped with SIGTERM
// (a graceful stop: the old apiserver stops listening and drains its watches and log follows while
// the new one, started by tools/kube-cluster/cluster.sh as soon as the port is free, takes the new
// connections) and with SIGKILL (a crash, then started again) while a step writes its log. The runtime's watches re-list and
// reopen, its log follow resumes from the last timestamp: every line arrives once, in order, the
// exit code too, and no pod is left.
//
// It takes the whole cluster's API away for seconds, so it runs only when asked
// (BERTH_REAL_CLUSTER_ALONE=1): the test command runs this file alone, after every other lane.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { background, withTimeout } from '@berth/context';
import { realCluster } from '@berth/kube-cluster';
import { conformanceBuild, conformanceStep, setupBuildResources, teardownBuild } from '@berth/runtime-conformance';
import { aloneSkip, BUSYBOX, useRealRuntime } from './helpers.ts';

const run = promisify(execFile);
const CLUSTER_SH = path.resolve(import.meta.dirname, '../../../tools/kube-cluster/cluster.sh');
const LINES = 60;
const cluster = realCluster();
const skip = aloneSkip(cluster.skip, "it restarts the whole cluster's API");
const runtimeOf = useRealRuntime(skip === undefined ? cluster.kubeconfig : undefined, 'restart');

describe.each(['TERM', 'KILL'])("the real cluster's apiserver stopped with SIG%s mid-step and started again", (signal) => {
  it.skipIf(skip !== undefined)(
    `loses and repeats no log line, reports the exit code, and leaves no pod${skip === undefined ? '' : ` [skipped: ${skip}]`}`,
    { timeout: 240_000 },
    async () => {
      const rt = runtimeOf();
      const [ctx, cancel] = withTimeout(background(), 220_000);
      const build = conformanceBuild();
      const step = conformanceStep(build, 'counter', 1, {
        image: BUSYBOX,
        script: [`for i in $(seq 1 ${LINES}); do echo "line $i"; sleep 0.25; done`, 'exit 3'],
      });
      build.steps = [step];
      try {
        await setupBuildResources(ctx, rt, build);
        await rt.runContainer(ctx, step, build);
        const stream = await rt.tailContainer(ctx, step);
        let text = '';
        let restarted: Promise<unknown> | undefined;
        const reading = (async () => {
          for await (const chunk of stream) {
            text += (chunk as Buffer).toString();
            if (restarted === undefined && text.includes('line 5\n')) restarted = run('bash', [CLUSTER_SH, 'restart-apiserver', signal], { timeout: 120_000 });
          }
        })();
        const [exit] = await Promise.all([rt.waitContainer(ctx, step), reading]);
        await restarted;
        expect(restarted, 'the apiserver was not restarted: the step ended before line 5').toBeDefined();
        expect(text).toBe(Array.from({ length: LINES }, (_, i) => `line ${i + 1}\n`).join(''));
        expect(exit.exitCode).toBe(3);
        console.log(
          `[apiserver-restart] SIG${signal}: ${LINES} lines whole; log resumes ${rt.stats.logs.resumes}, lines skipped on resume ${rt.stats.logs.linesSkipped}`,
        );
      } finally {
        await teardownBuild(ctx, rt, build).catch(() => undefined);
        cancel();
      }
      expect((await rt.reap(background(), rt.config.workerId)).pods).toEqual([]);
    },
  );
});
