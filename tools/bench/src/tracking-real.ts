/**
 * P1 and P2 of the Kubernetes runtime measured on the real apiserver (tools/kube-cluster) from its
 * audit log, beside kube-sim's counters for the same builds (issue 24 item 7): one worker-mode
 * runtime, one build of S steps (runContainer + waitContainer each, logs not read, as the kube-sim
 * grid does).
 *
 * Attribution: the audit log has every request of user `berth`, and other engineers' tests use the
 * same user on the shared cluster; client-node offers no per-client User-Agent to tell this worker
 * apart. So each measurement runs one worker in a namespace of its own (created before, deleted
 * after) and counts the requests in that namespace received within its window: watches from the
 * runtime's create to its close (P1), every request from the build's first call to its teardown's
 * end (P2). The runtime makes no cluster-scoped request (checked: in the window, the only
 * non-namespaced requests of client-node's User-Agent are this bench's own namespace calls, made
 * outside it); the figure printed beside counts any that appear.
 */
import { background, withTimeout } from '@berth/context';
import { type AuditEvent, readAudit } from '@berth/kube-cluster';
import type { KubeSim } from '@berth/kube-sim';
import { conformanceBuild, conformanceStep, setupBuildResources, teardownBuild } from '@berth/runtime-conformance';
import { createKubernetesRuntime } from '@berth/runtime-kubernetes';
import { KubeConfig } from '@kubernetes/client-node';
import { createNamespace, deleteNamespace } from './kube-namespace.ts';

const BUSYBOX = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';
const PAUSE = process.env.BERTH_PAUSE_IMAGE ?? 'berth/pause:1';
const AUDIT_LOG = process.env.BERTH_KUBE_AUDIT_LOG ?? '/var/lib/berth-kube/logs/audit.log';

/** P1 and P2 of one worker running one build of `steps` steps. */
export interface ApiFigures {
  steps: number;
  /** Watches opened from the runtime's create to its close, by resource (`pods`, `events`). */
  watches: Record<string, number>;
  /**
   * Requests of the build (its pod's create to its teardown), watch reconnects left out (they are the
   * worker's: P1), and those by `verb resource`.
   */
  requests: number;
  byVerb: Record<string, number>;
  /** Requests without a namespace of client-node's User-Agent in the window (real cluster; expected 0). */
  clusterScoped?: number;
  seconds: number;
}

type Where = { kind: 'sim'; sim: KubeSim } | { kind: 'real'; kubeconfig: string };

/** Runs one build of `steps` steps on kube-sim or the real cluster and counts its API requests. */
export async function measureApi(where: Where, steps: number): Promise<ApiFigures> {
  const kubeconfig = where.kind === 'sim' ? where.sim.kubeconfig : where.kubeconfig;
  const kc = new KubeConfig();
  kc.loadFromString(kubeconfig);
  const namespace = where.kind === 'real' ? await createNamespace(kc, `berth-bench-api-${process.pid}-${steps}`) : undefined;
  const workerId = `bench-api-${where.kind}-${process.pid}-${steps}`;
  const [ctx, cancel] = withTimeout(background(), 600_000);
  try {
    if (where.kind === 'sim') where.sim.counters.reset();
    const opened = Date.now();
    const runtime = await createKubernetesRuntime(
      ctx,
      { workerId },
      { kubeconfig, pauseImage: PAUSE, pendingTimeoutMs: 300_000, ...(namespace ? { namespace } : {}) },
    );
    // The informers' first watches open just after create returns: let them, so that they count
    // as the worker's (P1) and not the build's.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const atCreate = where.kind === 'sim' ? where.sim.counters.snapshot() : undefined;
    let buildStart = 0;
    let buildEnd = 0;
    try {
      if (where.kind === 'sim') where.sim.counters.reset();
      buildStart = Date.now();
      const build = conformanceBuild();
      build.steps = Array.from({ length: steps }, (_, i) => conformanceStep(build, `s${i}`, i + 1, { image: BUSYBOX, commands: ['true'] }));
      await setupBuildResources(ctx, runtime, build);
      for (const step of build.steps) {
        await runtime.runContainer(ctx, step, build);
        const exit = await runtime.waitContainer(ctx, step);
        if (exit.exitCode !== 0) throw new Error(`step ${step.name} exited ${exit.exitCode}`);
      }
      await teardownBuild(ctx, runtime, build);
      buildEnd = Date.now();
    } finally {
      await runtime.close();
    }
    const closed = Date.now();
    const seconds = (buildEnd - buildStart) / 1000;
    if (where.kind === 'sim') {
      const during = where.sim.counters.snapshot();
      const watches = {
        pods: (atCreate?.byVerbResource['watch pods'] ?? 0) + (during.byVerbResource['watch pods'] ?? 0),
        events: (atCreate?.byVerbResource['watch events'] ?? 0) + (during.byVerbResource['watch events'] ?? 0),
      };
      const watchesDuring = Object.entries(during.byVerbResource)
        .filter(([k]) => k.startsWith('watch '))
        .reduce((sum, [, v]) => sum + v, 0);
      const byVerb = Object.fromEntries(Object.entries(during.byVerbResource).filter(([k]) => !k.startsWith('watch ')));
      return { steps, watches, requests: during.requestsTotal - watchesDuring, byVerb, seconds };
    }
    // The apiserver writes an event when a request completes (a watch: when its response starts).
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const all = readAudit(AUDIT_LOG, opened, closed + 1).filter((e) => e.user.username === 'berth');
    const ours = all.filter((e) => e.objectRef?.namespace === namespace);
    const watches: Record<string, number> = {};
    for (const e of ours) if (e.verb === 'watch') watches[e.objectRef?.resource ?? '?'] = (watches[e.objectRef?.resource ?? '?'] ?? 0) + 1;
    const build = ours.filter((e) => e.receivedMs >= buildStart && e.receivedMs <= buildEnd && e.verb !== 'watch');
    const clusterScoped = all.filter(
      (e) => e.objectRef?.namespace === undefined && e.userAgent?.startsWith('kubernetes-client-javascript') && e.objectRef?.resource !== 'namespaces',
    ).length;
    return { steps, watches, requests: build.length, byVerb: countByVerb(build), clusterScoped, seconds };
  } finally {
    cancel();
    if (namespace !== undefined) await deleteNamespace(kc, namespace);
  }
}

function countByVerb(events: AuditEvent[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const e of events) {
    const key = `${e.verb} ${e.objectRef?.resource ?? '?'}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

/** The figures side by side, as a markdown table. */
export function printApiFigures(pairs: { sim: ApiFigures; real: ApiFigures }[]): void {
  const verbs = (f: ApiFigures): string =>
    Object.entries(f.byVerb)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
  const watches = (f: ApiFigures): string => `pods ${f.watches['pods'] ?? 0}, events ${f.watches['events'] ?? 0}`;
  console.log(
    '\nKubernetes runtime on the real apiserver (audit log) beside kube-sim (counters): one worker (worker mode), one build of S steps, logs not read\n',
  );
  console.log(
    '| S | P1 watches opened per worker: kube-sim | real | P2 requests per build (watches left out): kube-sim | real | real, by verb | real: cluster-scoped | build seconds: kube-sim, real |',
  );
  console.log('| ---: | --- | --- | ---: | ---: | --- | ---: | --- |');
  for (const { sim, real } of pairs)
    console.log(
      `| ${sim.steps} | ${watches(sim)} | ${watches(real)} | ${sim.requests} | ${real.requests} | ${verbs(real)} | ${real.clusterScoped ?? '-'} | ${sim.seconds.toFixed(1)}, ${real.seconds.toFixed(1)} |`,
    );
  const differ = pairs.filter(({ sim, real }) => verbs(sim) !== verbs(real));
  for (const { sim } of differ) console.log(`\nS = ${sim.steps}: kube-sim by verb: ${verbs(sim)}`);
}
