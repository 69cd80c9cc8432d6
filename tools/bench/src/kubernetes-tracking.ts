/**
 * Kubernetes runtime: API requests per build and watches open, from kube-sim's counters, for B
 * concurrent builds of S tiny steps, in three tracker modes:
 *
 * - `worker`    one pod watch per worker, pod events listed by name when needed (the runtime's design);
 * - `build`     one informer pair per build (Vela's design);
 * - `container` one pod watch per running container (the design the seed replaced).
 *
 * Each step is runContainer + waitContainer (logs are not read: they cost the same in every mode).
 * Every step is a real container start in kube-sim's Docker, so the full grid (B ∈ {1,5,20} ×
 * S ∈ {1,10,50}) takes about 35 minutes on a 2-core machine; by default only cells with
 * B×S ≤ BENCH_MAX_STEPS (default 50) run. BENCH_FULL=1 runs every cell; BENCH_B / BENCH_S (comma
 * lists) pick others.
 *
 * Then watch reconnects per hour of an idle worker (worker mode) with the API server's bookmark
 * cadence (about one a minute: staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go,
 * defaultBookmarkFrequency), with client-node's 30 s inactivity timeout and with the runtime's
 * default: BENCH_IDLE_SECONDS (default 240) of idle per setting, 0 skips it. BENCH_RECONNECTS_ONLY=1
 * skips the grid.
 *
 * Then P1 and P2 on the real apiserver from its audit log (tracking-real.ts), beside kube-sim's
 * counters for the same builds (one worker-mode worker, one build of S steps, S in BENCH_REAL_S,
 * default 1,5,10), when BERTH_REAL_KUBECONFIG names the cluster of tools/kube-cluster; otherwise the
 * bench says how to get them. BENCH_REAL_ONLY=1 runs only these.
 */
import { background, withTimeout } from '@berth/context';
import { realCluster } from '@berth/kube-cluster';
import { startKubeSim, type CountersSnapshot } from '@berth/kube-sim';
import { conformanceBuild, conformanceStep, setupBuildResources, teardownBuild } from '@berth/runtime-conformance';
import { createKubernetesRuntime, type TrackerStrategy } from '@berth/runtime-kubernetes';
import { type ApiFigures, measureApi, printApiFigures } from './tracking-real.ts';

const BUSYBOX = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';
const PAUSE = process.env.BERTH_PAUSE_IMAGE ?? 'berth/pause:1';
const list = (text: string | undefined, fallback: number[]): number[] => (text ? text.split(',').map(Number) : fallback);
const BUILDS = list(process.env.BENCH_B, [1, 5, 20]);
const STEPS = list(process.env.BENCH_S, [1, 10, 50]);
const MAX_STEPS = process.env.BENCH_FULL === '1' ? Infinity : Number(process.env.BENCH_MAX_STEPS ?? 50);
const MODES: TrackerStrategy[] = ['worker', 'build', 'container'];
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 240);
const REAL_ONLY = process.env.BENCH_REAL_ONLY === '1';
const RECONNECTS_ONLY = process.env.BENCH_RECONNECTS_ONLY === '1' || REAL_ONLY;
const REAL_STEPS = list(process.env.BENCH_REAL_S, [1, 5, 10]);
const cluster = realCluster();

interface Cell {
  mode: TrackerStrategy;
  builds: number;
  steps: number;
  requestsPerBuild: number;
  podGetListPerBuild: number;
  watchesOpened: number;
  maxOpenWatches: number;
  seconds: number;
}

const sim = await startKubeSim({ imagePullBackoff: { initialMs: 200, maxMs: 1_000 }, bookmarkIntervalMs: 60_000 });
const cells: Cell[] = [];
const skipped: string[] = [];
const realPairs: { sim: ApiFigures; real: ApiFigures }[] = [];
const reconnects: { setting: string; seconds: number; watchesOpened: number; perHour: number }[] = [];
try {
  for (const builds of RECONNECTS_ONLY ? [] : BUILDS) {
    for (const steps of STEPS) {
      if (builds * steps > MAX_STEPS) {
        skipped.push(`B=${builds} S=${steps}`);
        continue;
      }
      for (const mode of MODES) cells.push(await measure(mode, builds, steps));
    }
  }
  if (IDLE_SECONDS > 0 && !REAL_ONLY) {
    reconnects.push(await idle('client-node default (30 s inactivity timeout)', 30_000));
    reconnects.push(await idle('runtime default (max(30 s, 3/4 of watchSilenceMs) = 90 s)', undefined));
  }
  const realKubeconfig = cluster.kubeconfig;
  for (const steps of REAL_STEPS) {
    if (realKubeconfig === undefined) break;
    const pair = { sim: await measureApi({ kind: 'sim', sim }, steps), real: await measureApi({ kind: 'real', kubeconfig: realKubeconfig }, steps) };
    console.error(`[kubernetes-tracking] real apiserver S=${steps}: ${pair.real.requests} requests (kube-sim ${pair.sim.requests})`);
    realPairs.push(pair);
  }
} finally {
  await sim.close();
}

console.log('\nKubernetes runtime: API requests per build and watches, by tracker mode (kube-sim counters; logs not read)\n');
console.log('| mode | B | S | requests / build | pod GET+LIST / build | watches opened | max watches open | seconds |');
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const c of cells) {
  console.log(
    `| ${c.mode} | ${c.builds} | ${c.steps} | ${c.requestsPerBuild.toFixed(1)} | ${c.podGetListPerBuild.toFixed(1)} | ${c.watchesOpened} | ${c.maxOpenWatches} | ${c.seconds.toFixed(1)} |`,
  );
}
console.log('\nratios of requests per build against the worker mode (higher = the worker mode saves more):\n');
console.log('| B | S | build / worker | container / worker | max watches: worker, build, container |');
console.log('| ---: | ---: | ---: | ---: | --- |');
for (const worker of cells.filter((c) => c.mode === 'worker')) {
  const other = (mode: TrackerStrategy): Cell | undefined => cells.find((c) => c.mode === mode && c.builds === worker.builds && c.steps === worker.steps);
  const build = other('build');
  const container = other('container');
  console.log(
    `| ${worker.builds} | ${worker.steps} | ${ratio(build?.requestsPerBuild, worker.requestsPerBuild)} | ${ratio(container?.requestsPerBuild, worker.requestsPerBuild)} | ${worker.maxOpenWatches}, ${build?.maxOpenWatches ?? '-'}, ${container?.maxOpenWatches ?? '-'} |`,
  );
}
if (reconnects.length > 0) {
  console.log(`\nwatch reconnects of an idle worker (its pods watch), bookmarks every 60 s, ${IDLE_SECONDS} s per setting\n`);
  console.log('| inactivity timeout | watches opened after the first | reconnects / hour |');
  console.log('| --- | ---: | ---: |');
  for (const r of reconnects) console.log(`| ${r.setting} | ${r.watchesOpened} | ${r.perHour.toFixed(0)} |`);
}
if (realPairs.length > 0) printApiFigures(realPairs);
else console.log(`\nreal apiserver figures (P1, P2 from the audit log) not measured: ${cluster.skip ?? 'BENCH_REAL_S is empty'}`);
if (skipped.length > 0) console.log(`\nnot run (B×S > ${MAX_STEPS}; BENCH_FULL=1 runs them): ${skipped.join(', ')}`);
const workerCells = cells.filter((c) => c.mode === 'worker');
const target = workerCells.length > 0 && workerCells.every((c) => c.maxOpenWatches <= 1 && c.podGetListPerBuild === 0);
if (workerCells.length > 0)
  console.log(`\ntarget (worker mode: at most 1 pods watch open, no events watch, no per-step pod GET or LIST): ${target ? 'met' : 'NOT met'}`);

function ratio(a: number | undefined, b: number): string {
  return a === undefined ? '-' : `${(a / b).toFixed(2)}x`;
}

async function measure(mode: TrackerStrategy, builds: number, steps: number): Promise<Cell> {
  const [ctx, cancel] = withTimeout(background(), 3_600_000);
  const runtime = await createKubernetesRuntime(
    ctx,
    { workerId: `bench-${mode}-${builds}-${steps}` },
    { kubeconfig: sim.kubeconfig, pauseImage: PAUSE, trackerStrategy: mode, pendingTimeoutMs: 1_800_000 },
  );
  try {
    sim.counters.reset();
    const started = performance.now();
    await Promise.all(
      Array.from({ length: builds }, async () => {
        const build = conformanceBuild();
        build.steps = Array.from({ length: steps }, (_, i) => conformanceStep(build, `s${i}`, i + 1, { image: BUSYBOX, commands: ['true'] }));
        await setupBuildResources(ctx, runtime, build);
        for (const step of build.steps) {
          await runtime.runContainer(ctx, step, build);
          const exit = await runtime.waitContainer(ctx, step);
          if (exit.exitCode !== 0) throw new Error(`step ${step.name} exited ${exit.exitCode}`);
        }
        await teardownBuild(ctx, runtime, build);
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    const snapshot: CountersSnapshot = sim.counters.snapshot();
    const podGetList = (snapshot.byVerbResource['get pods'] ?? 0) + (snapshot.byVerbResource['list pods'] ?? 0);
    const cell = {
      mode,
      builds,
      steps,
      requestsPerBuild: snapshot.requestsTotal / builds,
      podGetListPerBuild: podGetList / builds,
      watchesOpened: snapshot.watches.opened,
      maxOpenWatches: snapshot.watches.maxOpen,
      seconds,
    };
    console.error(
      `[kubernetes-tracking] ${mode} B=${builds} S=${steps}: ${cell.requestsPerBuild.toFixed(1)} requests/build, max ${cell.maxOpenWatches} watches, ${seconds.toFixed(1)} s`,
    );
    return cell;
  } finally {
    await runtime.reap(background(), runtime.config.workerId).catch(() => undefined);
    await runtime.close();
    cancel();
  }
}

/** Watch reconnects of an idle worker-mode runtime over IDLE_SECONDS, scaled to one hour. */
async function idle(setting: string, inactivityMs: number | undefined): Promise<{ setting: string; seconds: number; watchesOpened: number; perHour: number }> {
  const [ctx, cancel] = withTimeout(background(), 60_000);
  const runtime = await createKubernetesRuntime(
    ctx,
    { workerId: `bench-idle-${inactivityMs ?? 'default'}` },
    {
      kubeconfig: sim.kubeconfig,
      pauseImage: PAUSE,
      ...(inactivityMs === undefined ? {} : { watchInactivityTimeoutMs: inactivityMs }),
    },
  );
  cancel();
  try {
    // The first list and watch of each informer happen in create(); let the watches open, then count.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    sim.counters.reset();
    await new Promise((resolve) => setTimeout(resolve, IDLE_SECONDS * 1000));
    const watchesOpened = sim.counters.snapshot().watches.opened;
    const perHour = (watchesOpened * 3600) / IDLE_SECONDS;
    console.error(`[kubernetes-tracking] idle, ${setting}: ${watchesOpened} watches opened in ${IDLE_SECONDS} s, ${perHour.toFixed(0)} / hour`);
    return { setting, seconds: IDLE_SECONDS, watchesOpened, perHour };
  } finally {
    await runtime.close();
  }
}
