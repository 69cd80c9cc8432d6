/**
 * Benchmark: N no-op containers run one after another through the Docker runtime (setup, run,
 * tail, wait, remove: a step's whole life) against N `docker run --rm IMAGE true` invocations.
 * Prints both times and the ratio runtime / CLI (target ≤ 1.0). Build setup (network, volume) is
 * done once, outside the timing, as `docker run` uses the default network.
 *
 * Env: BENCH_N (default 20), BENCH_ROUNDS (default 3), DOCKER_HOST.
 */
import { finished } from 'node:stream/promises';
import { background } from '@berth/context';
import type { Runtime } from '@berth/runtime';
import { dockerRuntime } from '@berth/runtime-docker';
import { BUSYBOX, median, prepareBuild, run, shellStep, since, suffix } from './docker-common.ts';

const N = Number(process.env.BENCH_N ?? 20);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

async function viaCli(count: number): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < count; i++) await run('docker', ['run', '--rm', BUSYBOX, 'true']);
  return since(start);
}

async function viaRuntime(runtime: Runtime, buildId: string, count: number): Promise<number> {
  const ctx = background();
  const build = await prepareBuild(ctx, runtime, buildId);
  try {
    const start = performance.now();
    for (let i = 0; i < count; i++) {
      const step = shellStep(build, `noop${i}`, 'true');
      await runtime.setupContainer(ctx, step, build);
      await runtime.runContainer(ctx, step, build);
      const logs = await runtime.tailContainer(ctx, step);
      logs.resume();
      const exit = await runtime.waitContainer(ctx, step);
      if (exit.exitCode !== 0) throw new Error(`no-op container exited ${exit.exitCode}`);
      // As `docker run` returns once the output was printed: read the log to its end.
      await finished(logs);
      await runtime.removeContainer(ctx, step);
    }
    return since(start);
  } finally {
    await runtime.removeBuild(ctx, build);
  }
}

/** Runs the benchmark and returns its figures. */
export async function benchDockerRuns(): Promise<{ n: number; cliMs: number[]; runtimeMs: number[]; ratio: number }> {
  const ctx = background();
  const workerId = `bench-${suffix()}`;
  const runtime = await dockerRuntime().create(ctx, { workerId });
  try {
    // Warm up both paths (image cache, engine, JIT).
    await viaCli(2);
    await viaRuntime(runtime, `bench_warm_${suffix()}`, 2);
    const cliMs: number[] = [];
    const runtimeMs: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Alternate the order so drift on a busy machine hits both sides alike.
      if (round % 2 === 0) {
        cliMs.push(await viaCli(N));
        runtimeMs.push(await viaRuntime(runtime, `bench_runs_${suffix()}`, N));
      } else {
        runtimeMs.push(await viaRuntime(runtime, `bench_runs_${suffix()}`, N));
        cliMs.push(await viaCli(N));
      }
    }
    return { n: N, cliMs, runtimeMs, ratio: Math.round((median(runtimeMs) / median(cliMs)) * 1000) / 1000 };
  } finally {
    await runtime.reap(ctx, workerId);
    await runtime.close();
  }
}

if (import.meta.main) {
  const result = await benchDockerRuns();
  console.log(`docker runs: ${result.n} no-op containers, one after another, ${result.cliMs.length} rounds`);
  console.log(`  docker run --rm (CLI): ${result.cliMs.map((ms) => `${ms} ms`).join(', ')}  median ${median(result.cliMs)} ms (${(median(result.cliMs) / result.n).toFixed(1)} ms/container)`);
  console.log(`  @berth/runtime-docker: ${result.runtimeMs.map((ms) => `${ms} ms`).join(', ')}  median ${median(result.runtimeMs)} ms (${(median(result.runtimeMs) / result.n).toFixed(1)} ms/container)`);
  console.log(`  ratio runtime / CLI: ${result.ratio} (target ≤ 1.0) ${result.ratio <= 1 ? 'OK' : 'MISSED'}`);
}
