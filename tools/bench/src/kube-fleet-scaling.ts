/**
 * Kubernetes runtime, W workers in one namespace (issue 25 item 7): pod events delivered and
 * apiserver bytes per build, for W ∈ BENCH_W (default 1,10,50), from kube-sim's counters.
 *
 * W worker-mode runtimes share kube-sim's `default` namespace; BENCH_BUILDS (default 20) builds of
 * one `true` step run over them round-robin, BENCH_CONCURRENCY (default 5) at a time (each a real
 * container in kube-sim's Docker). The same builds give both designs:
 *
 * - before: each worker also had a namespace-wide events watch (`involvedObject.kind=Pod`, the
 *   runtime's design until this change): the bench opens W such watches, exactly the requests the old
 *   events informer made, and counts what kube-sim sent on them (`watch events`);
 * - after: the runtimes list their own pod's events by `involvedObject.name` when a step starts or
 *   waits (`list events`), and keep no events watch.
 *
 * Both share the pods traffic (each worker's label-scoped pods watch): `tracking bytes` are pods
 * watch + list bytes plus the design's event bytes. Bytes are response bodies (no headers, no TLS).
 *
 * Then, when BERTH_REAL_KUBECONFIG names the cluster of tools/kube-cluster, what one pod's events list
 * costs the real apiserver with BENCH_REAL_EVENTS (default 0,1000,10000) other events in its
 * namespace (events-list-real.ts). BENCH_REAL_ONLY=1 runs only that.
 */
import { background, withTimeout } from '@berth/context';
import { startKubeSim, type CountersSnapshot } from '@berth/kube-sim';
import { conformanceBuild, conformanceStep, setupBuildResources, teardownBuild } from '@berth/runtime-conformance';
import { createKubernetesRuntime, type KubernetesRuntime } from '@berth/runtime-kubernetes';
import { KubeConfig, Watch } from '@kubernetes/client-node';
import { realCluster } from '@berth/kube-cluster';
import { type ListCost, measureListCost } from './events-list-real.ts';

const BUSYBOX = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';
const PAUSE = process.env.BERTH_PAUSE_IMAGE ?? 'berth/pause:1';
const list = (text: string | undefined, fallback: number[]): number[] => (text ? text.split(',').map(Number) : fallback);
const REAL_ONLY = process.env.BENCH_REAL_ONLY === '1';
const WORKERS = REAL_ONLY ? [] : list(process.env.BENCH_W, [1, 10, 50]);
const REAL_EVENTS = list(process.env.BENCH_REAL_EVENTS, [0, 1_000, 10_000]);
const cluster = realCluster();
const BUILDS = Number(process.env.BENCH_BUILDS ?? 20);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 5);

interface Row {
  workers: number;
  builds: number;
  /** Pod events sent per build: to all workers (before: W watches), listed by the build's own worker (after). */
  eventsBefore: number;
  eventsAfter: number;
  /** Event bytes per build. */
  eventBytesBefore: number;
  eventBytesAfter: number;
  /** Pods watch + list bytes per build (the same in both designs). */
  podBytes: number;
  /** Event lists per build (after). */
  listsPerBuild: number;
  seconds: number;
}

const sim = await startKubeSim({ imagePullBackoff: { initialMs: 200, maxMs: 1_000 }, bookmarkIntervalMs: 60_000 });
const rows: Row[] = [];
try {
  for (const workers of WORKERS) rows.push(await measure(workers));
} finally {
  await sim.close();
}
const costs: ListCost[] = cluster.kubeconfig === undefined ? [] : await measureListCost(cluster.kubeconfig, REAL_EVENTS);

if (rows.length > 0) printRows(rows);
if (costs.length > 0) {
  console.log("\nreal apiserver: one pod's events list (involvedObject.kind=Pod,involvedObject.name=…) with N other events in its namespace\n");
  console.log('| events in the namespace | list p50 | list p95 |');
  console.log('| ---: | ---: | ---: |');
  for (const c of costs) console.log(`| ${c.events} | ${c.p50.toFixed(1)} ms | ${c.p95.toFixed(1)} ms |`);
} else {
  console.log(`\nreal apiserver list cost not measured: ${cluster.skip ?? 'BENCH_REAL_EVENTS is empty'}`);
}

function kb(bytes: number): string {
  return `${(bytes / 1024).toFixed(1)} KiB`;
}

async function measure(workers: number): Promise<Row> {
  const [ctx, cancel] = withTimeout(background(), 3_600_000);
  const runtimes: KubernetesRuntime[] = [];
  const oldWatches: AbortController[] = [];
  try {
    for (let i = 0; i < workers; i++) {
      runtimes.push(
        await createKubernetesRuntime(
          ctx,
          { workerId: `fleet-${workers}-${i}` },
          { kubeconfig: sim.kubeconfig, pauseImage: PAUSE, pendingTimeoutMs: 1_800_000 },
        ),
      );
    }
    // The old design's events watch, once per worker: what Informer<CoreV1Event> requested (its
    // client-node Watch with allowWatchBookmarks, on the namespace's events of pods).
    const kc = new KubeConfig();
    kc.loadFromString(sim.kubeconfig);
    for (let i = 0; i < workers; i++) {
      oldWatches.push(
        await new Watch(kc).watch(
          '/api/v1/namespaces/default/events',
          { fieldSelector: 'involvedObject.kind=Pod', allowWatchBookmarks: true },
          () => undefined,
          () => undefined,
        ),
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
    sim.counters.reset();
    const listsBefore = runtimes.map((r) => r.podTracker.eventLists.lists);
    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(CONCURRENCY, BUILDS) }, async () => {
        while (next < BUILDS) {
          const index = next++;
          const runtime = runtimes[index % workers]!;
          const build = conformanceBuild();
          build.steps = [conformanceStep(build, 's0', 1, { image: BUSYBOX, commands: ['true'] })];
          await setupBuildResources(ctx, runtime, build);
          for (const step of build.steps) {
            await runtime.runContainer(ctx, step, build);
            const exit = await runtime.waitContainer(ctx, step);
            if (exit.exitCode !== 0) throw new Error(`step ${step.name} exited ${exit.exitCode}`);
          }
          await teardownBuild(ctx, runtime, build);
        }
      }),
    );
    // Let the last events and pod deletions reach the watches.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const seconds = (performance.now() - started) / 1000;
    const s: CountersSnapshot = sim.counters.snapshot();
    const bytes = (key: string): number => s.bytesByVerbResource[key] ?? 0;
    const listed = runtimes.reduce((n, r) => n + r.podTracker.eventLists.events, 0);
    const lists = runtimes.reduce((n, r, i) => n + r.podTracker.eventLists.lists - (listsBefore[i] ?? 0), 0);
    const row: Row = {
      workers,
      builds: BUILDS,
      eventsBefore: (s.watchEventsByResource['events'] ?? 0) / BUILDS,
      eventsAfter: listed / BUILDS,
      eventBytesBefore: bytes('watch events') / BUILDS,
      eventBytesAfter: bytes('list events') / BUILDS,
      podBytes: (bytes('watch pods') + bytes('list pods')) / BUILDS,
      listsPerBuild: lists / BUILDS,
      seconds,
    };
    console.error(
      `[kube-fleet-scaling] W=${workers}: events/build ${row.eventsBefore.toFixed(1)} before, ${row.eventsAfter.toFixed(1)} after; ${seconds.toFixed(1)} s`,
    );
    return row;
  } finally {
    for (const watch of oldWatches) watch.abort();
    for (const runtime of runtimes) {
      await runtime.reap(background(), runtime.config.workerId).catch(() => undefined);
      await runtime.close();
    }
    cancel();
  }
}

function printRows(rows: readonly Row[]): void {
  console.log(`\nKubernetes runtime: W workers in one namespace, ${BUILDS} builds of 1 step (kube-sim counters, bytes are response bodies)\n`);
  console.log(
    '| W | events sent / build, before (W events watches) | after (own pod listed) | per worker, before | after | event bytes / build, before | after | tracking bytes / build (pods + events), before | after | before / after |',
  );
  console.log('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const r of rows) {
    const before = r.podBytes + r.eventBytesBefore;
    const after = r.podBytes + r.eventBytesAfter;
    console.log(
      `| ${r.workers} | ${r.eventsBefore.toFixed(1)} | ${r.eventsAfter.toFixed(1)} | ${(r.eventsBefore / r.workers).toFixed(1)} | ${(r.eventsAfter / r.workers).toFixed(2)} | ${kb(r.eventBytesBefore)} | ${kb(r.eventBytesAfter)} | ${kb(before)} | ${kb(after)} | ${(before / after).toFixed(1)}x |`,
    );
  }
  console.log('\nafter: event lists per build, seconds per run\n');
  console.log('| W | event lists / build | pods bytes / build | seconds |');
  console.log('| ---: | ---: | ---: | ---: |');
  for (const r of rows) console.log(`| ${r.workers} | ${r.listsPerBuild.toFixed(1)} | ${kb(r.podBytes)} | ${r.seconds.toFixed(1)} |`);
  const first = rows[0];
  const last = rows.at(-1);
  if (first && last && last !== first) {
    const growth = (a: number, b: number): string => `${(b / a).toFixed(2)}x`;
    console.log(
      `\nfrom W=${first.workers} to W=${last.workers}: tracking bytes per build grow ${growth(first.podBytes + first.eventBytesBefore, last.podBytes + last.eventBytesBefore)} before, ${growth(first.podBytes + first.eventBytesAfter, last.podBytes + last.eventBytesAfter)} after (target: flat)`,
    );
  }
}
