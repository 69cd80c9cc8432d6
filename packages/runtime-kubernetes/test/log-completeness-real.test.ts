// Every byte the node holds of a step's log, Berth delivers: on the real cluster, steps that write
// 108 KiB and exit at once (the executor matrix's size-cap step), three builds at a time; after
// each, what Berth's tailContainer delivered is compared with the container's log file as the
// kubelet keeps it on this machine (test/node-log.ts), read a second after the step ended.
//
// Why the file and not the lines the step wrote: on a loaded machine the container runtime itself
// loses the tail of such an output. containerd 1.6 (Debian 12's, this cluster's) closes the
// container's stdout FIFO when it handles the exit, and what it had not read yet (up to the pipe
// buffers, tens of KiB) never reaches the file: its log says `Failed to pipe stdout of container
// … file already closed`, and the file ends early, often mid-line with a `P` record (upstream:
// containerd/containerd issue 7289). Plain `kubectl` pods of `seq 1 20000` lost 47–80 KB of it in
// 3 of 6 runs here. No API can serve those bytes, so the test counts such runs and prints them; what
// it asserts is Berth's part: the stream ends only once it has delivered all the node has.
import { expect, it } from 'vitest';
import { background, withTimeout } from '@berth/context';
import { realCluster } from '@berth/kube-cluster';
import { conformanceBuild, conformanceStep, setupBuildResources, teardownBuild } from '@berth/runtime-conformance';
import type { KubernetesRuntime } from '../src/index.ts';
import { containerNameOf, podNameOf } from '../src/pod-spec.ts';
import { nodeLog } from './node-log.ts';
import { BUSYBOX, useRealRuntime } from './helpers.ts';

const RUNS = Number(process.env.COMPLETENESS_RUNS ?? 6);
const AT_ONCE = 3;
const SCRIPT = ['seq 1 20000', 'echo last-line'];
const cluster = realCluster();
const reason = cluster.skip === undefined ? '' : ` [skipped: ${cluster.skip}]`;
const runtimeOf = useRealRuntime(cluster.skip === undefined ? cluster.kubeconfig : undefined, 'completeness');

interface Run {
  delivered: Buffer;
  onNode: Buffer | undefined;
}

async function oneRun(rt: KubernetesRuntime): Promise<Run> {
  const [ctx, cancel] = withTimeout(background(), 120_000);
  const build = conformanceBuild();
  const step = conformanceStep(build, 'loud', 1, { image: BUSYBOX, script: SCRIPT });
  build.steps = [step];
  try {
    await setupBuildResources(ctx, rt, build);
    await rt.runContainer(ctx, step, build);
    const stream = await rt.tailContainer(ctx, step);
    const chunks: Buffer[] = [];
    const reading = (async () => {
      for await (const chunk of stream) chunks.push(chunk as Buffer);
    })();
    await Promise.all([rt.waitContainer(ctx, step), reading]);
    // What containerd still writes after the exit it reported lands within this second.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const node = nodeLog('default', podNameOf(build.id), containerNameOf(step.id));
    return { delivered: Buffer.concat(chunks), onNode: node?.content };
  } finally {
    await teardownBuild(ctx, rt, build).catch(() => undefined);
    cancel();
  }
}

it.skipIf(cluster.skip !== undefined)(
  `${RUNS} steps writing 108 KiB and exiting at once: Berth delivers every byte of the log the node holds, on the real cluster${reason}`,
  { timeout: 300_000 },
  async () => {
    const rt = runtimeOf();
    const runs: Run[] = [];
    for (let done = 0; done < RUNS; done += AT_ONCE) {
      runs.push(...(await Promise.all(Array.from({ length: Math.min(AT_ONCE, RUNS - done) }, () => oneRun(rt)))));
    }
    const runtimeLost = runs.filter((run) => run.onNode !== undefined && !run.onNode.toString('latin1').endsWith('20000\nlast-line\n'));
    console.log(
      `[log-completeness] ${RUNS} steps of 108 KiB on the real cluster: Berth delivered all the node holds in ${runs.filter((run) => run.onNode !== undefined && run.delivered.equals(run.onNode)).length}; ` +
        `the container runtime lost the output's tail in ${runtimeLost.length} (node file ${runtimeLost.map((run) => run.onNode?.length).join(', ') || '-'} bytes, against ${Math.max(...runs.map((run) => run.onNode?.length ?? 0))} in a whole one)`,
    );
    for (const [i, run] of runs.entries()) {
      expect(run.onNode, `run ${i + 1}: the node has no log file for the step`).toBeDefined();
      const delivered = run.delivered.length;
      const held = run.onNode?.length ?? 0;
      expect(
        delivered === held && run.delivered.equals(run.onNode ?? Buffer.alloc(0)),
        `run ${i + 1}: Berth delivered ${delivered} bytes, the node holds ${held}`,
      ).toBe(true);
    }
  },
);
