/**
 * The runtimes of the scenario matrix: the dummy (in memory), the local Docker engine, kube-sim
 * (the Kubernetes API test double whose pods run in Docker, started in this process as
 * packages/runtime-kubernetes/test/helpers.ts starts it) and the real cluster the test command
 * starts (tools/kube-cluster), when BERTH_REAL_KUBECONFIG names it.
 */
import { background, withTimeout } from '@berth/context';
import { realCluster } from '@berth/kube-cluster';
import { type KubeSim, startKubeSim } from '@berth/kube-sim';
import type { Runtime } from '@berth/runtime';
import { dockerRuntime } from '@berth/runtime-docker';
import { DummyEngine, dummyRuntime } from '@berth/runtime-dummy';
import { createKubernetesRuntime } from '@berth/runtime-kubernetes';
import { PAUSE } from '../helpers.ts';

/** A runtime under test, and how to let it go. */
export interface MatrixRuntime {
  readonly name: string;
  readonly runtime: Runtime;
  readonly workerId: string;
  /** Cleanup budget given to builds: removing real containers takes seconds on a loaded machine. */
  readonly cleanupMs: number;
  /** Slack over a computed bound: every runtime call may take about a second to settle on a done ctx. */
  readonly slackMs: number;
  /** A build timeout long enough for a first quick step to start and end on this runtime. */
  readonly timeoutMs: number;
  close(): Promise<void>;
}

/** The names `describe.each` runs over. */
export type RuntimeName = 'dummy' | 'docker' | 'kube-sim' | 'real cluster';

/**
 * The runtimes to run: the real cluster's lane joins when the test command started it; run alone
 * without it, the file says how to run it (see @berth/kube-cluster's realCluster).
 */
export function matrixRuntimes(): { names: RuntimeName[]; skipped?: string } {
  const cluster = realCluster();
  return cluster.skip === undefined
    ? { names: ['dummy', 'docker', 'kube-sim', 'real cluster'] }
    : { names: ['dummy', 'docker', 'kube-sim'], skipped: cluster.skip };
}

/** The Kubernetes runtime's test timings (the defaults, 30 s grace and 5 min pending, are for production). */
const KUBE_TEST_OPTIONS = { pauseImage: PAUSE, pullGraceMs: 1_500, pendingTimeoutMs: 60_000, watchSilenceMs: 30_000, watchBackoffMaxMs: 1_000 };

function workerId(name: string): string {
  return `matrix-${name}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Starts the named runtime (and kube-sim for `kube-sim`). */
export async function startRuntime(name: RuntimeName): Promise<MatrixRuntime> {
  const id = workerId(name);
  const stopGraceMs = 1_000;
  if (name === 'dummy') {
    const runtime = await dummyRuntime({ engine: new DummyEngine() }).create(background(), { workerId: id, stopGraceMs });
    return { name, runtime, workerId: id, cleanupMs: 2_000, slackMs: 1_500, timeoutMs: 1_500, close: () => runtime.close() };
  }
  if (name === 'docker') {
    const runtime = await dockerRuntime().create(background(), { workerId: id, stopGraceMs });
    return {
      name,
      runtime,
      workerId: id,
      cleanupMs: 20_000,
      slackMs: 5_000,
      timeoutMs: 12_000,
      close: async () => {
        await runtime.reap(background(), id).catch(() => undefined);
        await runtime.close();
      },
    };
  }
  if (name === 'real cluster') {
    const cluster = realCluster();
    if (cluster.kubeconfig === undefined) throw new Error(cluster.skip);
    const [ctx, cancel] = withTimeout(background(), 90_000); // a cluster just started, with the other lanes beside it, can take tens of seconds to answer the first lists
    try {
      const runtime = await createKubernetesRuntime(ctx, { workerId: id, stopGraceMs }, { kubeconfig: cluster.kubeconfig, ...KUBE_TEST_OPTIONS });
      // The real kubelet takes about 2 s per pause → step swap and acts on one pod's changes one at a time.
      return {
        name,
        runtime,
        workerId: id,
        cleanupMs: 30_000,
        slackMs: 10_000,
        timeoutMs: 25_000,
        close: async () => {
          await runtime.reap(background(), id).catch(() => undefined);
          await runtime.close();
        },
      };
    } finally {
      cancel();
    }
  }
  const sim: KubeSim = await startKubeSim({ imagePullBackoff: { initialMs: 200, maxMs: 1_000 }, bookmarkIntervalMs: 2_000 });
  const [ctx, cancel] = withTimeout(background(), 30_000);
  try {
    const runtime = await createKubernetesRuntime(ctx, { workerId: id, stopGraceMs }, { kubeconfig: sim.kubeconfig, ...KUBE_TEST_OPTIONS });
    return {
      name,
      runtime,
      workerId: id,
      cleanupMs: 30_000,
      slackMs: 8_000,
      timeoutMs: 20_000,
      close: async () => {
        await runtime.reap(background(), id).catch(() => undefined);
        await runtime.close();
        await sim.close();
      },
    };
  } catch (error) {
    await sim.close();
    throw error;
  } finally {
    cancel();
  }
}
