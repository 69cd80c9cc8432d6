/**
 * The worker's memory as shipped (issue 28 item 3): `berth start` (the command of a checkout after
 * the README's set-up and `pnpm build`; from the sources too when that differs) and the worker
 * image, registered with vela-sim on a real Redis, running BENCH_BUILDS (5) sequential builds of
 * two quick steps on the real Docker engine.
 *
 * - idle: the median RSS (VmRSS) over BENCH_IDLE_MS (5 s) once /ready answers, after
 *   BENCH_SETTLE_MS (3 s) for start-up to settle; again after the builds.
 * - peak: VmHWM of the process at the end (start-up and the builds).
 *
 * - CPU over the builds: the worker's user and system time from the first build's enqueue to
 *   its return to the queue after the last (what a change of V8 settings costs in speed).
 *
 * Goals: idle ≤ 60 MB, peak ≤ 80 MB. Reference: a bare `node -e` idling (printed).
 *
 *   pnpm --filter @berth/bench bench:worker-memory     (BENCH_FORMS=command,unit,source,image; also maglev, turbofan)
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { VelaSim } from '@berth/vela-sim';
import { median } from './docker-common.ts';
import { type BenchWorker, cpuMsOf, memoryOf, runOneBuild, startWorker, waitUntilPopping, workerForms } from './worker-daemon.ts';

const BUILDS = Number(process.env.BENCH_BUILDS ?? 5);
const IDLE_MS = Number(process.env.BENCH_IDLE_MS ?? 5000);
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 3000);
const IDLE_GOAL = 60;
const PEAK_GOAL = 80;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function idleRss(pid: number): Promise<number> {
  await sleep(SETTLE_MS);
  const samples: number[] = [];
  const until = performance.now() + IDLE_MS;
  while (performance.now() < until) {
    samples.push(memoryOf(pid).rssMb);
    await sleep(250);
  }
  return median(samples);
}

/**
 * Where a process's resident memory is, in MB: pages of the `node` binary (its code, the embedded
 * JavaScript of Node's own modules, ICU data, OpenSSL), anonymous memory (V8's heap, malloc), and
 * the rest (shared libraries, …).
 */
function residentParts(pid: number): { binary: number; anonymous: number; other: number } {
  const parts = { binary: 0, anonymous: 0, other: 0 };
  let mapping = '';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (header) mapping = header[1] ?? '';
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (!rss) continue;
    const kb = Number(rss[1]) / 1024;
    if (/\/node$/.test(mapping)) parts.binary += kb;
    else if (mapping === '' || mapping === '[heap]' || mapping.startsWith('[anon')) parts.anonymous += kb;
    else parts.other += kb;
  }
  return parts;
}

const partsText = (p: { binary: number; anonymous: number; other: number }) =>
  `node binary ${p.binary.toFixed(0)} MB, anonymous ${p.anonymous.toFixed(0)} MB, other ${p.other.toFixed(0)} MB`;

let bareParts: ReturnType<typeof residentParts> | undefined;

/** A bare Node process idling, for reference. */
async function bareNode(): Promise<number> {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  try {
    const idle = await idleRss(child.pid!);
    bareParts = residentParts(child.pid!);
    return idle;
  } finally {
    child.kill();
  }
}

console.log(
  `worker memory: ${BUILDS} sequential builds of two steps on vela-sim, Redis and Docker; load ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')} on ${os.cpus().length} CPUs`,
);
console.log(`${'bare node (reference)'.padEnd(34)} idle ${(await bareNode()).toFixed(0)} MB (${partsText(bareParts!)})`);
const sim = await VelaSim.start();
const results: Array<{ label: string; judged: boolean; idle: number; after: number; peak: number }> = [];
try {
  for (const form of workerForms()) {
    let worker: BenchWorker | undefined;
    try {
      worker = await startWorker(sim, form);
      const atReady = memoryOf(worker.pid).hwmMb;
      const idle = await idleRss(worker.pid);
      const cpuBefore = cpuMsOf(worker.pid);
      for (let i = 0; i < BUILDS; i++) {
        const since = performance.timeOrigin + performance.now();
        const b = await runOneBuild(sim, worker, 'mem');
        if (b.status !== 'success') throw new Error(`${form.label}: build ${b.id} ended ${b.status}: ${worker.log().slice(-800)}`);
        await waitUntilPopping(sim, since);
      }
      const buildsCpuMs = cpuMsOf(worker.pid) - cpuBefore;
      const after = await idleRss(worker.pid);
      const parts = residentParts(worker.pid);
      const peak = memoryOf(worker.pid).hwmMb;
      // The worker as shipped is judged: the compiled command (as is, and as the systemd unit runs it) and the image.
      const judged = form.kind === 'image' || (form.kind === 'command' && form.judged !== false);
      results.push({ label: form.label, judged, idle, after, peak });
      console.log(
        `${form.label.padEnd(34)} idle ${idle.toFixed(1)} MB, after the builds ${after.toFixed(1)} MB, peak ${peak.toFixed(1)} MB (${atReady.toFixed(1)} MB of it by /ready); CPU over the builds ${buildsCpuMs} ms; idle after the builds: ${partsText(parts)}`,
      );
    } finally {
      await worker?.stop();
    }
  }
} finally {
  await sim.close();
}
const met = (ok: boolean) => (ok ? 'met' : 'NOT met');
for (const r of results) {
  const idle = Math.max(r.idle, r.after);
  if (!r.judged) {
    console.log(`${r.label}: idle ${idle.toFixed(1)} MB, peak ${r.peak.toFixed(1)} MB (for comparison, not judged: not the worker as shipped)`);
    continue;
  }
  console.log(
    `${r.label}: idle ${idle.toFixed(1)} MB (goal ≤ ${IDLE_GOAL} MB, ratio ${(idle / IDLE_GOAL).toFixed(2)}: ${met(idle <= IDLE_GOAL)}), ` +
      `peak ${r.peak.toFixed(1)} MB (goal ≤ ${PEAK_GOAL} MB, ratio ${(r.peak / PEAK_GOAL).toFixed(2)}: ${met(r.peak <= PEAK_GOAL)})`,
  );
}
