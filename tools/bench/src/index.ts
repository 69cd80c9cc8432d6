/**
 * Runs every benchmark, each in its own Node process (so one's memory does not show in another's
 * peak RSS), one after another, and prints their figures. The root's `pnpm bench` builds the
 * workspace first: the worker is measured as shipped (compiled), and the log path compiled too.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const SRC = import.meta.dirname;
const BENCH = path.dirname(SRC);

/** Each benchmark: its file, and whether it runs compiled (this package's `dist/`, no TypeScript stripped in the measured process). */
const benchmarks: Array<{ file: string; compiled?: boolean; env?: Record<string, string> }> = [
  { file: 'docker-runs.ts' },
  { file: 'docker-logs.ts' },
  // Issue 28 item 1: the executor's log path against `docker logs -f`, as `bench:executor-logs:compiled`.
  { file: 'executor-logs.ts', compiled: true },
  // The per-step goal is judged on steps that outlast a held start (step-overhead.ts, GOAL_DOCKER_MS).
  { file: 'step-overhead.ts', env: { BENCH_STEP_SECONDS: process.env.BENCH_STEP_SECONDS ?? '1' } },
  { file: 'worker-memory.ts' },
  { file: 'build-overhead.ts' },
];

let failed = false;
const fail = (file: string, what: string) => {
  failed = true;
  console.error(`benchmark ${file} failed (${what})`);
};
if (benchmarks.some((b) => b.compiled === true)) {
  const tsc = spawnSync(process.execPath, [path.join(BENCH, 'node_modules/typescript/bin/tsc'), '-p', path.join(BENCH, 'tsconfig.build.json')], {
    stdio: 'inherit',
  });
  if (tsc.status !== 0) fail('compile', `tsc exit ${tsc.status ?? tsc.signal}`);
}
for (const { file, compiled, env } of benchmarks) {
  const args =
    compiled === true ? ['--expose-gc', path.join(BENCH, 'dist', file.replace(/\.ts$/, '.js'))] : ['--conditions=@berth/source', path.join(SRC, file)];
  const result = spawnSync(process.execPath, args, { stdio: 'inherit', env: { ...process.env, ...env } });
  if (result.status !== 0) fail(file, `exit ${result.status ?? result.signal}`);
}
process.exitCode = failed ? 1 : 0;
