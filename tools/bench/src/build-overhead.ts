/**
 * Build overhead (issue 28 item 4): per build, the time from the queue pop to the final status
 * at the server, minus the steps' own run time. A `berth start` worker (the forms of
 * worker-daemon.ts; BENCH_FORMS, default the command as it runs by default) on vela-sim with a real
 * Redis runs BENCH_BUILDS (10) sequential builds of two quick steps on the real Docker engine.
 *
 * - pop: the worker waits on the queue (BLPOP) when the build is pushed, so the pop is when the
 *   push returns (the bench waits for the worker's GET of itself after the previous build, then
 *   200 ms, before pushing).
 * - final status: the arrival at vela-sim of the build PUT that set it.
 * - the steps' own run time: each step container's `start` to `die` in the engine's event stream
 *   (nanosecond stamps), summed (steps run one after another).
 *
 * Prints the median of the builds and, with VELA_WORKER_OVERHEAD_MS (vela-worker's median on the
 * same machine, measured by hand: no upstream binary is built here), the ratio to it.
 * Goal: ≤ vela-worker's.
 *
 *   pnpm --filter @berth/bench bench:build-overhead
 */
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { VelaSim } from '@berth/vela-sim';
import { median } from './docker-common.ts';
import { type BenchWorker, runOneBuild, startWorker, waitUntilPopping, workerForms } from './worker-daemon.ts';

const BUILDS = Number(process.env.BENCH_BUILDS ?? 10);
const REFERENCE = process.env.VELA_WORKER_OVERHEAD_MS === undefined ? undefined : Number(process.env.VELA_WORKER_OVERHEAD_MS);

/** The summed `start` → `die` time of the containers whose name holds `repo`, from the engine's events between `since` and now (ms since the epoch). */
function containerRunMs(repo: string, since: number): { ms: number; containers: number } {
  const out = spawnSync(
    'docker',
    [
      'events',
      '--since',
      (since / 1000 - 1).toFixed(3),
      '--until',
      (Date.now() / 1000 + 1).toFixed(3),
      '--filter',
      'type=container',
      '--filter',
      'event=start',
      '--filter',
      'event=die',
      '--format',
      '{{json .}}',
    ],
    { encoding: 'utf8' },
  );
  if (out.status !== 0) throw new Error(`docker events failed: ${out.stderr}`);
  const started = new Map<string, number>();
  let ms = 0;
  let containers = 0;
  for (const line of out.stdout.split('\n')) {
    if (line.trim() === '') continue;
    const e = JSON.parse(line) as { Action: string; id: string; timeNano: number; Actor: { Attributes: { name?: string } } };
    if (!e.Actor.Attributes.name?.includes(repo)) continue;
    if (e.Action === 'start') started.set(e.id, e.timeNano / 1e6);
    else if (started.has(e.id)) {
      ms += e.timeNano / 1e6 - started.get(e.id)!;
      containers += 1;
    }
  }
  return { ms, containers };
}

/** The worker's calls to vela-sim for one build (and its worker record) from the pop to the final status, as offsets from the pop. */
function timeline(sim: VelaSim, repo: string, from: number, to: number): Array<{ label: string; ms: number }> {
  return sim.calls
    .filter((c) => c.at >= from && c.at <= to && (c.path.includes(`/${repo}/`) || c.path.startsWith('/api/v1/workers/')))
    .map((c) => {
      const status = /"status":"(\w+)"/.exec(c.summary)?.[1];
      const where = c.path.replace(`/api/v1/repos/bench/${repo}/builds/1`, 'build').replace(/^\/api\/v1\/workers\/[^/]+/, 'worker');
      return { label: `${c.method} ${where}${status ? ` ${status}` : ''}`, ms: c.at - from };
    });
}

/** Each kind of call (its first of a build) at its median offset from the pop across the builds, in that order. */
function printTimeline(timelines: Array<Array<{ label: string; ms: number }>>): void {
  const offsets = new Map<string, number[]>();
  for (const t of timelines) {
    const seen = new Set<string>();
    for (const c of t) {
      if (seen.has(c.label)) continue;
      seen.add(c.label);
      offsets.set(c.label, [...(offsets.get(c.label) ?? []), c.ms]);
    }
  }
  const rows = [...offsets].map(([label, ms]) => ({ label, ms: median(ms), builds: ms.length })).sort((a, b) => a.ms - b.ms);
  console.log(`  calls to the server after the pop (each kind's first call, median ms of the builds):`);
  let last = 0;
  for (const r of rows) {
    console.log(
      `  ${r.ms.toFixed(0).padStart(6)} ms (+${(r.ms - last).toFixed(0).padStart(4)})  ${r.label}${r.builds < timelines.length ? ` (${r.builds} builds)` : ''}`,
    );
    last = r.ms;
  }
}

console.log(
  `build overhead: ${BUILDS} sequential builds of two steps on vela-sim, Redis and Docker; load ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')} on ${os.cpus().length} CPUs`,
);
const sim = await VelaSim.start();
try {
  for (const form of workerForms(process.env.BENCH_FORMS ?? 'command')) {
    let worker: BenchWorker | undefined;
    try {
      worker = await startWorker(sim, form);
      await waitUntilPopping(sim, 0);
      const rows: Array<{ total: number; steps: number; overhead: number }> = [];
      const timelines: Array<Array<{ label: string; ms: number }>> = [];
      for (let i = 0; i < BUILDS; i++) {
        const since = performance.timeOrigin + performance.now();
        const b = await runOneBuild(sim, worker, 'ovh');
        if (b.status !== 'success') throw new Error(`${form.label}: build ${b.id} ended ${b.status}: ${worker.log().slice(-800)}`);
        const steps = containerRunMs(b.repo, b.enqueuedAt);
        if (steps.containers !== 2) throw new Error(`build ${b.id}: expected 2 step containers in the engine's events, found ${steps.containers}`);
        const total = b.finalAt - b.enqueuedAt;
        rows.push({ total, steps: steps.ms, overhead: total - steps.ms });
        timelines.push(timeline(sim, b.repo, b.enqueuedAt, b.finalAt));
        await waitUntilPopping(sim, since);
      }
      const overhead = median(rows.map((r) => r.overhead));
      console.log(
        `${form.label}: pop → final status ${median(rows.map((r) => r.total)).toFixed(0)} ms, steps' own run time ${median(rows.map((r) => r.steps)).toFixed(0)} ms, ` +
          `overhead ${overhead.toFixed(0)} ms (median of ${BUILDS}; per build: ${rows.map((r) => r.overhead.toFixed(0)).join(' ')})`,
      );
      printTimeline(timelines);
      console.log(
        REFERENCE === undefined
          ? `${form.label}: goal ≤ vela-worker's overhead (set VELA_WORKER_OVERHEAD_MS to print the ratio)`
          : `${form.label}: overhead ${overhead.toFixed(0)} ms vs vela-worker ${REFERENCE} ms, ratio ${(overhead / REFERENCE).toFixed(2)} (goal ≤ 1.00: ${overhead <= REFERENCE ? 'met' : 'NOT met'})`,
      );
    } finally {
      await worker?.stop();
    }
  }
} finally {
  await sim.close();
}
