/**
 * Benchmark: a 256 MiB step log through the executor's whole log path — Docker runtime's
 * tailContainer (the container's attach, live) → secret masker (10 secrets) → size cap → batches
 * → a reporter counting bytes — against the docker CLI reading the same log.
 *
 * Each of `BENCH_ROUNDS` rounds runs a new build whose step writes the log while the executor
 * streams it (streamBuild beside execBuild, as the worker runs a build; the executor's time
 * includes the container writing the log). Then, for comparison: `docker logs -f` following the
 * same writer from its start (the docker CLI on a live step's log file, as go-vela/worker tails a
 * step: issue 28's comparison, target ≥ 1.5×); `docker logs` on the finished log (the writer not
 * included); `docker run` in the foreground (the CLI on the attach); the writer alone with nobody
 * reading (which bounds any live reader); and the runtime's tail alone (which, the attach being
 * read, reads the engine's json-file log: the fallback path). It prints per round and as medians
 * the throughputs and ratios; the CPU time of each reader (this process; the docker CLI, a child)
 * and of dockerd while it served each (when it runs on this machine); and the peak RSS of this
 * process while the build runs (target ≤ 100 MB), on a heap settled as the worker's is when it
 * claims a build.
 *
 * `bench:executor-logs` runs the packages from source (type-stripped, as in development);
 * `bench:executor-logs:compiled` compiles this bench and runs the packages from their dist/
 * (`pnpm build` first), as the worker runs them.
 *
 * Env: BENCH_LOG_BYTES (default 268435456), BENCH_ROUNDS (default 3), DOCKER_HOST.
 */
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { spawn } from 'node:child_process';
import { background, type Context } from '@berth/context';
import { Executor, type Reporter, type Target } from '@berth/executor';
import { emptyBuild, emptyContainer, prepareBuild } from '@berth/pipeline';
import type { Runtime } from '@berth/runtime';
import { dockerRuntime } from '@berth/runtime-docker';
import { BUSYBOX, median, since, suffix } from './docker-common.ts';

const BYTES = Number(process.env.BENCH_LOG_BYTES ?? 256 * 1024 * 1024);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const MB = 1_000_000;
const TICK_MS = 10; // USER_HZ is 100 on Linux

/** A reporter that only counts what it receives. */
class CountingReporter implements Reporter {
  bytes = 0;
  appends = 0;
  closed = false;
  buildStatus(): Promise<void> {
    return Promise.resolve();
  }
  stepStatus(): Promise<void> {
    return Promise.resolve();
  }
  appendLog(_ctx: Context, target: Target, chunk: Uint8Array): Promise<void> {
    if (target.kind === 'step') {
      this.bytes += chunk.length;
      this.appends++;
    }
    return Promise.resolve();
  }
  closeLog(_ctx: Context, target: Target): Promise<void> {
    if (target.kind === 'step') this.closed = true;
    return Promise.resolve();
  }
}

/** CPU ms of a process from /proc/PID/stat: its own (utime + stime) and its reaped children's. */
function procCpuMs(pid: number | 'self'): { own: number; children: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const fields = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    // After the name: state(3) … utime(14) stime(15) cutime(16) cstime(17), 1-based in proc(5).
    const at = (field: number): number => fields[field - 3] ?? 0;
    return { own: (at(14) + at(15)) * TICK_MS, children: (at(16) + at(17)) * TICK_MS };
  } catch {
    return undefined;
  }
}

/** dockerd's pid when it runs on this machine (and this process may read /proc of it). */
function dockerdPid(): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'latin1').trim() === 'dockerd') return Number(entry);
    } catch {
      // Gone meanwhile.
    }
  }
  return undefined;
}
const DOCKERD = process.env.DOCKER_HOST ? undefined : dockerdPid();

interface Reading {
  ms: number;
  /** CPU of the reader: this process, or the docker CLI. */
  cpuMs: number;
  /** CPU of dockerd while it served the reading. */
  engineCpuMs: number | undefined;
}

/** Times `read`, with the CPU this process (or, with `child`, its children) and dockerd spent meanwhile. */
async function measure(read: () => Promise<void>, child = false): Promise<Reading> {
  const engineBefore = DOCKERD === undefined ? undefined : procCpuMs(DOCKERD)?.own;
  const selfBefore = procCpuMs('self');
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  await read();
  const ms = since(start);
  const cpu = process.cpuUsage(cpuBefore);
  const engineAfter = DOCKERD === undefined ? undefined : procCpuMs(DOCKERD)?.own;
  const cpuMs = child ? (procCpuMs('self')?.children ?? 0) - (selfBefore?.children ?? 0) : Math.round((cpu.user + cpu.system) / 1000);
  return { ms, cpuMs, engineCpuMs: engineBefore === undefined || engineAfter === undefined ? undefined : engineAfter - engineBefore };
}

/** `docker run` in the foreground (the CLI reads the container's attach) of the same writer, output to /dev/null. */
function viaCliRun(): Promise<void> {
  return cli(['run', '--rm', BUSYBOX, '/bin/sh', '-c', `yes '${line}' | head -c ${BYTES}`]);
}

/**
 * The same writer started detached, its log followed with `docker logs -f` from its start to its
 * end, output to /dev/null: the docker CLI reading a live step's log from the engine's log file,
 * as go-vela/worker's TailContainer does (ContainerLogs with Follow) — issue 28's comparison
 * ("18 s through `docker logs -f`"). Or, with `follow` false, the writer alone (`docker wait`):
 * how fast the container writes the log with nobody reading it, which bounds every live reader.
 */
async function viaCliLive(follow: boolean): Promise<void> {
  const name = `bench-logs-live-${suffix()}`;
  await cli(['run', '-d', '--name', name, BUSYBOX, '/bin/sh', '-c', `yes '${line}' | head -c ${BYTES}`]);
  try {
    await cli(follow ? ['logs', '-f', name] : ['wait', name]);
  } finally {
    await cli(['rm', '-f', name]);
  }
}

function viaCli(name: string): Promise<void> {
  return cli(['logs', name]);
}

function cli(args: string[]): Promise<void> {
  const devNull = openSync('/dev/null', 'w');
  return new Promise<void>((resolve, reject) => {
    const child = spawn('docker', args, { stdio: ['ignore', devNull, devNull] });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`docker ${args[0]} exited ${code}`))));
  }).finally(() => closeSync(devNull));
}

const secrets = Array.from({ length: 10 }, (_, i) => ({
  name: `secret${i}`,
  value: `bench-secret-${i}-${suffix()}${'x'.repeat(i * 4)}`,
  key: '',
  engine: 'native',
  type: 'repo',
  origin: null,
  pull: 'build_start',
}));
const line = 'x'.repeat(1023);

// The worker gives back what start-up left in V8's young generation once it is up and idle, and
// after each build (apps/worker/src/daemon/memory.ts): the same memory-reducing collection here,
// at the same points, so the figure is the log path's, not this process's module loading's.
const exposedGc = (globalThis as { gc?: (options: object) => void }).gc;
if (exposedGc === undefined) throw new Error('run with node --expose-gc (the package scripts do)');
const gc = exposedGc;

interface Round {
  executor: Reading;
  cli: Reading;
  /** `docker run` in the foreground: the CLI's own live path, for reference. */
  cliRun: Reading;
  /** `docker logs -f` on the same writer, followed from its start (writer included). */
  cliFollow: Reading;
  /** The writer alone, detached, nobody reading (`docker run -d` to `docker wait`). */
  writerAlone: Reading;
  tailOnly: Reading;
  ratio: number;
  /** cliFollow / executor. */
  followRatio: number;
  appends: number;
  rssBeforeMb: number;
  peakRssMb: number;
}

/** One build: its step writes the log; then the executor's path, `docker logs` and the bare tail read it. */
async function round(ctx: Context, runtime: Runtime, index: number): Promise<Round> {
  const build = prepareBuild(
    emptyBuild({
      secrets,
      steps: [emptyContainer({ name: 'writer', image: BUSYBOX, pull: 'never', entrypoint: ['/bin/sh', '-c'], commands: [`yes '${line}' | head -c ${BYTES}`] })],
    }),
    { org: 'bench', repo: `logs${suffix()}`, number: index + 1 },
  );
  const reporter = new CountingReporter();
  const executor = new Executor({ build, runtime, reporter, logs: { limits: { maxBytes: Infinity } } });
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  const step = executor.build.steps[0]!;
  try {
    await executor.createBuild(ctx);
    await executor.planBuild(ctx);
    await executor.assembleBuild(ctx);

    // The step runs while its log streams, as in the worker (streamBuild beside execBuild): the
    // executor's figure covers the container writing the log, the reading, masking and reporting;
    // then `docker logs` reads the same log, finished, from the engine's file.
    const rssBefore = process.memoryUsage.rss();
    let peakRss = rssBefore;
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage.rss())), 20);
    let executorReading: Reading;
    try {
      executorReading = await measure(async () => {
        const streaming = executor.streamBuild(ctx);
        await executor.execBuild(ctx);
        await streaming;
      });
    } finally {
      clearInterval(sampler);
      peakRss = Math.max(peakRss, process.memoryUsage.rss());
    }
    const cli = await measure(() => viaCli(step.id), true);
    const cliRun = await measure(() => viaCliRun(), true);
    const cliFollow = await measure(() => viaCliLive(true), true);
    const writerAlone = await measure(() => viaCliLive(false), true);
    // The log also holds the script's trace line (`$ yes …`), so at least BYTES arrive.
    if (!reporter.closed || reporter.bytes < BYTES) throw new Error(`the reporter received ${reporter.bytes} bytes, not ${BYTES}`);
    // The runtime's tail alone (no masking, no reporter), for reference: the attach was read by
    // the executor, so this one reads the engine's file (the fallback path).
    let rawBytes = 0;
    const tailOnly = await measure(async () => {
      for await (const chunk of await runtime.tailContainer(ctx, step)) rawBytes += (chunk as Buffer).length;
    });
    if (rawBytes < BYTES) throw new Error(`tailContainer gave ${rawBytes} bytes`);
    return {
      executor: executorReading,
      cli,
      cliRun,
      cliFollow,
      writerAlone,
      tailOnly,
      ratio: Math.round((cli.ms / executorReading.ms) * 1000) / 1000,
      followRatio: Math.round((cliFollow.ms / executorReading.ms) * 1000) / 1000,
      appends: reporter.appends,
      rssBeforeMb: Math.round(rssBefore / MB),
      peakRssMb: Math.round(peakRss / MB),
    };
  } finally {
    await executor.destroyBuild(ctx);
  }
}

const ctx = background();
const runtime = await dockerRuntime().create(ctx, { workerId: `bench-${suffix()}` });
const rounds: Round[] = [];
const mibps = (ms: number): number => Math.round((BYTES / 1024 / 1024 / (ms / 1000)) * 10) / 10;
const load = (): string =>
  os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');
try {
  for (let i = 0; i < ROUNDS; i++) {
    const result = await round(ctx, runtime, i);
    rounds.push(result);
    console.log(`round ${i + 1}/${ROUNDS}, load ${load()}: ${JSON.stringify(result)}`);
  }
} finally {
  await runtime.close();
}
const med = (pick: (r: Round) => number | undefined): number | undefined => {
  const values = rounds.map(pick).filter((v): v is number => v !== undefined);
  return values.length === 0 ? undefined : Math.round(median(values));
};
const packages = import.meta.resolve('@berth/executor').includes('/dist/') ? 'compiled (dist/)' : 'from source';
const engine = (value: number | undefined): string => (value === undefined ? 'n/a (dockerd not local)' : `${value} ms`);
console.log(
  [
    `executor log path, ${BYTES} bytes, ${ROUNDS} rounds, packages ${packages}, load ${load()}:`,
    `  executor ${mibps(med((r) => r.executor.ms) ?? 0)} MiB/s vs docker logs -f (followed from the writer's start) ${mibps(med((r) => r.cliFollow.ms) ?? 0)} MiB/s: ratio ${median(rounds.map((r) => r.followRatio))} (rounds ${rounds.map((r) => r.followRatio).join(', ')}; target >= 1.5)`,
    `  vs docker logs on the finished log (writer not included) ${mibps(med((r) => r.cli.ms) ?? 0)} MiB/s: ratio ${median(rounds.map((r) => r.ratio))} (rounds ${rounds.map((r) => r.ratio).join(', ')}); the writer alone, nobody reading: ${mibps(med((r) => r.writerAlone.ms) ?? 0)} MiB/s, so at most ${median(rounds.map((r) => Math.round((r.cli.ms / r.writerAlone.ms) * 1000) / 1000))} for any live reader`,
    `  for reference, docker run in the foreground (the CLI on the attach, writer included): ${mibps(med((r) => r.cliRun.ms) ?? 0)} MiB/s, executor / docker run ${median(rounds.map((r) => Math.round((r.cliRun.ms / r.executor.ms) * 1000) / 1000))}`,
    `  reader CPU: executor ${med((r) => r.executor.cpuMs)} ms vs docker CLI ${med((r) => r.cli.cpuMs)} ms; the json-file tail alone ${mibps(med((r) => r.tailOnly.ms) ?? 0)} MiB/s, ${med((r) => r.tailOnly.cpuMs)} ms CPU`,
    `  dockerd CPU serving them: ${engine(med((r) => r.executor.engineCpuMs))} vs ${engine(med((r) => r.cli.engineCpuMs))}`,
    `  peak RSS ${Math.max(...rounds.map((r) => r.peakRssMb))} MB (before streaming ${Math.max(...rounds.map((r) => r.rssBeforeMb))} MB; target <= 100)`,
  ].join('\n'),
);
