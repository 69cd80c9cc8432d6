/**
 * Kubernetes runtime, W workers in one namespace (issue 25 item 7): pod events delivered and
 * apiserver bytes per build, for W ∈ BENCH_W (default 1,10,50), from kube-sim's counters.
 *
 * W worker-mode runtimes share kube-sim's `default` namespace; BENCH_BUILDS (default 20) normal
 * builds of one `true` step run over them round-robin, BENCH_CONCURRENCY (default 5) at a time (each
 * a real container in kube-sim's Docker), then BENCH_FAILING_BUILDS (default 10) failing builds whose
 * one step's image cannot be pulled (it is on no node and in no registry: kube-sim answers the pull
 * `not found`, and under restartPolicy Never the kubelet shows only the terminated pause, so the
 * runtime lists the pod's events for the kubelet's Failed event). The same builds give both designs:
 *
 * - before: each worker also had a namespace-wide events watch (`involvedObject.kind=Pod`, the
 *   runtime's design until issue 25 item 7): the bench opens W such watches, exactly the requests the
 *   old events informer made, and counts what kube-sim sent on them (`watch events`);
 * - after: the runtimes keep no events watch and list their own pod's events by `involvedObject.name`
 *   only when something needs explaining (`list events`): a failing wait or start, a slow start, a
 *   failed pod, the pending timeout. A normal build lists none; each list costs the apiserver a scan
 *   of the namespace's events, which the real-apiserver part measures.
 *
 * Both share the pods traffic (each worker's label-scoped pods watch): `tracking bytes` are pods
 * watch + list bytes plus the design's event bytes. Bytes are response bodies (no headers, no TLS).
 *
 * Then, when BERTH_REAL_KUBECONFIG names the cluster of tools/kube-cluster, what one pod's events list
 * costs the real apiserver with BENCH_REAL_EVENTS (default 0,1000,10000) other events in its
 * namespace (events-list-real.ts). BENCH_REAL_ONLY=1 runs only that.
 */
import { availableParallelism, loadavg } from 'node:os';
import { background, type Context, withTimeout } from '@berth/context';
import { isRuntimeError } from '@berth/runtime';
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
const FAILING_BUILDS = Number(process.env.BENCH_FAILING_BUILDS ?? 10);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 5);
/** An image on no node and in no registry: its pull fails `not found`. */
const MISSING_IMAGE = 'berth/fleet-missing:1';

/** What one kind of build cost, per build. */
interface Cost {
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

interface Row {
  workers: number;
  normal: Cost;
  failing: Cost | undefined;
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
    const normal = await runBuilds(ctx, runtimes, BUILDS, BUSYBOX);
    const failing = FAILING_BUILDS > 0 ? await runBuilds(ctx, runtimes, FAILING_BUILDS, MISSING_IMAGE) : undefined;
    const row: Row = { workers, normal, failing };
    console.error(
      `[kube-fleet-scaling] W=${workers}: normal build ${normal.listsPerBuild.toFixed(2)} lists, ${normal.eventsBefore.toFixed(1)} events before, ${normal.eventsAfter.toFixed(1)} after (${normal.seconds.toFixed(1)} s)` +
        (failing
          ? `; failing build ${failing.listsPerBuild.toFixed(2)} lists, ${failing.eventsBefore.toFixed(1)} events before, ${failing.eventsAfter.toFixed(1)} after (${failing.seconds.toFixed(1)} s)`
          : ''),
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

/**
 * Runs `count` builds of one step of `image` over the runtimes, round-robin, and returns their cost
 * per build from kube-sim's counters (reset first). A step of {@link MISSING_IMAGE} must fail with
 * ImageNotFound; any other must exit 0.
 */
async function runBuilds(ctx: Context, runtimes: readonly KubernetesRuntime[], count: number, image: string): Promise<Cost> {
  const failing = image === MISSING_IMAGE;
  sim.counters.reset();
  const listsBefore = runtimes.map((r) => r.podTracker.eventLists.lists);
  const eventsBefore = runtimes.map((r) => r.podTracker.eventLists.events);
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(CONCURRENCY, count) }, async () => {
      while (next < count) {
        const index = next++;
        const runtime = runtimes[index % runtimes.length]!;
        const build = conformanceBuild();
        build.steps = [conformanceStep(build, 's0', 1, { image, commands: ['true'] })];
        await setupBuildResources(ctx, runtime, build);
        for (const step of build.steps) {
          if (failing) {
            const outcome = await runtime.runContainer(ctx, step, build).then(
              () => undefined,
              (error: unknown) => error,
            );
            if (!isRuntimeError(outcome, 'ImageNotFound')) throw new Error(`step of ${image} should fail ImageNotFound; got ${String(outcome)}`);
            continue;
          }
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
  const listed = runtimes.reduce((n, r, i) => n + r.podTracker.eventLists.events - (eventsBefore[i] ?? 0), 0);
  const lists = runtimes.reduce((n, r, i) => n + r.podTracker.eventLists.lists - (listsBefore[i] ?? 0), 0);
  return {
    builds: count,
    eventsBefore: (s.watchEventsByResource['events'] ?? 0) / count,
    eventsAfter: listed / count,
    eventBytesBefore: bytes('watch events') / count,
    eventBytesAfter: bytes('list events') / count,
    podBytes: (bytes('watch pods') + bytes('list pods')) / count,
    listsPerBuild: lists / count,
    seconds,
  };
}

function printRows(rows: readonly Row[]): void {
  console.log(
    `\nload: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')} (1, 5, 15 min) on ${availableParallelism()} cores`,
  );
  console.log(`\nKubernetes runtime: W workers in one namespace, ${BUILDS} normal builds of 1 step (kube-sim counters, bytes are response bodies)\n`);
  console.log(
    '| W | events sent / build, before (W events watches) | after (listed when needed) | per worker, before | after | event bytes / build, before | after | tracking bytes / build (pods + events), before | after | before / after |',
  );
  console.log('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const { workers, normal: r } of rows) {
    const before = r.podBytes + r.eventBytesBefore;
    const after = r.podBytes + r.eventBytesAfter;
    console.log(
      `| ${workers} | ${r.eventsBefore.toFixed(1)} | ${r.eventsAfter.toFixed(1)} | ${(r.eventsBefore / workers).toFixed(1)} | ${(r.eventsAfter / workers).toFixed(2)} | ${kb(r.eventBytesBefore)} | ${kb(r.eventBytesAfter)} | ${kb(before)} | ${kb(after)} | ${(before / after).toFixed(1)}x |`,
    );
  }
  console.log('\nafter: event lists per build, normal and failing (a step whose image cannot be pulled), seconds per run\n');
  console.log(
    '| W | lists / normal build | lists / failing build | events listed / failing build | list bytes / failing build | events sent / failing build, before | pods bytes / build | seconds (normal, failing) |',
  );
  console.log('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const { workers, normal, failing } of rows) {
    const f = (value: ((c: Cost) => string) | undefined): string => (failing && value ? value(failing) : '-');
    console.log(
      `| ${workers} | ${normal.listsPerBuild.toFixed(2)} | ${f((c) => c.listsPerBuild.toFixed(2))} | ${f((c) => c.eventsAfter.toFixed(1))} | ${f((c) => kb(c.eventBytesAfter))} | ${f((c) => c.eventsBefore.toFixed(1))} | ${kb(normal.podBytes)} | ${normal.seconds.toFixed(1)}, ${f((c) => c.seconds.toFixed(1))} |`,
    );
  }
  const first = rows[0];
  const last = rows.at(-1);
  if (first && last && last !== first) {
    const growth = (a: number, b: number): string => `${(b / a).toFixed(2)}x`;
    const n = (row: Row): Cost => row.normal;
    console.log(
      `\nfrom W=${first.workers} to W=${last.workers}: tracking bytes per normal build grow ${growth(n(first).podBytes + n(first).eventBytesBefore, n(last).podBytes + n(last).eventBytesBefore)} before, ${growth(n(first).podBytes + n(first).eventBytesAfter, n(last).podBytes + n(last).eventBytesAfter)} after (target: flat)`,
    );
  }
}
