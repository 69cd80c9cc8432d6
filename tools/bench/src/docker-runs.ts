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
 * executor (`runBuild` as `berth exec` runs it: network, volume, outputs (`berth exec` turns them
 * on, as `vela exec` does: each step's outputs read after it, each later step's container set up
 * again when one wrote some), init log, every step, destroy; BENCH_OUTPUTS=0 runs without outputs,
 * as a worker with no outputs image does), against the same by hand: `docker network create`,
 * `docker volume create`, BENCH_STEPS
 * `docker run --rm --network NET -v VOL:/vela IMAGE true`, `docker network rm`, `docker volume rm`;
 * the executor as it runs now (each step's container started ahead and held until its step runs:
 * the runtime's `heldStart`), with its containers only created ahead and started when their step
 * runs (`heldStart` hidden), and as before issue 28 (every container set up in assembleBuild:
 * `setupWhileRunning` hidden too). Target ≤ 0.8.
 *
 * Env: BENCH_N (default 20), BENCH_STEPS (default 10), BENCH_ROUNDS (default 3), BENCH_SETUPS
 * (comma list of plain, build, executor; all by default), BENCH_OUTPUTS (1 by default), DOCKER_HOST.
 */
import { readFileSync } from 'node:fs';
import { finished } from 'node:stream/promises';
import { background } from '@berth/context';
import { runBuild } from '@berth/executor';
import { type Build, emptyBuild, emptyContainer, prepareBuild as preparePipeline } from '@berth/pipeline';
import type { Runtime } from '@berth/runtime';
import { dockerRuntime } from '@berth/runtime-docker';
import { BUSYBOX, median, prepareBuild, run, setupInAssemble, shellStep, since, suffix, withoutHeldStart } from './docker-common.ts';

const N = Number(process.env.BENCH_N ?? 20);
const STEPS = Number(process.env.BENCH_STEPS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SETUPS = new Set((process.env.BENCH_SETUPS ?? 'plain,build,executor').split(','));
const OUTPUTS = process.env.BENCH_OUTPUTS !== '0';

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

/** A build of `count` no-op steps through the executor, as `berth exec` runs it (without outputs when BENCH_OUTPUTS=0). */
async function buildViaExecutor(runtime: Runtime, count: number): Promise<number> {
  const steps = Array.from({ length: count }, (_, i) => emptyContainer({ name: `noop${i}`, image: BUSYBOX, pull: 'not_present', commands: ['true'] }));
  const build = preparePipeline(emptyBuild({ steps }), { org: 'bench', repo: `runs-${suffix()}`, number: ++builds });
  const start = performance.now();
  const result = await runBuild(background(), { build, runtime, logStreamingGraceMs: 5_000, outputs: OUTPUTS });
  if (result.status !== 'success') throw new Error(`bench build ended ${result.status}: ${result.build.error ?? ''}`);
  return since(start);
}

/** Figures of the whole-build set-up: the CLI, the executor now, without the held start, and setting every container up in assembleBuild. */
export interface BuildFigures {
  cliMs: number[];
  executorMs: number[];
  createdMs: number[];
  assembleMs: number[];
  /** executor / CLI, and the same without the held start and as before issue 28 (every container set up in assembleBuild). */
  ratio: number;
  createdRatio: number;
  assembleRatio: number;
}

async function compareBuilds(runtime: Runtime): Promise<BuildFigures> {
  const created = withoutHeldStart(runtime);
  const before = setupInAssemble(created);
  await buildViaCli(2); // warm-up
  await buildViaExecutor(runtime, 2);
  const cliMs: number[] = [];
  const executorMs: number[] = [];
  const createdMs: number[] = [];
  const assembleMs: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // Each side first in turn.
    const sides = [
      async () => cliMs.push(await buildViaCli(STEPS)),
      async () => executorMs.push(await buildViaExecutor(runtime, STEPS)),
      async () => createdMs.push(await buildViaExecutor(created, STEPS)),
      async () => assembleMs.push(await buildViaExecutor(before, STEPS)),
    ];
    for (let i = 0; i < sides.length; i++) await sides[(round + i) % sides.length]?.();
  }
  const ratio = (values: number[]): number => Math.round((median(values) / median(cliMs)) * 1000) / 1000;
  return { cliMs, executorMs, createdMs, assembleMs, ratio: ratio(executorMs), createdRatio: ratio(createdMs), assembleRatio: ratio(assembleMs) };
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
export async function benchDockerRuns(): Promise<{ n: number; plain?: RunsFigures; build?: RunsFigures; steps: number; executor?: BuildFigures }> {
  const ctx = background();
  const workerId = `bench-${suffix()}`;
  const runtime = await dockerRuntime().create(ctx, { workerId });
  const plainBuild = emptyBuild({ id: `bench_plain_${suffix()}` });
  const build = await prepareBuild(ctx, runtime, `bench_runs_${suffix()}`);
  try {
    const plain = SETUPS.has('plain') ? await compare(runtime, plainBuild, []) : undefined;
    const withBuild = SETUPS.has('build') ? await compare(runtime, build, ['--network', build.id, '-v', `${build.id}:/vela`]) : undefined;
    const executor = SETUPS.has('executor') ? await compareBuilds(runtime) : undefined;
    return { n: N, ...(plain ? { plain } : {}), ...(withBuild ? { build: withBuild } : {}), steps: STEPS, ...(executor ? { executor } : {}) };
  } finally {
    await runtime.reap(ctx, workerId);
    await runtime.close();
  }
}

if (import.meta.main) {
  const result = await benchDockerRuns();
  const line = (label: string, values: number[]): string =>
    `    ${label}: ${values.map((ms) => `${ms} ms`).join(', ')}  median ${median(values)} ms (${(median(values) / result.n).toFixed(1)} ms/container)`;
  console.log(`docker runs: ${result.n} no-op containers, one after another, ${ROUNDS} rounds (load average ${loadAverage()})`);
  for (const [name, figures, cli] of [
    ['plain (default bridge, no volume)', result.plain, 'docker run --rm IMAGE true'],
    ["build (the build's network and workspace volume)", result.build, 'docker run --rm --network NET -v VOL:/vela IMAGE true'],
  ] as const) {
    if (figures === undefined) continue;
    console.log(`  ${name}`);
    console.log(line(cli, figures.cliMs));
    console.log(line('@berth/runtime-docker', figures.runtimeMs));
    console.log(`    ratio runtime / CLI: ${figures.ratio} (target ≤ 1.0) ${figures.ratio <= 1 ? 'OK' : 'MISSED'}`);
  }
  const e = result.executor;
  if (e !== undefined) {
    const per = (values: number[]): string => `${values.map((ms) => `${ms} ms`).join(', ')}  median ${median(values)} ms`;
    console.log(
      `  a build of ${result.steps} no-op steps (as \`berth exec\` runs it, ${OUTPUTS ? 'with outputs' : 'without outputs'}), ${e.cliMs.length} rounds`,
    );
    console.log(`    docker network/volume create, ${result.steps} × docker run --rm --network NET -v VOL:/vela IMAGE true, rm: ${per(e.cliMs)}`);
    console.log(`    executor, each step's container started ahead, held until its step runs: ${per(e.executorMs)}`);
    console.log(`    executor, containers created ahead, started when their step runs:       ${per(e.createdMs)}`);
    console.log(`    executor, every container set up in assembleBuild (before issue 28):   ${per(e.assembleMs)}`);
    console.log(
      `    ratio executor / CLI: ${e.ratio} (target ≤ 0.8) ${e.ratio <= 0.8 ? 'OK' : 'MISSED'}; created ahead: ${e.createdRatio}; before issue 28: ${e.assembleRatio}`,
    );
  }
  console.log(`  load average at the end: ${loadAverage()}`);
}

function loadAverage(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}
