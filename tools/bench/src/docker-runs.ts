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
 * A third set-up (issue 28 item 2) is a whole build: BENCH_STEPS (10) no-op steps run by the
 * executor (`runBuild`, what `berth exec` runs: network, volume, init log, every step, destroy),
 * against the same by hand: `docker network create`, `docker volume create`, BENCH_STEPS
 * `docker run --rm --network NET -v VOL:/vela IMAGE true`, `docker network rm`, `docker volume rm`;
 * the executor both as it runs now (the steps' containers set up in the background, one at a time,
 * while the build runs) and
 * as before (every container set up in assembleBuild: `setupWhileRunning` hidden). Target ≤ 0.8.
 *
 * Env: BENCH_N (default 20), BENCH_STEPS (default 10), BENCH_ROUNDS (default 3), DOCKER_HOST.
 */
import { finished } from 'node:stream/promises';
import { background } from '@berth/context';
import { runBuild } from '@berth/executor';
import { type Build, emptyBuild, emptyContainer, prepareBuild as preparePipeline } from '@berth/pipeline';
import type { Runtime } from '@berth/runtime';
import { dockerRuntime } from '@berth/runtime-docker';
import { BUSYBOX, median, prepareBuild, run, setupInAssemble, shellStep, since, suffix } from './docker-common.ts';

const N = Number(process.env.BENCH_N ?? 20);
const STEPS = Number(process.env.BENCH_STEPS ?? 10);
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

/** A build of `count` no-op steps by hand: its network and volume, `docker run` for each step, then removing both. */
async function buildViaCli(count: number): Promise<number> {
  const name = `bench_cli_${suffix()}`;
  const start = performance.now();
  await run('docker', ['network', 'create', name]);
  await run('docker', ['volume', 'create', name]);
  for (let i = 0; i < count; i++) await run('docker', ['run', '--rm', '--network', name, '-v', `${name}:/vela`, BUSYBOX, 'true']);
  await run('docker', ['network', 'rm', name]);
  await run('docker', ['volume', 'rm', name]);
  return since(start);
}

let builds = 0;

/** A build of `count` no-op steps through the executor, as `berth exec` runs it. */
async function buildViaExecutor(runtime: Runtime, count: number): Promise<number> {
  const steps = Array.from({ length: count }, (_, i) => emptyContainer({ name: `noop${i}`, image: BUSYBOX, pull: 'not_present', commands: ['true'] }));
  const build = preparePipeline(emptyBuild({ steps }), { org: 'bench', repo: `runs-${suffix()}`, number: ++builds });
  const start = performance.now();
  const result = await runBuild(background(), { build, runtime, logStreamingGraceMs: 5_000 });
  if (result.status !== 'success') throw new Error(`bench build ended ${result.status}: ${result.build.error ?? ''}`);
  return since(start);
}

/** Figures of the whole-build set-up: the CLI, the executor now, and the executor setting every container up in assembleBuild. */
export interface BuildFigures {
  cliMs: number[];
  executorMs: number[];
  assembleMs: number[];
  /** executor / CLI, and the same as before (every container set up in assembleBuild). */
  ratio: number;
  assembleRatio: number;
}

async function compareBuilds(runtime: Runtime): Promise<BuildFigures> {
  const before = setupInAssemble(runtime);
  await buildViaCli(2); // warm-up
  await buildViaExecutor(runtime, 2);
  const cliMs: number[] = [];
  const executorMs: number[] = [];
  const assembleMs: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // Each side first in turn.
    const sides = [
      async () => cliMs.push(await buildViaCli(STEPS)),
      async () => executorMs.push(await buildViaExecutor(runtime, STEPS)),
      async () => assembleMs.push(await buildViaExecutor(before, STEPS)),
    ];
    for (let i = 0; i < sides.length; i++) await sides[(round + i) % sides.length]?.();
  }
  const ratio = (values: number[]): number => Math.round((median(values) / median(cliMs)) * 1000) / 1000;
  return { cliMs, executorMs, assembleMs, ratio: ratio(executorMs), assembleRatio: ratio(assembleMs) };
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
export async function benchDockerRuns(): Promise<{ n: number; plain: RunsFigures; build: RunsFigures; steps: number; executor: BuildFigures }> {
  const ctx = background();
  const workerId = `bench-${suffix()}`;
  const runtime = await dockerRuntime().create(ctx, { workerId });
  const plainBuild = emptyBuild({ id: `bench_plain_${suffix()}` });
  const build = await prepareBuild(ctx, runtime, `bench_runs_${suffix()}`);
  try {
    const plain = await compare(runtime, plainBuild, []);
    const withBuild = await compare(runtime, build, ['--network', build.id, '-v', `${build.id}:/vela`]);
    const executor = await compareBuilds(runtime);
    return { n: N, plain, build: withBuild, steps: STEPS, executor };
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
  const e = result.executor;
  const per = (values: number[]): string => `${values.map((ms) => `${ms} ms`).join(', ')}  median ${median(values)} ms`;
  console.log(`  a build of ${result.steps} no-op steps (what \`berth exec\` runs), ${e.cliMs.length} rounds`);
  console.log(`    docker network/volume create, ${result.steps} × docker run --rm --network NET -v VOL:/vela IMAGE true, rm: ${per(e.cliMs)}`);
  console.log(`    executor, containers set up in the background while the build runs: ${per(e.executorMs)}`);
  console.log(`    executor, every container set up in assembleBuild (as before):  ${per(e.assembleMs)}`);
  console.log(`    ratio executor / CLI: ${e.ratio} (target ≤ 0.8) ${e.ratio <= 0.8 ? 'OK' : 'MISSED'}; as before: ${e.assembleRatio}`);
}
