/**
 * Benchmark: a container writes 256 MiB to stdout (1 KiB lines); its log is read after it exited,
 * once through the Docker runtime's `tailContainer` and once with `docker logs ID > /dev/null`.
 * Prints throughputs, their ratio runtime / CLI (target ≥ 0.8) and the peak RSS of this process,
 * which does the reading (target ≤ 200 MB).
 *
 * Env: BENCH_LOG_BYTES (default 268435456), BENCH_ROUNDS (default 2), DOCKER_HOST.
 */
import { spawn } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { background } from '@berth/context';
import type { Container } from '@berth/pipeline';
import type { Runtime } from '@berth/runtime';
import { dockerRuntime } from '@berth/runtime-docker';
import { median, prepareBuild, shellStep, since, suffix } from './docker-common.ts';

const BYTES = Number(process.env.BENCH_LOG_BYTES ?? 256 * 1024 * 1024);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const MB = 1_000_000;

async function viaRuntime(runtime: Runtime, step: Container): Promise<{ ms: number; bytes: number; peakRss: number }> {
  let peakRss = process.memoryUsage.rss();
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage.rss())), 20);
  try {
    const start = performance.now();
    const logs = await runtime.tailContainer(background(), step);
    let bytes = 0;
    for await (const chunk of logs) bytes += (chunk as Buffer).length;
    return { ms: since(start), bytes, peakRss: Math.max(peakRss, process.memoryUsage.rss()) };
  } finally {
    clearInterval(sampler);
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

/** Runs the benchmark and returns its figures. */
export async function benchDockerLogs(): Promise<{
  bytes: number;
  runtimeMs: number[];
  cliMs: number[];
  ratio: number;
  baselineRssMb: number;
  peakRssMb: number;
  maxRssMb: number;
}> {
  const ctx = background();
  // What the process holds before reading: Node, its TypeScript stripping, dockerode, zod…
  const baselineRss = process.memoryUsage.rss();
  const workerId = `bench-${suffix()}`;
  const runtime = await dockerRuntime().create(ctx, { workerId });
  const build = await prepareBuild(ctx, runtime, `bench_logs_${suffix()}`);
  try {
    const line = 'x'.repeat(1023);
    const step = shellStep(build, 'writer', `yes '${line}' | head -c ${BYTES}`);
    await runtime.setupContainer(ctx, step, build);
    await runtime.runContainer(ctx, step, build);
    const exit = await runtime.waitContainer(ctx, step);
    if (exit.exitCode !== 0) throw new Error(`the writer exited ${exit.exitCode}`);

    const runtimeMs: number[] = [];
    const cliMs: number[] = [];
    let peakRss = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const ours = await viaRuntime(runtime, step);
      if (ours.bytes !== BYTES) throw new Error(`tailContainer delivered ${ours.bytes} bytes, not ${BYTES}`);
      runtimeMs.push(ours.ms);
      peakRss = Math.max(peakRss, ours.peakRss);
      cliMs.push(await viaCli(step.id));
    }
    const ratio = Math.round((median(cliMs) / median(runtimeMs)) * 1000) / 1000;
    return {
      bytes: BYTES,
      runtimeMs,
      cliMs,
      ratio,
      baselineRssMb: Math.round(baselineRss / MB),
      peakRssMb: Math.round(peakRss / MB),
      maxRssMb: Math.round((process.resourceUsage().maxRSS * 1024) / MB),
    };
  } finally {
    await runtime.removeBuild(ctx, build);
    await runtime.close();
  }
}

if (import.meta.main) {
  const result = await benchDockerLogs();
  const mibPerSecond = (ms: number): string => (result.bytes / (1024 * 1024) / (ms / 1000)).toFixed(1);
  console.log(`docker logs: ${result.bytes} bytes (1 KiB lines) read after the container exited, ${result.runtimeMs.length} rounds`);
  console.log(`  docker logs > /dev/null: ${result.cliMs.map((ms) => `${ms} ms`).join(', ')}  median ${mibPerSecond(median(result.cliMs))} MiB/s`);
  console.log(`  tailContainer:           ${result.runtimeMs.map((ms) => `${ms} ms`).join(', ')}  median ${mibPerSecond(median(result.runtimeMs))} MiB/s`);
  console.log(`  throughput ratio runtime / CLI: ${result.ratio} (target ≥ 0.8) ${result.ratio >= 0.8 ? 'OK' : 'MISSED'}`);
  console.log(
    `  peak RSS while reading: ${result.peakRssMb} MB sampled, ${result.maxRssMb} MB process maximum (target ≤ 200 MB) ${result.maxRssMb <= 200 ? 'OK' : 'MISSED'}`,
  );
  console.log(`  (the process held ${result.baselineRssMb} MB before reading: reading added ${result.peakRssMb - result.baselineRssMb} MB)`);
}
