/**
 * Benchmark: a 256 MiB step log through the executor's whole log path — Docker runtime's
 * tailContainer → secret masker (10 secrets) → size cap → batches → a reporter counting bytes —
 * against `docker logs ID > /dev/null` on the same finished container.
 * Prints both throughputs, their ratio executor / CLI (target ≥ 1.0, issue 13) and the peak RSS
 * of this process, which does the reading (target ≤ 120 MB), once its heap is settled as the
 * worker's is when it claims a build.
 *
 * `bench:executor-logs` runs the packages from source (type-stripped, as in development);
 * `bench:executor-logs:compiled` from their dist/ (`pnpm build` first), as the worker runs them.
 *
 * Env: BENCH_LOG_BYTES (default 268435456), BENCH_ROUNDS (CLI rounds, default 2), DOCKER_HOST.
 */
import { closeSync, openSync } from 'node:fs';
import os from 'node:os';
import { spawn } from 'node:child_process';
import { background, type Context } from '@berth/context';
import { Executor, type Reporter, type Target } from '@berth/executor';
import { emptyBuild, emptyContainer, prepareBuild } from '@berth/pipeline';
import { dockerRuntime } from '@berth/runtime-docker';
import { BUSYBOX, median, since, suffix } from './docker-common.ts';

const BYTES = Number(process.env.BENCH_LOG_BYTES ?? 256 * 1024 * 1024);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const MB = 1_000_000;

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

async function viaCli(name: string): Promise<number> {
  const devNull = openSync('/dev/null', 'w');
  try {
    const start = performance.now();
    await new Promise<void>((resolve, reject) => {
      const child = spawn('docker', ['logs', name], { stdio: ['ignore', devNull, devNull] });
      child.once('error', reject);
      child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`docker logs exited ${code}`))));
    });
    return since(start);
  } finally {
    closeSync(devNull);
  }
}

const ctx = background();
const runtime = await dockerRuntime().create(ctx, { workerId: `bench-${suffix()}` });
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
const build = prepareBuild(
  emptyBuild({
    secrets,
    steps: [emptyContainer({ name: 'writer', image: BUSYBOX, pull: 'never', entrypoint: ['/bin/sh', '-c'], commands: [`yes '${line}' | head -c ${BYTES}`] })],
  }),
  { org: 'bench', repo: `logs${suffix()}`, number: 1 },
);
const reporter = new CountingReporter();
const executor = new Executor({ build, runtime, reporter, logs: { limits: { maxBytes: Infinity } } });
// The worker gives back what start-up left in V8's young generation once it is up and idle, before
// it claims a build (apps/worker/src/daemon/memory.ts): the same memory-reducing collection here,
// at the same point, so the figure is the log path's, not this process's module loading's.
const gc = (globalThis as { gc?: (options: object) => void }).gc;
if (gc === undefined) throw new Error('run with node --expose-gc (the package scripts do)');
gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
const step = executor.build.steps[0]!;
try {
  await executor.createBuild(ctx);
  await executor.planBuild(ctx);
  await executor.assembleBuild(ctx);
  // Run the step to its end without streaming (nobody serves the stream requests yet), so the
  // executor's path and `docker logs` read the same finished log.
  await executor.planStep(ctx, step);
  await executor.execStep(ctx, step);

  const rssBefore = process.memoryUsage.rss();
  let peakRss = rssBefore;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage.rss())), 20);
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  await executor.streamStep(ctx, step);
  const executorMs = since(start);
  const cpu = process.cpuUsage(cpuBefore);
  clearInterval(sampler);
  peakRss = Math.max(peakRss, process.memoryUsage.rss());
  // The log also holds the script's trace line (`$ yes …`), so at least BYTES arrive.
  if (!reporter.closed || reporter.bytes < BYTES) throw new Error(`the reporter received ${reporter.bytes} bytes, not ${BYTES}`);

  // The runtime's tail alone (no masking, no reporter), for reference.
  const rawStart = performance.now();
  let rawBytes = 0;
  for await (const chunk of await runtime.tailContainer(ctx, step)) rawBytes += (chunk as Buffer).length;
  const tailOnlyMs = since(rawStart);
  if (rawBytes < BYTES) throw new Error(`tailContainer gave ${rawBytes} bytes`);
  const cliMs: number[] = [];
  for (let round = 0; round < ROUNDS; round++) cliMs.push(await viaCli(step.id));
  const cli = median(cliMs);
  const mibps = (ms: number) => Math.round((BYTES / 1024 / 1024 / (ms / 1000)) * 10) / 10;
  const figures = {
    bytes: BYTES,
    delivered: reporter.bytes,
    appends: reporter.appends,
    executorMs,
    executorCpuMs: Math.round((cpu.user + cpu.system) / 1000),
    tailOnlyMs,
    cliMs,
    executorMiBps: mibps(executorMs),
    cliMiBps: mibps(cli),
    ratio: Math.round((cli / executorMs) * 1000) / 1000,
    rssBeforeMb: Math.round(rssBefore / MB),
    peakRssMb: Math.round(peakRss / MB),
    maxRssMb: Math.round((process.resourceUsage().maxRSS * 1024) / MB),
  };
  const packages = import.meta.resolve('@berth/executor').includes('/dist/') ? 'compiled (dist/)' : 'from source';
  console.log(
    `executor log path, packages ${packages}, load ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}: ${JSON.stringify(figures)}`,
  );
  console.log(
    `executor log path: ${figures.executorMiBps} MiB/s vs docker logs ${figures.cliMiBps} MiB/s: ratio ${figures.ratio} (target >= 1.0); peak RSS ${figures.peakRssMb} MB (target <= 120)`,
  );
} finally {
  await executor.destroyBuild(ctx);
  await runtime.close();
}
