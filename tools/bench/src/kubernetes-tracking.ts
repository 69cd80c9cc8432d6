/**
 * Kubernetes runtime: API requests per build and watches open, from kube-sim's counters, for B
 * concurrent builds of S tiny steps, in three tracker modes:
 *
 * - `worker`    one pod watch and one events watch per worker (the runtime's design);
 * - `build`     one informer pair per build (Vela's design);
 * - `container` one pod watch per running container (the design the seed replaced).
 *
 * Each step is runContainer + waitContainer (logs are not read: they cost the same in every mode).
 * Every step is a real container start in kube-sim's Docker, so the full grid (B ∈ {1,5,20} ×
 * S ∈ {1,10,50}) takes about 35 minutes on a 2-core machine; by default only cells with
 * B×S ≤ BENCH_MAX_STEPS (default 50) run. BENCH_FULL=1 runs every cell; BENCH_B / BENCH_S (comma
 * lists) pick others.
 */
import { background, withTimeout } from '@berth/context';
import { startKubeSim, type CountersSnapshot } from '@berth/kube-sim';
import { conformanceBuild, conformanceStep, setupBuildResources, teardownBuild } from '@berth/runtime-conformance';
import { createKubernetesRuntime, type TrackerStrategy } from '@berth/runtime-kubernetes';

const BUSYBOX = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';
const PAUSE = process.env.BERTH_PAUSE_IMAGE ?? 'berth/pause:1';
const list = (text: string | undefined, fallback: number[]): number[] => (text ? text.split(',').map(Number) : fallback);
const BUILDS = list(process.env.BENCH_B, [1, 5, 20]);
const STEPS = list(process.env.BENCH_S, [1, 10, 50]);
const MAX_STEPS = process.env.BENCH_FULL === '1' ? Infinity : Number(process.env.BENCH_MAX_STEPS ?? 50);
const MODES: TrackerStrategy[] = ['worker', 'build', 'container'];

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

const sim = await startKubeSim({ imagePullBackoff: { initialMs: 200, maxMs: 1_000 } });
const cells: Cell[] = [];
const skipped: string[] = [];
try {
  for (const builds of BUILDS) {
    for (const steps of STEPS) {
      if (builds * steps > MAX_STEPS) {
        skipped.push(`B=${builds} S=${steps}`);
        continue;
      }
      for (const mode of MODES) cells.push(await measure(mode, builds, steps));
    }
  }
} finally {
  await sim.close();
}

console.log('\nKubernetes runtime: API requests per build and watches, by tracker mode (kube-sim counters; logs not read)\n');
console.log('| mode | B | S | requests / build | pod GET+LIST / build | watches opened | max watches open | seconds |');
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const c of cells) {
  console.log(`| ${c.mode} | ${c.builds} | ${c.steps} | ${c.requestsPerBuild.toFixed(1)} | ${c.podGetListPerBuild.toFixed(1)} | ${c.watchesOpened} | ${c.maxOpenWatches} | ${c.seconds.toFixed(1)} |`);
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
if (skipped.length > 0) console.log(`\nnot run (B×S > ${MAX_STEPS}; BENCH_FULL=1 runs them): ${skipped.join(', ')}`);
const target = cells.filter((c) => c.mode === 'worker').every((c) => c.maxOpenWatches <= 2 && c.podGetListPerBuild === 0);
console.log(`\ntarget (worker mode: at most 1 pods watch + 1 events watch open, no per-step pod GET or LIST): ${target ? 'met' : 'NOT met'}`);

function ratio(a: number | undefined, b: number): string {
  return a === undefined ? '-' : `${(a / b).toFixed(2)}x`;
}

async function measure(mode: TrackerStrategy, builds: number, steps: number): Promise<Cell> {
  const [ctx, cancel] = withTimeout(background(), 3_600_000);
  const runtime = await createKubernetesRuntime(ctx, { workerId: `bench-${mode}-${builds}-${steps}` }, { kubeconfig: sim.kubeconfig, pauseImage: PAUSE, trackerStrategy: mode, pendingTimeoutMs: 1_800_000 });
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
    console.error(`[kubernetes-tracking] ${mode} B=${builds} S=${steps}: ${cell.requestsPerBuild.toFixed(1)} requests/build, max ${cell.maxOpenWatches} watches, ${seconds.toFixed(1)} s`);
    return cell;
  } finally {
    await runtime.reap(background(), runtime.config.workerId).catch(() => undefined);
    await runtime.close();
    cancel();
  }
}
