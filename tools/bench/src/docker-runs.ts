/**
 * Benchmark: N no-op containers run one after another through the Docker runtime (setup, run,
 * tail to the end, wait, remove: a step's whole life) against N `docker run --rm IMAGE true`.
 * Prints times and the ratio runtime / CLI (target ≤ 1.0), in two set-ups:
 *
 * - plain: the runtime's build has no network or volume, so its containers use the default bridge,
 *   exactly as `docker run --rm IMAGE true` does;
 * - build: the runtime's build has its bridge network and workspace volume (what a real build
 *   gets), against `docker run --rm --network NET -v VOL:/vela IMAGE true`. A user-defined network
 *   costs the engine ~0.3 s per container on a busy 2-core machine, whoever asks for it.
 *
 * The build's network and volume are created once, outside the timing. Median of BENCH_ROUNDS
 * rounds, alternating which side goes first.
 *
 * Env: BENCH_N (default 20), BENCH_ROUNDS (default 3), DOCKER_HOST.
 */
import { finished } from 'node:stream/promises';
import { background } from '@berth/context';
import { type Build, emptyBuild } from '@berth/pipeline';
import type { Runtime } from '@berth/runtime';
import { dockerRuntime } from '@berth/runtime-docker';
import { BUSYBOX, median, prepareBuild, run, shellStep, since, suffix } from './docker-common.ts';

const N = Number(process.env.BENCH_N ?? 20);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

async function viaCli(count: number, extra: string[]): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < count; i++) await run('docker', ['run', '--rm', ...extra, BUSYBOX, 'true']);
  return since(start);
}

async function viaRuntime(runtime: Runtime, build: Build, count: number): Promise<number> {
  const ctx = background();
  const start = performance.now();
  for (let i = 0; i < count; i++) {
    const step = shellStep(build, `noop${suffix()}`, 'true');
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
}

/** Figures of one set-up. */
export interface RunsFigures {
  cliMs: number[];
  runtimeMs: number[];
  ratio: number;
}

async function compare(runtime: Runtime, build: Build, cliArgs: string[]): Promise<RunsFigures> {
  await viaCli(2, cliArgs); // warm-up
  await viaRuntime(runtime, build, 2);
  const cliMs: number[] = [];
  const runtimeMs: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    if (round % 2 === 0) {
      cliMs.push(await viaCli(N, cliArgs));
      runtimeMs.push(await viaRuntime(runtime, build, N));
    } else {
      runtimeMs.push(await viaRuntime(runtime, build, N));
      cliMs.push(await viaCli(N, cliArgs));
    }
  }
  return { cliMs, runtimeMs, ratio: Math.round((median(runtimeMs) / median(cliMs)) * 1000) / 1000 };
}

/** Runs the benchmark and returns its figures. */
export async function benchDockerRuns(): Promise<{ n: number; plain: RunsFigures; build: RunsFigures }> {
  const ctx = background();
  const workerId = `bench-${suffix()}`;
  const runtime = await dockerRuntime().create(ctx, { workerId });
  const plainBuild = emptyBuild({ id: `bench_plain_${suffix()}` });
  const build = await prepareBuild(ctx, runtime, `bench_runs_${suffix()}`);
  try {
    const plain = await compare(runtime, plainBuild, []);
    const withBuild = await compare(runtime, build, ['--network', build.id, '-v', `${build.id}:/vela`]);
    return { n: N, plain, build: withBuild };
  } finally {
    await runtime.reap(ctx, workerId);
    await runtime.close();
  }
}

if (import.meta.main) {
  const result = await benchDockerRuns();
  const line = (label: string, values: number[]): string =>
    `    ${label}: ${values.map((ms) => `${ms} ms`).join(', ')}  median ${median(values)} ms (${(median(values) / result.n).toFixed(1)} ms/container)`;
  console.log(`docker runs: ${result.n} no-op containers, one after another, ${result.plain.cliMs.length} rounds`);
  for (const [name, figures, cli] of [
    ['plain (default bridge, no volume)', result.plain, 'docker run --rm IMAGE true'],
    ["build (the build's network and workspace volume)", result.build, 'docker run --rm --network NET -v VOL:/vela IMAGE true'],
  ] as const) {
    console.log(`  ${name}`);
    console.log(line(cli, figures.cliMs));
    console.log(line('@berth/runtime-docker', figures.runtimeMs));
    console.log(`    ratio runtime / CLI: ${figures.ratio} (target ≤ 1.0) ${figures.ratio <= 1 ? 'OK' : 'MISSED'}`);
  }
}
