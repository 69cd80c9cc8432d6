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
 *   (nanosecond stamps), summed (steps run one after another), each from no earlier than the
 *   worker's report of its step `running` at the server: Berth starts a step's container ahead and
 *   holds it until the step runs (the runtime's heldStart), and the wait is not the step's; a
 *   worker that reports `running` before it creates the container (vela-worker's PlanStep) is not
 *   clipped. The unclipped sum is printed beside it.
 *
 * The reference: with BENCH_VELA_WORKER_BIN (a go-vela/worker `cmd/vela-worker` binary the caller
 * built; the bench never builds it) the same builds run through it too, configured by the same
 * server, secret, queue route and Docker engine (worker-daemon.ts velaWorkerEnv), and the ratio is
 * printed from the same run; BENCH_ROUNDS (1) rounds of BENCH_BUILDS builds per worker, the order
 * alternating each round. Without it, VELA_WORKER_OVERHEAD_MS (vela-worker's median measured on
 * the same machine) gives the ratio. Prints the median of the builds per worker.
 * Goal: ≤ vela-worker's.
 *
 *   BENCH_VELA_WORKER_BIN=/path/to/vela-worker BENCH_ROUNDS=2 pnpm --filter @berth/bench bench:build-overhead
 */
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { VelaSim } from '@berth/vela-sim';
import { median } from './docker-common.ts';
import { type BenchWorker, runOneBuild, startWorker, waitUntilFirstPop, waitUntilPopping, type WorkerForm, workerForms } from './worker-daemon.ts';

/** A form's name in BENCH_FORMS. */
const formName = (f: WorkerForm): string => (f.kind === 'command' ? 'command' : f.kind);

type Row = { total: number; steps: number; unclipped: number; overhead: number };
type Timeline = Array<{ label: string; ms: number }>;

const loadavg = (): string =>
  os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

const BUILDS = Number(process.env.BENCH_BUILDS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
const REFERENCE = process.env.VELA_WORKER_OVERHEAD_MS === undefined ? undefined : Number(process.env.VELA_WORKER_OVERHEAD_MS);

/**
 * The summed `start` → `die` time of the containers whose name holds `repo`, from the engine's
 * events between `since` and now (ms since the epoch); `clipped` starts each no earlier than
 * `notBefore` of the step whose name ends the container's name (`step_<org>_<repo>_<n>_<name>`).
 */
function containerRunMs(repo: string, since: number, notBefore: Map<string, number>): { ms: number; clipped: number; containers: number } {
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
  const started = new Map<string, { at: number; name: string }>();
  let ms = 0;
  let clipped = 0;
  let containers = 0;
  for (const line of out.stdout.split('\n')) {
    if (line.trim() === '') continue;
    const e = JSON.parse(line) as { Action: string; id: string; timeNano: number; Actor: { Attributes: { name?: string } } };
    if (!e.Actor.Attributes.name?.includes(repo)) continue;
    const name = e.Actor.Attributes.name;
    if (e.Action === 'start') started.set(e.id, { at: e.timeNano / 1e6, name });
    else if (started.has(e.id)) {
      const start = started.get(e.id)!;
      const from = [...notBefore].find(([step]) => start.name.endsWith(`_${step}`))?.[1] ?? start.at;
      ms += e.timeNano / 1e6 - start.at;
      clipped += e.timeNano / 1e6 - Math.max(start.at, from);
      containers += 1;
    }
  }
  return { ms, clipped, containers };
}

/** The worker's calls to vela-sim for one build (and its worker record) from the pop to the final status, as offsets from the pop. */
function timeline(sim: VelaSim, repo: string, from: number, to: number): Timeline {
  return sim.calls
    .filter((c) => c.at >= from && c.at <= to && (c.path.includes(`/${repo}/`) || c.path.startsWith('/api/v1/workers/')))
    .map((c) => {
      const status = c.bodyStatus;
      const where = c.path.replace(`/api/v1/repos/bench/${repo}/builds/1`, 'build').replace(/^\/api\/v1\/workers\/[^/]+/, 'worker');
      return { label: `${c.method} ${where}${status ? ` ${status}` : ''}`, ms: c.at - from };
    });
}

/** Each kind of call (its first of a build) at its median offset from the pop across the builds, in that order. */
function printTimeline(timelines: Timeline[]): void {
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
  `build overhead: ${BUILDS} sequential builds of two steps per worker and round, ${ROUNDS} round(s), on vela-sim, Redis and Docker; load ${loadavg()} on ${os.cpus().length} CPUs`,
);
const wanted = (process.env.BENCH_FORMS ?? 'command,vela-worker').split(',').map((f) => f.trim());
// In BENCH_FORMS' order (the first runs first in odd rounds).
const forms = workerForms(wanted.join(',')).sort((a, b) => wanted.indexOf(formName(a)) - wanted.indexOf(formName(b)));
if (process.env.BENCH_VELA_WORKER_BIN === undefined && REFERENCE === undefined)
  console.log(`(no vela-worker to compare with: set BENCH_VELA_WORKER_BIN to a go-vela/worker binary, or VELA_WORKER_OVERHEAD_MS to its measured median)`);
const results = new Map<WorkerForm, { rows: Row[]; timelines: Timeline[]; loads: string[] }>(forms.map((f) => [f, { rows: [], timelines: [], loads: [] }]));
const sim = await VelaSim.start();
try {
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate the order each round, so that neither worker always runs on the busier side.
    for (const form of round % 2 === 0 ? forms : [...forms].reverse()) {
      const into = results.get(form)!;
      into.loads.push(loadavg());
      let worker: BenchWorker | undefined;
      try {
        worker = await startWorker(sim, form);
        await waitUntilFirstPop(sim, worker, form);
        const rows: Row[] = [];
        for (let i = 0; i < BUILDS; i++) {
          const since = performance.timeOrigin + performance.now();
          const b = await runOneBuild(sim, worker, 'ovh');
          if (b.status !== 'success')
            throw new Error(
              `${form.label}: build ${b.id} ended ${b.status} (${sim.builds.get(b.id)?.error ?? 'no error reported'}): ${worker.log().slice(-800)}`,
            );
          // Each step's first `running` report at the server.
          const running = new Map<string, number>();
          for (const st of sim.stepsOf(b.id)) {
            const put = sim
              .callsTo('PUT', `/api/v1/repos/bench/${b.repo}/builds/1/steps/${st.number}`)
              .find((c) => c.status === 200 && c.bodyStatus === 'running');
            if (st.name && put) running.set(st.name, put.at);
          }
          const steps = containerRunMs(b.repo, b.enqueuedAt, running);
          if (steps.containers !== 2) throw new Error(`build ${b.id}: expected 2 step containers in the engine's events, found ${steps.containers}`);
          const total = b.finalAt - b.enqueuedAt;
          rows.push({ total, steps: steps.clipped, unclipped: steps.ms, overhead: total - steps.clipped });
          into.timelines.push(timeline(sim, b.repo, b.enqueuedAt, b.finalAt));
          await waitUntilPopping(sim, since);
        }
        into.rows.push(...rows);
        console.log(`round ${round + 1}, ${form.label} (load ${into.loads.at(-1)}): overhead per build ${rows.map((r) => r.overhead.toFixed(0)).join(' ')} ms`);
      } finally {
        await worker?.stop();
      }
    }
  }
} finally {
  await sim.close();
}
const overheads = new Map<WorkerForm, { overhead: number; total: number; steps: number }>();
for (const [form, { rows, timelines, loads }] of results) {
  const m = {
    overhead: median(rows.map((r) => r.overhead)),
    total: median(rows.map((r) => r.total)),
    steps: median(rows.map((r) => r.steps)),
    unclipped: median(rows.map((r) => r.unclipped)),
  };
  overheads.set(form, m);
  console.log(
    `\n${form.label}: pop → final status ${m.total.toFixed(0)} ms, steps' own run time ${m.steps.toFixed(0)} ms (containers' start → die ${m.unclipped.toFixed(0)} ms), ` +
      `overhead ${m.overhead.toFixed(0)} ms (median of ${rows.length}; load at its starts ${loads.join(', ')})`,
  );
  printTimeline(timelines);
}
const vela = [...overheads].find(([f]) => f.kind === 'vela-worker');
const reference = vela
  ? { ms: vela[1].overhead, what: `${vela[0].label}, same run` }
  : REFERENCE === undefined
    ? undefined
    : { ms: REFERENCE, what: 'VELA_WORKER_OVERHEAD_MS' };
for (const [form, m] of overheads) {
  if (form.kind === 'vela-worker') continue;
  console.log(
    reference === undefined
      ? `${form.label}: goal ≤ vela-worker's overhead (set BENCH_VELA_WORKER_BIN or VELA_WORKER_OVERHEAD_MS to print the ratio)`
      : `${form.label}: overhead ${m.overhead.toFixed(0)} ms vs vela-worker ${reference.ms.toFixed(0)} ms (${reference.what}), ratio ${(m.overhead / reference.ms).toFixed(2)} (goal ≤ 1.00: ${m.overhead <= reference.ms ? 'met' : 'NOT met'})`,
  );
  if (vela)
    console.log(
      `${form.label}: pop → final status ${m.total.toFixed(0)} ms vs vela-worker ${vela[1].total.toFixed(0)} ms, ratio ${(m.total / vela[1].total).toFixed(2)} (the same two echo steps)`,
    );
}
