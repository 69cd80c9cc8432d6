/**
 * Benchmark: 200 short builds, one after the other, through the executor on the dummy runtime
 * (services, stages, secrets, a failure, a cancel, a timeout among them). Compares the process's
 * active resources (`process.getActiveResourcesInfo`) and its heap after GC, before and after.
 * Targets: no extra resources; heap growth < 5 MB.
 *
 * Run with `--expose-gc` (the script does). Env: BENCH_BUILDS (default 200).
 */
import { background, withCancel } from '@berth/context';
import { nullReporter, runBuild } from '@berth/executor';
import { emptyBuild, emptyContainer, prepareBuild } from '@berth/pipeline';
import { DummyEngine, dummyRuntime } from '@berth/runtime-dummy';

const BUILDS = Number(process.env.BENCH_BUILDS ?? 200);
const MB = 1_000_000;
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with node --expose-gc');

const engine = new DummyEngine();
const runtime = await dummyRuntime({ engine }).create(background(), { workerId: 'bench-builds' });
const image = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';

function makeBuild(n: number) {
  const kind = n % 5;
  const step = (name: string, commands: string[]) =>
    emptyContainer({ name, image, pull: 'not_present', commands, secrets: [{ source: 'token', target: 'TOKEN' }] });
  return prepareBuild(
    emptyBuild({
      secrets: [{ name: 'token', value: `token-${n}-value`, key: '', engine: 'native', type: 'repo', origin: null, pull: 'build_start' }],
      services: [emptyContainer({ name: 'svc', image, pull: 'not_present', entrypoint: ['sh', '-c'], commands: ['while true; do echo up; sleep 0.01; done'] })],
      stages: [
        { name: 'one', needs: [], independent: false, environment: {}, steps: [step('a', ['seq 1 200', 'echo $TOKEN'])] },
        { name: 'two', needs: ['one'], independent: false, environment: {}, steps: [step('b', [kind === 1 ? 'exit 1' : kind >= 3 ? 'sleep 30' : 'echo ok'])] },
      ],
    }),
    { org: 'bench', repo: 'builds', number: n },
  );
}

async function once(n: number): Promise<string> {
  const kind = n % 5;
  const [ctx, cancel] = withCancel(background());
  const timer = kind === 3 ? setTimeout(() => cancel(), 30) : undefined;
  try {
    const result = await runBuild(ctx, { build: makeBuild(n), runtime, reporter: nullReporter, timeoutMs: kind === 4 ? 40 : 30_000, logStreamingGraceMs: 50 });
    return result.status;
  } finally {
    clearTimeout(timer);
    cancel();
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc?.();
  }
}

// Warm up (JIT, module-level caches), then measure.
await once(0);
await settle();
const resourcesBefore = process.getActiveResourcesInfo().sort();
const heapBefore = process.memoryUsage().heapUsed;
const statuses: Record<string, number> = {};
const started = performance.now();
for (let n = 1; n <= BUILDS; n++) {
  const status = await once(n);
  statuses[status] = (statuses[status] ?? 0) + 1;
}
const ms = performance.now() - started;
await settle();
const resourcesAfter = process.getActiveResourcesInfo().sort();
const heapAfter = process.memoryUsage().heapUsed;
const extra = [...resourcesAfter];
for (const r of resourcesBefore) {
  const i = extra.indexOf(r);
  if (i >= 0) extra.splice(i, 1);
}
const figures = {
  builds: BUILDS,
  statuses,
  msPerBuild: Math.round((ms / BUILDS) * 10) / 10,
  resourcesBefore,
  resourcesAfter,
  extraResources: extra,
  heapBeforeMb: Math.round((heapBefore / MB) * 10) / 10,
  heapAfterMb: Math.round((heapAfter / MB) * 10) / 10,
  heapGrowthMb: Math.round(((heapAfter - heapBefore) / MB) * 100) / 100,
  engineLeftovers: engine.containers.size + engine.networks.size + engine.volumes.size,
};
console.log(`executor builds: ${JSON.stringify(figures)}`);
console.log(
  `executor builds: ${BUILDS} builds (${Object.entries(statuses)
    .map(([s, c]) => `${c} ${s}`)
    .join(
      ', ',
    )}), ${figures.msPerBuild} ms each; extra active resources: ${extra.length === 0 ? 'none' : extra.join(', ')} (target: none); heap growth ${figures.heapGrowthMb} MB after GC (target < 5)`,
);
await runtime.close();
